"""The ask policy: the budget's multiplier by hand, the error model against a known truth, the exported file
evaluated without PULSE, and the known-probability propensity AIPW uses."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import datetime

import duckdb
import numpy as np
import polars as pl
import pytest

from pulse_pipeline.cli import main
from pulse_pipeline.estimates.ask_policy import (
    MIN_RATINGS,
    fit_error_model,
    fit_policy,
    multiplier_for_budget,
    policy_frame,
    policy_from_warehouse,
    probabilities,
    write_policy,
)
from pulse_pipeline.stats.asking import known_ask_propensity
from pulse_pipeline.warehouse import Warehouse


def test_multiplier_meets_the_budget_worked_by_hand():
    s = np.array([1.0, 2.0, 3.0, 4.0])
    # no clipping: 0.1 <= m s <= 1, sum = 10 m = 1.5 -> m = 0.15
    assert multiplier_for_budget(s, 1.5, 0.1) == pytest.approx(0.15, rel=1e-9)
    # two capped at 1: m + 2m + 1 + 1 = 3.2 -> m = 0.4 (3m = 1.2 >= 1, 2m = 0.8 < 1)
    assert multiplier_for_budget(s, 3.2, 0.1) == pytest.approx(0.4, rel=1e-9)
    # the floor alone asks 0.4 > 0.3: everyone at the floor
    assert multiplier_for_budget(s, 0.3, 0.1) == 0.0
    # weights: a budget per day over 2 days: sum (m s) / 2 = 0.75 -> m = 0.15
    assert multiplier_for_budget(s, 0.75, 0.1, np.full(4, 0.5)) == pytest.approx(0.15, rel=1e-9)


def _sessions(n: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Counts and |error| with E|e| = exp(-2 + 0.5 z_messages - 0.3 z_edits) (z of log1p counts)."""
    rng = np.random.default_rng(seed)
    features = {
        "user_message_count": rng.poisson(4.0, n).astype(float) + 1,
        "file_edits": rng.poisson(6.0, n).astype(float),
        "duration_seconds": rng.exponential(300.0, n),
    }

    def z(x: np.ndarray) -> np.ndarray:
        t = np.log1p(x)
        return (t - t.mean()) / t.std()

    mean_error = np.exp(-2.0 + 0.5 * z(features["user_message_count"]) - 0.3 * z(features["file_edits"]))
    return features, rng.exponential(mean_error)


def test_error_model_recovers_the_known_log_linear_truth():
    features, error = _sessions(40_000, seed=1)
    intercept, terms, note = fit_error_model(features, error)
    assert note is None
    by_name = {t.feature: t for t in terms}
    assert all(t.transform == "log1p" for t in terms)
    assert intercept == pytest.approx(-2.0, abs=0.03)
    assert by_name["user_message_count"].coefficient == pytest.approx(0.5, abs=0.03)
    assert by_name["file_edits"].coefficient == pytest.approx(-0.3, abs=0.03)
    assert by_name["duration_seconds"].coefficient == pytest.approx(0.0, abs=0.03)


def test_too_few_ratings_ask_uniformly():
    features, error = _sessions(200, seed=2)
    rated = np.zeros(200, dtype=bool)
    rated[: MIN_RATINGS - 1] = True
    policy = fit_policy(features, rated, error[rated], days=2.0, budget_per_day=20.0)
    assert all(t.coefficient == 0.0 for t in policy.terms)
    assert "asking uniformly" in policy.note
    assert np.allclose(probabilities(policy, features), 40.0 / 200)  # 20 a day over 2 days of 200 sessions


