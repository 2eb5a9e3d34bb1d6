"""Codex CLI rollouts (``ingest/codex.py``) on the real samples and on our fixtures. Every count below was worked
out by reading each line of the files; lines are numbered from 1 in the samples and from 0 in the fixtures.

Samples (``../shared/samples/codex``):

- ``kvsankar_real_sessions_codex_session-01.jsonl`` (Codex 0.135, ``codex exec``), 11 lines, 11 events, session
  ``019e9625-802f-7e91-840a-cfe88d14117a`` (line 1's ``session_meta``). Line 3 is a ``developer`` message and 4
  an ``<environment_context>`` user-role message: both ``system``. Line 6 is the one user message; 7
  (``user_message``) and 8 (``agent_message``) are the ``event_msg`` echoes: ``state``. Line 9, the assistant's
  ``phase: final_answer`` message, closes the segment 6-9. Lines 2, 5, 10, 11 are ``task_started``,
  ``turn_context`` (model ``gpt-5.5``), ``token_count`` (total input 22539, output 10) and ``task_complete``. No
  tool call.
- ``simonw_sample_codex_session.jsonl`` (session ``test-session``), 3 lines: ``session_meta``, a user message, an
  assistant message with no phase: 3 events, 1 user message, 1 segment open at stream end; no usage, no model.

Fixtures (``tests/fixtures/codex/``):

- ``rollout-2025-09-01T10-00-00-5f0c9d2e-….jsonl`` (session ``5f0c9d2e-1111-4a2b-9c3d-000000000001``), 31
  lines, one event each. User messages 3 and 23 (1 is ``<environment_context>``; 4 is an echo). Turn one: 6
  ``shell`` ``["bash", "-lc", "pytest -q"]`` answered at 7 with the structured JSON output, exit code 1; 9
  ``apply_patch`` (``edit``) answered at 10; 11 ``shell_command`` ``pytest -q && git commit -am 'Fix add'``
  answered at 12 (``Exit code: 0``); 13 ``exec_command`` ``git push origin main``, whose output 15 names no exit
  code, so it takes 14's ``exec_command_end`` exit code 1; 17 ``phase: final_answer`` closes segment 3-17; 18-22
  (echo, ``task_complete``, ``compacted``, ``context_compacted``, ``turn_context``) are outside. Turn two: 24
  ``local_shell_call`` ``git pull --rebase`` (25: ``Process exited with code 0``), 26 ``exec_command`` ``git push
  origin main`` (27: exit 0), 28 ``event_msg`` ``error``, 29 ``end_turn: true`` closes 23-29; 30 is outside. Run
  actions 6, 11, 13, 24, 26 (5); failed 7 and 15; test runs 6 and 11, 6 failed; one edit, one error, one
  condensation (20). Usage: the last cumulative ``token_count`` (30): 15000 and 450. Model ``gpt-5-codex``.
- ``bad_lines.jsonl`` (``codex-bad-1``), 12 lines: 0 ``session_meta``, 1 user ``hello``, 2 an ``event_msg`` of
  unknown type, 3 a ``response_item`` of unknown type, 4 a payload that is a string, 5 a line of unknown type, 6
  a ``function_call_output`` for ``call_never`` (a call that never appeared), 7 and 9 old per-response
  ``token_count`` lines (100 + 150 input, 20 + 30 output, summed), 8 an assistant message with no phase, 10 a
  JSON array, 11 truncated JSON. 10 events, 2 quarantined (10 not an object, 11 not JSON); 1 user message, 1
  segment open at stream end.
- ``subagent.jsonl`` (``codex-sub-7``): a sub-agent's rollout (``source.subagent``): its user-role prompt (2) and
  answer (5) are ``subagent`` messages; one ``exec_command`` ``rg`` (3, exit 0 at 4). 6 events, no user
  message, no segment, one run; model ``gpt-5-codex-mini``.
"""

from __future__ import annotations

import pytest

from pulse_pipeline import tables
from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.features.user_text import build_user_text

from .helpers import FIXTURES, SAMPLES, assert_reconciled, events, ingest_paths, needs_samples, rows, session

CODEX = SAMPLES / "codex"
FIX = FIXTURES / "codex"
ROLLOUT = FIX / "rollout-2025-09-01T10-00-00-5f0c9d2e-1111-4a2b-9c3d-000000000001.jsonl"

