"""estimates.ask_policy: where to ask for ratings, and the exported files the agent platform evaluates."""

from pathlib import Path

import dagster as dg

from ... import tables
from ...estimates.ask_policy import (
    POLICY_DIR,
    policy_frame,
    policy_from_warehouse,
    policy_strata_column,
    write_policy,
)
from ..markdown import markdown_table
from ..metadata import significant
from ..resources import WarehouseResource
from ..specs import table_spec
from .resources import EstimatesResource


@dg.asset(
    **table_spec(
        tables.ASK_POLICY,
        [
            tables.EVENT_FEATURES,
            tables.STAGING_SESSIONS,
            tables.SESSION_LABELS,
            tables.PREDICTIONS,
            tables.SESSION_ASKS,
            tables.SESSION_FEATURES,
        ],
        "estimates",
    )
)
def ask_policy(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource
) -> dg.MaterializeResult:
    """The ask policy at the budget ``PULSE_ASK_BUDGET`` (unset: the default budget; ``pulse ask --budget N`` for
    another), written to the table and, for the platform and the rating service, to
    PULSE_HOME/ask_policy/ask_policy.json and ask_policy.py."""
    with warehouse.warehouse() as wh:
        column = policy_strata_column(estimates.experiments_file().path)
        policy, why_not = policy_from_warehouse(wh.con, estimates.ask_budget, strata_column=column)
        if policy is None:
            wh.replace(tables.ASK_POLICY, [])
            context.log.warning(why_not)
            return dg.MaterializeResult(metadata={"dagster/row_count": 0, "skipped": why_not})
        frame = policy_frame(policy)
        wh.replace(tables.ASK_POLICY, frame, nan_as_null=True)
    json_path, py_path = write_policy(policy, Path(estimates.home) / POLICY_DIR)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": frame.height,
            "budget_per_day": significant(policy.budget_per_day),
            "expected_asks_per_day": significant(policy.expected_asks_per_day),
            "policy_version": policy.version,
            **(
                {"expected_ratings_per_day": significant(policy.expected_ratings_per_day)}
                if policy.expected_ratings_per_day is not None
                else {}
            ),
            "fitted_on_ratings": policy.fitted_on_ratings,
            "form": policy.form,
            "policy_file": dg.MetadataValue.path(str(json_path)),
            "reference_function": dg.MetadataValue.path(str(py_path)),
            **({"note": policy.note} if policy.note else {}),
            "terms": dg.MetadataValue.md(markdown_table(frame.select("model", "term", "transform", "coefficient"))),
        }
    )
