"""Loading one drop into the raw tables: delete what the drop wrote before, insert what it holds now.

Reading (parsing and normalizing JSON) is most of the work and is pure Python, so a large drop is read by worker
processes, one read at a time (a piece of a large file, or many small files packed together: ``drop.plan_reads``),
while this process inserts what they send back. At most two reads per worker are in flight, a read's rows come back
merged into a few large batches, and rows are committed as they come, so memory is bounded by a few reads, not by
the drop's size or its number of files.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import duckdb

from .. import tables
from ..connections import restore_memory_limit
from ..processes import ordered_map
from ..settings import ingest_settings
from ..warehouse import Warehouse
from .batch import ArrowBatch, Batch
from .drop import DropTally, Piece, drop_row, drop_state, drop_units, plan_reads, read_piece, unit_bytes
from .files import CHUNK_BYTES, CHUNK_EVENTS

log = logging.getLogger(__name__)

Progress = Callable[[str], None]
Advance = Callable[[int, int], None]  # (bytes just read, bytes of the drop): a progress bar (progress.py)

COMMIT_ROWS = 500_000  # rows (of every table) per transaction while loading
COMMIT_BYTES = 256 << 20  # ... or this many bytes of Arrow data, whichever comes first
PARALLEL_BYTES = 32 << 20  # drops smaller than this are read in this process (starting workers costs ~1 s)
LOAD_MEMORY_MIB = 256  # DuckDB's memory limit while a drop is loaded, unless PULSE_DUCKDB_MEMORY is lower
# ... raised to BATCH_MEMORY_MIB + BATCH_MEMORY_FACTOR x a batch's Arrow bytes while a larger batch is inserted
BATCH_MEMORY_MIB = 128
BATCH_MEMORY_FACTOR = 3
_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def reader_processes(total_bytes: int) -> int:
    """Worker processes for a drop of this size: ``PULSE_INGEST_WORKERS``, else one per core for large drops."""
    configured = ingest_settings().workers
    if configured is not None:
        return configured
    return 1 if total_bytes < PARALLEL_BYTES else max(1, min(os.cpu_count() or 1, 4))


def read_pieces(drop_id: str, pieces: list[Piece]) -> Iterator[Batch]:
    """The rows of one read, its pieces one after another, merged into batches of about ``CHUNK_EVENTS`` events
    (or ``CHUNK_BYTES`` bytes of records, so a batch with a large record holds few others).
    Each piece's bytes are counted in the batch its reading finished with, so the last one may hold no rows.

    Why: each INSERT of an open transaction holds DuckDB memory (measured: 3 000 inserts of 85 rows held 400 MiB,
    the same rows in one insert 64 MiB), so the rows of many small files must reach the warehouse as a few large
    batches."""
    merged = Batch(drop_id)
    for piece in pieces:
        for batch in read_piece(drop_id, piece):
            merged.absorb(batch)
            if merged.count(tables.EVENTS) >= CHUNK_EVENTS or merged.held_bytes >= CHUNK_BYTES:
                yield merged
                merged = Batch(drop_id)
        merged.bytes_read += piece_bytes(piece)
    if merged.read or merged.bytes_read:
        yield merged


def piece_bytes(piece: Piece) -> int:
    """The bytes a reader reads for the piece: its byte range, or the whole unit's size."""
    return unit_bytes(piece.unit) if piece.end is None else piece.end - piece.start


def read_pieces_frozen(drop_id: str, pieces: list[Piece]) -> list[ArrowBatch]:
    """``read_pieces`` as Arrow batches: what a worker process sends back."""
    return [batch.freeze() for batch in read_pieces(drop_id, pieces)]


def _read_serial(drop_id: str, reads: list[list[Piece]]) -> Iterator[ArrowBatch]:
    for pieces in reads:
        for batch in read_pieces(drop_id, pieces):
            yield batch.freeze()


def _read_parallel(drop_id: str, reads: list[list[Piece]], workers: int) -> Iterator[ArrowBatch]:
    """The reads in ``workers`` reader processes, at most two each in flight, their batches in the reads' order
    (``processes.ordered_map``: readers never outlive this process, even SIGKILLed)."""
    for batches in ordered_map(partial(read_pieces_frozen, drop_id), reads, workers):
        yield from batches


