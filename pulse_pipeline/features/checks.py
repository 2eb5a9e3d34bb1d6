"""What the feature tables must hold, counted as violations (0: the table is sound). The Dagster asset checks in
``defs/features/checks.py`` report these counts."""

from __future__ import annotations

from .. import tables
from ..warehouse import Warehouse
from .annotation import STATUSES
from .rubric import Rubric
from .wide import feature_columns


def user_text_violations(wh: Warehouse) -> int:
    """Staged sessions whose rows are not their user messages one for one (as many rows as ``message`` actions with
    source ``user`` in their events, positions 0 to n - 1 each once), plus rows of sessions no longer staged."""
    sessions, events, text = tables.STAGING_SESSIONS.qualified, tables.EVENTS.qualified, tables.USER_TEXT.qualified
    return wh.con.execute(
        f"""
        WITH expected AS (
            SELECT s.session_id, count(e.record_key) AS n
            FROM {sessions} s LEFT JOIN {events} e
                ON e.record_key = s.record_key AND e.kind = 'action' AND e.name = 'message' AND e.source = 'user'
            GROUP BY s.session_id
        ), held AS (
            SELECT session_id, count(*) AS n, count(DISTINCT position) AS positions, min(position) AS first,
                max(position) AS last
            FROM {text} GROUP BY session_id
        )
        SELECT (SELECT count(*) FROM expected x LEFT JOIN held h USING (session_id)
                WHERE coalesce(h.n, 0) <> x.n OR h.positions <> h.n OR h.first <> 0 OR h.last <> h.n - 1)
             + (SELECT count(*) FROM {text} ANTI JOIN {sessions} USING (session_id))"""
    ).fetchone()[0]


def event_feature_violations(wh: Warehouse) -> int:
    """Staged sessions without a row, sessions with more than one, and rows with a negative count or more failed
    tests than test runs."""
    sessions, rows = tables.STAGING_SESSIONS.qualified, tables.EVENT_FEATURES.qualified
    return wh.con.execute(
        f"""
        SELECT (SELECT count(*) FROM {sessions} s ANTI JOIN {rows} f USING (session_id))
             + (SELECT count(*) - count(DISTINCT session_id) FROM {rows})
             + (SELECT count(*) FROM {rows} WHERE least(user_message_count, shell_commands,
                   failed_commands, test_runs, test_failures, file_edits) < 0 OR test_failures > test_runs)"""
    ).fetchone()[0]


def annotation_violations(wh: Warehouse, annotator: str) -> int:
    """For ``annotator``'s latest prompt version: staged sessions it did not label, sessions labelled more than
    once, and rows whose status is not one of ``annotation.STATUSES``."""
    known = ", ".join(f"'{s}'" for s in STATUSES)
    return wh.con.execute(
        f"""
        WITH mine AS (SELECT * FROM {tables.ANNOTATIONS.qualified} WHERE annotator = ? AND prompt_version =
                      (SELECT max(prompt_version) FROM {tables.ANNOTATIONS.qualified} WHERE annotator = ?))
        SELECT (SELECT count(*) FROM {tables.STAGING_SESSIONS.qualified} s ANTI JOIN mine USING (session_id))
             + (SELECT count(*) - count(DISTINCT session_id) FROM mine)
             + (SELECT count(*) FROM mine WHERE status NOT IN ({known}))""",
        [annotator, annotator],
    ).fetchone()[0]


def failed_annotations(wh: Warehouse, annotator: str) -> int:
    """Sessions ``annotator`` could not answer (status ``failed``), over all its prompt versions."""
    return wh.count(tables.ANNOTATIONS, "annotator = ? AND status = 'failed'", [annotator])


def session_feature_violations(wh: Warehouse, rubric: Rubric) -> int:
    """Staged sessions without a row in the wide table, sessions with more than one, and 0/1 cells holding
    anything but 0, 1 or NULL."""
    not_binary = " + ".join(f'count(*) FILTER (WHERE "{c}" NOT IN (0, 1))' for c in feature_columns(rubric)) or "0"
    return wh.con.execute(
        f"""
        SELECT (SELECT count(*) FROM {tables.STAGING_SESSIONS.qualified}) - count(DISTINCT session_id)
             + (count(*) - count(DISTINCT session_id)) + {not_binary}
        FROM {tables.SESSION_FEATURES.qualified}"""
    ).fetchone()[0]
