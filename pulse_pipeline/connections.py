"""Opening the warehouse: DuckDB over a DuckLake, or one DuckDB file; its configuration and memory.

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
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb

from . import lake
from .settings import ingest_settings, lake_settings


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
