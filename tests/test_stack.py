"""The stack of the families' out-of-fold predictions (modeling/stack.py) and the honest floor (the constant row,
lambda = 0 when every family loses to it).

Values are worked out independently: NNLS weights of a perfect and a pure-noise predictor (1 and 0 by construction),
the families' numbers against ``crossfit.cross_validate``, the recorded training rows against the fold ids (the
stack's prediction for fold k may use no label of fold k), and the lambda = 0 PPI interval against the classical
interval computed by hand.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
from scipy.stats import norm

from pulse_pipeline.estimates.effects import ArmData, Settings, compare
from pulse_pipeline.modeling.comparison import CVMetricRow, compare_models, floor_reason
from pulse_pipeline.modeling.crossfit import cross_validate, oof_violations
from pulse_pipeline.modeling.cv import fit_folds, out_of_bag, outer_folds
from pulse_pipeline.modeling.data import ModelingData
from pulse_pipeline.modeling.predictions import audit_out_of_fold
from pulse_pipeline.modeling.stack import (
    CONSTANT,
    STACK,
    Fold,
    blend,
    cross_validate_all,
    nnls_weights,
    stack_crossfit_predict,
)


def two_signals(seed: int = 0, n: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Ratings 1-5 from a smooth signal spread over 8 columns (a linear model's strength, a forest's weakness) plus an
    XOR of two more (a forest's strength, invisible to a linear model)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 10))
    latent = 0.45 * X[:, :8].sum(axis=1) + 1.2 * np.sign(X[:, 8] * X[:, 9]) + rng.normal(scale=0.5, size=n)
    return X, np.clip(np.round(3 + latent), 1, 5)


def test_nnls_gives_the_perfect_family_weight_one_and_the_noise_zero():
    rng = np.random.default_rng(3)
    y = rng.normal(3, 1, size=200)
    noise = rng.normal(3, 1, size=200)
    b, w = nnls_weights(np.column_stack([y, noise]), y)
    assert w[0] == pytest.approx(1.0, abs=1e-9)
    assert w[1] == pytest.approx(0.0, abs=1e-9)
    assert b == pytest.approx(0.0, abs=1e-9)


def test_nnls_weights_are_never_negative_and_the_intercept_absorbs_a_shift():
    rng = np.random.default_rng(4)
    y = rng.normal(size=300)
    anti = -y + rng.normal(scale=0.1, size=300)  # least squares would give it weight ~ -1
    b, w = nnls_weights(np.column_stack([y + 2.0, anti]), y)
    assert w[1] == 0.0 and w[0] == pytest.approx(1.0, abs=1e-9)
    assert b == pytest.approx(-2.0, abs=1e-9)  # y = (y + 2) - 2


def test_the_families_numbers_are_cross_validates():
    X, y = two_signals(n=200)
    results = {r.family: r for r in cross_validate_all(X, y, ["ordinal_logit", "lightgbm"], seeds=(42, 43))}
    assert list(results) == ["ordinal_logit", "lightgbm", STACK, CONSTANT]
    for family in ("ordinal_logit", "lightgbm"):
        alone = cross_validate(X, y, family, seeds=(42, 43))
        for m in ("mse", "mae", "pearson"):
            assert results[family].metric(m).mean == pytest.approx(alone.metric(m).mean, rel=1e-12)


def test_the_constant_predicts_each_fold_by_the_training_folds_mean():
    X, y = two_signals(n=50)
    constant = next(r for r in cross_validate_all(X, y, ["ordinal_logit"], seeds=(42,)) if r.family == CONSTANT)
    by_hand = np.empty_like(y)
    for fold in outer_folds(y, 5, 42, None):
        by_hand[fold.test] = y[fold.train].mean()
    assert np.allclose(constant.oof, by_hand)
    assert constant.metric("mse").mean == pytest.approx(float(np.mean((y - by_hand) ** 2)))


def test_out_of_bag_predictions_match_scikit_learns():
    from sklearn.ensemble import RandomForestRegressor

    from pulse_pipeline.modeling.families import make_model

    X, y = two_signals(n=150)
    model = make_model("random_forest", random_state=1).fit(X, y)
    reference = RandomForestRegressor(
        n_estimators=400, max_features=1 / 3, min_samples_leaf=5, oob_score=True, random_state=1
    ).fit(X, y)
    assert np.allclose(out_of_bag(model, X), reference.oob_prediction_)


def test_the_stack_beats_each_family_when_they_carry_different_signal():
    X, y = two_signals(seed=0)
    res = {r.family: r for r in cross_validate_all(X, y, ["ordinal_logit", "random_forest"], seeds=(42,))}
    best_r = max(res[f].metric("pearson").mean for f in ("ordinal_logit", "random_forest"))
    best_mse = min(res[f].metric("mse").mean for f in ("ordinal_logit", "random_forest"))
    assert res[STACK].metric("pearson").mean > best_r
    assert res[STACK].metric("mse").mean < best_mse


@pytest.fixture(scope="module")
def stacked():
    X, y = two_signals(seed=2, n=240)
    fit, stack = stack_crossfit_predict(X[:200], y[:200], X[200:], ["ordinal_logit", "lightgbm"], k=5, seed=42)
    return X, y, fit, stack


def test_no_stack_prediction_uses_weights_or_models_that_saw_its_fold(stacked):
    _, y, fit, stack = stacked
    n = 200
    for k in range(5):
        held_out = np.flatnonzero(stack.fold == k)
        assert held_out.size and not np.isin(held_out, stack.weight_train_index[k]).any()
        assert not np.isin(held_out, stack.train_index_by_fold[k]).any()
        # every row outside fold k did train fold k's stack: the record is the whole of T_k, not less
        assert np.array_equal(np.sort(stack.train_index_by_fold[k]), np.setdiff1d(np.arange(n), held_out))
    assert oof_violations(fit.fold, fit.train_index_by_fold) == 0
    assert np.all(stack.weights >= 0)
    # the rated rows' prediction is fold k's blend of the families' outer predictions
    assert fit.oof.shape == (n,) and fit.unlabeled.shape == (40,)


def test_weights_fitted_on_all_rows_are_caught_by_the_audit(stacked):
    X, y, _, stack = stacked
    X, y = X[:200], y[:200]
    folds = outer_folds(y, 5, 42, None)
    fits = [fit_folds(X, y, X[:0], f, folds, 42, 1, True, False) for f in ("ordinal_logit", "lightgbm")]
    # planted: every fold's weights fitted on all 200 rows' out-of-fold predictions and labels
    fits = [replace(f, inner=np.tile(f.oof, (5, 1))) for f in fits]
    leaked = blend(fits, y, [Fold(np.arange(200), f.test, None) for f in folds])
    assert oof_violations(leaked.fold, leaked.train_index_by_fold) == 200
    # the same through the stored tables the check `predictions_are_out_of_fold` reads
    ids = np.array([f"s{i:03d}" for i in range(200)])
    predictions = pl.DataFrame({"session_id": ids, "labeled": True, "fold": leaked.fold, "model": STACK})
    fold_training = pl.DataFrame(
        {
            "model": STACK,
            "fold": np.repeat(np.arange(5), [len(t) for t in leaked.train_index_by_fold]),
            "session_id": ids[np.concatenate(leaked.train_index_by_fold)],
        }
    )
    assert audit_out_of_fold(predictions, fold_training).in_sample_predictions == 200
    honest = pl.DataFrame(  # and the honest record passes
        {
            "model": STACK,
            "fold": np.repeat(np.arange(5), [len(t) for t in stack.train_index_by_fold]),
            "session_id": ids[np.concatenate(stack.train_index_by_fold)],
        }
    )
    ok = pl.DataFrame({"session_id": ids, "labeled": True, "fold": stack.fold, "model": STACK})
    assert audit_out_of_fold(ok, honest).passed


def rows_of(n: int, mse: dict[str, float]) -> list[CVMetricRow]:
    return [CVMetricRow(m, "mse", v, 0.01, n, 5, False, "cross_validation") for m, v in mse.items()]


def test_the_floor_rule_on_hand_made_rows():
    assert floor_reason(rows_of(60, {"ordinal_logit": 1.1, "stack": 1.05, CONSTANT: 1.0})) is not None
    assert floor_reason(rows_of(60, {"ordinal_logit": 1.1, "stack": 0.99, CONSTANT: 1.0})) is None
    assert floor_reason(rows_of(300, {"ordinal_logit": 1.1, CONSTANT: 1.0})) is None  # enough labels: PPI++ decides


def test_sixty_noisy_labels_hit_the_floor_and_ppi_becomes_the_naive_estimate():
    rng = np.random.default_rng(11)
    n_rated, n_all = 60, 260
    y = np.full(n_all, np.nan)
    y[:n_rated] = rng.integers(1, 6, size=n_rated)  # pure noise: no feature says anything
    data = ModelingData(("a", "b", "c"), np.array([f"s{i:03d}" for i in range(n_all)]), rng.normal(size=(n_all, 3)), y)
    judge = pl.DataFrame(schema={"model": pl.String, "n": pl.Int64, "mse": float, "mae": float, "pearson": float})
    comparison = compare_models(data, judge, ["ordinal_logit", "lightgbm", STACK], (42, 43), 5, "pearson")
    mse = {r.model: r.mean for r in comparison.rows if r.metric == "mse"}
    assert set(mse) == {"ordinal_logit", "lightgbm", STACK, CONSTANT}
    assert min(v for m, v in mse.items() if m != CONSTANT) > mse[CONSTANT]
    assert comparison.floor is not None
    assert not any(r.chosen for r in comparison.rows if r.model == CONSTANT)

    # the estimates stage: lambda = 0 in both arms, and the interval is the classical one, by hand
    f = rng.normal(size=n_all)  # any predictions: with lambda 0 they must not matter
    Z = data.X  # the propensity model's inputs (AIPW's row needs some)
    treat = ArmData("t", y[:30], f[:30], f[60:160], Z[:30], Z[60:160])
    control = ArmData("c", y[30:60], f[30:60], f[160:], Z[30:60], Z[160:])
    settings = Settings(n_resamples=200, n_permutations=50, floor=comparison.floor)
    rows = {r.method: r for r in compare(treat, control, settings)[0]}
    ppi = rows["ppi"]
    assert ppi.lambda_treatment == 0.0 and ppi.lambda_control == 0.0
    estimate = y[:30].mean() - y[30:60].mean()
    se = math.sqrt(y[:30].var() / 30 + y[30:60].var() / 30)  # ddof 0, as the classical PPI mean
    z = norm.ppf(0.975)
    assert ppi.effect == pytest.approx(estimate, abs=1e-12)
    assert ppi.effect == pytest.approx(rows["naive_welch"].effect, abs=1e-12)
    assert (ppi.ci_low, ppi.ci_high) == pytest.approx((estimate - z * se, estimate + z * se), abs=1e-12)
    assert comparison.floor in ppi.note
    # without the floor PPI++ picks its own lambda from these (unrelated) predictions
    free = {r.method: r for r in compare(treat, control, Settings(n_resamples=200, n_permutations=50))[0]}
    assert (free["ppi"].lambda_treatment, free["ppi"].lambda_control) != (0.0, 0.0)


def test_with_the_text_the_families_numbers_are_cross_validates_and_the_stack_stays_exact():
    import scipy.sparse as sp

    from pulse_pipeline.modeling.text import TextFeature, text_score_violations

    rng = np.random.default_rng(5)
    X, y = two_signals(seed=5, n=260)
    words = (rng.random((260, 30)) < 0.2).astype(float)
    words[:, 0] = (y >= 4) * (rng.random(260) < 0.8)  # one "word" says the user was pleased
    text = TextFeature(sp.csr_matrix(words[:200]), sp.csr_matrix(words[200:]))
    families = ["ordinal_logit", "text"]
    results = {r.family: r for r in cross_validate_all(X[:200], y[:200], families, seeds=(42,), text=text)}
    for family in families:
        alone = cross_validate(X[:200], y[:200], family, seeds=(42,), text=text)
        assert results[family].metric("mse").mean == pytest.approx(alone.metric("mse").mean, rel=1e-12)
    fit, stack = stack_crossfit_predict(X[:200], y[:200], X[200:], families, k=5, seed=42, text=text)
    assert oof_violations(fit.fold, fit.train_index_by_fold) == 0
    assert text_score_violations(fit.text_folds) == 0
    for k, fold in enumerate(outer_folds(y[:200], 5, 42, text)):
        assert not np.isin(fold.test, stack.train_index_by_fold[k]).any()
        assert np.isin(fold.text.labels_used, stack.train_index_by_fold[k]).all()  # the text's labels are recorded
    assert fit.unlabeled.shape == (60,) and np.all(np.isfinite(fit.unlabeled))
    # each fold's blend, as one model of [features, text score], gives the stack's out-of-fold prediction
    for k, fold in enumerate(outer_folds(y[:200], 5, 42, text)):
        A = np.column_stack([X[:200][fold.test], fold.text.held_out_scores])
        assert np.allclose(fit.models[k].predict(A), fit.oof[fold.test])
    assert fit.text_score.shape == (200,) and np.isfinite(fit.text_score).all()


def test_the_chosen_stacks_importance_ranks_the_columns_its_families_read(stacked):
    from pulse_pipeline.modeling.importance import permutation_importance_oof

    X, y, fit, stack = stacked
    # by hand, fold 0's blend: b + sum_f w_f * (family f's fold-0 model)
    blend0 = fit.models[0]
    held = np.flatnonzero(fit.fold == 0)
    by_hand = stack.intercepts[0] + sum(
        w * m.predict(X[held]) for w, m in zip(stack.weights[0], blend0.models, strict=True)
    )
    assert np.allclose(blend0.predict(X[held]), by_hand) and np.allclose(by_hand, fit.oof[held])
    ranked = permutation_importance_oof(fit, X[:200], y[:200], [f"x{j}" for j in range(10)])
    # the XOR pair (x8, x9) moves the rating by 1.2 stars, each smooth column by 0.45: the pair ranks first
    assert {ranked[0].feature, ranked[1].feature} == {"x8", "x9"}
