"""Do no harm when asking (issue 40): the ask policy asks by its error model, by stratum, or uniformly, whichever
has the smaller cross-fitted variance on held-out folds, and uniformly unless a form beats uniform beyond the
folds' noise; the stratified form is exported, evaluated without PULSE and served."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime

import duckdb
import numpy as np
import polars as pl
import pytest

from pulse_pipeline.estimates.ask_policy import (
    ERROR,
    MIN_STRATUM_RATINGS,
    STRATA_FORMAT,
    STRATIFIED,
    UNIFORM,
    fit_policy,
    policy_frame,
    policy_from_json,
    policy_from_warehouse,
    policy_inputs,
    probabilities,
    stratum_features,
    write_policy,
)
from pulse_pipeline.serve.policy import loaded_policy
from pulse_pipeline.stats.allocation import ask_shares
from pulse_pipeline.warehouse import Warehouse

N, DAYS, BUDGET = 3000, 5.0, 150.0  # 600 sessions a day, 150 asks a day: q = 0.25 when asking alike


def _features(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "user_message_count": rng.poisson(4.0, N) + 1.0,
        "file_edits": rng.poisson(6.0, N).astype(float),
        "duration_seconds": rng.exponential(300.0, N),
    }


def _z(x: np.ndarray) -> np.ndarray:
    t = np.log1p(x)
    return (t - t.mean()) / t.std()


def test_an_error_model_without_signal_gives_way_to_uniform():
    """The error's size does not depend on the features: the fitted GLM's coefficients are noise, asking by them
    can only add variance; the policy asks everyone alike and its note gives the figures."""
    rng = np.random.default_rng(1)
    features = _features(rng)
    error = np.abs(rng.normal(0.0, 0.2, N))
    rated = rng.random(N) < 0.15  # ~450 ratings
    policy = fit_policy(features, rated, error[rated], DAYS, BUDGET)
    assert policy.form == UNIFORM and policy.intercept == 0.0
    assert all(t.coefficient == 0.0 for t in policy.terms)
    assert np.allclose(probabilities(policy, features), BUDGET * DAYS / N)  # 0.25 for every session
    choice = policy.choice
    assert choice["chosen"] == UNIFORM and choice["folds"] == 5 and choice["ratings"] == int(rated.sum())
    assert choice["error_upper"] >= 1.0 and choice["stratified"] is None  # no strata given
    assert policy.note.startswith("asking uniformly: no form beats uniform beyond fold noise")
    assert f"{choice['error']:.3f} x (upper {choice['error_upper']:.3f})" in policy.note
    assert json.loads(json.dumps(policy.as_json()))["form"] == UNIFORM


def test_an_error_model_with_signal_is_kept():
    """E|e| = 0.1 exp(0.8 z_messages): asking by the error model beats uniform on held-out folds, by about the
    truth's (E s)^2 / E s^2 (the variance ratio of q proportional to s, the docstring's V = (sum s)^2 / B)."""
    rng = np.random.default_rng(2)
    features = _features(rng)
    s = 0.1 * np.exp(0.8 * _z(features["user_message_count"]))
    error = rng.exponential(s)
    rated = rng.random(N) < 0.15
    policy = fit_policy(features, rated, error[rated], DAYS, BUDGET)
    assert policy.form == ERROR and policy.strata is None and not policy.note.startswith("asking")
    assert {t.feature: t.coefficient for t in policy.terms}["user_message_count"] == pytest.approx(0.8, abs=0.15)
    truth = np.mean(s) ** 2 / np.mean(s**2)  # ~0.6 (before the clip at q = 1)
    assert policy.choice["error_upper"] < 1.0 and policy.choice["error"] == pytest.approx(truth, abs=0.15)


def _strata_sessions(seed: int):
    """Three strata: 'fix' (60 %) where the model errs little, 'new' (35 %) where it errs 4 times as much, and a
    rare 'docs' (~1 %, under MIN_STRATUM_RATINGS ratings: pooled); a few sessions without a task type. The
    error's size has nothing to do with the counts."""
    rng = np.random.default_rng(seed)
    features = _features(rng)
    labels = rng.choice(np.array(["fix", "new", "docs", None], dtype=object), N, p=[0.60, 0.35, 0.01, 0.04])
    sd = np.where(labels == "new", 0.4, 0.1)
    error = np.abs(rng.normal(0.0, sd))
    rated = rng.random(N) < 0.2
    return features, labels, error, rated


