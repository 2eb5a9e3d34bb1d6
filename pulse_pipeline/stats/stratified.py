"""Stratified PPI++ mean of one arm (Fisch et al. 2024, "Stratified Prediction-Powered Inference for Hybrid
Language Model Evaluation", arXiv 2406.04291): a power-tuning lambda per stratum, strata combined by their size.

Why. PPI++'s one lambda per arm is a compromise across sessions: where the model predicts well (say bug fixes) a
lambda near 1 would remove most of the rating noise, where it predicts nothing (say documentation) any lambda above
0 only adds the predictions' noise. Tuning lambda in each stratum takes the gain where it is and leaves the rest
alone; and weighing strata by their known share of the arm's sessions removes the between-strata variance of the
labels from the rectifier (post-stratification), even at lambda 0.

Notation: the arm has M = n + N sessions; stratum h has n_h rated sessions (Y_i, f_i) and N_h unrated ones (f~_j),
and weight w_h = (n_h + N_h) / M, its share of ALL the arm's sessions, rated and unrated. Per stratum the estimate
is PPI++'s on that stratum's data alone (``stats.ppi.ppi_mean``: lambda_h = Cov(Y, f) / ((1 + n_h/N_h)
Var_pool(f)), clipped to [0, 1], or the lambda given)::

    theta_h = mean_h(Y - lambda_h f) + lambda_h mean_h(f~)          (ppi_mean on stratum h)
    theta   = sum_h w_h theta_h

Variance. Fisch et al. take the stratum weights as known population shares, so Var(theta) = sum_h w_h^2 se_h^2.
Here the weights are the arm's own shares, themselves random when sessions (or users) are drawn; their influence,
(1{i in h} - w_h) / M per session, adds (theta_{h(i)} - theta) / M to every session's term. So each session's
influence is::

    rated i in h:    phi_i = w_h (Y_i - lambda_h f_i - mean_h(Y - lambda_h f)) / n_h + (theta_h - theta) / M
    unrated j in h:  phi_j = w_h lambda_h (f~_j - mean_h(f~)) / N_h            + (theta_h - theta) / M

and, sessions independent (the cross terms vanish: each bracket sums to 0 within its stratum)::

    se^2 = sum_i phi_i^2 = sum_h w_h^2 se_h^2 + sum_h w_h (theta_h - theta)^2 / M

with se_h PPI++'s standard error of stratum h (ddof 0, as ``ppi_mean``). The second term is the weights' own
noise, ~ 1/M, small next to the rectifiers' ~ 1/n_h. Clustered by user (``g_labeled``, ``g_unlabeled``), the
phi are summed per user and se^2 = G/(G - 1) sum_u (sum_{i in u} phi_i)^2 (``stats.cluster.clustered_variance``),
as ``stats.cluster.clustered_ppi_mean`` does for PPI++. The interval is estimate -/+ z_{1 - alpha/2} se.

Exact reductions (tests/test_stratified.py): with one stratum the estimate, lambda and se are PPI++'s
(``ppi_mean``; clustered: ``clustered_ppi_mean``); the estimate is always sum_h w_h theta_h with each theta_h and
lambda_h ``ppi_mean``'s on the stratum alone.

Degenerate strata: a stratum with fewer than 2 rated sessions has no estimate of its own; such strata are merged
into the stratum with the most ratings (noted). The caller pools small strata by its own rule before (``estimates/
strata.py``: fewer than 30 ratings). A stratum without unrated sessions, or with constant predictions, falls back
to its rated mean (lambda_h = 0), as ``ppi_mean`` does; the note names the stratum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .cluster import clustered_variance
from .naive import join_notes
from .ppi import ArmMean, arm_mean, as_vector, normal_quantile, ppi_mean

METHOD = "ppi_stratified"
"""The ``ArmMean.method`` of a stratified estimate."""


@dataclass(frozen=True)
class StratumMean:
    """One stratum's part of a stratified arm mean: its label, weight w_h (share of the arm's sessions), rated and
    unrated counts, and ``ppi_mean``'s estimate, standard error and lambda on its data alone."""

    stratum: str
    weight: float
    n: int
    N: int
    estimate: float
    se: float
    lam: float
    note: str | None = None


@dataclass(frozen=True)
class StratifiedMean:
    """The arm's stratified mean (``arm``: an ``ArmMean`` whose ``lam`` is the weighted mean sum_h w_h lambda_h)
    and its strata's parts."""

    arm: ArmMean
    strata: tuple[StratumMean, ...]


