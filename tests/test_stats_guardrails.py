"""stats/guardrails.py against values worked out independently: scipy's Welch test, the per-user totals written
out, GrowthBook's gbstats formulas (variance_of_ratios, RegressionAdjustedStatistic, compute_theta) written out
with numpy, and the non-inferiority rule computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pulse_pipeline.stats.cluster import clustered_welch_difference
from pulse_pipeline.stats.guardrails import GuardrailEstimate, guardrail_difference, noninferiority

Y_T = np.array([3.0, 5.0, 4.0, 8.0, 6.0, 2.0])
Y_C = np.array([2.0, 3.0, 1.0, 4.0, 5.0])


def test_plain_session_difference_is_welch():
    est = guardrail_difference(Y_T, Y_C, alpha=0.05)
    welch = stats.ttest_ind(Y_T, Y_C, equal_var=False)
    ci = welch.confidence_interval(0.95)
    assert est.method == "plain" and est.variance_reduction is None
    assert est.treatment_mean == pytest.approx(28 / 6) and est.control_mean == pytest.approx(3.0)
    assert est.effect == pytest.approx(28 / 6 - 3.0)
    se = math.sqrt(Y_T.var(ddof=1) / 6 + Y_C.var(ddof=1) / 5)
    assert est.se == pytest.approx(se)
    assert est.df == pytest.approx(welch.df)
    assert (est.ci_low, est.ci_high) == pytest.approx((ci.low, ci.high))
    assert (est.n_treatment, est.n_control) == (6, 5)


def test_relative_effect_is_gbstats_delta_method():
    """gbstats utils.frequentist_variance(relative=True):
    variance_of_ratios(mean_b, var_b / n_b, mean_a, var_a / n_a, 0)."""
    est = guardrail_difference(Y_T, Y_C)
    mb, ma = Y_T.mean(), Y_C.mean()
    vb, va = Y_T.var(ddof=1) / 6, Y_C.var(ddof=1) / 5
    var_ratio = vb / ma**2 + va * mb**2 / ma**4  # variance_of_ratios with cov 0
    assert est.relative_effect == pytest.approx((mb - ma) / abs(ma))
    assert est.relative_se == pytest.approx(math.sqrt(var_ratio))
    # the interval: on the log of the ratio, se^2 = v_t / mean_t^2 + v_c / mean_c^2, Welch df, then exp - 1
    lv_t, lv_c = vb / mb**2, va / ma**2
    df = (lv_t + lv_c) ** 2 / (lv_t**2 / 5 + lv_c**2 / 4)
    q = stats.t.ppf(0.975, df)
    lse = math.sqrt(lv_t + lv_c)
    assert est.log_ratio == pytest.approx(math.log(mb / ma)) and est.log_ratio_se == pytest.approx(lse)
    assert est.relative_ci_low == pytest.approx(mb / ma * math.exp(-q * lse) - 1)
    assert est.relative_ci_high == pytest.approx(mb / ma * math.exp(q * lse) - 1)


def test_users_as_unit_sums_within_users():
    """Per-user totals written out: arm mean = sum S_u / sum n_u, v = G/(G-1) sum ((S_u - m n_u)/sum n)^2."""
    g_t = np.array([0, 0, 1, 2, 2, 2])
    g_c = np.array([7, 8, 8, 9, 9])
    est = guardrail_difference(Y_T, Y_C, g_t=g_t, g_c=g_c)
    # treatment users: {3,5} {4} {8,6,2}; control users: {2} {3,1} {4,5}
    s_t, n_t = np.array([8.0, 4.0, 16.0]), np.array([2.0, 1.0, 3.0])
    s_c, n_c = np.array([2.0, 4.0, 9.0]), np.array([1.0, 2.0, 2.0])
    m_t, m_c = s_t.sum() / n_t.sum(), s_c.sum() / n_c.sum()
    v_t = 3 / 2 * np.sum(((s_t - m_t * n_t) / n_t.sum()) ** 2)
    v_c = 3 / 2 * np.sum(((s_c - m_c * n_c) / n_c.sum()) ** 2)
    assert est.effect == pytest.approx(m_t - m_c)
    assert est.se == pytest.approx(math.sqrt(v_t + v_c))
    assert (est.n_clusters_treatment, est.n_clusters_control) == (3, 3)
    ref = clustered_welch_difference(Y_T, g_t, Y_C, g_c)
    assert (est.ci_low, est.ci_high) == pytest.approx((ref.ci_low, ref.ci_high))
    # relative: the same influence terms divided by the control mean, control's carrying the ratio's gradient
    rv_t = v_t / m_c**2
    lin_c = (s_c - m_c * n_c) / n_c.sum()
    rv_c = 3 / 2 * np.sum((-lin_c / m_c - (m_t - m_c) / m_c**2 * lin_c) ** 2)
    assert est.relative_se == pytest.approx(math.sqrt(rv_t + rv_c))


def _gbstats_cuped(y_t, x_t, y_c, x_c):
    """GrowthBook's RegressionAdjustedStatistic written out: theta = pooled cov(post, pre) / var(pre)
    (compute_theta on the joint statistic), mean = post - theta pre, variance = var(post) + theta^2 var(pre)
    - 2 theta cov(post, pre) (ddof 1), over n."""
    y, x = np.concatenate([y_t, y_c]), np.concatenate([x_t, x_c])
    theta = np.cov(y, x, ddof=1)[0, 1] / x.var(ddof=1)
    effect = (y_t.mean() - theta * x_t.mean()) - (y_c.mean() - theta * x_c.mean())

    def var(yy, xx):
        c = np.cov(yy, xx, ddof=1)
        return (c[0, 0] + theta**2 * c[1, 1] - 2 * theta * c[0, 1]) / yy.size

    return theta, effect, var(y_t, x_t), var(y_c, x_c)


def test_cuped_with_every_user_seen_before_is_gbstats():
    rng = np.random.default_rng(4)
    x_t, x_c = rng.gamma(2.0, 1.0, 40), rng.gamma(2.0, 1.0, 50)
    y_t = 1.0 + 0.8 * x_t + rng.normal(0, 0.5, 40) + 0.3
    y_c = 1.0 + 0.8 * x_c + rng.normal(0, 0.5, 50)
    est = guardrail_difference(y_t, y_c, x_t=x_t, x_c=x_c)
    theta, effect, v_t, v_c = _gbstats_cuped(y_t, x_t, y_c, x_c)
    plain = guardrail_difference(y_t, y_c)
    assert est.method == "cuped"
    assert est.effect == pytest.approx(effect)
    assert est.se == pytest.approx(math.sqrt(v_t + v_c))
    assert est.variance_reduction == pytest.approx(1 - (v_t + v_c) / plain.se**2)
    assert est.variance_reduction > 0.5  # x explains most of y here
    assert est.treatment_mean == pytest.approx(y_t.mean())  # observed means, the effect is adjusted
    # relative: effect / |control mean|; its variance is the exact gradient's (see the module docstring)
    mc = y_c.mean()
    e_c = y_c - theta * x_c
    rphi_c = -(e_c - e_c.mean()) / 50 / mc - effect / mc**2 * (y_c - mc) / 50
    rv_c = 50 / 49 * np.sum(rphi_c**2)
    assert est.relative_se == pytest.approx(math.sqrt(v_t / mc**2 + rv_c))
    # the ratio of the ADJUSTED arm means (pooled centring), on the log scale
    x = np.concatenate([x_t, x_c])
    a_t, a_c = y_t.mean() - theta * (x_t.mean() - x.mean()), y_c.mean() - theta * (x_c.mean() - x.mean())
    assert est.relative_effect == pytest.approx(a_t / a_c - 1)
    assert est.log_ratio_se == pytest.approx(math.sqrt(v_t / a_t**2 + v_c / a_c**2))


def test_cuped_sessions_without_history_get_an_indicator():
    """Users without history: covariates (h (x - xbar_h), h), theta by the normal equations on the pooled sessions."""
    y_t = np.array([5.0, 7.0, 6.0, 9.0, 4.0, 8.0])
    x_t = np.array([4.0, 6.0, np.nan, 8.0, 3.0, np.nan])
    y_c = np.array([4.0, 6.0, 3.0, 7.0, 5.0])
    x_c = np.array([4.5, np.nan, 2.0, 6.5, 4.0])
    y = np.concatenate([y_t, y_c])
    x = np.concatenate([x_t, x_c])
    h = np.isfinite(x).astype(float)
    xh = np.where(h > 0, x - np.nanmean(x), 0.0)
    Z = np.column_stack([np.ones(11), xh, h])
    coef = np.linalg.solve(Z.T @ Z, Z.T @ y)  # intercept, theta_x, theta_h
    theta = coef[1:]
    zt, zc = Z[:6, 1:], Z[6:, 1:]
    effect = (y_t.mean() - theta @ zt.mean(0)) - (y_c.mean() - theta @ zc.mean(0))
    e_t, e_c = y_t - zt @ theta, y_c - zc @ theta
    var = e_t.var(ddof=1) / 6 + e_c.var(ddof=1) / 5
    est = guardrail_difference(y_t, y_c, x_t=x_t, x_c=x_c, min_history=3)
    assert est.method == "cuped"
    assert est.effect == pytest.approx(effect)
    assert est.se == pytest.approx(math.sqrt(var))
    # with the shipped floor (10 sessions with history per arm) four and four are too few: plain
    floor = guardrail_difference(y_t, y_c, x_t=x_t, x_c=x_c)
    assert floor.method == "plain" and floor.effect == pytest.approx(y_t.mean() - y_c.mean())
    assert "4 treatment and 4 control sessions have a pre-experiment mean, fewer than 10" in floor.note


def test_cuped_falls_back_to_plain_when_it_does_not_narrow():
    """Pooled, x rises with y only BETWEEN the arms; within each arm it moves against y, so the pooled theta
    (positive) widens each arm's residual spread: the do-no-harm rule keeps the plain estimate."""
    y_t = np.array([10.0, 11.0, 12.0, 13.0])
    x_t = np.array([13.0, 12.0, 11.0, 10.0])
    y_c = np.array([0.0, 1.0, 2.0, 3.0])
    x_c = np.array([3.0, 2.0, 1.0, 0.0])
    est = guardrail_difference(y_t, y_c, x_t=x_t, x_c=x_c, min_history=2)
    plain = guardrail_difference(y_t, y_c)
    assert est.method == "plain" and est.variance_reduction is None
    assert est.effect == pytest.approx(10.0) and est.se == pytest.approx(plain.se)
    assert "CUPED did not narrow" in est.note


