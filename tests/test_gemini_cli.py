"""Gemini CLI chat recordings (``ingest/gemini_cli.py``) on the real sample and on our fixtures. Every count below
was worked out by reading each line of the files; lines are numbered from 0.

The shapes are Gemini CLI's own: google-gemini/gemini-cli ``packages/core/src/services/chatRecordingTypes.ts``
(``MessageRecord``, ``ToolCallRecord``, ``TokensSummary``, ``RewindRecord``, ``MetadataUpdateRecord``,
``PartialMetadataRecord``) and ``chatRecordingService.ts`` (``loadConversationRecord``: a repeated id replaces its
message, ``$rewindTo`` drops its target and what follows, ``rewindTo``; tool responses as ``user`` messages,
``core/geminiChat.ts``) at commit 5411f113cafae26161b4969b0237b8e1e024e2c2; the legacy one-JSON session is
``ConversationRecord`` in ``chatRecordingService.ts`` at 45100f7c0e4e972555a613bb2279af385327fc01 (the parent of
f7449135, "migrate chat recording to JSONL streaming"). ``System: Please continue.`` is the text
``core/client.ts`` sent before 9380e13f6db0a22ae05adae0e1c667b23a6f8dec; ``Exit Code: N`` is ``tools/shell.ts``.

Sample (``../shared/samples/gemini_cli/vibecodingtracker_gemini.jsonl``, Mai0313/VibeCodingTracker, MIT): the
current JSONL shape. 28 lines: 0 metadata (session ``0ab84937-…``, ``kind: main``), 11 ``$set`` lines; messages
1 ``info``; 3 ``user`` (content the expanded ``/init`` prompt, ``displayContent`` ``/init``); gemini 5/7
(``52e62e67``: 1 thought, then 5 tool calls), 8/10 (``a4173396``: 2 thoughts, 3 calls), 11/13 (``cda8a342``: 1
thought, 1 call), 14/16 (``edf94f05``: text, 1 call): each written twice, the second time with its tool calls, so
each counts once; 17 ``user`` ``System: Please continue.`` (the CLI's, not the user's); 19 (``0752be32``: 1
thought, text); 21 ``user`` (the user's request, in Chinese); 23/25 (``42a121a5``: 2 thoughts, 2 calls); 26
``info`` ``Request cancelled.``. Events: 1 + 1 + (1 + 10) + (2 + 6) + (1 + 2) + (1 + 2) + 1 + 2 + 1 + (2 + 4) + 1
= 38; user messages 3 and 21 (2), segments 2. Tokens of the six gemini messages (input + tool, output +
thoughts): prompt 13906 + 29082 + 38324 + 40914 + 40122 + 40238 = 202586, completion (185 + 306) + (89 + 642) +
(1172 + 232) + (351 + 161) + (89 + 348) + (266 + 452) = 4293 (their ``total``s sum to 206879 = 202586 + 4293).
Five of them are ``gemini-3-flash-preview``, one ``gemini-3.1-pro-preview``. The licence beside it is no JSON: one
quarantined record. Before this module: 0 sessions and 29 quarantined records ("not a record PULSE knows").
"""

from __future__ import annotations

from datetime import datetime

import pytest

from pulse_pipeline import tables
from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.features.user_text import build_user_text

from .helpers import FIXTURES, SAMPLES, assert_reconciled, events, ingest_paths, needs_samples, rows, session

SAMPLE_DIR = SAMPLES / "gemini_cli"
SAMPLE = SAMPLE_DIR / "vibecodingtracker_gemini.jsonl"
FIX = FIXTURES / "gemini_cli"
CURRENT = FIX / "session-2026-05-01T10-00-5e551011.jsonl"
LEGACY = FIX / "session-2025-09-20T08-00-1e9ac7e5.json"

needs_sample = pytest.mark.skipif(
    not SAMPLE.is_file(), reason=f"the real Gemini CLI sample is not at {SAMPLE} (it lives beside the repo)"
)


# --- the real sample ----------------------------------------------------------------------------------------------


@needs_samples
@needs_sample
def test_sample_is_one_session(wh):
    ingest_paths(wh, SAMPLE)
    row = session(wh)
    assert (row["session_id"], row["source_format"]) == ("0ab84937-9fe7-4284-986a-33c832af0b6a", "gemini_cli")
    assert (row["n_events"], row["n_user_messages"], row["n_segments"], row["n_shell_commands"]) == (38, 2, 2, 0)
    assert row["metadata"] == {
        "llm_usage": {"cost_usd": None, "prompt_tokens": 202586, "completion_tokens": 4293},
        "model": "gemini-3-flash-preview",
        "project_hash": "9da8b3dfb8655182ac1f0e66601c367e34f8d18447a29759eeba4d7e45dc60ea",
        "start_time": "2026-04-23T12:52:52.759Z",
        "last_updated": "2026-04-23T12:58:35.591Z",
        "kind": "main",
    }
    assert wh.count(tables.QUARANTINE) == 0
    assert_reconciled(wh, SAMPLE.name)


