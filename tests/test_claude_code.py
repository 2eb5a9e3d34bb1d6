"""Claude Code session logs (``ingest/claude_code.py``) on the real samples and on our fixtures. Every count below
was worked out by reading each line of the files; lines are numbered from 1 in the samples and from 0 in the
fixtures.

Samples (``../shared/samples/claude_code``, daaain/claude-code-log test data):

- ``daaain_representative_messages.jsonl`` (session ``test_session``), 12 lines, 12 events: user texts at lines
  1, 3, 7, 11 (4 user messages); assistant texts with ``stop_reason: end_turn`` at 2, 6, 10 close the segments
  opened at 1, 3, 7; the segment opened at 11 runs to the ``summary`` (line 12) and is open at stream end: 4
  segments. Line 4 is an ``Edit`` tool call answered at 5; line 8 is the one ``Bash`` call (``python
  /tmp/decorator_example.py``), answered at 9 without ``is_error``: exit code 0. Usage: 25+45+78+25+45 = 218
  prompt and 120+85+95+35+110 = 445 completion tokens.
- ``daaain_session_b.jsonl`` (``session_b``), 3 lines: user 1, assistant ``end_turn`` 2, user 3: 3 events, 2 user
  messages, 2 segments (the second open at stream end), no shell command; usage 20 and 35.
- ``daaain_edge_cases.jsonl`` (``edge_cases``), 19 lines. Lines 13 (``"massive error"``), 15 (``42``) and 16
  (``[1]``) are not objects: 3 events quarantined. The 16 others give 17 events (line 9 holds a text and a
  ``MultiEdit`` call). User messages: 1, 3, 7 (a ``<command-name>`` slash command the user typed) and 12: 4.
  Not user messages: 5 (a ``tool_result`` with ``is_error``: an ``error`` observation answering line 4's
  ``FailingTool`` call, itself ``other``), 6 (the "Caveat" preamble: ``system``), 8 (``<local-command-stdout>``:
  an ``other`` observation), 10 (its message has ``contenst`` and no content), 11 (its message is the string
  ``"error"``), 14 (``{"silly": "this"}``, no type) and 18 (a content list holding a bare string): ``other``.
  Segments: 1-2 (closed by 2's ``end_turn``), 3-6 and 7-11 (each closed before the next user message), 12-19
  (open at stream end): 4. No ``Bash`` call. Line 17 names session ``todowrite_session`` but stays in the file's
  session (the first ``sessionId``, ``edge_cases``); its ``TodoWrite`` call is ``task_tracking``. Usage of the
  four assistant messages (2, 4, 9, 17): prompt 35+200+85+168 = 488, completion 145+25+180+85 = 435; the model of
  three of them is ``claude-3-sonnet-20240229``.

Fixtures (``tests/fixtures/claude_code/``):

- ``session.jsonl`` (``cc-session-1``, Claude Code 2.0 shapes), 28 lines, one event each. 0 is a
  ``file-history-snapshot`` (state, no uuid: id ``#0``). User messages: 1, 11, 20 (``/compact``), 24: 4.
  Message ``msg_A`` is streamed over lines 2 (thinking), 3 (text) and 4 (``Bash pytest -q``, ``stop_reason
  tool_use``), ``output_tokens`` 1, 1, 57: it counts once, with 57. 5 answers 4 with ``Exit code 1`` and
  ``is_error``. 6 ``Edit`` (answered at 7), 8 ``Bash`` ``pytest -q && git commit -am 'Fix add'`` (answered at 9,
  exit 0), 10 text ``end_turn``: segment 1-10 closes at 10. 12 is a ``Task`` call (``delegate``); 13-16 are its
  side chain (the sub-agent's prompt 13, its ``Bash git push origin main`` 14 answered at 15, its ``end_turn``
  text 16): source ``subagent``, closing nothing; 17 answers the ``Task``; 18 ``end_turn``: segment 11-18.
  19 ``isMeta`` (``system``, outside every segment), 20 opens a segment, 21 ``compact_boundary``
  (``condensation``), 22 ``isCompactSummary`` (``system``), 23 ``<local-command-stdout>``; 24 opens the next,
  so 20-23 closes before it; 25 ``end_turn`` closes 24-25; 26 ``[Request interrupted by user]`` (the user's
  ``stop``) and 27 ``isApiErrorMessage`` (``error``) are outside. Segments: 4. Bash calls: 4, 8, 14 (3).
  Usage per message id (prompt = input + cache creation + cache read / output): A 10010/57, B 10105/80, C
  10205/40, D 10305/20, E 10405/60, S1 503/30, S2 503/12, F 10505/15, G 3005/18, err1 0/0: 65546 and 332, no
  cost; model ``claude-sonnet-4-5-20250929`` (7 messages; the sub-agent's 2 are haiku).
- ``old_version.jsonl`` (``cc-old-1``, several blocks per line, ``costUSD``): line 1 holds a text and two calls
  (``Bash``, ``LS``), line 2 both results: 1 + 3 + 2 + 1 = 7 events; one user message, one segment closed by
  line 3's ``end_turn``; cost 0.0021 + 0.0007, prompt 100 + 160, completion 40 + 12.
- ``agent-a1b2c3.jsonl``: a sub-agent's own log (every line ``isSidechain``, ``agentId`` ``a1b2c3``) of
  ``cc-session-1``: 4 events, no user message, no segment; its id is ``cc-session-1/agent-a1b2c3``.
- ``bad_lines.jsonl`` (``cc-bad-1``), 8 lines: 0 user ``hello``; 1 a line of unknown type ``hologram``; 2 a
  ``tool_result`` for ``toolu_never``, a call that never appeared; 3 a user line whose ``message`` is a string;
  4 an assistant line with an unknown block and a text (2 events); 5 a JSON string; 6 truncated JSON; 7 user
  ``bye``. 7 events, 2 quarantined (5 not an object, 6 not JSON); user messages 0 and 7; segments 0-4 (closed by
  4's ``end_turn`` text) and 7.
"""

