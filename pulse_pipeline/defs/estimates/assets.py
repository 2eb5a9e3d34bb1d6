"""Estimates: per experiment and treatment-vs-control comparison, every method's effect and its diagnostics."""

from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl

from ... import tables
from ...estimates.effects import ArmData, Settings, compare
from ...estimates.experiments import experiments, read_controls
from ...modeling.crossfit import insample_predict
from ...modeling.data import load_modeling_data
from ...settings import EstimateSettings, estimate_settings
from ...stats.multitest import holm
from ...warehouse import nan_to_null
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import SESSION_FEATURES_KEY, key, table_spec


class EstimatesResource(dg.ConfigurableResource):
    """Settings of the estimates stage: ``PULSE_HOME/experiments.toml`` (control arms and intended splits),
    ``PULSE_HOME/benchmarks.csv`` (benchmark score differences), and the numbers of ``settings.EstimateSettings``
    (``PULSE_SHIFT_AUC``, ``PULSE_WIDTH_TOLERANCE``, ``PULSE_SEGMENT_MIN_RATINGS``, ``PULSE_TARGET_EFFECT``,
    ``PULSE_BENCHMARK_MIN_RATINGS``; what each sets is listed in ``settings.py``).
    """

    experiments_path: str
    benchmarks_path: str = ""
    auc_threshold: float = EstimateSettings.auc_threshold
    tolerance: float = EstimateSettings.tolerance
    segment_min_ratings: int = EstimateSettings.segment_min_ratings
    target_effect: float = EstimateSettings.target_effect
    benchmark_min_ratings: int = EstimateSettings.benchmark_min_ratings


def estimates_resource(home_root: Path) -> EstimatesResource:
    settings = estimate_settings()
    return EstimatesResource(
        experiments_path=str(home_root / "experiments.toml"),
        benchmarks_path=str(home_root / "benchmarks.csv"),
        auc_threshold=settings.auc_threshold,
        tolerance=settings.tolerance,
        segment_min_ratings=settings.segment_min_ratings,
        target_effect=settings.target_effect,
        benchmark_min_ratings=settings.benchmark_min_ratings,
    )


def _arm(name: str, sel: pl.DataFrame, X: np.ndarray, row_of: dict, ins: dict | None) -> ArmData:
    rated = sel.filter(pl.col("labeled"))
    unrated = sel.filter(~pl.col("labeled"))

    def rows(frame: pl.DataFrame) -> np.ndarray:
        return X[[row_of[s] for s in frame["session_id"]]] if frame.height else np.empty((0, X.shape[1]))

    def insample(frame: pl.DataFrame) -> np.ndarray | None:
        return None if ins is None else np.array([ins[s] for s in frame["session_id"]], dtype=float)

    return ArmData(
        name,
        rated["label"].to_numpy().astype(float),
        rated["prediction"].to_numpy().astype(float),
        unrated["prediction"].to_numpy().astype(float),
        rows(rated),
        rows(unrated),
        insample(rated),
        insample(unrated),
    )


def _row(exp, treatment, r, diag, arms) -> tuple:
    t, c = arms
    stars = [None if v is None or np.isnan(v) else 4 * v for v in (r.effect, r.ci_low, r.ci_high)]
    return (
        exp.name,
        treatment,
        exp.control,
        r.method,
        r.effect,
        r.se,
        r.ci_low,
        r.ci_high,
        r.p_value,
        None,  # p_holm, filled in once every comparison of the run is known
        *stars,
        len(t.y),
        len(c.y),
        len(t.f_unlabeled),
        len(c.f_unlabeled),
        r.lambda_treatment,
        r.lambda_control,
        diag["oof_rho"],
        diag["auc"],
        r.width_vs_naive,
        diag["best_width_theory"],
        r.valid,
        r.flags,
        "; ".join(x for x in (exp.note, r.note) if x) or None,
    )


P_VALUE = tables.EXPERIMENT_EFFECTS.column_names.index("p_value")
P_HOLM = tables.EXPERIMENT_EFFECTS.column_names.index("p_holm")
METHOD = tables.EXPERIMENT_EFFECTS.column_names.index("method")


def with_holm(rows: list[tuple]) -> list[tuple]:
    """Fill ``p_holm``: each method's p-values Holm-adjusted across every comparison of the run.

    Per method, because the methods are alternative answers to the same question, not further questions.
    """
    out = [list(r) for r in rows]
    for method in {r[METHOD] for r in out}:
        idx = [i for i, r in enumerate(out) if r[METHOD] == method]
        p = np.array([np.nan if out[i][P_VALUE] is None else out[i][P_VALUE] for i in idx], dtype=float)
        for i, q in zip(idx, holm(p), strict=True):
            out[i][P_HOLM] = None if np.isnan(q) else float(q)
    return [tuple(r) for r in out]