def _labels(s, size: int, name: str) -> np.ndarray:
    s = np.asarray(s, dtype=object).reshape(-1)
    if s.size != size:
        raise ValueError(f"{name} has {s.size} strata for {size} sessions")
    return s


def _merged_small(s_l: np.ndarray, s_u: np.ndarray) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Strata with fewer than 2 ratings merged into the stratum with the most ratings (ties: first by label)."""
    names, counts = np.unique(s_l.astype(str), return_counts=True)
    every = set(s_l.astype(str).tolist()) | set(s_u.astype(str).tolist())
    rated = dict(zip(names.tolist(), counts.tolist(), strict=True))
    small = sorted(h for h in every if rated.get(h, 0) < 2)
    if not small:
        return s_l, s_u, None
    target = max(sorted(rated), key=lambda h: rated[h])
    s_l = np.where(np.isin(s_l.astype(str), small), target, s_l.astype(str)).astype(object)
    s_u = np.where(np.isin(s_u.astype(str), small), target, s_u.astype(str)).astype(object)
    return s_l, s_u, f"strata with fewer than 2 ratings ({', '.join(small)}) merged into {target!r}"


def stratified_ppi(
    y,
    f,
    f_unlabeled,
    s_labeled,
    s_unlabeled,
    *,
    g_labeled=None,
    g_unlabeled=None,
    lam: float | None = None,
    alpha: float = 0.05,
) -> StratifiedMean:
    """The stratified PPI++ mean of one arm and its strata (module docstring: formulas).

    Args:
        y: ratings of the n rated sessions; f: their (out-of-fold) predictions.
        f_unlabeled: predictions of the N unrated sessions (fold-mean).
        s_labeled, s_unlabeled: each session's stratum (any labels; compared as text).
        g_labeled, g_unlabeled: user (cluster) codes, one coding for the whole arm; None: sessions independent.
        lam: None tunes lambda per stratum (``ppi_mean``'s lambda_hat on the stratum); a number is used in every
            stratum (0: the post-stratified mean of the ratings).
        alpha: error level of the Wald interval.

    Returns:
        StratifiedMean; its ``arm`` has method "ppi_stratified". Fewer than 2 ratings in the arm: ``ppi_mean``'s
        result (NaN or unbounded, noted) and no strata.
    """
    y, f, fu = as_vector(y, "y"), as_vector(f, "f"), as_vector(f_unlabeled, "f_unlabeled")
    if y.shape != f.shape:
        raise ValueError(f"y has {y.size} values but f has {f.size}")
    n, N = y.size, fu.size
    s_l, s_u = _labels(s_labeled, n, "s_labeled"), _labels(s_unlabeled, N, "s_unlabeled")
    if n < 2:
        return StratifiedMean(ppi_mean(y, f, fu, lam=lam, alpha=alpha), ())
    s_l, s_u, merged = _merged_small(s_l.astype(str).astype(object), s_u.astype(str).astype(object))
    z = normal_quantile(alpha)
    M = n + N
    parts: list[StratumMean] = []
    index: list[tuple[np.ndarray, np.ndarray]] = []
    for h in sorted(set(s_l.tolist())):
        il, iu = np.flatnonzero(s_l == h), np.flatnonzero(s_u == h)
        r = ppi_mean(y[il], f[il], fu[iu], lam=lam, alpha=alpha)
        parts.append(StratumMean(h, (il.size + iu.size) / M, il.size, iu.size, r.estimate, r.se, r.lam, r.note))
        index.append((il, iu))
    theta = float(sum(p.weight * p.estimate for p in parts))
    lam_mean = float(sum(p.weight * p.lam for p in parts))
    notes = [f"stratum {p.stratum}: {p.note}" for p in parts if p.note and "standard error is 0" not in p.note]
    note = join_notes(merged, "; ".join(notes) or None)
    if (g_labeled is None or g_unlabeled is None) and len(parts) == 1:  # PPI++ itself: its se to the last bit
        return StratifiedMean(arm_mean(theta, parts[0].se, z, lam_mean, n, N, METHOD, note), tuple(parts))
    if g_labeled is None or g_unlabeled is None:
        var = sum(p.weight**2 * p.se**2 for p in parts) + sum(p.weight * (p.estimate - theta) ** 2 for p in parts) / M
    else:
        phi_l, phi_u = np.empty(n), np.empty(N)
        for p, (il, iu) in zip(parts, index, strict=True):
            shift = (p.estimate - theta) / M
            resid = y[il] - p.lam * f[il]
            phi_l[il] = p.weight * (resid - resid.mean()) / il.size + shift
            if iu.size:
                phi_u[iu] = p.weight * p.lam * (fu[iu] - fu[iu].mean()) / iu.size + shift
        g = np.r_[np.asarray(g_labeled).reshape(-1), np.asarray(g_unlabeled).reshape(-1)]
        var, G = clustered_variance(np.r_[phi_l, phi_u], g)
        if G < 2:
            inf = float("inf")
            arm = ArmMean(theta, inf, -inf, inf, lam_mean, n, N, METHOD, join_notes(note, "a single user"))
            return StratifiedMean(arm, tuple(parts))
    return StratifiedMean(arm_mean(theta, math.sqrt(var), z, lam_mean, n, N, METHOD, note), tuple(parts))


def stratified_ppi_mean(
    y,
    f,
    f_unlabeled,
    s_labeled,
    s_unlabeled,
    *,
    g_labeled=None,
    g_unlabeled=None,
    alpha: float = 0.05,
    lam: float | None = None,
) -> ArmMean:
    """The ``ArmMean`` of :func:`stratified_ppi` (its strata: :func:`stratified_ppi`'s ``strata``)."""
    return stratified_ppi(
        y, f, f_unlabeled, s_labeled, s_unlabeled, g_labeled=g_labeled, g_unlabeled=g_unlabeled, lam=lam, alpha=alpha
    ).arm


def best_variance(y, f, N_by_stratum: dict[str, int], s_labeled) -> float:
    """The least variance the stratified mean allows with each stratum's optimal lambda, from each stratum's own
    correlation rho_h of predictions with ratings (what ``stats.ppi.best_width_ratio`` is for one stratum)::

        sum_h w_h^2 Var_0(Y_h)/n_h (1 - rho_h^2 N_h/(n_h + N_h))  +  sum_h w_h (mean(Y_h) - mean_w)^2 / M

    (M the arm's sessions, w_h = (n_h + N_h)/M, mean_w = sum_h w_h mean(Y_h)). A stratum whose ratings or
    predictions are constant gains nothing (rho_h taken as 0). NaN when a stratum has fewer than 2 ratings."""
    y, f = as_vector(y, "y"), as_vector(f, "f")
    s = _labels(s_labeled, y.size, "s_labeled").astype(str)
    strata = sorted(set(s.tolist()) | set(N_by_stratum))
    M = y.size + sum(N_by_stratum.values())
    if M == 0:
        return float("nan")
    weights, means, within = [], [], 0.0
    for h in strata:
        yh, fh = y[s == h], f[s == h]
        nh, Nh = yh.size, N_by_stratum.get(h, 0)
        if nh < 2:
            return float("nan")
        w = (nh + Nh) / M
        rho = float(np.corrcoef(yh, fh)[0, 1]) if yh.std() > 0 and fh.std() > 0 else 0.0
        within += w * w * float(yh.var()) / nh * (1.0 - rho * rho * Nh / (nh + Nh))
        weights.append(w)
        means.append(float(yh.mean()))
    mean_w = sum(w * m for w, m in zip(weights, means, strict=True))
    return within + sum(w * (m - mean_w) ** 2 for w, m in zip(weights, means, strict=True)) / M


def best_width_ratio_stratified(arms) -> float:
    """The narrowest interval the stratified difference of arm means allows, relative to Welch's naive one:
    sqrt(sum_a best_variance_a / sum_a Var_1(Y_a)/n_a) (:func:`best_variance`; the naive variances with ddof 1,
    as ``stats.ppi.best_width_ratio_of_difference``, which this equals with one stratum per arm). ``arms``: per
    arm (y, f_labeled, s_labeled, s_unlabeled). NaN when an arm has fewer than 2 ratings or no naive width."""
    gained = naive = 0.0
    for y, f, s_l, s_u in arms:
        y = as_vector(y, "y")
        if y.size < 2:
            return float("nan")
        names, counts = np.unique(np.asarray(s_u, dtype=object).astype(str), return_counts=True)
        gained += best_variance(y, f, dict(zip(names.tolist(), counts.tolist(), strict=True)), s_l)
        naive += float(y.var(ddof=1)) / y.size
    return math.sqrt(gained / naive) if naive > 0 and math.isfinite(gained) else float("nan")


def as_method(result: ArmMean) -> ArmMean:
    """``result`` (e.g. a PPI++ ``ArmMean``) relabelled as a stratified one: what an arm without strata gives."""
    return replace(result, method=METHOD)
