"""The asymptotic confidence sequence (stats/sequential.py) against a hand computation, GrowthBook's gbstats
numbers, its growth rate, and a small simulation of daily peeking."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pulse_pipeline.stats.sequential import confidence_sequence, cs_radius, fixed_radius, tuning_rho


def test_radius_matches_a_hand_computation():
    # alpha = 0.05: -2 ln 0.05 = 5.991465, ln(1 + 5.991465) = 1.944690, so with planned_n = 5000
    # rho^2 = 7.936155 / 5000 = 0.0015872309; at n = 5000, x = n rho^2 = 7.936155;
    # radius = se * sqrt((x + 1) / x * ln((x + 1) / 0.0025)) = 0.1 * sqrt(1.126006 * 8.181570) = 0.303521
    assert tuning_rho(5000, 0.05) ** 2 == pytest.approx(0.0015872309, rel=1e-7)
    assert cs_radius(0.1, 5000, planned_n=5000) == pytest.approx(0.303521, abs=1e-6)
    low, high = confidence_sequence(0.25, 0.1, 5000, planned_n=5000)
    assert (low, high) == pytest.approx((0.25 - 0.303521, 0.25 + 0.303521), abs=1e-6)


@pytest.mark.parametrize(
    ("se", "n", "planned_n", "halfwidth"),
    [
        # growthbook/growthbook packages/stats/tests/frequentist/test_tests.py, TestSequentialTTest (gbstats,
        # snapshot of 2026-08-21): SequentialTwoSidedTTest with n = 3000 + 3461 units, alpha 0.05;
        # test_sequential_test_runs (tuning 1000): uplift stddev 0.33341, ci (-0.55844, 1.56516) around 0.50336
        (0.33341, 6461, 1000, 1.56516 - 0.50336),
        # test_sequential_test_runs_prop (default tuning 5000): stddev 0.03386, ci (0.40098, 0.60675) around 0.50386
        (0.03386, 6461, 5000, 0.60675 - 0.50386),
    ],
)
def test_radius_matches_gbstats(se, n, planned_n, halfwidth):
    # their numbers are rounded to 5 decimals: se's rounding moves the radius by at most ~3 * 0.5e-5
    assert cs_radius(se, n, planned_n=planned_n) == pytest.approx(halfwidth, abs=3e-5)


def test_radius_shrinks_like_sqrt_log_n_over_n_and_exceeds_the_fixed_horizon():
    sigma = 1.0
    n = np.array([1e2, 1e3, 1e4, 1e6, 1e9, 1e12])
    se = sigma / np.sqrt(n)
    cs = cs_radius(se, n)
    assert np.all(cs > fixed_radius(se))
    assert np.all(np.diff(cs) < 0)  # shrinks ...
    per_sqrt_n = cs * np.sqrt(n)
    assert np.all(np.diff(per_sqrt_n[2:]) > 0)  # ... but slower than 1/sqrt(n) once past planned_n
    # radius / sqrt(ln n / n) -> sigma as ln((n rho^2 + 1) / alpha^2) / ln n -> 1; at 1e12 (hand):
    # sqrt((ln(1.587e9) + 5.991) / ln(1e12)) = sqrt(27.18 / 27.63) = 0.992
    ratio = cs / np.sqrt(np.log(n) / n)
    assert ratio[-1] == pytest.approx(sigma, rel=0.02)
    assert abs(ratio[-1] - 1) < abs(ratio[-2] - 1) < abs(ratio[-3] - 1)


def test_undefined_inputs_give_nan_not_an_error():
    assert math.isnan(cs_radius(0.1, 0))
    assert math.isnan(cs_radius(float("nan"), 100))
    assert all(math.isnan(v) for v in confidence_sequence(float("nan"), 0.1, 100))
    assert cs_radius(float("inf"), 100) == float("inf")
    with pytest.raises(ValueError):
        tuning_rho(0)


def test_daily_looks_at_a_null_mean_cross_zero_rarely_with_the_sequence():
    # 2000 paths of 300 N(0, 1) units, a look after every 10: how often does SOME look exclude the true 0?
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2000, 300))
    t = np.arange(10, 301, 10)
    sums = np.cumsum(x, axis=1)[:, t - 1]
    squares = np.cumsum(x * x, axis=1)[:, t - 1]
    mean = sums / t
    se = np.sqrt((squares / t - mean**2) / (t - 1))
    fixed = (np.abs(mean) > fixed_radius(se)).any(axis=1).mean()
    sequence = (np.abs(mean) > cs_radius(se, t, planned_n=300)).any(axis=1).mean()
    assert fixed > 0.15  # 30 looks at a 95 % interval: about a quarter of the paths reject somewhere
    assert sequence <= 0.05
