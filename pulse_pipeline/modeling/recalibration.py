"""A prediction safe for the methods that take it at face value: the chosen model, recalibrated when it must be.

Why. The model is chosen by its out-of-fold Pearson r, which is blind to scale: a model whose predictions are
three times too spread out, or shifted by a star, has the r of a good one. PPI++ does not mind (it tunes its own
weight lambda-hat ~ Cov(Y, f) / Var(f)), but cross-PPI and AIPW's outcome model take f with lambda = 1. Per arm,
with n rated sessions, N unrated ones, out-of-fold predictions f and fold-mean predictions f~, cross-PPI's
variance is (Zrnic & Candes 2023; ``stats.ppi.crossppi_mean``)

    V(f) = Var(Y - f) / n + Var(f~) / N,      against the naive mean's   Var(Y) / n.

Var(Y - f) = Var(Y) + Var(f) - 2 Cov(Y, f) is at most the out-of-fold MSE (which adds the squared mean error, an
offset cross-PPI removes exactly), so cross-PPI can beat naive only where f's out-of-fold MSE is below about Var(Y),
the constant's out-of-fold MSE; a model that loses to the constant makes cross-PPI wider than naive (one real run:
an ordinal logit with MSE 0.396 against the constant's 0.250 gave 1.24-1.28x the naive width). Among the linear
maps g = a + b f, least squares (b = Cov(Y, f) / Var(f)) minimizes Var(Y - g) = Var(Y) (1 - rho^2), and then

    V(g) = Var(Y) / n * (1 - rho^2 (1 - n / N)),

never above naive while n <= N, whatever the scale of f: cross-PPI with g is PPI with lambda = b, fitted out of
fold. So a prediction fed to a lambda = 1 method is recalibrated by a cross-fitted linear map. One map serves
every arm, though, and in an arm where the model is useless (a small arm's few ratings) Var(Y - g) is still about
Var(Y) + Var(g): cross-PPI therefore also tunes its lambda per arm (``stats.ppi.crossppi_lambda``, which makes it
never wider than the arm's rated mean); AIPW's outcome model keeps lambda = 1 and relies on this map alone.

The map of fold k (``fit_map``): least squares of the label on the chosen model's *level-one* predictions of the
rows of T_k (the training folds of F_k): predictions that saw no label of F_k (a forest's out-of-bag prediction,
the text's inner score, or ``cv.inner_crossfit``'s two half fits; the stack's: its blend weights fitted on one
half of T_k and applied to the other, ``stack_level_one``, since the stack's own blend is already least squares
on the level-one predictions of all of T_k, where a second map would be the identity). The slope is kept at or
above 0 (a negative slope is noise or a model worse than none: b = 0 gives the training folds' mean, the honest
floor). A rated row of F_k gets g_k(M_k(x)), an unrated row the mean over folds (1/K) sum_k g_k(M_k(x)), so no
label predicts itself: fold k's map used the labels of T_k alone, which ``modeling.fold_training`` already lists.
Why linear, not isotonic: the width depends on f only through Var(Y - g) and Var(g~), and a straight line already
brings that to Var(Y) (1 - rho^2) with two parameters; an isotonic map has as many steps as the data allow and
would fit the level-one noise of a few hundred labels.

When (``decide``), on the rated sessions' out-of-fold predictions of the cross-fit that feeds the estimates
(seed 42) and the constant's out-of-fold predictions on the same folds (each fold's training mean):

1. the floor: the model's out-of-fold MSE is not below the constant's: recalibrate (the issue's rule: whatever
   feeds a lambda = 1 method must beat the constant);
2. the scale: the calibration slope b of Y on f (Cox 1958) differs from 1 at the 5 % level,
   ((b - 1) / se(b))^2 > ``SLOPE_CHI2``: recalibrate. Not recalibrating costs (1 - b)^2 Var(f) in Var(Y - f);
   recalibrating a well-scaled model costs only the map's own noise, about Var(Y - f) / n (two parameters fitted
   on the training folds), so the test errs on the cheap side: a well-scaled model is left as it is 95 % of the
   time, and its cross-PPI is then exactly the one before.

Otherwise ``prediction_calibrated`` equals ``prediction``. The choice itself reads every rated label, as the
choice of the family does: one bit, a second-order effect on an interval, not a label predicting itself (every
number a prediction is made of stays out of fold). Nothing here is tuned to a corpus: the rule is the two
inequalities above, the 5 % level is the convention, and the map has no setting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2
from sklearn.model_selection import KFold

from . import cv
from .cv import TEXT_FAMILY, Fold, FoldPredictions
from .stack import BASELINE, BASELINE_MEMBERS, STACK, nnls_weights

SLOPE_CHI2 = float(chi2.ppf(0.95, df=1))
"""The 5 % two-sided critical value of ((b - 1) / se(b))^2, 3.84: the calibration slope's test."""

