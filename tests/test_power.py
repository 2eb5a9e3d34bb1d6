"""Power and minimum detectable effect: a closed-form case by hand, statsmodels (labels only), ppi_py (PPI)."""

from __future__ import annotations

import math

import pytest
from ppi_py import ppi_power
from scipy.stats import norm
from statsmodels.stats.power import NormalIndPower

from pulse_pipeline.stats.power import labels_per_arm_needed, minimum_detectable_effect, ppi_variance_factor


def test_mde_by_hand():
    # z_{0.975} = 1.959964, z_{0.8} = 0.841621; n = 100 per arm, sd = 0.25:
    # MDE = (1.959964 + 0.841621) * 0.25 * sqrt(1/100 + 1/100) = 2.801585 * 0.25 * 0.1414214 = 0.0990510
    assert minimum_detectable_effect(100, 100, 0.25) == pytest.approx(0.0990510, rel=1e-6)
    # unequal arms, alpha = 0.1, power = 0.9, sd = 1:
    # (1.644854 + 1.281552) * 1.0 * sqrt(1/50 + 1/200) = 2.926406 * 0.1581139 = 0.4627054
    assert minimum_detectable_effect(50, 200, 1.0, alpha=0.1, power=0.9) == pytest.approx(0.4627054, rel=1e-6)


def test_variance_factor_by_hand():
    # rho = 0.5, n = 100, N = 300: 1 - 0.25 * 300 / 400 = 0.8125; effective labels 100 / 0.8125 = 123.0769
    assert ppi_variance_factor(100, 300, 0.5) == pytest.approx(0.8125, abs=1e-15)
    assert 100 / ppi_variance_factor(100, 300, 0.5) == pytest.approx(100 * 400 / (100 + 0.75 * 300), abs=1e-12)
    assert ppi_variance_factor(100, 0, 0.9) == 1.0
    assert ppi_variance_factor(100, 10_000, 0.0) == 1.0
    assert ppi_variance_factor(10, 90, -1.0) == pytest.approx(0.1, abs=1e-15)  # sign of rho does not matter


@pytest.mark.parametrize(("n_t", "n_c", "N_t", "N_c"), [(100, 100, 0, 0), (40, 300, 5_000, 0), (7, 9, 100, 250)])
def test_mde_with_rho_zero_or_no_unlabeled_is_naive(n_t, n_c, N_t, N_c):
    naive = minimum_detectable_effect(n_t, n_c, 0.8)
    assert minimum_detectable_effect(n_t, n_c, 0.8, N_treatment=N_t, N_control=N_c, rho=0.0) == naive
    assert minimum_detectable_effect(n_t, n_c, 0.8, rho=0.7) == naive


@pytest.mark.parametrize("effect", [0.05, 0.1, 0.2, 0.37, 0.5])
@pytest.mark.parametrize("sd", [0.25, 1.0, 1.3])
def test_labels_needed_naive_matches_statsmodels(effect, sd):
    n_sm = NormalIndPower().solve_power(effect_size=effect / sd, alpha=0.05, power=0.8, ratio=1)
    assert labels_per_arm_needed(effect, sd) == math.ceil(n_sm)
    assert labels_per_arm_needed(-effect, sd) == math.ceil(n_sm)  # the sign of the effect does not matter


@pytest.mark.parametrize("rho", [0.6, 0.9])
@pytest.mark.parametrize("target", [200, 1_000, 5_000])
def test_effective_labels_matches_ppi_py(rho, target):
    d = ppi_power(ppi_corr=rho, cost_X=0, cost_Y=1, cost_Yhat=0.1, effective_n=target)
    n, N = d["n"], d["N"]
    assert N > 0  # ppi_py chose a PPI design, not labels only
    assert abs(n / ppi_variance_factor(n, N, rho) - d["effective_n"]) <= 1  # ppi_py rounds
    # PPI in both arms has the MDE of the naive comparison with n / k (effective) labels per arm
    ppi = minimum_detectable_effect(n, n, 0.9, N_treatment=N, N_control=N, rho=rho)
    e = n / ppi_variance_factor(n, N, rho)
    assert ppi == pytest.approx(minimum_detectable_effect(e, e, 0.9), rel=0, abs=1e-12)


