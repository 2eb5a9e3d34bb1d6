"""The warehouse's tables in a DuckLake (the default storage): Parquet files plus a SQL catalog, ``PULSE_LAKE_CATALOG``.

DuckLake (the DuckDB team's open lakehouse format) keeps each table as Parquet files and every commit as a snapshot
in a catalog database: SQLite for one machine, PostgreSQL for several. A writer commits a new snapshot; a reader
keeps reading the snapshot it started on, so readers never block writers and nothing is copied to publish.

What analysts open stays one DuckDB file, ``pulse.duckdb``, that plain ``duckdb`` or Python opens with no extension:
``write_views`` makes it a small database of views, one per table, each reading the Parquet files of one snapshot
(with that snapshot's deletions applied). It holds no data, so publishing costs the number of tables, not the
history. The views name the files inside the home relative to it and find the home from where the file is opened
(``home_of_file``), so a PULSE_HOME moved or copied keeps reading its own files; a file attached under another
name reads the home it was published in, and refuses when it is not there (``guard_where``). An analyst's open
connection keeps the views it opened, so it reads its snapshot until it reopens the file. Hence two rules, both
here:

- no data is inlined into the catalog (``DATA_INLINING_ROW_LIMIT 0``): views can only read Parquet files;
- a snapshot's files are removed only when it is ``KEEP_SNAPSHOTS`` old (``expire_old_snapshots``, run at each
  publish): an analyst who keeps a connection open longer than that gets an error naming a missing file, and
  reopening ``pulse.duckdb`` shows the current state.

The extension binaries come from the ``duckdb-extension-*`` wheels (pinned with duckdb in pyproject.toml), so no
network is needed: ``load_extensions`` installs them from the wheel the first time.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import duckdb

from .settings import LakeSettings

ALIAS = "lake"  # the lake's name in a connection; ``connect`` makes it the default catalog
DRIVERS = ("sqlite", "postgres")  # the catalog databases DuckLake can use here, each a DuckDB extension
KEEP_SNAPSHOTS = timedelta(days=1)
"""How long a snapshot's files stay readable after a newer one replaced it: the longest an analyst may keep one
``pulse.duckdb`` connection open and still read from it."""


@dataclass(frozen=True)
class LakeLocation:
    """Where one lake lives: ``catalog`` is what follows ``ducklake:`` in an ATTACH (``sqlite:/path`` or
    ``postgres:<connection string>``), ``data`` the folder or URL of its Parquet files (ending in ``/``)."""

    catalog: str
    data: str


def folder(work_db: Path) -> Path:
    """The lake's own folder, ``PULSE_HOME/lake/``, for the working database ``work_db``, which is
    ``PULSE_HOME/.work/pulse-work.duckdb`` (``paths.PulseHome``); a working file anywhere else (a test's) gets
    ``lake/`` beside it."""
    home = work_db.parent.parent if work_db.parent.name == WORK_FOLDER else work_db.parent
    return home / "lake"


WORK_FOLDER = ".work"  # the working database's folder in a PULSE_HOME (paths.PulseHome.work_db)


def location(work_db: Path, settings: LakeSettings) -> LakeLocation:
    """The lake of the working database ``work_db``: what the settings name, else the catalog
    ``catalog.sqlite`` and the Parquet files ``data/`` in its ``folder``."""
    own = folder(work_db)
    catalog = settings.catalog
    if catalog == "sqlite":
        catalog = f"sqlite:{own / 'catalog.sqlite'}"
    data = settings.data or str(own / "data")
    if not data.endswith("/"):
        data += "/"
    return LakeLocation(catalog=catalog, data=data)


def _wheel_binary(name: str) -> str:
    """The extension binary the ``duckdb-extension-<name>`` wheel ships (built for this exact DuckDB version)."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or spec.origin is None:
        raise RuntimeError(f"the duckdb-extension-{name} package is missing: pip install duckdb-extension-{name}")
    folder = Path(spec.origin).parent / "extensions" / f"v{duckdb.__version__}"
    binary = folder / f"{name}.duckdb_extension"
    if not binary.exists():
        raise RuntimeError(f"{binary} is missing: duckdb-extension-{name} must match duckdb {duckdb.__version__}")
    return str(binary)


def load_extensions(con: duckdb.DuckDBPyConnection, driver: str) -> None:
    """LOAD the catalog's driver (``sqlite`` or ``postgres``) and DuckLake, installing each from its wheel the first
    time (no download). Only the driver in use: loading one costs 0.1-0.3 s, and every asset opens a connection."""
    if driver not in DRIVERS:
        raise ValueError(f"no DuckLake catalog driver {driver!r}: choose one of {', '.join(DRIVERS)}")
    for name in (driver, "ducklake"):
        try:
            con.execute(f"LOAD {name}")
        except duckdb.Error:
            con.execute(f"INSTALL '{_wheel_binary(name)}'")
            con.execute(f"LOAD {name}")


def attach(con: duckdb.DuckDBPyConnection, where: LakeLocation, read_only: bool = False) -> None:
    """Attach the lake as ``ALIAS`` and make it the default catalog, so every query of the code base runs unchanged.

    ``OVERRIDE_DATA_PATH``: the catalog records its data folder; a PULSE_HOME copied or moved elsewhere keeps its
    files in its own folder (file paths are stored relative to it). Commits that meet another writer's commit are
    retried by DuckLake (``ducklake_max_retry_count``) before the transaction fails."""
    if "://" not in where.data:
        Path(where.data).mkdir(parents=True, exist_ok=True)
    if where.catalog.startswith("sqlite:"):
        Path(where.catalog.removeprefix("sqlite:")).parent.mkdir(parents=True, exist_ok=True)
    load_extensions(con, where.catalog.split(":", 1)[0])
    con.execute("SET ducklake_max_retry_count = 100")
    # ATTACH takes no parameter: the paths are quoted literals (a home named ``it's``, a password with a quote)
    options = f"DATA_PATH {_quoted(where.data)}, OVERRIDE_DATA_PATH true, DATA_INLINING_ROW_LIMIT 0"
    statement = (
        f"ATTACH {_quoted('ducklake:' + where.catalog)} AS {ALIAS} ({options}{', READ_ONLY' if read_only else ''})"
    )
    for attempt in range(_INIT_ATTEMPTS):
        try:
            con.execute(statement)
            break
        except duckdb.Error as exc:
            # Two processes attaching an empty catalog at once both create DuckLake's own tables; the later one's
            # CREATE fails (PostgreSQL: "duplicate key value violates unique constraint"). Once the first has
            # committed, attaching again finds the catalog made.
            if "Failed to initialize DuckLake" not in str(exc) or attempt + 1 == _INIT_ATTEMPTS:
                raise
            time.sleep(0.5 * (attempt + 1))
    con.execute(f"USE {ALIAS}")


_INIT_ATTEMPTS = 5


def current_snapshot(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute(f"SELECT id FROM {ALIAS}.current_snapshot()").fetchone()[0]


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


SPILL_SETTING = "current_setting('temp_directory')"
"""DuckDB's spill folder: ``<database file>.tmp`` beside the file a connection opened, unless set otherwise. A
view cannot ask which file holds it (a table function takes no subquery, and ``current_database()`` is the
connection's, not the view's), but this setting is known when the view is bound: the one fact a view can use to
find the home it sits in (``home_of_file``)."""


def home_of_file(published: Path) -> str:
    """A SQL expression, folded when a view is bound: the folder (ending in ``/``) whose ``lake/`` the analysts'
    file ``published`` reads.

    Opened itself (``duckdb.connect(path)``, from any working directory: DuckDB makes the path absolute), its spill
    folder is ``<folder>/<published.name>.tmp``: it reads the Parquet files of the home it is in, so a home moved or
    copied keeps reading its own files. Attached under another name (``ATTACH '.../pulse.duckdb' AS p``, into memory
    or into an analyst's own file, as the README shows), it cannot see where it is: it reads the home it was
    published in, and ``guard_where`` refuses that unless the file is still there."""
    spill = f"{published.name}.tmp"
    return (
        f"(CASE WHEN parse_filename({SPILL_SETTING}) = {_quoted(spill)}"
        f" THEN parse_dirpath({SPILL_SETTING}) || '/' ELSE {_quoted(str(published.parent) + '/')} END)"
    )


def guard_where(published: Path) -> str:
    """A condition that holds when the view reads its own home's files and is an error otherwise, one line that
    says what to do. Opened itself, the file reads the home it is in (``home_of_file``). Otherwise (attached under
    another name, or opened under another name) it reads the home it was published in, and only while a database
    file of that folder is attached: the file itself, or the file it was opened as (a link beside it). So a copied
    or moved home's file, attached from elsewhere, never reads the original home's files.

    (A connection whose main file is another ``pulse.duckdb`` reads an attached one's files from the main file's
    home: absent there, DuckDB says which file it did not find. DuckLake names every file it writes with a new
    UUID and never rewrites one, so a file of that name in another home is a copy of the same bytes.)"""
    spill = _quoted(f"{published.name}.tmp")
    why = (
        f"this pulse.duckdb was published for {published}, and it is attached from somewhere else (a moved or"
        " copied PULSE_HOME): open it itself, duckdb.connect('<PULSE_HOME>/pulse.duckdb', read_only=True), to read"
        " the home it is in, or publish it there first: PULSE_HOME=<PULSE_HOME> pulse publish"
    )
    here = _quoted(str(published.parent.resolve()))  # DuckDB lists an attached file by its real path
    return (
        f"(SELECT CASE WHEN parse_filename({SPILL_SETTING}) = {spill} OR bool_or(parse_dirpath(path) = {here})"
        f" THEN true ELSE error({_quoted(why)}) END FROM duckdb_databases())"
    )


def _paths(files: list[str], home: Path, published: Path) -> str:
    """A list expression of the Parquet files ``files``: those inside ``home`` relative to ``home_of_file``, any
    other (``PULSE_LAKE_DATA`` elsewhere, or an ``s3://`` URL) as it is."""
    inside, outside = [], []
    for file in files:
        path = Path(file)
        if "://" not in file and path.is_relative_to(home):
            inside.append(path.relative_to(home).as_posix())
        else:
            outside.append(file)
    parts = []
    if inside:
        listed = ", ".join(map(_quoted, inside))
        parts.append(f"list_transform([{listed}], lambda f: {home_of_file(published)} || f)")
    if outside:
        parts.append(f"[{', '.join(map(_quoted, outside))}]")
    return parts[0] if len(parts) == 1 else f"list_concat({', '.join(parts)})"


def view_sql(con: duckdb.DuckDBPyConnection, schema: str, table: str, snapshot: int, published: Path) -> str:
    """A SELECT that reads ``schema.table`` as of ``snapshot`` from its Parquet files alone (no extension), for
    the analysts' file ``published``.

    The data files without a delete file are read by one ``read_parquet`` of them all: a drop's raw tables come
    in a file per reader piece, ~1 000 for raw.events at ten times the paper's scale, and binding a
    ``read_parquet`` for each took most of the 3.8 s publishing then took (0.55 s with one for them all). A data
    file with a delete file is read with its row numbers, and the rows the delete file lists (``pos``) are left
    out. Every column is cast to the table's type, so a table without files is an empty, typed SELECT.

    The files inside the home are named relative to it and found from the file's own folder (``home_of_file``),
    behind ``guard_where``: the home can be moved or copied."""
    columns = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns()"
        " WHERE database_name = ? AND schema_name = ? AND table_name = ? ORDER BY column_index",
        [ALIAS, schema, table],
    ).fetchall()
    files = con.execute(
        "SELECT data_file, delete_file FROM ducklake_list_files(?, ?, schema => ?, snapshot_version => ?)"
        " ORDER BY data_file",
        [ALIAS, table, schema, snapshot],
    ).fetchall()
    if not files:
        return "SELECT " + ", ".join(f'NULL::{kind} AS "{name}"' for name, kind in columns) + " WHERE false"
    home = published.parent
    select = ", ".join(f'"{name}"::{kind} AS "{name}"' for name, kind in columns)
    whole = [data for data, deletes in files if not deletes]
    parts = [f"SELECT {select} FROM read_parquet({_paths(whole, home, published)})"] if whole else []
    parts += [
        f"SELECT {select} FROM read_parquet({_paths([data], home, published)}, file_row_number = true)"
        f" WHERE file_row_number NOT IN (SELECT pos FROM read_parquet({_paths([deletes], home, published)}))"
        for data, deletes in files
        if deletes
    ]
    names = ", ".join(f'"{name}"' for name, _ in columns)
    return f"SELECT {names} FROM (\n" + "\nUNION ALL ".join(parts) + f"\n) WHERE {guard_where(published)}"


def write_views(con: duckdb.DuckDBPyConnection, target: Path, published: Path) -> int:
    """Write the DuckDB file ``target`` (a new file beside ``published``, which the caller renames it to) with one
    view per table of the lake's current snapshot, as ``con``'s transaction sees it; returns that snapshot's id."""
    snapshot = current_snapshot(con)
    tables = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? ORDER BY 1, 2", [ALIAS]
    ).fetchall()
    views = [(schema, table, view_sql(con, schema, table, snapshot, published)) for schema, table in tables]
    out = duckdb.connect(str(target))
    try:
        for schema in sorted({schema for schema, _, _ in views}):
            out.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        for schema, table, sql in views:
            out.execute(f'CREATE VIEW "{schema}"."{table}" AS {sql}')
        out.execute("CHECKPOINT")
    finally:
        out.close()
    with open(target, "rb") as f:
        os.fsync(f.fileno())
    return snapshot


