"""Cline, Roo Code and Kilo Code task folders (``ingest/cline.py``) on fixtures written from each tool's own source.
Every count below was worked out by reading each message of the fixtures; messages are numbered from 0.

Sources the fixtures follow:

- cline/cline at 24dcd9ea7c5b037e96080ec56c56b5dc9bca201e: ``src/shared/ExtensionMessage.ts`` (``ClineMessage``
  ``{ts, type: ask|say, ask, say, text, modelInfo}``, the ``ClineAsk`` and ``ClineSay`` types, ``ClineApiReqInfo``
  ``{request, tokensIn, tokensOut, cacheWrites, cacheReads, cost}``, ``ClineAskQuestion`` ``{question, options,
  selected}``), ``src/core/task/index.ts`` (``startTask``: ``say("text", task)``), ``src/shared/getApiMetrics.ts``
  (sums ``api_req_started`` and ``deleted_api_reqs``), ``src/core/storage/disk.ts`` (``GlobalFileNames``), and
  ``src/core/context/context-tracking/ContextTrackerTypes.ts`` (``TaskMetadata`` ``{files_in_context, model_usage
  [{ts, model_id, model_provider_id, mode}], environment_history [{..., cline_version}]}``);
- cline/cline at 9ee618111d58630fea30b27439216448225458e0: ``src/core/task/index.ts`` (``startTask``:
  ``say("task", task)``, since commit 6cff60b53b8df8d893ec346583a192f775caf401),
  ``src/core/task/tools/handlers/AskFollowupQuestionToolHandler.ts`` (a picked option is written into the
  followup's JSON as ``selected``; typed text is a ``say: user_feedback``),
  ``src/core/context/context-tracking/ModelContextTracker.ts`` (one ``model_usage`` entry per change of model,
  provider or mode), ``src/shared/messages/metrics.ts`` (``modelInfo {modelId, providerId, mode}``);
- RooCodeInc/Roo-Code at cb836567180a3ff1da6d082f3178b90c3bd22a70: ``packages/types/src/message.ts`` (its say types,
  ``apiProtocol``, ``isAnswered``), ``src/core/task/Task.ts`` (``say("text", task)``), ``src/shared/globalFileNames.ts``
  (``history_item.json``), ``src/core/environment/getEnvironmentDetails.ts`` (``<model>{modelId}</model>``);
- Kilo-Org/kilocode at 0fc86cec2299b333cb21da87b649003b19319ecc: ``packages/types/src/message.ts`` (Roo's types
  plus ``payment_required_prompt``, ``invalid_model``, ``checkpoint_restore``, ``browser_session_status``).

Fixtures (``tests/fixtures/cline/``):

- ``globalStorage/saoudrizwan.claude-dev/tasks/1767261600000`` (Cline, the task as message 0 ``say: text``): 19
  messages, 20 events (10, a followup whose option ``No`` was picked, is the question and the user's answer
  ``1767261635000:selected``). User messages 0, 10's answer, 14 (``user_feedback``); tool results (8, the command
  output) are not. Segments: 0-10 (closed by the question), 10's answer-12 (``completion_result``), 14-17; 13 and 18
  (``ask: completion_result``) are outside. One command (7, ``pytest -q``); edits 5 and 16. Six
  ``api_req_started``: tokensIn 1200+800+400+300+250+500 = 3450, tokensOut 150+220+90+60+180+120 = 820, cacheWrites
  3000+500+200+100+0+300 = 4100, cacheReads 0+3000+3500+3700+3800+3800 = 17800, cost 0.0156+0.0061+0.0035+0.0022+
  0.0041+0.0043 = 0.0358; prompt tokens 3450+4100+17800 = 25350. Model: ``model_usage``'s last entry
  ``claude-sonnet-4-5-20250929`` (two entries, plan then act). 10:00:00 to 10:01:40 UTC on 2026-01-01.
- ``.../tasks/1767265200000`` (Cline, the same task with ``gpt-5``, the task as ``say: task``, ``modelInfo`` on each
  request): 11 messages, 11 events, 1 user message, 1 segment (0-9), one command, one new file; tokensIn
  5200+5600+6100 = 16900, tokensOut 300+400+150 = 850, cacheWrites 0 (only message 1 names it), cacheReads
  0+4800+5400 = 10200, cost 0.0095+0.0041+0.0028 = 0.0164; prompt 27100.
- ``globalStorage/rooveterinaryinc.roo-cline/tasks/0b6f3c1e-…`` (Roo Code): 14 events; user messages 0 and 9
  (``user_feedback`` after the followup 8, whose ``suggest`` list is Roo's and holds no choice); segments 0-8, 9-12;
  one command (3); tokensIn 2000+300+200+350 = 2850, tokensOut 100+250+80+300 = 730, cacheWrites 1500+400+0+300 =
  2200, cacheReads 0+1500+1900+1900 = 5300, cost 0.0123+0.0063+0.0024+0.0061 = 0.0271; prompt 10350. No model in
  its task files but the ``<model>claude-sonnet-4-5</model>`` of its environment details.
- ``globalStorage/rooveterinaryinc.roo-cline/tasks/7c8d9e0f-…`` (a Roo Code subtask: its ``history_item.json`` names
  ``parentTaskId`` 0b6f3c1e-…, as ``Task.startSubtask``/``taskMetadata`` write it): 7 events; message 0 is the task
  the parent's agent wrote (an agent message), so the one user message is 4 (``user_feedback``), one segment 4-6;
  tokensIn 900+150 = 1050, tokensOut 400+120 = 520, cacheWrites 800+100 = 900, cacheReads 0+800 = 800, cost
  0.0117+0.0024 = 0.0141; prompt 2750.
- ``globalStorage/kilocode.kilo-code/tasks/5e1d2c3b-…`` (Kilo Code): 8 events, 1 user message, 1 segment, no
  command, one error (5); tokensIn 3000+3400 = 6400, tokensOut 200+150 = 350, no cache figures, cost
  0.0042+0.0039 = 0.0081; model ``openai/gpt-4.1`` from the environment details.
- ``globalStorage/saoudrizwan.claude-dev/state`` and ``settings``: Cline's own files, one quarantine row each.
- ``bad/tasks``: ``1767300000000`` (``ui_messages.json`` an object: the task quarantined), ``1767300100000`` (4
  messages: 1 an ``api_req_started`` whose text is cut-off JSON, 2 the number 42; ``task_metadata.json`` cut off), and
  ``1767300200000`` (no ``ui_messages.json``).
"""

