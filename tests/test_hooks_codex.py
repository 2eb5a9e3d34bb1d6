"""``pulse hook codex`` with Codex's payloads: the ``notify`` argument (openai/codex
``codex-rs/core/src/user_notification.rs``: ``{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd",
"input-messages", "last-assistant-message"}``) and its hooks' ``Stop`` / ``UserPromptSubmit`` on stdin
(``codex-rs/hooks/schema/generated/stop.command.input.schema.json``), against a fake rating service."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from pulse_pipeline.hooks import codex
from pulse_pipeline.hooks.flow import idempotency_key
from pulse_pipeline.hooks.transcript import read_progress
from pulse_pipeline.ingest.adapter import add_session
from pulse_pipeline.ingest.batch import Batch
from pulse_pipeline.ingest.codex import Codex

from .hook_helpers import run_hook, write_jsonl

THREAD = "0199a1b2-c3d4-7e5f-8a9b-codexthread"
SAMPLES = Path("/work/shared/samples/codex")


def rollout_lines(thread: str) -> list[dict]:
    """Two user turns after Codex's injected context: (1) ``bash -lc 'pytest -q'`` exits 1, an ``apply_patch``,
    the final answer; (2) an ``apply_patch``, the final answer. 2 user messages (the ``<environment_context>`` one is
    Codex's), 2 segments, 2 file edits, 1 failed command, 1 test run, 75 s from 12:00:00 to 12:01:15."""

    def line(second: int, kind: str, payload: dict) -> dict:
        return {
            "timestamp": f"2025-09-01T12:{second // 60:02d}:{second % 60:02d}.000Z",
            "type": kind,
            "payload": payload,
        }

    def message(role: str, text: str, **more) -> dict:
        kind = "output_text" if role == "assistant" else "input_text"
        return {"type": "message", "role": role, "content": [{"type": kind, "text": text}], **more}

    shell = {"command": ["bash", "-lc", "pytest -q"]}
    failed = json.dumps({"output": "1 failed", "metadata": {"exit_code": 1}})
    return [
        line(0, "session_meta", {"id": thread, "cwd": "/work/project", "cli_version": "0.50.0", "source": "cli"}),
        line(0, "turn_context", {"model": "gpt-5-codex", "cwd": "/work/project"}),
        line(
            0,
            "response_item",
            message("user", "<environment_context>\n  <cwd>/work/project</cwd>\n</environment_context>"),
        ),
        line(1, "response_item", message("user", "Make the tests pass")),
        line(
            5,
            "response_item",
            {"type": "function_call", "name": "shell", "arguments": json.dumps(shell), "call_id": "c1"},
        ),
        line(9, "response_item", {"type": "function_call_output", "call_id": "c1", "output": failed}),
        line(
            20,
            "response_item",
            {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c2"},
        ),
        line(21, "response_item", {"type": "custom_tool_call_output", "call_id": "c2", "output": "Success"}),
        line(30, "response_item", message("assistant", "Fixed the sign.", phase="final_answer")),
        line(60, "response_item", message("user", "Also update the changelog")),
        line(
            70,
            "response_item",
            {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c3"},
        ),
        line(71, "response_item", {"type": "custom_tool_call_output", "call_id": "c3", "output": "Success"}),
        line(75, "response_item", message("assistant", "Done.", phase="final_answer")),
    ]


EXPECTED = {
    "user_message_count": 2,
    "n_segments": 2,
    "file_edits": 2,
    "failed_commands": 1,
    "test_runs": 1,
    "duration_seconds": 75.0,
}


@pytest.fixture
def rollout(hook_env, monkeypatch) -> Path:
    home = hook_env / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(home))
    name = f"rollout-2025-09-01T12-00-00-{THREAD}.jsonl"
    return write_jsonl(home / "sessions" / "2025" / "09" / "01" / name, rollout_lines(THREAD))


def notify(**more) -> str:
    return json.dumps(
        {"type": "agent-turn-complete", "thread-id": THREAD, "turn-id": "turn-2", "cwd": "/work/project",
         "input-messages": ["Also update the changelog"], "last-assistant-message": "Done.", **more}
    )  # fmt: skip


def test_notify_finds_the_rollout_and_asks_with_its_segment_and_features(rollout, fake_service, monkeypatch, capsys):
    code, out, err = run_hook(["codex", notify(), "--show", "none"], None, monkeypatch, capsys)
    assert (code, out, err) == (0, "", "")
    assert fake_service.bodies("/v1/asks") == [{"session_id": THREAD, "segment_index": 1, "features": EXPECTED}]
    assert codex.find_rollout(THREAD) == rollout


def test_notify_shows_the_link_by_a_desktop_notification(rollout, fake_service, hook_env, monkeypatch, capsys):
    """A ``notify-send`` on PATH gets the link (Codex waits for nothing and shows nothing the hook prints)."""
    bin_dir = hook_env / "bin"
    bin_dir.mkdir()
    seen = hook_env / "notified.txt"
    (bin_dir / "notify-send").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}\n')
    (bin_dir / "notify-send").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(codex.sys, "platform", "linux")
    code, out, err = run_hook(["codex", notify()], None, monkeypatch, capsys)
    assert (code, out, err) == (0, "", "")
    title, text = seen.read_text().splitlines()[:2]
    assert title == "PULSE" and f"{fake_service.url}/rate/{THREAD}?segment=1&sig=test-signature" in text


def test_other_notifications_and_bad_arguments_do_nothing(rollout, fake_service, monkeypatch, capsys):
    approval = json.dumps({"type": "approval-requested", "approval-type": "exec", "thread-id": THREAD})
    assert run_hook(["codex", approval], None, monkeypatch, capsys) == (0, "", "")
    code, out, err = run_hook(["codex", "not json"], None, monkeypatch, capsys)
    assert (code, out) == (0, "") and "not JSON" in err
    code, out, err = run_hook(["codex", json.dumps({"type": "agent-turn-complete"})], None, monkeypatch, capsys)
    assert (code, out) == (0, "") and "no thread-id" in err
    assert fake_service.requests == []


def test_a_missing_rollout_still_asks_without_features(hook_env, fake_service, monkeypatch, capsys):
    monkeypatch.setenv("CODEX_HOME", str(hook_env / "empty"))
    code, out, err = run_hook(["codex", notify(), "--show", "none"], None, monkeypatch, capsys)
    assert (code, out, err) == (0, "", "")
    assert fake_service.bodies("/v1/asks") == [{"session_id": THREAD}]


def hook_payload(event: str, **more) -> str:
    body = {"session_id": THREAD, "transcript_path": None, "cwd": "/work/project", "hook_event_name": event,
            "model": "gpt-5-codex", "permission_mode": "default", **more}  # fmt: skip
    return json.dumps(body)


def test_codex_hooks_stop_shows_a_system_message_and_a_rating_prompt_is_blocked(
    rollout, fake_service, monkeypatch, capsys
):
    """Codex's Stop hook (``transcript_path`` null: the rollout is found by the session id), then ``rate 5`` at the
    next prompt: blocked by ``{"decision": "block", "reason"}``, the form Codex's output schema declares."""
    stop = hook_payload("Stop", turn_id="turn-2", stop_hook_active=False, last_assistant_message="Done.")
    code, out, err = run_hook(["codex"], stop, monkeypatch, capsys)
    assert (code, err) == (0, "")
    assert "`rate 1` to `rate 5`" in json.loads(out)["systemMessage"]
    assert fake_service.bodies("/v1/asks") == [{"session_id": THREAD, "segment_index": 1, "features": EXPECTED}]
    code, out, err = run_hook(["codex"], hook_payload("UserPromptSubmit", prompt="rate 5"), monkeypatch, capsys)
    assert (code, err) == (0, "")
    assert json.loads(out) == {"decision": "block", "reason": "PULSE: 5 stars recorded for this turn; thank you."}
    key = idempotency_key("codex", THREAD, 1)
    assert fake_service.bodies("/v1/ratings") == [
        {"session_id": THREAD, "segment_index": 1, "stars": 5, "idempotency_key": key}
    ]


def test_drop_hands_the_rollout_over_at_most_every_interval(rollout, fake_service, hook_env, monkeypatch, capsys):
    drops = hook_env / "home" / "drops"
    run_hook(["codex", notify(), "--show", "none", "--drop"], None, monkeypatch, capsys)
    handed = drops / f"codex-{THREAD}.jsonl"
    assert handed.read_bytes() == rollout.read_bytes()
    first = handed.stat().st_mtime_ns
    more = {"timestamp": "2025-09-01T12:02:00.000Z", "type": "event_msg", "payload": {"type": "task_started"}}
    with rollout.open("a") as f:  # the session goes on
        f.write(json.dumps(more) + "\n")
    run_hook(["codex", notify(), "--show", "none", "--drop"], None, monkeypatch, capsys)
    assert handed.stat().st_mtime_ns == first  # within HANDOFF_INTERVAL: not handed again
    later = time.time() + codex.HANDOFF_INTERVAL + 1
    monkeypatch.setattr(codex.time, "time", lambda: later)
    code, out, err = run_hook(["codex", notify(), "--show", "none", "--drop"], None, monkeypatch, capsys)
    assert (code, out, err) == (0, "", "")
    assert handed.read_bytes() == rollout.read_bytes()  # the longer rollout replaced the drop
    assert sorted(p.name for p in drops.iterdir()) == [handed.name]


def test_the_handmade_rollout_counts(hook_env):
    progress = read_progress(write_jsonl(hook_env / "r.jsonl", rollout_lines(THREAD)), Codex())
    assert (progress.session_id, progress.segment_index, progress.features) == (THREAD, 1, EXPECTED)


@pytest.mark.parametrize("name", ["kvsankar_real_sessions_codex_session-01.jsonl", "simonw_sample_codex_session.jsonl"])
def test_real_rollouts_give_the_segments_ingest_gives(name):
    path = SAMPLES / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (the real samples live in /work/shared/samples)")
    progress = read_progress(path, Codex())
    batch = Batch("d")
    raws = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    add_session(batch, name, 0, "x", "codex", Codex(), raws, {})
    sessions = batch.columns["raw.sessions"]
    assert progress.features["n_segments"] == sessions["n_segments"][0] > 0
    assert progress.features["user_message_count"] == sessions["n_user_messages"][0]
    assert progress.segment_index == sessions["n_segments"][0] - 1
    assert progress.session_id == sessions["session_id"][0]


def test_a_logged_rating_prompt_is_no_user_message_and_no_segment(hook_env):
    """Should Codex log the ``rate 4`` its UserPromptSubmit hook blocked, between the turns: still 2 user messages
    and 2 segments (3 and 3 before the rule in ``ingest/codex.py``)."""
    lines = rollout_lines(THREAD)
    typed = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "rate 4: fine"}]}
    lines.insert(9, {"timestamp": "2025-09-01T12:00:45.000Z", "type": "response_item", "payload": typed})
    progress = read_progress(write_jsonl(hook_env / "r.jsonl", lines), Codex())
    assert (progress.segment_index, progress.features) == (1, EXPECTED)