def test_cuped_without_any_history_is_plain():
    est = guardrail_difference(Y_T, Y_C, x_t=np.full(6, np.nan), x_c=np.full(5, np.nan))
    assert est.method == "plain" and est.effect == pytest.approx(28 / 6 - 3.0)
    assert "no user was seen before" in est.note


def test_missing_values_are_left_out_and_counted():
    est = guardrail_difference(np.append(Y_T, np.nan), np.append(Y_C, [np.nan, np.inf]))
    assert (est.n_treatment, est.n_control) == (6, 5)
    assert est.effect == pytest.approx(28 / 6 - 3.0)
    assert "3 sessions without a value left out (1 treatment, 2 control)" in est.note


def test_degenerate_arms():
    empty = guardrail_difference(Y_T, [np.nan])
    assert math.isnan(empty.effect) and "no session with a value" in empty.note
    one_user = guardrail_difference(Y_T, Y_C, g_t=np.zeros(6, int), g_c=np.arange(5))
    assert math.isinf(one_user.se) and "single user" in one_user.note
    assert noninferiority(one_user, direction="lower", margin=0.1, margin_type="relative", alpha=0.05) == (
        0.5,
        "inconclusive",
    )
    zero_control = guardrail_difference([1.0, 2.0], [0.0, 0.0])
    assert math.isnan(zero_control.relative_effect) and "control mean is 0" in zero_control.note


