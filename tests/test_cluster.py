"""Cluster-robust (by user) intervals: singleton clusters give today's session formulas, real clusters match a
brute-force cluster bootstrap."""

import math

import numpy as np
import ppi_py
import pytest

from pulse_pipeline.stats.aipw import aipw_mean
from pulse_pipeline.stats.cluster import (
    cluster_bootstrap_difference,
    cluster_codes,
    cluster_permutation_pvalue,
    clustered_crossppi_mean,
    clustered_ppi_mean,
    clustered_variance,
    clustered_welch_difference,
)
from pulse_pipeline.stats.naive import bootstrap_difference, permutation_pvalue, welch_difference
from pulse_pipeline.stats.ppi import crossppi_mean, ppi_mean


def _clustered_arm(rng, users: int, user_sd: float = 1.0, rated: float = 0.3):
    """Sessions of ``users`` users (1..12 sessions each) with a strong user intercept, a prediction f that sees
    part of each session's own signal but not the user's, and a random ``rated`` share of sessions rated."""
    per_user = rng.integers(1, 13, users)
    g = np.repeat(np.arange(users), per_user)
    own = rng.normal(size=g.size)
    y = user_sd * rng.normal(size=users)[g] + own + 0.5 * rng.normal(size=g.size)
    f = own + 0.3 * rng.normal(size=g.size)
    r = rng.random(g.size) < rated
    return y, f, g, r


def test_cluster_codes_give_each_session_without_a_user_its_own_cluster():
    codes = cluster_codes(["a", "b", None, "a", "", None])
    assert codes[0] == codes[3] and codes[1] != codes[0]
    assert len(set(codes.tolist())) == 5  # a, b and three user-less sessions
    assert sorted(set(codes.tolist())) == [0, 1, 2, 3, 4]


def test_clustered_variance_by_hand():
    # clusters {0: 1 + 2, 1: -4, 2: 1}: sums 3, -4, 1; G/(G-1) * (9 + 16 + 1) = 1.5 * 26
    var, G = clustered_variance([1.0, 2.0, -4.0, 1.0], [7, 7, 3, 9])
    assert G == 3 and var == pytest.approx(39.0)


def test_singleton_clusters_give_the_session_formulas():
    rng = np.random.default_rng(1)
    y_t, y_c = rng.normal(0.3, 1, 80), rng.normal(0, 1.3, 95)
    g_t, g_c = np.arange(80), np.arange(80, 175)
    w, cw = welch_difference(y_t, y_c), clustered_welch_difference(y_t, g_t, y_c, g_c)
    assert (cw.estimate, cw.se, cw.ci_low, cw.ci_high) == pytest.approx((w.estimate, w.se, w.ci_low, w.ci_high))
    b = bootstrap_difference(y_t, y_c, n_resamples=500, seed=3)
    cb = cluster_bootstrap_difference(y_t, g_t, y_c, g_c, n_resamples=500, seed=3)
    assert (cb.se, cb.ci_low, cb.ci_high) == pytest.approx((b.se, b.ci_low, b.ci_high))
    assert cluster_permutation_pvalue(y_t, g_t, y_c, g_c, 400, seed=5) == permutation_pvalue(y_t, y_c, 400, seed=5)


def test_singleton_clustered_ppi_is_ppi_py_times_the_small_sample_factor():
    rng = np.random.default_rng(2)
    y = rng.normal(size=60)
    f = y + rng.normal(size=60)
    fu = rng.normal(size=400)
    G = 460
    plain = ppi_mean(y, f, fu)
    lo, hi = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=plain.lam)
    ref_se = (hi[0] - lo[0]) / (2 * 1.959963984540054)
    c = clustered_ppi_mean(y, f, np.arange(60), fu, np.arange(60, G))
    assert c.estimate == pytest.approx(plain.estimate) and c.lam == plain.lam
    assert c.se**2 == pytest.approx(ref_se**2 * G / (G - 1), rel=1e-9)
    x = clustered_crossppi_mean(y, f, np.arange(60), fu, np.arange(60, G), lam=1.0)
    assert x.method == "crossppi" and x.lam == 1.0
    # tuned (the default), singleton users give the session lambda Cov(Y, f) / (Var(f) + (n/N) Var(f~))
    tuned, session = clustered_crossppi_mean(y, f, np.arange(60), fu, np.arange(60, G)), crossppi_mean(y, f, fu)
    by_hand = np.cov(y, f, ddof=0)[0, 1] / (f.var() + 60 / 400 * fu.var())
    assert tuned.lam == pytest.approx(session.lam) and tuned.lam == pytest.approx(min(1.0, by_hand))
    assert tuned.se**2 == pytest.approx(session.se**2 * G / (G - 1), rel=1e-9)