@needs_samples
@needs_sample
def test_sample_user_messages_are_the_users_words(wh):
    ingest_paths(wh, SAMPLE)
    said = rows(wh, "SELECT seq, event_id, text FROM raw.events WHERE source = 'user' ORDER BY seq")
    assert [(seq, event_id) for seq, event_id, _ in said] == [
        (1, "8828dd6a-d778-464f-8160-eb2e1604a122"),
        (30, "231038fa-bbfb-4b43-9a30-b8b7fcf54895"),
    ]
    assert said[0][2] == "/init"  # what the user typed (displayContent), not the prompt the CLI expanded it to
    assert said[1][2].startswith("幫我做一個小修改")
    # the continuation the CLI sent after a tool call is its own, not the user's
    assert rows(wh, "SELECT seq, source, name, text FROM raw.events WHERE event_id LIKE '1b8df650%'") == [
        (27, "environment", "system", "System: Please continue.")
    ]


@needs_samples
@needs_sample
def test_sample_tool_calls_once_each(wh):
    # the messages written twice (without, then with their tool calls) give each call once, with its result
    ingest_paths(wh, SAMPLE)
    calls = rows(wh, "SELECT name, original_name FROM raw.events WHERE kind = 'action' AND source = 'agent'")
    names = sorted(name if name != "other" else original for name, original in calls if name != "think")
    assert names == sorted(["read"] * 7 + ["write", "edit"] + ["update_topic"] * 3 + ["message"] * 2)
    answered = rows(wh, "SELECT count(*), count(DISTINCT cause) FROM raw.events WHERE kind = 'observation'")
    assert answered == [(12, 12)]
    assert rows(wh, "SELECT count(*) FROM raw.events WHERE name = 'think'") == [(7,)]  # 1 + 2 + 1 + 0 + 1 + 2


@needs_samples
@needs_sample
def test_sample_folder_reconciles(wh):
    ingest_paths(wh, SAMPLE_DIR)
    assert rows(wh, "SELECT count(*) FROM staging.sessions") == [(1,)]
    assert rows(wh, "SELECT record_type, reason LIKE 'not JSON%' FROM raw.quarantine") == [("unknown", True)]
    assert_reconciled(wh, SAMPLE_DIR.name)


# --- fixtures: the current JSONL ----------------------------------------------------------------------------------
# session-2026-05-01T10-00-5e551011.jsonl, 21 lines: 0 metadata; 1 info; 2 user m-u1; 3 $set; 4 and 5 gemini m-g1
# (5 adds its call-1, pytest -q, "Exit Code: 1"); 6 a tool response recorded as a user message (call-1, already
# answered); 7 m-g2 (call-2 replace, call-3 pytest && git commit, no exit line: 0); 8 m-g3 text; 9 user m-u2 and
# 10 m-g4 (call-4 cancelled), both dropped by 11 $rewindTo m-u2; 12 user m-u3; 13 m-g5 (call-5 git push, exit
# 128, gemini-2.5-flash); 14 "Please continue."; 15 m-g6 text; 16 error; 17 truncated JSON; 18 $set summary; 19 an
# unknown record; 20 warning.

CURRENT_EVENTS = [
    ("m-info", "environment", "state", "info", None, None, None),
    ("m-u1", "user", "action", "message", None, None, 0),
    ("m-g1", "agent", "action", "think", None, None, 0),
    ("call-1", "agent", "action", "run", None, None, 0),
    ("call-1:result", "environment", "observation", "run", "call-1", 1, 0),
    ("m-fr1", "environment", "state", "function_response", "call-1", None, 0),
    ("call-2", "agent", "action", "edit", None, None, 0),
    ("call-2:result", "environment", "observation", "edit", "call-2", None, 0),
    ("call-3", "agent", "action", "run", None, None, 0),
    ("call-3:result", "environment", "observation", "run", "call-3", 0, 0),
    ("m-g3", "agent", "action", "message", None, None, 0),
    ("m-u3", "user", "action", "message", None, None, 1),
    ("call-5", "agent", "action", "run", None, None, 1),
    ("call-5:result", "environment", "observation", "run", "call-5", 128, 1),
    ("m-c1", "environment", "action", "system", None, None, 1),
    ("m-g6", "agent", "action", "message", None, None, 1),
    ("m-err", "environment", "observation", "error", None, None, 1),
    ("#17", "unknown", "other", "other", None, None, 1),
    ("m-warn", "environment", "state", "warning", None, None, 1),
]


