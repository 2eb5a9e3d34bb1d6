"""OpenAI chat-completions messages as one session's events: SWE-Gym's OpenHands trajectories (field notes §8).

A SWE-Gym row is ``{instance_id, run_id, resolved, messages: [...], tools, test_result}``; each message is
``{role, content, tool_calls, tool_call_id, name, function_call}`` as the chat-completions API takes it (OpenHands'
CodeAct agent with function calling writes its history that way). ``records.classify`` calls such a row ``chat``
when its first message has a ``role``; a JSON array (or JSON lines) of bare messages is one session too.

Rules, each stated once, here:

- ``system`` (and ``developer``) messages are ``system`` actions of the ``agent``, as OpenHands' own system
  prompt is in V0.
- ``user`` messages are the user's ``message``: they count, and each opens a work segment (the no-state rule of
  ``segments.py``: a segment runs to the agent's next message that waits, a ``finish``, or the next user message).
  The evaluation harness's "please continue" turns are user-role too and are counted as the user's: the log does
  not tell them apart.
- ``assistant`` messages: their text (``content``, a string or a list of ``{type: text, text}`` parts) is the
  agent's ``message``, which waits for the user when the message calls no tool (OpenHands then waits for the user's
  reply); each tool call (``tool_calls[i].function`` or the older ``function_call``, ``arguments`` a JSON string)
  is an agent action named by its tool: ``execute_bash``/``bash`` is ``run`` (``command``), ``execute_ipython_cell``
  ``run_ipython`` (``code``), ``str_replace_editor`` ``read`` for ``view``, ``write`` for ``create``, else ``edit``;
  ``finish``, ``think``, ``browser`` (``browse_interactive``), ``web_read`` (``browse``); any other tool is
  ``other`` with its name as ``original_name``. A call's ``id`` is its event id. An assistant message with neither
  text nor calls is an empty agent ``message``, so no raw message is lost.
- ``tool`` (and ``function``) messages are observations from the ``environment`` answering the call of their
  ``tool_call_id`` (their ``cause``), named like that call (else by their ``name``; a name V0 has no observation
  of, such as ``finish``, is ``other`` with the tool's name as ``original_name``); a shell result's exit code is
  read from OpenHands' ``[Command finished with exit code N]`` line.

Chat messages carry no timestamps, ids or agent states: events are ordered as listed and numbered ``#n``.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from .adapter import Adapter, EventFields
from .events import OBSERVATION_NAMES, as_int, as_text, read_id

ROLES = frozenset(["system", "developer", "user", "assistant", "tool", "function"])
_EXIT_CODE = re.compile(r"\[Command finished with exit code (-?\d+)\]")
_TOOL_NAMES = {
    "execute_bash": "run",
    "bash": "run",
    "execute_ipython_cell": "run_ipython",
    "finish": "finish",
    "think": "think",
    "browser": "browse_interactive",
    "web_read": "browse",
}


def is_chat_message(value: Any) -> bool:
    """Whether ``value`` is a chat-completions message (an object whose ``role`` is one of ``ROLES``)."""
    return isinstance(value, dict) and value.get("role") in ROLES


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments: a JSON object given as text (the API's form) or as an object; {} otherwise."""
    args = call.get("arguments")
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return {}
    return args if isinstance(args, dict) else {}


def _tool_action(tool: str, args: dict[str, Any]) -> str:
    if tool == "str_replace_editor":
        return {"view": "read", "create": "write"}.get(args.get("command"), "edit")
    return _TOOL_NAMES.get(tool, "other")


class ChatMessages(Adapter):
    """Chat-completions messages (SWE-Gym's OpenHands trajectories)."""

    format = "chat_messages"

    def __init__(self) -> None:
        self.calls: dict[str, str] = {}  # tool call id -> the action name its result is named by

    @staticmethod
    def recognizes(event: Any) -> bool:
        return is_chat_message(event)

    def parse(self, event: dict[str, Any]) -> EventFields:  # one message holds several events: parse_all
        return self.parse_all(event)[0]

    def parse_all(self, event: dict[str, Any]) -> list[EventFields]:
        role = event.get("role")
        text = as_text(event.get("content"))
        if role in ("system", "developer"):
            return [EventFields("agent", "action", "system", text=text)]
        if role == "user":
            return [EventFields("user", "action", "message", text=text)]
        if role in ("tool", "function"):
            return [self._result(event, text)]
        if role != "assistant":
            return [EventFields("unknown", "other", "other", original_name=as_text(role), text=text)]
        calls = [c for c in event.get("tool_calls") or [] if isinstance(c, dict)]
        if isinstance(event.get("function_call"), dict):
            calls.append({"function": event["function_call"]})
        out = []
        if text or not calls:
            out.append(EventFields("agent", "action", "message", text=text, wait_for_response=not calls))
        out.extend(self._call(call) for call in calls)
        return out

    def _call(self, call: dict[str, Any]) -> EventFields:
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        tool = as_text(function.get("name")) or ""
        args = _arguments(function)
        name = _tool_action(tool, args)
        fields = EventFields("agent", "action", name, original_name=(tool or None) if name == "other" else None)
        fields.event_id = read_id(call.get("id"), "tool call id")
        if fields.event_id is not None:
            self.calls[fields.event_id] = name
        if name == "run":
            fields.command = args.get("command") if isinstance(args.get("command"), str) else None
            fields.text = fields.command
        elif name == "run_ipython":
            fields.text = as_text(args.get("code"))
        elif name in ("read", "write", "edit"):
            fields.text = args.get("path") if isinstance(args.get("path"), str) else None
        elif name in ("finish", "think"):
            fields.text = as_text(args.get("message") or args.get("thought"))
        return fields

    def _result(self, event: dict[str, Any], text: str | None) -> EventFields:
        cause = read_id(event.get("tool_call_id"), "tool_call_id")
        tool = as_text(event.get("name")) or ""
        name = self.calls.get(cause) if cause is not None else None
        name = name or _tool_action(tool, {})
        if name not in OBSERVATION_NAMES:  # a finish or browser call's result: kept as other, named by its tool
            name = "other"
        original = (tool or None) if name == "other" else None
        fields = EventFields("environment", "observation", name, original_name=original)
        fields.text, fields.cause = text, cause
        if name == "run" and text and (found := _EXIT_CODE.findall(text)):
            fields.exit_code = as_int(found[-1])
        return fields
