"""``pulse hook claude-code``: Claude Code's command hooks (``settings.json`` ``hooks``), one JSON object on stdin.

The payloads (Claude Code's hooks reference, https://code.claude.com/docs/en/hooks; every event carries
``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``):

- ``Stop`` (``stop_hook_active``; newer versions add ``last_assistant_message``): the assistant finished its
  response, a work segment ended. The hook reads the transcript (``transcript.read_progress``: the segment that
  ended, the policy's features), asks the service once per session (``flow.ask_once``) and, when the answer is to
  ask, prints ``{"systemMessage": ...}`` on stdout, which Claude Code shows the user: type ``rate 4`` at the next
  prompt, or open the ``/rate`` link. With ``stop_hook_active`` true another Stop hook made Claude continue: the
  turn has not ended for the user, nothing is done.
- ``UserPromptSubmit`` (``prompt``): a prompt that is a rating (``ingest.claude_code.RATING_PROMPT``: the whole
  prompt ``rate N`` or ``rate N: comment``) in a session the user was asked to rate is sent to the service and
  blocked from the model: exit code 2 with one line on stderr, which Claude Code documents for this event as
  "blocks the prompt, erases it from context, shows stderr to the user" (the exception to exit 0). Any other
  prompt passes untouched (exit 0, nothing printed). Why ``rate N`` and not ``/rate N``: Claude Code answers an
  unknown slash command itself ("Unknown command") before any hook sees it; and why the whole prompt and a colon
  before a comment: ``rate 3 of these options`` stays a prompt.
- ``SessionEnd`` (``reason``): with ``--drop`` the transcript is handed to the drop folder once, complete
  (``handoff.py``), so the session and its rating reach PULSE together.

Any other event is ignored. Codex's hooks (``hooks.json``, the same shapes) go through this module too, with
Codex's adapter and its log (``codex.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ingest.adapter import Adapter
from ..ingest.claude_code import RATING_PROMPT, ClaudeCode
from . import state as states
from .client import ServiceError
from .flow import Hook, Outcome, ask_once, rate_hint, send_rating
from .handoff import hand_over
from .transcript import Progress, read_progress


@dataclass(frozen=True)
class Agent:
    """How one agent's hooks differ: its name, log format and where its log is, and how a prompt is blocked."""

    name: str
    adapter: Callable[[], Adapter]
    find_log: Callable[[dict[str, Any]], Path | None]
    block_by_exit_code: bool  # Claude Code: exit 2 and stderr; Codex: {"decision": "block", "reason"} on stdout


def _transcript_path(payload: dict[str, Any]) -> Path | None:
    path = payload.get("transcript_path")
    return Path(path).expanduser() if isinstance(path, str) and path else None


CLAUDE_CODE = Agent("claude-code", ClaudeCode, _transcript_path, block_by_exit_code=True)


def handle(payload: Any, hook: Hook, agent: Agent = CLAUDE_CODE) -> Outcome:
    """Answer one hook event (the JSON object the agent wrote on stdin)."""
    if not isinstance(payload, dict):
        return Outcome(stderr=f"the hook's input is not a JSON object (a {type(payload).__name__}); nothing done")
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return Outcome(stderr="the hook's input has no session_id; nothing done")
    event = payload.get("hook_event_name")
    if event == "Stop":
        return _stop(payload, session_id, hook, agent)
    if event == "UserPromptSubmit":
        return _prompt(payload, session_id, hook, agent)
    if event == "SessionEnd":
        return _session_end(payload, session_id, hook, agent)
    return Outcome()  # SubagentStop and the rest: not the end of a user's turn


def progress_of(payload: dict[str, Any], agent: Agent) -> tuple[Progress, str | None]:
    """The session's progress from its log, and one line when the log could not be read (the ask goes without)."""
    log = agent.find_log(payload)
    if log is None:
        return Progress(None, None), None
    try:
        return read_progress(log, agent.adapter()), None
    except OSError as error:
        return Progress(None, None), f"{log}: cannot read the log ({error.strerror or error}); asked without features"


def _stop(payload: dict[str, Any], session_id: str, hook: Hook, agent: Agent) -> Outcome:
    if payload.get("stop_hook_active") is True:
        return Outcome()
    progress, problem = progress_of(payload, agent)
    state, asked_now = ask_once(hook, agent.name, session_id, progress)
    if not asked_now:
        return Outcome(stderr=problem)
    return Outcome(stdout=json.dumps({"systemMessage": rate_hint(state, typed=True)}), stderr=problem)


def _prompt(payload: dict[str, Any], session_id: str, hook: Hook, agent: Agent) -> Outcome:
    prompt = payload.get("prompt")
    found = RATING_PROMPT.fullmatch(prompt.strip()) if isinstance(prompt, str) else None
    if found is None:
        return Outcome()
    state = states.load(hook.state_dir, agent.name, session_id)
    if not (state.decided and state.ask):
        return Outcome()  # not asked in this session: the prompt is the user's to send
    stars, comment = int(found.group(1)), (found.group(2) or "").strip() or None
    try:
        line = send_rating(hook, agent.name, state, stars, comment)
    except ServiceError as error:
        where = f" rate at {state.rate_url} instead" if state.rate_url else ""
        line = f"PULSE could not record the rating ({error});{where}"
    return _block(line, agent)


def _block(line: str, agent: Agent) -> Outcome:
    if agent.block_by_exit_code:
        return Outcome(stderr=line, exit_code=2)
    return Outcome(stdout=json.dumps({"decision": "block", "reason": line}))


def _session_end(payload: dict[str, Any], session_id: str, hook: Hook, agent: Agent) -> Outcome:
    if hook.drops is None:
        return Outcome()
    log = agent.find_log(payload)
    if log is None:
        return Outcome(stderr="the hook's input names no transcript_path; nothing handed to PULSE")
    hand_over(log, hook.drops, agent.name, session_id)
    state = states.load(hook.state_dir, agent.name, session_id)
    state.handed_at = time.time()
    states.save(hook.state_dir, agent.name, state)
    return Outcome()