def reads_elsewhere(published: Path) -> str | None:
    """None when the analysts' file ``published`` reads the home it is in; else the folder, outside it, whose
    Parquet files it names: a file published before views found their own home (absolute paths), in a home
    moved or copied since."""
    home = str(published.parent.resolve()) + "/"
    try:
        with duckdb.connect(str(published), read_only=True) as con:
            views = con.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall()
    except duckdb.Error:
        return None  # not a DuckDB file, or one in use: the reader that opens it next says what DuckDB says
    for (sql,) in views:
        if "read_parquet(" not in sql or SPILL_SETTING in sql:
            continue
        found = re.search(r"'(/[^']*?)lake/data/", sql)
        if found and found.group(1) != home:
            return found.group(1)
    return None


def expire_old_snapshots(con: duckdb.DuckDBPyConnection, keep: timedelta = KEEP_SNAPSHOTS) -> None:
    """Forget snapshots replaced more than ``keep`` ago and delete the files only they read (the lake's disk then
    grows with the data, not with every rewrite of every derived table); also delete files under the data folder
    that no snapshot names and that are older than ``keep``: those a writer killed before its commit left (a
    writer's files are younger than its transaction). The data folder is therefore the lake's alone."""
    older_than = f"older_than => now() - INTERVAL ({keep.total_seconds() / 3600}) HOUR"
    con.execute(f"CALL ducklake_expire_snapshots('{ALIAS}', {older_than})")
    con.execute(f"CALL ducklake_cleanup_old_files('{ALIAS}', {older_than})")
    con.execute(f"CALL ducklake_delete_orphaned_files('{ALIAS}', {older_than})")