from __future__ import annotations

import shutil

import orjson
import pytest

from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.features.user_text import build_user_text
from pulse_pipeline.ingest.cline import format_from_messages

from .helpers import FIXTURES, assert_reconciled, ingest_paths, rows

FIX = FIXTURES / "cline"
STORAGE = FIX / "globalStorage"
CLINE_TASKS = STORAGE / "saoudrizwan.claude-dev" / "tasks"
ROO_TASK = STORAGE / "rooveterinaryinc.roo-cline" / "tasks" / "0b6f3c1e-7d2a-4c5e-9f10-3a4b5c6d7e8f"
KILO_TASK = STORAGE / "kilocode.kilo-code" / "tasks" / "5e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a6b"
TASK = "Add a --verbose flag to cli.py and a test for it"

# session id -> (format, events, user messages, segments, shell commands, model, cost, prompt, completion)
EXPECTED = {
    "1767261600000": ("cline", 20, 3, 3, 1, "claude-sonnet-4-5-20250929", 0.0358, 25350, 820),
    "1767265200000": ("cline", 11, 1, 1, 1, "gpt-5", 0.0164, 27100, 850),
    "0b6f3c1e-7d2a-4c5e-9f10-3a4b5c6d7e8f": ("roo_code", 14, 2, 2, 1, "claude-sonnet-4-5", 0.0271, 10350, 730),
    "5e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a6b": ("kilo_code", 8, 1, 1, 0, "openai/gpt-4.1", 0.0081, 6400, 350),
    "7c8d9e0f-1a2b-4c3d-8e4f-5a6b7c8d9e0f": ("roo_code", 7, 1, 1, 0, "claude-sonnet-4-5", 0.0141, 2750, 520),
}
SUBTASK = "7c8d9e0f-1a2b-4c3d-8e4f-5a6b7c8d9e0f"


def _sessions(wh) -> dict[str, tuple]:
    found = {}
    for sid, fmt, n, users, segs, shell, meta in rows(
        wh,
        "SELECT session_id, source_format, n_events, n_user_messages, n_segments, n_shell_commands, metadata_json"
        " FROM raw.sessions",
    ):
        meta = orjson.loads(meta)
        usage = meta["llm_usage"]
        found[sid] = (fmt, n, users, segs, shell, meta.get("model"), usage["cost_usd"]) + (
            usage["prompt_tokens"],
            usage["completion_tokens"],
        )
    return found


