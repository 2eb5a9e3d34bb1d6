"""What an operator does with whole drops: list them (``pulse drop ls``) and remove one (``pulse drop rm NAME``).

No Dagster here: ``runs.remove_drop`` wraps ``remove_rows`` with the partition, the refresh and the publish.

**Listing** (``drop_states``): each drop the warehouse or the drop folder knows, with the fingerprint it was loaded
with (else its folder's), when it was loaded (its ``raw/drops`` partition's latest materialization, given by the
caller), its sessions and quarantined records (both stages, as ``pulse ingest`` counts them), and its state:

=========================  ===================================================================================
``loaded``                 its rows are whole (``raw.drops`` row) and its folder is as it was loaded
``changed since loading``  its folder was rewritten: the drop sensor (or ``pulse materialize``) loads it again
``not loaded``             in the drop folder, no row yet: waiting for the sensor, or its run failed
``half loaded``            rows without a ``raw.drops`` row: its last load died (nothing is published until it
                           is loaded again, ``ingest/load.unfinished_drops``)
``folder gone``            rows whose folder was removed: they stay (and count) until ``pulse drop rm``
``ids with NUL``           rows an earlier PULSE stored with an id holding a NUL character, on which the lake
                           fails (``ingest/events.NUL_IN_ID``): every run fails until the drop is removed
=========================  ===================================================================================

**Removing** (``remove_rows``), in one transaction: the drop's rows of every raw table (quarantine rows of both
stages), and, from every other table with a ``session_id``, the rows whose id holds a NUL. Why the second: in a
lake an earlier PULSE poisoned, those rows are what every refresh fails on (``incremental.refreshing`` deletes a
changed session's rows with a join on ``session_id``, which DuckLake turns into catalog SQL that a NUL breaks); the
filter used here, ``contains(session_id, chr(0))``, is a function DuckLake does not push into its catalog, and no
current PULSE stores such an id, so nothing else is touched. Their bookkeeping rows (``staging.computed_versions``)
go with them, so the refresh that follows sees those sessions neither staged nor recorded. Every other derived row
of the drop's sessions is removed by that refresh, as after any drop whose sessions left staging.

The drop's folder is moved aside first (``.removing-NAME`` in the drop folder, a name ``list_drops`` and so the
sensor never read), removed once the rows are committed, and moved back if the transaction fails: a drop is
removed whole or not at all, and a folder is never left behind to be ingested again by ``pulse materialize``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from . import tables
from .ingest.drop import drop_key, find_drop, fingerprint, list_drops
from .ingest.load import unfinished_drops
from .ingest.register import STAGING, registering, remove_entry
from .warehouse import Warehouse

REMOVING = ".removing-"  # + the drop's name: a drop folder being removed (never read as a drop)

HOLDS_NUL = "contains({column}, chr(0))"
"""A filter for rows whose ``column`` holds a NUL character that DuckLake evaluates itself, never in catalog SQL."""

ID_COLUMNS: dict[tables.Table, tuple[str, ...]] = {
    tables.SESSIONS: ("session_id", "user_id", "experiment", "variant"),
    tables.EVENTS: ("session_id", "event_id", "cause"),
    tables.RATINGS: ("session_id", "event_id", "rating_id"),
    tables.ASKS: ("session_id", "event_id", "rating_id"),
    tables.ASSIGNMENTS: ("session_id", "experiment", "variant", "user_id"),
    tables.EVAL_SCORES: ("session_id", "event_id", "score_id"),
}
"""The raw columns that hold ids (``ingest/events.read_id``), where an earlier PULSE may have stored a NUL."""


@dataclass(frozen=True)
class DropState:
    """One line of ``pulse drop ls`` (see the module docstring for ``state``)."""

    drop: str
    fingerprint: str | None
    loaded_at: datetime | None
    sessions: int
    quarantined: int
    state: str


@dataclass(frozen=True)
class RemovedRows:
    """What ``remove_rows`` removed: rows by raw table, rows with a NUL id by other table, and the folder."""

    drop: str
    raw_rows: dict[str, int]
    nul_id_rows: dict[str, int]
    folder: Path | None


def folder_of(drops_dir: Path, key: str) -> Path | None:
    """The drop's file or folder in the drop folder (an empty one too), or None."""
    try:
        return find_drop(drops_dir, key)
    except FileNotFoundError:
        return None


def _drops_in_rows(con: duckdb.DuckDBPyConnection) -> dict[str, tuple]:
    """``raw.drops`` rows by drop: (fingerprint,)."""
    return {d: (f,) for d, f in con.execute(f"SELECT drop_id, fingerprint FROM {tables.DROPS.qualified}").fetchall()}


