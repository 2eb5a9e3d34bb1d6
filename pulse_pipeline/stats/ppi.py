"""Prediction-powered means of one arm (PPI++, cross-PPI) and the difference of two independent arms.

Notation (research notes section 5, paper section 3.3): an arm has n rated sessions with ratings Y and model
predictions f, and N unrated sessions with predictions f~. Every estimator here is::

    mu(lam) = mean(Y) + lam * (mean(f~) - mean(f))

with a standard error from two independent pieces, Var(lam f~)/N + Var(Y - lam f)/n, and a Wald interval. The
numbers match the reference implementation ``ppi_py`` (PyPI ``ppi-python``) to rounding, but (1) ``alpha`` defaults
to 0.05 here (``ppi_py`` uses 0.1) and (2) the unlabeled array, which can hold millions of rows, is read once,
in cache-sized chunks, with no temporary copies.

Degenerate inputs never raise and never give an unexplained NaN; ``ArmMean.note`` / ``Interval.note`` says what
happened: no labels (NaN, undefined), one label (finite estimate, infinite interval), no unlabeled rows or
constant predictions (lam = 0: the classical mean of the labels), all labels equal with lam = 0 (zero-width).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy.stats import norm

from pulse_pipeline.stats.naive import Interval, check_alpha, join_notes

_MOMENT_CHUNK = 1 << 16  # 512 KB of float64: stays in L2 between the sum and the dot product


@dataclass(frozen=True)
class ArmMean:
    """The estimated mean rating of one arm.

    Attributes:
        estimate: the point estimate mu.
        se: its standard error.
        ci_low, ci_high: the (1 - alpha) Wald interval estimate -/+ z_{1-alpha/2} * se.
        lam: the power-tuning weight actually used (0 = classical mean of the labels, 1 = plain PPI / plain cross-PPI).
        n: number of rated (labeled) sessions.
        N: number of unrated (unlabeled) sessions.
        method: "ppi", "crossppi", "classical" (fallback, see note) or "aipw".
        note: None for a regular result, otherwise what was degenerate and what was done.
        n_clipped: AIPW only: how many rated sessions had their propensity clipped (0 otherwise).
    """

    estimate: float
    se: float
    ci_low: float
    ci_high: float
    lam: float
    n: int
    N: int
    method: str
    note: str | None = None
    n_clipped: int = 0


def as_vector(x, name: str) -> np.ndarray:
    """A 1-D float64 view of ``x`` (a copy only if the dtype or layout requires one)."""
    arr = np.asarray(x, dtype=np.float64)
    return arr.reshape(-1) if arr.ndim != 1 else arr


def _moments(x: np.ndarray) -> tuple[float, float]:
    """(mean, sum of squared deviations) of ``x`` in one pass over memory.

    Each 64k-element chunk is summed and dotted with itself while it is in cache; chunks are merged with Chan et
    al.'s pairwise update, so the within-chunk cancellation is the only rounding risk (relative error about
    1e-16 * mean^2 / variance: negligible for ratings). No array-sized temporaries are created.
    """
    count, mean, m2 = 0, 0.0, 0.0
    for start in range(0, x.size, _MOMENT_CHUNK):
        c = x[start : start + _MOMENT_CHUNK]
        k = c.size
        s = float(np.add.reduce(c))
        mc = s / k
        m2c = max(float(np.dot(c, c)) - s * mc, 0.0)
        delta = mc - mean
        tot = count + k
        mean += delta * k / tot
        m2 += m2c + delta * delta * count * k / tot
        count = tot
    if not (math.isfinite(mean) and math.isfinite(m2)):
        raise ValueError("predictions on unlabeled data contain NaN or infinite values")
    return mean, m2


def _labeled(y, f, name_f: str) -> tuple[np.ndarray, np.ndarray]:
    y, f = as_vector(y, "y"), as_vector(f, name_f)
    if y.shape != f.shape:
        raise ValueError(f"y has {y.size} values but {name_f} has {f.size}")
    if not (np.isfinite(y.sum()) and np.isfinite(f.sum())):
        raise ValueError(f"y or {name_f} contains NaN or infinite values")
    return y, f


@lru_cache(maxsize=64)
def normal_quantile(alpha: float) -> float:
    """z_{1 - alpha/2}, once per alpha: scipy's ``norm.ppf`` costs ~0.1 ms a call, and the effect history's
    hundreds of looks make thousands of calls with the same alpha."""
    check_alpha(alpha)
    return float(norm.ppf(1.0 - alpha / 2.0))


def arm_mean(est: float, se: float, z: float, lam: float, n: int, N: int, method: str, note: str | None) -> ArmMean:
    """An ``ArmMean`` with the interval est -/+ z * se; a zero standard error says so in its note."""
    if se == 0.0:
        note = join_notes(note, "standard error is 0 (all labels equal, nothing to rectify): zero-width interval")
    return ArmMean(float(est), float(se), float(est - z * se), float(est + z * se), float(lam), n, N, method, note)


def _too_few_labels(y: np.ndarray, N: int, method: str) -> ArmMean | None:
    """The result for n < 2 labels, or None if there are enough."""
    n = y.size
    if n == 0:
        nan = float("nan")
        return ArmMean(nan, nan, nan, nan, 0.0, 0, N, method, note="no labeled sessions: the mean is undefined")
    if n == 1:
        inf = float("inf")
        return ArmMean(
            float(y[0]),
            inf,
            -inf,
            inf,
            0.0,
            1,
            N,
            "classical",
            note="a single label: estimate is that label (lam = 0); no variance estimate, interval unbounded",
        )
    return None


def _classical(y: np.ndarray, z: float, N: int, note: str) -> ArmMean:
    """Classical mean of the labels (lam = 0): se = sd(Y) / sqrt(n) with ddof = 0, as ppi_py's lam = 0."""
    return arm_mean(y.mean(), y.std() / math.sqrt(y.size), z, 0.0, y.size, N, "classical", note)


