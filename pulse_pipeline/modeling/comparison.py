"""Which model family predicts the ratings best: the rows of ``modeling.cv_metrics`` (the paper's Table 2).

Every configured family is cross-validated on the rated sessions (``crossfit.cross_validate``: k folds x seeds,
metrics pooled over the held-out folds, then mean and sd over seeds) and one is chosen
(``crossfit.choose_family``). The LLM judge, when it ran, is scored against the same ratings without
cross-validation, because nothing is fit: over rated sessions with an ``ok`` answer,

    MSE = mean (likert - stars)^2,   MAE = mean |likert - stars|,   r = Pearson(likert, stars).

An undefined statistic (the sd over a single seed, r of a constant) is NaN here and NULL in the table: the writer
stores it with ``nan_as_null``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from .. import tables
from ..warehouse import Warehouse, nan_to_null, to_frame
from .crossfit import CVResult, choose_family, cross_validate
from .data import ModelingData

MIN_RATED_SESSIONS = 10
"""Fewer rated sessions than this: no model is cross-validated, and the modeling tables are left empty."""

JUDGE_AGREEMENT_SQL = """
SELECT j.model, count(*) AS n, avg((j.likert_score - l.label_stars) ^ 2) AS mse,
       avg(abs(j.likert_score - l.label_stars)) AS mae, corr(j.likert_score, l.label_stars) AS pearson
FROM features.judge_scores j JOIN staging.session_labels l USING (session_id)
WHERE j.status = 'ok' AND j.likert_score IS NOT NULL GROUP BY j.model
"""


@dataclass(frozen=True)
class CVMetricRow:
    """One row of ``modeling.cv_metrics``: one metric of one model (a family, or ``llm_judge:<model>``)."""

    model: str
    metric: str
    mean: float | None
    sd: float | None  # over the CV seeds; None for the judge, which has no seeds
    n_labeled: int
    n_seeds: int
    chosen: bool
    source: str  # "cross_validation" or "llm_judge"


@dataclass(frozen=True)
class ModelComparison:
    """The rows of ``modeling.cv_metrics``, the chosen family's result, or why nothing was compared."""

    rows: list[CVMetricRow]
    chosen: CVResult | None
    skipped: str | None = None


def load_judge_agreement(wh: Warehouse) -> pl.DataFrame:
    """Per judge model: rated sessions scored (``n``), ``mse``, ``mae`` and ``pearson`` against the ratings."""
    return wh.frame(JUDGE_AGREEMENT_SQL)


def load_chosen_family(wh: Warehouse) -> str | None:
    """The family ``modeling.cv_metrics`` marks as chosen; None when no model was compared."""
    chosen = wh.con.execute(f"SELECT DISTINCT model FROM {tables.CV_METRICS.qualified} WHERE chosen").fetchone()
    return None if chosen is None else chosen[0]


def judge_metric_rows(judge_agreement: pl.DataFrame) -> list[CVMetricRow]:
    """The judge's MSE, MAE and Pearson r (``load_judge_agreement``) as ``cv_metrics`` rows of source llm_judge."""
    return [
        CVMetricRow(
            model=f"llm_judge:{judge['model']}",
            metric=metric,
            mean=judge[metric],
            sd=None,
            n_labeled=judge["n"],
            n_seeds=0,
            chosen=False,
            source="llm_judge",
        )
        for judge in judge_agreement.iter_rows(named=True)
        for metric in ("mse", "mae", "pearson")
    ]


def compare_models(
    data: ModelingData,
    judge_agreement: pl.DataFrame,
    families: Sequence[str],
    seeds: Sequence[int],
    folds: int,
    choose_by: str,
    say: Callable[[str], None] = lambda _: None,
) -> ModelComparison:
    """Cross-validate each family on the rated sessions, choose one by ``choose_by`` and add the judge's rows.

    With fewer than ``MIN_RATED_SESSIONS`` rated sessions nothing is fit: no rows, and ``skipped`` says why.
    """
    n_rated = int(data.labeled.sum())
    if n_rated < MIN_RATED_SESSIONS:
        reason = (
            f"skipped: {n_rated} rated sessions, at least {MIN_RATED_SESSIONS} are needed to cross-validate a model"
        )
        return ModelComparison([], None, reason)
    X, y = data.X[data.labeled], data.y[data.labeled]
    results = []
    for family in families:
        say(f"cross-validating {family} on {n_rated} rated sessions ({len(seeds)} seeds)")
        results.append(cross_validate(X, y, family, k=folds, seeds=seeds))
    chosen = choose_family(results, by=choose_by)
    rows = [
        CVMetricRow(
            model=result.family,
            metric=metric.name,
            mean=metric.mean,
            sd=metric.sd,
            n_labeled=result.n_labeled,
            n_seeds=len(seeds),
            chosen=result.family == chosen.family,
            source="cross_validation",
        )
        for result in results
        for metric in result.metrics
    ]
    return ModelComparison(rows + judge_metric_rows(judge_agreement), chosen)


def table_2(rows: Sequence[CVMetricRow]) -> pl.DataFrame:
    """The rows laid out like the paper's Table 2: a row per metric, a column per model, cells 'mean ± sd'
    (just the mean where the sd is undefined), rounded to 3 decimals."""
    metrics = nan_to_null(to_frame(tables.CV_METRICS, list(rows)))
    cells = metrics.with_columns(
        cell=pl.when(pl.col("sd").is_null())
        .then(pl.col("mean").round(3).cast(str))
        .otherwise(pl.format("{} ± {}", pl.col("mean").round(3), pl.col("sd").round(3)))
    )
    return cells.pivot(on="model", index="metric", values="cell", aggregate_function="first")
