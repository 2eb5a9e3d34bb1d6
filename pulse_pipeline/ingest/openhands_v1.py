"""OpenHands V1 (software-agent-sdk) events: ``kind``-tagged JSON objects, one per line.

Mapped onto the V0 vocabulary of the canonical model: a terminal action (``TerminalAction`` /
``ExecuteBashAction``, tool ``terminal`` / ``execute_bash``) is ``run``; the file editor is ``edit`` (``read`` for
``view``); ``FinishAction`` is ``finish``; ``MessageEvent`` is ``message``. ``ConversationStateUpdateEvent`` with
key ``execution_status`` is a state change (``idle`` means waiting for the user: ``awaiting_user_input``,
``waiting_for_confirmation`` is ``awaiting_user_confirmation``); other keys (``stats``, ...) are state events
without an agent state.

What the canonical model has no column for stays in the event's ``raw_json``: among it ``critic_result`` (a critic
model's ``score``, the predicted probability of success, with ``message`` and ``metadata``) on ActionEvents and
MessageEvents, which ``features.event_features`` turns into the critic score columns, and ``parent_id`` (forks).
The SDK's on-disk layouts (a conversation folder, the app server's event files) are found by ``folders.py``.
"""

from __future__ import annotations

from typing import Any

from .adapter import Adapter, EventFields
from .events import as_int, as_text, read_id

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


def _tool_name(tool: Any, action_kind: Any) -> str | None:
    if isinstance(action_kind, str) and action_kind in _ACTION_KINDS:
        return _ACTION_KINDS[action_kind]
    if isinstance(tool, str):
        if tool in _TOOLS:
            return _TOOLS[tool]
        if tool.startswith("browser"):
            return "browse"
    return None


class OpenHandsV1(Adapter):
    """OpenHands V1 (software-agent-sdk) events."""

    format = "openhands_v1"

    @staticmethod
    def recognizes(event: Any) -> bool:
        return (
            isinstance(event, dict)
            and isinstance(event.get("kind"), str)
            and event["kind"].endswith(("Event", "Observation", "Condensation", "CondensationRequest"))
        )

    def parse(self, event: dict[str, Any]) -> EventFields:
        kind_tag = event.get("kind")
        source = event.get("source") if isinstance(event.get("source"), str) else "unknown"
        if kind_tag == "MessageEvent":
            message = event.get("llm_message") if isinstance(event.get("llm_message"), dict) else {}
            return EventFields(source, "action", "message", text=as_text(message.get("content")))
        if kind_tag == "ActionEvent":
            return _action(event, source)
        if kind_tag == "ObservationEvent":
            return _observation(event, source)
        if kind_tag == "ConversationStateUpdateEvent":
            key = event.get("key")
            fields = EventFields(source, "state", key if isinstance(key, str) else "state_update")
            value = event.get("value")
            if key == "execution_status" and isinstance(value, str):
                fields.agent_state = _STATUS.get(value, value)
            return fields
        if isinstance(kind_tag, str) and kind_tag in _EVENT_KINDS:
            kind, name = _EVENT_KINDS[kind_tag]
            text = as_text(event.get("error") or event.get("summary") or event.get("rejection_reason"))
            return EventFields(source, kind, name, text=text)
        return EventFields(source, "other", "other", original_name=as_text(kind_tag))


def _action(event: dict[str, Any], source: str) -> EventFields:
    action = event.get("action") if isinstance(event.get("action"), dict) else {}
    fields = EventFields(source, "action", _tool_name(event.get("tool_name"), action.get("kind")) or "other")
    if fields.name == "other":
        fields.original_name = as_text(action.get("kind") or event.get("tool_name"))
    if fields.name == "edit" and action.get("command") == "view":
        fields.name = "read"
    if fields.name == "run":
        fields.command = action.get("command") if isinstance(action.get("command"), str) else None
        fields.text = fields.command
    elif fields.name in ("edit", "read"):
        fields.text = action.get("path") if isinstance(action.get("path"), str) else None
    elif fields.name in ("finish", "think"):
        fields.text = as_text(action.get("message") or action.get("thought"))
    return fields


def _observation(event: dict[str, Any], source: str) -> EventFields:
    obs = event.get("observation") if isinstance(event.get("observation"), dict) else {}
    fields = EventFields(source, "observation", _tool_name(event.get("tool_name"), None) or "other")
    if fields.name == "other":
        fields.original_name = as_text(obs.get("kind") or event.get("tool_name"))
    if fields.name == "edit" and obs.get("command") == "view":
        fields.name = "read"
    fields.text = as_text(obs.get("content", obs.get("output")))
    fields.cause = read_id(event.get("action_id"), "action_id")
    if fields.name == "run":
        fields.command = obs.get("command") if isinstance(obs.get("command"), str) else None
        fields.exit_code = as_int(obs.get("exit_code"))
        if fields.exit_code is None and isinstance(obs.get("metadata"), dict):
            fields.exit_code = as_int(obs["metadata"].get("exit_code"))  # e.g. -1: timed out / no exit
    return fields
