"""``features.user_text``: each staged session's user messages, in order, redacted, refreshed with its record; the
one place users' words are read (``load_user_messages``), and its check."""

from __future__ import annotations

import json

from pulse_pipeline.features.checks import user_text_violations
from pulse_pipeline.features.user_text import build_user_text, load_user_messages
from pulse_pipeline.incremental import Refreshed

from .helpers import ingest_paths, rows

KEY = "ghp_" + "a" * 36  # a GitHub token's shape (redact.py): never stored
EMAIL = "jane.doe@example.com"


def _session(session_id: str, *turns: tuple[str, str | None]) -> dict:
    """A session of ``message`` events (source, text; text None: a message event without text)."""
    events = []
    for i, (source, text) in enumerate(turns):
        event = {"id": str(i), "source": source, "type": "message"}
        if text is not None:
            event["text"] = text
        events.append(event)
    return {"session_id": session_id, "user_id": "u", "events": events}


def _drop(tmp_path, name: str, *sessions: dict):
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(s) for s in sessions) + "\n")
    return path


def test_one_row_per_user_message_in_order_redacted(wh, tmp_path):
    drop = _drop(
        tmp_path,
        "d1.jsonl",
        _session(
            "s1",
            ("user", f"push with GITHUB_TOKEN={KEY} please"),
            ("agent", f"done, mail {EMAIL}"),  # the agent's: not user text
            ("user", None),
            ("user", f"thanks, cc {EMAIL}"),
        ),
        _session("s2", ("agent", "hello")),
    )
    ingest_paths(wh, drop)
    assert build_user_text(wh) == Refreshed(3, 2)
    # worked out by hand with redact.py's rules: the token's name is kept, the email goes whole
    assert rows(wh, "SELECT session_id, position, text FROM features.user_text ORDER BY ALL") == [
        ("s1", 0, "push with GITHUB_TOKEN=[REDACTED:github_token] please"),
        ("s1", 1, None),
        ("s1", 2, "thanks, cc [REDACTED:email]"),
    ]
    # the text model's reading: messages with text only, in order; a session without one is absent
    assert load_user_messages(wh) == {
        "s1": ["push with GITHUB_TOKEN=[REDACTED:github_token] please", "thanks, cc [REDACTED:email]"]
    }
    assert load_user_messages(wh, ["s2"]) == {}
    assert user_text_violations(wh) == 0


def test_refreshed_for_the_sessions_whose_record_changed(wh, tmp_path):
    first = _drop(tmp_path, "d1.jsonl", _session("s1", ("user", "fix it")), _session("s2", ("user", "hi")))
    ingest_paths(wh, first)
    assert build_user_text(wh) == Refreshed(2, 2)
    assert build_user_text(wh) == Refreshed(2, 0)  # nothing changed: nothing read again
    # a later drop re-delivers s2 with other messages: only s2 is read again
    ingest_paths(wh, _drop(tmp_path, "d2.jsonl", _session("s2", ("user", "hi"), ("user", "still broken"))))
    assert build_user_text(wh) == Refreshed(3, 1)
    assert load_user_messages(wh) == {"s1": ["fix it"], "s2": ["hi", "still broken"]}
    assert user_text_violations(wh) == 0


def test_the_check_counts_a_missing_and_a_stray_row(wh, tmp_path):
    ingest_paths(wh, _drop(tmp_path, "d1.jsonl", _session("s1", ("user", "a"), ("user", "b"))))
    build_user_text(wh)
    wh.con.execute("DELETE FROM features.user_text WHERE position = 0")  # s1 lacks a message
    wh.con.execute("INSERT INTO features.user_text VALUES ('gone', 0, 'x')")  # a session not staged
    assert user_text_violations(wh) == 2
