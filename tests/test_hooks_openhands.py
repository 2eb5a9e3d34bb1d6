"""``pulse hook openhands`` with OpenHands' own feedback body (OpenHands/OpenHands
``frontend/src/api/conversation-service/conversation-service.api.ts`` ``submitConversationFeedback``:
``{conversation_id, event_id, rating, reason, metadata: {source: "likert-scale"}}``, posted to
``/feedback/conversation``; the server's ``FeedbackRequest`` in ``enterprise/server/routes/feedback.py``) and rows of
its ``conversation_feedback`` table."""

from __future__ import annotations

import json

from pulse_pipeline.hooks.openhands import request_of

from .hook_helpers import run_hook

# As the frontend sends it for 2 stars with a reason picked from its list (JSON.stringify drops undefined keys).
BODY = {
    "conversation_id": "c0ffee00aa5511ee",
    "event_id": 42,
    "rating": 2,
    "reason": "The agent misunderstood my instructions",
    "metadata": {"source": "likert-scale"},
}
# 5 stars: the frontend asks no reason for 4 and 5, so the key is absent.
FIVE_STARS = {
    "conversation_id": "c0ffee00aa5511ee",
    "event_id": 57,
    "rating": 5,
    "metadata": {"source": "likert-scale"},
}


def test_the_frontends_body_is_forwarded_unchanged(hook_env, fake_service, monkeypatch, capsys):
    code, out, err = run_hook(["openhands", json.dumps(BODY)], None, monkeypatch, capsys)
    assert (code, out) == (0, "")
    assert err.strip() == "pulse hook openhands: forwarded 1 OpenHands ratings (0 already stored)"
    [request] = fake_service.requests
    assert (request.path, request.body) == ("/v1/ratings", BODY)
    assert request.headers["idempotency-key"] == request_of(BODY)[1]


def test_table_rows_on_stdin_are_forwarded_once_each(hook_env, fake_service, monkeypatch, capsys):
    """``conversation_feedback`` rows (``row_to_json``: ``id``, ``created_at`` added, ``reason`` null) one per line;
    the keys are the rows' ids, so forwarding the export again stores nothing twice; a row that is no rating is
    refused and counted, never sent."""
    rows = [
        {"id": 7, **BODY, "created_at": "2025-10-01T10:00:00"},
        {"id": 8, **FIVE_STARS, "reason": None, "created_at": "2025-10-01T10:05:00"},
        {"id": 9, "conversation_id": "c0ffee00aa5511ee", "event_id": 60, "rating": 7, "reason": None},
    ]
    export = "".join(json.dumps(row) + "\n" for row in rows)
    code, out, err = run_hook(["openhands"], export, monkeypatch, capsys)
    assert (code, out) == (0, "")
    assert "forwarded 2 OpenHands ratings (0 already stored); refused 1 (rating 7 is not a whole number" in err
    assert fake_service.bodies("/v1/ratings") == [BODY, FIVE_STARS]
    assert [r.headers["idempotency-key"] for r in fake_service.requests] == ["openhands-7", "openhands-8"]
    code, out, err = run_hook(["openhands"], export, monkeypatch, capsys)
    assert "forwarded 2 OpenHands ratings (2 already stored)" in err


def test_a_json_array_is_its_bodies(hook_env, fake_service, monkeypatch, capsys):
    code, out, err = run_hook(["openhands"], json.dumps([BODY, FIVE_STARS]), monkeypatch, capsys)
    assert code == 0 and fake_service.bodies("/v1/ratings") == [BODY, FIVE_STARS]


def test_the_service_down_stops_in_one_line_and_exit_0(hook_env, fake_service, monkeypatch, capsys):
    fake_service.down = True
    code, out, err = run_hook(["openhands", json.dumps(BODY)], None, monkeypatch, capsys)
    assert (code, out) == (0, "") and err.count("\n") == 1
    assert "forwarded 0 OpenHands ratings" in err and "HTTP 503" in err and "run it again" in err
