"""The guardrail validation (``studies/guardrails.py``): the generator's known truth against a large draw of it, its
structure (users, sticky arms, history), and the three ``pulse validate`` scenarios' rows and target checks on a
handful of replications. The full runs' figures are in docs/guardrails-validation.md."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from pulse_pipeline.studies import guardrails as gv
from pulse_pipeline.studies.coverage import SCENARIOS, TARGETS, check_targets, summarize, validate


def _ratio_of_sums(y: np.ndarray, user: np.ndarray) -> tuple[float, float]:
    """Per-session mean of a draw and its user-clustered standard error (ratio of sums, delta method), written
    out here rather than taken from stats.guardrails: the truth check must not lean on the formula it validates."""
    totals = np.bincount(user, weights=y)
    counts = np.bincount(user).astype(float)
    keep = counts > 0
    totals, counts = totals[keep], counts[keep]
    mean = totals.sum() / counts.sum()
    resid = totals - mean * counts
    return mean, math.sqrt(resid @ resid) / counts.sum()


def test_the_truth_by_hand_for_the_default_parameters() -> None:
    # mu = log 0.30, session sd 0.8, user sd 0.6, activity sd 1, rho 0.3, 5 extra sessions per user on average:
    # exp(mu + 0.32) * exp(0.18) * (1 + 5 exp(0.3 * 1 * 0.6)) / 6
    by_hand = 0.30 * math.exp(0.32) * math.exp(0.18) * (1 + 5 * math.exp(0.18)) / 6
    control, treatment = gv.true_means(gv.PARAMS)
    assert control == pytest.approx(by_hand, rel=1e-12) and control == pytest.approx(0.5759055, rel=1e-6)
    assert treatment == control  # no effect by default
    ten = gv.PARAMS.at_relative_effect(0.10)
    assert gv.true_relative_effect(ten) == pytest.approx(0.10, abs=1e-12)
    assert gv.true_effect(ten) == pytest.approx(0.10 * by_hand, rel=1e-12)


def test_the_truth_formula_matches_a_large_draw_of_the_generator() -> None:
    """400 000 users (~2.4 million sessions): each arm's per-session mean within 4 clustered standard errors of
    the formula, for the default parameters and for stronger heavy-user correlation and tails."""
    for params in (
        gv.PARAMS.at_relative_effect(0.10),
        replace(gv.PARAMS, activity_corr=0.7, activity_sd=0.8, user_sd=0.8, effect=-0.2, mean_sessions=3.0),
    ):
        big = replace(params, users=400_000)
        sessions = gv.draw(big, seed=11)
        for treated, truth in zip((False, True), gv.true_means(big), strict=True):
            y, user, _ = sessions.arm(treated)
            mean, se = _ratio_of_sums(y, user)
            assert abs(mean - truth) < 4 * se, (params, treated, mean, truth, se)
            assert se < 0.01 * truth  # the check has teeth: 1 % of the mean would be caught
        # sessions per user: 1 + Poisson(lambda) with E[lambda] = mean_sessions - 1
        assert sessions.y.size / big.users == pytest.approx(big.mean_sessions, rel=0.01)


def test_the_generator_draws_users_with_sticky_arms_and_a_pre_period_mean() -> None:
    params = gv.PARAMS
    sessions = gv.draw(params, seed=3)
    assert gv.draw(params, seed=3).y.tolist() == sessions.y.tolist()  # deterministic in the seed
    assert (sessions.y > 0).all()
    users = np.unique(sessions.user)
    assert users.size == params.users  # every user has at least one session
    frame = pl.DataFrame({"user": sessions.user, "treated": sessions.treated, "x": sessions.covariate})
    per_user = frame.group_by("user").agg(
        pl.col("treated").n_unique().alias("arms"),
        pl.col("x").n_unique().alias("xs"),
        pl.col("x").is_nan().all().alias("no_history"),
        pl.len().alias("n"),
    )
    assert (per_user["arms"] == 1).all()  # sticky: one arm per user
    assert (per_user["xs"] == 1).all()  # one pre-period mean per user, on every session of theirs
    assert per_user["no_history"].mean() == pytest.approx(1 - params.history_share, abs=0.04)
    assert per_user["n"].max() >= 10 * per_user["n"].median()  # heavy users
    # the covariate carries the user's level: it correlates with the experiment metric across users
    users_x = frame.filter(~pl.col("x").is_nan()).group_by("user").agg(pl.col("x").first())
    mean_y = pl.DataFrame({"user": sessions.user, "y": sessions.y}).group_by("user").agg(pl.col("y").mean())
    joined = users_x.join(mean_y, on="user")
    assert np.corrcoef(np.log(joined["x"]), np.log(joined["y"]))[0, 1] > 0.4
    # nobody with history / everybody with history
    assert np.isnan(gv.draw(replace(params, history_share=0.0), seed=3).covariate).all()
    assert not np.isnan(gv.draw(replace(params, history_share=1.0), seed=3).covariate).any()


EXPECTED_METHODS = {
    "guardrail_users": ["plain", "cuped", "plain_relative", "cuped_relative", "plain_session"],
    "guardrail_cuped": [
        "plain",
        "cuped",
        "plain_all_history",
        "cuped_all_history",
        "plain_no_history",
        "cuped_no_history",
    ],
    "guardrail_margin": [
        "plain_lower",
        "plain_absolute",
        "cuped_lower",
        "plain_higher",
        "cuped_higher",
        "plain_null",
        "cuped_null",
        "plain_lower_small",
        "plain_absolute_small",
        "cuped_lower_small",
    ],
}


def test_each_scenario_is_registered_at_the_end_and_yields_its_methods() -> None:
    assert list(SCENARIOS)[-3:] == list(gv.SCENARIOS) and list(TARGETS)[-3:] == list(gv.SCENARIOS)
    for scenario, methods in EXPECTED_METHODS.items():
        assert SCENARIOS[scenario] is gv.replicate_guardrails
        # validate's options (n_per_arm, ...) are accepted and do not change the draw
        rows = gv.replicate_guardrails(5, scenario, n_per_arm=100, family="ridge")
        assert [r.method for r in rows] == methods and {r.scenario for r in rows} == {scenario}
        assert rows == gv.replicate_guardrails(5, scenario)
        assert all(math.isfinite(r.width) and r.width > 0 for r in rows)
    with pytest.raises(ValueError, match="guardrail_users"):
        gv.replicate_guardrails(5, "guardrail_nope")


def test_a_few_replications_show_the_unit_and_cuped_and_the_margin() -> None:
    """10 replications each: not coverage (that is ``pulse validate``'s), but what every replication must show:
    the session-level interval narrower than the user-level one (heavy users repeat themselves), CUPED narrower
    than plain where users have history and equal to plain where none has, and a harm of twice the margin never
    passing."""
    frame = validate(10, gv.SCENARIOS, seed=1, workers=1)
    width = {(s, m): w for s, m, w in frame.select("scenario", "method", "mean_width").iter_rows()}
    assert width["guardrail_users", "plain_session"] < 0.6 * width["guardrail_users", "plain"]
    for suffix in ("", "_all_history"):
        assert width["guardrail_cuped", "cuped" + suffix] < 0.9 * width["guardrail_cuped", "plain" + suffix]
    assert width["guardrail_cuped", "cuped_no_history"] == width["guardrail_cuped", "plain_no_history"]
    assert frame["replications"].to_list() == [10] * frame.height
    for seed in range(10):
        sessions = gv.draw(gv.PARAMS.at_relative_effect(2 * gv.MARGIN), seed)
        for cuped in (False, True):
            assert not gv.passes(gv.estimate(sessions, cuped=cuped), "lower", gv.MARGIN)


def _frame(rows: dict[tuple[str, str], tuple[float, float, float]], replications: int = 500) -> pl.DataFrame:
    """A summary frame made by hand: (scenario, method) -> (coverage, mean_width, share_flagged)."""
    return pl.DataFrame(
        [
            {"scenario": s, "method": m, "coverage": c, "mean_width": w, "bias": 0.0, "replications": replications,
             "share_flagged": f}
            for (s, m), (c, w, f) in rows.items()
        ]
    )  # fmt: skip


def _met() -> dict[tuple[str, str], tuple[float, float, float]]:
    rows = {}
    for scenario, methods in EXPECTED_METHODS.items():
        for m in methods:
            rows[scenario, m] = (0.95, 0.8 if m.startswith("cuped") else 1.0, 0.05)
    rows["guardrail_users", "plain_session"] = (0.60, 0.4, 0.5)
    rows["guardrail_cuped", "cuped_no_history"] = (0.95, 1.0, 0.05)
    return rows


def test_the_target_checks_say_which_target_is_unmet() -> None:
    assert gv.pass_limit(500) == pytest.approx(0.05 + 2 * math.sqrt(0.05 * 0.95 / 500))  # 6.95 %
    assert check_targets(_frame(_met()), gv.SCENARIOS) == []
    assert gv.check_guardrails(_frame(_met())) == []
    for key, bad, words in (
        (("guardrail_users", "cuped"), (0.92, 0.8, 0.05), "guardrail_users cuped coverage"),
        (("guardrail_users", "plain_session"), (0.94, 0.4, 0.5), "the unit matters"),
        (("guardrail_cuped", "cuped"), (0.95, 0.86, 0.05), "0.860 x"),
        (("guardrail_cuped", "cuped_no_history"), (0.95, 1.02, 0.05), "1.020 x"),
        (("guardrail_margin", "plain_higher"), (0.95, 1.0, 0.07), "plain_higher: 'pass' at the margin"),
    ):
        rows = _met() | {key: bad}
        unmet = check_targets(_frame(rows), gv.SCENARIOS)
        assert len(unmet) == 1 and words in unmet[0], (key, unmet)
    # a missing row is unmet; each scenario's TARGETS entry checks only its own scenario
    rows = {k: v for k, v in _met().items() if k != ("guardrail_margin", "cuped_lower")}
    assert check_targets(_frame(rows), ["guardrail_margin"]) == ["guardrail_margin cuped_lower: no row"]
    assert check_targets(_frame(rows), ["guardrail_users", "guardrail_cuped"]) == []
    # the share passing at the margin is judged against its own replications' Monte Carlo error
    near = _met() | {("guardrail_margin", "plain_lower"): (0.95, 1.0, 0.065)}
    assert check_targets(_frame(near, 500), gv.SCENARIOS) == []  # limit 6.95 %
    assert len(check_targets(_frame(near, 3000), gv.SCENARIOS)) == 1  # limit 5.80 %


def test_summarize_keeps_the_pass_verdict_in_share_flagged() -> None:
    rows = [r for seed in range(4) for r in gv.replicate_guardrails(seed, "guardrail_margin")]
    summary = summarize([r.__dict__ for r in rows])
    null = summary.filter(pl.col("method") == "plain_null")
    passed = [r.flagged for r in rows if r.method == "plain_null"]
    assert null["share_flagged"][0] == pytest.approx(sum(passed) / 4)
