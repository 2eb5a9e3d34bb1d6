"""Which model family predicts the ratings best: the rows of ``modeling.cv_metrics`` (the paper's Table 2).

Every configured family is cross-validated on the rated sessions (``stack.cross_validate_all``, the same numbers as
``crossfit.cross_validate``: k folds x seeds, metrics pooled over the held-out folds, then mean and sd over seeds),
with the stack of them (``stack.py``) when ``stack`` is configured, and one is chosen (``crossfit.choose_family``).

The honest floor: Table 2 also has the constant predictor (each fold predicted by the training folds' mean rating,
model ``constant``, never chosen). With fewer than ``FLOOR_MAX_LABELS`` rated sessions a family can do worse than
the mean; when every family's (and the stack's) mean out-of-fold MSE exceeds the constant's,
``ModelComparison.floor`` says so and the estimates stage, which reads the same rows (``load_floor``), sets PPI's
lambda to 0: the PPI estimate is then the naive one, with the naive interval. Above ``FLOOR_MAX_LABELS`` PPI++'s
own lambda-hat already shrinks a useless prediction's weight towards 0 (its noise is small with many labels).

The LLM judge, when it ran, is scored against the same ratings without cross-validation, because nothing is fit:
over rated sessions with an ``ok`` answer,

    MSE = mean (likert - stars)^2,   MAE = mean |likert - stars|,   r = Pearson(likert, stars).

An undefined statistic (the sd over a single seed, r of a constant) is NaN here and NULL in the table: the writer
stores it with ``nan_as_null``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import polars as pl

from .. import tables
from ..contract import nan_to_null, to_frame
from ..warehouse import Warehouse
from .crossfit import TEXT_FAMILY, CVResult, choose_family
from .data import ModelingData
from .families import SENTIMENT, family_columns
from .stack import BASELINE, CONSTANT, STACK, SeedFits, cross_validate_keeping
from .text import TextFeature
from .user_ratings import USER_COLUMNS

MIN_RATED_SESSIONS = 10
"""Fewer rated sessions than this: no model is cross-validated, and the modeling tables are left empty."""

FLOOR_MAX_LABELS = 300
"""Below this many rated sessions, predictions that lose to the constant (every family's out-of-fold MSE above the
constant's) set PPI's lambda to 0. lambda-hat = Cov(Y, f) / Var(f) (about) has sampling sd ~ sd(Y) / (sd(f) sqrt(n))
for an f unrelated to Y: with 60 labels it is ~2.2x what it is with 300, so with few labels PPI++ picks a
clearly positive lambda from noise alone, and a useless f then only adds variance."""

MIN_SEEDS = 2
"""Fewest cross-validation seeds ``seeds_for`` keeps (when more are configured): an sd over seeds needs two."""


def seeds_for(n_rated: int, seeds: Sequence[int], seed_rows: int) -> tuple[int, ...]:
    """The first of ``seeds`` to cross-validate ``n_rated`` rated sessions with: as many as keep
    seeds x n_rated <= ``seed_rows``, at least ``MIN_SEEDS``, at most all of them (``seed_rows`` 0: all of them).

    Why: the seeds only average out which rows fall in which fold, and that noise shrinks as the ratings grow (the
    sd over seeds of a family's r goes like 1/sqrt(n_rated)), while each seed costs k fits of every family, the
    costliest part of the modeling step (a forest's fit grows faster than n_rated). The standard error of the mean
    over s seeds, sd_1 sqrt(n_1 / n) / sqrt(s), stays at or below that of the paper's 5 seeds on 1 837 ratings
    as long as s x n >= 5 x 1 837 = 9 185: the default 10 000 keeps the paper's protocol, 5 seeds, up to 2 000
    rated sessions, and at 18 000 (ten times the paper's) 2 seeds give half the paper's standard error."""
    seeds = tuple(seeds)
    if seed_rows <= 0:
        return seeds
    fit = max(MIN_SEEDS, seed_rows // max(1, n_rated))
    return seeds[: max(1, min(len(seeds), fit))]


JUDGE_AGREEMENT_SQL = f"""
SELECT j.model, count(*) AS n, avg((j.likert_score - l.label_stars) ^ 2) AS mse,
       avg(abs(j.likert_score - l.label_stars)) AS mae, corr(j.likert_score, l.label_stars) AS pearson
FROM {tables.JUDGE_SCORES.qualified} j JOIN {tables.SESSION_LABELS.qualified} l USING (session_id)
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
    floor: str | None = None  # why PPI's lambda goes to 0 (every family lost to the constant), or None
    kept: SeedFits | None = None  # the fits of seed ``keep_seed``, for the cross-fit to reuse (``compare_models``)


def load_judge_agreement(wh: Warehouse) -> pl.DataFrame:
    """Per judge model: rated sessions scored (``n``), ``mse``, ``mae`` and ``pearson`` against the ratings."""
    return wh.frame(JUDGE_AGREEMENT_SQL)


def floor_reason(rows: Sequence[CVMetricRow]) -> str | None:
    """Why the predictions are no better than the constant, from Table 2's rows, or None when some family (or the
    stack) beats it or there are ``FLOOR_MAX_LABELS`` rated sessions or more.

    The rule: n_labeled < FLOOR_MAX_LABELS and min over families of mean MSE >= the constant's mean MSE."""
    mse = {r.model: r for r in rows if r.source == "cross_validation" and r.metric == "mse" and r.mean is not None}
    constant = mse.get(CONSTANT)
    others = [r.mean for m, r in mse.items() if m != CONSTANT]
    if constant is None or not others or constant.n_labeled >= FLOOR_MAX_LABELS or min(others) < constant.mean:
        return None
    return (
        f"every family's out-of-fold MSE (best {min(others):.4f}) exceeds the constant's ({constant.mean:.4f}) "
        f"with {constant.n_labeled} rated sessions (< {FLOOR_MAX_LABELS}): PPI uses lambda = 0, the naive estimate"
    )


def load_floor(wh: Warehouse) -> str | None:
    """``floor_reason`` of the stored ``modeling.cv_metrics`` (what the estimates stage reads)."""
    rows = [CVMetricRow(**r) for r in wh.frame(f"SELECT * FROM {tables.CV_METRICS.qualified}").iter_rows(named=True)]
    return floor_reason(rows)


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
    keep_seed: int | None = None,
    seed_rows: int = 0,
) -> ModelComparison:
    """Cross-validate each family (and the stack of them when ``families`` holds ``stack``) on the rated sessions,
    choose one by ``choose_by``, add the constant's rows (never chosen) and the judge's. With ``keep_seed`` (one of
    the seeds used), ``kept`` holds that seed's fits for ``predictions.crossfit_tables`` to reuse. ``seed_rows``:
    use the first ``seeds_for(n_rated, seeds, seed_rows)`` of ``seeds`` (0: every one).

    With fewer than ``MIN_RATED_SESSIONS`` rated sessions nothing is fit: no rows, and ``skipped`` says why.
    """
    n_rated = int(data.labeled.sum())
    if n_rated < MIN_RATED_SESSIONS:
        reason = (
            f"skipped: {n_rated} rated sessions, at least {MIN_RATED_SESSIONS} are needed to cross-validate a model"
        )
        return ModelComparison([], None, reason)
    X, y = data.X[data.labeled], data.y[data.labeled]
    seeds = seeds_for(n_rated, seeds, seed_rows)
    text = data.text_feature()  # None when no session has user text
    if text is not None:  # cross-validation scores the rated rows only; the workers need not get the rest
        text = TextFeature(text.labeled, text.unlabeled[:0], word_columns=text.word_columns)
    users = data.user_feature()  # None when no user has two rated sessions: no user column
    if users is not None:  # cross-validation gives the rated rows alone their user columns
        users = replace(users, unlabeled=users.unlabeled[:0])
        say(f"user columns ({', '.join(USER_COLUMNS)}): {len(users.user_ids)} users")
    base = [f for f in families if f not in (STACK, BASELINE)]
    if TEXT_FAMILY in base and text is None:
        say("skipping the text family: no session has user text")
        base.remove(TEXT_FAMILY)
    columns = family_columns(data.feature_names)
    if SENTIMENT in base and SENTIMENT not in columns:
        say("skipping the sentiment family: the features have no sentiment column")
        base.remove(SENTIMENT)
    stacked = " and their stack" if STACK in families and len(base) >= 2 else ""
    say(f"cross-validating {', '.join(base)}{stacked} on {n_rated} rated sessions ({len(seeds)} seeds)")
    results, kept = cross_validate_keeping(
        X,
        y,
        base,
        k=folds,
        seeds=seeds,
        stack=STACK in families,
        text=text,
        keep_seed=keep_seed,
        columns=columns,
        baseline=BASELINE in families,
        users=users,
    )
    chosen = choose_family([r for r in results if r.family != CONSTANT], by=choose_by)
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
    return ModelComparison(rows + judge_metric_rows(judge_agreement), chosen, floor=floor_reason(rows), kept=kept)


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
