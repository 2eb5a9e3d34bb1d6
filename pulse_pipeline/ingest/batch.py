"""Rows read from one file of a drop, ready for the warehouse, with the counts that must reconcile.

Rows are given by column name, as the contract in ``tables.py`` names the columns: one row at a time as a mapping
(``Batch.add``), or a session's events column by column (``Batch.extend``). A batch keeps each table column by
column, so turning it into Arrow (``Batch.arrow``) hands every column to Arrow as it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa

from .. import tables
from ..contract import check_schema
from ..tables import Table

RECORD_TYPES = ("session", "rating", "assignment", "score", "unknown")  # "score": a trace tool's (scores.py)


def _empty_columns() -> dict[str, dict[str, list[Any]]]:
    return {t.qualified: {name: [] for name in t.column_names} for t in tables.RAW_TABLES}


@dataclass
class Batch:
    drop_id: str
    columns: dict[str, dict[str, list[Any]]] = field(default_factory=_empty_columns)  # table -> column -> values
    read: Counter = field(default_factory=Counter)  # items read, by record type (and "event")
    bytes_read: int = 0  # bytes of the drop's files whose reading finished with this batch (a progress bar)
    held_bytes: int = 0  # bytes of the records read into this batch: a batch is handed on by bytes too

    def add(self, table: Table, row: Mapping[str, Any]) -> None:
        """Append one row, given as ``{column: value}`` for every column of the table's contract."""
        columns = self._columns_of(table, row)
        for name, value in row.items():
            columns[name].append(value)

    def extend(self, table: Table, values: Mapping[str, Sequence[Any]]) -> None:
        """Append many rows given column by column, ``{column: values}``, every column as long as the others."""
        if len({len(v) for v in values.values()}) > 1:
            lengths = ", ".join(f"{name} {len(v)}" for name, v in values.items())
            raise ValueError(f"{table.qualified}: columns of different lengths ({lengths})")
        columns = self._columns_of(table, values)
        for name, column in values.items():
            columns[name].extend(column)

    def _columns_of(self, table: Table, given: Mapping[str, Any]) -> dict[str, list[Any]]:
        """The table's columns, once ``given`` is checked to name exactly the contract's columns."""
        columns = self.columns[table.qualified]
        if given.keys() != columns.keys():
            check_schema(table, dict.fromkeys(given, pl.Null))  # raises ContractError naming missing and extra ones
        return columns

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
            {
                "drop_id": self.drop_id,
                "stage": "ingest",
                "source_file": source_file,
                "record_index": record_index,
                "event_index": event_index,
                "record_type": record_type,
                "reason": reason,
                "raw_text": raw_text,
            },
        )

    def absorb(self, other: Batch) -> None:
        """Move ``other``'s rows and counts into this batch, so the rows of many small files are inserted as one.

        Why: DuckDB keeps a partly filled block for every INSERT of an open transaction, so inserting each small
        file on its own made memory grow with the number of files (issue 11). A table this batch holds no rows of
        takes ``other``'s lists as they are (no copy: a large file's batches are each absorbed into an empty one),
        so ``other`` is not to be used afterwards."""
        for name, columns in other.columns.items():
            mine = self.columns[name]
            if not mine["drop_id"]:  # every raw table has a drop_id
                self.columns[name] = columns
                continue
            for column, values in columns.items():
                mine[column].extend(values)
        self.read.update(other.read)
        self.bytes_read += other.bytes_read
        self.held_bytes += other.held_bytes

    def count(self, table: Table) -> int:
        return len(self.columns[table.qualified]["drop_id"])  # every raw table has a drop_id

    def freeze(self) -> ArrowBatch:
        """The batch as Arrow tables with its counts: compact, and cheap to send between processes."""
        return ArrowBatch(
            tables={t.qualified: self.arrow(t) for t in tables.RAW_TABLES if self.count(t)},
            read=Counter(self.read),
            bytes_read=self.bytes_read,
            quarantined=Counter(self.columns[tables.QUARANTINE.qualified]["record_type"]),
        )

    def arrow(self, table: Table) -> pa.Table:
        """Columns as VARCHAR/INTEGER/... arrow arrays; timestamps stay ISO text and are cast by DuckDB."""
        columns = self.columns[table.qualified]
        arrays = [_array(columns[name], _ARROW[kind]) for name, kind in table.columns]
        return pa.Table.from_arrays(arrays, names=table.column_names)


def _array(values: list[Any], kind: pa.DataType) -> pa.Array:
    """``values`` as an Arrow array; text holding lone surrogates, which UTF-8 cannot carry, made ``printable``."""
    try:
        return pa.array(values, type=kind)
    except UnicodeEncodeError:
        return pa.array([printable(v) if isinstance(v, str) else v for v in values], type=kind)


def printable(text: str) -> str:
    """``text`` with its lone surrogates written as escapes: a file name's bytes that are not UTF-8, which Python
    gives as surrogates (``os.fsdecode``), become ``\\xff``; any other lone surrogate ``\\ud800``.

    Why: a drop with a file named ``name\\xff.json`` crashed the ingest stage (Arrow refuses such text), and the
    name reaches ``source_file``, the session id it gives, a link's target in a quarantine reason."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no byte escape made (from text, not from a file name)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


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
    bytes_read: int
    quarantined: Counter  # quarantine rows by record type

    def count(self, table: Table) -> int:
        data = self.tables.get(table.qualified)
        return 0 if data is None else data.num_rows

    def rows(self) -> int:
        """Rows of every table."""
        return sum(data.num_rows for data in self.tables.values())

    def nbytes(self) -> int:
        """Arrow bytes of every table: what DuckDB is given to insert (``load.memory_for_batch``)."""
        return sum(data.nbytes for data in self.tables.values())