MIN_MAP_ROWS = 3
"""Fewest training rows a fold's map is fitted on; with fewer, its map is the training mean (slope 0)."""


@dataclass(frozen=True)
class LinearMap:
    """g(f) = intercept + slope * f, on the stars scale (``slope`` >= 0)."""

    intercept: float
    slope: float

    def apply(self, f: np.ndarray) -> np.ndarray:
        return self.intercept + self.slope * np.asarray(f, dtype=np.float64)


IDENTITY = LinearMap(0.0, 1.0)


def fit_map(level_one: np.ndarray, y: np.ndarray) -> LinearMap:
    """Least squares y ~ a + b f on a fold's training rows (``level_one``: their level-one predictions), b >= 0;
    b = 0 (a = mean(y)) when the predictions are constant, the fit gives a negative slope, or there are fewer than
    ``MIN_MAP_ROWS`` rows."""
    f = np.asarray(level_one, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        raise ValueError("a recalibration map needs at least one training row")
    mean_y = float(y.mean())
    if y.size < MIN_MAP_ROWS:
        return LinearMap(mean_y, 0.0)
    fc = f - f.mean()
    var_f = float(np.dot(fc, fc))
    if var_f <= 1e-12 * max(1.0, float(np.dot(f, f))):
        return LinearMap(mean_y, 0.0)
    slope = max(0.0, float(np.dot(fc, y - mean_y)) / var_f)
    return LinearMap(mean_y - slope * float(f.mean()), slope)


@dataclass(frozen=True)
class Decision:
    """Whether the chosen model's predictions are recalibrated for the lambda = 1 methods, and why (``decide``).

    MSEs in stars over the rated sessions' out-of-fold predictions of one cross-fit; ``slope``, ``slope_se``: the
    calibration slope of Y on f and its standard error (NaN when f is constant)."""

    recalibrate: bool
    reason: str
    n_labeled: int
    mse_prediction: float
    mse_constant: float
    slope: float
    slope_se: float


def calibration_slope(y: np.ndarray, f: np.ndarray) -> tuple[float, float]:
    """(b, se(b)) of the least-squares line y ~ a + b f: b = Cov(y, f) / Var(f), se^2 = s^2 / sum (f - mean f)^2
    with s^2 the residual variance on n - 2 degrees of freedom. (NaN, NaN) when f is constant or n < 3."""
    y = np.asarray(y, dtype=np.float64)
    f = np.asarray(f, dtype=np.float64)
    n = y.size
    fc = f - f.mean()
    sxx = float(np.dot(fc, fc))
    if n < 3 or sxx <= 1e-12 * max(1.0, float(np.dot(f, f))):
        return math.nan, math.nan
    b = float(np.dot(fc, y - y.mean())) / sxx
    resid = y - y.mean() - b * fc
    return b, math.sqrt(float(np.dot(resid, resid)) / (n - 2) / sxx)


def decide(y: np.ndarray, oof: np.ndarray, constant_oof: np.ndarray) -> Decision:
    """The module docstring's rule on the rated rows' labels ``y``, the model's out-of-fold predictions ``oof`` and
    the constant's (each fold's training mean) ``constant_oof``, all in stars."""
    y = np.asarray(y, dtype=np.float64)
    mse = float(np.mean((y - oof) ** 2))
    mse_constant = float(np.mean((y - constant_oof) ** 2))
    b, se = calibration_slope(y, oof)
    n = int(y.size)
    if not mse < mse_constant:
        why = (
            f"out-of-fold MSE {mse:.3f} is not below the constant's {mse_constant:.3f}: a lambda = 1 method fed"
            " it would be wider than naive"
        )
        return Decision(True, why, n, mse, mse_constant, b, se)
    if math.isnan(b):
        return Decision(False, "the predictions are constant: nothing to rescale", n, mse, mse_constant, b, se)
    t2 = ((b - 1.0) / se) ** 2 if se > 0 else (0.0 if b == 1.0 else math.inf)
    if t2 > SLOPE_CHI2:
        why = (
            f"calibration slope {b:.2f} (se {se:.2f}) differs from 1 at the 5 % level: mis-scaled predictions"
            " widen a lambda = 1 method"
        )
        return Decision(True, why, n, mse, mse_constant, b, se)
    why = (
        f"out-of-fold MSE {mse:.3f} below the constant's {mse_constant:.3f} and calibration slope {b:.2f}"
        f" (se {se:.2f}) consistent with 1: used as it is"
    )
    return Decision(False, why, n, mse, mse_constant, b, se)


# --------------------------------------------------------------------------------------------------------
# level-one predictions: what each fold's map is fitted on


def family_level_one(
    fit: FoldPredictions,
    k: int,
    fold: Fold,
    X: np.ndarray,
    y: np.ndarray,
    seed: int,
    threads: int | None = None,
    columns: np.ndarray | None = None,
) -> np.ndarray:
    """Family ``fit.family``'s level-one predictions of the rows of fold ``k``'s training rows (``fold.train``,
    in that order): those the fold loop made (``cv.fit_folds`` with ``inner``), else made now the same way from
    the kept fold model (out of bag, the text's inner score, or ``cv.inner_crossfit``). None of them saw F_k."""
    rows = fold.train
    made = fit.inner[k, rows] if fit.inner.shape[0] > k else np.full(rows.size, np.nan)
    if np.all(np.isfinite(made)):
        return made
    if fit.family == TEXT_FAMILY:
        return np.asarray(fold.text.train_scores, dtype=np.float64)
    A = cv.training_design(X, fold)
    oob = cv.out_of_bag(fit.models[k], A) if fit.models else None
    if oob is not None:
        return oob
    ignored = cv.ignored_text_column(A.shape[1], fold.text is not None, y.shape[0])  # as fit_folds
    return cv.inner_crossfit(A, y[rows], fit.family, seed, 1 if threads is None else threads, ignored, columns)


def stack_level_one(P: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    """The stack's level-one predictions of T_k's rows from its members' (``P``: a column per member): the blend
    (``stack.nnls_weights``) fitted on one of ``cv.INNER_FOLDS`` halves of T_k and applied to the other."""
    out = np.empty(y.shape[0])
    if y.shape[0] < 2 * cv.INNER_FOLDS:
        out[:] = y.mean()
        return out
    for train, test in KFold(n_splits=cv.INNER_FOLDS, shuffle=True, random_state=seed).split(P):
        b, w = nnls_weights(P[train], y[train])
        out[test] = b + P[test] @ w
    return out


def level_one_by_fold(
    fits: Mapping[str, FoldPredictions],
    family: str,
    members: Sequence[str],
    folds: Sequence[Fold],
    X: np.ndarray,
    y: np.ndarray,
    seed: int,
    threads: int | None = None,
    columns: Mapping[str, np.ndarray] | None = None,
) -> list[np.ndarray]:
    """Per fold k, the chosen ``family``'s level-one predictions of its training rows (``folds[k].train`` order);
    ``members``: the stack's families when ``family`` is the stack; the baseline is its members' plain average.
    ``columns``: the columns each family reads (``families.family_columns``), as its fold models did."""
    columns = columns or {}

    def one(name: str, k: int, fold: Fold) -> np.ndarray:
        return family_level_one(fits[name], k, fold, X, y, seed, threads, columns.get(name))

    out = []
    for k, fold in enumerate(folds):
        if family == STACK:
            P = np.column_stack([one(m, k, fold) for m in members])
            out.append(stack_level_one(P, y[fold.train], seed))
        elif family == BASELINE:  # a fixed blend: its members' level-one predictions, averaged
            out.append(np.column_stack([one(m, k, fold) for m in BASELINE_MEMBERS]).mean(axis=1))
        else:
            out.append(one(family, k, fold))
    return out


# --------------------------------------------------------------------------------------------------------
# the recalibrated cross-fit


@dataclass(frozen=True, eq=False)
class Recalibration:
    """The calibrated predictions of one cross-fit (stars), the fold maps that made them and the decision
    (``eq=False``: it holds arrays). ``maps[k]`` is fold k's (``IDENTITY`` everywhere when not recalibrated)."""

    decision: Decision
    maps: tuple[LinearMap, ...]
    oof: np.ndarray
    unlabeled: np.ndarray
    mse_calibrated: float

    @property
    def recalibrated(self) -> bool:
        return self.decision.recalibrate


def recalibrate(
    y: np.ndarray,
    oof: np.ndarray,
    fold: np.ndarray,
    unlabeled: np.ndarray,
    unlabeled_by_fold: Sequence[np.ndarray],
    folds: Sequence[Fold],
    level_one: Callable[[], Sequence[np.ndarray]] | None,
) -> Recalibration:
    """The calibrated predictions of a cross-fit: rated row i (held out by fold ``fold[i]``) gets
    g_{fold(i)}(oof_i), unrated row j (1/K) sum_k g_k(u_kj) with ``unlabeled_by_fold[k]`` fold k's predictions
    (``unlabeled``: the fit's own mean of them, returned as it is when nothing is recalibrated),
    when ``decide`` says so (``level_one``: per fold, the level-one predictions of its training rows, fitted on by
    ``fit_map``, made only when needed: a callable; None only when no recalibration can be needed, else
    ValueError); otherwise the predictions as they are."""
    y = np.asarray(y, dtype=np.float64)
    oof = np.asarray(oof, dtype=np.float64)
    decision = decide(y, oof, cv.constant_oof(y, folds))
    K = len(folds)
    unlabeled = np.asarray(unlabeled, dtype=np.float64)
    if not decision.recalibrate:
        return Recalibration(decision, (IDENTITY,) * K, oof.copy(), unlabeled.copy(), decision.mse_prediction)
    made = None if level_one is None else level_one()
    if made is None or len(made) != K:
        raise ValueError("recalibration needs each fold's level-one predictions of its training rows")
    maps = tuple(fit_map(made[k], y[folds[k].train]) for k in range(K))
    calibrated = np.empty_like(oof)
    for k, g in enumerate(maps):
        calibrated[fold == k] = g.apply(oof[fold == k])
    if unlabeled.size:
        unlabeled = np.mean(np.stack([g.apply(u) for g, u in zip(maps, unlabeled_by_fold, strict=True)]), axis=0)
    return Recalibration(decision, maps, calibrated, unlabeled, float(np.mean((y - calibrated) ** 2)))


def apply_maps(maps: Sequence[LinearMap], by_fold: np.ndarray, fold: np.ndarray | None) -> np.ndarray:
    """Calibrated predictions from every fold's predictions ``by_fold`` (shape (K, rows)): a row with a fold (a
    rated session) gets its fold's map of its fold's prediction, a row without (``fold`` -1, or ``fold`` None for
    all) the mean over folds of each fold's map of its prediction. What a kept fit does for new sessions."""
    mapped = np.stack([g.apply(p) for g, p in zip(maps, by_fold, strict=True)]) if len(maps) else by_fold
    mean = mapped.mean(axis=0) if mapped.shape[0] else np.empty(mapped.shape[1])
    if fold is None:
        return mean
    held = np.where(fold >= 0, fold, 0)
    return np.where(fold >= 0, mapped[held, np.arange(mapped.shape[1])], mean)
