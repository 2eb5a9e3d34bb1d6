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
    ANSWER_CLIP,
    MIN_RATINGS,
    answer_probability,
    fit_answer_model,
    fit_error_model,
    fit_policy,
    multiplier_for_budget,
    policy_digest,
    policy_frame,
    policy_from_json,
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


def _z(x: np.ndarray) -> np.ndarray:
    """z of log1p(x) over these sessions (the models' standardization)."""
    t = np.log1p(x)
    return (t - t.mean()) / t.std()


def _answers(features: dict[str, np.ndarray], seed: int, share_asked: float = 0.5):
    """(asked, answered, a): asked at random; answered with the known a = expit(-0.3 + 0.9 z_messages - 0.4 z_edits),
    z clipped to +-3 as the answer model clips it (z over every session: asked at random, the asked sessions' z is
    the same up to sampling)."""
    rng = np.random.default_rng(seed)
    n = len(features["user_message_count"])
    clip = lambda z: np.clip(z, -ANSWER_CLIP, ANSWER_CLIP)  # noqa: E731
    eta = -0.3 + 0.9 * clip(_z(features["user_message_count"])) - 0.4 * clip(_z(features["file_edits"]))
    a = 1 / (1 + np.exp(-eta))
    asked = rng.random(n) < share_asked
    return asked, asked & (rng.random(n) < a), a


def test_answer_model_recovers_the_known_logistic_truth():
    features, _ = _sessions(40_000, seed=11)
    asked, answered, _ = _answers(features, seed=12, share_asked=1.0)
    model, note = fit_answer_model(features, answered)
    assert note is None and model.fitted_on_asks == 40_000
    by_name = {t.feature: t for t in model.terms}
    assert model.intercept == pytest.approx(-0.3, abs=0.04)
    assert by_name["user_message_count"].coefficient == pytest.approx(0.9, abs=0.04)
    assert by_name["file_edits"].coefficient == pytest.approx(-0.4, abs=0.04)
    assert by_name["duration_seconds"].coefficient == pytest.approx(0.0, abs=0.04)
    # too few asks, or no answer at all: a constant rate, said in the note; no asks: unknown
    few, why = fit_answer_model({k: v[:20] for k, v in features.items()}, answered[:20])
    assert few.terms == () and "20 asked sessions" in why
    none, why = fit_answer_model(features, np.zeros(40_000, dtype=bool))
    assert none.terms == () and "no asked session answered" in why
    assert answer_probability(features, none) == pytest.approx(np.full(40_000, 0.01))  # the floor
    assert fit_answer_model({k: v[:0] for k, v in features.items()}, answered[:0]) == (None, None)


