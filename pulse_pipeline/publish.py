"""Publishing the analysts' copy, ``PULSE_HOME/pulse.duckdb``: a copy of the working file, or views over one
lake snapshot (``publish``), and telling whether anyone wrote to it since (``written_since_published``).

``pulse.duckdb`` is replaced by a rename: an analyst's open connection keeps what it opened, so publishing never
waits for an analyst.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb

from . import lake
from .connections import connect
from .settings import lake_settings

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
