"""OpenHands V1 (software-agent-sdk) events: ``kind``-tagged JSON objects, one per line.

Mapped onto the V0 vocabulary of the canonical model: a terminal action (``TerminalAction`` /
``ExecuteBashAction``, tool ``terminal`` / ``execute_bash``) is ``run``; the file editor is ``edit`` (``read`` for
``view``); ``FinishAction`` is ``finish``; ``MessageEvent`` is ``message``. ``ConversationStateUpdateEvent`` with
key ``execution_status`` is a state change (``idle`` means waiting for the user: ``awaiting_user_input``,
``waiting_for_confirmation`` is ``awaiting_user_confirmation``); other keys (``stats``, ...) are state events
without an agent state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .events import BadEvent, Event, as_id, as_int, as_text, dump, make_event

_STATUS = {
    "idle": "awaiting_user_input",
    "waiting_for_confirmation": "awaiting_user_confirmation",
    "running": "running",
    "paused": "paused",
    "finished": "finished",
    "error": "error",
    "stuck": "stuck",
}

_TOOLS = {
    "terminal": "run",
    "execute_bash": "run",
    "bash": "run",
    "str_replace_editor": "edit",
    "file_editor": "edit",
    "planning_file_editor": "edit",
    "finish": "finish",
    "think": "think",
    "task_tracker": "task_tracking",
    "browser": "browse",
    "execute_ipython_cell": "run_ipython",
    "ipython": "run_ipython",
}
_ACTION_KINDS = {
    "TerminalAction": "run",
    "ExecuteBashAction": "run",
    "FileEditorAction": "edit",
    "StrReplaceEditorAction": "edit",
    "FinishAction": "finish",
    "ThinkAction": "think",
    "TaskTrackerAction": "task_tracking",
    "MCPToolAction": "call_tool_mcp",
    "IPythonAction": "run_ipython",
}
_EVENT_KINDS = {
    "SystemPromptEvent": ("action", "system"),
    "Condensation": ("action", "condensation"),
    "CondensationRequest": ("action", "condensation_request"),
    "CondensationSummaryEvent": ("observation", "condensation"),
    "PauseEvent": ("action", "pause"),
    "AgentErrorEvent": ("observation", "error"),
    "UserRejectObservation": ("observation", "user_rejected"),
}


def looks_like_v1(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("kind"), str)
        and obj["kind"].endswith(("Event", "Observation", "Condensation", "CondensationRequest"))
    )


def _tool_name(tool: Any, action_kind: Any) -> str | None:
    if isinstance(action_kind, str) and action_kind in _ACTION_KINDS:
        return _ACTION_KINDS[action_kind]
    if isinstance(tool, str):
        if tool in _TOOLS:
            return _TOOLS[tool]
        if tool.startswith("browser"):
            return "browse"
    return None


def normalize_v1(raw_events: Iterable[Any]) -> tuple[list[Event], list[BadEvent]]:
    """Canonical events of one V1 conversation, and the events that could not be read (by position)."""
    events: list[Event] = []
    bad: list[BadEvent] = []
    for position, e in enumerate(raw_events):
        if not isinstance(e, dict):
            bad.append(BadEvent(position, "event is not a JSON object", dump(e)))
            continue
        kind_tag = e.get("kind")
        source = e.get("source") if isinstance(e.get("source"), str) else "unknown"
        text = command = agent_state = original = None
        exit_code = None
        cause = None
        if kind_tag == "MessageEvent":
            kind, name = "action", "message"
            message = e.get("llm_message") if isinstance(e.get("llm_message"), dict) else {}
            text = as_text(message.get("content"))
        elif kind_tag == "ActionEvent":
            action = e.get("action") if isinstance(e.get("action"), dict) else {}
            kind = "action"
            name = _tool_name(e.get("tool_name"), action.get("kind")) or "other"
            if name == "other":
                original = as_text(action.get("kind") or e.get("tool_name"))
            if name == "edit" and action.get("command") == "view":
                name = "read"
            if name == "run":
                command = action.get("command") if isinstance(action.get("command"), str) else None
                text = command
            elif name in ("edit", "read"):
                text = action.get("path") if isinstance(action.get("path"), str) else None
            elif name in ("finish", "think"):
                text = as_text(action.get("message") or action.get("thought"))
        elif kind_tag == "ObservationEvent":
            obs = e.get("observation") if isinstance(e.get("observation"), dict) else {}
            kind = "observation"
            name = _tool_name(e.get("tool_name"), None) or "other"
            if name == "other":
                original = as_text(obs.get("kind") or e.get("tool_name"))
            if name == "edit" and obs.get("command") == "view":
                name = "read"
            text = as_text(obs.get("content", obs.get("output")))
            cause = as_id(e.get("action_id"))
            if name == "run":
                command = obs.get("command") if isinstance(obs.get("command"), str) else None
                exit_code = as_int(obs.get("exit_code"))
                if exit_code is None and isinstance(obs.get("metadata"), dict):
                    exit_code = as_int(obs["metadata"].get("exit_code"))  # e.g. -1: timed out / no exit
        elif kind_tag == "ConversationStateUpdateEvent":
            kind = "state"
            key = e.get("key")
            name = key if isinstance(key, str) else "state_update"
            if key == "execution_status":
                agent_state = _STATUS.get(str(e.get("value")), str(e.get("value")))
        elif kind_tag in _EVENT_KINDS:
            kind, name = _EVENT_KINDS[kind_tag]
            text = as_text(e.get("error") or e.get("summary") or e.get("rejection_reason"))
        else:
            kind, name, original = "other", "other", as_text(kind_tag)
        events.append(
            make_event(
                e,
                len(events),
                source,
                kind,
                name,
                original=original,
                text=text,
                command=command,
                exit_code=exit_code,
                agent_state=agent_state,
                cause=cause,
            )
        )
    return events, bad
