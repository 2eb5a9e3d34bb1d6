"""Cross-validation (the paper's Table 2) and cross-fit predictions (what PPI needs), in plain numpy/scikit-learn.

Two different jobs share one fold loop:

- ``cross_validate`` measures how well a family predicts a rating it has not seen: for each seed s,
  ``KFold(k, shuffle=True, random_state=s)``; fit on the k-1 training folds, predict the held-out fold; pool the k
  held-out folds' predictions f_i (every labeled row once) and compute, on the pool (as the paper does),

      MSE = mean_i (y_i - f_i)^2,   MAE = mean_i |y_i - f_i|,   r = cov(y, f) / (sd(y) sd(f))   (Pearson).

  Each metric is then summarized over seeds as mean and sample sd (ddof=1): the paper's "0.29 +- 0.01".
- ``crossfit_predict`` makes the predictions the estimates stage consumes. A prediction-powered estimate
  rectifies the predictions with the labels, mean(Y - f) on rated sessions; if f was trained on those same labels
  the residuals are too small, the interval too narrow and its coverage collapses (research notes, section 5:
  in-sample predictions covered the true effect 0 times in 60; 5-fold cross-fitting 93-95 %). So every rated
  session's prediction comes from the fold model that did not see its rating, and every unrated session gets the
  mean of the k fold models' predictions (cross-prediction-powered inference, Zrnic & Candes 2023).
  ``train_index_by_fold`` records which rows trained each fold model so ``oof_violations`` can prove it.

The model of seed s is ``make_model(family, random_state=s)`` in every fold, so ``crossfit_predict(seed=42)``
reproduces the out-of-fold predictions of ``cross_validate``'s seed 42 exactly.

The text of what users wrote (``text.py``) enters through ``text``, a ``text.TextFeature``: the tabular families get
one extra column, the nested cross-fit text score (a training row of fold k carries its inner cross-fit score, a
held-out or unlabeled row the score of the ridge fitted on all of fold k's training rows), and the family "text" is
the ridge alone (a held-out row's prediction is its outer score). Every label a fold's text scores used joins that
fold's ``train_index_by_fold``, so ``oof_violations`` sees a leak through the text too.

Every fit and predict runs inside ``threads.native_threads``: ``threads`` native threads (None: the
PULSE_MODEL_THREADS setting), so two processes fitting at once do not fight over the cores (``threads.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import KFold
from sklearn.pipeline import Pipeline

from .families import FAMILIES, make_model
from .text import FoldTextScores, TextFeature, fit_text_regression
from .threads import native_threads
from .workers import forest_threads

METRICS: tuple[str, ...] = ("mse", "mae", "pearson")
"""The metrics of ``CVResult.metrics``, in order (the paper's Table 2 rows)."""

TEXT_FAMILY = "text"
"""The family whose prediction is the text ridge's out-of-fold score alone (``text.py``)."""

TEXT_SCORE = "text_score"
"""The name of the extra column the tabular families get when the text is given."""

MIN_LABELED = 4
"""Fewest labeled rows cross-fitting accepts: two folds of two rows each."""


@dataclass(frozen=True)
class Metric:
    """One metric over the CV seeds: ``mean`` and the sample sd (ddof=1; NaN with a single seed)."""

    name: str
    mean: float
    sd: float


@dataclass(frozen=True)
class SeedMetrics:
    """The pooled out-of-fold metrics of one seed; ``note`` says why ``pearson`` is NaN when it is."""

    seed: int
    mse: float
    mae: float
    pearson: float
    note: str | None = None


@dataclass(frozen=True, eq=False)
class CVResult:
    """What ``cross_validate`` measured for one family (``eq=False``: it holds an array).

    ``metrics`` follow ``METRICS``; ``per_seed`` follows the seeds given; ``oof`` holds the pooled out-of-fold
    predictions of the first seed (row order of ``y``); ``k`` is the number of folds actually used and
    ``notes`` say when it was reduced or a metric is undefined.
    """

    family: str
    n_labeled: int
    metrics: tuple[Metric, ...]
    per_seed: tuple[SeedMetrics, ...]
    oof: np.ndarray
    k: int = 5
    notes: tuple[str, ...] = ()

    def metric(self, name: str) -> Metric:
        """The summary of metric ``name`` (one of ``METRICS``)."""
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"no metric {name!r}; known: {', '.join(METRICS)}")