def ppi_mean(y, f_labeled, f_unlabeled, lam: float | None = None, alpha: float = 0.05) -> ArmMean:
    """PPI++ mean of one arm (Angelopoulos, Duchi & Zrnic 2023), as ``ppi_py.ppi_mean_ci`` computes it.

    Formula (all variances and the covariance as in ppi_py)::

        mu(lam)  = lam * mean(f~) + mean(Y - lam f)  =  mean(Y) + lam (mean(f~) - mean(f))
        lam_hat  = Cov(Y, f) / ((1 + n/N) Var_pool(f)),  clipped to [0, 1]
        se^2     = Var(lam f~) / N + Var(Y - lam f) / n
        CI       = mu -/+ z_{1 - alpha/2} se

    where Cov(Y, f) is over the n labeled pairs with ddof = 0, Var_pool(f) is the variance of the n + N
    predictions f and f~ pooled (ddof = 1; ppi_py's ``np.cov`` of the concatenation), and the two variances in
    se^2 have ddof = 0 (``ndarray.std``). The unlabeled array is read once (its mean and sum of squared
    deviations); the labeled pieces are small.

    Use this only with predictions that did not see the labels they rectify; with cross-fit predictions (out of
    fold f, fold-mean f~) use :func:`crossppi_mean` (research notes section 5: in-sample f makes the interval
    invalid).

    Args:
        y: ratings of the n labeled sessions, shape (n,).
        f_labeled: predictions for the same n sessions, shape (n,).
        f_unlabeled: predictions for the N unlabeled sessions, shape (N,); float64 input is not copied.
        lam: power-tuning weight; None estimates lam_hat as above, a number is used as given (0 = classical
            mean, 1 = plain PPI).
        alpha: error level; the interval targets coverage 1 - alpha. Must be in (0, 1).

    Returns:
        ArmMean with method "ppi". Falls back (method "classical", lam 0, with a note) when N = 0 or, with
        lam None, when Var_pool(f) = 0 (constant predictions carry no information; ppi_py returns NaN there).
        n = 0 gives NaN with a note, n = 1 an infinite interval with a note.
    """
    z = normal_quantile(alpha)
    y, f = _labeled(y, f_labeled, "f_labeled")
    fu = as_vector(f_unlabeled, "f_unlabeled")
    N = fu.size
    n = y.size
    few = _too_few_labels(y, N, "ppi")
    if few is not None:
        return few
    if N == 0:
        return _classical(y, z, 0, "no unlabeled predictions (N = 0): classical mean of the labels, lam = 0")
    mu_u, m2_u = _moments(fu)
    mean_f = f.mean()
    if lam is None:
        fc = f - mean_f
        cov_yf = float(np.dot(y - y.mean(), fc)) / n
        m2_pool = float(np.dot(fc, fc)) + m2_u + (mean_f - mu_u) ** 2 * n * N / (n + N)
        var_pool = m2_pool / (n + N - 1)
        pooled_mean = (n * mean_f + N * mu_u) / (n + N)
        if var_pool <= 1e-14 * (1.0 + pooled_mean**2):
            return _classical(y, z, N, "predictions constant (Var(f) = 0): lam_hat = 0, classical mean of the labels")
        lam = float(np.clip(cov_yf / ((1.0 + n / N) * var_pool), 0.0, 1.0))
    lam = float(lam)
    resid = y - lam * f
    est = lam * mu_u + resid.mean()
    se2 = lam * lam * (m2_u / N) / N + resid.var() / n
    return arm_mean(est, math.sqrt(se2), z, lam, n, N, "ppi", None)