from __future__ import annotations

from datetime import datetime

import orjson
import pytest

from pulse_pipeline import tables
from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.features.user_text import build_user_text

from .helpers import FIXTURES, SAMPLES, assert_reconciled, events, ingest_paths, needs_samples, rows, session

CC = SAMPLES / "claude_code"
FIX = FIXTURES / "claude_code"

# file -> (session id, events, user messages, segments, shell commands, events quarantined)
EXPECTED = {
    CC / "daaain_representative_messages.jsonl": ("test_session", 12, 4, 4, 1, 0),
    CC / "daaain_session_b.jsonl": ("session_b", 3, 2, 2, 0, 0),
    CC / "daaain_edge_cases.jsonl": ("edge_cases", 17, 4, 4, 0, 3),
}


# --- the real samples ---------------------------------------------------------------------------------------------


@needs_samples
def test_every_sample_file_is_covered():
    assert set(CC.glob("*.jsonl")) == set(EXPECTED)


@needs_samples
@pytest.mark.parametrize("path", sorted(EXPECTED), ids=lambda p: p.name)
def test_sample_counts(wh, path):
    session_id, n_events, user_messages, segments, shell, quarantined = EXPECTED[path]
    ingest_paths(wh, path)
    row = session(wh)
    assert (row["session_id"], row["source_format"]) == (session_id, "claude_code_events")
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
def test_sample_folder_is_one_drop_of_three_sessions(wh):
    # the folder also holds the license text, which is no JSON and no ratings CSV: one record quarantined
    ingest_paths(wh, CC)
    assert sorted(r[0] for r in rows(wh, "SELECT session_id FROM staging.sessions")) == [
        "edge_cases",
        "session_b",
        "test_session",
    ]
    assert rows(wh, "SELECT record_type, source_file FROM raw.quarantine WHERE record_type <> 'event'") == [
        ("unknown", "LICENSE_daaain_claude-code-log_MIT.txt")
    ]
    assert_reconciled(wh, CC.name)


@needs_samples
def test_sample_edge_cases_line_by_line(wh):
    ingest_paths(wh, CC / "daaain_edge_cases.jsonl")
    got = events(wh, "source, kind, name, original_name, cause, segment_index")
    assert got[3:8] == [
        ("agent", "action", "other", "FailingTool", None, 1),  # line 4
        ("environment", "observation", "error", None, "tool_edge_001", 1),  # line 5 answers it
        ("environment", "action", "system", None, None, 1),  # line 6, the Caveat preamble
        ("user", "action", "message", None, None, 2),  # line 7, a slash command
        ("environment", "observation", "other", "local_command_output", None, 2),  # line 8
    ]
    assert got[9] == ("agent", "action", "edit", None, None, 2)  # line 9's MultiEdit, after its text
    assert [g[1:4] for g in (got[10], got[11], got[13], got[15])] == [("other", "other", "user")] * 2 + [
        ("other", "other", None)
    ] * 2  # lines 10, 11, 14, 18
    assert got[14][2] == "task_tracking"  # line 17, from another sessionId, stays in this session
    assert rows(wh, "SELECT event_index FROM raw.quarantine ORDER BY 1") == [(12,), (14,), (15,)]
    assert session(wh)["metadata"] == {
        "llm_usage": {"cost_usd": None, "prompt_tokens": 488, "completion_tokens": 435},
        "model": "claude-3-sonnet-20240229",
        "cwd": "/tmp",
        "agent_version": "1.0.0",
    }


