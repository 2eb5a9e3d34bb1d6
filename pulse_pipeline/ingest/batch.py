"""Rows read from one file of a drop, ready for the warehouse, with the counts that must reconcile."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from .. import tables
from ..tables import Table

RECORD_TYPES = ("session", "rating", "assignment", "unknown")


@dataclass
class Batch:
    drop_id: str
    rows: dict[str, list[tuple]] = field(default_factory=lambda: {t.qualified: [] for t in tables.RAW_TABLES})
    read: Counter = field(default_factory=Counter)  # items read, by record type (and "event")

    def add(self, table: Table, row: tuple) -> None:
        self.rows[table.qualified].append(row)

    def quarantine(
        self,
        source_file: str,
        record_index: int | None,
        record_type: str,
        reason: str,
        raw_text: str,
        event_index: int | None = None,
    ) -> None:
        self.add(
            tables.QUARANTINE,
            (self.drop_id, "ingest", source_file, record_index, event_index, record_type, reason, raw_text),
        )

    def count(self, table: Table) -> int:
        return len(self.rows[table.qualified])

    def freeze(self) -> ArrowBatch:
        """The batch as Arrow tables with its counts: compact, and cheap to send between processes."""
        return ArrowBatch(
            tables={t.qualified: self.arrow(t) for t in tables.RAW_TABLES if self.count(t)},
            read=Counter(self.read),
            quarantined=Counter(r[5] for r in self.rows[tables.QUARANTINE.qualified]),
        )

    def arrow(self, table: Table) -> pa.Table:
        """Columns as VARCHAR/INTEGER/... arrow arrays; timestamps stay ISO text and are cast by DuckDB."""
        rows = self.rows[table.qualified]
        columns = list(zip(*rows, strict=True)) if rows else [[] for _ in table.columns]
        arrays = [pa.array(col, type=_ARROW[t]) for col, (_, t) in zip(columns, table.columns, strict=True)]
        return pa.Table.from_arrays(arrays, names=table.column_names)


_ARROW = {
    "VARCHAR": pa.string(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "TIMESTAMP": pa.string(),
    "BOOLEAN": pa.bool_(),
}


@dataclass(frozen=True)
class ArrowBatch:
    tables: dict[str, pa.Table]
    read: Counter
    quarantined: Counter  # quarantine rows by record type

    def count(self, table: Table) -> int:
        data = self.tables.get(table.qualified)
        return 0 if data is None else data.num_rows
