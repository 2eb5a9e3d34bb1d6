"""``OrdinalLogitRegressor``: recovery of a known cumulative-logit model, penalty, class weights, levels, gradient,
scikit-learn compatibility (pipelines, clone, cross-validation, the estimator checks) and speed."""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy.special import expit
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from pulse_pipeline.modeling.ordinal import OrdinalLogitRegressor, _loss_and_grad, _pack, ordinal_levels

BETA = np.array([1.0, -0.5, 0.25, 0.0])
THRESHOLDS = np.array([-2.0, -0.5, 0.5, 2.0])


def true_proba(X: np.ndarray, beta: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    cdf = expit(thresholds[None, :] - (X @ beta)[:, None])
    n = X.shape[0]
    return np.diff(np.hstack((np.zeros((n, 1)), cdf, np.ones((n, 1)))), axis=1)


def simulate(n: int, beta: np.ndarray, thresholds: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``X`` ~ N(0, I), stars 1..K drawn from the cumulative-logit model; returns X, y, true probabilities."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, beta.size))
    proba = true_proba(X, beta, thresholds)
    u = rng.random(n)
    y = 1 + (u[:, None] > np.cumsum(proba, axis=1)[:, :-1]).sum(axis=1)
    return X, y.astype(float), proba


def numeric_grad(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    g = np.empty_like(x)
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h
        g[j] = (f(x + e) - f(x - e)) / (2 * h)
    return g


# --- recovery -------------------------------------------------------------------------------------------------


def test_recovers_known_model():
    """n = 20 000, no class weights, C = 1e6 (penalty ~1e-6 of the log-likelihood): the MLE.

    Tolerance: 4 standard errors per parameter, from the observed information (the Hessian of the loss, by central
    differences of the analytic gradient, mapped to (beta, thresholds) by the delta method). They come out at
    ~0.013-0.015 for beta and ~0.016-0.023 for the thresholds (a 300-seed Monte Carlo gives the same spread), so
    the bound is ~0.05-0.09; we also require every SE < 0.03, so the bound cannot silently become loose.
    """
    X, y, proba = simulate(20_000, BETA, THRESHOLDS, seed=0)
    model = OrdinalLogitRegressor(C=1e6, class_weight=None).fit(X, y)
    np.testing.assert_array_equal(model.classes_, [1.0, 2.0, 3.0, 4.0, 5.0])
    assert model.coef_.shape == (4,) and model.thresholds_.shape == (4,)
    assert np.all(np.diff(model.thresholds_) > 0)

    params = _pack(model.coef_, model.thresholds_)
    w = np.ones(y.size)
    y_idx = (y - 1).astype(int)
    hessian = np.empty((params.size, params.size))
    for j in range(params.size):
        e = np.zeros(params.size)
        e[j] = 1e-5
        hessian[:, j] = (
            _loss_and_grad(params + e, X, y_idx, w, 1e6)[1] - _loss_and_grad(params - e, X, y_idx, w, 1e6)[1]
        ) / 2e-5
    hessian = (hessian + hessian.T) / 2
    # d(beta, thresholds) / d(beta, theta_1, log-increments): theta_k = theta_1 + sum_{j<=k} exp(d_j)
    jac = np.eye(params.size)
    raw = params[4:]
    for k in range(4):
        jac[4 + k, 4] = 1.0
        for j in range(1, k + 1):
            jac[4 + k, 4 + j] = np.exp(raw[j])
    se = np.sqrt(np.diag(jac @ np.linalg.inv(hessian) @ jac.T))
    assert np.all(se < 0.03), se

    err = np.concatenate((model.coef_ - BETA, model.thresholds_ - THRESHOLDS))
    assert np.all(np.abs(err) < 4 * se), (err, se)
    assert np.abs(model.predict_proba(X) - proba).mean() < 0.01


# --- penalty, class weights, levels ---------------------------------------------------------------------------


def test_penalty_shrinks_coefficients_monotonically():
    X, y, _ = simulate(1_000, BETA, THRESHOLDS, seed=1)
    norms = []
    for C in (1e4, 10.0, 1.0, 0.1, 0.01, 1e-3, 1e-4):
        model = OrdinalLogitRegressor(C=C, class_weight=None).fit(X, y)
        assert np.all(np.diff(model.thresholds_) > 0), (C, model.thresholds_)
        norms.append(np.linalg.norm(model.coef_))
    assert np.all(np.diff(norms) < 0), norms
    assert norms[-1] < 0.1 * norms[0]


def test_balanced_weights_predict_the_rare_extreme_more_often():
    X, y, _ = simulate(3_000, BETA, np.array([-3.5, -1.5, 0.5, 2.0]), seed=1)
    share_1 = np.mean(y == 1)
    assert 0.02 < share_1 < 0.08  # level 1 is rare
    plain = OrdinalLogitRegressor(class_weight=None).fit(X, y).predict_proba(X)
    balanced = OrdinalLogitRegressor(class_weight="balanced").fit(X, y).predict_proba(X)
    modal_plain = np.sum(plain.argmax(axis=1) == 0)
    modal_balanced = np.sum(balanced.argmax(axis=1) == 0)
    assert modal_balanced > 5 * modal_plain + 100, (modal_plain, modal_balanced)  # ~10 vs ~480 rows
    assert balanced[:, 0].mean() > 2 * plain[:, 0].mean()  # ~0.17 vs ~0.05


def test_balanced_weights_match_hand_computed_vector():
    # levels 1, 2, 5 with counts 3, 1, 2; n = 6, K = 3: w = 6 / (3 * count) = 2/3, 2, 1
    rng = np.random.default_rng(3)
    X = rng.normal(size=(6, 2))
    y = np.array([1.0, 1.0, 1.0, 2.0, 5.0, 5.0])
    hand = np.array([2 / 3, 2 / 3, 2 / 3, 2.0, 1.0, 1.0])
    balanced = OrdinalLogitRegressor(class_weight="balanced", tol=1e-12).fit(X, y)
    by_sample = OrdinalLogitRegressor(class_weight=None, tol=1e-12).fit(X, y, sample_weight=hand)
    by_dict = OrdinalLogitRegressor(class_weight={1: 2 / 3, 2: 2.0, 5: 1.0}, tol=1e-12).fit(X, y)
    np.testing.assert_array_equal(balanced.classes_, [1.0, 2.0, 5.0])
    for other in (by_sample, by_dict):
        np.testing.assert_allclose(balanced.coef_, other.coef_, atol=1e-6)
        np.testing.assert_allclose(balanced.thresholds_, other.thresholds_, atol=1e-6)
    unweighted = OrdinalLogitRegressor(class_weight=None, tol=1e-12).fit(X, y)
    assert np.abs(unweighted.thresholds_ - balanced.thresholds_).max() > 0.1  # the weights do matter here


def test_fractional_targets_round_half_up():
    np.testing.assert_array_equal(ordinal_levels([1.4, 1.5, 4.33]), [1.0, 2.0, 4.0])
    np.testing.assert_array_equal(ordinal_levels([2.5, 3.5, 4.5, 2.49]), [3.0, 4.0, 5.0, 2.0])  # not to even
    np.testing.assert_array_equal(ordinal_levels([1.4, 1.5, 4.33], "unique"), [1.4, 1.5, 4.33])

    X = np.array([[-1.0], [0.0], [1.0]])
    model = OrdinalLogitRegressor().fit(X, [1.4, 1.5, 4.33])
    np.testing.assert_array_equal(model.classes_, [1.0, 2.0, 4.0])
    unique = OrdinalLogitRegressor(levels="unique").fit(X, [1.4, 1.5, 4.33])
    np.testing.assert_array_equal(unique.classes_, [1.4, 1.5, 4.33])


def test_predict_is_the_expected_rating():
    X, y, _ = simulate(500, BETA, THRESHOLDS, seed=2)
    y = y + np.where(np.arange(y.size) % 3 == 0, 1 / 3, 0.0)  # fractional session means
    for levels in ("round", "unique"):
        model = OrdinalLogitRegressor(levels=levels).fit(X, y)
        proba = model.predict_proba(X)
        assert proba.shape == (X.shape[0], model.classes_.size)
        assert np.all(proba >= 0)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        pred = model.predict(X)
        np.testing.assert_allclose(pred, proba @ model.classes_)
        assert np.all((pred >= model.classes_[0]) & (pred <= model.classes_[-1]))
        assert np.corrcoef(pred, y)[0, 1] > 0.5


# --- edge cases -----------------------------------------------------------------------------------------------


def test_single_level_predicts_it():
    X = np.random.default_rng(0).normal(size=(5, 3))
    model = OrdinalLogitRegressor().fit(X, [4.2, 3.8, 4.0, 4.4, 4.0])
    np.testing.assert_array_equal(model.classes_, [4.0])
    assert model.thresholds_.shape == (0,) and model.n_iter_ == 0
    np.testing.assert_array_equal(model.predict(X), 4.0)
    np.testing.assert_array_equal(model.predict_proba(X), np.ones((5, 1)))


def test_absent_levels_and_constant_feature():
    X, y, _ = simulate(600, BETA, THRESHOLDS, seed=4)
    y = np.select([y <= 2, y == 3], [1.0, 2.0], 5.0)  # levels 1, 2, 5 only
    X = np.hstack((X, np.full((X.shape[0], 1), 3.7)))
    model = OrdinalLogitRegressor().fit(X, y)
    np.testing.assert_array_equal(model.classes_, [1.0, 2.0, 5.0])
    assert model.thresholds_.shape == (2,) and np.all(np.diff(model.thresholds_) > 0)
    assert abs(model.coef_[-1]) < 1e-8  # a constant column carries no information
    pred = model.predict(X)
    assert np.all((pred >= 1) & (pred <= 5))


def test_nan_in_X_raises():
    X, y, _ = simulate(50, BETA, THRESHOLDS, seed=5)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        OrdinalLogitRegressor().fit(bad, y)
    model = OrdinalLogitRegressor().fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        model.predict(bad)


@pytest.mark.parametrize(
    "params",
    [{"C": 0.0}, {"C": -1.0}, {"levels": "floor"}, {"class_weight": "uniform"}, {"class_weight": {1: 0.0}}],
)
def test_invalid_parameters_raise_at_fit(params):
    X, y, _ = simulate(50, BETA, THRESHOLDS, seed=5)
    model = OrdinalLogitRegressor(**params)  # no validation in __init__
    with pytest.raises(ValueError):
        model.fit(X, y)


def test_iteration_limit_warns():
    X, y, _ = simulate(500, BETA, THRESHOLDS, seed=6)
    with pytest.warns(ConvergenceWarning):
        OrdinalLogitRegressor(max_iter=1).fit(X, y)


# --- gradient -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_levels", [2, 3, 5])
def test_gradient_matches_finite_differences(n_levels):
    rng = np.random.default_rng(n_levels)
    n, p = 200, 4
    X = rng.normal(size=(n, p))
    y_idx = rng.integers(0, n_levels, size=n)
    y_idx[:n_levels] = np.arange(n_levels)  # the end levels (infinite bounds) are always present
    w = rng.uniform(0.2, 3.0, size=n)
    params = np.concatenate((rng.normal(size=p), [rng.normal()], rng.normal(scale=0.5, size=n_levels - 2)))

    def loss(q):
        return _loss_and_grad(q, X, y_idx, w, 0.7)[0]

    analytic = _loss_and_grad(params, X, y_idx, w, 0.7)[1]
    numeric = numeric_grad(loss, params)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-6 * np.abs(numeric).max())


# --- scikit-learn compatibility -------------------------------------------------------------------------------


def test_pipeline_clone_and_cross_val_predict():
    X, y, _ = simulate(400, BETA, THRESHOLDS, seed=7)
    X = X * np.array([1.0, 10.0, 100.0, 0.1]) + 5.0
    pipe = make_pipeline(StandardScaler(), OrdinalLogitRegressor())
    cloned = clone(pipe)
    assert cloned.get_params()["ordinallogitregressor__C"] == 2.0
    assert cloned.get_params()["ordinallogitregressor__class_weight"] == "balanced"
    assert not hasattr(cloned[-1], "coef_")
    pred = cross_val_predict(pipe, X, y, cv=5)
    assert pred.shape == y.shape
    assert np.all((pred >= 1) & (pred <= 5))
    assert np.corrcoef(pred, y)[0, 1] > 0.5
    fitted = pipe.fit(X, y)
    assert fitted[-1].n_features_in_ == 4


def test_fit_time_paper_scale():
    """The paper's labelled set: ~1 750 rows x ~60 features; must fit in well under a second (takes ~0.05 s)."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(1_750, 60))
    eta = X @ rng.normal(scale=0.2, size=60) + rng.logistic(size=1_750)
    y = 1 + np.searchsorted(THRESHOLDS, eta) + rng.choice([0.0, 1 / 3, 0.5], size=1_750)
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        OrdinalLogitRegressor(C=2.0, class_weight="balanced").fit(X, np.clip(y, 1, 5))
        best = min(best, time.perf_counter() - start)
    assert best < 0.5, best


EXPECTED_FAILED_CHECKS = {
    # The check asserts that a regressor has no predict_proba. This one has it on purpose: the distribution over
    # the ordered levels is the model's output, and predict() is its mean (the expected rating).
    "check_regressors_no_decision_function": "ordinal regressor: predict_proba is part of the API by design",
}


@parametrize_with_checks(
    [OrdinalLogitRegressor(), OrdinalLogitRegressor(class_weight=None, levels="unique")],
    expected_failed_checks=lambda estimator: EXPECTED_FAILED_CHECKS,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