_EVALUATE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import ask_policy
print(json.dumps([ask_policy.ask_probability(f) for f in json.load(sys.stdin)]))
assert not any(m.startswith("pulse_pipeline") or m in ("numpy", "sklearn") for m in sys.modules)
"""


def test_policy_round_trips_through_its_file_without_pulse(tmp_path):
    features, error = _sessions(3000, seed=3)
    rated = np.random.default_rng(4).random(3000) < 0.1
    policy = fit_policy(features, rated, error[rated], days=3.0, budget_per_day=300.0)
    assert policy.note is None
    q = probabilities(policy, features)
    assert q.sum() / 3.0 == pytest.approx(300.0, rel=1e-9)  # expected asks per day = the budget
    assert q.min() >= 0.01 and q.max() <= 1.0 and q.std() > 0.02

    out = tmp_path / "policy"
    write_policy(policy, out)
    rows = [{k: float(v[i]) for k, v in features.items()} for i in range(200)]
    rows[0]["file_edits"] = None  # missing values count as the mean: z = 0
    rows[1]["duration_seconds"] = "n/a"
    del rows[2]["user_message_count"]
    expected = probabilities(
        policy,
        {k: np.array([np.nan if not isinstance(r.get(k), float) else r[k] for r in rows]) for k in features},
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", _EVALUATE, str(out)],
        input=json.dumps(rows),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert np.allclose(json.loads(done.stdout), expected, rtol=1e-12, atol=0)
    assert json.loads((out / "ask_policy.json").read_text())["multiplier"] == policy.multiplier


def test_known_ask_propensity():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 2))
    q = rng.uniform(0.05, 1.0, 400)
    asked = rng.random(400) < q
    q_logged = np.where(asked, q, np.nan)
    # everyone asked answers: P(rated | x) is exactly the known q
    assert np.array_equal(known_ask_propensity(X, q_logged, asked, asked)[asked], q[asked])
    # half answer at random and the features say nothing (all 0): each asked session gets q times the answer rate
    # of the other folds' asked sessions (a logistic regression with an intercept alone), near the overall rate
    answered = asked & (rng.random(400) < 0.5)
    pi = known_ask_propensity(np.zeros((400, 1)), q_logged, asked, answered)
    assert np.allclose(pi[asked] / q[asked], answered[asked].mean(), atol=0.03)
    assert np.allclose(pi[~asked], 0.0 * pi[~asked], equal_nan=True)  # never asked: q is NaN, so is the value
    with pytest.raises(ValueError, match="never asked"):
        known_ask_propensity(X, q_logged, asked, answered | ~asked)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        known_ask_propensity(X, np.where(asked, 0.0, np.nan), asked, answered)


def _warehouse_with_sessions(path, asks: int = 0) -> None:
    """200 sessions over 4 days, 60 rated with a prediction whose error grows with the message count."""
    rng = np.random.default_rng(6)
    n = 200
    messages = rng.integers(1, 20, n)
    frame = pl.DataFrame(
        {
            "session_id": [f"s{i:03d}" for i in range(n)],
            "user_message_count": messages,
            "started_at": [datetime(2026, 1, 1 + i % 4, 12) for i in range(n)],
        }
    )
    label = rng.uniform(0, 1, n)
    error = rng.normal(0, 0.02 * messages)
    with duckdb.connect(str(path)) as con:
        Warehouse(con)
        con.register("f", frame.to_arrow())
        con.execute(
            "INSERT INTO features.event_features (session_id, user_message_count) SELECT session_id, "
            "user_message_count FROM f"
        )
        con.execute("INSERT INTO staging.sessions (session_id, started_at) SELECT session_id, started_at FROM f")
        rated = pl.DataFrame(
            {"session_id": frame["session_id"][:60], "label": label[:60], "prediction": label[:60] + error[:60]}
        )
        con.register("r", rated.to_arrow())
        con.execute(
            "INSERT INTO staging.session_labels (session_id, label, scale) SELECT session_id, label, 'stars_1_5' FROM r"
        )
        con.execute("INSERT INTO modeling.predictions (session_id, prediction) SELECT session_id, prediction FROM r")
        if asks:
            con.execute(
                f"INSERT INTO staging.session_asks (session_id, n_asks) SELECT session_id, 1 FROM f LIMIT {asks}"
            )


def test_policy_from_the_warehouse_and_its_default_budget(tmp_path):
    path = tmp_path / "w.duckdb"
    _warehouse_with_sessions(path)
    with duckdb.connect(str(path), read_only=True) as con:
        policy, why_not = policy_from_warehouse(con)
    assert why_not is None and policy.fitted_on_ratings == 60
    # 200 sessions over 4 days = 50 a day; no asks logged: half of them, 25 asks a day
    assert policy.sessions_per_day == 50.0 and policy.budget_per_day == 25.0
    assert policy.expected_asks_per_day == pytest.approx(25.0, rel=1e-9)
    by_name = {t.feature: t for t in policy.terms}
    assert by_name["user_message_count"].coefficient > 0.3  # the error grows with the message count
    assert "n_segments" not in by_name  # a column missing for every session is left out
    assert policy_frame(policy)["term"].to_list() == ["(intercept)", "user_message_count"]

    _warehouse_with_sessions(path := tmp_path / "asked.duckdb", asks=40)
    with duckdb.connect(str(path), read_only=True) as con:
        policy, _ = policy_from_warehouse(con)
    assert policy.budget_per_day == 10.0  # 40 asked sessions over 4 days


def test_pulse_ask_writes_the_files(pulse_home, capsys):
    _warehouse_with_sessions(pulse_home.warehouse)
    out = pulse_home.root / "exported"
    assert main(["ask", "--budget", "20", "--out", str(out)]) == 0
    policy = json.loads((out / "ask_policy.json").read_text())
    assert policy["budget_per_day"] == 20.0 and policy["expected_asks_per_day"] == pytest.approx(20.0)
    assert (out / "ask_policy.py").is_file() and "wrote" in capsys.readouterr().out
    assert main(["ask", "--floor", "0"]) == 2


def test_compare_uses_the_known_ask_probability_in_aipw():
    """``effects.compare``: when every rated session logged its ask probability, the aipw row's arm means are
    ``aipw_mean`` with propensity = ``known_ask_propensity`` and no clipping below its own minimum, and say so;
    without the probabilities the propensity is estimated whole, as before."""
    from pulse_pipeline.estimates.effects import ArmData, Settings, compare
    from pulse_pipeline.stats.aipw import aipw_mean
    from pulse_pipeline.stats.ppi import difference

    rng = np.random.default_rng(5)

    def arm(name: str, shift: float) -> ArmData:
        n_all = 400
        X = rng.normal(size=(n_all, 2))
        q = np.clip(0.1 + 0.3 * (X[:, 0] > 0), 0.01, 1)  # the policy asked more where x0 > 0
        asked = rng.random(n_all) < q
        rated = asked & (rng.random(n_all) < 0.7)
        y = np.clip(0.5 + shift + 0.1 * X[:, 0] + rng.normal(scale=0.1, size=n_all), 0, 1)
        f = 0.5 + 0.08 * X[:, 0]
        q_logged = np.where(asked, q, np.nan)
        return ArmData(
            name,
            y[rated],
            f[rated],
            f[~rated],
            X[rated],
            X[~rated],
            q_labeled=q_logged[rated],
            q_unlabeled=q_logged[~rated],
        )

    treat, control = arm("t", 0.05), arm("c", 0.0)
    s = Settings(n_resamples=50, n_permutations=50)
    rows = {r.method: r for r in compare(treat, control, s)[0]}

    def by_hand(a: ArmData):
        X = np.vstack([a.X_labeled, a.X_unlabeled])
        q = np.r_[a.q_labeled, a.q_unlabeled]
        rated = np.r_[np.ones(len(a.y), bool), np.zeros(len(a.f_unlabeled), bool)]
        p = known_ask_propensity(X, q, np.isfinite(q), rated, seed=s.seed + 42)
        return aipw_mean(a.y, np.r_[a.f_labeled, a.f_unlabeled], rated, p, clip=(p[rated].min(), 1.0))

    expected = difference(by_hand(treat), by_hand(control))
    assert rows["aipw"].effect == pytest.approx(expected.estimate, rel=1e-12)
    assert rows["aipw"].se == pytest.approx(expected.se, rel=1e-12)
    assert "known ask probability" in rows["aipw"].note
    unlogged = (replace(a, q_labeled=None, q_unlabeled=None) for a in (treat, control))
    plain = {r.method: r for r in compare(*unlogged, s)[0]}
    assert plain["aipw"].note is None or "known ask probability" not in plain["aipw"].note
    assert plain["aipw"].effect != rows["aipw"].effect
