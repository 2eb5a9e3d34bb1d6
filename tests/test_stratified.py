"""Stratified PPI++ (stats/stratified.py, Fisch et al. 2024): each stratum's lambda is PPI++'s computed by hand on
that stratum alone (and ppi_py's), the estimate is the size-weighted mean of the strata's PPI++ means, one stratum is
PPI++ exactly, and the variance is the formula of the module docstring worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ppi_py.ppi import ppi_mean_pointestimate

from pulse_pipeline.estimates.methods import Method
from pulse_pipeline.stats.cluster import clustered_ppi_mean
from pulse_pipeline.stats.ppi import best_width_ratio_of_difference, ppi_mean
from pulse_pipeline.stats.stratified import (
    METHOD,
    best_width_ratio_stratified,
    stratified_ppi,
    stratified_ppi_mean,
)


def _arm(seed: int = 0):
    """Three strata: the model strong in "a" (r ~ 0.9), weak in "b", noise in "c"; sizes and label means differ."""
    rng = np.random.default_rng(seed)
    y, f, fu, s_l, s_u = [], [], [], [], []
    for stratum, (n, N, mean, strength) in {"a": (80, 600, 0.7, 0.9), "b": (50, 300, 0.5, 0.4),
                                            "c": (40, 200, 0.3, 0.0)}.items():  # fmt: skip
        truth_l, truth_u = rng.normal(mean, 0.2, n), rng.normal(mean, 0.2, N)
        y.append(truth_l + rng.normal(0, 0.1, n))
        noise = math.sqrt(1 - strength**2)
        f.append(mean + strength * (truth_l - mean) + noise * rng.normal(0, 0.2, n))
        fu.append(mean + strength * (truth_u - mean) + noise * rng.normal(0, 0.2, N))
        s_l += [stratum] * n
        s_u += [stratum] * N
    return np.concatenate(y), np.concatenate(f), np.concatenate(fu), np.array(s_l), np.array(s_u)


def _lambda_by_hand(y, f, fu):
    """PPI++'s lambda_hat: Cov(Y, f) (ddof 0) / ((1 + n/N) Var(f, f~ pooled, ddof 1)), clipped to [0, 1]."""
    cov = np.mean((y - y.mean()) * (f - f.mean()))
    var_pool = np.var(np.r_[f, fu], ddof=1)
    return float(np.clip(cov / ((1 + y.size / fu.size) * var_pool), 0, 1))


def test_each_stratum_lambda_is_ppi_plus_plus_on_that_stratum_alone():
    y, f, fu, s_l, s_u = _arm()
    result = stratified_ppi(y, f, fu, s_l, s_u)
    assert [p.stratum for p in result.strata] == ["a", "b", "c"]
    for p in result.strata:
        yh, fh, fuh = y[s_l == p.stratum], f[s_l == p.stratum], fu[s_u == p.stratum]
        assert p.lam == pytest.approx(_lambda_by_hand(yh, fh, fuh), rel=1e-12)
        # ppi_py's power-tuned point estimate is mean(Y) + lam (mean(f~) - mean(f)): its lam, read back
        reference = float(ppi_mean_pointestimate(yh, fh, fuh, lam=None)[0])
        if 0 < p.lam < 1:
            assert p.lam == pytest.approx((reference - yh.mean()) / (fuh.mean() - fh.mean()), rel=1e-9)
        assert p.estimate == pytest.approx(yh.mean() + p.lam * (fuh.mean() - fh.mean()), abs=1e-14)
        assert (p.n, p.N) == (yh.size, fuh.size)
    lams = {p.stratum: p.lam for p in result.strata}
    assert lams["a"] > 0.6 and lams["c"] < 0.2  # the point of it: strong where the model is, near 0 where not
    one = ppi_mean(y, f, fu)
    assert lams["c"] < one.lam < lams["a"]