@dataclass(frozen=True, eq=False)
class CrossFit:
    """Predictions for every session plus the evidence of how they were made (``eq=False``: it holds arrays).

    ``oof[i]``, the prediction for labeled row i, is that of ``models[fold[i]]``, whose training rows (indices
    into the labeled rows) are ``train_index_by_fold[fold[i]]``; ``unlabeled[j]``, the prediction for unlabeled
    row j, is the mean over ``models``. With the text, ``text_score[i]`` is the text score labeled row i carried
    when it was predicted (the column ``TEXT_SCORE`` appended to its features; the family "text" predicts it
    itself) and ``text_folds`` are the nested scores with their training rows; ``models`` is empty for "text".
    ``method`` is "crossfit" (valid for PPI) or "insample" (``insample_predict``: invalid, for comparison only).
    """

    family: str
    k: int
    seed: int
    oof: np.ndarray
    fold: np.ndarray
    unlabeled: np.ndarray
    train_index_by_fold: tuple[np.ndarray, ...]
    models: tuple[Pipeline, ...]
    method: str = "crossfit"
    note: str | None = None
    text_score: np.ndarray | None = None
    text_folds: tuple[FoldTextScores, ...] = ()


# --------------------------------------------------------------------------------------------------------
# input checks


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; known families: {', '.join(FAMILIES)}")


def _as_xy(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (rows x features); got shape {X.shape}")
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D array of labels; got shape {y.shape}")
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} labels; pass the labeled rows of X only")
    if not np.all(np.isfinite(y)):
        bad = int(np.count_nonzero(~np.isfinite(y)))
        raise ValueError(f"y has {bad} NaN/inf labels; pass only rated sessions (NaN marks an unrated session)")
    if np.any(np.isinf(X)):
        raise ValueError("X has infinite values; only NaN (missing, imputed as 0) is accepted")
    return X, y


def _check_text(family: str, text: TextFeature | None) -> None:
    if family == TEXT_FAMILY and text is None:
        raise ValueError(f"the {TEXT_FAMILY!r} family needs the sessions' text: pass text=TextFeature(...)")


def _text_folds(text: TextFeature | None, y: np.ndarray, k: int, seed: int) -> tuple[FoldTextScores, ...] | None:
    return None if text is None else text.scores(y, k, seed)


def _as_unlabeled(X_unlabeled: np.ndarray | None, n_features: int) -> np.ndarray:
    if X_unlabeled is None:
        return np.empty((0, n_features))
    Xu = np.asarray(X_unlabeled, dtype=np.float64)
    if Xu.ndim != 2 or Xu.shape[1] != n_features:
        raise ValueError(f"X_unlabeled must have {n_features} columns like X_labeled; got shape {Xu.shape}")
    return Xu


