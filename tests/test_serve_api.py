"""The rating service's HTTP API (issue 35, item 1): hostile bodies get a 4xx with a JSON reason and never a 5xx;
asks are decided once per session with the policy's probability; OpenHands' feedback body is taken unchanged;
/healthz and /metrics."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulse_pipeline.estimates.ask_policy import Policy, Term, write_policy

from .serve_helpers import FixedRandom, rolled_rows, serving

# --- hostile bodies ------------------------------------------------------------------------------------------

BAD_RATINGS = [
    (b"", 400, "the body is empty"),
    (b'{"session_id": "s", "stars": ', 400, "not valid JSON"),
    (b"\xff\xfe{}", 400, "not valid JSON"),
    (b'{"session_id": "s", "stars": NaN}', 400, "not valid JSON"),
    (b"[1, 2]", 400, "the body is an array"),
    (b'"s"', 400, "the body is a string"),
    (b'{"session_id": "s", "stars": 4, "star": 5}', 400, 'unknown field(s) "star"'),
    (b'{"session_id": "s", "stars": 0}', 400, "stars 0 is outside 1 to 5"),
    (b'{"session_id": "s", "stars": 6}', 400, "stars 6 is outside 1 to 5"),
    (b'{"session_id": "s", "stars": -1e300}', 400, "is outside 1 to 5"),
    (b'{"session_id": "s", "stars": 4.5}', 400, "stars 4.5 is not a whole number from 1 to 5"),
    (b'{"session_id": "s", "stars": "4"}', 400, 'stars "4" is not a number'),
    (b'{"session_id": "s", "stars": true}', 400, "stars true is not a number"),
    (b'{"session_id": "s"}', 400, "stars is missing"),
    (b'{"stars": 3}', 400, "session_id is missing"),
    (b'{"session_id": 17, "stars": 3}', 400, "session_id 17 is not a string"),
    (b'{"session_id": "", "stars": 3}', 400, "session_id is empty"),
    (b'{"session_id": "zz\\u0000nul", "stars": 3}', 400, "session_id holds a NUL character"),
    (b'{"session_id": "s", "stars": 3, "segment_index": -1}', 400, "segment_index -1 is outside 0 to 2147483647"),
    (b'{"session_id": "s", "stars": 3, "segment_index": 2147483648}', 400, "segment_index 2147483648 is outside"),
    (b'{"session_id": "s", "stars": 3, "comment": 5}', 400, "comment 5 is not a string"),
    (b'{"session_id": "s", "stars": 3, "idempotency_key": "a\\u0000"}', 400, "idempotency_key holds a NUL"),
    (b'{"conversation_id": "c", "rating": 7}', 400, "rating 7 is outside 1 to 5"),
    (b'{"conversation_id": "c", "rating": 3, "stars": 3}', 400, 'unknown field(s) "stars" in an OpenHands'),
    (b'{"conversation_id": "c", "rating": 3, "metadata": [1]}', 400, "metadata [1] is not an object"),
    (b"[" * 2000 + b"]" * 2000, 400, "not valid JSON"),
]


@pytest.mark.parametrize(("body", "status", "reason"), BAD_RATINGS)
def test_a_bad_rating_is_refused_with_its_reason_and_nothing_is_stored(tmp_path, body, status, reason):
    with serving(tmp_path) as (client, service):
        answer = client.post("/v1/ratings", content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == status, answer.text
        assert reason in answer.json()["error"], answer.json()
        assert service.journal.last_seq == 0
    assert rolled_rows(tmp_path) == []


BAD_ASKS = [
    (b'{"segment_index": 0}', "session_id is missing"),
    (b'{"session_id": "s", "features": {"file_edits": "many"}}', 'feature "file_edits" is "many"'),
    (b'{"session_id": "s", "features": {"file_edits": true}}', "expected a finite number"),
    (b'{"session_id": "s", "features": [1]}', "features [1] is not an object"),
    (b'{"session_id": "s", "coin": 0.1}', 'unknown field(s) "coin"'),
    (b'{"session_id": "s", "user_id": ["u"]}', 'user_id ["u"] is not a string'),
]


@pytest.mark.parametrize(("body", "reason"), BAD_ASKS)
def test_a_bad_ask_is_refused_with_its_reason(tmp_path, body, reason):
    with serving(tmp_path) as (client, service):
        answer = client.post("/v1/asks", content=body)
        assert answer.status_code == 400 and reason in answer.json()["error"], answer.text
        assert service.memory.decisions == {}


def test_a_body_over_64_kib_is_refused_by_its_length_and_as_it_streams(tmp_path):
    big = json.dumps({"session_id": "s", "stars": 3, "comment": "x" * (64 * 1024)}).encode()
    with serving(tmp_path) as (client, service):
        said = client.post("/v1/ratings", content=big)
        assert said.status_code == 413 and f"the body is {len(big)} bytes: at most 65536" in said.json()["error"]
        # no Content-Length: the body arrives in chunks and is counted as it comes
        streamed = client.post("/v1/ratings", content=(big[i : i + 8192] for i in range(0, len(big), 8192)))
        assert streamed.status_code == 413 and "over 65536 bytes" in streamed.json()["error"]
        lying = client.post("/v1/ratings", content=big, headers={"Content-Length": "abc"})
        assert lying.status_code == 400 and "Content-Length" in lying.json()["error"]
        # just under the limit is a rating
        fits = json.dumps({"session_id": "s", "stars": 3, "comment": "x" * (64 * 1024 - 60)}).encode()
        assert len(fits) <= 64 * 1024 and client.post("/v1/ratings", content=fits).status_code == 201
        assert service.journal.last_seq == 1


def test_unknown_routes_and_methods_answer_json(tmp_path):
    with serving(tmp_path) as (client, _):
        assert client.get("/v2/nothing").json()["error"].startswith("no route /v2/nothing")
        wrong = client.get("/v1/ratings")
        assert wrong.status_code == 405 and "GET is not allowed on /v1/ratings" in wrong.json()["error"]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
FIELDS = ["session_id", "segment_index", "stars", "comment", "idempotency_key", "signature", "features", "user_id"]
FIELDS += ["conversation_id", "event_id", "rating", "reason", "metadata"]
BODIES = st.one_of(
    st.binary(max_size=300),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), JSON_VALUES, max_size=6).map(
        lambda v: json.dumps(v).encode()
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES, route=st.sampled_from(["/v1/ratings", "/v1/asks"]))
def test_hostile_bodies_never_get_a_5xx_and_a_refusal_always_says_why(tmp_path_factory, body, route):
    home = tmp_path_factory.mktemp("hostile")
    with serving(home) as (client, service):
        answer = client.post(route, content=body)
        assert answer.status_code < 500, (body, answer.text)
        assert answer.headers["content-type"] == "application/json"
        if answer.status_code >= 400:
            error = answer.json()["error"]
            assert isinstance(error, str) and error and "\n" not in error
        else:  # accepted: it was a valid body, and it is journaled
            assert service.journal.last_seq == 1
    rows = rolled_rows(home)
    assert all(1 <= r["rating"] <= 5 for r in rows if "rating" in r)


# --- asks ------------------------------------------------------------------------------------------------


def test_without_a_policy_asks_are_uniform_at_one_half(tmp_path):
    with serving(tmp_path, rng=FixedRandom(0.49, 0.51)) as (client, _):
        first = client.post("/v1/asks", json={"session_id": "a", "segment_index": 0}).json()
        second = client.post("/v1/asks", json={"session_id": "b"}).json()
    assert first["ask"] is True and first["probability"] == 0.5 and first["policy_version"] == "uniform-0.5"
    assert first["rate_url"].startswith("https://pulse.example.org/rate/a?segment=0&sig=")
    assert second == {"ask": False, "probability": 0.5, "policy_version": "uniform-0.5", "rate_url": None}


def write_known_policy(home) -> tuple[str, float]:
    """A policy with one term, exported as ``pulse ask`` writes it; its version and q at file_edits = e^3 - 1:
    log1p gives 3, z = (3 - 1) / 2 = 1, q = 0.3 * exp(0.5 * 1) = 0.49462..."""
    policy = Policy(
        intercept=0.0,
        terms=(Term("file_edits", "log1p", 1.0, 2.0, 0.5),),
        answer=None,  # no answer model: q is the error model's alone
        multiplier=0.3,
        floor=0.01,
        budget_per_day=10.0,
        sessions_per_day=20.0,
        expected_asks_per_day=10.0,
        expected_ratings_per_day=None,
        fitted_on_ratings=100,
    )
    json_path, _ = write_policy(policy, home / "ask_policy")
    return json.loads(json_path.read_text())["policy_version"], 0.3 * math.exp(0.5)


def test_an_ask_without_features_takes_the_policy_at_the_average_session(tmp_path):
    """Features are optional: with none, every z is 0 (the mean), so q = 0.3 * exp(0) = 0.3 under the known policy
    (an earlier stand-in policy answered 500 here)."""
    version, _ = write_known_policy(tmp_path)
    with serving(tmp_path, rng=FixedRandom(0.29)) as (client, _):
        answer = client.post("/v1/asks", json={"session_id": "no-features"})
    assert answer.status_code == 200
    assert answer.json()["probability"] == pytest.approx(0.3, rel=1e-12) and answer.json()["ask"] is True
    assert answer.json()["policy_version"] == version


def test_a_session_is_decided_once_with_the_exported_policy_and_later_asks_repeat_it(tmp_path):
    version, q = write_known_policy(tmp_path)
    features = {"file_edits": math.e**3 - 1, "test_runs": 2}
    with serving(tmp_path, rng=FixedRandom(0.495, 0.0, 0.0)) as (client, service):  # 0.495 > q: no ask
        first = client.post("/v1/asks", json={"session_id": "s1", "segment_index": 0, "features": features}).json()
        # a later segment of s1: the same decision, no new coin (the next coin, 0.0, would ask)
        again = client.post("/v1/asks", json={"session_id": "s1", "segment_index": 1, "features": {}}).json()
        other = client.post("/v1/asks", json={"session_id": "s2", "features": {"file_edits": 0}}).json()
        metrics = client.get("/metrics").text
    assert first == {
        "ask": False,
        "probability": pytest.approx(q, rel=1e-12),
        "policy_version": version,
        "rate_url": None,
    }
    assert again == first
    # s2: file_edits 0, log1p 0, z = -0.5, q = 0.3 * exp(-0.25); the coin 0.0 asks
    assert other["ask"] is True and other["probability"] == pytest.approx(0.3 * math.exp(-0.25), rel=1e-12)
    assert 'pulse_serve_asks_total{decision="repeat"} 1' in metrics
    assert 'pulse_serve_asks_total{decision="skip"} 1' in metrics
    assert 'pulse_serve_asks_total{decision="ask"} 1' in metrics
    # only the ask shown is a row; the decision not to ask stays in the journal
    [row] = rolled_rows(tmp_path)
    assert row["session_id"] == "s2" and row["ask_probability"] == other["probability"] and "rating" not in row
    assert row["policy_version"] == version and service.journal.last_seq == 2


def test_decisions_are_remembered_across_a_restart(tmp_path):
    with serving(tmp_path, rng=FixedRandom(0.0)) as (client, _):
        asked = client.post("/v1/asks", json={"session_id": "s1"}).json()
    with serving(tmp_path, rng=FixedRandom(0.999)) as (client, _):  # this coin would not ask
        again = client.post("/v1/asks", json={"session_id": "s1", "segment_index": 3}).json()
        rated = client.post("/v1/ratings", json={"session_id": "s1", "stars": 5}).json()
        stranger = client.post("/v1/ratings", json={"session_id": "nobody-asked", "stars": 2}).json()
    assert asked["ask"] is True and again["ask"] is True and again["probability"] == 0.5
    assert "segment=3&sig=" in again["rate_url"]
    assert rated == {"stored": True, "duplicate": False, "unknown_session": False}
    assert stranger == {"stored": True, "duplicate": False, "unknown_session": True}


def test_openhands_feedback_body_is_taken_unchanged(tmp_path):
    body = {"conversation_id": "c9", "event_id": 42, "rating": 2, "reason": "slow", "metadata": {"source": "ui"}}
    with serving(tmp_path) as (client, _):
        answer = client.post("/v1/ratings", json=body)
    assert answer.status_code == 201, answer.text
    [row] = rolled_rows(tmp_path)
    assert {k: row[k] for k in ("id", "session_id", "event_id", "rating", "reason")} | {"id": None} == {
        "id": None,
        "session_id": "c9",
        "event_id": "42",
        "rating": 2,
        "reason": "slow",
    }


def test_healthz_and_metrics(tmp_path):
    with serving(tmp_path) as (client, _):
        client.post("/v1/ratings", json={"session_id": "s", "stars": 3})
        client.post("/v1/ratings", json={"session_id": "s", "stars": 9})
        health = client.get("/healthz").json()
        text = client.get("/metrics").text
    assert health["ok"] is True and health["journal_seq"] == 1 and health["waiting_to_roll"] == 1
    assert 'pulse_serve_ratings_total{result="stored"} 1' in text
    assert 'pulse_serve_rejected_total{reason="stars_out_of_range"} 1' in text
    assert 'pulse_serve_requests_total{route="/v1/ratings",status="201"} 1' in text
    assert 'pulse_serve_request_seconds_count{route="/v1/ratings"} 2' in text
    assert 'pulse_serve_request_seconds_bucket{route="/v1/ratings",le="+Inf"} 2' in text
    for line in text.splitlines():  # the text format: comments, or a name, optional labels and a number
        assert line.startswith("# ") or float(line.rsplit(" ", 1)[1]) >= 0, line
