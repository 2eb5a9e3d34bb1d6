"""Estimates: per experiment and treatment-vs-control comparison, every method's effect and its diagnostics."""

import math
from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from ... import tables
from ...estimates.experiment_effects import EffectRow, experiment_effect_rows
from ...estimates.methods import Method
from ...modeling.comparison import load_floor
from ...modeling.insample import load_insample_predictions
from ..markdown import markdown_table
from ..metadata import rounded, significant
from ..resources import WarehouseResource
from ..specs import key, table_spec
from .resources import EstimatesResource
from .sessions import SESSIONS_DEPS, run_sessions

# The headline figures the UI plots over materializations (numeric metadata under the same key each time): the naive
# reference and the prediction-powered methods that can be valid (ppi_insample never is; the bootstrap repeats the
# naive effect), each with its effect, interval and width relative to naive.
HEADLINE_METHODS = (Method.NAIVE_WELCH, Method.PPI, Method.CROSSPPI, Method.AIPW)
HEADLINE_STATISTICS = ("effect", "ci_low", "ci_high", "width_vs_naive")
# 15 numbers per comparison (naive's width is 1 by definition): a few comparisons keep the metadata to tens of entries.
MAX_HEADLINE_COMPARISONS = 6


def headline_metadata(rows: Sequence[EffectRow]) -> dict[str, dg.MetadataValue]:
    """The headline figures of the first ``MAX_HEADLINE_COMPARISONS`` comparisons (alphabetically, so the same ones
    each time), as float metadata keyed ``<experiment>: <treatment> vs <control> / <method> <statistic>``, to
    ``metadata.SIGNIFICANT`` significant digits (the table keeps every digit).

    An undefined figure (too few ratings) has no entry: a plot shows a gap rather than a made-up point. When
    comparisons are left out, a text entry says how many; every one is in the table and the ``effects`` entry."""
    comparisons = sorted({(r.experiment, r.treatment, r.control) for r in rows if r.treatment is not None})
    shown = set(comparisons[:MAX_HEADLINE_COMPARISONS])
    metadata: dict[str, dg.MetadataValue] = {}
    for r in rows:
        if (r.experiment, r.treatment, r.control) not in shown or r.method not in HEADLINE_METHODS:
            continue
        statistics = HEADLINE_STATISTICS[:-1] if r.method == Method.NAIVE_WELCH else HEADLINE_STATISTICS
        for statistic in statistics:
            value = getattr(r, statistic)
            if value is None or not math.isfinite(value):
                continue
            name = f"{r.experiment}: {r.treatment} vs {r.control} / {r.method} {statistic}"
            metadata[name] = dg.MetadataValue.float(significant(value))
    if len(comparisons) > len(shown):
        metadata["headline comparisons"] = dg.MetadataValue.text(
            f"figures of the first {len(shown)} of {len(comparisons)} comparisons; every one is in the table"
        )
    return metadata


@dg.asset(**table_spec(tables.EXPERIMENT_EFFECTS, [*SESSIONS_DEPS, tables.INSAMPLE_PREDICTIONS], "estimates"))
def experiment_effects(context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource):
    with warehouse.warehouse() as wh:
        # the honest floor: predictions no better than the mean rating (modeling/cv_metrics) -> ppi's lambda = 0
        floor = load_floor(wh)
        settings = estimates.effect_settings(Path(warehouse.database).parent, floor, context.log.info)
        sessions = run_sessions(context.run_id, warehouse.database, wh, estimates.arms_from())
        # the in-sample model's predictions (ppi_insample), made by the model stage; None: no row (the stack, or
        # no model chosen, has no single in-sample model)
        insample = load_insample_predictions(wh)
        strata, default_strata = estimates.strata()  # the session column of ppi_stratified's strata
        rows = experiment_effect_rows(
            sessions,
            estimates.controls(),
            settings,
            insample,
            progress=context.log.info,
            units=estimates.units(),
            strata=strata,
            default_strata=default_strata,
        )
        wh.replace(tables.EXPERIMENT_EFFECTS, rows, nan_as_null=True)  # undefined statistics as NULL, the note says why
        if not rows:
            reason = "skipped: no cross-fit predictions for assigned sessions (see modeling/predictions)"
            context.log.warning(reason)
            return dg.MaterializeResult(metadata={"skipped": reason})
        headline = wh.frame(f"""
            SELECT experiment, treatment, control, method, round(effect, 4) AS effect,
                   '[' || round(ci_low, 4) || ', ' || round(ci_high, 4) || ']' AS ci95, round(p_value, 4) AS p,
                   round(width_vs_naive, 2) AS width_vs_naive, flags
            FROM {tables.EXPERIMENT_EFFECTS.qualified} ORDER BY experiment, treatment, method""")
    return dg.MaterializeResult(
        metadata=rounded(
            {
                "dagster/row_count": len(rows),
                "flagged_rows": sum(1 for r in rows if r.flags),
                **estimates.experiments_metadata(),
                **({"floor": floor} if floor else {}),
                "effects": dg.MetadataValue.md(markdown_table(headline, max_rows=60)),
                **headline_metadata(rows),
            }
        )
    )


@dg.asset_check(
    asset=key(tables.EXPERIMENT_EFFECTS),
    blocking=False,
    description="Warns when a valid method's interval is narrower than theory allows.",
)
def intervals_are_not_too_good(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        rows = wh.con.execute(f"""
            SELECT experiment, treatment, method FROM {tables.EXPERIMENT_EFFECTS.qualified}
            WHERE valid AND flags LIKE '%predictions may have seen the labels%'""").fetchall()
    return dg.AssetCheckResult(
        passed=not rows,
        severity=dg.AssetCheckSeverity.WARN,
        description=("predictions may have seen the labels: " + ", ".join("/".join(map(str, r)) for r in rows))
        if rows
        else None,
        metadata={"flagged": len(rows)},
    )


class ValidationConfig(dg.Config):
    replications: int = 500
    seed: int = 0
    workers: int = 2
    scenarios: list[str] | None = None  # names in studies.coverage.SCENARIOS; None: its DEFAULT_SCENARIOS


@dg.asset(
    key=key(tables.COVERAGE_VALIDATION),
    description=tables.COVERAGE_VALIDATION.description,
    group_name="validation",  # off the default schedule and automation: run it with `pulse validate`
    kinds={"duckdb"},
)
def coverage_validation(context: dg.AssetExecutionContext, config: ValidationConfig, warehouse: WarehouseResource):
    """The estimators' coverage over replications of the synthetic generator (same code as the pipeline)."""
    from ... import progress
    from ...studies.coverage import DEFAULT_SCENARIOS, check_targets, validate

    scenarios = config.scenarios or list(DEFAULT_SCENARIOS)
    replications = config.replications * len(scenarios)
    with progress.bar("replications", unit="rep", total=replications) as advance:  # only under a CLI command
        frame = validate(
            config.replications, scenarios, config.seed, config.workers, progress=context.log.info, advance=advance
        )
    unmet = check_targets(frame, scenarios)
    with warehouse.warehouse() as wh:
        wh.replace(tables.COVERAGE_VALIDATION, frame)
    return dg.MaterializeResult(
        metadata={
            "replications": config.replications,
            "scenarios": ", ".join(scenarios),
            "targets_unmet": "; ".join(unmet) or "none",
            "coverage": dg.MetadataValue.md(markdown_table(frame, max_rows=30)),
        }
    )
