"""Checks at the features → modeling boundary."""

import dagster as dg

from ... import tables
from ..resources import WarehouseResource
from ..specs import key

# A rated session whose prediction came from a fold model trained on it: valid cross-fitting has none.
OOF_VIOLATIONS_SQL = """
SELECT count(*) FROM modeling.predictions p
WHERE p.labeled AND (p.fold IS NULL OR EXISTS (
    SELECT 1 FROM modeling.fold_training t WHERE t.model = p.model AND t.fold = p.fold AND t.session_id = p.session_id))
"""


@dg.asset_check(
    asset=key(tables.PREDICTIONS),
    blocking=True,
    description="No rated session's prediction came from a model trained on its rating (field notes §5).",
)
def predictions_are_out_of_fold(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse(publish_after=False) as wh:
        bad = wh.con.execute(OOF_VIOLATIONS_SQL).fetchone()[0]
        unlabeled_with_fold = wh.con.execute(
            "SELECT count(*) FROM modeling.predictions WHERE NOT labeled AND fold IS NOT NULL"
        ).fetchone()[0]
    return dg.AssetCheckResult(
        passed=bad == 0 and unlabeled_with_fold == 0,
        metadata={"in_sample_predictions": bad, "unrated_with_a_fold": unlabeled_with_fold},
    )


modeling_checks = [predictions_are_out_of_fold]
