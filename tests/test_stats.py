"""The estimates stage's statistics against their references: ppi_py, scipy, hand cases and simulations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ppi_py import crossppi_mean_ci, crossppi_mean_pointestimate, ppi_mean_ci, ppi_mean_pointestimate
from ppi_py.ppi import _calc_lam_glm
from scipy import stats
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.model_selection import StratifiedKFold

from pulse_pipeline.stats.aipw import (
    PROPENSITY_C,
    aipw_mean,
    crossfit_propensity,
    propensity_auc,
    propensity_design,
)
from pulse_pipeline.stats.naive import Interval, bootstrap_difference, permutation_pvalue, welch_difference
from pulse_pipeline.stats.ppi import ArmMean, best_width_ratio, crossppi_mean, difference, ppi_mean

TOL = 1e-9

# (n, N, rho, discrete ratings?)
CASES = [
    (30, 200, 0.1, False),
    (300, 6_000, 0.3, True),
    (150, 3_000, 0.9, False),
    (80, 40, -0.5, True),
    (500, 100_000, 0.6, False),
]


def _arm_data(n: int, N: int, rho: float, discrete: bool, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n + N)
    y = 4.0 + rho * x[:n] + math.sqrt(1 - rho * rho) * rng.normal(size=n)
    if discrete:
        y = np.clip(np.round(y), 1, 5)
    f = 3.5 + 0.8 * x + 0.1 * rng.normal(size=n + N)  # biased, imperfect predictions
    return y, f[:n], f[n:]


def _ppi_py_lam(y, f, fu):
    """lam_hat exactly as ppi_py.ppi_mean_ci computes it (gradients around the lam = 1 point estimate)."""
    y2, f2, fu2 = y[:, None], f[:, None], fu[:, None]
    p = ppi_mean_pointestimate(y2, f2, fu2, lam=1)
    return _calc_lam_glm(y2 - p, f2 - p, fu2 - p, np.eye(1), coord=None, clip=True)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_ppi_mean_matches_ppi_py(case, seed):
    y, f, fu = _arm_data(*case, seed=seed)
    ours = ppi_mean(y, f, fu, alpha=0.05)
    lo, hi = ppi_mean_ci(y, f, fu, alpha=0.05)
    assert ours.method == "ppi" and ours.note is None
    assert (ours.n, ours.N) == (case[0], case[1])
    assert ours.lam == pytest.approx(_ppi_py_lam(y, f, fu), abs=TOL)
    assert ours.estimate == pytest.approx(float(ppi_mean_pointestimate(y, f, fu)[0]), abs=TOL)
    assert ours.ci_low == pytest.approx(float(lo[0]), abs=TOL)
    assert ours.ci_high == pytest.approx(float(hi[0]), abs=TOL)
    # se reconstructs the interval
    assert ours.ci_high - ours.ci_low == pytest.approx(2 * stats.norm.ppf(0.975) * ours.se, abs=TOL)


@pytest.mark.parametrize("lam", [0.0, 0.37, 1.0])
def test_ppi_mean_fixed_lambda_matches_ppi_py(lam):
    y, f, fu = _arm_data(200, 2_000, 0.5, True, seed=3)
    ours = ppi_mean(y, f, fu, lam=lam, alpha=0.1)
    lo, hi = ppi_mean_ci(y, f, fu, alpha=0.1, lam=lam)
    assert ours.lam == lam
    assert ours.estimate == pytest.approx(float(ppi_mean_pointestimate(y, f, fu, lam=lam)[0]), abs=TOL)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((float(lo[0]), float(hi[0])), abs=TOL)


def test_ppi_mean_reads_unlabeled_in_chunks_exactly():
    """N above the 64k chunk size: the one-pass moments still equal numpy's two-pass ones."""
    y, f, fu = _arm_data(400, 200_003, 0.4, True, seed=5)
    ours = ppi_mean(y, f, fu)
    lo, hi = ppi_mean_ci(y, f, fu, alpha=0.05)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((float(lo[0]), float(hi[0])), abs=TOL)


