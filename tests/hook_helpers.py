"""What the hooks' tests share: the environment a hook runs in, running ``pulse hook`` in this process with a
given stdin, and small agent logs written by hand (their counts worked out in each test's docstring)."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from pulse_pipeline import cli

from .fake_rating_service import running


@pytest.fixture
def fake_service():
    with running() as fake:
        yield fake


@pytest.fixture
def hook_env(tmp_path, monkeypatch, fake_service):
    """PULSE_HOOK_URL at the fake service, the hook's state and PULSE_HOME in the test's folder."""
    for name in [n for n in os.environ if n.startswith("PULSE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PULSE_HOOK_URL", fake_service.url)
    monkeypatch.setenv("PULSE_HOOK_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("PULSE_HOME", str(tmp_path / "home"))
    return tmp_path


def run_hook(argv: list[str], stdin: str | None, monkeypatch, capsys) -> tuple[int, str, str]:
    """``pulse hook ARGV`` through ``cli.main`` with ``stdin``; (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((stdin or "").encode("utf-8"))))
    code = cli.main(["hook", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def claude_code_lines(session: str, rating_prompt: str | None = None) -> list[dict[str, Any]]:
    """Two user turns: (1) ``pytest -q`` fails with exit code 1, an Edit, the agent's answer; (2) a Write, the
    answer. 2 user messages, 2 segments, 2 file edits (Edit, Write), 1 failed command, 1 test run, 90 s from the
    first line (10:00:00) to the last (10:01:30). ``rating_prompt``: a user line with that text between the turns,
    as Claude Code may log a prompt a hook blocked."""

    def line(kind: str, uuid: str, second: int, content: Any, stop: str | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"role": kind, "content": content}
        if kind == "assistant":
            message.update(id=f"msg-{uuid}", model="claude-x", stop_reason=stop,
                           usage={"input_tokens": 10, "output_tokens": 5})  # fmt: skip
        stamp = f"2025-06-14T10:{second // 60:02d}:{second % 60:02d}Z"
        return {"type": kind, "uuid": uuid, "sessionId": session, "timestamp": stamp, "isSidechain": False,
                "cwd": "/work/project", "message": message}  # fmt: skip

    def tool(tid: str, name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"type": "tool_use", "id": tid, "name": name, "input": args}]

    def result(tid: str, text: str, error: bool = False) -> list[dict[str, Any]]:
        return [{"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": error}]

    lines = [
        line("user", "u1", 0, "Fix the failing test in calc.py"),
        line("assistant", "a1", 10, tool("toolu_1", "Bash", {"command": "pytest -q"}), "tool_use"),
        line("user", "u2", 20, result("toolu_1", "Exit code 1\n1 failed, 3 passed", error=True)),
        line(
            "assistant",
            "a2",
            30,
            tool("toolu_2", "Edit", {"file_path": "calc.py", "old_string": "-", "new_string": "+"}),
            "tool_use",
        ),  # fmt: skip
        line("user", "u3", 35, result("toolu_2", "The file calc.py has been updated.")),
        line("assistant", "a3", 40, [{"type": "text", "text": "Fixed: the sign was wrong."}], "end_turn"),
        line("user", "u4", 60, "Now add a docstring"),
        line("assistant", "a4", 70, tool("toolu_3", "Write", {"file_path": "README.md", "content": "x"}), "tool_use"),
        line("user", "u5", 80, result("toolu_3", "File created successfully at: README.md")),
        line("assistant", "a5", 90, [{"type": "text", "text": "Done."}], "end_turn"),
    ]
    if rating_prompt is not None:
        lines.insert(6, line("user", "r1", 50, rating_prompt))
    return lines


EXPECTED_FEATURES = {
    "user_message_count": 2,
    "n_segments": 2,
    "file_edits": 2,
    "failed_commands": 1,
    "test_runs": 1,
    "duration_seconds": 90.0,
}
