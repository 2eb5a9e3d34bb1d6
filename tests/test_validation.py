"""Smoke test of the coverage validation: shape, ranges, determinism, and in-sample PPI's too-narrow interval."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pulse_pipeline.studies.coverage import (
    COLUMNS,
    METHODS,
    SESSION_SUFFIX,
    USER_PARAMS,
    check_targets,
    replicate,
    replicate_user_assigned,
    truth,
    validate,
)

SCENARIOS = ("random", "self_selected")


@pytest.fixture(scope="module")
def frame() -> pl.DataFrame:
    return validate(20, SCENARIOS, seed=7, workers=1, n_per_arm=500)


def test_frame_shape_and_columns(frame: pl.DataFrame) -> None:
    assert frame.columns == list(COLUMNS)
    assert frame.height == len(SCENARIOS) * len(METHODS)
    assert set(frame["method"]) == set(METHODS)
    assert frame["scenario"].to_list() == [s for s in SCENARIOS for _ in METHODS]
    assert frame["replications"].to_list() == [20] * frame.height


def test_values_in_range(frame: pl.DataFrame) -> None:
    for column in ("coverage", "share_flagged"):
        assert frame[column].is_between(0.0, 1.0).all(), column
    assert (frame["mean_width"] > 0).all()
    # predictions that saw the labels: the "seen the labels" diagnostic fires on ppi_insample more than on PPI
    for scenario in SCENARIOS:
        rows = frame.filter(pl.col("scenario") == scenario)
        flagged = dict(zip(rows["method"], rows["share_flagged"], strict=True))
        assert flagged["ppi_insample"] > 0 and flagged["ppi_insample"] >= flagged["crossppi"], scenario


def test_deterministic_given_seed(frame: pl.DataFrame) -> None:
    # same seed, other worker count (spawned processes): the same table
    again = validate(20, SCENARIOS, seed=7, workers=2, n_per_arm=500)
    assert frame.equals(again)


def test_insample_interval_much_narrower(frame: pl.DataFrame) -> None:
    for scenario in SCENARIOS:
        rows = frame.filter(pl.col("scenario") == scenario)
        width = dict(zip(rows["method"], rows["mean_width"], strict=True))
        # a model scored on its own training labels looks better than it is: its PPI interval is the narrowest
        # (by 12-18 % here; the early-stopped GBM overfits far less than the paper's 400-tree forest)
        assert width["ppi_insample"] < min(width["ppi"], width["crossppi"]), scenario


def test_replicate_rows() -> None:
    rows = replicate(3, "random", n_per_arm=300)
    assert [r.method for r in rows] == list(METHODS)
    assert all(r.scenario == "random" for r in rows)


def test_check_targets_reports_missing_rows() -> None:
    empty = pl.DataFrame(schema={c: pl.Float64 for c in COLUMNS} | {"scenario": pl.Utf8, "method": pl.Utf8})
    assert len(check_targets(empty)) >= 7
    assert len(check_targets(empty, ["user_assigned"])) == 6  # 4 clustered methods, 2 session-level shortfalls


def test_user_assigned_smoke() -> None:
    """Few replications of user_assigned: every method clustered and unclustered, scored against the truth of
    the user-randomized generator; the clustered intervals are wider than the session-level ones."""
    frame = validate(4, ["user_assigned"], seed=3, workers=1)
    session = [m + SESSION_SUFFIX for m in METHODS if m != "ppi_insample"]
    assert frame["method"].to_list() == [*METHODS, *session]
    width = dict(zip(frame["method"], frame["mean_width"], strict=True))
    for method in ("naive_welch", "ppi", "crossppi", "aipw"):
        # strong persistent user effects, ~1.3 ratings per user per arm on average, heavy users: design effect > 1.3
        assert width[method] > 1.15 * width[method + SESSION_SUFFIX], method
    rows = replicate_user_assigned(5)
    theta = truth(USER_PARAMS)
    assert -0.09 < theta < -0.05  # gpt-5's effect, ~-0.07 normalized, unchanged by who is randomized
    welch = next(r for r in rows if r.method == "naive_welch")
    same = next(r for r in rows if r.method == "naive_welch" + SESSION_SUFFIX)
    assert welch.error == same.error and welch.width > same.width  # one estimate, two intervals


def test_pulse_validate_writes_the_table_and_reports_unmet_targets(pulse_home, capsys) -> None:
    from pulse_pipeline.cli import main

    # three replications cannot meet coverage targets: the command says which and exits 1
    assert main(["validate", "--replications", "3", "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert "targets NOT met" in out and "coverage" in out.split("targets NOT met")[1]
    import duckdb

    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        rows = con.execute("SELECT scenario, method, replications FROM estimates.coverage_validation").fetchall()
    # every scenario by default. random and self_selected: every method; user_assigned: every method clustered and,
    # but ppi_insample, unclustered; peeking: naive and PPI, each fixed, as a sequence and at the last look only;
    # active, active_varying and active_answer: uniform, error-only and active asking; allocation_neyman: PPI++,
    # stratified asking alike, stratified by Neyman; guardrail_*: plain and CUPED by what each varies
    # (studies/guardrails.py)
    per_scenario = {scenario: sum(1 for r in rows if r[0] == scenario) for scenario in {r[0] for r in rows}}
    assert per_scenario == {
        "random": len(METHODS),
        "self_selected": len(METHODS),
        "user_assigned": 2 * len(METHODS) - 1,
        "user_features": len(METHODS),
        "peeking": 6,
        "active": 3,
        "active_varying": 3,
        "active_answer": 3,
        "drift": 6,  # the agreement watch: the check, then each of its five measures
        "drift_stationary": 6,
        "stratified_differ": len(METHODS) - 2,  # compare without resampling, no in-sample model: no bootstrap,
        "stratified_same": len(METHODS) - 2,  # no ppi_insample
        "allocation_neyman": 3,
        "guardrail_users": 5,
        "guardrail_cuped": 6,
        "guardrail_margin": 10,
    }
    assert {r[2] for r in rows} == {3}
    # --scenarios picks some; an unknown name is refused before anything runs
    assert main(["validate", "--replications", "2", "--workers", "1", "--scenarios", "peeking"]) in (0, 1)
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        picked = con.execute("SELECT DISTINCT scenario, replications FROM estimates.coverage_validation").fetchall()
    assert picked == [("peeking", 2)]
    assert main(["validate", "--scenarios", "nope"]) == 2


def test_self_selected_arms_keep_their_propensity_model() -> None:
    """AIPW corrects for who rates only if it still weighs by the propensity model where rating follows the
    features: in ``self_selected`` (rating follows the user-message count) every arm's recalibrated model must keep
    a slope (``stats.aipw.chosen_propensity``), as it did in each of the 500 replications of
    ``pulse validate`` (coverage in ``studies/coverage.py``'s docstring)."""
    from pulse_pipeline.stats.aipw import crossfit_propensity_fit
    from pulse_pipeline.studies.scenario import EXPERIMENT, PARAMS
    from pulse_pipeline.synth.model import feature_matrix, simulate_sessions

    for seed in range(3):
        table = simulate_sessions(6 * 3000, seed=seed, scenario="self_selected", rated_fraction=0.05, params=PARAMS)
        in_experiment = np.asarray(table.experiment) == EXPERIMENT
        for variant in set(np.asarray(table.variant)[in_experiment]):
            arm = in_experiment & (np.asarray(table.variant) == variant)
            fit = crossfit_propensity_fit(feature_matrix(table, arm), np.asarray(table.rated, dtype=bool)[arm])
            assert fit.model_helps, (seed, variant, fit.calibration)


def test_validate_help_names_every_scenario():
    from pulse_pipeline.cli import build_parser
    from pulse_pipeline.studies import coverage

    validate = build_parser()._subparsers._group_actions[0].choices["validate"]
    (scenarios,) = [a for a in validate._actions if a.dest == "scenarios"]
    named = {name.strip() for name in scenarios.help.removesuffix(" (default: all)").split(":", 1)[1].split(",")}
    assert named == set(coverage.SCENARIOS)