@pytest.mark.parametrize("case", CASES)
def test_crossppi_mean_matches_ppi_py(case):
    n, N, rho, discrete = case
    y, f, fu = _arm_data(n, N, rho, discrete, seed=7)
    rng = np.random.default_rng(8)
    folds = fu[:, None] + 0.05 * rng.normal(size=(N, 5))  # K = 5 fold models' predictions
    fold_mean = folds.mean(axis=1)
    ours = crossppi_mean(y, f, fold_mean, lam=1.0, alpha=0.05)  # ppi_py's cross-PPI fixes lambda at 1
    lo_k, hi_k = crossppi_mean_ci(y, f, folds, alpha=0.05)
    lo_1, hi_1 = crossppi_mean_ci(y, f, fold_mean[:, None], alpha=0.05)
    assert ours.method == "crossppi" and ours.lam == 1.0 and ours.note is None
    assert ours.estimate == pytest.approx(float(np.ravel(crossppi_mean_pointestimate(y, f, folds))[0]), abs=TOL)
    # ppi_py's (N, K) input and its fold mean as (N, 1) give the same interval, and so do we
    assert (float(np.ravel(lo_1)[0]), float(np.ravel(hi_1)[0])) == pytest.approx(
        (float(np.ravel(lo_k)[0]), float(np.ravel(hi_k)[0])), abs=TOL
    )
    assert (ours.ci_low, ours.ci_high) == pytest.approx((float(np.ravel(lo_k)[0]), float(np.ravel(hi_k)[0])), abs=TOL)
    # the (N, K) matrix is accepted too
    assert crossppi_mean(y, f, folds, lam=1.0).estimate == pytest.approx(ours.estimate, abs=TOL)


@pytest.mark.parametrize("case", CASES)
def test_crossppi_lambda_is_the_minimizer_of_its_own_variance(case):
    """Tuned (the default), cross-PPI's lambda is Cov(Y, f) / (Var(f) + (n/N) Var(f~)) by hand (ddof 0, clipped),
    its interval is ppi_py's PPI interval at that lambda, and its se is the least over a grid of lambdas in [0, 1]
    (so at most the classical mean's and plain cross-PPI's)."""
    n, N, rho, discrete = case
    y, f, fu = _arm_data(n, N, rho, discrete, seed=9)
    folds = fu[:, None] + 0.2 * np.random.default_rng(10).normal(size=(N, 5))  # the fold models disagree
    fold_mean = folds.mean(axis=1)
    by_hand = np.cov(y, f, ddof=0)[0, 1] / (f.var() + n / N * fold_mean.var())
    ours = crossppi_mean(y, f, folds)
    assert ours.method == "crossppi" and ours.note is None
    assert ours.lam == pytest.approx(float(np.clip(by_hand, 0, 1)), abs=TOL)
    lo, hi = ppi_mean_ci(y, f, fold_mean, alpha=0.05, lam=ours.lam)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((float(lo[0]), float(hi[0])), abs=TOL)
    grid = [crossppi_mean(y, f, fold_mean, lam=lam).se for lam in np.linspace(0, 1, 101)]
    assert ours.se <= min(grid) + TOL
    assert ours.se <= y.std() / math.sqrt(n) + TOL  # never wider than the rated mean alone (lambda = 0)


def test_crossppi_lambda_of_a_useless_or_negative_model_is_zero():
    rng = np.random.default_rng(4)
    y, fu = rng.normal(size=50), rng.normal(size=500)
    assert crossppi_mean(y, -y + 0.1 * rng.normal(size=50), fu).lam == 0.0  # negative covariance: clipped at 0
    r = crossppi_mean(y, np.full(50, 2.0), np.full(500, 2.0))  # constant predictions: nothing to weigh
    assert r.lam == 0.0 and r.estimate == pytest.approx(y.mean()) and r.se == pytest.approx(y.std() / math.sqrt(50))


def test_difference_adds_variances():
    t = ppi_mean(*_arm_data(300, 6_000, 0.3, True, seed=11))
    c = ppi_mean(*_arm_data(250, 5_000, 0.3, True, seed=12))
    d = difference(t, c)
    assert isinstance(d, Interval) and d.note is None
    assert d.estimate == pytest.approx(t.estimate - c.estimate, abs=TOL)
    assert d.se == pytest.approx(math.sqrt(t.se**2 + c.se**2), abs=TOL)
    z = stats.norm.ppf(0.975)
    assert (d.ci_low, d.ci_high) == pytest.approx((d.estimate - z * d.se, d.estimate + z * d.se), abs=TOL)


