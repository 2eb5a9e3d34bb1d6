"""A model choice safe for every method (``modeling/recalibration.py``): what feeds a lambda = 1 method (cross-PPI,
AIPW's outcome model) is recalibrated by cross-fitted linear maps when it loses to the constant or is mis-scaled,
and left as it is when it is well scaled; the recalibrated predictions stay out of fold.

The truths come from generators whose conditional mean is known: ratings Y = 3 + s(x) + e with s ~ N(0, 0.3^2)
and e ~ N(0, 0.6^2), so rho^2 = 0.09 / 0.45 = 0.2 for the predictor s itself. A badly scaled model f = 3 s + 3.5
has Var(Y - f) = 4 (0.09) + 0.36 = 0.72 against Var(Y) = 0.45, and Var(f~) / N = 9 (0.09) / N: with N = 9 n,
cross-PPI fed it is sqrt((0.72 + 0.09) / 0.45) = 1.34x the naive width; recalibrated (slope 1/3) it is
sqrt(1 - 0.2 (1 - n/N)) ~ 0.91x. A well-scaled f = 3 + s has
calibration slope exactly 1: it is recalibrated only when the 5 % test errs.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from pulse_pipeline.estimates.effects import ArmData, Settings, compare
from pulse_pipeline.estimates.methods import Method
from pulse_pipeline.modeling import cv
from pulse_pipeline.modeling.data import ModelingData
from pulse_pipeline.modeling.predictions import audit_out_of_fold, crossfit_tables
from pulse_pipeline.modeling.recalibration import (
    IDENTITY,
    SLOPE_CHI2,
    LinearMap,
    apply_maps,
    calibration_slope,
    decide,
    fit_map,
    recalibrate,
)
from pulse_pipeline.stats.ppi import crossppi_mean

N_SESSIONS, RATED = 3000, 0.1


def test_a_fold_map_is_least_squares_with_a_slope_kept_at_or_above_zero():
    f = np.array([1.0, 2.0, 3.0, 4.0])
    assert fit_map(f, 2.0 + 0.5 * f) == pytest.approx(LinearMap(2.0, 0.5))
    # y = 1, 2, 2, 3 on f = 1..4: slope = cov / var = (0.75) / 1.25 = 0.6, intercept = 2 - 0.6 x 2.5 = 0.5
    fitted = fit_map(f, np.array([1.0, 2.0, 2.0, 3.0]))
    assert (fitted.intercept, fitted.slope) == pytest.approx((0.5, 0.6))
    # a negative slope, constant predictions or too few rows: the training mean
    assert fit_map(f, 5.0 - f) == LinearMap(2.5, 0.0)
    assert fit_map(np.ones(4), f) == LinearMap(2.5, 0.0)
    assert fit_map(f[:2], f[:2]) == LinearMap(1.5, 0.0)


def test_the_calibration_slope_and_its_standard_error_by_hand():
    # y = 1, 2, 2, 3 on f = 1..4: b = 0.6; residuals 0.5 + 0.6 f -> 1.1, 1.7, 2.3, 2.9 give -0.1, 0.3, -0.3, 0.1,
    # s^2 = 0.2 / (4 - 2) = 0.1, Sxx = 5: se = sqrt(0.1 / 5)
    b, se = calibration_slope(np.array([1.0, 2.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0, 4.0]))
    assert (b, se) == pytest.approx((0.6, math.sqrt(0.1 / 5)))
    assert pytest.approx(1.959964**2, rel=1e-5) == SLOPE_CHI2


def fixed_model_crossfit(seed: int, scale: float, offset: float):
    """A generator's sessions and a "model" f(x) = offset + scale * s(x) that learns nothing, laid out as a 5-fold
    cross-fit of the rated sessions (each fold's predictions, and level-one predictions, are f itself)."""
    rng = np.random.default_rng(seed)
    s = rng.normal(scale=0.3, size=N_SESSIONS)
    y_all = 3.0 + s + rng.normal(scale=0.6, size=N_SESSIONS)
    rated = rng.random(N_SESSIONS) < RATED
    f_all = offset + scale * s
    y, f = y_all[rated], f_all[rated]
    folds = cv.outer_folds(y, 5, 42, None)
    fold = cv.fold_of(folds, y.size)
    unlabeled_by_fold = [f_all[~rated]] * 5
    level_one = [f[fold_.train] for fold_ in folds]
    return y, f, fold, unlabeled_by_fold, folds, level_one, f_all[~rated], y_all.mean()


def width_vs_naive(y: np.ndarray, f: np.ndarray, f_unlabeled: np.ndarray) -> float:
    """Plain cross-PPI's (lambda = 1, what the recalibration is for) standard error over the naive mean's (both
    ddof 0, as ``stats.ppi``)."""
    return crossppi_mean(y, f, f_unlabeled, lam=1.0).se / (y.std() / math.sqrt(y.size))


def test_a_badly_scaled_model_is_recalibrated_and_crossppi_is_then_no_wider_than_naive():
    raw, calibrated = [], []
    for seed in range(20):
        y, f, fold, unlabeled, folds, level_one, f_unlabeled, _ = fixed_model_crossfit(seed, scale=3.0, offset=3.5)
        result = recalibrate(y, f, fold, f_unlabeled, unlabeled, folds, lambda lo=level_one: lo)
        assert result.recalibrated, result.decision
        assert "not below the constant's" in result.decision.reason
        # every fold's map undoes the scale: slope 1/3 (least squares of Y = 3 + s + e on 3.5 + 3 s)
        assert all(abs(g.slope - 1 / 3) < 0.15 for g in result.maps)
        assert result.mse_calibrated < result.decision.mse_constant < result.decision.mse_prediction
        raw.append(width_vs_naive(y, f, unlabeled[0]))
        calibrated.append(width_vs_naive(y, result.oof, result.unlabeled))
    # the setting discriminates: raw, cross-PPI is sqrt((0.72 + 9 (0.09) / 9) / 0.45) = 1.34x naive
    assert np.mean(raw) == pytest.approx(math.sqrt((0.72 + 0.09) / 0.45), abs=0.06)
    # recalibrated, never above 1.05x naive and ~0.91x on average (sqrt(1 - 0.2 (1 - 1/9)))
    assert max(calibrated) <= 1.05
    assert np.mean(calibrated) == pytest.approx(math.sqrt(1 - 0.2 * (1 - 1 / 9)), abs=0.04)


def test_recalibrated_crossppi_covers_the_mean_of_every_session():
    """Over 400 draws of the badly scaled model, the recalibrated cross-PPI interval covers the mean rating of all
    3 000 sessions (rated and not) about 95 % of the time: the maps are cross-fitted, so the interval stays valid
    (binomial sd of the share: 1.1 points)."""
    covered = []
    for seed in range(1000, 1400):
        y, f, fold, unlabeled, folds, level_one, f_unlabeled, truth = fixed_model_crossfit(seed, scale=3.0, offset=3.5)
        result = recalibrate(y, f, fold, f_unlabeled, unlabeled, folds, lambda lo=level_one: lo)
        estimate = crossppi_mean(y, result.oof, result.unlabeled, lam=1.0)
        covered.append(estimate.ci_low <= truth <= estimate.ci_high)
    assert 0.925 <= np.mean(covered) <= 0.975


def test_a_well_scaled_model_is_left_as_it_is():
    chosen = []
    for seed in range(40):
        y, f, fold, unlabeled, folds, level_one, f_unlabeled, _ = fixed_model_crossfit(seed, scale=1.0, offset=3.0)
        result = recalibrate(y, f, fold, f_unlabeled, unlabeled, folds, lambda lo=level_one: lo)
        chosen.append(result.recalibrated)
        if not result.recalibrated:
            assert "used as it is" in result.decision.reason
            assert result.maps == (IDENTITY,) * 5
            assert np.array_equal(result.oof, f) and np.array_equal(result.unlabeled, f_unlabeled)
    # slope 1 exactly: recalibrated only when the 5 % test errs (P(more than 6 of 40) < 0.01 at 5 %)
    assert sum(chosen) <= 6


def test_decide_by_the_constant_then_by_the_slope():
    rng = np.random.default_rng(0)
    s = rng.normal(scale=0.3, size=2000)
    y = 3.0 + s + rng.normal(scale=0.6, size=2000)
    constant = np.full_like(y, y.mean())
    assert decide(y, 3.0 + 3.0 * s, constant).recalibrate  # loses to the constant
    shrunk = decide(y, 3.0 + 0.3 * s, constant)  # beats the constant, but slope 1 / 0.3
    assert shrunk.recalibrate and "calibration slope" in shrunk.reason and shrunk.slope == pytest.approx(3.3, abs=0.5)
    assert not decide(y, 3.0 + s, constant).recalibrate


def skewed_stars(seed: int) -> ModelingData:
    """Mostly 3 stars (about 72 %), a weak ordinal signal in two of four features, 10 % rated at random: where the
    ordinal logit with class_weight balanced predicts the rare levels far too often (the issue's real run)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_SESSIONS, 4))
    latent = 0.35 * X[:, 0] + 0.2 * X[:, 1] + 0.55 * rng.logistic(size=N_SESSIONS)
    stars = np.digitize(latent, np.quantile(latent, [0.05, 0.12, 0.84, 0.95])) + 1.0
    rated = rng.random(N_SESSIONS) < RATED
    ids = np.array([f"s{i:05d}" for i in range(N_SESSIONS)])
    return ModelingData(("a", "b", "c", "d"), ids, X, np.where(rated, stars, np.nan))


def crossppi_widths(predictions: pl.DataFrame) -> tuple[float, float]:
    """Cross-PPI / naive of the rated and unrated rows, with ``prediction`` and with ``prediction_calibrated``."""
    rated, unrated = predictions.filter(pl.col("labeled")), predictions.filter(~pl.col("labeled"))
    y = rated["label"].to_numpy()
    return tuple(
        width_vs_naive(y, rated[c].to_numpy(), unrated[c].to_numpy()) for c in ("prediction", "prediction_calibrated")
    )


def test_the_balanced_ordinal_logit_on_skewed_stars_is_recalibrated():
    raw = []
    for seed in range(6):
        result = crossfit_tables(skewed_stars(seed), "ordinal_logit", 5)
        row = result.recalibration_rows.row(0, named=True)
        assert row["recalibrated"] and row["model"] == "ordinal_logit", row
        assert row["mse_prediction"] > row["mse_constant"] > row["mse_calibrated"], row
        before, after = crossppi_widths(result.predictions)
        raw.append(before)
        assert after <= 1.05, (seed, before, after)
    assert np.mean(raw) > 1.05  # fed as it is, cross-PPI was wider than naive


def test_recalibrated_predictions_pass_the_out_of_fold_audit_and_no_label_moves_its_own():
    data = skewed_stars(1)
    result = crossfit_tables(data, "ordinal_logit", 5)
    assert result.recalibration.recalibrated
    assert audit_out_of_fold(result.predictions, result.fold_training).passed
    rated = result.predictions.filter(pl.col("labeled"))
    # change the ratings of one fold's rows: their calibrated predictions must not move (their fold's model and
    # map saw only the other folds' labels), while the other folds' maps and predictions do
    fold0 = rated["fold"].to_numpy() == 0
    y = data.y.copy()
    rated_rows = np.flatnonzero(data.labeled)
    y[rated_rows[fold0]] = 6.0 - y[rated_rows[fold0]]
    moved = crossfit_tables(ModelingData(data.feature_names, data.session_ids, data.X, y), "ordinal_logit", 5)
    again = moved.predictions.filter(pl.col("labeled"))
    assert moved.recalibration.recalibrated
    before, after = rated["prediction_calibrated"].to_numpy(), again["prediction_calibrated"].to_numpy()
    assert np.allclose(before[fold0], after[fold0], atol=1e-12)
    assert not np.allclose(before[~fold0], after[~fold0], atol=1e-6)
    # the planted leak this guards against: one map fitted on every rated row's out-of-fold prediction moves
    # fold 0's predictions with their own labels
    naive = [
        fit_map(r.filter(pl.col("labeled"))["prediction_stars"].to_numpy(), yy)
        for r, yy in ((result.predictions, data.y[data.labeled]), (moved.predictions, y[data.labeled]))
    ]
    leaked = [g.apply(rated["prediction_stars"].to_numpy()[fold0]) for g in naive]
    assert not np.allclose(leaked[0], leaked[1], atol=1e-6)


def no_signal(seed: int, n: int = 1000) -> ModelingData:
    """Stars drawn (72 % 3 stars) independently of four noise features, 10 % rated: no model can beat the mean."""
    rng = np.random.default_rng(seed)
    stars = rng.choice([1.0, 2.0, 3.0, 4.0, 5.0], p=[0.05, 0.07, 0.72, 0.11, 0.05], size=n)
    rated = rng.random(n) < RATED
    ids = np.array([f"s{i:05d}" for i in range(n)])
    return ModelingData(("a", "b", "c", "d"), ids, rng.normal(size=(n, 4)), np.where(rated, stars, np.nan))


STACKED = ["ordinal_logit", "hist_gbm", "stack"]


def test_a_stack_that_loses_to_the_constant_is_recalibrated_from_its_own_level_one_blend():
    data = no_signal(1)
    result = crossfit_tables(data, "stack", 5, families=STACKED)
    decision = result.recalibration.decision
    assert decision.recalibrate and decision.mse_prediction >= decision.mse_constant, decision
    # nothing to find: the maps, fitted on the stack's level-one blend within each T_k, are (nearly) flat
    assert all(g.slope < 0.5 for g in result.recalibration.maps)
    assert audit_out_of_fold(result.predictions, result.fold_training).passed
    assert crossppi_widths(result.predictions)[1] <= 1.05
    # fold 0's labels reversed: fold 0's calibrated predictions do not move (blend, members and map saw T_0 only)
    rated = result.predictions.filter(pl.col("labeled"))
    fold0 = rated["fold"].to_numpy() == 0
    y = data.y.copy()
    rows = np.flatnonzero(data.labeled)[fold0]
    y[rows] = 6.0 - y[rows]
    moved = crossfit_tables(ModelingData(data.feature_names, data.session_ids, data.X, y), "stack", 5, families=STACKED)
    assert moved.recalibration.recalibrated
    again = moved.predictions.filter(pl.col("labeled"))["prediction_calibrated"].to_numpy()
    assert np.allclose(rated["prediction_calibrated"].to_numpy()[fold0], again[fold0], atol=1e-12)


def test_a_stack_that_fixes_its_members_scale_is_left_as_it_is():
    # on skewed stars the stack's blend undoes the balanced ordinal logit's spread: MSE below the constant's,
    # calibration slope consistent with 1 (1.07, se 0.29), so prediction_calibrated is prediction itself
    result = crossfit_tables(skewed_stars(2), "stack", 5, families=STACKED)
    decision = result.recalibration.decision
    assert not decision.recalibrate and decision.mse_prediction < decision.mse_constant, decision
    assert result.predictions["prediction_calibrated"].equals(result.predictions["prediction"])
    before, after = crossppi_widths(result.predictions)
    assert before == after <= 1.0


def test_a_kept_fits_maps_give_new_sessions_their_folds_calibration():
    maps = (LinearMap(1.0, 0.5), LinearMap(0.0, 2.0))
    by_fold = np.array([[2.0, 4.0, 6.0], [1.0, 1.0, 1.0]])
    # row 0 rated in fold 0: 1 + 0.5 x 2; row 1 rated in fold 1: 2 x 1; row 2 unrated: mean(1 + 0.5 x 6, 2 x 1)
    assert apply_maps(maps, by_fold, np.array([0, 1, -1])) == pytest.approx([2.0, 2.0, 3.0])
    assert apply_maps(maps, by_fold, None) == pytest.approx([(2.0 + 2.0) / 2, (3.0 + 2.0) / 2, 3.0])


def arm(name: str, rng: np.random.Generator, shift: float) -> ArmData:
    """An arm of 300 rated and 2 700 unrated sessions (normalized labels), a badly scaled prediction f = 3 s + 0.2
    and its recalibration (s itself: slope 1/3 of f minus the offset)."""
    s = rng.normal(scale=0.08, size=3000)
    y = np.clip(0.6 + shift + s + rng.normal(scale=0.15, size=3000), 0, 1)
    f = 0.2 + 3 * s
    calibrated = 0.6 + s
    X = rng.normal(size=(3000, 2))
    return ArmData(
        name, y[:300], f[:300], f[300:], X[:300], X[300:], fc_labeled=calibrated[:300], fc_unlabeled=calibrated[300:]
    )


def test_crossppi_and_aipw_read_the_recalibrated_predictions_and_ppi_the_raw_ones():
    rng = np.random.default_rng(5)
    treat, control = arm("t", rng, 0.05), arm("c", rng, 0.0)
    rows, _ = compare(treat, control, Settings(n_resamples=200, n_permutations=200))
    by_method = {r.method: r for r in rows}
    cross = by_method[Method.CROSSPPI]
    t, c = (crossppi_mean(a.y, a.fc_labeled, a.fc_unlabeled) for a in (treat, control))
    assert cross.effect == pytest.approx(t.estimate - c.estimate)
    assert cross.width_vs_naive <= 1.0
    # its lambda is tuned on the calibrated predictions (s, lambda near 1), not on the raw 3 s (lambda near 1/3)
    assert (cross.lambda_treatment, cross.lambda_control) == pytest.approx((t.lam, c.lam))
    assert cross.lambda_treatment > 0.6
    assert crossppi_mean(treat.y, treat.f_labeled, treat.f_unlabeled).lam < 0.45
    # PPI++ keeps the raw predictions: its lambda-hat is Cov(Y, f) / ((1 + n/N) Var(f)) of f, not of the calibrated
    ppi = by_method[Method.PPI]
    f_all = np.r_[treat.f_labeled, treat.f_unlabeled]
    lam = np.cov(treat.y, treat.f_labeled, ddof=0)[0, 1] / ((1 + 300 / 2700) * f_all.var(ddof=1))
    assert ppi.lambda_treatment == pytest.approx(float(np.clip(lam, 0, 1)))
    # AIPW's outcome model: with the calibrated f, the estimate is mean(f~all) + weighted residuals of the
    # calibrated f, so it sits near cross-PPI's and its interval is no wider than naive
    assert by_method[Method.AIPW].width_vs_naive <= 1.05


def useless_in_one_arm(rng: np.random.Generator, shift: float, useful: bool) -> ArmData:
    """An arm of 1 000 sessions, 40 of them rated at random (normalized labels, sd ~0.2). The prediction is already
    well scaled overall (recalibration leaves it), but in a useless arm it is noise of the labels' own spread:
    plain cross-PPI (lambda = 1) then pays Var(Y - f) = Var(Y) + Var(f), twice the naive variance, in that arm."""
    s = rng.normal(scale=0.15, size=1000)
    y = 0.6 + shift + s + rng.normal(scale=0.12, size=1000)
    f = 0.6 + (s if useful else rng.normal(scale=0.2, size=1000))
    rated = rng.permutation(1000) < 40
    X = rng.normal(size=(1000, 2))
    order = np.r_[np.flatnonzero(rated), np.flatnonzero(~rated)]
    y, f, X = y[order], f[order], X[order]
    return ArmData("arm", y[:40], f[:40], f[40:], X[:40], X[40:], fc_labeled=f[:40], fc_unlabeled=f[40:])


def test_crossppi_is_no_wider_than_naive_when_the_model_is_useless_in_one_arm():
    """Issue 37: under random rating every unflagged prediction-powered interval is at most 1.05x the naive width.
    Over 60 draws of a model useful in the treatment arm and useless in the control arm, cross-PPI's width is at
    most 1.05x naive in every draw (its lambda, tuned per arm, drops toward 0 in the useless arm; with lambda = 1
    the control arm's variance doubles: about sqrt((0.5 + 2) / 2) = 1.12x naive on average), it still gains from
    the useful arm, and its note says the lambdas used."""
    widths, lambdas = [], []
    for seed in range(60):
        rng = np.random.default_rng(seed)
        treat, control = useless_in_one_arm(rng, 0.05, useful=True), useless_in_one_arm(rng, 0.0, useful=False)
        rows, _ = compare(treat, control, Settings(), resampling=False, diagnostics=False)
        cross = {r.method: r for r in rows}[Method.CROSSPPI]
        widths.append(cross.width_vs_naive)
        lambdas.append((cross.lambda_treatment, cross.lambda_control))
        assert f"treatment {cross.lambda_treatment:.2f}, control {cross.lambda_control:.2f}" in cross.note
    assert max(widths) <= 1.05, max(widths)
    assert np.mean(widths) < 0.95  # the useful arm still narrows it
    lam_t, lam_c = np.mean(lambdas, axis=0)
    assert lam_t > 0.6 and lam_c < 0.3
