"""The write contract: every write checked against ``tables.py`` before anything is written, and the tables
created (or, for derived tables of an older shape, recreated) to match it.

Writers hand rows by column name (a polars frame, or dataclass rows: ``Warehouse.append`` / ``replace``), and
every write is checked against the contract in ``tables.py`` first: a missing, extra or mistyped column is a
``ContractError`` that names it, never a row written into the wrong column.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from . import tables
from .tables import Table

DERIVED_SCHEMAS = ("modeling", "estimates")  # rebuilt whole by every materialization
RECOMPUTED_TABLES = (
    tables.EVENT_FEATURES.qualified,
    tables.COMPUTED_VERSIONS.qualified,
    tables.SEGMENT_RATINGS.qualified,
    tables.SESSION_LABELS.qualified,
)
"""Tables outside ``DERIVED_SCHEMAS`` that are also recomputed from the raw rows, at no cost but time: one of
an older shape is recreated like a derived table, and its bookkeeping forgotten (``_forget_computed``), so its
next refresh is whole; a recreated bookkeeping table makes every refresh whole. (Annotations are not recreated:
LLM answers are paid for.)"""

Rows = pl.DataFrame | Sequence[Any]
"""What a writer hands the warehouse: a polars frame with the table's columns, or dataclass instances whose fields
are the table's columns (by name; order does not matter)."""


class ContractError(ValueError):
    """Rows handed to the warehouse do not match the table's contract in ``tables.py``."""


# which polars dtypes each contract type accepts (DuckDB casts them on insert)
_ACCEPTS: dict[str, Callable[[pl.DataType], bool]] = {
    "VARCHAR": lambda d: d in (pl.String, pl.Null) or isinstance(d, pl.Categorical | pl.Enum),
    "INTEGER": lambda d: d == pl.Null or d.is_integer(),
    "BIGINT": lambda d: d == pl.Null or d.is_integer(),
    "DOUBLE": lambda d: d == pl.Null or d.is_float() or d.is_integer(),
    "TIMESTAMP": lambda d: d in (pl.String, pl.Null, pl.Date) or isinstance(d, pl.Datetime),
    "BOOLEAN": lambda d: d in (pl.Boolean, pl.Null),
}
# the dtype a dataclass row's values are built as; None: inferred (timestamps come as datetimes or ISO text)
_BUILD_AS: dict[str, pl.DataType | None] = {
    "VARCHAR": pl.String,
    "INTEGER": pl.Int64,
    "BIGINT": pl.Int64,
    "DOUBLE": pl.Float64,
    "TIMESTAMP": None,
    "BOOLEAN": pl.Boolean,
}


def check_schema(t: Table, schema: Mapping[str, pl.DataType]) -> None:
    """Raise ``ContractError`` naming every missing or extra column and every column of the wrong type."""
    problems = []
    missing = [c for c in t.column_names if c not in schema]
    extra = [c for c in schema if c not in t.column_names]
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    if extra:
        problems.append(f"extra column(s) {', '.join(extra)}")
    for name, dtype in schema.items():
        if name in t.column_names and not _ACCEPTS[t.type_of(name)](dtype):
            problems.append(f"column {name} is {dtype}, the contract says {t.type_of(name)}")
    if problems:
        raise ContractError(f"{t.qualified}: {'; '.join(problems)} (the contract is in tables.py)")


def to_frame(t: Table, rows: Rows) -> pl.DataFrame:
    """``rows`` as a frame in the table's column order, checked against the contract."""
    if isinstance(rows, pl.DataFrame):
        frame = rows
    elif not rows:
        frame = pl.DataFrame(schema={c: _BUILD_AS[typ] or pl.String for c, typ in t.columns})
    else:
        first = rows[0]
        if not dataclasses.is_dataclass(first):
            raise ContractError(f"{t.qualified}: rows must be a polars frame or dataclass instances, got {first!r:.80}")
        names = [f.name for f in dataclasses.fields(first)]
        check_schema(t, dict.fromkeys(names, pl.Null))  # names first: a clear error before any value is read
        columns = []
        for name in names:
            values = [getattr(r, name) for r in rows]
            try:
                columns.append(pl.Series(name, values, dtype=_BUILD_AS[t.type_of(name)], strict=True))
            except (TypeError, pl.exceptions.PolarsError) as exc:
                raise ContractError(f"{t.qualified}.{name} ({t.type_of(name)}): {exc}".split("\n")[0]) from exc
        frame = pl.DataFrame(columns)
    check_schema(t, frame.schema)
    return frame.select(t.column_names)