@needs_samples
def test_sample_bash_result_has_its_exit_code(wh):
    ingest_paths(wh, CC / "daaain_representative_messages.jsonl")
    assert rows(wh, "SELECT kind, command, exit_code, cause FROM raw.events WHERE name = 'run' ORDER BY seq") == [
        ("action", "python /tmp/decorator_example.py", None, None),
        ("observation", "python /tmp/decorator_example.py", 0, "tool_002"),
    ]
    assert session(wh)["metadata"]["llm_usage"] == {"cost_usd": None, "prompt_tokens": 218, "completion_tokens": 445}


# --- fixtures: one rule each --------------------------------------------------------------------------------------


def test_session_counts_and_usage(wh):
    ingest_paths(wh, FIX / "session.jsonl")
    row = session(wh)
    assert (row["session_id"], row["n_events"], row["n_user_messages"], row["n_segments"]) == ("cc-session-1", 28, 4, 4)
    assert row["n_shell_commands"] == 3
    assert row["metadata"] == {
        "llm_usage": {"cost_usd": None, "prompt_tokens": 65546, "completion_tokens": 332},
        "model": "claude-sonnet-4-5-20250929",
        "cwd": "/work/app",
        "git_branch": "main",
        "agent_version": "2.0.14",
    }
    assert (row["started_at"], row["ended_at"]) == (datetime(2025, 10, 1, 9, 0, 0), datetime(2025, 10, 1, 9, 3, 11))
    assert wh.count(tables.QUARANTINE) == 0


def test_one_segment_per_user_turn(wh):
    ingest_paths(wh, FIX / "session.jsonl")
    segments = rows(
        wh,
        "SELECT segment_index, open_event_id, close_event_id, close_reason, closed, n_user_messages"
        " FROM staging.work_segments ORDER BY segment_index",
    )
    assert segments == [
        (0, "u1", "a6", "awaiting_response", True, 1),
        (1, "u5", "a8", "awaiting_response", True, 1),  # the sub-agent's end_turn (s4) closes nothing
        (2, "u8", "u10", "next_user_message", True, 1),
        (3, "u11", "a9", "awaiting_response", True, 1),
    ]
    outside = rows(wh, "SELECT event_id FROM raw.events WHERE segment_index IS NULL ORDER BY seq")
    assert outside == [("#0",), ("u7",), ("u12",), ("a10",)]


def test_tool_results_are_observations_and_side_chains_are_not_the_users(wh):
    ingest_paths(wh, FIX / "session.jsonl")
    got = {r[0]: r[1:] for r in events(wh, "event_id, source, kind, name, command, exit_code, cause")}
    assert got["toolu_1"] == ("agent", "action", "run", "pytest -q", None, None)
    assert got["u2"] == ("environment", "observation", "run", "pytest -q", 1, "toolu_1")
    assert got["u3"] == ("environment", "observation", "edit", None, None, "toolu_2")
    assert got["u4"][4:] == (0, "toolu_3")
    assert got["toolu_4"][:3] == ("agent", "action", "delegate")
    assert got["u6"][2:] == ("delegate", None, None, "toolu_4")
    assert [got[i][:3] for i in ("s1", "toolu_s1", "s3", "s4")] == [
        ("subagent", "action", "message"),
        ("subagent", "action", "run"),
        ("environment", "observation", "run"),
        ("subagent", "action", "message"),
    ]
    assert [got[i][:3] for i in ("u7", "u8", "c1", "u9", "u10", "u12", "a10")] == [
        ("environment", "action", "system"),
        ("user", "action", "message"),
        ("environment", "action", "condensation"),
        ("environment", "action", "system"),
        ("environment", "observation", "other"),
        ("user", "action", "stop"),
        ("environment", "observation", "error"),
    ]
    # the streamed message: thinking, text, call; only the call's line says tool_use, so the text does not wait
    assert events(wh, "event_id, name, wait_for_response")[2:5] == [
        ("a1", "think", None),
        ("a2", "message", None),
        ("toolu_1", "run", None),
    ]


def test_git_and_test_features_read_bash_calls(wh):
    ingest_paths(wh, FIX / "session.jsonl")
    build_user_text(wh)
    build_event_features(wh)
    got = wh.frame(
        "SELECT user_message_count, n_segments, git_commit_count, git_push_count, shell_commands, failed_commands,"
        " test_runs, test_failures, file_edits, error_observations, condensations, duration_seconds,"
        " llm_cost_usd, llm_prompt_tokens, llm_completion_tokens FROM features.event_features"
    ).row(0)
    # commit at line 8, the sub-agent's push at 14; runs 4, 8, 14; 5 failed; tests 4 (failed) and 8; edit 6;
    # error 27; condensation 21; 09:00:00 to 09:03:11; usage from the session's metadata (no cost recorded)
    assert got == (4, 4, 1, 1, 3, 1, 2, 1, 1, 1, 1, 191.0, None, 65546, 332)