def test_strata_that_differ_are_asked_by_neyman():
    features, labels, error, rated = _strata_sessions(3)
    policy = fit_policy(features, rated, error[rated], DAYS, BUDGET, strata=labels)
    assert policy.form == STRATIFIED and policy.format == STRATA_FORMAT
    assert policy.choice["stratified_upper"] < 1.0 and policy.choice["stratified"] < policy.choice["error"]
    assert policy.note.startswith("asking by stratum")
    # sigma_h: the root mean square error of the stratum's rated sessions over all rated sessions'; 'docs' (a
    # handful of ratings) pooled with the unlabelled into 'other'
    e, lab = error[rated], labels[rated]
    rms = lambda x: np.sqrt(np.mean(x**2))  # noqa: E731
    pooled = (lab != "fix") & (lab != "new")
    assert dict(policy.strata.scores) == pytest.approx(
        {"fix": rms(e[lab == "fix"]) / rms(e), "new": rms(e[lab == "new"]) / rms(e)}
    )
    other = rms(e[pooled]) / rms(e) if pooled.sum() >= MIN_STRATUM_RATINGS else 1.0
    assert policy.strata.other == pytest.approx(other)
    # the asks: q proportional to sigma_h (no answer model, no clip): each stratum's share of the asks is the
    # per-ask Neyman share of stats/allocation.py
    q = probabilities(policy, features | stratum_features(labels))
    assert q.sum() / DAYS == pytest.approx(BUDGET, rel=1e-9)
    groups = [labels == "fix", labels == "new", (labels != "fix") & (labels != "new")]
    W = np.array([g.mean() for g in groups])
    sigma = np.array([policy.strata.scores[0][1], policy.strata.scores[1][1], policy.strata.other])
    shares = np.array([q[g].sum() for g in groups]) / q.sum()
    assert shares == pytest.approx(ask_shares(W, sigma), rel=1e-9)
    assert q[labels == "new"][0] / q[labels == "fix"][0] == pytest.approx(sigma[1] / sigma[0], rel=1e-9)


