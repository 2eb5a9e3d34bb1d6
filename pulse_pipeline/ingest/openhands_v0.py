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

from collections.abc import Iterable
from typing import Any

from .events import (
    ACTION_NAMES,
    OBSERVATION_NAMES,
    BadEvent,
    Event,
    as_id,
    as_int,
    as_text,
    dump,
    make_event,
)

_OLD_ACTION_ALIASES = {"initialize": "start"}


def _arguments(event: dict[str, Any]) -> dict[str, Any]:
    args = event.get("args")
    if isinstance(args, dict):
        return args
    extras = event.get("extras")
    if isinstance(extras, dict) and extras:
        return extras
    return event  # old flat shape: arguments live on the event itself


def _flatten(raw_events: Iterable[Any]) -> Iterable[Any]:
    for e in raw_events:
        if isinstance(e, list) and len(e) == 2 and all(isinstance(x, dict) for x in e):
            yield from e  # very old evaluation output stores (action, observation) pairs
        else:
            yield e


def normalize_v0(raw_events: Iterable[Any]) -> tuple[list[Event], list[BadEvent]]:
    """Canonical events of one session, and the events that could not be read (by position)."""
    events: list[Event] = []
    bad: list[BadEvent] = []
    seen_message = False
    for position, e in enumerate(_flatten(raw_events)):
        if not isinstance(e, dict):
            bad.append(BadEvent(position, "event is not a JSON object", dump(e)))
            continue
        action = e.get("action")
        observation = e.get("observation")
        source = e.get("source") if isinstance(e.get("source"), str) else None
        text = command = agent_state = original = None
        exit_code = None
        wait = None
        if isinstance(action, str):
            args = _arguments(e)
            name = _OLD_ACTION_ALIASES.get(action, action)
            kind = "action"
            if name == "change_agent_state":
                kind, agent_state = "state", args.get("agent_state")
            elif name not in ACTION_NAMES:
                name, original = "other", action
            if name == "message":
                text = as_text(args.get("content")) if "content" in args else as_text(e.get("message"))
                w = args.get("wait_for_response")
                wait = w if isinstance(w, bool) else None
                if source is None:
                    source = "agent" if seen_message else "user"
                seen_message = True
            elif name == "run":
                command = args.get("command") if isinstance(args.get("command"), str) else None
                text = command
            elif name == "run_ipython":
                text = as_text(args.get("code"))
            elif name in ("read", "write", "edit"):
                text = args.get("path") if isinstance(args.get("path"), str) else None
            elif name in ("finish", "think", "reject"):
                text = as_text(args.get("final_thought") or args.get("thought") or e.get("message"))
            else:
                text = as_text(e.get("message")) if e.get("message") else None
            source = source or "agent"
        elif isinstance(observation, str):
            extras = e.get("extras") if isinstance(e.get("extras"), dict) else e
            if observation == "agent_state_changed":
                kind, name = "state", "agent_state_changed"
                agent_state = extras.get("agent_state")
            else:
                kind, name = "observation", observation
                if observation not in OBSERVATION_NAMES:
                    name, original = "other", observation
                text = as_text(e.get("content"))
                if observation == "run":
                    command = extras.get("command") if isinstance(extras.get("command"), str) else None
                    meta = extras.get("metadata")
                    exit_code = as_int(meta.get("exit_code")) if isinstance(meta, dict) else None
                    if exit_code is None:
                        exit_code = as_int(extras.get("exit_code"))
            source = source or "environment"
        else:
            kind, name, source = "other", "other", source or "unknown"
            original = as_text(e.get("kind") or e.get("type"))
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
                cause=as_id(e.get("cause")),
                wait_for_response=wait,
            )
        )
    return events, bad