def test_a_whole_global_storage_folder_is_one_drop_of_five_tasks(wh):
    ingest_paths(wh, STORAGE)
    found = _sessions(wh)
    assert set(found) == set(EXPECTED)
    for sid, expected in EXPECTED.items():
        *counts, cost, prompt, completion = found[sid]
        assert tuple(counts) == expected[:6], sid
        assert cost == pytest.approx(expected[6]), sid
        assert (prompt, completion) == expected[7:], sid
    # the same task run with two models: two sessions, told apart by their model
    models = rows(
        wh, "SELECT json_extract_string(metadata_json, '$.model') FROM raw.sessions WHERE source_format = 'cline'"
    )
    assert sorted(m for (m,) in models) == ["claude-sonnet-4-5-20250929", "gpt-5"]
    # Cline's own state and settings folders: one row each, with the reason; the drop reconciles
    quarantined = rows(wh, "SELECT source_file, record_type, reason FROM raw.quarantine ORDER BY 1")
    assert [(f, t) for f, t, _ in quarantined] == [
        ("saoudrizwan.claude-dev/settings", "unknown"),
        ("saoudrizwan.claude-dev/state", "unknown"),
    ]
    assert all("not a task" in reason for _, _, reason in quarantined)
    assert_reconciled(wh, "globalStorage")


def test_usage_and_model_kept_in_the_session_metadata(wh):
    ingest_paths(wh, CLINE_TASKS)
    (meta,) = rows(wh, "SELECT metadata_json FROM raw.sessions WHERE session_id = '1767261600000'")[0]
    meta = orjson.loads(meta)
    assert meta["cline_usage"] == {
        "tokens_in": 3450,
        "tokens_out": 820,
        "cache_writes": 4100,
        "cache_reads": 17800,
        "cost": pytest.approx(0.0358),
        "api_requests": 6,
    }
    assert [(u["model_id"], u["mode"]) for u in meta["model_usage"]] == [
        ("claude-sonnet-4-5-20250929", "plan"),
        ("claude-sonnet-4-5-20250929", "act"),
    ]
    assert meta["agent_version"] == "3.41.0"
    (meta,) = rows(wh, "SELECT metadata_json FROM raw.sessions WHERE session_id = '1767265200000'")[0]
    assert orjson.loads(meta)["cline_usage"]["cache_writes"] == 0  # named once, as 0: known, not missing


def test_user_messages_are_the_task_the_picked_option_and_the_feedback(wh):
    ingest_paths(wh, CLINE_TASKS / "1767261600000")
    users = rows(wh, "SELECT event_id, text FROM raw.events WHERE source = 'user' AND name = 'message' ORDER BY seq")
    assert users == [
        ("1767261600000", TASK),
        ("1767261635000:selected", "No"),
        ("1767261690000", "Please also mention the flag in the README."),
    ]
    # the command's output is the environment's, never the user's
    (output,) = rows(wh, "SELECT source, kind, name FROM raw.events WHERE text LIKE '%1 failed, 3 passed%'")
    assert output == ("environment", "observation", "run")


def test_each_user_message_opens_a_segment(wh):
    ingest_paths(wh, CLINE_TASKS / "1767261600000")
    got = rows(wh, "SELECT segment_index, segment_close FROM raw.events ORDER BY seq")
    assert [s for s, _ in got] == [0] * 11 + [1, 1, 1, None, 2, 2, 2, 2, None]
    assert [(i, c) for i, (_, c) in enumerate(got) if c] == [
        (10, "awaiting_response"),
        (13, "finish"),
        (18, "finish"),
    ]
    first, last = rows(wh, "SELECT started_at, ended_at FROM raw.sessions")[0]
    assert (first.isoformat(), last.isoformat()) == ("2026-01-01T10:00:00", "2026-01-01T10:01:40")


def test_features_read_the_task(wh):
    ingest_paths(wh, CLINE_TASKS / "1767261600000")
    build_user_text(wh)
    build_event_features(wh)
    got = wh.frame(
        "SELECT user_message_count, n_segments, shell_commands, test_runs, file_edits, duration_seconds,"
        " llm_cost_usd, llm_prompt_tokens, llm_completion_tokens FROM features.event_features"
    ).row(0)
    assert got[:6] == (3, 3, 1, 1, 2, 100.0)
    assert got[6] == pytest.approx(0.0358)
    assert got[7:] == (25350, 820)


def test_the_tool_is_told_by_the_messages_when_the_path_does_not_name_it(wh, tmp_path):
    """A ``tasks`` folder copied on its own names no extension: Roo Code by its ``apiProtocol``/``history_item.json``,
    Kilo Code by one of its own ask types, Cline otherwise."""
    tasks = tmp_path / "tasks"
    shutil.copytree(ROO_TASK, tasks / ROO_TASK.name)
    shutil.copytree(CLINE_TASKS / "1767265200000", tasks / "1767265200000")
    ingest_paths(wh, tasks)
    assert sorted(rows(wh, "SELECT session_id, source_format FROM raw.sessions")) == [
        ("0b6f3c1e-7d2a-4c5e-9f10-3a4b5c6d7e8f", "roo_code"),
        ("1767265200000", "cline"),
    ]
    assert format_from_messages([{"ts": 1, "type": "ask", "ask": "invalid_model"}], False) == "kilo_code"
    assert format_from_messages([{"ts": 1, "type": "say", "say": "text", "apiProtocol": "openai"}], False) == "roo_code"
    assert format_from_messages([{"ts": 1, "type": "say", "say": "task"}], False) == "cline"