def _estimate(effect, se, relative_effect, relative_se, df=math.inf, log_ratio=math.nan, log_se=math.nan):
    return GuardrailEstimate(
        10.0 + effect, 10.0, effect, se, math.nan, math.nan, relative_effect, relative_se, math.nan, math.nan,
        "plain", None, 100, 100, None, df, df, 0, 0, log_ratio, log_se, df,
    )  # fmt: skip


def test_noninferiority_verdicts_by_hand():
    z = stats.norm.ppf(0.95)  # 1.6449
    # lower is better, relative margin 10 %: harm 2 % with se 3 %: upper bound 2 + 4.93 = 6.93 % < 10 %: pass
    p, verdict = noninferiority(_estimate(0.2, 0.3, 0.02, 0.03), direction="lower", margin=0.10,
                                margin_type="relative", alpha=0.05)  # fmt: skip
    assert verdict == "pass" and p == pytest.approx(stats.norm.cdf((0.02 - 0.10) / 0.03))
    # harm 8 %: upper bound 8 + 4.93 > 10, lower bound 3.07 < 10: inconclusive
    assert noninferiority(_estimate(0.8, 0.3, 0.08, 0.03), direction="lower", margin=0.10,
                          margin_type="relative", alpha=0.05)[1] == "inconclusive"  # fmt: skip
    # harm 16 %: lower bound 16 - 4.93 = 11.07 % > 10 %: fail
    p, verdict = noninferiority(_estimate(1.6, 0.3, 0.16, 0.03), direction="lower", margin=0.10,
                                margin_type="relative", alpha=0.05)  # fmt: skip
    assert verdict == "fail" and p == pytest.approx(stats.norm.cdf(0.06 / 0.03))
    # the edge: harm + z se just below / above the margin
    assert noninferiority(_estimate(0, 1, 0.10 - z * 0.01 - 1e-9, 0.01), direction="lower", margin=0.10,
                          margin_type="relative", alpha=0.05)[1] == "pass"  # fmt: skip
    assert noninferiority(_estimate(0, 1, 0.10 - z * 0.01 + 1e-9, 0.01), direction="lower", margin=0.10,
                          margin_type="relative", alpha=0.05)[1] == "inconclusive"  # fmt: skip
    # higher is better: a fall is the harm; absolute margin in metric units, with Welch's t (df 12)
    est = _estimate(-3.0, 1.0, -0.3, 0.1, df=12)
    p, verdict = noninferiority(est, direction="higher", margin=2.0, margin_type="absolute", alpha=0.05)
    assert p == pytest.approx(stats.t.cdf((3.0 - 2.0) / 1.0, 12)) and verdict == "inconclusive"
    p, verdict = noninferiority(est, direction="higher", margin=5.0, margin_type="absolute", alpha=0.05)
    assert verdict == "pass" and p == pytest.approx(stats.t.cdf(-2.0, 12))
    # an improvement passes whatever the margin
    assert noninferiority(_estimate(-2.0, 0.3, -0.2, 0.03), direction="lower", margin=0.0,
                          margin_type="relative", alpha=0.05)[1] == "pass"  # fmt: skip
    assert noninferiority(_estimate(math.nan, math.nan, math.nan, math.nan), direction="lower", margin=0.1,
                          margin_type="relative", alpha=0.05)[1] is None  # fmt: skip


