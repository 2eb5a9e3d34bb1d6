"""Sessions in batches whose events lie together in storage, so that each batch's query reads only its share of
the events table.

Why: a query joining one batch of sessions to ``raw.events`` used to scan the whole table, every column it reads
(the raw JSON included), for every batch. DuckDB prunes a scan by each block's minimum and maximum, but keeps only
a string's first 8 bytes there, and every record key starts with its drop and file name (``d00:sessions-...``),
so a batch's key range pruned nothing. Read in batches of 2 000, the paper's 36 000 sessions scanned the events 18
times (23 of the heuristic annotator's 44 CPU seconds went to reading transcripts), and ten times the sessions
would scan ten times the events 180 times: quadratic.

How: a load appends each record's events together, so a session's events occupy a short range of row ids
(``rowid``, which a DuckDB table and a DuckLake table both have and both push into the scan as a range filter).
:func:`session_batches` finds each session's range in one scan of one column (``record_key``), orders the sessions
by where their events start and cuts them into batches; a batch's query keeps ``rowid BETWEEN first_row AND
last_row`` next to its join on ``record_key``. The join still decides which events are a session's, so a layout
where they are not together (or a session with no event) costs only speed, never a row; and the row ids are read
in the same transaction as the batches' queries, so they do not move in between.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .. import tables
from ..warehouse import Warehouse


@dataclass(frozen=True)
class Batch:
    """Some sessions, in id order, and the row ids between which all their events lie (in the events relation
    the batches were made for). ``first_row > last_row`` when none of them has an event."""

    session_ids: list[str]
    first_row: int
    last_row: int


def _spans_sql(sessions: str, events: str) -> str:
    return f"""
SELECT s.session_id, min(e.rowid) AS first_row, max(e.rowid) AS last_row
FROM {sessions} s LEFT JOIN {events} e USING (record_key)
GROUP BY s.session_id
ORDER BY first_row NULLS FIRST, s.session_id
"""


def session_batches(
    wh: Warehouse,
    sessions: str,
    size: int,
    events: str | None = None,
    params: Sequence | dict | None = None,
) -> Iterator[Batch]:
    """The sessions of relation ``sessions`` (SQL with ``session_id`` and ``record_key``, e.g. ``staging.sessions``
    rows; ``params`` are its query parameters) in batches of at most ``size``, by where their events start in
    ``events`` (``raw.events`` by default, or a table holding some of its rows)."""
    spans = wh.con.execute(_spans_sql(sessions, events or tables.EVENTS.qualified), params or []).fetchall()
    for start in range(0, len(spans), size):
        part = spans[start : start + size]
        firsts = [first for _, first, _ in part if first is not None]
        lasts = [last for _, _, last in part if last is not None]
        yield Batch(
            sorted(session_id for session_id, _, _ in part),
            min(firsts) if firsts else 0,
            max(lasts) if lasts else -1,
        )
