"""The agreement watch: the model's (and the LLM judge's) agreement with people per window and arm, after the
models asset, and the check that warns when the newest window falls below the long run
(``modeling/agreement_history.py``)."""

import math

import dagster as dg
import polars as pl

from ... import tables
from ...modeling.agreement_history import (
    POOLED,
    WARNING_MEASURES,
    WHAT_IT_MEANS,
    WHAT_TO_DO,
    WINDOW_RATINGS,
    agreement_rows,
    describe_fall,
    load_history,
    load_rated,
    newest_below,
    newest_falls,
)
from ..markdown import markdown_table
from ..metadata import significant
from ..resources import WarehouseResource
from ..specs import key, table_spec

INPUTS = [tables.PREDICTIONS, tables.STAGING_SESSIONS, tables.STAGING_ASSIGNMENTS, tables.JUDGE_SCORES]
NEWEST_SQL = f"""
SELECT experiment, variant, measure, value, ci_low, ci_high, n_ratings, long_run_value, long_run_ci_low,
       long_run_ci_high, below_long_run
FROM {tables.AGREEMENT_HISTORY.qualified}
WHERE window_index = (SELECT max(window_index) FROM {tables.AGREEMENT_HISTORY.qualified})
ORDER BY experiment <> 'all', experiment, variant, measure"""


@dg.asset(**table_spec(tables.AGREEMENT_HISTORY, INPUTS, "modeling"))
def agreement_history(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    """Per window (a week, or every N ratings) and arm: the model's out-of-fold r, its MSE against the constant's,
    its calibration slope and, where the LLM judge ran, its kappa and r against people, each with an interval and
    the long run over the earlier windows."""
    with warehouse.warehouse() as wh:
        rated, arms, no_start = load_rated(wh)
        rows = agreement_rows(rated, arms)
        wh.replace(tables.AGREEMENT_HISTORY, rows, nan_as_null=True)  # undefined statistics as NULL, the note says why
        newest = wh.frame(NEWEST_SQL)
    metadata: dict = {"dagster/row_count": len(rows), "rated_sessions": rated.height}
    if no_start:
        metadata["left_out_no_start_time"] = no_start
    if not rows:
        reason = "skipped: no rated session with a cross-fit prediction and a start time (see modeling/predictions)"
        context.log.warning(reason)
        return dg.MaterializeResult(metadata={**metadata, "skipped": reason})
    newest_index = max(r.window_index for r in rows)
    headline = next(
        (r for r in rows if r.window_index == newest_index and r.experiment == POOLED and r.measure == "oof_r"), None
    )
    metadata.update(
        {
            "window_kind": rows[0].window_kind,
            "window_ratings": WINDOW_RATINGS,
            "windows": newest_index + 1,
            "newest_window_start": f"{max(r.window_start for r in rows):%Y-%m-%d %H:%M}",
            "below_long_run_newest": len(newest_below(rows)),
            "newest_window": dg.MetadataValue.md(markdown_table(newest, max_rows=40)),
        }
    )
    if headline is not None and math.isfinite(headline.value):  # numeric: the UI plots it over runs
        metadata["newest_oof_r"] = significant(headline.value)
    return dg.MaterializeResult(metadata=metadata)


@dg.asset_check(
    asset=key(tables.AGREEMENT_HISTORY),
    blocking=False,
    description=(
        "Does the model still agree with people? Warns when, in the newest window, the 95 % interval of the model's"
        f" out-of-fold r or of the LLM judge's kappa ({', '.join(WARNING_MEASURES)}) of any arm lies wholly below"
        " the interval of the same measure over every earlier window (ci_high < long_run_ci_low). "
        + WHAT_IT_MEANS
        + " What to do: "
        + WHAT_TO_DO
    ),
)
def model_still_agrees_with_people(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        rows = load_history(wh)
    falls = newest_falls(rows)
    below = newest_below(rows)
    if falls:
        finding = "; ".join(describe_fall(r) for r in falls[:10]) + ". " + WHAT_IT_MEANS
    elif not rows:
        finding = "nothing to watch yet: no rated session has both a cross-fit prediction and a start time"
    elif all(r.below_long_run is None for r in rows if r.window_index == max(x.window_index for x in rows)):
        finding = "one window so far, or too few ratings in the newest: no long run to compare it with yet"
    else:
        finding = "no measure of the newest window falls below its long run"
    shown = pl.DataFrame(
        [
            {
                "experiment": r.experiment,
                "variant": r.variant,
                "measure": r.measure,
                "value": r.value,
                "ci_high": r.ci_high,
                "long_run_ci_low": r.long_run_ci_low,
                "n_ratings": r.n_ratings,
                "warns": r.measure in WARNING_MEASURES,
            }
            for r in below
        ]
    )
    return dg.AssetCheckResult(
        passed=not falls,
        severity=dg.AssetCheckSeverity.WARN,
        description=finding,
        metadata={
            "falls": len(falls),
            "below_long_run_any_measure": len(below),
            "windows": 1 + max((r.window_index for r in rows), default=-1),
            **({"below": dg.MetadataValue.md(markdown_table(shown, max_rows=30))} if below else {}),
            "what_it_means": dg.MetadataValue.text(WHAT_IT_MEANS),
            "what_to_do": dg.MetadataValue.text(WHAT_TO_DO),
        },
    )