def memory_for_batch(batch_bytes: int, base_bytes: int) -> int:
    """The memory limit (bytes) DuckDB inserts a batch of ``batch_bytes`` Arrow bytes with: the loading limit
    ``base_bytes``, or ``BATCH_MEMORY_MIB`` MiB plus ``BATCH_MEMORY_FACTOR`` times the batch when that is more than
    ``LOAD_MEMORY_MIB`` (a batch of ordinary records keeps the limit, even a lower ``PULSE_DUCKDB_MEMORY``).

    Why (issue 34): appending to a DuckLake writes Parquet, and a value is held a few times over while its row
    group is written (the Arrow column, the column being written, its compressed page), so a fixed limit fails
    on one large value: a session with a 50 MB message (one batch of 100 MB: the text and the event's
    ``raw_json``) failed at 256 MiB ("failed to allocate 55.6 MiB (216.0/256.0 MiB used)") and loaded at 512 MiB.
    The batch's size is bounded by the largest record (``PULSE_MAX_RECORD_MB``, ``limits.py``) plus
    ``files.CHUNK_BYTES``, and so is the limit."""
    needed = (BATCH_MEMORY_MIB << 20) + BATCH_MEMORY_FACTOR * batch_bytes
    return base_bytes if needed <= LOAD_MEMORY_MIB << 20 else max(base_bytes, needed)


class BatchMemory:
    """Sets DuckDB's memory limit for each batch (``memory_for_batch``), only when it changes."""

    def __init__(self, con: duckdb.DuckDBPyConnection, base_bytes: int) -> None:
        self.con, self.base, self.current = con, base_bytes, base_bytes

    def fit(self, batch_bytes: int) -> None:
        wanted = memory_for_batch(batch_bytes, self.base)
        if wanted == self.current:
            return
        try:
            self.con.execute(f"SET memory_limit = '{wanted >> 20}MiB'")
            self.current = wanted
        except duckdb.Error:  # lowering it while blocks are still pinned: kept higher until the next batch
            pass


@contextmanager
def loading_memory(con: duckdb.DuckDBPyConnection) -> Iterator[BatchMemory]:
    """DuckDB's memory limit lowered to ``LOAD_MEMORY_MIB`` while a drop loads, raised for a large batch only
    (``BatchMemory``, ``memory_for_batch``).

    Why: loading only appends, and DuckDB writes the appended row groups to disk as they fill, so memory beyond a
    few hundred MiB only caches blocks already written; DuckDB keeps them up to its limit, which made its cache
    most of the process's memory. Measured on the paper-scale corpus (861 MB): reading it took the same time at
    256 MiB as at the default 1 GB, with 860 instead of 1 520 MiB peak RSS. Afterwards the limit is set back to
    ``PULSE_DUCKDB_MEMORY``, the one every warehouse connection is opened with (DuckDB reports its limit rounded,
    so it cannot be read back exactly).
    """
    number, unit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0].split()  # e.g. 953.6 MiB
    configured = int(float(number) * _UNITS[unit])
    if configured > LOAD_MEMORY_MIB << 20:
        con.execute(f"SET memory_limit = '{LOAD_MEMORY_MIB}MiB'")
    try:
        yield BatchMemory(con, min(configured, LOAD_MEMORY_MIB << 20))
    finally:
        restore_memory_limit(con)