def test_best_width_ratio():
    assert best_width_ratio(0.29, 100, 2_000) == pytest.approx(0.96, abs=0.005)
    assert best_width_ratio(0.0, 10, 10) == 1.0
    assert best_width_ratio(0.5, 10, 0) == 1.0
    assert best_width_ratio(1.0, 1, 10**9) == pytest.approx(0.0, abs=1e-4)
    with pytest.raises(ValueError):
        best_width_ratio(1.5, 1, 1)


# ---------------------------------------------------------------- degenerate inputs


def _finite_or_explained(r: ArmMean | Interval) -> None:
    values = (r.estimate, r.se, r.ci_low, r.ci_high)
    assert not any(math.isnan(v) for v in values) or r.note


@pytest.mark.parametrize("fn", [ppi_mean, crossppi_mean])
def test_ppi_degenerate_inputs(fn):
    rng = np.random.default_rng(0)
    fu = rng.normal(size=100)
    # no unlabeled rows: classical mean, noted
    y = np.array([3.0, 4.0, 5.0, 4.0])
    r = fn(y, y + 0.1, np.array([]))
    assert r.method == "classical" and r.lam == 0.0 and r.N == 0 and "N = 0" in r.note
    assert r.estimate == pytest.approx(4.0) and r.se == pytest.approx(y.std() / 2)
    # one label: finite estimate, unbounded interval, noted
    r = fn(np.array([4.0]), np.array([3.0]), fu)
    assert r.estimate == 4.0 and math.isinf(r.se) and "single label" in r.note
    # no labels: NaN, but explained
    r = fn(np.array([]), np.array([]), fu)
    assert math.isnan(r.estimate) and "no labeled" in r.note
    # all ratings equal: finite
    r = fn(np.full(20, 5.0), rng.normal(size=20), fu)
    _finite_or_explained(r)
    assert math.isfinite(r.estimate) and math.isfinite(r.se)
    for res in (fn(y, y, fu), fn(np.full(20, 5.0), np.full(20, 5.0), np.full(100, 5.0))):
        assert all(math.isfinite(v) for v in (res.estimate, res.se, res.ci_low, res.ci_high))


def test_ppi_constant_predictions_fall_back_to_classical():
    y = np.array([1.0, 3.0, 5.0, 4.0, 2.0])
    r = ppi_mean(y, np.full(5, 3.0), np.full(1_000, 3.0))
    assert r.lam == 0.0 and r.method == "classical" and "Var(f) = 0" in r.note
    assert r.estimate == pytest.approx(3.0) and math.isfinite(r.se)
    # ppi_py itself gives NaN here
    with np.errstate(invalid="ignore", divide="ignore"):
        assert np.isnan(ppi_mean_ci(y, np.full(5, 3.0), np.full(1_000, 3.0), alpha=0.05)[0]).all()
    # all-equal labels with varying predictions: lam_hat = 0 and a zero-width, noted interval
    r = ppi_mean(np.full(5, 4.0), np.arange(5.0), np.arange(100.0))
    assert r.lam == 0.0 and r.se == 0.0 and r.estimate == 4.0 and "zero-width" in r.note


def test_difference_carries_notes():
    fu = np.arange(10.0)
    t = ppi_mean(np.array([4.0]), np.array([3.0]), fu)
    c = ppi_mean(np.array([3.0, 4.0, 5.0]), np.array([3.0, 4.0, 4.0]), fu)
    d = difference(t, c)
    assert d.note.startswith("treatment:") and math.isinf(d.se) and d.estimate == pytest.approx(4.0 - c.estimate)
    d = difference(ppi_mean(np.array([]), np.array([]), fu), c)
    assert math.isnan(d.estimate) and "no labeled" in d.note