def _checked_inputs(
    X_labeled: np.ndarray, y: np.ndarray, X_unlabeled: np.ndarray | None, family: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The labeled rows, their labels and the unlabeled rows as float arrays, after every input check."""
    _check_family(family)
    X, y = _as_xy(X_labeled, y)
    return X, y, _as_unlabeled(X_unlabeled, X.shape[1])


def effective_k(n: int, k: int) -> tuple[int, str | None]:
    """The folds to use for ``n`` labeled rows: ``k``, or ``max(2, n // 2)`` when n < 2k (so each held-out fold
    has at least two rows), with a note saying so. Fewer than ``MIN_LABELED`` rows cannot be cross-fit."""
    if k < 2:
        raise ValueError(f"k must be >= 2 folds; got {k}")
    if n < MIN_LABELED:
        raise ValueError(
            f"only {n} labeled sessions: cross-fitting needs at least {MIN_LABELED} (two folds of two), "
            "so no prediction could come from a model that did not see its rating; collect more ratings"
        )
    if n < 2 * k:
        k_used = max(2, n // 2)
        return k_used, f"only {n} labeled sessions (< 2*k = {2 * k}): using k = {k_used} folds instead of {k}"
    return k, None


def pearson(y: np.ndarray, f: np.ndarray) -> tuple[float, str | None]:
    """Pearson r of labels and predictions, or (NaN, why) when either is constant (r is then undefined)."""
    y = np.asarray(y, dtype=np.float64)
    f = np.asarray(f, dtype=np.float64)
    if f.size < 2:
        return math.nan, "Pearson r undefined: fewer than two predictions"
    for values, what in ((f, "the out-of-fold predictions are"), (y, "the labels are")):
        spread = float(np.ptp(values))
        if spread <= 1e-12 * max(1.0, float(np.max(np.abs(values)))):
            return math.nan, f"Pearson r undefined: {what} constant ({float(values[0]):.6g})"
    dy, df = y - y.mean(), f - f.mean()
    return float(np.dot(dy, df) / math.sqrt(float(np.dot(dy, dy)) * float(np.dot(df, df)))), None


def _summary(name: str, values: Sequence[float]) -> Metric:
    v = np.asarray(values, dtype=np.float64)
    if np.any(np.isnan(v)):
        return Metric(name, math.nan, math.nan)
    mean = float(v.mean())
    sd = float(v.std(ddof=1)) if v.size >= 2 else math.nan
    return Metric(name, mean, sd)


# --------------------------------------------------------------------------------------------------------
# the fold loop


def _fit_folds(
    X: np.ndarray,
    y: np.ndarray,
    family: str,
    k: int,
    seed: int,
    keep_models: bool,
    threads: int,
    X_unlabeled: np.ndarray | None = None,
    text_folds: Sequence[FoldTextScores] | None = None,
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...], tuple[Pipeline, ...], np.ndarray, np.ndarray | None]:
    """Out-of-fold predictions, fold ids, the labeled rows each fold's prediction used, the fold models (when
    ``keep_models``), the unlabeled rows' mean prediction over the folds, and the text score each labeled row
    carried (None without text); call it inside ``native_threads(threads)``.

    With ``text_folds`` the folds are theirs (``TextFeature.scores`` makes them with the same KFold), the tabular
    model of fold f is fitted on [X, inner text score] of its training rows and predicts [X, outer text score], and
    the rows of fold f's ``train_index_by_fold`` are its training rows plus every label its text scores used."""
    Xu = np.empty((0, X.shape[1])) if X_unlabeled is None else X_unlabeled
    oof = np.empty(y.shape[0], dtype=np.float64)
    fold = np.full(y.shape[0], -1, dtype=np.int64)
    text_score = None if text_folds is None else np.empty(y.shape[0], dtype=np.float64)
    train_rows: list[np.ndarray] = []
    models: list[Pipeline] = []
    unlabeled: list[np.ndarray] = []
    if text_folds is None:
        splits = list(KFold(n_splits=k, shuffle=True, random_state=seed).split(X))
    else:
        splits = [(t.train_rows, t.held_out_rows) for t in text_folds]
    for f, (train, test) in enumerate(splits):
        model = None
        if text_folds is None:
            model = make_model(family, random_state=seed, threads=threads, forest_jobs=forest_threads(len(y)))
            model.fit(X[train], y[train])
            oof[test] = model.predict(X[test])
            unlabeled.append(model.predict(Xu) if Xu.shape[0] else np.empty(0))
            train_rows.append(train)
        else:
            t = text_folds[f]
            text_score[test] = t.held_out_scores
            train_rows.append(np.union1d(train, t.labels_used))
            if family == TEXT_FAMILY:
                oof[test] = t.held_out_scores
                unlabeled.append(t.unlabeled_scores)
            else:
                model = make_model(family, random_state=seed, threads=threads, forest_jobs=forest_threads(len(y)))
                model.fit(np.column_stack([X[train], t.train_scores]), y[train])
                oof[test] = model.predict(np.column_stack([X[test], t.held_out_scores]))
                has_rows = Xu.shape[0] > 0
                unlabeled.append(model.predict(np.column_stack([Xu, t.unlabeled_scores])) if has_rows else np.empty(0))
        fold[test] = f
        if keep_models and model is not None:
            models.append(model)
    mean_unlabeled = np.mean(np.stack(unlabeled), axis=0) if Xu.shape[0] else np.empty(0, dtype=np.float64)
    return oof, fold, tuple(train_rows), tuple(models), mean_unlabeled, text_score


def _mean_prediction(models: Sequence[Pipeline], X_unlabeled: np.ndarray) -> np.ndarray:
    """(1/m) sum_f f_f(x_j) for every unlabeled row j over the m models (an empty array when there are no rows)."""
    if not X_unlabeled.shape[0]:
        return np.empty(0, dtype=np.float64)
    return np.mean(np.stack([m.predict(X_unlabeled) for m in models]), axis=0)


