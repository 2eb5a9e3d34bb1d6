"""Writing and publishing the DuckDB warehouse (plain DuckDB; the Dagster resource wraps this).

Two files:

- the *working* database, written by one pipeline step at a time;
- the *published* database (``PULSE_HOME/pulse.duckdb``), a copy swapped in atomically after each write.
  DuckDB locks a file for its writer against every other process, readers included (field notes §3): an
  analyst's open shell on the working file would stall the pipeline. On Linux a rename leaves an open reader on
  the old copy, so publishing never waits for anyone.

Every write replaces exactly the rows it owns (one drop's rows, or a whole staging table) inside one
transaction, so re-running anything leaves the tables as they were.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa

from . import tables
from .tables import Table

DERIVED_SCHEMAS = ("modeling", "estimates")  # rebuilt whole by every materialization


def nan_to_null(rows: Iterable[tuple]) -> list[tuple]:
    """Rows with every float NaN replaced by None: an undefined statistic is stored as NULL (its row's note says
    why), because DuckDB sorts NaN above every number, so ``ORDER BY x DESC`` and ``x > 0.3`` would pick it."""
    return [tuple(None if isinstance(v, float) and math.isnan(v) else v for v in r) for r in rows]


def ensure_tables(con: duckdb.DuckDBPyConnection, which: Iterable[Table] = tables.ALL_TABLES) -> None:
    """Create every table of the contract that is missing.

    A derived table (``DERIVED_SCHEMAS``) whose columns differ from the contract, i.e. one written by an older
    PULSE, is dropped and created anew: its next materialization recomputes it whole. Raw, staging and feature
    tables are never dropped on their own (the ingested records and paid-for LLM answers live there), so a
    mismatch there is an error that says what differs.
    """
    for t in which:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {t.schema}")
        have = [
            r[0]
            for r in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ?"
                " ORDER BY ordinal_position",
                [t.schema, t.name],
            ).fetchall()
        ]
        if have and have != t.column_names:
            if t.schema not in DERIVED_SCHEMAS:
                raise RuntimeError(
                    f"{t.qualified} has columns {have}, but this PULSE expects {t.column_names};"
                    " move the old warehouse aside and re-ingest the drops"
                )
            con.execute(f"DROP TABLE {t.qualified}")
        cols = ", ".join(f'"{c}" {typ}' for c, typ in t.columns)
        con.execute(f"CREATE TABLE IF NOT EXISTS {t.qualified} ({cols})")


def _select_cast(t: Table, source: str) -> str:
    """SELECT list that casts arrow text timestamps (ISO 8601, with or without zone) to TIMESTAMP."""
    parts = []
    for c, typ in t.columns:
        if typ == "TIMESTAMP":
            parts.append(f'TRY_CAST(TRY_CAST("{c}" AS TIMESTAMPTZ) AT TIME ZONE \'UTC\' AS TIMESTAMP) AS "{c}"')
        else:
            parts.append(f'"{c}"')
    return f"SELECT {', '.join(parts)} FROM {source}"


def insert_arrow(con: duckdb.DuckDBPyConnection, t: Table, data: pa.Table) -> None:
    if data.num_rows == 0:
        return
    con.register("_pulse_batch", data)
    try:
        con.execute(f"INSERT INTO {t.qualified} {_select_cast(t, '_pulse_batch')}")
    finally:
        con.unregister("_pulse_batch")


class Warehouse:
    """The tables, over one open connection to the working database."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        ensure_tables(con)

    def delete_drop(self, drop_id: str) -> None:
        """Remove every raw row of one drop (ingest-stage quarantine included)."""
        for t in tables.RAW_TABLES:
            extra = " AND stage = 'ingest'" if t is tables.QUARANTINE else ""
            self.con.execute(f"DELETE FROM {t.qualified} WHERE drop_id = ?{extra}", [drop_id])

    def insert(self, t: Table, data: pa.Table | pl.DataFrame) -> None:
        insert_arrow(self.con, t, data.to_arrow() if isinstance(data, pl.DataFrame) else data)

    def insert_rows(self, t: Table, rows: list[tuple]) -> None:
        """Append Python rows whose values are in the table's column order."""
        wrong = next((r for r in rows if len(r) != len(t.columns)), None)
        if wrong is not None:
            raise ValueError(f"{t.qualified} has {len(t.columns)} columns, a row has {len(wrong)}: {wrong!r:.200}")
        if rows:
            self.insert(t, pl.DataFrame(rows, schema=t.column_names, orient="row", infer_schema_length=None))

    def replace_rows(self, t: Table, rows: list[tuple] | pl.DataFrame) -> None:
        """Rewrite a whole derived table with ``rows``: Python rows in column order, or a frame with its columns."""
        self.con.execute(f"DELETE FROM {t.qualified}")
        if isinstance(rows, pl.DataFrame):
            self.insert(t, rows.select(t.column_names))
        else:
            self.insert_rows(t, rows)

    def replace_table(self, t: Table, select_sql: str, params: list | None = None) -> int:
        """Rebuild a whole derived table from a query whose columns are the table's, in order."""
        self.con.execute(f"DELETE FROM {t.qualified}")
        self.con.execute(f"INSERT INTO {t.qualified} ({', '.join(t.column_names)}) {select_sql}", params or [])
        return self.count(t)

    def count(self, t: Table, where: str = "", params: list | None = None) -> int:
        sql = f"SELECT count(*) FROM {t.qualified}" + (f" WHERE {where}" if where else "")
        return self.con.execute(sql, params or []).fetchone()[0]

    def frame(self, sql: str, params: list | None = None) -> pl.DataFrame:
        return self.con.execute(sql, params or []).pl()


def duckdb_config() -> dict[str, str]:
    """DuckDB spills to disk beyond ``PULSE_DUCKDB_MEMORY`` (default 1GB), so a large drop fits in a small machine."""
    return {"memory_limit": os.environ.get("PULSE_DUCKDB_MEMORY", "1GB"), "preserve_insertion_order": "false"}


def connect(path: Path, read_only: bool = False, wait_seconds: float = 60.0) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file, waiting for another PULSE process that holds its lock, with a clear error if it stays."""
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only, config=duckdb_config())
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise RuntimeError(
                    f"cannot open {path}: {exc}. Another process holds it; PULSE runs one writer at a time"
                    " (analysts should open the published copy, pulse.duckdb, which never blocks a run)."
                ) from exc
            time.sleep(0.5)
            continue
        # DuckDB draws a progress bar on stdout for any query over two seconds: at the paper's scale that broke the
        # JSON `pulse ingest --json` prints, and it is noise in a pipeline's output anyway
        con.execute("SET enable_progress_bar = false")
        return con


def publish(work_db: Path, published: Path) -> None:
    """Copy the working database over the published one atomically (readers keep the copy they opened)."""
    if not work_db.exists():
        return
    tmp = published.with_name(f".{published.name}.{os.getpid()}.tmp")
    shutil.copyfile(work_db, tmp)
    os.replace(tmp, published)