def test_naive_degenerate_inputs():
    w = welch_difference([4.0], [3.0, 4.0])
    assert w.estimate == pytest.approx(0.5) and math.isinf(w.se) and w.note
    w = welch_difference([4.0, 4.0], [3.0, 3.0, 3.0])
    assert (w.estimate, w.se, w.ci_low, w.ci_high) == (1.0, 0.0, 1.0, 1.0) and w.note
    assert math.isnan(welch_difference([], [1.0, 2.0]).estimate) and welch_difference([], [1.0]).note
    b = bootstrap_difference([5.0], [1.0, 2.0, 3.0], n_resamples=500)
    assert math.isfinite(b.ci_low) and b.note
    assert permutation_pvalue([], [1.0, 2.0]) == 1.0
    assert permutation_pvalue([3.0, 3.0], [3.0, 3.0], n_permutations=99) == 1.0


# ---------------------------------------------------------------- naive comparisons


@pytest.mark.parametrize("sizes", [(40, 25), (300, 310), (8, 200)])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_welch_matches_scipy(sizes, alpha):
    rng = np.random.default_rng(sum(sizes))
    y_t = rng.normal(4.2, 1.0, sizes[0])
    y_c = rng.normal(4.0, 2.0, sizes[1])
    ours = welch_difference(y_t, y_c, alpha=alpha)
    ci = stats.ttest_ind(y_t, y_c, equal_var=False).confidence_interval(1 - alpha)
    assert ours.estimate == pytest.approx(y_t.mean() - y_c.mean(), abs=TOL)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((ci.low, ci.high), abs=TOL)
    assert ours.se == pytest.approx(math.sqrt(y_t.var(ddof=1) / sizes[0] + y_c.var(ddof=1) / sizes[1]), abs=TOL)


def test_bootstrap_hand_case():
    # no variability within arms: every resample gives the observed difference
    b = bootstrap_difference([5.0, 5.0, 5.0], [2.0, 2.0], n_resamples=100)
    assert (b.estimate, b.se, b.ci_low, b.ci_high) == (3.0, 0.0, 3.0, 3.0)
    # tiny seeded example, re-derived by hand from the same Generator stream
    y_t, y_c = np.array([1.0, 2.0, 6.0]), np.array([0.0, 3.0])
    b = bootstrap_difference(y_t, y_c, n_resamples=7, seed=3, alpha=0.2)
    rng = np.random.default_rng(3)
    d = y_t[rng.integers(0, 3, (7, 3))].mean(1) - y_c[rng.integers(0, 2, (7, 2))].mean(1)
    assert b.estimate == pytest.approx(3.0 - 1.5)
    assert b.se == pytest.approx(d.std(ddof=1), abs=TOL)
    assert (b.ci_low, b.ci_high) == pytest.approx(tuple(np.quantile(d, [0.1, 0.9])), abs=TOL)
    assert bootstrap_difference(y_t, y_c, n_resamples=7, seed=3, alpha=0.2) == b  # reproducible


def test_bootstrap_is_near_welch_for_normal_data():
    rng = np.random.default_rng(21)
    y_t, y_c = rng.normal(4.3, 1.0, 400), rng.normal(4.0, 1.2, 350)
    b = bootstrap_difference(y_t, y_c, n_resamples=4_000, seed=1)
    w = welch_difference(y_t, y_c)
    assert b.estimate == pytest.approx(w.estimate, abs=TOL)
    assert (b.ci_low + b.ci_high) / 2 == pytest.approx(w.estimate, abs=0.15 * w.se)
    assert (b.ci_high - b.ci_low) / (w.ci_high - w.ci_low) == pytest.approx(1.0, abs=0.08)
    assert b.se == pytest.approx(w.se, rel=0.08)


@pytest.mark.parametrize("shift", [0.0, 0.15, 0.3])
def test_permutation_pvalue_matches_scipy(shift):
    rng = np.random.default_rng(31)
    y_t = np.clip(np.round(rng.normal(4.0 + shift, 1.0, 150)), 1, 5)
    y_c = np.clip(np.round(rng.normal(4.0, 1.0, 150)), 1, 5)
    B = 5_000
    ours = permutation_pvalue(y_t, y_c, n_permutations=B, seed=0)
    ref = stats.permutation_test(
        (y_t, y_c), lambda a, b, axis: a.mean(axis) - b.mean(axis), vectorized=True, n_resamples=B, random_state=0
    ).pvalue
    mc_se = math.sqrt(max(ref * (1 - ref), 0.01) / B)
    assert abs(ours - ref) < 5 * mc_se * math.sqrt(2) + 2 / B
    assert 1 / (B + 1) <= ours <= 1.0
    assert permutation_pvalue(y_t, y_c, n_permutations=B, seed=0) == ours  # exactly reproducible