def test_clustered_crossppi_takes_the_session_lambda_so_its_estimate_does_not_move_with_the_unit():
    rng = np.random.default_rng(6)
    y, f, g, r = _clustered_arm(rng, 150)
    f = 0.3 * f + rng.normal(size=f.size)  # a weak model: lambda well inside (0, 1)
    tuned = clustered_crossppi_mean(y[r], f[r], g[r], f[~r], g[~r])
    session = crossppi_mean(y[r], f[r], f[~r])
    assert 0.0 < tuned.lam < 1.0 and tuned.method == "crossppi"
    assert tuned.lam == session.lam and tuned.estimate == pytest.approx(session.estimate, abs=1e-12)
    at = clustered_ppi_mean(y[r], f[r], g[r], f[~r], g[~r], lam=session.lam)
    assert tuned.se == pytest.approx(at.se, rel=1e-12) and tuned.se > session.se  # the users' sessions correlate


def test_singleton_clustered_aipw_equals_the_session_formula():
    rng = np.random.default_rng(3)
    f = rng.normal(size=300)
    rated = rng.random(300) < 0.3
    y = f[rated] + rng.normal(size=rated.sum())
    pi = rng.uniform(0.2, 0.5, 300)
    a, c = aipw_mean(y, f, rated, pi), aipw_mean(y, f, rated, pi, clusters=np.arange(300))
    assert (c.estimate, c.se) == pytest.approx((a.estimate, a.se), rel=1e-12)


def _weighted_ppi(w_users, g, y, f, r, lam):
    """The PPI estimate (lam fixed) on a cluster-bootstrap resample: user u drawn w_u times counts w_u times."""
    w = w_users[:, g]  # (B, sessions)
    rated_part = (w[:, r] * (y[r] - lam * f[r])).sum(axis=1) / w[:, r].sum(axis=1)
    unrated_part = (w[:, ~r] * f[~r]).sum(axis=1) / w[:, ~r].sum(axis=1)
    return rated_part + lam * unrated_part


def test_clustered_ppi_variance_equals_a_brute_force_cluster_bootstrap():
    rng = np.random.default_rng(4)
    users = 400
    y, f, g, r = _clustered_arm(rng, users, user_sd=1.0)
    c = clustered_ppi_mean(y[r], f[r], g[r], f[~r], g[~r])
    session = ppi_mean(y[r], f[r], f[~r], lam=c.lam)
    # brute force: resample users with replacement 2 000 times, recompute the estimate with the same lam
    B = 2000
    draws = rng.integers(0, users, size=(B, users))
    w_users = np.stack([np.bincount(d, minlength=users) for d in draws]).astype(float)
    boot = _weighted_ppi(w_users, g, y, f, r, c.lam)
    boot_var = boot.var(ddof=1)
    # Monte Carlo sd of a variance from B draws: ~sqrt(2 / B) = 3 % relative; allow 4 of those
    assert c.se**2 == pytest.approx(boot_var, rel=0.12)
    # and the check has teeth: the session formula is far too small on these data
    assert session.se**2 < 0.6 * boot_var


def test_clustered_welch_and_aipw_match_the_cluster_bootstrap():
    rng = np.random.default_rng(5)
    users = 400
    y, f, g, r = _clustered_arm(rng, users, user_sd=1.0)
    B = 2000
    draws = rng.integers(0, users, size=(B, users))
    w_users = np.stack([np.bincount(d, minlength=users) for d in draws]).astype(float)
    w = w_users[:, g]
    naive_boot = (w[:, r] * y[r]).sum(axis=1) / w[:, r].sum(axis=1)
    gt, yt = g[r], y[r]
    half = gt < users // 2  # split the users into two arms; their variances add
    cw = clustered_welch_difference(yt[half], gt[half], yt[~half], gt[~half])
    arm_t = np.isin(np.arange(users), gt[half])
    wt, wc = w_users * arm_t, w_users * ~arm_t
    diff_boot = (wt[:, g][:, r] * y[r]).sum(1) / wt[:, g][:, r].sum(1) - (wc[:, g][:, r] * y[r]).sum(1) / wc[:, g][
        :, r
    ].sum(1)
    assert naive_boot.var() > 0
    assert cw.se**2 == pytest.approx(diff_boot.var(ddof=1), rel=0.12)
    # AIPW with a constant propensity: its estimate is mean f + mean rated residual (Hajek)
    pi = np.full(g.size, r.mean())
    a = aipw_mean(y[r], f, r, pi, clusters=g)
    aipw_boot = (w * f).sum(1) / w.sum(1) + (w[:, r] * (y[r] - f[r])).sum(1) / w[:, r].sum(1)
    assert a.se**2 == pytest.approx(aipw_boot.var(ddof=1), rel=0.12)
    assert not math.isnan(a.estimate)


def test_cluster_permutation_holds_its_level_under_user_randomization():
    """No effect, users randomized, strong user effects: permuting users rejects at about 5 %; permuting
    sessions rejects far more often (the sessions of one user move together)."""
    rng = np.random.default_rng(6)
    reject_user = reject_session = 0
    reps = 60
    for _ in range(reps):
        y, _, g, r = _clustered_arm(rng, 60, user_sd=1.5, rated=1.0)
        arm = rng.random(60) < 0.5
        t = arm[g]
        reject_user += cluster_permutation_pvalue(y[t], g[t], y[~t], g[~t], 199, seed=1) < 0.05
        reject_session += permutation_pvalue(y[t], y[~t], 199, seed=1) < 0.05
    assert reject_user <= 0.15 * reps
    assert reject_session >= 2 * max(reject_user, 3)
