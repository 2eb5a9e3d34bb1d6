"""Writing and publishing the warehouse (plain DuckDB over a DuckLake; the Dagster resource wraps this).

Where the tables live (``settings.lake_settings``, ``PULSE_LAKE_CATALOG``):

- by default in a DuckLake (``lake.py``): Parquet files in ``PULSE_HOME/lake/data/`` and an SQLite catalog,
  ``PULSE_HOME/lake/catalog.sqlite``; or a PostgreSQL catalog, for several machines. ``connect`` attaches it as the
  default catalog, so every query here and in the stages runs unchanged. A writer commits a snapshot; readers keep
  the one they started on, so they never block it. ``publish`` writes the analysts' file, ``PULSE_HOME/pulse.duckdb``,
  as views over one whole snapshot's Parquet files, when that snapshot is a whole state (``defs/publish.py``);
- with ``PULSE_LAKE_CATALOG=none`` in one DuckDB file, the *working* database ``PULSE_HOME/.work/pulse-work.duckdb``,
  written by one pipeline step at a time; ``publish`` copies it to ``pulse.duckdb`` when it holds a whole state.
  DuckDB locks a file for its writer against every other process, readers included (field notes §3), hence the
  copy.

With an SQLite catalog the working file is still opened, empty of tables: it is the lock that keeps one PULSE
writer per PULSE_HOME, DuckDB's spill space, and the home of the LLM answer cache (``own_commits_database``).
Either way ``pulse.duckdb`` is replaced by a rename: an analyst's open connection keeps what it opened, so
publishing never waits for an analyst.

Writers hand rows by column name (a polars frame, or dataclass rows: ``Warehouse.append`` / ``replace``), and
every write is checked against the contract in ``tables.py`` first: a missing, extra or mistyped column is a
``ContractError`` that names it, never a row written into the wrong column.

Every write replaces exactly the rows it owns (one drop's rows, or a whole derived table), so re-running anything
leaves the tables as they were. A derived table's DELETE and INSERTs are one transaction: the Dagster resource
(``defs/resources.py``) runs each asset's body in one, so a killed run leaves each table as it was before or after.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from . import lake, tables
from .settings import ingest_settings, lake_settings
from .tables import Table

DERIVED_SCHEMAS = ("modeling", "estimates")  # rebuilt whole by every materialization
RECOMPUTED_TABLES = (
    "features.event_features",
    "staging.computed_versions",
    "staging.segment_ratings",
    "staging.session_labels",
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
    answers live there), so a mismatch there is an error that says what differs.

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


class Warehouse:
    """The tables, over one open connection to the working database."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        in_lake = own_commits_database(con) != con.execute("SELECT current_database()").fetchone()[0]
        ensure_tables(con, [t for t in tables.ALL_TABLES if not (in_lake and t is tables.LLM_CACHE)])

    def delete_drop(self, drop_id: str) -> None:
        """Remove every raw row of one drop (ingest-stage quarantine included)."""
        for t in tables.RAW_TABLES:
            extra = " AND stage = 'ingest'" if t is tables.QUARANTINE else ""
            self.con.execute(f"DELETE FROM {t.qualified} WHERE drop_id = ?{extra}", [drop_id])

    def insert(self, t: Table, data: pa.Table) -> None:
        """Append an arrow batch (the ingest stage's column builders make these)."""
        insert_arrow(self.con, t, data)

    def append(self, t: Table, rows: Rows, nan_as_null: bool = False) -> int:
        """Append ``rows`` (a frame, or dataclass rows), checked against the contract; returns how many.

        ``nan_as_null``: store NaN as NULL (see ``nan_to_null``); estimate tables ask for it.
        """
        frame = to_frame(t, rows)
        if nan_as_null:
            frame = nan_to_null(frame)
        insert_arrow(self.con, t, frame.to_arrow())
        return frame.height

    def replace(self, t: Table, rows: Rows, nan_as_null: bool = False) -> int:
        """Rewrite a whole derived table with ``rows`` (see ``append``)."""
        frame = to_frame(t, rows)  # checked before anything is deleted
        self.con.execute(f"DELETE FROM {t.qualified}")
        return self.append(t, frame, nan_as_null)

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
    return {"memory_limit": ingest_settings().duckdb_memory, "preserve_insertion_order": "false"}


SQUEEZE_MIB = 64
"""The memory limit ``release_duckdb_memory`` sets for a moment."""