def test_permutation_pvalue_unequal_arms_and_extreme():
    y_t, y_c = np.full(10, 5.0), np.full(30, 1.0)
    B = 999
    assert permutation_pvalue(y_t, y_c, n_permutations=B) == pytest.approx(1 / (B + 1))
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=30), rng.normal(size=90)
    p = permutation_pvalue(a, b, n_permutations=4_000, seed=5)
    ref = stats.permutation_test(
        (a, b), lambda x, y, axis: x.mean(axis) - y.mean(axis), vectorized=True, n_resamples=4_000, random_state=5
    ).pvalue
    assert abs(p - ref) < 0.05


# ---------------------------------------------------------------- AIPW


def test_aipw_everyone_rated_is_plain_mean():
    rng = np.random.default_rng(4)
    y = rng.integers(1, 6, 50).astype(float)
    f = rng.normal(4, 1, 50)
    r = aipw_mean(y, f, np.ones(50, bool), np.ones(50))
    assert r.method == "aipw" and r.n_clipped == 0 and r.note is None and r.n == 50 and r.N == 0
    assert r.estimate == pytest.approx(y.mean(), abs=TOL)
    assert r.se == pytest.approx(y.std(ddof=1) / math.sqrt(50), abs=TOL)


def _selected_arm(seed: int, total: int = 6_000):
    """Rating more likely for high x; x also raises satisfaction. True mean of y is 3.0."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=total)
    y_all = 3.0 + 0.8 * x + rng.normal(size=total)
    rated = rng.random(total) < 1 / (1 + np.exp(-(-2.0 + 1.5 * x)))
    f_all = 3.1 + 0.4 * x  # an imperfect model: biased intercept, half the slope
    return x, y_all, rated, f_all


def test_aipw_unbiased_where_naive_is_not():
    est_aipw, est_naive, ses = [], [], []
    for seed in range(6):
        x, y_all, rated, f_all = _selected_arm(seed)
        pi = crossfit_propensity(x[:, None], rated, seed=seed)
        r = aipw_mean(y_all[rated], f_all, rated, pi)
        assert math.isfinite(r.se) and (r.n, r.N) == (rated.sum(), (~rated).sum())
        est_aipw.append(r.estimate)
        est_naive.append(y_all[rated].mean())
        ses.append(r.se)
    se_of_mean = np.mean(ses) / math.sqrt(len(ses))
    assert abs(np.mean(est_aipw) - 3.0) < 3 * se_of_mean
    assert np.mean(est_naive) - 3.0 > 10 * se_of_mean  # naive mean of rated sessions is biased upward


def test_aipw_constant_propensity_is_the_cross_prediction_mean():
    # pi constant: mu = mean(f) + mean of rated residuals; psi = f + r + R (e - r) N / n, worked out here by hand
    y = np.array([4.0, 2.0, 5.0])
    f = np.array([3.0, 3.0, 4.0, 2.0, 3.0, 3.5])
    rated = np.array([True, True, True, False, False, False])
    r = aipw_mean(y, f, rated, np.full(6, 0.4))
    resid = y - f[:3]  # [1, -1, 1], mean 1/3
    assert r.estimate == pytest.approx(f.mean() + 1 / 3, abs=TOL)
    psi = f + 1 / 3
    psi[:3] += (resid - 1 / 3) * 6 / 3
    assert r.se == pytest.approx(math.sqrt(psi.var(ddof=1) / 6), abs=TOL)


def _penalized_logit(D: np.ndarray, rated: np.ndarray, C: float):
    """The propensity model worked out without scikit-learn: argmin over (w, b) of C * sum(log-loss) + |w|^2 / 2 on
    the standardized D (population sd), by scipy's L-BFGS-B run to a gradient of 1e-10; returns its predictor."""
    mean, sd = D.mean(axis=0), D.std(axis=0)
    sd[sd == 0] = 1.0
    Z, t = (D - mean) / sd, rated.astype(float)

    def objective(theta):
        eta = Z @ theta[:-1] + theta[-1]
        g = expit(eta) - t
        loss = C * np.sum(np.logaddexp(0, eta) - t * eta) + 0.5 * theta[:-1] @ theta[:-1]
        return loss, np.r_[C * (Z.T @ g) + theta[:-1], C * g.sum()]

    options = {"gtol": 1e-10, "ftol": 0, "maxiter": 100_000}
    theta = minimize(objective, np.zeros(Z.shape[1] + 1), jac=True, method="L-BFGS-B", options=options).x
    return lambda new: expit(((new - mean) / sd) @ theta[:-1] + theta[-1])