# file -> (session id, events, user messages, segments, shell commands, events quarantined)
EXPECTED = {
    CODEX / "kvsankar_real_sessions_codex_session-01.jsonl": ("019e9625-802f-7e91-840a-cfe88d14117a", 11, 1, 1, 0, 0),
    CODEX / "simonw_sample_codex_session.jsonl": ("test-session", 3, 1, 1, 0, 0),
}


# --- the real samples ---------------------------------------------------------------------------------------------


@needs_samples
def test_every_sample_file_is_covered():
    assert set(CODEX.glob("*.jsonl")) == set(EXPECTED)


@needs_samples
@pytest.mark.parametrize("path", sorted(EXPECTED), ids=lambda p: p.name)
def test_sample_counts(wh, path):
    session_id, n_events, user_messages, segments, shell, quarantined = EXPECTED[path]
    ingest_paths(wh, path)
    row = session(wh)
    assert (row["session_id"], row["source_format"]) == (session_id, "codex_events")
    assert (row["n_events"], row["n_user_messages"], row["n_segments"], row["n_shell_commands"]) == (
        n_events,
        user_messages,
        segments,
        shell,
    )
    assert wh.count(tables.EVENTS) == n_events
    assert wh.count(tables.QUARANTINE) == quarantined
    assert wh.con.execute("SELECT count(*) FROM staging.work_segments").fetchone()[0] == segments
    assert_reconciled(wh, path.name)


@needs_samples
def test_sample_folder_is_one_drop_of_two_sessions(wh):
    # the two license texts are no JSON and no ratings CSV: each is one quarantined record
    ingest_paths(wh, CODEX)
    assert sorted(r[0] for r in rows(wh, "SELECT session_id FROM staging.sessions")) == [
        "019e9625-802f-7e91-840a-cfe88d14117a",
        "test-session",
    ]
    assert rows(wh, "SELECT count(*) FROM raw.quarantine WHERE record_type = 'unknown'") == [(2,)]
    assert_reconciled(wh, CODEX.name)


@needs_samples
def test_sample_real_session_line_by_line(wh):
    ingest_paths(wh, CODEX / "kvsankar_real_sessions_codex_session-01.jsonl")
    assert events(wh, "source, kind, name, wait_for_response, segment_index, segment_close") == [
        ("environment", "state", "session_meta", None, None, None),
        ("environment", "state", "task_started", None, None, None),
        ("environment", "action", "system", None, None, None),  # developer message
        ("environment", "action", "system", None, None, None),  # <environment_context>
        ("environment", "state", "turn_context", None, None, None),
        ("user", "action", "message", None, 0, None),
        ("environment", "state", "user_message", None, 0, None),
        ("environment", "state", "agent_message", None, 0, None),
        ("agent", "action", "message", True, 0, "awaiting_response"),
        ("environment", "state", "token_count", None, None, None),
        ("environment", "state", "task_complete", None, None, None),
    ]
    assert session(wh)["metadata"] == {
        "llm_usage": {"cost_usd": None, "prompt_tokens": 22539, "completion_tokens": 10},
        "model": "gpt-5.5",
        "cwd": "/tmp/agent-history-real-agent/codex/workspace",
        "agent_version": "0.135.0",
    }


# --- fixtures: one rule each --------------------------------------------------------------------------------------


def test_rollout_counts_and_usage(wh):
    ingest_paths(wh, ROLLOUT)
    row = session(wh)
    assert (row["session_id"], row["n_events"], row["n_user_messages"], row["n_segments"]) == (
        "5f0c9d2e-1111-4a2b-9c3d-000000000001",
        31,
        2,
        2,
    )
    assert row["n_shell_commands"] == 5
    assert row["metadata"] == {
        "llm_usage": {"cost_usd": None, "prompt_tokens": 15000, "completion_tokens": 450},
        "model": "gpt-5-codex",
        "cwd": "/work/app",
        "git_branch": "main",
        "agent_version": "0.46.0",
    }
    assert wh.count(tables.QUARANTINE) == 0


def test_one_segment_per_user_turn(wh):
    ingest_paths(wh, ROLLOUT)
    assert rows(
        wh,
        "SELECT segment_index, open_event_id, close_event_id, close_reason, closed, n_user_messages"
        " FROM staging.work_segments ORDER BY segment_index",
    ) == [(0, "#3", "#17", "awaiting_response", True, 1), (1, "#23", "#29", "awaiting_response", True, 1)]
    outside = [r[0] for r in rows(wh, "SELECT seq FROM raw.events WHERE segment_index IS NULL ORDER BY seq")]
    assert outside == [0, 1, 2, 18, 19, 20, 21, 22, 30]


