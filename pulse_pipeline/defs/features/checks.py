"""Checks at the staging → features boundary."""

import dagster as dg

from ... import tables
from ..resources import WarehouseResource
from ..specs import SESSION_FEATURES_KEY, key
from .resources import AnnotatorResource


def _violations(warehouse: WarehouseResource, sql: str, params: list | None = None) -> int:
    with warehouse.warehouse(publish_after=False) as wh:
        return wh.con.execute(sql, params or []).fetchone()[0]


@dg.asset_check(
    asset=key(tables.EVENT_FEATURES),
    blocking=True,
    description="Exactly one row per staged session, and no negative count.",
)
def event_features_cover_sessions(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    bad = _violations(
        warehouse,
        """
        SELECT (SELECT count(*) FROM staging.sessions s ANTI JOIN features.event_features f USING (session_id))
             + (SELECT count(*) - count(DISTINCT session_id) FROM features.event_features)
             + (SELECT count(*) FROM features.event_features WHERE least(user_message_count, shell_commands,
                   failed_commands, test_runs, test_failures, file_edits) < 0 OR test_failures > test_runs)""",
    )
    return dg.AssetCheckResult(passed=bad == 0, metadata={"violations": bad})


@dg.asset_check(
    asset=key(tables.ANNOTATIONS),
    blocking=True,
    description="The chosen annotator labelled every staged session once, with a known status.",
)
def annotations_cover_sessions(warehouse: WarehouseResource, annotator: AnnotatorResource) -> dg.AssetCheckResult:
    name = annotator.annotator
    with warehouse.warehouse(publish_after=False) as wh:
        bad = wh.con.execute(
            """
            WITH mine AS (SELECT * FROM features.annotations WHERE annotator = ? AND prompt_version =
                          (SELECT max(prompt_version) FROM features.annotations WHERE annotator = ?))
            SELECT (SELECT count(*) FROM staging.sessions s ANTI JOIN mine USING (session_id))
                 + (SELECT count(*) - count(DISTINCT session_id) FROM mine)
                 + (SELECT count(*) FROM mine WHERE status NOT IN ('ok', 'truncated', 'failed', 'skipped'))""",
            [name, name],
        ).fetchone()[0]
        failed = wh.count(tables.ANNOTATIONS, "annotator = ? AND status = 'failed'", [name])
    return dg.AssetCheckResult(
        passed=bad == 0, metadata={"violations": bad, "failed_sessions": failed}, severity=dg.AssetCheckSeverity.ERROR
    )


@dg.asset_check(
    asset=SESSION_FEATURES_KEY,
    blocking=True,
    description="One row per staged session, and every 0/1 column holds only 0, 1 or NULL.",
)
def session_features_shape(warehouse: WarehouseResource, annotator: AnnotatorResource) -> dg.AssetCheckResult:
    from ...features.wide import feature_columns

    cols = feature_columns(annotator.rubric())
    not_binary = " + ".join(f'count(*) FILTER (WHERE "{c}" NOT IN (0, 1))' for c in cols) or "0"
    bad = _violations(
        warehouse,
        f"""
        SELECT (SELECT count(*) FROM staging.sessions) - count(DISTINCT session_id)
             + (count(*) - count(DISTINCT session_id)) + {not_binary}
        FROM features.session_features""",
    )
    return dg.AssetCheckResult(passed=bad == 0, metadata={"violations": bad, "annotated_columns": len(cols)})


feature_checks = [event_features_cover_sessions, annotations_cover_sessions, session_features_shape]