def _counts(con: duckdb.DuckDBPyConnection, t: tables.Table) -> dict[str, int]:
    return dict(con.execute(f"SELECT drop_id, count(*) FROM {t.qualified} GROUP BY drop_id").fetchall())


def drops_with_nul_ids(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Drops whose raw rows hold an id with a NUL character, with how many such rows."""
    found: dict[str, int] = {}
    for t, columns in ID_COLUMNS.items():
        where = " OR ".join(HOLDS_NUL.format(column=c) for c in columns)
        for drop, n in con.execute(f"SELECT drop_id, count(*) FROM {t.qualified} WHERE {where} GROUP BY 1").fetchall():
            found[drop] = found.get(drop, 0) + n
    return found


def known_drops(con: duckdb.DuckDBPyConnection, drops_dir: Path) -> list[str]:
    """Every drop the warehouse holds rows of or the drop folder holds, sorted."""
    in_rows = set(_drops_in_rows(con)) | set(unfinished_drops(con))
    return sorted(in_rows | set(list_drops(drops_dir)))


def drop_states(
    con: duckdb.DuckDBPyConnection, drops_dir: Path, loaded_at: Mapping[str, datetime] | None = None
) -> list[DropState]:
    """Every drop (``known_drops``) with its state (module docstring); ``loaded_at`` maps a drop to its load time."""
    loaded = _drops_in_rows(con)
    half = set(unfinished_drops(con))
    poisoned = drops_with_nul_ids(con)
    sessions = _counts(con, tables.SESSIONS)
    quarantined = _counts(con, tables.QUARANTINE)
    states = []
    for drop in known_drops(con, drops_dir):
        folder = folder_of(drops_dir, drop)
        now = fingerprint(folder) if folder is not None else None
        was = loaded[drop][0] if drop in loaded else None
        if drop in poisoned:
            state = f"ids with NUL ({poisoned[drop]} rows): every run fails until `pulse drop rm {drop}`"
        elif drop in half:
            state = "half loaded: its last load died; ingest it again or remove it"
        elif drop not in loaded:
            state = "not loaded"
        elif folder is None:
            state = "folder gone: its rows stay until `pulse drop rm`"
        elif now != was:
            state = "changed since loading"
        else:
            state = "loaded"
        states.append(
            DropState(
                drop=drop,
                fingerprint=was or now,
                loaded_at=(loaded_at or {}).get(drop),
                sessions=sessions.get(drop, 0),
                quarantined=quarantined.get(drop, 0),
                state=state,
            )
        )
    return states


def resolve(con: duckdb.DuckDBPyConnection, drops_dir: Path, name: str) -> str:
    """The drop ``name`` names (its key, as ``pulse ingest`` printed it, or its file or folder name); ValueError
    naming the known drops when there is none."""
    known = known_drops(con, drops_dir)
    for candidate in (name, drop_key(name)):
        if candidate in known:
            return candidate
    raise ValueError(f"no drop {name!r} in {drops_dir.parent}; its drops: {', '.join(known) or 'none'}")


def remove_rows(wh: Warehouse, drops_dir: Path, drop: str) -> RemovedRows:
    """Remove the drop's rows and its folder (module docstring): one transaction, the folder moved aside meanwhile.

    ``wh`` must have no transaction open. Registrations wait meanwhile (``register.registering``)."""
    con = wh.con
    with registering(drops_dir):
        for leftover in [*drops_dir.glob(f"{REMOVING}*"), *drops_dir.glob(f"{STAGING}*")]:
            remove_entry(leftover)  # a removal or a registration killed half-way: garbage, never a drop
        folder = folder_of(drops_dir, drop)
        aside = None if folder is None else drops_dir / f"{REMOVING}{folder.name}"
        if folder is not None:
            os.rename(folder, aside)
        con.begin()
        try:
            raw_rows = {}
            for t in tables.RAW_TABLES:
                raw_rows[t.qualified] = con.execute(f"DELETE FROM {t.qualified} WHERE drop_id = ?", [drop]).fetchone()[
                    0
                ]
            nul_id_rows = {}
            for t in tables.ALL_TABLES:
                if t in tables.RAW_TABLES or t is tables.LLM_CACHE or "session_id" not in t.column_names:
                    continue
                n = con.execute(f"DELETE FROM {t.qualified} WHERE {HOLDS_NUL.format(column='session_id')}")
                if removed := n.fetchone()[0]:
                    nul_id_rows[t.qualified] = removed
            con.commit()
        except BaseException:
            con.rollback()
            if aside is not None:
                os.rename(aside, folder)
            raise
        if aside is not None:
            remove_entry(aside)
    return RemovedRows(drop=drop, raw_rows=raw_rows, nul_id_rows=nul_id_rows, folder=folder)