def test_current_file_event_by_event(wh):
    ingest_paths(wh, CURRENT)
    assert events(wh, "event_id, source, kind, name, cause, exit_code, segment_index") == CURRENT_EVENTS
    row = session(wh)
    assert (row["session_id"], row["source_format"]) == ("5e551011-aaaa-4bbb-8ccc-000000000001", "gemini_cli")
    assert (row["n_events"], row["n_user_messages"], row["n_segments"], row["n_shell_commands"]) == (19, 2, 2, 3)
    assert (row["started_at"], row["ended_at"]) == (datetime(2026, 5, 1, 10, 0, 1), datetime(2026, 5, 1, 10, 2, 1))


def test_a_rewind_drops_its_target_and_what_follows(wh):
    ingest_paths(wh, CURRENT)
    ids = [r[0] for r in events(wh, "event_id")]
    assert "m-u2" not in ids and "call-4" not in ids  # the request the user took back, and its answer
    assert session(wh)["metadata"]["rewound_messages"] == 2


def test_current_file_usage_and_metadata(wh):
    # tokens once per message id, the rewound m-g4 included (spent): prompt (input + tool) 1000 + 1510 + 1700 +
    # 1800 + 1900 + 2000 = 9910; completion (output + thoughts) 70 + 80 + 35 + 40 + 25 + 15 = 265; the model of
    # four messages of six is gemini-2.5-pro; the summary and lastUpdated come from the $set lines
    ingest_paths(wh, CURRENT)
    assert session(wh)["metadata"] == {
        "llm_usage": {"cost_usd": None, "prompt_tokens": 9910, "completion_tokens": 265},
        "model": "gemini-2.5-pro",
        "project_hash": "ph1",
        "start_time": "2026-05-01T10:00:00.000Z",
        "last_updated": "2026-05-01T10:01:41.000Z",
        "kind": "main",
        "summary": "Fix the add function and push",
        "rewound_messages": 2,
    }


def test_a_line_that_is_not_json_is_quarantined_by_its_number(wh):
    ingest_paths(wh, CURRENT)
    assert rows(
        wh, "SELECT record_type, record_index, event_index, reason LIKE 'not valid JSON%' FROM raw.quarantine"
    ) == [("event", 17, 17, True)]
    assert_reconciled(wh, CURRENT.name)


def test_features_read_the_session(wh):
    ingest_paths(wh, CURRENT)
    build_user_text(wh)
    build_event_features(wh)
    got = wh.frame(
        "SELECT user_message_count, n_segments, shell_commands, failed_commands, git_commit_count, git_push_count,"
        " test_runs, test_failures, file_edits, error_observations, llm_cost_usd, llm_prompt_tokens,"
        " llm_completion_tokens FROM features.event_features"
    ).row(0)
    # runs call-1 (exit 1), call-3 (0, a test run and a commit), call-5 (a push, exit 128)
    assert got == (2, 2, 3, 2, 1, 1, 2, 1, 1, 1, None, 9910, 265)
    # the user's two messages, not the tool response recorded as a user message nor the CLI's continuation
    assert [r[0] for r in rows(wh, "SELECT text FROM features.user_text ORDER BY ALL")] == [
        "Fix the failing test in calc.py",
        "Now push it to origin main",
    ]


# --- fixtures: the legacy one-JSON session, a sub-agent, a checkpoint ---------------------------------------------


def test_legacy_session_file(wh):
    # messages: l-u1; l-g1 (read_file, an MCP call, a cancelled write_file); l-g2 text; l-u2 (/init shown);
    # l-g3 (text, write_file); l-i1 info. Tokens 500 + 700 + 900 = 2100 and 40 + 72 + 100 = 212.
    ingest_paths(wh, LEGACY)
    assert events(wh, "event_id, source, kind, name, original_name, cause, segment_index") == [
        ("l-u1", "user", "action", "message", None, None, 0),
        ("read-1", "agent", "action", "read", None, None, 0),
        ("read-1:result", "environment", "observation", "read", None, "read-1", 0),
        ("mcp-1", "agent", "action", "call_tool_mcp", None, None, 0),
        ("mcp-1:result", "environment", "observation", "mcp", None, "mcp-1", 0),
        ("write-1", "agent", "action", "write", None, None, 0),
        ("write-1:result", "environment", "observation", "user_rejected", None, "write-1", 0),
        ("l-g2", "agent", "action", "message", None, None, 0),
        ("l-u2", "user", "action", "message", None, None, 1),
        ("l-g3", "agent", "action", "message", None, None, 1),
        ("write-2", "agent", "action", "write", None, None, 1),
        ("write-2:result", "environment", "observation", "write", None, "write-2", 1),
        ("l-i1", "environment", "state", "info", None, None, 1),
    ]
    assert rows(wh, "SELECT text FROM raw.events WHERE event_id IN ('read-1', 'l-u2') ORDER BY seq") == [
        ("/repo/utils.py",),
        ("/init",),
    ]
    row = session(wh)
    assert (row["session_id"], row["source_format"], row["n_user_messages"], row["n_segments"]) == (
        "1e9ac7e5-0000-4000-8000-000000000002",
        "gemini_cli",
        2,
        2,
    )
    assert row["metadata"]["llm_usage"] == {"cost_usd": None, "prompt_tokens": 2100, "completion_tokens": 212}
    assert row["metadata"]["model"] == "gemini-2.5-pro"
    assert_reconciled(wh, LEGACY.name)


