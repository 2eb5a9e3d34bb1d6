"""Collecting ratings end to end (issue 35, item 4): a real `pulse serve`, synthetic Claude Code sessions whose
`pulse hook claude-code` calls ask it when a turn ends, users who type `rate N` when asked, the hooks handing a few
transcripts to the drop folder at SessionEnd (the rest dropped as one folder: a drop per session costs a partition
each), the service rolling its ratings and asks into the drop folder, and
`pulse materialize` reading it all: every ask is in `staging.session_asks` with the probability the service
answered, which is the exported policy's q(x) worked out here by hand from the transcript's failed commands; every
typed rating is the session's label; and AIPW uses the known ask probabilities.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pulse_pipeline import cli
from pulse_pipeline.estimates.ask_policy import Policy, Term, write_policy
from pulse_pipeline.hooks import state as hook_state
from pulse_pipeline.serve.roller import roll_files

from .test_serve_durability import free_port, start_server

pytestmark = pytest.mark.slow

N_SESSIONS = 80
HANDED_OVER = 6  # sessions whose SessionEnd hook hands the transcript to the drop folder (each its own drop)
ANSWER_RATE = 0.85
# What this test follows is the ratings' way (hook, service, drop, staging, AIPW's known ask probabilities), not the
# models: one cheap family and one CV seed (tests/helpers.py SMALL_HOME_SETTINGS's) give AIPW its predictions. Every
# default family and seed runs end to end in tests/test_pipeline.py's demo test.
QUICK_MODELS = {"PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_CV_SEEDS": "1"}
# The exported policy: q = min(1, max(FLOOR, M * exp(B * (log1p(failed_commands) - MEAN) / SD)))
FLOOR, M, B, MEAN, SD = 0.2, 0.5, 0.8, 0.6, 0.5


def expected_probability(failed: int) -> float:
    """q(x) of the policy above for a session with ``failed`` failed commands, by hand: 0.2, 0.58, 1, 1, ..."""
    return min(1.0, max(FLOOR, M * math.exp(B * (math.log1p(failed) - MEAN) / SD)))


def session_plan(k: int) -> dict[str, Any]:
    """Session k: arm B fails fewer commands; turns 1 to 3; the stars a user would give: 5 - failed commands."""
    variant = "B" if k % 2 else "A"
    failed = (k // 2) % 4 if variant == "A" else (0, 0, 1, 2)[(k // 2) % 4]
    return {"id": f"e2e-{k:03d}", "user": f"user-{k % 30:02d}", "variant": variant, "turns": 1 + k % 3,
            "failed": failed, "stars": max(1, 5 - failed)}  # fmt: skip


def transcript_lines(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """A Claude Code transcript: each turn a prompt, a `pytest -q` (failing while failures are left to show), an
    Edit, and the answer; ``plan["failed"]`` failed commands in all, the rest pass."""
    session, lines, second = plan["id"], [], 0
    failures_left = plan["failed"]

    def line(kind: str, content: Any, stop: str | None = None) -> None:
        nonlocal second
        message: dict[str, Any] = {"role": kind, "content": content}
        if kind == "assistant":
            message.update(id=f"msg-{session}-{len(lines)}", model="claude-x", stop_reason=stop,
                           usage={"input_tokens": 10, "output_tokens": 5})  # fmt: skip
        lines.append({"type": kind, "uuid": f"{session}-{len(lines)}", "sessionId": session,
                      "timestamp": f"2026-11-0{1 + len(session) % 2}T10:{second // 60:02d}:{second % 60:02d}Z",
                      "isSidechain": False, "cwd": "/work/project", "message": message})  # fmt: skip
        second += 7

    for turn in range(plan["turns"]):
        line("user", f"Please fix test {turn} of the parser")
        runs = failures_left if turn == plan["turns"] - 1 else min(failures_left, 1)
        for attempt in range(runs + 1):
            failing = attempt < runs
            tid = f"toolu_{turn}_{attempt}"
            line("assistant", [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": "pytest -q"}}],
                 "tool_use")  # fmt: skip
            text = "Exit code 1\n1 failed" if failing else "3 passed"
            line("user", [{"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": failing}])
        failures_left -= runs
        edit = {"file_path": "parser.py", "old_string": "a", "new_string": "b"}
        line("assistant", [{"type": "tool_use", "id": f"edit_{turn}", "name": "Edit", "input": edit}], "tool_use")
        line("user", [{"type": "tool_result", "tool_use_id": f"edit_{turn}", "content": "ok"}])
        line("assistant", [{"type": "text", "text": f"Fixed test {turn}."}], "end_turn")
    return lines


def hook(event: str, plan: dict[str, Any], transcript: Path, monkeypatch, capsys, *args: str, **more) -> int:
    """`pulse hook claude-code ARGS` as Claude Code runs it for ``event`` (its JSON on stdin); the exit code."""
    payload = {"session_id": plan["id"], "transcript_path": str(transcript), "cwd": "/work/project",
               "permission_mode": "default", "hook_event_name": event, **more}  # fmt: skip
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    code = cli.main(["hook", "claude-code", *args])
    capsys.readouterr()
    return code


def test_ratings_collected_by_hooks_reach_staging_with_their_ask_probabilities_and_aipw_uses_them(
    tmp_path, monkeypatch, capsys
):
    home, state = tmp_path / "home", tmp_path / "hook-state"
    for name in [n for n in os.environ if n.startswith("PULSE_")]:
        monkeypatch.delenv(name)
    policy = Policy(intercept=0.0, terms=(Term("failed_commands", "log1p", MEAN, SD, B),), answer=None,
                    multiplier=M, floor=FLOOR, budget_per_day=50.0, sessions_per_day=80.0,
                    expected_asks_per_day=50.0, expected_ratings_per_day=None, fitted_on_ratings=0)  # fmt: skip
    write_policy(policy, home / "ask_policy")
    port = free_port()
    server = start_server(home, port, tmp_path / "serve.log", PULSE_SERVE_ROLL_SECONDS="1")
    monkeypatch.setenv("PULSE_HOOK_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("PULSE_HOOK_STATE", str(state))
    monkeypatch.setenv("PULSE_HOME", str(home))
    users = random.Random(35)
    plans, asked, rated = [session_plan(k) for k in range(N_SESSIONS)], {}, {}
    try:
        for plan in plans:
            transcript = tmp_path / "claude" / f"{plan['id']}.jsonl"
            transcript.parent.mkdir(exist_ok=True)
            transcript.write_text("".join(json.dumps(x) + "\n" for x in transcript_lines(plan)))
            assert hook("Stop", plan, transcript, monkeypatch, capsys, stop_hook_active=False) == 0
            decision = hook_state.load(state, "claude-code", plan["id"])
            assert decision.decided, f"{plan['id']}: the hook got no answer from the service"
            if decision.ask:
                asked[plan["id"]] = decision.probability
                if users.random() < ANSWER_RATE:  # Claude Code blocks the rating prompt: exit 2
                    assert hook("UserPromptSubmit", plan, transcript, monkeypatch, capsys,
                                prompt=f"rate {plan['stars']}") == 2  # fmt: skip
                    rated[plan["id"]] = plan["stars"]
            if int(plan["id"][-3:]) < HANDED_OVER:  # the hook hands the transcript over: one drop per session
                assert hook("SessionEnd", plan, transcript, monkeypatch, capsys, "--drop", reason="exit") == 0
            else:  # the rest arrive as one drop, as a team would drop a folder of past sessions
                batch = home / "drops" / "claude-code-batch"
                batch.mkdir(parents=True, exist_ok=True)
                (batch / transcript.name).write_bytes(transcript.read_bytes())
    finally:
        server.send_signal(signal.SIGTERM)  # the service rolls what waits before it stops
        server.wait(timeout=60)
    # the service answered each session its policy's q(x), from the features the hook read off the transcript
    for plan in plans:
        if plan["id"] in asked:
            assert asked[plan["id"]] == pytest.approx(expected_probability(plan["failed"]), rel=1e-9)
    assert 30 <= len(asked) < N_SESSIONS and len(rated) >= 20  # some asked, not all; enough ratings to model
    assert roll_files(home / "drops"), "the service rolled nothing into the drop folder"
    (home / "drops" / "assignments.csv").write_text(
        "session_id,experiment,variant,user_id\n"
        + "".join(f"{p['id']},e2e,{p['variant']},{p['user']}\n" for p in plans)
    )

    env = {k: v for k, v in os.environ.items() if not k.startswith("PULSE_")} | {"PULSE_HOME": str(home)} | QUICK_MODELS
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pulse_pipeline.cli", "materialize"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    print(f"pulse materialize: {time.monotonic() - started:.0f} s")

    con = duckdb.connect(str(home / "pulse.duckdb"), read_only=True)
    staged = dict(con.execute("SELECT session_id, ask_probability FROM staging.session_asks").fetchall())
    assert staged.keys() == asked.keys()
    assert all(staged[s] == pytest.approx(q, rel=1e-12) for s, q in asked.items())
    labels = dict(con.execute("SELECT session_id, label_stars FROM staging.session_labels").fetchall())
    assert labels == pytest.approx(rated)
    sessions = {r[0] for r in con.execute("SELECT session_id FROM staging.sessions").fetchall()}
    assert sessions == {p["id"] for p in plans}
    [(note, n_rated)] = con.execute(
        "SELECT note, n_labeled_treatment + n_labeled_control FROM estimates.experiment_effects"
        " WHERE experiment = 'e2e' AND method = 'aipw'"
    ).fetchall()
    assert "known ask probability" in note
    assert n_rated == len(rated)