def test_the_policy_asks_in_proportion_to_error_over_root_answer_rate():
    """The error is the same everywhere and the answer rate varies (``_answers``): at a fixed budget of asks the
    AIPW residual variance sum s^2 / (q a) is smallest for q proportional to 1 / sqrt(a) (the module docstring's
    derivation), where it is (sum a^-1/2)^2 / B against (sum 1/a) / (B / n) for a policy blind to a (uniform here).
    The policy before the answer model was blind to a: its q was flat, its variance ratio 1."""
    n = 20_000
    rng = np.random.default_rng(13)
    features, _ = _sessions(n, seed=14)
    error = rng.exponential(0.1, n)  # E|e| = 0.1 for every session: the error model is flat
    asked, answered, a = _answers(features, seed=15)
    rated = answered & (rng.random(n) < 0.5)
    policy = fit_policy(features, rated, error[rated], days=10.0, budget_per_day=300.0, asked=asked, answered=answered)
    q = probabilities(policy, features)
    assert q.sum() / 10.0 == pytest.approx(300.0, rel=1e-9) and q.min() > 0.01 and q.max() < 1  # no clipping
    # q sqrt(a) is the same for every session (up to the fitted models' noise)
    scaled = q * np.sqrt(a)
    assert np.quantile(scaled, [0.01, 0.99]) / scaled.mean() == pytest.approx([1.0, 1.0], abs=0.08)
    assert policy.expected_ratings_per_day == pytest.approx(float(q @ a) / 10.0, rel=0.02)
    # the variance the design controls, against the policy blind to a at the same asks: as the truth says
    ratio = np.sum(1 / (q * a)) / np.sum(1 / ((3000 / n) * a))
    assert ratio == pytest.approx(np.mean(a**-0.5) ** 2 / np.mean(1 / a), abs=0.005)
    assert ratio < 0.95


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
    asked, answered, _ = _answers(features, seed=4)
    rated = answered & (np.random.default_rng(4).random(3000) < 0.2)
    policy = fit_policy(features, rated, error[rated], days=3.0, budget_per_day=300.0, asked=asked, answered=answered)
    assert policy.note is None and len(policy.answer.terms) == 3
    q = probabilities(policy, features)
    assert q.sum() / 3.0 == pytest.approx(300.0, rel=1e-9)  # expected asks per day = the budget
    assert q.min() >= 0.01 and q.max() <= 1.0 and q.std() > 0.02

    out = tmp_path / "policy"
    write_policy(policy, out)
    rows = [{k: float(v[i]) for k, v in features.items()} for i in range(200)]
    rows[0]["file_edits"] = None  # missing values count as the mean: z = 0
    rows[1]["duration_seconds"] = "n/a"
    del rows[2]["user_message_count"]
    rows[3]["user_message_count"] = 1e6  # far out: the answer model's z is clipped at 3 sds
    rows[4]["file_edits"] = -5.0  # a negative count counts as 0 (log1p of max(x, 0))
    rows[5]["user_message_count"] = float("inf")  # not finite: the mean
    expected = probabilities(
        policy,
        {k: np.array([r[k] if isinstance(r.get(k), float) else np.nan for r in rows]) for k in features},
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
    exported = json.loads((out / "ask_policy.json").read_text())
    assert exported["multiplier"] == policy.multiplier and exported["format"] == "pulse-ask-policy/2"
    assert exported["answer_model"]["terms"][0]["feature"] == "user_message_count"


def test_policy_version_is_a_digest_of_the_file_stable_across_exports(tmp_path):
    features, error = _sessions(2000, seed=21)
    asked, answered, _ = _answers(features, seed=22)
    rated = answered.copy()

    def fit(budget: float):
        return fit_policy(features, rated, error[rated], 2.0, budget, asked=asked, answered=answered)

    policy = fit(100.0)
    json_path, _ = write_policy(policy, tmp_path)
    first = json_path.read_bytes()
    inode = json_path.stat().st_ino
    written = json.loads(first)
    # the version is the SHA-256 of every other field, keys sorted, no spaces: worked out here from the file itself
    rest = {k: v for k, v in written.items() if k != "policy_version"}
    canonical = json.dumps(rest, sort_keys=True, separators=(",", ":"))
    assert written["policy_version"] == __import__("hashlib").sha256(canonical.encode()).hexdigest()[:16]
    assert policy.version == written["policy_version"] == policy_digest(written)
    assert list(written)[:2] == ["format", "policy_version"]
    # the same policy fit and exported again: the same bytes, the same version; the file replaced by a rename
    write_policy(fit(100.0), tmp_path)
    assert json_path.read_bytes() == first and json_path.stat().st_ino != inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ask_policy.json", "ask_policy.py"]  # no temporary left
    # read back: the same policy and version; another budget: another version
    again = policy_from_json(written)
    assert again == policy and again.version == policy.version
    assert fit(120.0).version != policy.version
    with pytest.raises(ValueError, match="answer_model.terms\\[0\\].sd"):
        policy_from_json(
            written
            | {
                "answer_model": written["answer_model"]
                | {"terms": [{"feature": "x", "transform": "log1p", "mean": 0, "sd": 0, "coefficient": 1}]}
            }
        )
    with pytest.raises(ValueError, match="format"):
        policy_from_json(written | {"format": "pulse-ask-policy/9"})


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
    # no asks logged: the answer rate is unknown, no answer model, the error model alone
    assert policy.answer is None and "no asks logged" in policy.note and policy.expected_ratings_per_day is None

    # the first 120 sessions asked, of which the first 60 answered (rated): the answer model is fit on those 120
    _warehouse_with_sessions(path := tmp_path / "asked.duckdb", asks=120)
    with duckdb.connect(str(path), read_only=True) as con:
        policy, _ = policy_from_warehouse(con)
    assert policy.budget_per_day == 30.0  # 120 asked sessions over 4 days
    assert policy.answer.fitted_on_asks == 120 and [t.feature for t in policy.answer.terms] == ["user_message_count"]
    frame = policy_frame(policy)
    assert frame["model"].to_list() == ["error", "error", "answer", "answer"]
    assert frame["policy_version"].unique().to_list() == [policy.version]
    assert frame["fitted_on_asks"].unique().to_list() == [120]
    # 60 answered of 120 asked, the features saying little: about half the asks a day become ratings
    assert 0.3 * 30 < policy.expected_ratings_per_day < 0.7 * 30


def test_pulse_ask_writes_the_files(pulse_home, capsys, monkeypatch):
    _warehouse_with_sessions(pulse_home.warehouse)
    out = pulse_home.root / "exported"
    monkeypatch.setenv("PULSE_ASK_BUDGET", "15")
    assert main(["ask", "--budget", "20", "--out", str(out)]) == 0  # --budget wins over PULSE_ASK_BUDGET
    policy = json.loads((out / "ask_policy.json").read_text())
    assert policy["budget_per_day"] == 20.0 and policy["expected_asks_per_day"] == pytest.approx(20.0)
    printed = capsys.readouterr().out
    assert (out / "ask_policy.py").is_file() and "wrote" in printed and policy["policy_version"] in printed
    assert main(["ask"]) == 0  # PULSE_ASK_BUDGET, to PULSE_HOME/ask_policy
    assert json.loads((pulse_home.root / "ask_policy" / "ask_policy.json").read_text())["budget_per_day"] == 15.0
    assert main(["ask", "--floor", "0"]) == 2
    monkeypatch.setenv("PULSE_ASK_BUDGET", "-3")
    assert main(["ask"]) == 2
    assert "PULSE_ASK_BUDGET=-3: a positive number of asks per day" in capsys.readouterr().err


def test_ask_budget_setting_reaches_the_asset_resource(tmp_path):
    from pulse_pipeline.defs.estimates.resources import estimates_resource
    from pulse_pipeline.paths import PulseHome
    from pulse_pipeline.settings import SettingsError, ask_budget, estimate_settings

    assert ask_budget({}) is None and ask_budget({"PULSE_ASK_BUDGET": " 12.5 "}) == 12.5
    assert estimate_settings({"PULSE_ASK_BUDGET": "40"}).ask_budget == 40.0
    for bad in ("0", "-1", "inf", "nan", "many"):
        with pytest.raises(SettingsError, match="PULSE_ASK_BUDGET"):
            ask_budget({"PULSE_ASK_BUDGET": bad})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PULSE_ASK_BUDGET", "7")
        assert estimates_resource(PulseHome(tmp_path)).ask_budget == 7.0


def test_compare_uses_the_known_ask_probability_in_aipw():
    """``effects.compare``: when every rated session logged its ask probability, the aipw row's arm means are
    ``aipw_mean`` with propensity = ``known_ask_propensity``, no clipping below its own minimum and the outcome model's
    lambda tuned, and say so;
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
        return aipw_mean(a.y, np.r_[a.f_labeled, a.f_unlabeled], rated, p, clip=(p[rated].min(), 1.0), lam=None)

    expected = difference(by_hand(treat), by_hand(control))
    assert rows["aipw"].effect == pytest.approx(expected.estimate, rel=1e-12)
    assert rows["aipw"].se == pytest.approx(expected.se, rel=1e-12)
    assert "known ask probability" in rows["aipw"].note
    unlogged = (replace(a, q_labeled=None, q_unlabeled=None) for a in (treat, control))
    plain = {r.method: r for r in compare(*unlogged, s)[0]}
    assert plain["aipw"].note is None or "known ask probability" not in plain["aipw"].note
    assert plain["aipw"].effect != rows["aipw"].effect