_EVALUATE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import ask_policy
print(json.dumps([ask_policy.ask_probability(f) for f in json.load(sys.stdin)]))
assert not any(m.startswith("pulse_pipeline") or m in ("numpy", "sklearn") for m in sys.modules)
"""


def test_the_stratified_policy_is_exported_evaluated_without_pulse_and_served(tmp_path):
    features, labels, error, rated = _strata_sessions(4)
    asked = rated | (np.random.default_rng(5).random(N) < 0.3)
    policy = fit_policy(features, rated, error[rated], DAYS, BUDGET, asked=asked, answered=rated, strata=labels)
    assert policy.form == STRATIFIED and policy.answer is not None and policy.answer.terms
    write_policy(policy, tmp_path)
    content = json.loads((tmp_path / "ask_policy.json").read_text())
    assert content["format"] == STRATA_FORMAT and content["strata"]["column"] == "task_type"
    assert policy_from_json(content) == policy
    every = features | stratum_features(labels)
    rows = [{k: float(v[i]) for k, v in every.items() if not k.startswith("task_type") or v[i]} for i in range(300)]
    rows[0]["task_type__new"] = "yes"  # not a number: no stratum named, the pooled score
    expected = probabilities(
        policy, {k: np.array([r.get(k, 0.0) if isinstance(r.get(k, 0.0), float) else 0.0 for r in rows]) for k in every}
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", _EVALUATE, str(tmp_path)],
        input=json.dumps(rows),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert np.allclose(json.loads(done.stdout), expected, rtol=1e-12, atol=0)
    served = loaded_policy(content)
    assert served.version == policy.version
    assert np.allclose([served.probability(r) for r in rows], expected, rtol=1e-12, atol=0)
    # the file checked: strata need format /3 and /3 needs strata; scores positive
    with pytest.raises(ValueError, match="strata must be given exactly when format"):
        policy_from_json(content | {"format": "pulse-ask-policy/2"})
    with pytest.raises(ValueError, match="strata must be given exactly when format"):
        policy_from_json(content | {"strata": None})
    with pytest.raises(ValueError, match="strata.scores.new is -1.0, not positive"):
        policy_from_json(content | {"strata": content["strata"] | {"scores": {"fix": 1.0, "new": -1.0}}})
    with pytest.raises(ValueError, match="form is 'error'"):
        policy_from_json(content | {"form": ERROR})


def test_the_warehouse_policy_reads_the_strata_from_the_task_type_columns(tmp_path):
    """400 sessions over 4 days, 240 rated, task type one-hot in features.session_features (as features/wide.py
    writes it): 'fix_bugs' errs little, 'new_feature' 5 times as much, 'docs' has too few ratings (pooled), some
    sessions have none. The policy asks by stratum; its rows in estimates.ask_policy say so."""
    rng = np.random.default_rng(8)
    n = 400
    kind = rng.choice(np.array(["fix_bugs", "new_feature", "docs", "none"]), n, p=[0.5, 0.4, 0.03, 0.07])
    frame = pl.DataFrame(
        {
            "session_id": [f"s{i:03d}" for i in range(n)],
            "user_message_count": rng.integers(1, 20, n),
            "started_at": [datetime(2026, 1, 1 + i % 4, 12) for i in range(n)],
            "task_type__fix_bugs": (kind == "fix_bugs").astype(int),
            "task_type__new_feature": (kind == "new_feature").astype(int),
            "task_type__docs": (kind == "docs").astype(int),
        }
    )
    label = rng.uniform(0, 1, n)
    error = rng.normal(0, np.where(kind == "new_feature", 0.25, 0.05))
    rated = np.arange(n) < 240
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        Warehouse(con)
        con.register("f", frame.to_arrow())
        con.execute(
            "INSERT INTO features.event_features (session_id, user_message_count) SELECT session_id, "
            "user_message_count FROM f"
        )
        con.execute("INSERT INTO staging.sessions (session_id, started_at) SELECT session_id, started_at FROM f")
        con.execute(
            "CREATE TABLE features.session_features AS SELECT session_id, task_type__fix_bugs,"
            " task_type__new_feature, task_type__docs FROM f"
        )
        r = pl.DataFrame(
            {"session_id": frame["session_id"][:240], "label": label[:240], "prediction": label[:240] + error[:240]}
        )
        con.register("r", r.to_arrow())
        con.execute(
            "INSERT INTO staging.session_labels (session_id, label, scale) SELECT session_id, label, 'stars_1_5' FROM r"
        )
        con.execute("INSERT INTO modeling.predictions (session_id, prediction) SELECT session_id, prediction FROM r")
    with duckdb.connect(str(path), read_only=True) as con:
        inputs = policy_inputs(con)
        policy, _ = policy_from_warehouse(con)
    expected = np.where(np.isin(kind, ["fix_bugs", "new_feature", "docs"]), kind, None)
    assert inputs.strata.tolist() == expected[np.argsort(frame["session_id"].to_numpy())].tolist()
    assert policy.form == STRATIFIED and [h for h, _ in policy.strata.scores] == ["fix_bugs", "new_feature"]
    e = np.abs(error[rated])
    rms = lambda x: np.sqrt(np.mean(x**2))  # noqa: E731
    assert policy.strata.scores[1][1] == pytest.approx(rms(e[kind[rated] == "new_feature"]) / rms(e))
    rows = policy_frame(policy).filter(pl.col("model") == "stratum")
    assert rows["term"].to_list() == ["task_type=fix_bugs", "task_type=new_feature", "task_type=(other)"]
    assert policy_frame(policy)["form"].unique().to_list() == [STRATIFIED]