def test_estimate_is_the_size_weighted_mean_of_the_strata_ppi_means():
    y, f, fu, s_l, s_u = _arm(1)
    result = stratified_ppi(y, f, fu, s_l, s_u)
    M = y.size + fu.size
    expected, lam = 0.0, 0.0
    for h in ("a", "b", "c"):
        w = ((s_l == h).sum() + (s_u == h).sum()) / M  # its share of ALL the arm's sessions, rated and unrated
        part = ppi_mean(y[s_l == h], f[s_l == h], fu[s_u == h])
        expected += w * part.estimate
        lam += w * part.lam
    assert result.arm.estimate == pytest.approx(expected, abs=1e-14)
    assert result.arm.lam == pytest.approx(lam, abs=1e-14)
    assert sum(p.weight for p in result.strata) == pytest.approx(1.0)
    assert result.arm.method == METHOD and (result.arm.n, result.arm.N) == (y.size, fu.size)


def test_variance_by_hand_sessions_and_singleton_users():
    y, f, fu, s_l, s_u = _arm(2)
    arm = stratified_ppi_mean(y, f, fu, s_l, s_u)
    M = y.size + fu.size
    theta, within, parts = arm.estimate, 0.0, []
    for h in ("a", "b", "c"):
        yh, fh, fuh = y[s_l == h], f[s_l == h], fu[s_u == h]
        lam = _lambda_by_hand(yh, fh, fuh)
        w = (yh.size + fuh.size) / M
        within += w**2 * (np.var(yh - lam * fh) / yh.size + lam**2 * np.var(fuh) / fuh.size)
        parts.append((w, yh.mean() + lam * (fuh.mean() - fh.mean())))
    between = sum(w * (t - theta) ** 2 for w, t in parts) / M
    assert arm.se == pytest.approx(math.sqrt(within + between), rel=1e-10)
    assert arm.ci_high - arm.estimate == pytest.approx(1.959963984540054 * arm.se, rel=1e-12)
    # every session its own user: the same sum of squares times the CR1 factor G / (G - 1), G = n + N
    clustered = stratified_ppi_mean(y, f, fu, s_l, s_u, g_labeled=np.arange(y.size),
                                    g_unlabeled=y.size + np.arange(fu.size))  # fmt: skip
    assert clustered.estimate == arm.estimate
    assert clustered.se**2 == pytest.approx((within + between) * M / (M - 1), rel=1e-10)


def test_users_spanning_strata_sum_their_influence():
    y, f, fu, s_l, s_u = _arm(3)
    rng = np.random.default_rng(7)
    g_l, g_u = rng.integers(0, 150, y.size), rng.integers(0, 150, fu.size)
    arm = stratified_ppi_mean(y, f, fu, s_l, s_u, g_labeled=g_l, g_unlabeled=g_u)
    theta, M = arm.estimate, y.size + fu.size
    sums = np.zeros(150)
    for h in ("a", "b", "c"):
        ml, mu = s_l == h, s_u == h
        lam = _lambda_by_hand(y[ml], f[ml], fu[mu])
        w = (ml.sum() + mu.sum()) / M
        t = y[ml].mean() + lam * (fu[mu].mean() - f[ml].mean())
        r = y[ml] - lam * f[ml]
        np.add.at(sums, g_l[ml], w * (r - r.mean()) / ml.sum() + (t - theta) / M)
        np.add.at(sums, g_u[mu], w * lam * (fu[mu] - fu[mu].mean()) / mu.sum() + (t - theta) / M)
    G = np.unique(np.r_[g_l, g_u]).size
    assert arm.se == pytest.approx(math.sqrt(G / (G - 1) * np.sum(sums**2)), rel=1e-10)


def test_one_stratum_is_ppi_plus_plus_exactly():
    y, f, fu, _, _ = _arm(4)
    one_l, one_u = np.full(y.size, "all"), np.full(fu.size, "all")
    arm = stratified_ppi_mean(y, f, fu, one_l, one_u)
    ppi = ppi_mean(y, f, fu)
    assert (arm.estimate, arm.se, arm.ci_low, arm.ci_high, arm.lam) == (
        ppi.estimate, ppi.se, ppi.ci_low, ppi.ci_high, ppi.lam)  # fmt: skip
    g_l, g_u = np.arange(y.size) // 3, np.arange(fu.size) // 4 + 1000
    arm = stratified_ppi_mean(y, f, fu, one_l, one_u, g_labeled=g_l, g_unlabeled=g_u)
    ref = clustered_ppi_mean(y, f, g_l, fu, g_u)
    assert (arm.estimate, arm.se, arm.lam) == (ref.estimate, ref.se, ref.lam)
    fixed = stratified_ppi_mean(y, f, fu, one_l, one_u, lam=0.0)
    assert fixed.estimate == pytest.approx(y.mean()) and fixed.lam == 0.0


