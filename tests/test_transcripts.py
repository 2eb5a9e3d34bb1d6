"""What annotators read: a session's messages and agent steps, with exit codes and the code each edit wrote."""

from __future__ import annotations

from pulse_pipeline.features.annotation import AgentStep
from pulse_pipeline.features.transcripts import iter_transcripts

from .helpers import FIXTURES, ingest_paths


def test_transcript_of_a_v0_session(wh):
    ingest_paths(wh, FIXTURES / "transcripts" / "v0_session.json")
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
    assert [t.session_id for batch in iter_transcripts(wh, session_ids=["r1"]) for t in batch] == ["r1"]
    assert sum(len(b) for b in iter_transcripts(wh, batch_size=1)) == 2
