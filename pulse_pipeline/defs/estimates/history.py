"""Always-valid monitoring: every comparison's effect as of each look day, with the confidence sequence."""

from pathlib import Path

import dagster as dg

from ... import tables
from ...estimates.history import MAX_LOOKS, expected_looks, history_rows, missing_looks, session_days, with_days
from ...modeling.comparison import load_floor
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import key, table_spec
from .resources import EstimatesResource
from .sessions import SESSIONS_DEPS, run_sessions

FIRST_EXCLUSIONS = f"""
    SELECT experiment, treatment, method, count(*) AS looks,
           CAST(min(day) FILTER (WHERE excludes_zero_fixed) AS DATE) AS first_day_fixed_excludes_0,
           CAST(min(day) FILTER (WHERE excludes_zero_cs) AS DATE) AS first_day_cs_excludes_0
    FROM {tables.EFFECT_HISTORY.qualified} WHERE day IS NOT NULL
    GROUP BY ALL ORDER BY experiment, treatment, method"""
"""Per comparison and method: the first look whose fixed interval, and whose confidence sequence, excludes 0."""


@dg.asset(**table_spec(tables.EFFECT_HISTORY, [*SESSIONS_DEPS, tables.STAGING_SESSIONS], "estimates"))
def effect_history(context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource):
    with warehouse.warehouse() as wh:
        # the same settings as experiment_effects, the honest floor included, so the last look is its estimate
        settings = estimates.effect_settings(Path(warehouse.database).parent, load_floor(wh), context.log.info)
        sessions = with_days(
            run_sessions(context.run_id, warehouse.database, wh, estimates.arms_from()), session_days(wh)
        )
        strata, default_strata = estimates.strata()  # ppi_stratified's strata, as experiment_effects'
        rows = history_rows(
            sessions,
            estimates.controls(),
            settings,
            progress=context.log.info,
            units=estimates.units(),
            strata=strata,
            default_strata=default_strata,
        )
        wh.replace(tables.EFFECT_HISTORY, rows, nan_as_null=True)  # undefined statistics as NULL, the note says why
        if not rows:
            reason = "skipped: no cross-fit predictions for assigned sessions (see modeling/predictions)"
            context.log.warning(reason)
            return dg.MaterializeResult(metadata={"skipped": reason})
        first = wh.frame(FIRST_EXCLUSIONS)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            "looks": len({(r.experiment, r.treatment, r.day) for r in rows if r.day is not None}),
            "max_looks_per_comparison": MAX_LOOKS,
            "first_exclusions": dg.MetadataValue.md(markdown_table(first, max_rows=60)),
        }
    )


@dg.asset_check(
    asset=key(tables.EFFECT_HISTORY),
    blocking=False,
    description="Every comparison has a row per method for each look day (each day with data, or per period past"
    f" {MAX_LOOKS} days), and no other days.",
)
def history_reconciles(
    context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource
) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        sessions = with_days(
            run_sessions(context.run.run_id, warehouse.database, wh, estimates.arms_from(), with_features=False),
            session_days(wh),
        )
        expected = expected_looks(sessions, estimates.controls(), units=estimates.units())
        table = wh.frame(
            f"SELECT experiment, treatment, CAST(day AS DATE) AS day, method FROM {tables.EFFECT_HISTORY.qualified}"
        )
    problems = missing_looks(table, expected)
    return dg.AssetCheckResult(
        passed=not problems,
        description="; ".join(problems[:20]) if problems else None,
        metadata={"comparisons": len(expected), "problems": len(problems)},
    )
