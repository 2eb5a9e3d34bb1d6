"""Checks at the staging → features boundary (the counts are computed in ``features/checks.py``)."""

import dagster as dg

from ... import tables
from ...features import checks
from ...features.wide import feature_columns
from ..resources import WarehouseResource
from ..specs import SESSION_FEATURES_KEY, key
from .resources import AnnotatorResource


@dg.asset_check(
    asset=key(tables.USER_TEXT),
    blocking=True,
    description="Every staged session's user messages, one row each (positions 0 to n - 1), and no other session's.",
)
def user_text_covers_messages(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        bad = checks.user_text_violations(wh)
    return dg.AssetCheckResult(passed=bad == 0, metadata={"violations": bad})


@dg.asset_check(
    asset=key(tables.EVENT_FEATURES),
    blocking=True,
    description="Exactly one row per staged session, and no negative count.",
)
def event_features_cover_sessions(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        bad = checks.event_feature_violations(wh)
    return dg.AssetCheckResult(passed=bad == 0, metadata={"violations": bad})


@dg.asset_check(
    asset=key(tables.ANNOTATIONS),
    blocking=True,
    description="The chosen annotator labelled every staged session once, with a known status.",
)
def annotations_cover_sessions(warehouse: WarehouseResource, annotator: AnnotatorResource) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        bad = checks.annotation_violations(wh, annotator.annotator)
        failed = checks.failed_annotations(wh, annotator.annotator)
    return dg.AssetCheckResult(
        passed=bad == 0, metadata={"violations": bad, "failed_sessions": failed}, severity=dg.AssetCheckSeverity.ERROR
    )


@dg.asset_check(
    asset=SESSION_FEATURES_KEY,
    blocking=True,
    description="One row per staged session, and every 0/1 column holds only 0, 1 or NULL.",
)
def session_features_shape(warehouse: WarehouseResource, annotator: AnnotatorResource) -> dg.AssetCheckResult:
    rubric = annotator.rubric()
    with warehouse.warehouse() as wh:
        bad = checks.session_feature_violations(wh, rubric)
    return dg.AssetCheckResult(
        passed=bad == 0, metadata={"violations": bad, "annotated_columns": len(feature_columns(rubric))}
    )
