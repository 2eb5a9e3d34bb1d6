"""Cluster-robust (by user) versions of every comparison, for experiments that randomize users, not sessions.

When a platform assigns a variant to a user, one user's sessions share the user's taste and habits: they are not
independent draws, and a formula that treats them so understates the variance (by the design effect
1 + (m - 1) ICC for m sessions per user). The unit of independence is then the user (the *cluster*). Every
function here takes, next to each session's values, its cluster code ``g`` (integers; sessions of one user share
a code, a session without a user id gets a code of its own: see :func:`cluster_codes`), and sums the
session-level influence of each estimator within each cluster before squaring. With G clusters and per-cluster
sums psi_u of the linearized estimator (sum_u psi_u = 0 by construction)::

    Var(theta_hat) = G / (G - 1) * sum_u psi_u^2          (the CR1 small-sample factor G / (G - 1))

With every cluster a single session this is the session formula times G / (G - 1) (exactly the ddof = 1
variance where the session formula uses ddof = 1: Welch, AIPW). Resampling methods resample or permute whole
clusters. The arms of a user-randomized experiment hold disjoint users, so the arms stay independent and the
variances of a difference still add.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from scipy import stats

from .naive import CHUNK_ENTRIES, Interval, as_finite_1d, block_permutation_pvalue, check_alpha, empty_arm_interval
from .ppi import ArmMean, arm_mean, crossppi_mean, normal_quantile, ppi_mean


def cluster_codes(user_ids: Sequence[str | None]) -> np.ndarray:
    """Integer cluster codes 0..G-1 for a sequence of user ids: one code per distinct user id, and a fresh code
    for every session whose user id is missing (None or empty): with no user to tie it to, a session is its own
    cluster (the session-level assumption, for that session only)."""
    codes: dict[object, int] = {}
    out = np.empty(len(user_ids), dtype=np.int64)
    for i, u in enumerate(user_ids):
        key = ("no user", i) if u is None or u == "" else u  # a missing id: a key no other session shares
        out[i] = codes.setdefault(key, len(codes))
    return out


def _compact(g, size: int, name: str) -> tuple[np.ndarray, int]:
    """``g`` as codes 0..G-1 (order of first appearance irrelevant), and G."""
    g = np.asarray(g).reshape(-1)
    if g.size != size:
        raise ValueError(f"{name} has {g.size} cluster codes for {size} values")
    _, inverse = np.unique(g, return_inverse=True)
    return inverse.reshape(-1), int(inverse.max()) + 1 if inverse.size else 0


def clustered_variance(phi, g) -> tuple[float, int]:
    """(G / (G - 1) * sum_u (sum_{i in u} phi_i)^2, G): the CR1 variance of sum_i phi_i over clusters ``g``.

    ``phi`` is each session's (centred) contribution to the linearized estimator; NaN variance when G < 2.
    """
    phi = np.asarray(phi, dtype=np.float64).reshape(-1)
    codes, G = _compact(g, phi.size, "g")
    if G < 2:
        return float("nan"), G
    sums = np.bincount(codes, weights=phi, minlength=G)
    return float(G / (G - 1) * np.dot(sums, sums)), G


def _totals(y, g, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sum S_u of the ratings and count n_u, over the clusters with at least one rating."""
    y = as_finite_1d(y, name)
    codes, G = _compact(g, y.size, f"clusters of {name}")
    return np.bincount(codes, weights=y, minlength=G), np.bincount(codes, minlength=G).astype(np.float64)


