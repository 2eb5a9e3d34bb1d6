"""Guardrails: each comparison's guardrail metrics (cost, duration, ...) against their margins, with a verdict."""

from functools import partial

import dagster as dg

from ... import tables
from ...estimates.guardrail_settings import check_guardrail_metrics, guardrail_metrics, guardrails_for
from ...estimates.guardrails import guardrail_rows, metric_history, missing_rows, numeric_session_columns
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import key, table_spec
from .resources import EstimatesResource
from .sessions import SESSIONS_DEPS, run_sessions

SHOWN = f"""
    SELECT experiment, treatment, guardrail, method, round(relative_effect, 3) AS relative_effect,
           round(relative_ci_low, 3) AS relative_ci_low, round(relative_ci_high, 3) AS relative_ci_high,
           margin, margin_type, verdict
    FROM {tables.GUARDRAILS.qualified} ORDER BY experiment, treatment, guardrail"""


@dg.asset(**table_spec(tables.GUARDRAILS, SESSIONS_DEPS, "estimates"))
def guardrails(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource
) -> dg.MaterializeResult:
    config = estimates.experiments_config()
    with warehouse.warehouse() as wh:
        sessions = run_sessions(context.run_id, warehouse.database, wh, estimates.arms_from())
        # a metric no session column holds stops here in one line naming the file and the key (the preflight
        # checks the rubric's columns; the frame's are the ones that exist)
        check_guardrail_metrics(estimates.experiments_file().path, config, numeric_session_columns(sessions))
        history = metric_history(wh, guardrail_metrics(config))
        rows = guardrail_rows(
            sessions, history, partial(guardrails_for, config), estimates.controls(), units=estimates.units()
        )
        wh.replace(tables.GUARDRAILS, rows, nan_as_null=True)
        shown = wh.frame(SHOWN)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            **{v: sum(1 for r in rows if r.verdict == v) for v in ("pass", "fail", "inconclusive")},
            "cuped": sum(1 for r in rows if r.method == "cuped"),
            "guardrails": dg.MetadataValue.md(markdown_table(shown, max_rows=60)),
            **estimates.experiments_metadata(),
        }
    )


@dg.asset_check(
    asset=key(tables.GUARDRAILS),
    blocking=False,
    description="Every comparison has a row for each of its experiment's guardrails and no other, and no row"
    " counts more sessions with a value than its arms hold.",
)
def guardrails_reconcile(
    context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource
) -> dg.AssetCheckResult:
    config = estimates.experiments_config()
    with warehouse.warehouse() as wh:
        sessions = run_sessions(context.run.run_id, warehouse.database, wh, estimates.arms_from(), with_features=False)
        table = wh.frame(
            f"SELECT experiment, treatment, guardrail, n_treatment, n_control FROM {tables.GUARDRAILS.qualified}"
        )
    problems = missing_rows(table, sessions, partial(guardrails_for, config), estimates.controls())
    return dg.AssetCheckResult(
        passed=not problems,
        description="; ".join(problems[:20]) if problems else None,
        metadata={"rows": table.height, "problems": len(problems)},
    )