def test_lambda_zero_is_the_post_stratified_rated_mean():
    y, f, fu, s_l, s_u = _arm(5)
    arm = stratified_ppi_mean(y, f, fu, s_l, s_u, lam=0.0)
    M = y.size + fu.size
    expected = sum(((s_l == h).sum() + (s_u == h).sum()) / M * y[s_l == h].mean() for h in "abc")
    assert arm.estimate == pytest.approx(expected, abs=1e-14) and arm.lam == 0.0


def test_degenerate_strata_are_merged_and_noted():
    y, f, fu, s_l, s_u = _arm(6)
    s_l, s_u = s_l.astype(object), s_u.astype(object)
    s_l[0], s_u[:5] = "lonely", "unrated-only"  # one rating; no rating at all
    result = stratified_ppi(y, f, fu, s_l, s_u)
    assert "lonely" in result.arm.note and "unrated-only" in result.arm.note
    assert {p.stratum for p in result.strata} == {"a", "b", "c"}
    assert sum(p.n for p in result.strata) == y.size and sum(p.N for p in result.strata) == fu.size
    few = stratified_ppi_mean(y[:1], f[:1], fu, s_l[:1], s_u)
    assert math.isinf(few.se) and few.note  # ppi_mean's single-label result


def test_best_width_with_one_stratum_is_ppi_plus_plus_bound():
    y, f, fu, _, _ = _arm(8)
    y2, f2, fu2, _, _ = _arm(9)
    arms = [(y, f, np.zeros(y.size), np.zeros(fu.size)), (y2, f2, np.zeros(y2.size), np.zeros(fu2.size))]
    assert best_width_ratio_stratified(arms) == pytest.approx(
        best_width_ratio_of_difference([(y, f, fu.size), (y2, f2, fu2.size)]), rel=1e-12
    )
    _, _, _, s_l, s_u = _arm(8)
    _, _, _, s_l2, s_u2 = _arm(9)
    stratified = best_width_ratio_stratified([(y, f, s_l, s_u), (y2, f2, s_l2, s_u2)])
    assert stratified < best_width_ratio_of_difference([(y, f, fu.size), (y2, f2, fu2.size)])


# ---------------------------------------------------------------- the row of estimates.experiment_effects


def _frame(seed: int = 0, small_stratum: int = 0):
    """Two arms of experiment "e" with a one-hot task type (two options, a third left unanswered for some
    sessions): the model strong on fix_bugs, noise on write_documentation. ``small_stratum`` sessions of a third
    option (few ratings: pooled)."""
    import polars as pl

    rng = np.random.default_rng(seed)
    parts = []
    for arm, shift in (("t", 0.05), ("c", 0.0)):
        plan = [("fix_bugs", 900, 0.7, 0.95), ("write_documentation", 600, 0.4, 0.0), (None, 300, 0.5, 0.5)]
        if small_stratum:
            plan.append(("perform_deployments", small_stratum, 0.6, 0.5))
        for task, n, mean, strength in plan:
            truth = rng.normal(mean + shift, 0.15, n)
            rated = rng.random(n) < 0.25
            prediction = mean + strength * (truth - mean - shift) + math.sqrt(1 - strength**2) * rng.normal(0, 0.15, n)
            one_hot = {
                f"task_type__{o}": [None if task is None else int(task == o)] * n
                for o in ("fix_bugs", "write_documentation", "perform_deployments")
            }
            parts.append(pl.DataFrame({
                "session_id": [f"{arm}-{task}-{i}" for i in range(n)], "experiment": "e", "variant": arm,
                "user_id": [None] * n, "labeled": rated,
                "label": np.where(rated, truth + rng.normal(0, 0.1, n), np.nan), "prediction": prediction, **one_hot,
            }, schema_overrides={f"task_type__{o}": pl.Int64 for o in ("fix_bugs", "write_documentation",
                                                                        "perform_deployments")}))  # fmt: skip
    frame = pl.concat(parts)
    return frame.with_columns(pl.when(pl.col("labeled")).then(pl.col("label")).otherwise(None).alias("label"))