def test_shell_calls_and_their_exit_codes(wh):
    ingest_paths(wh, ROLLOUT)
    assert rows(wh, "SELECT seq, event_id, command FROM raw.events WHERE kind = 'action' AND name = 'run'") == [
        (6, "call_test1", "bash -lc 'pytest -q'"),
        (11, "call_commit1", "pytest -q && git commit -am 'Fix add'"),
        (13, "call_push1", "git push origin main"),
        (24, "call_pull1", "git pull --rebase"),
        (26, "call_push2", "git push origin main"),
    ]
    assert rows(wh, "SELECT seq, cause, exit_code FROM raw.events WHERE kind = 'observation' AND name = 'run'") == [
        (7, "call_test1", 1),  # structured JSON output
        (12, "call_commit1", 0),  # "Exit code: 0"
        (15, "call_push1", 1),  # no code in the output: the exec_command_end at 14
        (25, "call_pull1", 0),  # "Process exited with code 0"
        (27, "call_push2", 0),
    ]
    assert events(wh, "name, cause, exit_code")[9:11] == [("edit", None, None), ("edit", "call_patch1", None)]


def test_git_and_test_features_read_shell_calls(wh):
    ingest_paths(wh, ROLLOUT)
    build_user_text(wh)
    build_event_features(wh)
    got = wh.frame(
        "SELECT user_message_count, n_segments, git_commit_count, git_push_count, git_pull_count, shell_commands,"
        " failed_commands, test_runs, test_failures, file_edits, error_observations, condensations,"
        " duration_seconds, llm_cost_usd, llm_prompt_tokens, llm_completion_tokens FROM features.event_features"
    ).row(0)
    # 10:00:00 to 10:01:13; usage from the session's metadata (Codex records no cost)
    assert got == (2, 2, 1, 2, 1, 5, 2, 2, 1, 1, 1, 1, 73.0, None, 15000, 450)


def test_a_sub_agent_rollout_has_no_user_message(wh):
    ingest_paths(wh, FIX / "subagent.jsonl")
    row = session(wh)
    assert (row["session_id"], row["n_events"], row["n_user_messages"], row["n_segments"], row["n_shell_commands"]) == (
        "codex-sub-7",
        6,
        0,
        0,
        1,
    )
    assert [r[0] for r in events(wh, "source")] == [
        "environment",
        "environment",
        "subagent",
        "subagent",
        "environment",
        "subagent",
    ]
    assert (row["metadata"]["subagent"], row["metadata"]["model"]) == (True, "gpt-5-codex-mini")


def test_bad_lines_are_kept_or_quarantined(wh):
    ingest_paths(wh, FIX / "bad_lines.jsonl")
    assert events(wh, "source, kind, name, original_name, cause, exit_code") == [
        ("environment", "state", "session_meta", None, None, None),
        ("user", "action", "message", None, None, None),
        ("unknown", "other", "other", "brand_new_event", None, None),  # event_msg of unknown type
        ("unknown", "other", "other", "hologram", None, None),  # response_item of unknown type
        ("unknown", "other", "other", "response_item", None, None),  # payload is not an object
        ("unknown", "other", "other", "mystery_line", None, None),  # line of unknown type
        ("environment", "observation", "other", "function_call_output", None, None),  # its call never appeared
        ("environment", "state", "token_count", None, None, None),
        ("agent", "action", "message", None, None, None),
        ("environment", "state", "token_count", None, None, None),
    ]
    quarantined = rows(wh, "SELECT record_type, event_index, reason FROM raw.quarantine ORDER BY event_index")
    assert [q[:2] for q in quarantined] == [("event", 10), ("event", 11)]
    assert quarantined[0][2] == "event is not a JSON object"
    assert quarantined[1][2].startswith("not valid JSON")
    row = session(wh)
    assert (row["session_id"], row["n_user_messages"], row["n_segments"]) == ("codex-bad-1", 1, 1)
    assert row["metadata"]["llm_usage"] == {"cost_usd": None, "prompt_tokens": 250, "completion_tokens": 50}
    assert_reconciled(wh, "bad_lines.jsonl")


def test_a_folder_of_rollouts_is_one_drop(wh):
    ingest_paths(wh, FIX)
    assert sorted(r[0] for r in rows(wh, "SELECT session_id FROM staging.sessions")) == [
        "5f0c9d2e-1111-4a2b-9c3d-000000000001",
        "codex-bad-1",
        "codex-sub-7",
    ]
    assert_reconciled(wh, FIX.name)