def _ratio_mean_var(s: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    """Ratio-of-means estimate sum S / sum n and its delta-method variance (see :func:`clustered_welch_difference`)."""
    G = s.size
    mean = float(s.sum() / n.sum())
    lin = (s - mean * n) / n.sum()  # (S_u - mean n_u) / (G nbar)
    return mean, float(G / (G - 1) * np.dot(lin, lin)) if G > 1 else float("inf")


def clustered_welch_difference(y_t, g_t, y_c, g_c, alpha: float = 0.05) -> Interval:
    """Difference of rated means with a cluster-robust (by user) delta-method interval.

    Per arm, with S_u the sum and n_u the number of user u's ratings over its G users with a rating, the arm mean
    is a ratio of means, mean = sum_u S_u / sum_u n_u (the same number as the mean of the ratings), linearized as::

        mean_hat - mean ~ sum_u (S_u - mean n_u) / (G nbar),    nbar = sum_u n_u / G
        v      = G / (G - 1) * sum_u ((S_u - mean n_u) / (G nbar))^2
        se     = sqrt(v_t + v_c)
        df     = se^4 / (v_t^2 / (G_t - 1) + v_c^2 / (G_c - 1))      (Welch-Satterthwaite over users)
        CI     = estimate -/+ t_{1 - alpha/2, df} se

    With one rating per user, v = s^2 / n (ddof 1) and df is Welch's: the result equals ``welch_difference``.
    Degenerate cases follow ``welch_difference``: an empty arm gives NaN, an arm with one user an unbounded
    interval, v = 0 a zero-width interval (each noted).
    """
    check_alpha(alpha)
    st, nt = _totals(y_t, g_t, "y_t")
    sc, nc = _totals(y_c, g_c, "y_c")
    empty = empty_arm_interval(int(nt.sum()), int(nc.sum()))
    if empty is not None:
        return empty
    (mt, vt), (mc, vc) = _ratio_mean_var(st, nt), _ratio_mean_var(sc, nc)
    est = mt - mc
    if st.size < 2 or sc.size < 2:
        inf = float("inf")
        return Interval(est, inf, -inf, inf, note="an arm has one user: no variance estimate, interval unbounded")
    se2 = vt + vc
    if se2 <= 0.0:
        return Interval(est, 0.0, est, est, note="all ratings equal within each arm: zero-width interval")
    se = math.sqrt(se2)
    df = se2**2 / (vt**2 / (st.size - 1) + vc**2 / (sc.size - 1))
    q = float(stats.t.ppf(1.0 - alpha / 2.0, df))
    return Interval(est, se, est - q * se, est + q * se)


def cluster_bootstrap_difference(
    y_t, g_t, y_c, g_c, n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05
) -> Interval:
    """Percentile bootstrap of the difference of rated means, resampling users (with all their ratings).

    For b = 1..B draw G_t users with replacement from the treatment arm's users and G_c from control's, and set
    d_b = sum S* / sum n* (treatment) - the same (control). estimate, se = sd(d) and the percentile interval are
    as in ``naive.bootstrap_difference``, whose random stream this mirrors (a chunk draws treatment, then
    control): with one rating per user the two give identical numbers for the same seed.
    """
    check_alpha(alpha)
    if n_resamples < 2:
        raise ValueError("n_resamples must be at least 2")
    st, nt = _totals(y_t, g_t, "y_t")
    sc, nc = _totals(y_c, g_c, "y_c")
    empty = empty_arm_interval(int(nt.sum()), int(nc.sum()))
    if empty is not None:
        return empty
    est = float(st.sum() / nt.sum() - sc.sum() / nc.sum())
    rng = np.random.default_rng(seed)
    chunk = max(1, CHUNK_ENTRIES // max(st.size, sc.size))
    diffs = np.empty(n_resamples)

    def means(s: np.ndarray, n: np.ndarray, b: int) -> np.ndarray:
        idx = rng.integers(0, s.size, size=(b, s.size))
        return s[idx].sum(axis=1) / n[idx].sum(axis=1)

    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        diffs[start : start + b] = means(st, nt, b) - means(sc, nc, b)
    lo, hi = np.quantile(diffs, [alpha / 2.0, 1.0 - alpha / 2.0])
    note = None
    if st.size < 2 or sc.size < 2:
        note = "an arm has a single user: the bootstrap sees no variability in it, the interval is too narrow"
    return Interval(est, float(diffs.std(ddof=1)), float(lo), float(hi), note=note)


def cluster_permutation_pvalue(
    y_t, g_t, y_c, g_c, n_permutations: int = 10_000, seed: int = 0, workers: int = 1
) -> float:
    """Two-sided Monte Carlo permutation p-value of the difference of rated means, permuting users' arms.

    Under the null of no effect a user's ratings are exchangeable between arms as a block (the user was
    randomized, not the session), so each permutation gives a random G_t of the pooled G users to treatment and
    recomputes stat = sum S / sum n (treatment) - the same (control); p = (1 + #{|stat_b| >= |stat_obs|}) / (1 + B).
    The loop is ``naive.block_permutation_pvalue`` over users' totals: with one rating per user the p-value equals
    ``naive.permutation_pvalue``'s for the same seed, for any number of ``workers`` (threads). An empty arm gives 1.0.
    """
    st, nt = _totals(y_t, g_t, "y_t")
    sc, nc = _totals(y_c, g_c, "y_c")
    return block_permutation_pvalue(st, nt, sc, nc, n_permutations, seed, workers)


def clustered_ppi_mean(
    y, f_labeled, g_labeled, f_unlabeled, g_unlabeled, lam: float | None = None, alpha: float = 0.05
) -> ArmMean:
    """PPI++ mean of one arm with a cluster-robust (by user) standard error.

    The estimate and lam (lam_hat by ``ppi_mean``'s formula when ``lam`` is None, and its fallbacks) are
    ``ppi_mean``'s. With lam held fixed, n rated sessions (Y_i, f_i) and N unrated ones (f~_j)::

        theta_hat = m1 + lam m2,   m1 = (1/n) sum_rated (Y_i - lam f_i),   m2 = (1/N) sum_unrated f~_j

    Each piece is a mean over sessions, so theta_hat - theta is, to first order, a sum over users of::

        psi_u = (1/n) sum_{i in u, rated} (Y_i - lam f_i - m1) + (lam/N) sum_{j in u, unrated} (f~_j - m2)

    (the centring at the sample means makes sum_u psi_u = 0, and it is the delta method for n and N being
    random when users, not sessions, are drawn: m1 and m2 are ratios of per-user sums). Then::

        se^2 = G / (G - 1) sum_u psi_u^2      over the G users with a rated or unrated session in the arm
        CI   = theta_hat -/+ z_{1-alpha/2} se

    A user's rated and unrated sessions enter the same psi_u, so the covariance between the two pieces that a
    shared user creates is counted. With singleton users sum_u psi_u^2 = Var(Y - lam f)/n + lam^2 Var(f~)/N
    (ddof 0): ``ppi_mean``'s se^2 times G / (G - 1), G = n + N. Fewer than 2 labels: ``ppi_mean``'s result
    (NaN or unbounded, noted); fewer than 2 users: unbounded interval, noted.
    """
    base = ppi_mean(y, f_labeled, f_unlabeled, lam=lam, alpha=alpha)
    if base.n < 2:
        return base
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    f = np.asarray(f_labeled, dtype=np.float64).reshape(-1)
    fu = np.asarray(f_unlabeled, dtype=np.float64).reshape(-1)
    lam_used = base.lam
    resid = y - lam_used * f
    phi = (resid - resid.mean()) / y.size
    g = np.asarray(g_labeled).reshape(-1)
    if fu.size:
        phi = np.concatenate([phi, lam_used * (fu - fu.mean()) / fu.size])
        g = np.concatenate([g, np.asarray(g_unlabeled).reshape(-1)])
    var, G = clustered_variance(phi, g)
    if G < 2:
        inf = float("inf")
        return replace(base, se=inf, ci_low=-inf, ci_high=inf, note="a single user: no variance estimate")
    return arm_mean(
        base.estimate, math.sqrt(var), normal_quantile(alpha), lam_used, base.n, base.N, base.method, base.note
    )


def clustered_crossppi_mean(
    y, f_oof, g_labeled, f_unlabeled_fold_mean, g_unlabeled, alpha: float = 0.05, lam: float | None = None
) -> ArmMean:
    """Cross-PPI mean (fold-mean predictions) with the cluster-robust se of :func:`clustered_ppi_mean`.

    ``lam`` None (the default) takes ``stats.ppi.crossppi_lambda``'s per-arm lam, Cov(Y, f) / (Var(f) + (n/N)
    Var(f~)) clipped to [0, 1], as :func:`clustered_ppi_mean` takes ``ppi_mean``'s: the estimate is then the
    same number whatever the unit, only its uncertainty changes (a lam tuned to the clustered variance would
    move the estimate with the unit, and a user's sessions would weigh in it by their cross products). A number
    is used as given (1: Zrnic & Candes' cross-PPI).
    """
    y_ = np.asarray(y, dtype=np.float64).reshape(-1)
    fu = np.asarray(f_unlabeled_fold_mean, dtype=np.float64).reshape(-1)
    if lam is None:
        lam = crossppi_mean(y_, f_oof, fu).lam
    result = clustered_ppi_mean(y_, f_oof, g_labeled, fu, g_unlabeled, lam=lam, alpha=alpha)
    return replace(result, method="crossppi") if result.method == "ppi" else result
