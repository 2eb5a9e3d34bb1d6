"""Experiments, comparisons and the honesty diagnostics of the estimates stage."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest

from pulse_pipeline.estimates.effects import NOT_REPRESENTATIVE, SEEN_LABELS, ArmData, Settings, compare
from pulse_pipeline.estimates.experiments import experiments, read_controls
from pulse_pipeline.runs import ingest
from pulse_pipeline.synth import write_corpus

from .test_asset_metadata import assert_headline_metadata

FAST = Settings(n_resamples=2_000, n_permutations=2_000)


def test_controls_come_from_the_file_else_the_first_arm_alphabetically(tmp_path):
    path = tmp_path / "experiments.toml"
    path.write_text('[experiments.a]\ncontrol = "z-arm"\n[experiments.b]\ncontrol = "gone"\n')
    found = {e.name: e for e in experiments({"a": ["m", "z-arm"], "b": ["y", "x"], "c": ["q"]}, read_controls(path))}
    assert (found["a"].control, found["a"].treatments, found["a"].note) == ("z-arm", ("m",), None)
    assert (found["b"].control, found["b"].treatments) == ("x", ("y",))
    assert "'gone' has no sessions" in found["b"].note
    assert (found["c"].control, found["c"].treatments) == ("q", ())
    assert read_controls(tmp_path / "missing.toml") == {}


def _arm(name, rng, n, N, shift=0.0, insample=False):
    """Labels y = s + noise on [0, 1]-ish scale; predictions see s only (as a cross-fit model would)."""
    s = rng.normal(0.7 + shift, 0.1, n + N)
    y = s[:n] + rng.normal(0, 0.15, n)
    X = s.reshape(-1, 1)
    return ArmData(
        name,
        y,
        s[:n],
        s[n:],
        X[:n],
        X[n:],
        f_insample_labeled=y if insample else None,  # a model that memorized its labels
        f_insample_unlabeled=s[n:] if insample else None,
    )


def test_random_rating_gives_valid_unflagged_rows_and_insample_is_flagged():
    rng = np.random.default_rng(3)
    treat, control = _arm("t", rng, 300, 6000, 0.05, True), _arm("c", rng, 300, 6000, 0.0, True)
    rows, diag = compare(treat, control, FAST)
    by = {r.method: r for r in rows}
    assert set(by) == {"naive_welch", "naive_bootstrap", "ppi", "crossppi", "aipw", "ppi_stratified", "ppi_insample"}
    # arms without strata: the stratified row is PPI++'s, and says so
    strat, ppi = by["ppi_stratified"], by["ppi"]
    assert (strat.effect, strat.se, strat.ci_low, strat.ci_high) == (ppi.effect, ppi.se, ppi.ci_low, ppi.ci_high)
    assert (strat.lambda_treatment, strat.flags, strat.valid) == (ppi.lambda_treatment, ppi.flags, ppi.valid)
    assert "no strata" in strat.note
    assert 0.4 < diag["oof_rho"] < 0.8 and diag["auc"] < 0.6  # rated at random: nothing tells them apart
    for m in ("ppi", "crossppi", "aipw"):
        assert by[m].valid and by[m].flags is None
        assert by[m].ci_low < 0.05 < by[m].ci_high
    assert by["ppi"].width_vs_naive >= diag["best_width_theory"] - FAST.tolerance
    # the memorizing model: an interval far narrower than theory allows, flagged and never valid
    assert not by["ppi_insample"].valid and SEEN_LABELS in by["ppi_insample"].flags
    assert by["naive_welch"].p_value == by["naive_bootstrap"].p_value  # one permutation test for both rows


def test_rated_sessions_that_differ_are_flagged_for_ppi():
    rng = np.random.default_rng(4)
    arms = []
    for name in ("t", "c"):
        s = rng.normal(0.7, 0.1, 4000)
        rated = rng.random(4000) < 1 / (1 + np.exp(-(s - 0.8) * 40))  # high-s sessions rate far more often
        y = s + rng.normal(0, 0.1, 4000)
        X = s.reshape(-1, 1)
        arms.append(ArmData(name, y[rated], s[rated], s[~rated], X[rated], X[~rated]))
    rows, diag = compare(*arms, FAST)
    assert diag["auc"] > 0.6
    flagged = {r.method for r in rows if r.flags and NOT_REPRESENTATIVE in r.flags}
    assert flagged == {"ppi", "crossppi", "ppi_stratified"}


def test_an_arm_with_one_rating_gives_rows_with_the_reason():
    rng = np.random.default_rng(5)
    treat = _arm("t", rng, 1, 50)
    rows, _ = compare(treat, _arm("c", rng, 40, 50), FAST)
    assert all(math.isnan(r.effect) and not r.valid for r in rows)
    assert all("arm t has fewer than 2 ratings" in r.note for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize("single_arm", [False, True])
def test_experiment_effects_through_the_pipeline(pulse_home, tmp_path, monkeypatch, single_arm):
    monkeypatch.setenv("PULSE_CV_SEEDS", "2")
    monkeypatch.setenv("PULSE_MODEL_FAMILIES", "lightgbm")
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 1500, seed=12)
    if single_arm:  # move every planning session to one arm: a single-arm experiment
        text = (corpus / "assignments.csv").read_text().replace(",planning,show-plan,", ",planning,no-plan,")
        (corpus / "assignments.csv").write_text(text)
    ingest(pulse_home, corpus, say=lambda _: None)
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        rows = con.execute("""SELECT experiment, treatment, method, valid, note FROM estimates.experiment_effects
                              ORDER BY ALL""").fetchall()
        # the tables around the estimate say the same of a single-arm experiment, each in one row
        around = {
            t: con.execute(f"SELECT {who}, note FROM estimates.{t} WHERE experiment = 'planning'").fetchall()
            for t, who in (
                ("feature_comparisons", "treatment"),
                ("segment_effects", "treatment"),
                ("power", "treatment"),
                ("srm_check", "NULL"),  # one row per arm: the single arm
            )
        }
    comparisons = {(e, t) for e, t, *_ in rows}
    expected = {("condenser", "max-step-60"), ("condenser", "max-step-80"), ("llm-backbone", "gpt-5")}
    expected |= {("planning", None)} if single_arm else {("planning", "show-plan")}
    assert comparisons == expected
    if single_arm:
        [(_, _, method, valid, note)] = [r for r in rows if r[0] == "planning"]
        assert (method, valid) == ("none", False) and "single-arm experiment" in note
        for t, found in around.items():
            assert len(found) == 1 and found[0][0] is None and "single-arm experiment" in found[0][1], t
    methods = {m for e, t, m, *_ in rows if t == "gpt-5"}
    assert methods == {"naive_welch", "naive_bootstrap", "ppi", "crossppi", "aipw", "ppi_stratified", "ppi_insample"}
    assert_headline_metadata(pulse_home)  # the figures the UI plots equal these rows


def test_the_best_width_follows_each_arms_own_correlation():
    """One arm's predictions track its ratings closely (ρ ≈ 0.95), the other's carry nothing (ρ ≈ 0): PPI++ can
    shrink only the first arm's variance. The best width is then √((v_t·(1 − ρ_t²·N/(n+N)) + v_c) / (v_t + v_c)),
    worked out here from the arms' numbers; one ρ pooled over both arms put the line elsewhere, and PPI++'s
    width (the optimal λ reaches the bound) sat off it."""
    rng = np.random.default_rng(11)
    n, N = 400, 4000
    s_t = rng.normal(0.7, 0.1, n + N)
    y_t = s_t[:n] + rng.normal(0, 0.03, n)
    y_c = rng.normal(0.7, 0.1, n)
    f_c = rng.normal(0.7, 0.1, n + N)  # predictions unrelated to the ratings
    treat = ArmData("t", y_t, s_t[:n], s_t[n:], s_t[:n].reshape(-1, 1), s_t[n:].reshape(-1, 1))
    control = ArmData("c", y_c, f_c[:n], f_c[n:], f_c[:n].reshape(-1, 1), f_c[n:].reshape(-1, 1))
    rows, diag = compare(treat, control, FAST, resampling=False, diagnostics=False)
    rho_t, rho_c = np.corrcoef(y_t, s_t[:n])[0, 1], np.corrcoef(y_c, f_c[:n])[0, 1]
    gained = y_t.var() / n * (1 - rho_t**2 * N / (n + N)) + y_c.var() / n * (1 - rho_c**2 * N / (n + N))
    expected = math.sqrt(gained / (y_t.var(ddof=1) / n + y_c.var(ddof=1) / n))
    assert diag["best_width_theory"] == pytest.approx(expected, rel=1e-9)
    ppi = next(r for r in rows if r.method == "ppi")
    assert ppi.width_vs_naive == pytest.approx(expected, abs=0.01)
    assert ppi.flags is None