def test_a_relative_margin_is_tested_on_the_log_of_the_ratio():
    """Lower is better, margin 10 %: H0 log R >= log 1.1. log R = log 1.02, se 0.03: p = Phi((log 1.02 - log 1.1)
    / 0.03) = Phi(-2.517) = 0.00592; the upper bound log 1.02 + 1.645 * 0.03 = 0.0691 < log 1.1 = 0.0953: pass."""
    est = _estimate(0.2, 0.1, 0.02, 0.03, log_ratio=math.log(1.02), log_se=0.03)
    p, verdict = noninferiority(est, direction="lower", margin=0.10, margin_type="relative", alpha=0.05)
    assert p == pytest.approx(stats.norm.cdf((math.log(1.02) - math.log(1.1)) / 0.03)) and verdict == "pass"
    assert p == pytest.approx(0.00592, abs=1e-5)
    # higher is better, margin 10 %: H0 R <= 0.9, harm -log R against -log 0.9 = 0.1054; R = 0.85 is beyond it
    # by 0.0571 = 2.85 se (se 0.02): fail
    est = _estimate(-1.5, 0.1, -0.15, 0.02, log_ratio=math.log(0.85), log_se=0.02)
    p, verdict = noninferiority(est, direction="higher", margin=0.10, margin_type="relative", alpha=0.05)
    assert p == pytest.approx(stats.norm.cdf((-math.log(0.85) + math.log(0.9)) / 0.02)) and verdict == "fail"
    # a margin of 100 % or more tolerates any fall of a higher-is-better metric
    assert noninferiority(est, direction="higher", margin=1.0, margin_type="relative", alpha=0.05) == (0.0, "pass")
    # an arm mean that is not positive: no log ratio, the linear relative effect is tested (as the tests above)
    neg = guardrail_difference([-1.0, -2.0, -1.5], [1.0, 2.0, 1.5])
    assert math.isnan(neg.log_ratio) and "not positive" in neg.note
    assert neg.relative_effect == pytest.approx(-3.0 / 1.5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"direction": "down", "margin": 0.1, "margin_type": "relative", "alpha": 0.05}, "direction"),
        ({"direction": "lower", "margin": -0.1, "margin_type": "relative", "alpha": 0.05}, "margin"),
        ({"direction": "lower", "margin": 0.1, "margin_type": "percent", "alpha": 0.05}, "margin_type"),
        ({"direction": "lower", "margin": 0.1, "margin_type": "relative", "alpha": 0.7}, "alpha"),
    ],
)
def test_noninferiority_refuses_an_unreadable_rule(kwargs, message):
    with pytest.raises(ValueError, match=message):
        noninferiority(_estimate(0.1, 0.1, 0.01, 0.01), **kwargs)


def test_pass_at_the_margin_is_rare():
    """True relative harm exactly 10 % (the margin): "pass" in about alpha = 5 % of replications. 400 replications:
    the count of passes is Binomial(400, 0.05) (mean 20, sd 4.4); more than 36 would be 3.7 sd above."""
    rng = np.random.default_rng(11)
    passes = 0
    for _ in range(400):
        y_c = rng.lognormal(0.0, 0.6, 300)
        y_t = 1.10 * rng.lognormal(0.0, 0.6, 300)  # every session 10 % dearer in distribution
        est = guardrail_difference(y_t, y_c)
        passes += noninferiority(est, direction="lower", margin=0.10, margin_type="relative", alpha=0.05)[1] == "pass"
    assert passes <= 36