def nan_to_null(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every float NaN replaced by null: an undefined statistic is stored as NULL (its row's note says
    why), because DuckDB sorts NaN above every number, so ``ORDER BY x DESC`` and ``x > 0.3`` would pick it."""
    floats = [c for c, d in frame.schema.items() if d.is_float()]
    return frame.with_columns(pl.col(floats).fill_nan(None)) if floats else frame


def ensure_tables(con: duckdb.DuckDBPyConnection, which: Iterable[Table] = tables.ALL_TABLES) -> None:
    """Create every table of the contract that is missing.

    A derived table (``DERIVED_SCHEMAS``, ``RECOMPUTED_TABLES``) whose columns differ from the contract, i.e. one
    written by an older PULSE, is dropped and created anew: its next materialization recomputes it whole. Raw,
    staging and the other feature tables are never dropped on their own (the ingested records and paid-for LLM
    answers live there), so a mismatch there is an error that says what differs; the one change made to a raw
    table in place is columns the contract added at its end (``raw.ratings.scale``), added with NULL in old rows.

    The changes are one transaction (in a lake each statement on its own is a catalog commit: a new home's tables
    took 6.7 s one by one, 0.3 s in one), retried when it meets another process's commit (two runs starting at once
    on an empty PostgreSQL-catalog lake create the same tables; the later finds them made). So ``con`` must have no
    transaction open: DuckDB aborts an open transaction when a BEGIN is tried inside it, so that is an error here
    (an asset's warehouse creates its tables before its transaction begins: ``defs/resources.py``).
    """
    for attempt in range(_CREATE_ATTEMPTS):
        _begin(con)
        try:
            _create_missing(con, which)
            con.commit()
            return
        except BaseException as exc:
            _rollback_if_open(con)
            if not isinstance(exc, duckdb.TransactionException) or attempt + 1 == _CREATE_ATTEMPTS:
                raise
            time.sleep(0.2 * (attempt + 1))  # then look again at what exists: the other run's tables count


_CREATE_ATTEMPTS = 5


def _begin(con: duckdb.DuckDBPyConnection) -> None:
    """Begin ``ensure_tables``' transaction, saying why when the caller already had one open (now aborted)."""
    try:
        con.begin()
    except duckdb.TransactionException as exc:
        if "within a transaction" not in str(exc):
            raise
        raise RuntimeError(
            "ensure_tables (and Warehouse(con)) must run outside a transaction: DuckDB has aborted the one that was"
            " open. Create the warehouse first, then begin."
        ) from exc


def _rollback_if_open(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back ``con``'s transaction; a failed commit has already ended it."""
    with contextlib.suppress(duckdb.TransactionException):
        con.rollback()


def _create_missing(con: duckdb.DuckDBPyConnection, which: Iterable[Table]) -> None:
    existing: dict[str, list[str]] = {}  # every table's columns, in one query: every asset opens a warehouse
    for schema, name, column in con.execute(
        "SELECT table_schema, table_name, column_name FROM information_schema.columns"
        " WHERE table_catalog = current_database() ORDER BY table_schema, table_name, ordinal_position"
    ).fetchall():
        existing.setdefault(f"{schema}.{name}", []).append(column)
    for t in which:
        have = existing.get(t.qualified, [])
        if have == t.column_names:
            continue
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {t.schema}")
        if have and t.schema == "raw" and have == t.column_names[: len(have)]:
            # an older PULSE's raw table lacks columns added at the end (raw.ratings' scale): added, NULL in the
            # rows it holds, which their readers take for what those rows meant (a NULL scale is stars)
            for column, typ in t.columns[len(have) :]:
                con.execute(f'ALTER TABLE {t.qualified} ADD COLUMN "{column}" {typ}')
            continue
        if have:
            if t.schema not in DERIVED_SCHEMAS and t.qualified not in RECOMPUTED_TABLES:
                raise RuntimeError(
                    f"{t.qualified} has columns {have}, but this PULSE expects {t.column_names};"
                    " move the old warehouse aside and re-ingest the drops"
                )
            con.execute(f"DROP TABLE {t.qualified}")
            _forget_computed(con, t)
        cols = ", ".join(f'"{c}" {typ}' for c, typ in t.columns)
        con.execute(f"CREATE TABLE IF NOT EXISTS {t.qualified} ({cols})")


def _forget_computed(con: duckdb.DuckDBPyConnection, t: Table) -> None:
    """Forget which sessions table ``t`` (and its scopes, ``<table>/...``) was computed for (``incremental.py``)."""
    bookkeeping = tables.COMPUTED_VERSIONS
    found = (
        "SELECT count(*) FROM duckdb_tables()"
        " WHERE database_name = current_database() AND schema_name = ? AND table_name = ?"
    )
    if t is not bookkeeping and con.execute(found, [bookkeeping.schema, bookkeeping.name]).fetchone()[0]:
        con.execute(
            f"DELETE FROM {bookkeeping.qualified} WHERE table_name = $t OR starts_with(table_name, $t || '/')",
            {"t": t.qualified},
        )


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
    """Append an arrow table whose columns are the table's (checked against the contract)."""
    check_schema(t, pl.from_arrow(data.slice(0, 0)).schema)
    if data.num_rows == 0:
        return
    con.register("_pulse_batch", data)
    try:
        con.execute(f"INSERT INTO {t.qualified} {_select_cast(t, '_pulse_batch')}")
    finally:
        con.unregister("_pulse_batch")