def test_several_blocks_per_line_and_cost(wh):
    ingest_paths(wh, FIX / "old_version.jsonl")
    assert events(wh, "event_id, name, cause, wait_for_response") == [
        ("o1", "message", None, None),
        ("o2", "message", None, False),
        ("toolu_o1", "run", None, None),
        ("toolu_o2", "read", None, None),
        ("o3", "run", "toolu_o1", None),
        ("o3:1", "read", "toolu_o2", None),
        ("o4", "message", None, True),
    ]
    row = session(wh)
    assert (row["session_id"], row["n_user_messages"], row["n_segments"], row["n_shell_commands"]) == (
        "cc-old-1",
        1,
        1,
        1,
    )
    usage = row["metadata"]["llm_usage"]
    assert usage["cost_usd"] == pytest.approx(0.0028)
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (260, 52)
    assert row["metadata"]["model"] == "claude-3-7-sonnet-20250219"
    build_user_text(wh)
    build_event_features(wh)
    cost, prompt, completion = wh.frame(
        "SELECT llm_cost_usd, llm_prompt_tokens, llm_completion_tokens FROM features.event_features"
    ).row(0)
    assert (cost, prompt, completion) == (pytest.approx(0.0028), 260, 52)


def test_a_sub_agent_log_is_its_own_session(wh):
    ingest_paths(wh, FIX / "agent-a1b2c3.jsonl")
    row = session(wh)
    assert (row["session_id"], row["n_events"], row["n_user_messages"], row["n_segments"]) == (
        "cc-session-1/agent-a1b2c3",
        4,
        0,
        0,
    )
    assert row["metadata"]["subagent"] is True
    assert row["metadata"]["llm_usage"] == {"cost_usd": None, "prompt_tokens": 608, "completion_tokens": 31}
    assert [r[0] for r in events(wh, "source")] == ["subagent", "subagent", "environment", "subagent"]


def test_a_project_folder_is_one_drop_and_ids_stay_distinct(wh):
    # the four fixture files: the sub-agent's log shares its parent's sessionId and must not replace it
    ingest_paths(wh, FIX)
    assert sorted(r[0] for r in rows(wh, "SELECT session_id FROM staging.sessions")) == [
        "cc-bad-1",
        "cc-old-1",
        "cc-session-1",
        "cc-session-1/agent-a1b2c3",
    ]
    assert_reconciled(wh, FIX.name)


def test_bad_lines_are_kept_or_quarantined(wh):
    ingest_paths(wh, FIX / "bad_lines.jsonl")
    assert events(wh, "event_id, source, kind, name, original_name, cause, exit_code, segment_index") == [
        ("b1", "user", "action", "message", None, None, None, 0),
        ("b2", "unknown", "other", "other", "hologram", None, None, 0),  # a line of unknown type
        ("b3", "environment", "observation", "other", "tool_result", None, None, 0),  # its call never appeared
        ("b4", "unknown", "other", "other", "user", None, None, 0),  # message is not an object
        ("b5", "agent", "other", "other", "hologram_block", None, None, 0),
        ("b5:1", "agent", "action", "message", None, None, None, 0),
        ("b6", "user", "action", "message", None, None, None, 1),
    ]
    quarantined = rows(wh, "SELECT record_type, event_index, reason FROM raw.quarantine ORDER BY event_index")
    assert [q[:2] for q in quarantined] == [("event", 5), ("event", 6)]
    assert quarantined[0][2] == "event is not a JSON object"
    assert quarantined[1][2].startswith("not valid JSON")
    row = session(wh)
    assert (row["session_id"], row["n_user_messages"], row["n_segments"]) == ("cc-bad-1", 2, 2)
    assert_reconciled(wh, "bad_lines.jsonl")


def test_a_file_starting_with_a_line_type_we_do_not_know_is_still_read(wh, tmp_path):
    # a newer Claude Code may start a file with a line type this adapter does not know; its sessionId is enough
    # to recognize the file, and the line is kept as ``other``: 2 events, 1 user message
    path = tmp_path / "newer.jsonl"
    lines = [
        {"type": "brand-new-record", "sessionId": "cc-new-1", "timestamp": "2026-01-01T00:00:00Z"},
        {"type": "user", "sessionId": "cc-new-1", "uuid": "n1", "message": {"role": "user", "content": "hi"}},
    ]
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    ingest_paths(wh, path)
    assert events(wh, "session_id, kind, original_name") == [
        ("cc-new-1", "other", "brand-new-record"),
        ("cc-new-1", "action", None),
    ]
    assert session(wh)["n_user_messages"] == 1
