"""What the feature tables must hold, counted as violations (0: the table is sound). The Dagster asset checks in
``defs/features/checks.py`` report these counts."""

from __future__ import annotations

from .. import tables
from ..warehouse import Warehouse
from .annotation import STATUSES
from .rubric import Rubric
from .wide import feature_columns


def event_feature_violations(wh: Warehouse) -> int:
    """Staged sessions without a row, sessions with more than one, and rows with a negative count or more failed
    tests than test runs."""
    return wh.con.execute(
        """
        SELECT (SELECT count(*) FROM staging.sessions s ANTI JOIN features.event_features f USING (session_id))
             + (SELECT count(*) - count(DISTINCT session_id) FROM features.event_features)
             + (SELECT count(*) FROM features.event_features WHERE least(user_message_count, shell_commands,
                   failed_commands, test_runs, test_failures, file_edits) < 0 OR test_failures > test_runs)"""
    ).fetchone()[0]


def annotation_violations(wh: Warehouse, annotator: str) -> int:
    """For ``annotator``'s latest prompt version: staged sessions it did not label, sessions labelled more than
    once, and rows whose status is not one of ``annotation.STATUSES``."""
    known = ", ".join(f"'{s}'" for s in STATUSES)
    return wh.con.execute(
        f"""
        WITH mine AS (SELECT * FROM features.annotations WHERE annotator = ? AND prompt_version =
                      (SELECT max(prompt_version) FROM features.annotations WHERE annotator = ?))
        SELECT (SELECT count(*) FROM staging.sessions s ANTI JOIN mine USING (session_id))
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
        SELECT (SELECT count(*) FROM staging.sessions) - count(DISTINCT session_id)
             + (count(*) - count(DISTINCT session_id)) + {not_binary}
        FROM features.session_features"""
    ).fetchone()[0]
