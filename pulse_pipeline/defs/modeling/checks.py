"""Checks at the features → modeling boundary."""

import dagster as dg

from ... import tables
from ...modeling.predictions import audit_stored_predictions
from ..resources import WarehouseResource
from ..specs import key


@dg.asset_check(
    asset=key(tables.PREDICTIONS),
    blocking=True,
    description="No rated session's prediction, nor its text score, came from a model trained on its rating"
    " (field notes §5).",
)
def predictions_are_out_of_fold(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        audit = audit_stored_predictions(wh)
    return dg.AssetCheckResult(
        passed=audit.passed,
        metadata={
            "in_sample_predictions": audit.in_sample_predictions,
            "unrated_with_a_fold": audit.unrated_with_a_fold,
            "in_sample_text_scores": audit.in_sample_text_scores,
        },
    )