def crossppi_lambda(y: np.ndarray, f_oof: np.ndarray, f_unlabeled_fold_mean: np.ndarray) -> float:
    """The power-tuning weight of cross-PPI: the lam in [0, 1] that minimizes :func:`crossppi_mean`'s own se^2.

    se^2(lam) = Var(Y - lam f)/n + lam^2 Var(f~)/N is a parabola in lam, least at::

        lam_hat = Cov(Y, f) / (Var(f) + (n/N) Var(f~)),   clipped to [0, 1]

    (all ddof 0, as in se^2). It is PPI++'s Cov(Y, f) / ((1 + n/N) Var(f)) with the two variances kept apart:
    the out-of-fold f of a rated session comes from one fold model, the fold-mean f~ of an unrated one averages K,
    so Var(f~) is below Var(f) by the fold models' disagreement, and PPI++'s pooled variance would put lam too
    high for the rectifier term Var(Y - lam f)/n, the one that dominates when n << N. Because lam_hat minimizes
    se^2 over [0, 1], which holds lam = 0 (the classical mean, se^2 = Var(Y)/n) and lam = 1 (plain cross-PPI),
    the interval is never wider than either: a model that is useless in this arm gets lam near 0, not lam = 1.
    0 when the predictions are constant (nothing to weigh). ``y`` and ``f_oof`` have n >= 2 values,
    ``f_unlabeled_fold_mean`` N >= 1.
    """
    n, N = y.size, f_unlabeled_fold_mean.size
    fc = f_oof - f_oof.mean()
    cov_yf = float(np.dot(y - y.mean(), fc)) / n
    var_f = float(np.dot(fc, fc)) / n
    _, m2_u = _moments(f_unlabeled_fold_mean)
    denominator = var_f + (n / N) * (m2_u / N)
    scale = 1.0 + float(np.dot(f_oof, f_oof)) / n
    if denominator <= 1e-14 * scale:
        return 0.0
    return float(np.clip(cov_yf / denominator, 0.0, 1.0))


def crossppi_mean(y, f_oof, f_unlabeled_fold_mean, lam: float | None = None, alpha: float = 0.05) -> ArmMean:
    """Cross-prediction-powered mean of one arm (Zrnic & Candes 2023), power-tuned per arm.

    With K-fold cross-fitting, each labeled session's prediction f_i comes from the fold model that did not see
    its label (out of fold), and each unlabeled session's prediction f~_j is the mean of the K fold models'
    predictions. Then::

        mu(lam)  = lam mean(f~) + mean(Y - lam f)
        se^2     = lam^2 Var(f~) / N + Var(Y - lam f) / n          (both ddof = 0)
        CI       = mu -/+ z_{1 - alpha/2} se

    The fold models' disagreement enters se^2 through both terms (each rated f_i is one fold model's, each f~_j
    their mean), each scaled by lam as the estimate is. ``lam`` None (the default) tunes it per arm by
    :func:`crossppi_lambda` (the lam in [0, 1] that minimizes se^2, so never wider than the classical mean nor
    than lam = 1); a number is used as given. With lam = 1 this is exactly ``ppi_py.crossppi_mean_ci`` (which
    fixes lam = 1); ppi_py takes the unlabeled predictions as an (N, K) matrix and averages its columns first,
    and passing the fold mean as (N, 1) gives the same numbers (both checked in tests/test_stats.py).

    Args:
        y: ratings of the n labeled sessions, shape (n,).
        f_oof: out-of-fold predictions for the same n sessions, shape (n,).
        f_unlabeled_fold_mean: fold-mean predictions for the N unlabeled sessions, shape (N,) (an (N, K) matrix
            of per-fold predictions is also accepted and averaged over its columns).
        lam: None tunes it (above); 1 is Zrnic & Candes' cross-PPI, 0 the classical mean of the labels.
        alpha: error level; the interval targets coverage 1 - alpha. Must be in (0, 1).

    Returns:
        ArmMean with method "crossppi" and the lam used. N = 0 falls back to the classical mean (method
        "classical", lam 0, noted); n = 0 gives NaN with a note, n = 1 an infinite interval with a note.
    """
    fu = np.asarray(f_unlabeled_fold_mean, dtype=np.float64)
    if fu.ndim == 2:
        fu = fu.mean(axis=1)
    fu = as_vector(fu, "f_unlabeled_fold_mean")
    if lam is None:
        y_, f_ = _labeled(y, f_oof, "f_oof")
        lam = crossppi_lambda(y_, f_, fu) if y_.size >= 2 and fu.size > 0 else 1.0
    # the formula above is the PPI mean at the given lam: one implementation, relabelled
    result = ppi_mean(y, f_oof, fu, lam=lam, alpha=alpha)
    return replace(result, method="crossppi") if result.method == "ppi" else result