def release_duckdb_memory(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``con``'s DuckDB instance give back the memory it holds free, between two phases of a step.

    Why: DuckDB allocates through its own allocator and keeps what a query freed, and the run's one instance
    (``one_instance``) keeps it from step to step. At ten times the paper's scale the modeling step's process held
    ~100 MB more after loading the features and one chunk of unrated text than after this (and glibc's trim,
    ``memory.release_freed_memory``, gave back ~140 MB more; measured by hand on the kept 10x warehouse), and
    what the feature stage's queries left was carried into the modeling step, whose worker processes are counted
    on top. Lowering the memory limit for a moment makes DuckDB evict its cached blocks and flush its allocator;
    the limit is then set back to ``PULSE_DUCKDB_MEMORY``, the one every connection is opened with. A query that
    still pins blocks (none between phases) only means less is given back."""
    try:
        con.execute(f"SET memory_limit = '{SQUEEZE_MIB}MiB'")
    except duckdb.Error:
        pass  # blocks pinned beyond the squeeze: what can be given back was
    finally:
        restore_memory_limit(con)


def restore_memory_limit(con: duckdb.DuckDBPyConnection) -> None:
    """Set ``con``'s memory limit back to ``PULSE_DUCKDB_MEMORY``, the one every connection is opened with, after
    a phase that lowered it (DuckDB reports its limit rounded, so it cannot be read back and restored exactly)."""
    configured = ingest_settings().duckdb_memory.replace("'", "''")
    con.execute(f"SET memory_limit = '{configured}'")


def connect(path: Path, read_only: bool = False, wait_seconds: float = 60.0) -> duckdb.DuckDBPyConnection:
    """Open the working database ``path``, waiting for another PULSE process that holds its lock, with a clear
    error if it stays, and attach the DuckLake (``lake.location``) as the default catalog, unless
    ``PULSE_LAKE_CATALOG=none`` (the tables are then in the file at ``path``).

    With an SQLite catalog the file at ``path`` holds no table, only the lock that keeps one PULSE writer per
    PULSE_HOME at a time (SQLite serializes commits; two writers would fail each other's with "database is
    locked") and DuckDB's spill space. With a PostgreSQL catalog no file is opened: writers on any machine commit
    concurrently, and DuckLake retries a commit that meets another's."""
    lake_config = lake_settings()
    if lake_config is not None and lake_config.catalog.startswith("postgres:"):
        # named after the working file, so that ``one_instance`` can share it (an unnamed one never is)
        con = duckdb.connect(
            f":memory:{path}", config={**duckdb_config(), "temp_directory": str(path.parent / "spill")}
        )
    else:
        con = _open_file(path, read_only, wait_seconds)
    # DuckDB draws a progress bar on stdout for any query over two seconds: at the paper's scale that broke the
    # JSON `pulse ingest --json` prints, and it is noise in a pipeline's output anyway
    con.execute("SET enable_progress_bar = false")
    # a timestamp written without a zone means UTC: DuckDB's zone follows the machine's (TZ) and the raw tables'
    # timestamps are cast through a zone-aware type, so elsewhere the same drop gave other tables
    con.execute("SET TimeZone = 'UTC'")
    if lake_config is not None and _attached(con, lake.ALIAS):  # one_instance's: loaded and attached already
        con.execute(f"USE {lake.ALIAS}")
    elif lake_config is not None:
        if _raw_tables(con):
            con.close()
            raise RuntimeError(
                f"{path} holds this home's tables in one DuckDB file, the storage before the lake became the"
                f" default: set PULSE_LAKE_CATALOG=none to keep using it, or ingest its drops into a new PULSE_HOME"
            )
        lake.attach(con, lake.location(path, lake_config), read_only)
    return con


@contextlib.contextmanager
def one_instance(path: Path) -> Iterator[None]:
    """While open, every ``connect(path)`` of this process shares one DuckDB instance, so the lake's extensions are
    loaded and its catalog attached once, not once per asset.

    Why: loading an extension checks its signature over the whole binary; a small drop's in-process run opened
    ~40 connections, and the two LOADs and the ATTACH of each were a third of its time. DuckDB shares an instance
    among the connections a process opens on one database (a file, or a named in-memory one) while any of them is
    open: this holds one open. Each connection still has its own transaction; the instance's memory limit is the
    same one (``PULSE_DUCKDB_MEMORY``), now for the whole run instead of each asset."""
    keeper = connect(path)
    try:
        yield
    finally:
        keeper.close()


def _attached(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    found = "SELECT count(*) FROM duckdb_databases() WHERE database_name = ?"
    return con.execute(found, [name]).fetchone()[0] > 0


def _raw_tables(con: duckdb.DuckDBPyConnection) -> int:
    """How many raw tables ``con``'s own database holds: none beside a lake (the working file is then a lock, with
    the LLM cache only); some in a home written with one file."""
    found = "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'raw'"
    return con.execute(found).fetchone()[0]


def exists(work_db: Path) -> bool:
    """Whether the warehouse of ``work_db`` has been written: its lake's SQLite catalog or its one file exists (a
    PostgreSQL catalog is a server's: it counts as there, and ``connect`` creates what it lacks)."""
    settings = lake_settings()
    if settings is None:
        return work_db.exists()
    catalog = lake.location(work_db, settings).catalog
    return not catalog.startswith("sqlite:") or Path(catalog.removeprefix("sqlite:")).exists()


def _open_file(path: Path, read_only: bool, wait_seconds: float) -> duckdb.DuckDBPyConnection:
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=duckdb_config())
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise RuntimeError(
                    f"cannot open {path}: {exc}. Another process holds it; PULSE runs one writer at a time"
                    " (analysts should open the published copy, pulse.duckdb, which never blocks a run)."
                ) from exc
            time.sleep(0.5)


def cursor(con: duckdb.DuckDBPyConnection, database: str | None = None) -> duckdb.DuckDBPyConnection:
    """A new cursor of ``con`` on ``database`` (default: ``con``'s default catalog): DuckDB starts a cursor on the
    database file, so with a DuckLake (``lake.attach``: ``USE lake``) a bare ``con.cursor()`` would not see the
    tables."""
    cur = con.cursor()
    name = database or con.execute("SELECT current_database()").fetchone()[0]
    cur.execute('USE "' + name.replace('"', '""') + '"')
    return cur


def own_commits_database(con: duckdb.DuckDBPyConnection) -> str:
    """The database of ``con`` for a table that commits on its own cursor while an asset's transaction is open on
    ``con``: the LLM answer cache (``features.llm_cache``), whose answers are paid for and must survive a run
    killed before its asset commits.

    That is ``con``'s database file when it has one: in one-file storage the warehouse itself; with an SQLite lake
    catalog the working file, outside the lake, because the asset's open transaction holds the SQLite catalog and
    any other commit into the lake meanwhile fails with "database is locked" (SQLite takes one writer; in WAL mode
    the asset's own commit fails instead). Without a file (a PostgreSQL catalog, which commits concurrent
    transactions; an in-memory connection) it is ``con``'s default catalog."""
    files = con.execute(
        "SELECT database_name FROM duckdb_databases() WHERE type = 'duckdb' AND NOT internal AND path IS NOT NULL"
    ).fetchall()
    return files[0][0] if files else con.execute("SELECT current_database()").fetchone()[0]


PUBLISHED_MODE = 0o444  # the analysts' copy is read-only for everyone: DuckDB refuses to open it for writing


def wal_of(database: Path) -> Path:
    """The write-ahead log DuckDB keeps beside a database file (and replays onto whatever file has that name)."""
    return database.with_name(database.name + ".wal")


def stamp_of(published: Path) -> Path:
    """Where ``publish`` records what it published (``fingerprint``): a hidden file beside ``published``."""
    return published.with_name(f".{published.name}.published")


def fingerprint(path: Path) -> str:
    """The size and modification time (ns) of ``path``: any write through a DuckDB connection (a ``CHECKPOINT``,
    or closing after a write) changes them, a read does not, and moving or copying a home with its times kept
    (``mv``, ``cp -a``) keeps them. Read with one ``stat``, without DuckDB's lock, so it can be asked while an
    analyst holds the file open for writing."""
    status = path.stat()
    return f"{status.st_size} {status.st_mtime_ns}"


def written_since_published(published: Path) -> str | None:
    """Why the analysts' file ``published`` may not be what PULSE published, or None: a WAL beside it (a
    connection wrote to it, and DuckDB would replay that WAL onto it for every reader), or its size or time
    changed since ``publish`` recorded them (a connection wrote and checkpointed: dropped a view, created a table).
    A file published before stamps were recorded has none to compare with: only its WAL is looked at."""
    if wal_of(published).exists():
        return f"{published} has a write-ahead log beside it ({wal_of(published).name}): a connection wrote to it"
    try:
        recorded = stamp_of(published).read_text().strip()
    except FileNotFoundError:
        return None
    if published.is_file() and recorded != fingerprint(published):
        return f"{published} was written by another connection since it was published"
    return None


def publish(
    work_db: Path,
    published: Path,
    ready: Callable[[duckdb.DuckDBPyConnection], str | None] = lambda con: None,
) -> str | None:
    """Replace the analysts' ``published`` file with the warehouse's current state; returns None, or why nothing was
    replaced. Steps 1-6 are those of one file (``PULSE_LAKE_CATALOG=none``); the lake's follow.

    Each step, and why:

    1. Open the working database: DuckDB's write lock. A PULSE writer in another process finishes its step first,
       and none starts until the copy is made, so the copy is one committed state.
    2. ``ready(con)``, asked under that lock with the open connection, says why that state is not whole, if it is
       not (``defs/publish.why_not_whole``: a run executing, a drop half loaded, a table older than what it reads);
       then that reason is returned and nothing changes.
    3. ``CHECKPOINT``: every committed row goes into the file and its WAL empties, so the file alone is the state.
    4. Leftover ``.pulse.duckdb.*.tmp`` files of a publish that was killed are removed (under the lock, so never a
       live one), then the file is copied to a new tmp file beside the published one (the same file system, so
       the rename below is atomic), fsync'ed and made read-only (``PUBLISHED_MODE``). Their ``.tmp.wal`` files
       go too: DuckDB would replay one onto a new tmp file of the same name.
    5. ``pulse.duckdb.wal`` is removed, the tmp file renamed over ``pulse.duckdb``, and the WAL removed again;
       the new file's ``fingerprint`` is written to ``stamp_of(published)`` (renamed into place too).
       Why: an analyst who wrote through their own connection leaves a WAL beside the file, and DuckDB replays
       it, by row id, onto whatever file bears the name: onto the new copy it deletes or rewrites other rows, for
       every reader, at every later publish. An analyst's connection still open keeps writing to its own WAL
       file, unlinked by then, so nothing of it reaches the new copy. Writes into ``pulse.duckdb`` are thus
       discarded at the next publish; analysts write their own tables in their own database file (docs/storage.md).
       PULSE's own readers do not wait for it: they publish again first when ``written_since_published`` says
       the file was written, or when DuckDB cannot lock it (an analyst's read-write connection open on it; the
       rename gives new readers a new file, and the analyst keeps the old one) (``cli._published_here``).
    6. The folder is fsync'ed, so the rename survives a power cut.

    Readers that have the old copy open keep it until they close it; a new reader sees the new copy, whole.

    With a DuckLake (the default, ``lake.py``) nothing is copied: steps 1-2 run in one transaction, so ``ready``
    and the views see one snapshot; step 3 is not needed (the lake has no WAL of PULSE's); step 4 writes the tmp
    file as views over that snapshot's Parquet files (``lake.write_views``); steps 5-6 are the same. Snapshots
    replaced a day ago are then expired and their files removed (``lake.expire_old_snapshots``).
    """
    in_lake = lake_settings() is not None
    if not in_lake and not work_db.exists():
        return f"there is no working database at {work_db} yet"
    con = connect(work_db)
    try:
        if in_lake:
            con.begin()
        reason = ready(con)
        if reason:
            return reason
        published.parent.mkdir(parents=True, exist_ok=True)
        for pattern in (f".{published.name}.*.tmp", f".{published.name}.*.tmp.wal"):
            for leftover in published.parent.glob(pattern):
                leftover.unlink(missing_ok=True)
        tmp = published.with_name(f".{published.name}.{os.getpid()}.tmp")
        if in_lake:
            lake.write_views(con, tmp, published)
            con.commit()
        else:
            con.execute("CHECKPOINT")
            shutil.copyfile(work_db, tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        tmp.chmod(PUBLISHED_MODE)
        wal_of(published).unlink(missing_ok=True)
        os.replace(tmp, published)
        wal_of(published).unlink(missing_ok=True)
        stamp = stamp_of(published)
        stamp_tmp = stamp.with_name(f"{stamp.name}.{os.getpid()}.tmp")
        stamp_tmp.write_text(fingerprint(published) + "\n")
        os.replace(stamp_tmp, stamp)
        folder = os.open(published.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        if in_lake:
            lake.expire_old_snapshots(con)
    finally:
        con.close()
    return None
