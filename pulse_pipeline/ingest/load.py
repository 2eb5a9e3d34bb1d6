"""Loading one drop into the raw tables: delete what the drop wrote before, insert what it holds now."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from .. import tables
from ..warehouse import Warehouse
from .batch import Batch
from .drop import DropTally, drop_row, read_drop

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


def load_drop(wh: Warehouse, drop_id: str, path: Path, progress: Progress | None = None) -> DropTally:
    """Replace the drop's rows in one transaction; memory is bounded by one file of the drop."""
    if not path.exists():
        raise FileNotFoundError(f"drop {drop_id!r}: {path} does not exist (was it moved out of the drop folder?)")
    tally = DropTally()
    wh.con.begin()
    try:
        wh.delete_drop(drop_id)
        for n, batch in enumerate(read_drop(drop_id, path), start=1):
            _insert(wh, batch)
            tally.add(batch)
            if progress and n % 10 == 0:
                progress(f"{drop_id}: {n} files, {tally.records_read} records, {tally.events_read} events read")
        drops = Batch(drop_id)
        drops.add(tables.DROPS, drop_row(drop_id, path, tally))
        _insert(wh, drops)
        wh.con.commit()
    except BaseException:
        wh.con.rollback()
        raise
    return tally


def _insert(wh: Warehouse, batch: Batch) -> None:
    for t in tables.RAW_TABLES:
        if batch.count(t):
            data: pa.Table = batch.arrow(t)
            wh.insert(t, data)


def reconcile_drop(wh: Warehouse, drop_id: str) -> tuple[bool, dict[str, int]]:
    """Compare what the reader counted (kept in raw.drops) with the rows the tables hold for the drop."""
    row = wh.con.execute("SELECT records_read, events_read FROM raw.drops WHERE drop_id = ?", [drop_id]).fetchone()
    if row is None:
        return False, {}
    records_read, events_read = row
    n = {
        t.name: wh.count(t, "drop_id = ?", [drop_id])
        for t in (tables.SESSIONS, tables.RATINGS, tables.ASSIGNMENTS, tables.EVENTS)
    }
    q_records = wh.count(tables.QUARANTINE, "drop_id = ? AND stage = 'ingest' AND record_type <> 'event'", [drop_id])
    q_events = wh.count(tables.QUARANTINE, "drop_id = ? AND stage = 'ingest' AND record_type = 'event'", [drop_id])
    accepted = n["sessions"] + n["ratings"] + n["assignments"]
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