def cross_validate(
    X: np.ndarray,
    y: np.ndarray,
    family: str,
    k: int = 5,
    seeds: Sequence[int] = (42, 43, 44, 45, 46),
    threads: int | None = None,
    text: TextFeature | None = None,
) -> CVResult:
    """Repeated k-fold cross-validation of ``family`` on the labeled rows (see the module docstring for formulas).

    For each seed: KFold(k, shuffle=True, random_state=seed), model ``make_model(family, random_state=seed)``,
    metrics on the pooled out-of-fold predictions. Returns per-seed metrics, their mean and sd (ddof=1) across
    seeds, and the first seed's out-of-fold predictions. A seed whose predictions (or labels) are constant gets
    Pearson NaN and a note instead of an error; the summary of a metric with any NaN seed is NaN.
    ``threads``: native threads per fit (None: PULSE_MODEL_THREADS). ``text``: the labeled rows' text (rows in
    the order of ``X``); the tabular families then get the nested text score as one more column, and the family
    "text" (which needs it) is the text ridge alone. Each seed's text scores are computed once and shared by every
    family given the same ``text``.
    """
    _check_family(family)
    X, y = _as_xy(X, y)
    _check_text(family, text)
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("cross_validate needs at least one seed")
    k_used, note = effective_k(y.shape[0], k)
    notes: list[str] = [note] if note else []
    per_seed: list[SeedMetrics] = []
    with native_threads(threads) as n:
        oofs = [
            _fit_folds(X, y, family, k_used, seed, False, n, text_folds=_text_folds(text, y, k_used, seed))[0]
            for seed in seeds
        ]
    for seed, oof in zip(seeds, oofs, strict=True):
        err = y - oof
        r, why = pearson(y, oof)
        per_seed.append(SeedMetrics(seed, float(np.mean(err**2)), float(np.mean(np.abs(err))), r, why))
        if why:
            notes.append(f"seed {seed}: {why}")
    metrics = tuple(_summary(name, [getattr(s, name) for s in per_seed]) for name in METRICS)
    return CVResult(family, int(y.shape[0]), metrics, tuple(per_seed), oofs[0], k_used, tuple(notes))


def choose_family(results: Sequence[CVResult], by: str = "pearson") -> CVResult:
    """The best result: highest mean Pearson r (``by="pearson"``) or lowest mean MSE / MAE (``"mse"``, ``"mae"``).

    Ties go to the family listed earlier in ``FAMILIES`` (then to the earlier result); a NaN mean ranks last.
    """
    if by not in METRICS:
        raise ValueError(f"unknown metric {by!r} to choose by; known: {', '.join(METRICS)}")
    if not results:
        raise ValueError("choose_family needs at least one CVResult")

    def key(item: tuple[int, CVResult]) -> tuple[float, int, int]:
        i, result = item
        value = result.metric(by).mean
        score = math.inf if math.isnan(value) else (-value if by == "pearson" else value)
        order = FAMILIES.index(result.family) if result.family in FAMILIES else len(FAMILIES)
        return score, order, i

    return min(enumerate(results), key=key)[1]


def crossfit_predict(
    X_labeled: np.ndarray,
    y: np.ndarray,
    X_unlabeled: np.ndarray | None,
    family: str,
    k: int = 5,
    seed: int = 42,
    threads: int | None = None,
    text: TextFeature | None = None,
) -> CrossFit:
    """Cross-fit predictions for every session: the only predictions valid for prediction-powered inference.

    Labeled row i gets f_{fold(i)}(x_i), the prediction of the model trained on the other k-1 folds; unlabeled
    row j gets (1/k) sum_f f_f(x_j), the mean of the k fold models (no unlabeled row was in any training set).
    With fewer than 2k labeled rows k drops to max(2, n // 2) (``note`` says so); fewer than 4 -> ValueError.
    ``threads``: native threads per fit and predict (None: PULSE_MODEL_THREADS). ``text``: the sessions' text
    (``text.labeled`` rows in the order of ``X_labeled``, ``text.unlabeled`` in that of ``X_unlabeled``); with it
    the tabular families get the nested text score as one more column (see ``_fit_folds``), the family "text" is
    the ridge alone, and ``train_index_by_fold`` lists every label each fold's prediction used, text included.
    """
    X, y, Xu = _checked_inputs(X_labeled, y, X_unlabeled, family)
    _check_text(family, text)
    if text is not None and text.unlabeled.shape[0] != Xu.shape[0]:
        raise ValueError(f"the text has {text.unlabeled.shape[0]} unlabeled rows but X_unlabeled has {Xu.shape[0]}")
    k_used, note = effective_k(y.shape[0], k)
    text_folds = _text_folds(text, y, k_used, seed)
    with native_threads(threads) as n:
        oof, fold, train_rows, models, unlabeled, text_score = _fit_folds(
            X, y, family, k_used, seed, True, n, X_unlabeled=Xu, text_folds=text_folds
        )
    return CrossFit(
        family, k_used, seed, oof, fold, unlabeled, train_rows, models, "crossfit", note, text_score, text_folds or ()
    )