def test_a_sub_agent_file_has_no_user_message(wh):
    ingest_paths(wh, FIX / "subagent-sub77.jsonl")
    row = session(wh)
    assert (row["session_id"], row["n_events"], row["n_user_messages"], row["n_segments"]) == ("sub-77", 4, 0, 0)
    assert events(wh, "source, name") == [
        ("subagent", "message"),
        ("subagent", "read"),
        ("environment", "read"),
        ("subagent", "message"),
    ]
    assert (row["metadata"]["kind"], row["metadata"]["directories"]) == ("subagent", ["/repo"])
    assert row["metadata"]["llm_usage"] == {"cost_usd": None, "prompt_tokens": 650, "completion_tokens": 18}


def test_a_checkpoint_keeps_what_the_user_said(wh):
    # the $set with messages (a compression) replaces c-g1 in place and adds its summary turn at the end; c-u1,
    # which the compression left out of the model's history, is still the user's first message
    ingest_paths(wh, FIX / "checkpoint.jsonl")
    assert events(wh, "event_id, source, name, segment_index") == [
        ("c-u1", "user", "message", 0),
        ("c-i1", "environment", "info", 0),
        ("c-g1", "agent", "message", 0),
        ("c-s1", "environment", "condensation", 0),
        ("c-u2", "user", "message", 1),
        ("c-g2", "agent", "message", 1),
    ]
    row = session(wh)
    assert row["metadata"]["llm_usage"] == {"cost_usd": None, "prompt_tokens": 250, "completion_tokens": 15}
    assert "rewound_messages" not in row["metadata"]


def test_fixture_folder_is_one_drop_of_four_sessions(wh):
    # logs.json (Gemini CLI's prompt log: two entries {sessionId, messageId, type, message}) has a Claude Code line's
    # shape; read as one, it was a fifth session under the first one's id. Each entry is a record quarantined.
    ingest_paths(wh, FIX)
    assert sorted(r[0] for r in rows(wh, "SELECT session_id FROM staging.sessions")) == [
        "1e9ac7e5-0000-4000-8000-000000000002",
        "5e551011-aaaa-4bbb-8ccc-000000000001",
        "cp-1",
        "sub-77",
    ]
    assert rows(wh, "SELECT DISTINCT source_format FROM raw.sessions") == [("gemini_cli",)]
    assert rows(
        wh,
        "SELECT source_file, record_index, record_type, reason LIKE 'Gemini CLI''s prompt log%' FROM raw.quarantine"
        " ORDER BY ALL",
    ) == [
        ("logs.json", 0, "unknown", True),
        ("logs.json", 1, "unknown", True),
        ("session-2026-05-01T10-00-5e551011.jsonl", 17, "event", False),
    ]
    assert_reconciled(wh, FIX.name)


def test_a_rewind_to_an_unknown_message_drops_them_all(tmp_path, wh):
    # Gemini CLI's loader clears the conversation when the target is not in it; the metadata and later messages stay
    lines = [
        '{"sessionId": "rw-1", "projectHash": "p", "startTime": "2026-05-03T08:00:00.000Z", "kind": "main"}',
        '{"id": "a", "timestamp": "2026-05-03T08:00:01.000Z", "type": "user", "content": "first"}',
        '{"id": "b", "timestamp": "2026-05-03T08:00:02.000Z", "type": "gemini", "content": "one",'
        ' "tokens": {"input": 10, "output": 2, "cached": 0, "thoughts": 0, "tool": 0, "total": 12}}',
        '{"$rewindTo": "no-such-id"}',
        '{"id": "c", "timestamp": "2026-05-03T08:00:03.000Z", "type": "user", "content": "second"}',
    ]
    path = tmp_path / "session-rw.jsonl"
    path.write_text("\n".join(lines) + "\n")
    ingest_paths(wh, path)
    assert events(wh, "event_id, source, name") == [("c", "user", "message")]
    row = session(wh)
    assert row["metadata"]["rewound_messages"] == 2
    assert row["metadata"]["llm_usage"] == {"cost_usd": None, "prompt_tokens": 10, "completion_tokens": 2}