@contextmanager
def one_thread(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB on one thread while reader processes fill the cores, then back to its setting.

    Why: appending Arrow batches with DuckDB's default of a thread per core took 1.9 s of CPU for the 435 000
    events of a 5 000-session drop, on one thread 1.4 s (the same rows, the same file). While the readers keep
    every core busy, the second thread only takes CPU from them (issue 16)."""
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    con.execute("SET threads = 1")
    try:
        yield
    finally:
        con.execute(f"SET threads = {int(threads)}")


def load_drop(
    wh: Warehouse, drop_id: str, path: Path, progress: Progress | None = None, advance: Advance | None = None
) -> DropTally:
    """Replace the drop's rows. Its ``raw.drops`` row is written last and marks the drop complete.

    The rows are committed every ``COMMIT_ROWS`` rows, because DuckDB holds a transaction's appends in memory. The
    drop's old rows are deleted in the first of these transactions and its ``raw.drops`` row is written in the
    last, so a load that dies leaves either the drop as it was or rows without a ``raw.drops`` row, and a drop of
    fewer rows is replaced in one transaction. Until the ``raw.drops`` row exists, staging ignores the drop (every
    staging query joins ``raw.drops``), nothing is published (``unfinished_drops``), and the next load of the drop
    deletes what the failed one left. DuckDB runs with at most ``LOAD_MEMORY_MIB`` meanwhile, more only while a
    large batch is inserted (``loading_memory``, ``memory_for_batch``), and on one thread while reader processes
    run (``one_thread``). Rows are also committed every ``COMMIT_BYTES`` of Arrow data.

    ``progress`` gets a line every 20 batches (a log); ``advance(bytes, total)`` is called as rows are inserted,
    with the bytes read for them and the drop's (a progress bar). Bytes, not files: a drop may be one large file.
    """
    if not path.exists():
        raise FileNotFoundError(f"drop {drop_id!r}: {path} does not exist (was it moved out of the drop folder?)")
    state = drop_state(path)  # before the listing: what the raw.drops row vouches for was read (``drop_state``)
    units = drop_units(path)
    reads = plan_reads(units)
    total_bytes = sum(unit_bytes(unit) for unit in units)
    workers = reader_processes(total_bytes)
    batches = _read_serial(drop_id, reads) if workers == 1 else _read_parallel(drop_id, reads, workers)
    counted = batches if advance is None else _advancing(batches, advance, total_bytes)
    with loading_memory(wh.con) as memory, one_thread(wh.con) if workers > 1 else nullcontext():
        return _replace_rows(wh, drop_id, state, counted, progress, memory)


def _advancing(batches: Iterator[ArrowBatch], advance: Advance, total_bytes: int) -> Iterator[ArrowBatch]:
    """The batches, each one's bytes reported once the next is asked for, that is once its rows are inserted."""
    for batch in batches:
        yield batch
        if batch.bytes_read:
            advance(batch.bytes_read, total_bytes)


def _replace_rows(
    wh: Warehouse,
    drop_id: str,
    state: dict[str, Any],
    batches: Iterator[ArrowBatch],
    progress: Progress | None,
    memory: BatchMemory | None = None,
) -> DropTally:
    tally = DropTally()
    wh.con.begin()
    try:
        wh.delete_drop(drop_id)
        uncommitted = uncommitted_bytes = 0
        for n, batch in enumerate(batches, start=1):
            if memory is not None:
                memory.fit(batch.nbytes())
            for t in tables.RAW_TABLES:
                if batch.count(t):
                    wh.insert(t, batch.tables[t.qualified])
            tally.add(batch)
            uncommitted += batch.rows()
            uncommitted_bytes += batch.nbytes()
            if uncommitted >= COMMIT_ROWS or uncommitted_bytes >= COMMIT_BYTES:
                wh.con.commit()
                wh.con.begin()
                uncommitted = uncommitted_bytes = 0
            if progress and n % 20 == 0:
                progress(f"{drop_id}: {tally.records_read} records, {tally.events_read} events read")
        drops = Batch(drop_id)
        drops.add(tables.DROPS, drop_row(drop_id, state, tally))
        wh.insert(tables.DROPS, drops.arrow(tables.DROPS))
        wh.con.commit()
    except BaseException:
        wh.con.rollback()
        raise
    return tally


def unfinished_drops(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Drops with rows in the raw tables but no ``raw.drops`` row: their last load died after a commit.

    Such rows are neither the drop's old state nor its new one, so the warehouse must not be published until the
    drop is loaded again (``defs/publish.py``)."""
    rows = " UNION ".join(
        f"SELECT drop_id FROM {t.qualified}" + (" WHERE stage = 'ingest'" if t is tables.QUARANTINE else "")
        for t in tables.RAW_TABLES
        if t is not tables.DROPS
    )
    found = con.execute(f"SELECT drop_id FROM ({rows}) EXCEPT SELECT drop_id FROM {tables.DROPS.qualified}").fetchall()
    return sorted(r[0] for r in found)


def reconcile_drop(wh: Warehouse, drop_id: str) -> tuple[bool, dict[str, int]]:
    """Compare what the reader counted (kept in raw.drops) with the rows the tables hold for the drop."""
    row = wh.con.execute(
        f"SELECT records_read, events_read FROM {tables.DROPS.qualified} WHERE drop_id = ?", [drop_id]
    ).fetchone()
    if row is None:
        return False, {}
    records_read, events_read = row
    n = {
        t.name: wh.count(t, "drop_id = ?", [drop_id])
        for t in (tables.SESSIONS, tables.RATINGS, tables.ASKS, tables.ASSIGNMENTS, tables.EVENTS, tables.EVAL_SCORES)
    }
    q_records = wh.count(tables.QUARANTINE, "drop_id = ? AND stage = 'ingest' AND record_type <> 'event'", [drop_id])
    q_events = wh.count(tables.QUARANTINE, "drop_id = ? AND stage = 'ingest' AND record_type = 'event'", [drop_id])
    accepted = n["sessions"] + n["ratings"] + n["asks"] + n["assignments"] + n["eval_scores"]
    facts = {
        "records_read": records_read,
        "records_accepted": accepted,
        "records_quarantined": q_records,
        "events_read": events_read,
        "events_accepted": n["events"],
        "events_quarantined": q_events,
    }
    ok = records_read == accepted + q_records and events_read == n["events"] + q_events
    return ok, facts
