"""Two-sample feature tests and the sample-ratio check: hand-worked cases, scipy, and every degenerate input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from pulse_pipeline.stats.two_sample import (
    TestResult,
    binary_test,
    rank_biserial,
    rank_biserial_correlation,
    sample_ratio_test,
    welch_test,
)

# ---------------------------------------------------------------------------------------------------- welch


def test_welch_by_hand():
    # x = [1, 2, 3, 4]: mean 2.5, s^2 = (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3;  y = [2, 4, 6]: mean 4, s^2 = 8/2 = 4
    # a = (5/3)/4 = 5/12, b = 4/3 = 16/12, se^2 = 21/12 = 7/4, t = (2.5 - 4) / (sqrt(7)/2) = -3/sqrt(7) = -1.133893
    # df = (7/4)^2 / ((5/12)^2/3 + (4/3)^2/2) = (49/16) / (25/432 + 384/432) = 49 * 27 / 409 = 1323/409 = 3.234719
    res = welch_test([1, 2, 3, 4], [2, 4, 6])
    assert res.statistic == pytest.approx(-3 / math.sqrt(7), abs=1e-12)
    assert res.df == pytest.approx(1323 / 409, abs=1e-12)
    assert res.p_value == pytest.approx(2 * stats.t.sf(3 / math.sqrt(7), 1323 / 409), abs=1e-12)
    assert res.test == "welch t" and res.note is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_welch_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(0.2, 1.0, size=40), rng.normal(0.0, 2.5, size=17)
    ref = stats.ttest_ind(x, y, equal_var=False)
    res = welch_test(x, y)
    assert (res.statistic, res.p_value, res.df) == pytest.approx((ref.statistic, ref.pvalue, ref.df), abs=1e-12)


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # scipy's own call below warns
def test_welch_one_constant_group_is_regular():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ours does not pass scipy's spurious warning on
        res = welch_test([3, 3, 3], [1, 2, 3, 4])
    # x has variance 0: se^2 = Var(y)/4 = (5/3)/4 = 5/12, t = (3 - 2.5) / sqrt(5/12), df = n_y - 1 = 3
    assert res.statistic == pytest.approx(0.5 / math.sqrt(5 / 12), abs=1e-12) and res.df == pytest.approx(3.0)
    ref = stats.ttest_ind([3, 3, 3], [1, 2, 3, 4], equal_var=False)
    assert res.note is None and res.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_welch_degenerate_cases_have_notes():
    for x, y in (([1.0], [1.0, 2.0, 3.0]), ([1.0, 2.0], []), ([], [])):
        res = welch_test(x, y)
        assert math.isnan(res.statistic) and math.isnan(res.p_value)
        assert "fewer than 2 values" in res.note
    same = welch_test([2, 2, 2], [2, 2])
    assert (same.statistic, same.p_value) == (0.0, 1.0) and "constant and equal" in same.note
    apart = welch_test([2, 2, 2], [5, 5])
    assert math.isnan(apart.p_value) and "no variance" in apart.note
    with pytest.raises(ValueError, match="NaN"):
        welch_test([1.0, np.nan], [1.0, 2.0])


# ---------------------------------------------------------------------------------------------------- fisher


def test_binary_by_hand_symmetric():
    # table [[3, 1], [1, 3]]: margins 4, 4 / 4, 4, N = 8; P(a = k) = C(4,k) C(4,4-k) / C(8,4) = C(4,k)^2 / 70
    # = 1, 16, 36, 16, 1 (/70); observed a = 3 (16/70); tables no more likely: 1 + 16 + 16 + 1 = 34 -> p = 17/35
    res = binary_test([1, 1, 1, 0], [0, 0, 0, 1])
    assert res.statistic == pytest.approx(3 / 4 - 1 / 4, abs=1e-15)
    assert res.p_value == pytest.approx(17 / 35, abs=1e-12)
    assert res.test == "fisher exact" and res.note is None


def test_binary_by_hand_asymmetric():
    # x = five 1s, y = five 0s and one 1: table [[5, 0], [1, 5]], rows 5, 6, ones 6, N = 11, C(11,5) = 462.
    # a = ones in x: C(6,k) C(5,5-k) for k = 0..5 = 1, 30, 150, 200, 75, 6 (sum 462); observed k = 5 (6/462).
    # No more likely: k = 0 (1) and k = 5 (6) -> p = 7/462 = 1/66
    res = binary_test([True] * 5, [0, 0, 0, 0, 0, 1])
    assert res.statistic == pytest.approx(1 - 1 / 6, abs=1e-15)
    assert res.p_value == pytest.approx(1 / 66, abs=1e-12)
    swapped = binary_test([0, 0, 0, 0, 0, 1], [1] * 5)
    assert swapped.statistic == pytest.approx(-5 / 6, abs=1e-15) and swapped.p_value == pytest.approx(1 / 66)


def test_binary_degenerate_and_invalid():
    empty = binary_test([], [0, 1])
    assert math.isnan(empty.statistic) and math.isnan(empty.p_value) and "no values in x" in empty.note
    const = binary_test([0, 0, 0], [0, 0])
    assert (const.statistic, const.p_value) == (0.0, 1.0) and "no difference" in const.note
    assert binary_test([1, 1], [1]).note is not None
    for bad in ([0, 2], [0.5, 1], [np.nan, 1]):
        with pytest.raises(ValueError):
            binary_test(bad, [0, 1])


# ---------------------------------------------------------------------------------------------------- rank-biserial


def test_rank_biserial_by_hand():
    # x_pos = [3, 4, 5] vs x_neg = [1, 2, 3]: 9 pairs. 3: >1, >2, =3; 4: > all three; 5: > all three.
    # greater 8, tied 1, less 0 -> U = 8 + 0.5 = 8.5, r = 2 * 8.5 / 9 - 1 = 8/9 (= 8/9 - 0/9).
    res = rank_biserial([3, 4, 5], [1, 2, 3])
    assert res.statistic == pytest.approx(8 / 9, abs=1e-15)
    # normal approximation: E[U] = 9/2 = 4.5; tie-corrected Var[U] = n1 n2 / 12 * ((n + 1) - sum(t^3 - t) / (n (n - 1)))
    # with n = 6 and one tie of size 2 (the 3s): 9/12 * (7 - 6/30) = 0.75 * 6.8 = 5.1;
    # continuity-corrected z = (8.5 - 4.5 - 0.5) / sqrt(5.1), p = 2 (1 - Phi(z))
    assert res.p_value == pytest.approx(2 * stats.norm.sf(3.5 / math.sqrt(5.1)), abs=1e-12)
    assert res.test == "mann-whitney u" and res.note is None
    # sign convention: positive when x_pos tends to be larger
    assert rank_biserial([1, 2, 3], [3, 4, 5]).statistic == pytest.approx(-8 / 9, abs=1e-15)
    assert rank_biserial_correlation([10], [1, 2]) == 1.0
    assert rank_biserial_correlation([1, 2], [1, 2]) == 0.0


@pytest.mark.parametrize("seed", [0, 1])
def test_rank_biserial_matches_pairs_and_scipy(seed):
    rng = np.random.default_rng(seed)
    pos, neg = rng.integers(0, 6, size=37), rng.integers(0, 5, size=55)  # many ties
    diff = pos[:, None] - neg[None, :]
    res = rank_biserial(pos, neg)
    assert res.statistic == pytest.approx((diff > 0).mean() - (diff < 0).mean(), abs=1e-12)
    ref = stats.mannwhitneyu(pos, neg, alternative="two-sided", method="asymptotic")
    assert res.p_value == pytest.approx(ref.pvalue, abs=1e-12)
    assert res.statistic == pytest.approx(2 * ref.statistic / (pos.size * neg.size) - 1, abs=1e-12)


def test_rank_biserial_degenerate_cases_have_notes():
    const = rank_biserial([2, 2], [2, 2, 2])
    assert math.isnan(const.statistic) and math.isnan(const.p_value)
    assert const.note == "constant feature: no shift measurable"
    empty = rank_biserial([], [1, 2])
    assert math.isnan(empty.statistic) and math.isnan(empty.p_value) and "no values in x_pos" in empty.note
    assert math.isnan(rank_biserial_correlation([1.0], []))


# ---------------------------------------------------------------------------------------------------- sample ratio


def test_sample_ratio_by_hand():
    # 1000 sessions split 50/50: expected 500, 500; chi2 = (20^2 + 20^2) / 500 = 1.6 on 1 df
    res = sample_ratio_test([520, 480], [0.5, 0.5])
    assert res.statistic == pytest.approx(1.6, abs=1e-12)
    assert res.p_value == pytest.approx(stats.chi2.sf(1.6, 1), abs=1e-12)
    assert (res.test, res.df, res.note) == ("chi2 (df=1)", 1.0, None)
    assert sample_ratio_test([520, 480], [1, 1]).statistic == pytest.approx(1.6, abs=1e-12)  # shares normalized
    # 600 sessions split 1:2:3: expected 100, 200, 300; chi2 = 10^2/100 + 10^2/200 = 1.5 on 2 df,
    # and the chi2 survival function with 2 df is exp(-x/2): p = exp(-0.75)
    res3 = sample_ratio_test([90, 210, 300], [1, 2, 3])
    assert res3.statistic == pytest.approx(1.5, abs=1e-12)
    assert res3.p_value == pytest.approx(math.exp(-0.75), abs=1e-12)
    assert res3.test == "chi2 (df=2)"


def test_sample_ratio_degenerate_and_invalid():
    one = sample_ratio_test([100], [1.0])
    assert math.isnan(one.p_value) and "nothing to compare" in one.note and one.test == "chi2 (df=0)"
    none = sample_ratio_test([0, 0], [0.5, 0.5])
    assert math.isnan(none.statistic) and "no sessions" in none.note
    with pytest.raises(ValueError, match="non-negative"):
        sample_ratio_test([10, -1], [0.5, 0.5])
    with pytest.raises(ValueError, match="positive"):
        sample_ratio_test([10, 10], [1.0, 0.0])
    with pytest.raises(ValueError, match="arms"):
        sample_ratio_test([10, 10, 10], [0.5, 0.5])


def test_result_is_frozen():
    res = sample_ratio_test([520, 480], [0.5, 0.5])
    assert isinstance(res, TestResult)
    with pytest.raises(AttributeError):
        res.p_value = 0.0  # type: ignore[misc]
