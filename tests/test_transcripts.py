"""What annotators read: a session's messages and agent steps, with exit codes and the code each edit wrote."""

from __future__ import annotations

import json

from pulse_pipeline.features.annotation import AgentStep
from pulse_pipeline.features.transcripts import iter_transcripts
from pulse_pipeline.features.user_text import build_user_text

from .helpers import FIXTURES, ingest_paths


def test_transcript_of_a_v0_session(wh):
    ingest_paths(wh, FIXTURES / "transcripts" / "v0_session.json")
    build_user_text(wh)
    [[t]] = list(iter_transcripts(wh))
    # read by hand from the fixture: two user messages, one agent message, three steps
    assert t.user_messages == ("Fix the parser", "no, I meant the CSV parser")
    assert t.agent_messages == ("Tests still fail.",)
    assert t.steps == (
        AgentStep("read", "/w/parser.py", None, None, False),
        # OpenHands str_replace edits carry content "": the written code is new_str
        AgentStep("edit", "/w/parser.py", None, "return 1  # TODO", False),
        AgentStep("run", "pytest -q", 1, None, False),
    )


def test_transcripts_can_be_limited_to_some_sessions(wh):
    ingest_paths(wh, FIXTURES / "transcripts" / "v0_session.json", FIXTURES / "reconcile.jsonl")
    build_user_text(wh)
    assert [t.session_id for batch in iter_transcripts(wh, session_ids=["r1"]) for t in batch] == ["r1"]
    assert sum(len(b) for b in iter_transcripts(wh, batch_size=1)) == 2


def test_user_messages_come_redacted_from_user_text(wh, tmp_path):
    """An annotator reads the user's messages as ``features.user_text`` holds them: redacted (the heuristic one
    used to read pasted credentials as typed); the agent's messages still come from the events."""
    drop = tmp_path / "secret.jsonl"
    events = [
        {"id": "1", "source": "user", "type": "message", "text": "mail me at jane.doe@example.com"},
        {"id": "2", "source": "agent", "type": "message", "text": "Sure."},
    ]
    drop.write_text(json.dumps({"session_id": "s1", "user_id": "u", "events": events}) + "\n")
    ingest_paths(wh, drop)
    build_user_text(wh)
    [[t]] = list(iter_transcripts(wh))
    assert (t.user_messages, t.agent_messages) == (("mail me at [REDACTED:email]",), ("Sure.",))