def test_propensities_are_each_folds_penalized_maximum_likelihood_fit():
    # many correlated counts (each also enters as log1p): where an optimizer stopped on the way shows (scikit-learn's
    # default L-BFGS stopped 1.4 % away here)
    rng = np.random.default_rng(3)
    n, p = 4_000, 30
    latent = rng.gamma(2.0, 1.0, size=(n, 1))
    X = rng.poisson(latent * rng.uniform(0.5, 3.0, size=(1, p))).astype(float)
    X[:, :5] += rng.normal(size=(n, 5))
    rated = rng.random(n) < expit(-3.5 + 0.15 * X[:, :10].sum(axis=1) / latent[:, 0].clip(0.5))
    D = propensity_design(X)
    want = np.empty(n)
    for train, test in StratifiedKFold(n_splits=5, shuffle=True, random_state=9).split(np.zeros(n), rated):
        want[test] = _penalized_logit(D[train], rated[train], PROPENSITY_C)(D[test])
    got = crossfit_propensity(X, rated, seed=9)
    assert np.max(np.abs(got - want) / want) < 1e-5


def test_aipw_clipping_and_degenerate():
    y_all = np.array([1.0, 5.0, 3.0, 4.0])
    rated = np.array([True, True, False, False])
    # a clip asked for (the default clips nothing: tests/test_aipw_no_wider.py)
    r = aipw_mean(y_all[rated], np.full(4, 3.0), rated, np.array([0.001, 0.5, 0.2, 0.0]), clip=(0.01, 1.0))
    assert r.n_clipped == 1 and "clipped" in r.note and math.isfinite(r.estimate)
    # weights 1/0.01 = 100 and 1/0.5 = 2 on residuals -2 and +2: weighted mean residual (-200 + 4) / 102
    assert r.estimate == pytest.approx(3.0 + (-200 + 4) / 102)
    r = aipw_mean(np.array([]), np.full(4, 3.0), np.zeros(4, bool), np.full(4, 0.5))
    assert math.isnan(r.estimate) and "no rated" in r.note
    r = aipw_mean(np.array([4.0]), np.array([3.0]), np.array([True]), np.array([1.0]))
    assert r.estimate == 4.0 and math.isinf(r.se) and r.note


def test_propensity_and_auc_diagnostic():
    x, _, rated, _ = _selected_arm(0, total=3_000)
    pi = crossfit_propensity(x[:, None], rated)
    assert pi.shape == rated.shape and (pi > 0).all() and (pi < 1).all()
    assert np.corrcoef(pi, x)[0, 1] > 0.9
    X = np.column_stack([x, np.random.default_rng(1).normal(size=x.size)])
    X[::7, 1] = np.nan  # missing values are tolerated
    assert propensity_auc(rated, crossfit_propensity(X, rated)) > 0.7
    random_rated = np.random.default_rng(2).random(x.size) < 0.2
    assert abs(propensity_auc(random_rated, crossfit_propensity(X, random_rated)) - 0.5) < 0.07
    assert math.isnan(propensity_auc(np.zeros(x.size, bool), crossfit_propensity(X, np.zeros(x.size, bool))))
    assert np.allclose(crossfit_propensity(X, np.eye(1, x.size, 0, dtype=bool)[0]), 1 / x.size)
