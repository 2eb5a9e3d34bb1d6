"""The policy where it is served (``serve/policy.py``): q(x) equal to ``ask_policy.probabilities``, the newest
exported file loaded when it changes, a bad file keeping the previous policy, no file a uniform one."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest

from pulse_pipeline.estimates.ask_policy import (
    POLICY_FEATURES,
    fit_policy,
    policy_from_json,
    probabilities,
    write_policy,
)
from pulse_pipeline.serve.policy import DEFAULT_ASK_PROBABILITY, PolicySource, loaded_policy, uniform_policy


def _policy(seed: int, budget: float = 60.0):
    """A policy with both models fitted: errors growing with messages, answers falling with failed commands."""
    rng = np.random.default_rng(seed)
    n = 1500
    features = {
        "user_message_count": rng.poisson(5.0, n) + 1.0,
        "n_segments": rng.poisson(2.0, n) + 1.0,
        "file_edits": rng.poisson(6.0, n).astype(float),
        "failed_commands": rng.poisson(1.0, n).astype(float),
        "test_runs": rng.poisson(2.0, n).astype(float),
        "duration_seconds": rng.exponential(600.0, n),
    }
    error = rng.exponential(0.005 * features["user_message_count"] ** 2)  # strong enough to beat uniform
    asked = rng.random(n) < 0.4
    answered = asked & (rng.random(n) < 1 / (1 + np.exp(-(0.5 - 0.8 * features["failed_commands"]))))
    policy = fit_policy(features, answered, error[answered], 5.0, budget, asked=asked, answered=answered)
    assert policy.answer is not None and policy.answer.terms and policy.note is None
    return policy


def _random_features(rng: np.random.Generator, n: int) -> list[dict]:
    """Features as a platform sends them: counts, far outliers, negatives, missing, non-numeric and non-finite."""
    rows = []
    for _ in range(n):
        row = {c: float(rng.choice([0, 1, 3, 10, 40, 1e4, 1e12, -2])) * rng.random() for c in POLICY_FEATURES}
        for c in POLICY_FEATURES:
            luck = rng.random()
            if luck < 0.05:
                del row[c]
            elif luck < 0.08:
                row[c] = ["n/a", None, float("nan"), float("inf"), [1], True, 7][int(rng.integers(7))]
        rows.append(row)
    return rows


def _as_arrays(rows: list[dict]) -> dict[str, np.ndarray]:
    def value(v: object) -> float:
        return float(v) if isinstance(v, int | float) else np.nan  # what is not a number counts as the mean

    return {c: np.array([value(r.get(c)) for r in rows]) for c in POLICY_FEATURES}


def test_probability_equals_the_pipelines_on_random_features(tmp_path):
    policy = _policy(1)
    write_policy(policy, tmp_path)
    loaded = PolicySource(tmp_path).current()
    assert loaded.version == policy.version and loaded.path == tmp_path / "ask_policy.json"
    rows = _random_features(np.random.default_rng(2), 2000)
    got = np.array([loaded.probability(r) for r in rows])
    expected = probabilities(policy, _as_arrays(rows))
    assert np.allclose(got, expected, rtol=1e-12, atol=0)
    assert got.min() >= policy.floor and got.max() <= 1.0 and got.std() > 0.01  # the policy is not flat


def test_no_file_is_a_uniform_policy_then_the_newest_export_is_loaded(tmp_path, caplog):
    source = PolicySource(tmp_path / "ask_policy")  # the folder does not exist yet
    first = source.current()
    assert first.version == f"uniform-{DEFAULT_ASK_PROBABILITY:g}" == "uniform-0.5"
    assert first.probability({"user_message_count": 3}) == 0.5 and first.path is None
    assert source.current() is first  # nothing changed: not read again

    old, new = _policy(3, budget=60.0), _policy(3, budget=90.0)
    write_policy(old, tmp_path / "ask_policy")
    assert source.current().version == old.version
    assert source.current() is source.current()  # the file unchanged: the same object, no new read
    write_policy(new, tmp_path / "ask_policy")  # re-exported: another inode, size or time
    assert source.current().version == new.version != old.version
    x = {"user_message_count": 12, "failed_commands": 3}
    assert source.current().probability(x) == pytest.approx(probabilities(new, _as_arrays([x]))[0], rel=1e-12)

    (tmp_path / "ask_policy" / "ask_policy.json").unlink()  # gone: uniform again, said once
    with caplog.at_level(logging.WARNING, logger="pulse_pipeline.serve.policy"):
        assert source.current() is first and source.current() is first
    assert len(caplog.records) == 1 and "is gone" in caplog.records[0].getMessage()


def test_a_half_written_or_invalid_file_keeps_the_previous_policy_and_logs_one_line(tmp_path, caplog):
    policy = _policy(4)
    json_path, _ = write_policy(policy, tmp_path)
    source = PolicySource(tmp_path)
    assert source.current().version == policy.version
    whole = json_path.read_text()
    with caplog.at_level(logging.WARNING, logger="pulse_pipeline.serve.policy"):
        json_path.write_text(whole[: len(whole) // 2])  # a copy caught half way
        assert source.current().version == policy.version
        assert source.current().version == policy.version  # asked again: not logged again
        assert len(caplog.records) == 1
        line = caplog.records[0].getMessage()
        assert "not loaded" in line and str(json_path) in line and policy.version in line and "\n" not in line
        broken = json.loads(whole) | {"floor": 0}
        json_path.write_text(json.dumps(broken))  # whole JSON, a field out of range
        assert source.current().version == policy.version
        assert len(caplog.records) == 2 and "floor" in caplog.records[1].getMessage()
        json_path.write_bytes(b"\xff\xfe not text")
        assert source.current().version == policy.version and len(caplog.records) == 3
    json_path.write_text(whole)  # finished: loaded
    assert source.current().version == policy.version
    os.utime(json_path, ns=(1, 1))  # the same content touched: read again, the same version
    assert source.current().version == policy.version


def test_version_is_the_content_digest_even_when_the_file_was_edited(tmp_path, caplog):
    policy = _policy(5)
    content = policy.as_json()
    assert loaded_policy(content).version == content["policy_version"] == policy.version
    edited = content | {"multiplier": content["multiplier"] * 2}
    (tmp_path / "ask_policy.json").write_text(json.dumps(edited))
    with caplog.at_level(logging.WARNING, logger="pulse_pipeline.serve.policy"):
        loaded = PolicySource(tmp_path).current()
    assert loaded.version == policy_from_json(edited).version != policy.version
    assert "edited by hand" in caplog.records[0].getMessage()
    # a policy exported before the answer model (format /1, no version): read, its version its digest
    old = {k: v for k, v in content.items() if k not in ("policy_version", "answer_model")}
    old["format"] = "pulse-ask-policy/1"
    q = loaded_policy(old).probability({"user_message_count": 4})
    assert q == pytest.approx(probabilities(policy_from_json(old), {"user_message_count": np.array([4.0])})[0])
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        uniform_policy(0.0)
