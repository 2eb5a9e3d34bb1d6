"""The example configurations under ``examples/hooks/`` are what ``docs/collecting-ratings.md`` tells users to
install: each names a real ``pulse hook`` invocation, and that command, run as the agent would run it, reaches the
rating service."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pulse_pipeline.hooks.cli import build_parser
from pulse_pipeline.hooks.openhands import FEEDBACK_PATH
from pulse_pipeline.settings import hook_settings

from .hook_helpers import claude_code_lines, write_jsonl
from .test_hooks_codex import THREAD, rollout_lines

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "hooks"
PULSE = Path(sys.executable).with_name("pulse")


def hook_argv(command: str | list[str]) -> list[str]:
    """The example's command as argv, checked to be ``pulse hook <agent> ...`` that ``pulse hook`` parses."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    assert argv[:2] == ["pulse", "hook"], argv
    build_parser().parse_intermixed_args(argv[2:])  # raises on anything `pulse hook` does not take
    return argv


def run_as_agent(argv: list[str], stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(PULSE), *argv[1:]], input=stdin, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def agent_env(hook_env, fake_service) -> dict[str, str]:
    return dict(os.environ)


def claude_commands() -> dict[str, list[str]]:
    settings = json.loads((EXAMPLES / "claude-code-settings.json").read_text())
    return {
        event: hook_argv(hook["command"])
        for event, groups in settings["hooks"].items()
        for group in groups
        for hook in group["hooks"]
    }


def test_the_claude_code_example_runs_pulse_hook_on_the_three_events(agent_env, fake_service, hook_env):
    commands = claude_commands()
    assert sorted(commands) == ["SessionEnd", "Stop", "UserPromptSubmit"]
    assert {argv[2] for argv in commands.values()} == {"claude-code"}
    settings = json.loads((EXAMPLES / "claude-code-settings.json").read_text())
    assert hook_settings(settings["env"]).url == settings["env"]["PULSE_HOOK_URL"]  # a URL the hook accepts
    transcript = write_jsonl(hook_env / "t.jsonl", claude_code_lines("s-example"))
    stop = {"session_id": "s-example", "transcript_path": str(transcript), "cwd": "/w", "hook_event_name": "Stop",
            "stop_hook_active": False}  # fmt: skip
    done = run_as_agent(commands["Stop"], json.dumps(stop), agent_env)
    assert (done.returncode, done.stderr) == (0, "")
    assert "systemMessage" in json.loads(done.stdout)
    prompt = {**stop, "hook_event_name": "UserPromptSubmit", "prompt": "rate 3"}
    done = run_as_agent(commands["UserPromptSubmit"], json.dumps(prompt), agent_env)
    assert done.returncode == 2 and "3 stars recorded" in done.stderr
    end = {**stop, "hook_event_name": "SessionEnd", "reason": "logout"}
    assert run_as_agent(commands["SessionEnd"], json.dumps(end), agent_env).returncode == 0
    assert (hook_env / "home" / "drops" / "claude-code-s-example.jsonl").is_file()
    assert [r.path for r in fake_service.requests] == ["/v1/asks", "/v1/ratings"]


def test_the_codex_notify_line_is_a_pulse_hook_that_reaches_the_service(agent_env, fake_service, hook_env):
    notify = tomllib.loads((EXAMPLES / "codex-config.toml").read_text())["notify"]
    argv = hook_argv(notify)
    assert argv[2] == "codex"
    codex_home = hook_env / "codex"
    write_jsonl(codex_home / "sessions" / "2025" / "09" / "01" / f"rollout-2025-09-01T12-00-00-{THREAD}.jsonl",
                rollout_lines(THREAD))  # fmt: skip
    env = {**agent_env, "CODEX_HOME": str(codex_home), "PATH": str(hook_env / "no-notifier")}
    payload = {"type": "agent-turn-complete", "thread-id": THREAD, "turn-id": "t", "cwd": "/w",
               "input-messages": ["go"], "last-assistant-message": "done"}  # fmt: skip
    done = run_as_agent([*argv, json.dumps(payload)], "", env)  # Codex appends the JSON as the last argument
    assert done.returncode == 0 and done.stdout == ""
    assert "no notify-send or osascript" in done.stderr  # nothing to show it with on this machine: said, not fatal
    assert fake_service.bodies("/v1/asks")[0]["segment_index"] == 1
    assert (hook_env / "home" / "drops" / f"codex-{THREAD}.jsonl").is_file()


def test_the_codex_hooks_example_runs_pulse_hook_codex_on_stop_and_prompts():
    hooks = json.loads((EXAMPLES / "codex-hooks.json").read_text())["hooks"]
    assert sorted(hooks) == ["Stop", "UserPromptSubmit"]
    for groups in hooks.values():
        for hook in groups[0]["hooks"]:
            assert hook_argv(hook["command"])[2] == "codex"


def _block(conf: str, location: str) -> str:
    found = re.search(r"location\s+=\s+" + re.escape(location) + r"\s*\{(.*?)\}", conf, re.DOTALL)
    assert found, f"no location = {location}"
    return found.group(1)


def test_the_openhands_nginx_example_mirrors_the_feedback_path_to_v1_ratings(tmp_path):
    conf = (EXAMPLES / "openhands-nginx.conf").read_text()
    feedback = _block(conf, FEEDBACK_PATH)
    [mirror] = re.findall(r"^\s*mirror\s+(\S+);", feedback, re.MULTILINE)
    target = _block(conf, mirror)
    assert re.search(r"^\s*internal;", target, re.MULTILINE)
    [upstream] = re.findall(r"proxy_pass\s+http://(\w+)/v1/ratings;", target)
    assert re.search(r"upstream\s+" + upstream + r"\s*\{\s*server\s+127\.0\.0\.1:8765;", conf)
    assert 'proxy_set_header Authorization "Bearer ' in target
    nginx = shutil.which("nginx")
    if nginx is None:
        pytest.skip("nginx is not installed: the configuration's syntax is not checked by nginx -t")
    main = tmp_path / "nginx.conf"
    main.write_text(f"events {{}}\nhttp {{\ninclude {EXAMPLES / 'openhands-nginx.conf'};\n}}\n")
    done = subprocess.run([nginx, "-t", "-c", str(main), "-p", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