def _by_hand(frame, column_of):
    """Per arm (t, c): the stratified PPI++ mean computed straight from the frame, strata from ``column_of``."""
    import polars as pl

    out = {}
    for arm in ("t", "c"):
        part = frame.filter(pl.col("variant") == arm)
        labels = np.array([column_of(r) for r in part.iter_rows(named=True)], dtype=object)
        rated = part["labeled"].to_numpy()
        y, f = part["label"].to_numpy()[rated], part["prediction"].to_numpy()
        out[arm] = stratified_ppi_mean(y, f[rated], f[~rated], labels[rated], labels[~rated])
    return out


def test_the_experiment_effects_row_is_the_stratified_difference_by_task_type():
    from pulse_pipeline.estimates.effects import Settings
    from pulse_pipeline.estimates.experiment_effects import experiment_effect_rows

    frame = _frame(1)

    def task(row):
        chosen = [o for o in ("fix_bugs", "write_documentation", "perform_deployments") if row[f"task_type__{o}"]]
        return chosen[0] if chosen else "unknown"

    arms = _by_hand(frame, task)
    rows = {r.method: r for r in experiment_effect_rows(frame, {"e": "c"}, Settings(n_resamples=50, n_permutations=50))}
    row, ppi = rows["ppi_stratified"], rows["ppi"]
    assert row.effect == pytest.approx(arms["t"].estimate - arms["c"].estimate, abs=1e-14)
    assert row.se == pytest.approx(math.hypot(arms["t"].se, arms["c"].se), rel=1e-12)
    assert (row.lambda_treatment, row.lambda_control) == pytest.approx((arms["t"].lam, arms["c"].lam), abs=1e-14)
    assert row.valid and row.flags is None
    assert "strata by task_type" in row.note and "fix_bugs" in row.note and "unknown" in row.note
    assert row.se < ppi.se  # strong in one stratum, noise in another: the point of it
    # strata turned off: PPI++'s numbers, and the note says why
    off = {r.method: r for r in experiment_effect_rows(frame, {"e": "c"}, Settings(n_resamples=50, n_permutations=50),
                                                       strata={"e": "none"})}["ppi_stratified"]  # fmt: skip
    assert (off.effect, off.se) == (ppi.effect, ppi.se) and "no strata" in off.note and "turned off" in off.note
    fast = Settings(n_resamples=50, n_permutations=50)
    missing = {r.method: r for r in experiment_effect_rows(frame, {"e": "c"}, fast, default_strata="sentiment")}
    missing = missing["ppi_stratified"]
    assert (missing.effect, missing.se) == (ppi.effect, ppi.se) and "'sentiment'" in missing.note


def test_a_small_stratum_is_pooled_in_the_row():
    from pulse_pipeline.estimates.effects import Settings
    from pulse_pipeline.estimates.experiment_effects import experiment_effect_rows
    from pulse_pipeline.estimates.strata import POOLED

    frame = _frame(2, small_stratum=60)  # ~15 ratings per arm: fewer than 30

    def task(row):
        """perform_deployments pooled (~15 ratings); the pool short of 30, so the kept stratum with the fewest
        ratings joins it: unknown (~75 ratings per arm; write_documentation has ~150)."""
        chosen = [o for o in ("fix_bugs", "write_documentation", "perform_deployments") if row[f"task_type__{o}"]]
        return (
            "fix_bugs"
            if chosen == ["fix_bugs"]
            else "write_documentation"
            if chosen == ["write_documentation"]
            else POOLED
        )

    arms = _by_hand(frame, task)
    settings = Settings(n_resamples=50, n_permutations=50)
    row = {r.method: r for r in experiment_effect_rows(frame, {"e": "c"}, settings)}["ppi_stratified"]
    assert row.effect == pytest.approx(arms["t"].estimate - arms["c"].estimate, abs=1e-14)
    assert "pooled: perform_deployments (fewer than 30 ratings in an arm), with unknown (the smallest kept" in row.note


# ---------------------------------------------------------------- the validation scenarios (smoke)