@pytest.mark.parametrize(("N", "rho"), [(0, 0.0), (0, 0.8), (2_000, 0.0), (2_000, 0.3), (500, 0.9), (10**7, 0.95)])
@pytest.mark.parametrize(("effect", "sd"), [(0.05, 0.25), (0.3, 1.0), (0.02, 1.0), (2.0, 1.0)])
def test_labels_needed_ppi_by_brute_force(N, rho, effect, sd):
    # smallest n >= 2 with n (n + N) >= c (n + (1 - rho^2) N), c = 2 (z_{0.975} + z_{0.8})^2 sd^2 / effect^2
    c = 2 * (norm.ppf(0.975) + norm.ppf(0.8)) ** 2 * sd**2 / effect**2
    n = 2
    while n * (n + N) < c * (n + (1 - rho**2) * N):
        n += 1
    assert labels_per_arm_needed(effect, sd, N=N, rho=rho) == n


@pytest.mark.parametrize(("N", "rho"), [(0, 0.0), (3_000, 0.5), (50_000, 0.9)])
@pytest.mark.parametrize("effect", [0.01, 0.07, 0.25])
def test_labels_needed_round_trip(N, rho, effect):
    sd = 0.3
    n = labels_per_arm_needed(effect, sd, N=N, rho=rho)

    def mde(k):
        return minimum_detectable_effect(k, k, sd, N_treatment=N, N_control=N, rho=rho)

    assert mde(n) <= effect
    assert n == 2 or mde(n - 1) > effect


def test_labels_needed_exact_design_is_not_rounded_up():
    assert labels_per_arm_needed(minimum_detectable_effect(100, 100, 0.25), 0.25) == 100
    assert labels_per_arm_needed(10.0, 0.25) == 2  # huge effect: at least 2 labels per arm


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: minimum_detectable_effect(1, 100, 1.0), "n_treatment"),
        (lambda: minimum_detectable_effect(100, 0, 1.0), "n_control"),
        (lambda: ppi_variance_factor(1, 10, 0.5), "at least 2"),
        (lambda: minimum_detectable_effect(100, 100, 0.0), "sd"),
        (lambda: minimum_detectable_effect(100, 100, -1.0), "sd"),
        (lambda: minimum_detectable_effect(100, 100, float("inf")), "sd"),
        (lambda: minimum_detectable_effect(100, 100, float("nan")), "sd"),
        (lambda: minimum_detectable_effect(100, 100, 1.0, rho=1.1), "rho"),
        (lambda: ppi_variance_factor(100, 100, -1.5), "rho"),
        (lambda: minimum_detectable_effect(100, 100, 1.0, alpha=0.0), "alpha"),
        (lambda: minimum_detectable_effect(100, 100, 1.0, alpha=1.0), "alpha"),
        (lambda: minimum_detectable_effect(100, 100, 1.0, power=1.0), "power"),
        (lambda: minimum_detectable_effect(100, 100, 1.0, power=0.0), "power"),
        (lambda: minimum_detectable_effect(100, 100, 1.0, N_control=-1), "N_control"),
        (lambda: labels_per_arm_needed(0.1, 1.0, N=-5), "N"),
        (lambda: labels_per_arm_needed(0.0, 1.0), "effect"),
        (lambda: labels_per_arm_needed(float("nan"), 1.0), "effect"),
        (lambda: labels_per_arm_needed(float("inf"), 1.0), "effect"),
        (lambda: labels_per_arm_needed(0.1, 0.0), "sd"),
        (lambda: labels_per_arm_needed(0.1, 1.0, rho=-2.0), "rho"),
        (lambda: labels_per_arm_needed(0.1, 1.0, alpha=1.5), "alpha"),
        (lambda: labels_per_arm_needed(0.1, 1.0, power=-0.1), "power"),
    ],
)
def test_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
