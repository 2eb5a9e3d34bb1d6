"""Cross-validation (the paper's Table 2) and cross-fit predictions (what PPI needs) of one family.

Two different jobs share one fold loop, the cross-validation engine's (``cv.py``: folds, ``fit_folds``, metrics),
which Table 2 and the stack use too:

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

import numpy as np
from sklearn.pipeline import Pipeline

from . import cv
from .cv import (
    METRICS,
    MIN_LABELED,
    TEXT_FAMILY,
    TEXT_SCORE,
    CrossFit,
    CVResult,
    Metric,
    SeedMetrics,
    check_family,
    check_text,
    checked_unlabeled,
    checked_xy,
    effective_k,
    pearson,
)
from .families import FAMILIES, make_model
from .text import TextFeature, fit_text_regression
from .threads import native_threads
from .user_ratings import UserRatings
from .workers import forest_threads

__all__ = [
    "METRICS",
    "MIN_LABELED",
    "TEXT_FAMILY",
    "TEXT_SCORE",
    "CVResult",
    "CrossFit",
    "Metric",
    "SeedMetrics",
    "choose_family",
    "cross_validate",
    "crossfit_predict",
    "effective_k",
    "insample_predict",
    "oof_violations",
    "pearson",
]
"""The names other modules (the studies, discovery, the benches) import from here; the engine is ``cv.py``."""


def _checked_inputs(
    X_labeled: np.ndarray, y: np.ndarray, X_unlabeled: np.ndarray | None, family: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The labeled rows, their labels and the unlabeled rows as float arrays, after every input check."""
    check_family(family)
    X, y = checked_xy(X_labeled, y)
    return X, y, checked_unlabeled(X_unlabeled, X.shape[1])


def cross_validate(
    X: np.ndarray,
    y: np.ndarray,
    family: str,
    k: int = 5,
    seeds: Sequence[int] = (42, 43, 44, 45, 46),
    threads: int | None = None,
    text: TextFeature | None = None,
    users: UserRatings | None = None,
    columns: dict[str, np.ndarray] | None = None,
) -> CVResult:
    """Repeated k-fold cross-validation of ``family`` on the labeled rows (see the module docstring for formulas).

    For each seed: KFold(k, shuffle=True, random_state=seed), model ``make_model(family, random_state=seed)``,
    metrics on the pooled out-of-fold predictions. Returns per-seed metrics, their mean and sd (ddof=1) across
    seeds, and the first seed's out-of-fold predictions. A seed whose predictions (or labels) are constant gets
    Pearson NaN and a note instead of an error; the summary of a metric with any NaN seed is NaN.
    ``threads``: native threads per fit (None: PULSE_MODEL_THREADS). ``text``: the labeled rows' text (rows in
    the order of ``X``); the tabular families then get the nested text score as one more column, and the family
    "text" (which needs it) is the text ridge alone. Each seed's text scores are computed once and shared by every
    family given the same ``text``. ``users``: who rated (``user_ratings.UserRatings``), the user columns.
    """
    check_family(family)
    X, y = checked_xy(X, y)
    check_text(family, text)
    run = cv.cross_validate_families(
        X, y, [family], k, seeds, threads, text, workers=1, users=users, columns=columns
    )  # in this process
    return run.result(family, y)


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
    users: UserRatings | None = None,
    columns: dict[str, np.ndarray] | None = None,
) -> CrossFit:
    """Cross-fit predictions for every session: the only predictions valid for prediction-powered inference.

    Labeled row i gets f_{fold(i)}(x_i), the prediction of the model trained on the other k-1 folds; unlabeled
    row j gets (1/k) sum_f f_f(x_j), the mean of the k fold models (no unlabeled row was in any training set).
    With fewer than 2k labeled rows k drops to max(2, n // 2) (``note`` says so); fewer than 4 -> ValueError.
    ``threads``: native threads per fit and predict (None: PULSE_MODEL_THREADS). ``text``: the sessions' text
    (``text.labeled`` rows in the order of ``X_labeled``, ``text.unlabeled`` in that of ``X_unlabeled``); with it
    the tabular families get the nested text score as one more column (see ``cv.fit_folds``), the family "text" is
    the ridge alone, and ``train_index_by_fold`` lists every label each fold's prediction used, text included.
    ``users``: who rated (``user_ratings.UserRatings``, rows as ``X_labeled`` / ``X_unlabeled``); with it the
    tabular families read the user columns too (before the text score), and their labels join
    ``train_index_by_fold``.
    """
    X, y, Xu = _checked_inputs(X_labeled, y, X_unlabeled, family)
    check_text(family, text)
    if text is not None and text.unlabeled.shape[0] != Xu.shape[0]:
        raise ValueError(f"the text has {text.unlabeled.shape[0]} unlabeled rows but X_unlabeled has {Xu.shape[0]}")
    k_used, note = effective_k(y.shape[0], k)
    if users is not None and users.unlabeled.shape[0] != Xu.shape[0]:
        raise ValueError(f"the users have {users.unlabeled.shape[0]} unlabeled rows but X_unlabeled has {Xu.shape[0]}")
    folds = cv.outer_folds(y, k_used, seed, text, users)
    with native_threads(threads) as n:
        fit = cv.fit_folds(
            X, y, Xu, family, folds, seed, n, False, True, forest_threads(len(y)), (columns or {}).get(family)
        )
    return cv.crossfit_from_folds(fit, folds, y, Xu.shape[0], seed, note)


def insample_predict(
    X_labeled: np.ndarray,
    y: np.ndarray,
    X_unlabeled: np.ndarray | None,
    family: str,
    seed: int = 42,
    threads: int | None = None,
    text: TextFeature | None = None,
    columns: dict[str, np.ndarray] | None = None,
) -> CrossFit:
    """INVALID BY DESIGN, for the comparison the estimates stage shows: one model fit on all labels predicts
    every session, including the rated ones whose labels it was trained on.

    Its residuals y - f on rated sessions are too small, so a PPI interval built on them is too narrow and misses
    the truth (research notes, section 5: coverage 0 of 60). Returned as a one-fold ``CrossFit`` whose only model
    was trained on every labeled row, so ``oof_violations`` reports all n rows. With ``text``, the text score is
    that of one ridge fitted on every label too (the family "text" is that ridge).
    """
    X, y, Xu = _checked_inputs(X_labeled, y, X_unlabeled, family)
    check_text(family, text)
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
            ignored = cv.ignored_text_column(X.shape[1], text is not None, len(y))
            reads = (columns or {}).get(family)
            model = make_model(family, seed, n_threads, forest_threads(len(y)), ignore_column=ignored, columns=reads)
            model.fit(X, y)
            fitted, unlabeled, models = model.predict(X), cv.predict_unlabeled(model, Xu, None), (model,)
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