def test_a_single_task_folder_is_a_drop(wh):
    ingest_paths(wh, KILO_TASK)
    # the drop is the task folder itself: no extension id in its path, so the messages tell (Roo's apiProtocol)
    assert rows(wh, "SELECT session_id, source_format, n_events FROM raw.sessions") == [
        ("5e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a6b", "roo_code", 8)
    ]
    assert_reconciled(wh, KILO_TASK.name)


def test_malformed_pieces_are_quarantined_with_their_reason(wh):
    ingest_paths(wh, FIX / "bad")
    assert rows(wh, "SELECT session_id, n_events, n_user_messages FROM raw.sessions") == [("1767300100000", 2, 1)]
    got = rows(
        wh,
        "SELECT source_file, record_type, event_index, reason FROM raw.quarantine ORDER BY source_file, event_index",
    )
    assert [(f, t, i) for f, t, i, _ in got] == [
        ("tasks/1767300000000", "session", None),
        ("tasks/1767300100000", "event", 1),
        ("tasks/1767300100000", "event", 2),
        ("tasks/1767300100000", "unknown", None),
        ("tasks/1767300200000", "session", None),
    ]
    reasons = [r for *_, r in got]
    assert reasons[0].startswith("ui_messages.json: not a JSON array of messages (a JSON value that is an object)")
    assert reasons[1].startswith("ui_messages.json: say api_req_started text is not a JSON object")
    assert reasons[2] == "event is not a JSON object"
    assert reasons[3].startswith("task_metadata.json: not valid JSON")
    assert reasons[4].startswith("ui_messages.json: missing from the task folder")
    # read = accepted + quarantined: 3 tasks and task_metadata.json read, 1 accepted, 3 quarantined; 4 events
    # read in the one task read, 2 accepted, 2 quarantined
    (drop,) = rows(
        wh,
        "SELECT records_read, records_accepted, records_quarantined, events_read, events_accepted,"
        " events_quarantined FROM raw.drops",
    )
    assert drop == (4, 1, 3, 4, 2, 2)
    assert_reconciled(wh, "bad")


def test_a_subtasks_task_is_its_parent_agents_words_not_the_users(wh):
    ingest_paths(wh, STORAGE)
    got = rows(wh, "SELECT source, name, original_name FROM raw.events WHERE session_id = ? ORDER BY seq", [SUBTASK])
    assert got[0] == ("agent", "message", "subtask")
    assert [i for i, (source, name, _) in enumerate(got) if source == "user" and name == "message"] == [4]
    (meta,) = rows(wh, "SELECT metadata_json FROM raw.sessions WHERE session_id = ?", [SUBTASK])[0]
    meta = orjson.loads(meta)
    assert (meta["parent_task_id"], meta["root_task_id"]) == (ROO_TASK.name, ROO_TASK.name)


def test_a_tasks_folder_beside_other_sources_leaves_them_read(wh, tmp_path):
    """A drop holding ``tasks/`` next to other files (an aider history, a ratings file) is no extension folder: only
    entries named like an extension's own state (``state/``) are left unread; the rest is read, and a rating keyed
    by the task id lands on the task."""
    mixed = tmp_path / "mixed"
    shutil.copytree(CLINE_TASKS / "1767265200000", mixed / "tasks" / "1767265200000")
    shutil.copytree(STORAGE / "saoudrizwan.claude-dev" / "state", mixed / "state")
    shutil.copy(FIXTURES / "aider" / "myrepo" / ".aider.chat.history.md", mixed / ".aider.chat.history.md")
    (mixed / "ratings.csv").write_text("conversation_id,rating\n1767265200000,4\n")
    ingest_paths(wh, mixed)
    formats = rows(wh, "SELECT source_format, count(*) FROM raw.sessions GROUP BY 1 ORDER BY 1")
    assert formats == [("aider", 3), ("cline", 1)]
    assert rows(wh, "SELECT session_id, rating FROM raw.ratings") == [("1767265200000", 4.0)]
    assert rows(wh, "SELECT session_id FROM staging.session_labels") == [("1767265200000",)]
    assert [f for (f,) in rows(wh, "SELECT source_file FROM raw.quarantine")] == ["state"]
    assert_reconciled(wh, "mixed")
