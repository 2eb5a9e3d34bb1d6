"""Staging's steps: each rebuilds one staging table from its query in ``sql.py`` (the rules are there), or
refreshes it for the sessions whose record changed (``build_work_segments``, through ``incremental.py``)."""

from __future__ import annotations

from .. import tables
from ..incremental import Refreshed, code_digest, refreshing
from ..warehouse import Warehouse
from .sql import (
    ASSIGNMENT_QUARANTINE_SQL,
    ASSIGNMENTS_SQL,
    RATING_QUARANTINE_SQL,
    REPLACED_SESSIONS_SQL,
    REPLACEMENTS_SQL,
    RESOLVED_RATINGS,
    SEGMENT_RATINGS_SQL,
    SESSION_ASKS_SQL,
    SESSION_LABELS_SQL,
    SESSION_VERSIONS_SQL,
    SESSIONS_SQL,
    resolved_sql,
    work_segments_sql,
)


def build_sessions(wh: Warehouse) -> int:
    return wh.replace_table(tables.STAGING_SESSIONS, SESSIONS_SQL)


def build_replaced_sessions(wh: Warehouse) -> int:
    """Rebuild ``staging.replaced_sessions`` (after ``build_sessions``); returns its rows."""
    return wh.replace_table(tables.REPLACED_SESSIONS, REPLACED_SESSIONS_SQL)


def replacements(wh: Warehouse) -> list[tuple[str, str, int]]:
    """(replacing drop, replaced drop, sessions) of ``staging.replaced_sessions``, largest first."""
    return [(a, b, int(n)) for a, b, n in wh.con.execute(REPLACEMENTS_SQL).fetchall()]


def build_work_segments(wh: Warehouse) -> Refreshed:
    """Refresh the work segments of the sessions whose record changed (``incremental.py``)."""
    t = tables.WORK_SEGMENTS
    with refreshing(wh, t.qualified, SESSION_VERSIONS_SQL, code_digest(text=work_segments_sql(""))) as refresh:
        refresh.delete(wh, t)
        wh.con.execute(f"INSERT INTO {t.qualified} ({', '.join(t.column_names)}) {work_segments_sql(refresh.sessions)}")
    return Refreshed(wh.count(t), refresh.touched)


def _replace_staging_quarantine(wh: Warehouse, record_type: str, select_sql: str) -> int:
    wh.con.execute(
        f"DELETE FROM {tables.QUARANTINE.qualified} WHERE stage = 'staging' AND record_type = ?", [record_type]
    )
    wh.con.execute(f"INSERT INTO {tables.QUARANTINE.qualified} {select_sql}")
    return wh.count(tables.QUARANTINE, "stage = 'staging' AND record_type = ?", [record_type])


def build_segment_ratings(wh: Warehouse) -> tuple[int, int]:
    """Rows written, and ratings quarantined because they join nothing."""
    wh.con.execute(f"CREATE OR REPLACE TEMP TABLE {RESOLVED_RATINGS} AS {resolved_sql()}")
    n = wh.replace_table(tables.SEGMENT_RATINGS, SEGMENT_RATINGS_SQL)
    quarantined = _replace_staging_quarantine(wh, "rating", RATING_QUARANTINE_SQL)
    wh.con.execute(f"DROP TABLE {RESOLVED_RATINGS}")
    return n, quarantined


def build_session_asks(wh: Warehouse) -> int:
    """One row per asked session (``raw.asks`` rows that join a session; the others are quarantined with the
    ratings by ``build_segment_ratings``)."""
    return wh.replace_table(tables.SESSION_ASKS, SESSION_ASKS_SQL)


def build_session_labels(wh: Warehouse) -> int:
    return wh.replace_table(tables.SESSION_LABELS, SESSION_LABELS_SQL)


def build_assignments(wh: Warehouse) -> tuple[int, int]:
    n = wh.replace_table(tables.STAGING_ASSIGNMENTS, ASSIGNMENTS_SQL)
    return n, _replace_staging_quarantine(wh, "assignment", ASSIGNMENT_QUARANTINE_SQL)