def difference(treat: ArmMean, control: ArmMean, alpha: float = 0.05) -> Interval:
    """Difference of two independent arm means, treat - control, with a Wald interval.

    The arms (and their unlabeled pools) are independent given assignment, so variances add::

        estimate = mu_t - mu_c
        se       = sqrt(se_t^2 + se_c^2)
        CI       = estimate -/+ z_{1 - alpha/2} se

    Args:
        treat: the treatment arm's ArmMean (any method).
        control: the control arm's ArmMean.
        alpha: error level; the interval targets coverage 1 - alpha. Must be in (0, 1).

    Returns:
        Interval whose note carries the arms' notes, prefixed "treatment:" / "control:". NaN only when an arm's
        estimate is NaN (no labels), which the note says.
    """
    z = normal_quantile(alpha)
    note = join_notes(
        f"treatment: {treat.note}" if treat.note else None,
        f"control: {control.note}" if control.note else None,
    )
    est = treat.estimate - control.estimate
    se = math.hypot(treat.se, control.se)
    if math.isnan(est) or math.isnan(se):
        nan = float("nan")
        return Interval(nan, nan, nan, nan, note=note or "an arm estimate is undefined")
    if se == 0.0:
        note = join_notes(note, "standard error is 0: zero-width interval")
    return Interval(float(est), float(se), float(est - z * se), float(est + z * se), note=note)


def wald_p_value(estimate: float, se: float) -> float:
    """Two-sided p-value of a Wald statistic, 2 P(Z > |estimate / se|); NaN when se is not positive or the
    estimate is undefined."""
    if not (se > 0) or math.isnan(estimate):
        return float("nan")
    return float(2 * norm.sf(abs(estimate / se)))


def best_width_ratio(rho: float, n: int, N: int) -> float:
    """Best CI width PPI allows relative to the classical (labels only) interval.

    With optimal lam and correlation rho between f and Y::

        ratio = sqrt(1 - rho^2 * N / (n + N))

    e.g. rho = 0.29, N = 20 n gives 0.96: at most about 4 % narrower.

    Args:
        rho: correlation between the predictions and the ratings on held-out data, in [-1, 1].
        n: number of labeled sessions (>= 0).
        N: number of unlabeled sessions (>= 0).

    Returns:
        The ratio in [0, 1]; 1.0 when N = 0 (nothing to gain).
    """
    if not -1.0 <= rho <= 1.0:
        raise ValueError(f"rho must be in [-1, 1], got {rho}")
    if n < 0 or N < 0:
        raise ValueError("n and N must be non-negative")
    if N == 0:
        return 1.0
    return math.sqrt(max(0.0, 1.0 - rho * rho * N / (n + N)))


def best_width_ratio_of_difference(arms: Sequence[tuple[np.ndarray, np.ndarray, int]]) -> float:
    """The narrowest interval PPI++ can give for a difference of arm means, relative to Welch's naive interval,
    from each arm's own out-of-fold correlation ρ_a of predictions with ratings.

    ``arms``: per arm (y, f_labeled, N): the n_a ratings, their out-of-fold predictions and the number of unrated
    sessions. PPI++ with its optimal λ shrinks arm a's variance Var(Y_a)/n_a by 1 − ρ_a²·N_a/(n_a + N_a)
    (:func:`best_width_ratio`); the arms' variances add, so::

        ratio = sqrt( Σ_a Var_0(Y_a)/n_a · (1 − ρ_a²·N_a/(n_a + N_a))  /  Σ_a Var_1(Y_a)/n_a )

    with the variances of the two intervals being compared: ddof 0 in :func:`ppi_mean`'s se, ddof 1 in Welch's.
    One ρ pooled over both arms is not this: the arms' correlations differ (one arm's predictions may track its
    ratings better), and a pooled ρ put the line above widths PPI++ really reached (0.844 against 0.808 on the
    demo). An arm whose ratings or predictions are constant gains nothing (ρ_a taken as 0). NaN when an arm has
    fewer than 2 ratings or every rating is the same (no naive width to compare with).
    """
    gained = naive = 0.0
    for y, f, N in arms:
        y, f = np.asarray(y, dtype=np.float64), np.asarray(f, dtype=np.float64)
        n = y.size
        if n < 2:
            return float("nan")
        rho = float(np.corrcoef(y, f)[0, 1]) if np.std(y) > 0 and np.std(f) > 0 else 0.0
        gained += float(y.var()) / n * (best_width_ratio(max(-1.0, min(1.0, rho)), n, N) ** 2)
        naive += float(y.var(ddof=1)) / n
    return math.sqrt(gained / naive) if naive > 0 else float("nan")
