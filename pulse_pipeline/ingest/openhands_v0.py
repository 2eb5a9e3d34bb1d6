"""OpenHands V0 events (event lists, evaluation ``history``, feedback ``trajectory``, on-disk event files).

Shapes met in the wild, all handled here:

- modern: ``{id, timestamp, source, message, action, args, ...}`` or ``{..., observation, content, extras}``;
- old evaluation output (2024): no ``id``/``source``/``timestamp``, arguments flat on the event
  (``{"action": "run", "command": ..., "thought": ...}``, ``{"observation": "run", "exit_code": 0, ...}``);
- old feedback records: ``id: null``, ``action: "initialize"``, arguments under ``extras``, ``source: "agent"``
  for state changes, and action names that no longer exist (``task_plan``, ``rag_search``) which become ``other``.

Where ``source`` is missing it is inferred: observations come from the ``environment``; the first ``message``
action of a session is the user's (the task), later ones the agent's; other actions are the agent's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .adapter import Adapter, EventFields
from .events import ACTION_NAMES, OBSERVATION_NAMES, as_int, as_text, read_id

_OLD_ACTION_ALIASES = {"initialize": "start"}


def _arguments(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    if isinstance(args, dict):
        return args
    extras = event.get("extras")
    if isinstance(extras, dict) and extras:
        return extras
    return event  # old flat shape: arguments live on the event itself


class OpenHandsV0(Adapter):
    """OpenHands V0 events; the loosest format, so also what a session no other adapter claims is read as."""

    format = "openhands_v0"

    def __init__(self) -> None:
        self.seen_message = False  # the session's first message action without a source is the user's task

    @staticmethod
    def recognizes(event: Any) -> bool:
        return isinstance(event, dict) and ("action" in event or "observation" in event)

    def events(self, raw_events: Iterable[Any]) -> Iterator[Any]:
        for e in raw_events:
            if isinstance(e, list) and len(e) == 2 and all(isinstance(x, dict) for x in e):
                yield from e  # very old evaluation output stores (action, observation) pairs
            else:
                yield e

    def parse(self, event: dict[str, Any]) -> EventFields:
        action = event.get("action")
        source = event.get("source")
        if not isinstance(source, str):
            source = None
        if isinstance(action, str):
            fields = self._action(event, action, source)
        elif isinstance(observation := event.get("observation"), str):
            fields = _observation(event, observation, source)
        else:
            original = as_text(event.get("kind") or event.get("type"))
            fields = EventFields(source or "unknown", "other", "other", original_name=original)
        cause = event.get("cause")
        fields.cause = None if cause is None else read_id(cause, "cause")  # no call for the many events without one
        return fields

    def _action(self, event: dict[str, Any], action: str, source: str | None) -> EventFields:
        args = _arguments(event)
        name = _OLD_ACTION_ALIASES.get(action, action)
        fields = EventFields(source or "agent", "action", name)
        if name == "change_agent_state":
            fields.kind, fields.agent_state = "state", args.get("agent_state")
        elif name not in ACTION_NAMES:
            fields.name, fields.original_name = "other", action
        if fields.name == "message":
            fields.text = as_text(args.get("content")) if "content" in args else as_text(event.get("message"))
            wait = args.get("wait_for_response")
            fields.wait_for_response = wait if isinstance(wait, bool) else None
            if source is None:
                fields.source = "agent" if self.seen_message else "user"
            self.seen_message = True
        elif fields.name == "run":
            fields.command = args.get("command") if isinstance(args.get("command"), str) else None
            fields.text = fields.command
        elif fields.name == "run_ipython":
            fields.text = as_text(args.get("code"))
        elif fields.name in ("read", "write", "edit"):
            fields.text = args.get("path") if isinstance(args.get("path"), str) else None
        elif fields.name in ("finish", "think", "reject"):
            fields.text = as_text(args.get("final_thought") or args.get("thought") or event.get("message"))
        else:
            fields.text = as_text(event.get("message")) if event.get("message") else None
        return fields


def _observation(event: dict[str, Any], observation: str, source: str | None) -> EventFields:
    extras = event.get("extras")
    if not isinstance(extras, dict):
        extras = event
    fields = EventFields(source or "environment", "observation", observation)
    if observation == "agent_state_changed":
        fields.kind, fields.agent_state = "state", extras.get("agent_state")
        return fields
    if observation not in OBSERVATION_NAMES:
        fields.name, fields.original_name = "other", observation
    fields.text = as_text(event.get("content"))
    if observation == "run":
        fields.command = extras.get("command") if isinstance(extras.get("command"), str) else None
        meta = extras.get("metadata")
        fields.exit_code = as_int(meta.get("exit_code")) if isinstance(meta, dict) else None
        if fields.exit_code is None:
            fields.exit_code = as_int(extras.get("exit_code"))
    return fields