def insample_predict(
    X_labeled: np.ndarray,
    y: np.ndarray,
    X_unlabeled: np.ndarray | None,
    family: str,
    seed: int = 42,
    threads: int | None = None,
    text: TextFeature | None = None,
) -> CrossFit:
    """INVALID BY DESIGN, for the comparison the estimates stage shows: one model fit on all labels predicts
    every session, including the rated ones whose labels it was trained on.

    Its residuals y - f on rated sessions are too small, so a PPI interval built on them is too narrow and misses
    the truth (research notes, section 5: coverage 0 of 60). Returned as a one-fold ``CrossFit`` whose only model
    was trained on every labeled row, so ``oof_violations`` reports all n rows. With ``text``, the text score is
    that of one ridge fitted on every label too (the family "text" is that ridge).
    """
    X, y, Xu = _checked_inputs(X_labeled, y, X_unlabeled, family)
    _check_text(family, text)
    if y.shape[0] < 2:
        raise ValueError(f"only {y.shape[0]} labeled sessions: cannot fit a model")
    models: tuple[Pipeline, ...] = ()
    with native_threads(threads) as n_threads:
        if text is not None:
            ridge = fit_text_regression(text.labeled, y, text.alpha)
            s_l = ridge.predict(text.labeled)
            s_u = ridge.predict(text.unlabeled) if Xu.shape[0] else np.empty(0)
        if family == TEXT_FAMILY:
            fitted, unlabeled = s_l, s_u
        else:
            if text is not None:
                X = np.column_stack([X, s_l])
                Xu = np.column_stack([Xu, s_u]) if Xu.shape[0] else np.empty((0, X.shape[1]))
            model = make_model(family, random_state=seed, threads=n_threads, forest_jobs=forest_threads(len(y)))
            model.fit(X, y)
            fitted, unlabeled, models = model.predict(X), _mean_prediction((model,), Xu), (model,)
    n = y.shape[0]
    return CrossFit(
        family,
        1,
        seed,
        fitted,
        np.zeros(n, dtype=np.int64),
        unlabeled,
        (np.arange(n),),
        models,
        "insample",
        "in-sample predictions: every rated session's prediction saw its rating (invalid for PPI; comparison only)",
    )


def oof_violations(fold_of_labeled: np.ndarray, train_index_by_fold: Sequence[np.ndarray]) -> int:
    """How many labeled rows got their prediction from a model trained on them: #{i : i in train[fold(i)]}.

    0 for a valid cross-fit; n for in-sample predictions. ``fold_of_labeled[i]`` must name a fold in
    ``train_index_by_fold`` (a labeled row without a fold has no valid prediction -> ValueError).
    """
    fold = np.asarray(fold_of_labeled)
    n = fold.shape[0]
    n_folds = len(train_index_by_fold)
    if fold.ndim != 1 or (n and (fold.min() < 0 or fold.max() >= n_folds)):
        raise ValueError(f"fold ids must be a 1-D array of integers in [0, {n_folds}); got {fold!r:.200}")
    violations = 0
    for f, train in enumerate(train_index_by_fold):
        rows = np.asarray(train, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= n):
            raise ValueError(f"fold {f} lists training rows outside [0, {n}): not indices into the labeled rows")
        trained = np.zeros(n, dtype=bool)
        trained[rows] = True
        violations += int(np.count_nonzero(trained & (fold == f)))
    return violations
