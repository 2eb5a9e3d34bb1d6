"""``pulse hook codex``: the Codex CLI, by its ``notify`` program or by its (experimental) hooks.

**notify** (``~/.codex/config.toml``: ``notify = ["pulse", "hook", "codex"]``). Codex runs the program with one more
argument, a JSON object, when a turn completes (openai/codex ``codex-rs/core/src/user_notification.rs``,
``UserNotification::AgentTurnComplete``, serialized kebab-case)::

    {"type": "agent-turn-complete", "thread-id": "...", "turn-id": "...", "cwd": "...",
     "input-messages": ["..."], "last-assistant-message": "..." | null}

Codex spawns it and never waits or reads its output (fire-and-forget), so nothing the hook prints reaches the user.
The hook finds the session's rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread-id>.jsonl``,
``CODEX_HOME`` defaulting to ``~/.codex``), reads the segment and the features from it, asks the service once per
session, and when told to ask shows the ``/rate`` link where a user sees it outside Codex's full-screen terminal:
``--show notify`` (the default) as a desktop notification (``notify-send`` on Linux, ``osascript`` on macOS: the
way Codex's own documentation suggests using ``notify``); ``--show browser`` opens the page in the browser;
``--show none`` shows nothing (the link is in the hook's state). Writing to the terminal would scribble over
Codex's screen, so the hook never does. Other notification types (``approval-requested``) are ignored.

**hooks** (Codex's ``hooks.json`` with ``[features] codex_hooks = true``; openai/codex
``codex-rs/hooks/schema/generated``): the same events and shapes as Claude Code's (``Stop`` with ``session_id``,
``transcript_path`` (nullable), ``turn_id``, ``stop_hook_active``, ``last_assistant_message``; ``UserPromptSubmit``
with ``prompt``), one JSON object on stdin. They go through ``claude_code.handle`` with Codex's adapter: a
``systemMessage`` on Stop shows the user how to rate, and a ``rate N`` prompt is blocked by
``{"decision": "block", "reason": ...}``, the form Codex's output schema declares. Without a JSON argument the
hook reads stdin, so one command serves both.

**Handing the rollout over** (``--drop``): Codex says nothing when a session ends, so the rollout is handed over when
a turn ends, at most every ``HANDOFF_INTERVAL`` seconds per session (each hand-off makes the pipeline load that
session again); the last turns of a session arrive with a later turn, or with ``pulse ingest ~/.codex/sessions``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..ingest.codex import Codex
from . import state as states
from .claude_code import Agent, handle, progress_of
from .flow import Hook, Outcome, ask_once, rate_hint
from .handoff import hand_over

HANDOFF_INTERVAL = 600.0
SHOW = ("notify", "browser", "none")


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or "~/.codex").expanduser()


def find_rollout(thread_id: str, home: Path | None = None) -> Path | None:
    """The newest rollout of ``thread_id`` under ``<CODEX_HOME>/sessions`` (None when there is none)."""
    if not thread_id or "/" in thread_id or "*" in thread_id or "?" in thread_id or "[" in thread_id:
        return None
    sessions = (home or codex_home()) / "sessions"
    found = sorted(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _log_of(payload: dict[str, Any]) -> Path | None:
    path = payload.get("transcript_path")
    if isinstance(path, str) and path:
        return Path(path).expanduser()
    thread = payload.get("thread-id") or payload.get("session_id")
    return find_rollout(thread) if isinstance(thread, str) else None


CODEX = Agent("codex", Codex, _log_of, block_by_exit_code=False)


def handle_hook(payload: Any, hook: Hook) -> Outcome:
    """A ``hooks.json`` event on stdin (Claude Code's shapes)."""
    outcome = handle(payload, hook, CODEX)
    if isinstance(payload, dict) and payload.get("hook_event_name") == "Stop" and hook.drops is not None:
        _maybe_hand_over(payload, payload.get("session_id"), hook)
    return outcome


def handle_notify(payload: Any, hook: Hook, show: str = "notify") -> Outcome:
    """One ``notify`` call: ``payload`` is the parsed JSON argument."""
    if not isinstance(payload, dict):
        return Outcome(stderr=f"the notify argument is not a JSON object (a {type(payload).__name__}); nothing done")
    if payload.get("type") != "agent-turn-complete":
        return Outcome()
    thread = payload.get("thread-id")
    if not isinstance(thread, str) or not thread:
        return Outcome(stderr="the notify argument has no thread-id; nothing done")
    progress, problem = progress_of(payload, CODEX)
    state, asked_now = ask_once(hook, CODEX.name, thread, progress)
    if hook.drops is not None:
        _maybe_hand_over(payload, thread, hook)
    if asked_now and state.rate_url:
        shown = show_link(state.rate_url, rate_hint(state, typed=False), show)
        problem = problem or shown
    return Outcome(stderr=problem)


def _maybe_hand_over(payload: dict[str, Any], session_id: Any, hook: Hook) -> None:
    if not isinstance(session_id, str) or hook.drops is None:
        return
    state = states.load(hook.state_dir, CODEX.name, session_id)
    if state.handed_at is not None and time.time() - state.handed_at < HANDOFF_INTERVAL:
        return
    log = _log_of(payload)
    if log is None:
        return
    hand_over(log, hook.drops, CODEX.name, session_id)
    state.handed_at = time.time()
    states.save(hook.state_dir, CODEX.name, state)


def show_link(url: str, text: str, how: str) -> str | None:
    """Show the rating link outside Codex's screen; one line when it could not be shown, else None."""
    if how == "none":
        return None
    try:
        if how == "browser":
            import webbrowser

            return None if webbrowser.open(url) else f"no browser could open {url}"
        if sys.platform == "darwin" and shutil.which("osascript"):
            script = f'display notification {json.dumps(text, ensure_ascii=False)} with title "PULSE"'
            subprocess.run(["osascript", "-e", script], check=False, timeout=5, capture_output=True)  # noqa: S603,S607
            return None
        if shutil.which("notify-send"):
            subprocess.run(["notify-send", "PULSE", text], check=False, timeout=5, capture_output=True)  # noqa: S603,S607
            return None
    except (OSError, subprocess.SubprocessError) as error:
        return f"the rating link could not be shown ({error}): {url}"
    return f"no notify-send or osascript to show the rating link: {url}"