def test_the_stratified_scenarios_are_registered_and_score_the_stratified_row():
    import polars as pl

    from pulse_pipeline.estimates.methods import Method
    from pulse_pipeline.studies.coverage import SCENARIOS, TARGETS, check_targets, summarize
    from pulse_pipeline.studies.stratified import replicate_stratified, true_effect

    assert true_effect("stratified_differ") == pytest.approx(0.5 * 0.06 + 0.3 * -0.02)  # shares x effects
    assert true_effect("stratified_same") == pytest.approx(0.03)
    assert {"stratified_differ", "stratified_same"} <= set(SCENARIOS) and {
        "stratified_differ",
        "stratified_same",
    } <= set(TARGETS)
    rows = []
    for scenario in ("stratified_differ", "stratified_same"):
        for seed in range(3):
            got = replicate_stratified(seed, scenario, n_per_arm=600)
            assert [r.method for r in got] == [
                m for m in Method if m not in (Method.NAIVE_BOOTSTRAP, Method.PPI_INSAMPLE)
            ]
            rows += [r.__dict__ for r in got]
    frame = summarize(rows)
    strat = frame.filter(pl.col("method") == "ppi_stratified")
    assert strat.height == 2 and (strat["replications"] == 3).all()
    # the targets read the frame: a made-up summary that misses each target is reported, one that meets them is not
    ok = pl.DataFrame({"scenario": ["stratified_differ"] * 2 + ["stratified_same"] * 2,
                       "method": ["ppi", "ppi_stratified"] * 2, "coverage": [0.95] * 4,
                       "mean_width": [0.10, 0.089, 0.10, 0.102]})  # fmt: skip
    assert check_targets(ok, ["stratified_differ", "stratified_same"]) == []
    bad = ok.with_columns(pl.Series("mean_width", [0.10, 0.091, 0.10, 0.1021]), pl.Series("coverage", [0.95, 0.92] * 2))
    assert len(check_targets(bad, ["stratified_differ", "stratified_same"])) == 4


def test_the_history_last_look_is_the_effects_row_with_the_same_strata():
    from datetime import date

    import polars as pl

    from pulse_pipeline.estimates.effects import Settings
    from pulse_pipeline.estimates.experiment_effects import experiment_effect_rows
    from pulse_pipeline.estimates.history import METHODS, history_rows

    frame = _frame(3).with_columns(pl.lit(date(2026, 1, 1)).alias("day"))
    settings = Settings(n_resamples=50, n_permutations=50)
    effects = {r.method: r for r in experiment_effect_rows(frame, {"e": "c"}, settings)}
    history = {r.method: r for r in history_rows(frame, {"e": "c"}, settings)}
    assert Method.PPI_STRATIFIED in METHODS
    stratified = history[Method.PPI_STRATIFIED]
    assert (stratified.effect, stratified.ci_low, stratified.ci_high) == pytest.approx(
        (effects["ppi_stratified"].effect, effects["ppi_stratified"].ci_low, effects["ppi_stratified"].ci_high),
        abs=1e-12,
    )
    assert stratified.effect != history[Method.PPI].effect  # it has strata in the history too


def test_pooled_strata_notes_when_every_stratum_is_small():
    from pulse_pipeline.estimates.effects import ArmData, pooled_strata

    def arm(name, rated_a, rated_b):
        n = rated_a + rated_b
        return ArmData(name, np.zeros(n), np.zeros(n), np.zeros(10), np.zeros((n, 0)), np.zeros((10, 0)),
                       s_labeled=np.array(["a"] * rated_a + ["b"] * rated_b, dtype=object),
                       s_unlabeled=np.array(["a"] * 5 + ["b"] * 5, dtype=object))  # fmt: skip

    (t_l, t_u), (c_l, c_u), note = pooled_strata(arm("t", 20, 25), arm("c", 40, 40))
    assert set(t_l) | set(t_u) | set(c_l) | set(c_u) == {"pooled"}
    assert note == "every stratum (a, b) has fewer than 30 ratings in an arm: pooled"
    (t_l, _), _, note = pooled_strata(arm("t", 30, 25), arm("c", 40, 40))
    # b pooled (25 < 30), the pool short of 30 in arm t: a (30, the only one kept) joins it
    assert set(t_l) == {"pooled"} and note.startswith("pooled: b (fewer than 30 ratings in an arm), with a")
    assert pooled_strata(arm("t", 30, 30), ArmData("c", np.zeros(2), np.zeros(2), np.zeros(1), np.zeros((2, 0)),
                                                   np.zeros((1, 0)))) is None  # fmt: skip