@dg.asset(
    **table_spec(
        tables.EXPERIMENT_EFFECTS, [tables.PREDICTIONS, tables.STAGING_ASSIGNMENTS, SESSION_FEATURES_KEY], "estimates"
    )
)
def experiment_effects(context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource):
    settings = Settings(auc_threshold=estimates.auc_threshold, tolerance=estimates.tolerance)
    out: list[tuple] = []
    with warehouse.warehouse() as wh:
        data = load_modeling_data(wh)
        frame = wh.frame("""
            SELECT a.session_id, a.experiment, a.variant, p.labeled, p.label, p.prediction
            FROM staging.assignments a JOIN modeling.predictions p USING (session_id)""")
        wh.con.execute("DELETE FROM estimates.experiment_effects")
        if frame.height == 0:
            reason = "skipped: no cross-fit predictions for assigned sessions (see modeling/predictions)"
            context.log.warning(reason)
            return dg.MaterializeResult(metadata={"skipped": reason})
        row_of = {s: i for i, s in enumerate(data.session_ids)}
        chosen = wh.con.execute("SELECT DISTINCT model FROM modeling.cv_metrics WHERE chosen").fetchone()
        ins = None
        if chosen:  # the paper's way, only to show what it does: one model fit on every label, then PPI
            lab = data.labeled
            fit = insample_predict(data.X[lab], data.y[lab], data.X[~lab], chosen[0])
            ins = dict(zip(data.session_ids[lab], (fit.oof - 1) / 4, strict=True))
            ins.update(zip(data.session_ids[~lab], (fit.unlabeled - 1) / 4, strict=True))
        arms_by_exp = {e: sorted(g["variant"].unique().to_list()) for (e,), g in frame.group_by("experiment")}
        for exp in experiments(arms_by_exp, read_controls(Path(estimates.experiments_path))):
            sub = frame.filter(pl.col("experiment") == exp.name)
            if not exp.treatments:
                note = f"single-arm experiment (only {exp.control!r}): nothing to compare"
                out.append((exp.name, None, exp.control, "none", *[None] * 19, False, None, note))
                continue
            control = _arm(exp.control, sub.filter(pl.col("variant") == exp.control), data.X, row_of, ins)
            for treatment in exp.treatments:
                context.log.info(f"{exp.name}: {treatment} vs {exp.control}")
                treat = _arm(treatment, sub.filter(pl.col("variant") == treatment), data.X, row_of, ins)
                rows, diag = compare(treat, control, settings)
                out.extend(_row(exp, treatment, r, diag, (treat, control)) for r in rows)
        out = nan_to_null(with_holm(out))  # undefined statistics as NULL, the note says why
        wh.insert_rows(tables.EXPERIMENT_EFFECTS, out)
        headline = wh.frame("""
            SELECT experiment, treatment, control, method, round(effect, 4) AS effect,
                   '[' || round(ci_low, 4) || ', ' || round(ci_high, 4) || ']' AS ci95, round(p_value, 4) AS p,
                   round(width_vs_naive, 2) AS width_vs_naive, flags
            FROM estimates.experiment_effects ORDER BY experiment, treatment, method""")
    flagged = sum(1 for r in out if r[-2])
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(out),
            "flagged_rows": flagged,
            "effects": dg.MetadataValue.md(markdown_table(headline, max_rows=60)),
        }
    )


@dg.asset_check(
    asset=key(tables.EXPERIMENT_EFFECTS),
    blocking=False,
    description="Warns when a valid method's interval is narrower than theory allows.",
)
def intervals_are_not_too_good(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse(publish_after=False) as wh:
        rows = wh.con.execute("""
            SELECT experiment, treatment, method FROM estimates.experiment_effects
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
    replications: int = 1000
    seed: int = 0
    workers: int = 2


@dg.asset(
    key=key(tables.COVERAGE_VALIDATION),
    description=tables.COVERAGE_VALIDATION.description,
    group_name="validation",  # off the default schedule and automation: run it with `pulse validate`
    kinds={"duckdb"},
)
def coverage_validation(context: dg.AssetExecutionContext, config: ValidationConfig, warehouse: WarehouseResource):
    """The estimators' coverage over replications of the synthetic generator (same code as the pipeline)."""
    from ...estimates.validation import check_targets, validate

    frame = validate(config.replications, seed=config.seed, workers=config.workers, progress=context.log.info)
    unmet = check_targets(frame)
    with warehouse.warehouse() as wh:
        wh.replace_rows(tables.COVERAGE_VALIDATION, frame)
    return dg.MaterializeResult(
        metadata={
            "replications": config.replications,
            "targets_unmet": "; ".join(unmet) or "none",
            "coverage": dg.MetadataValue.md(markdown_table(frame, max_rows=30)),
        }
    )
