"""The PULSE canonical session format, for agents that have no adapter of their own.

One JSON object per line (``.jsonl``)::

    {"session_id": "abc", "user_id": "u1", "experiment": "llm-backbone", "variant": "gpt-5",
     "metadata": {...},                                  # optional, kept as JSON
     "events": [
        {"id": "1", "timestamp": "2025-06-01T12:00:00", "source": "user", "type": "message", "text": "Fix the bug"},
        {"id": "2", "source": "environment", "type": "state", "state": "running"},
        {"id": "3", "source": "agent", "type": "run", "command": "pytest -q"},
        {"id": "4", "source": "environment", "type": "observation", "of": "run", "exit_code": 1, "text": "1 failed"},
        {"id": "5", "source": "agent", "type": "message", "text": "Fixed.", "wait_for_response": true},
        {"id": "6", "source": "environment", "type": "state", "state": "awaiting_user_input"}],
     "ratings": [{"event_id": "5", "rating": 4, "reason": null, "created_at": "2025-06-01T12:05:00"}]}

``type`` is an OpenHands V0 action name (message, run, run_ipython, edit, read, browse, think, finish, ...),
``state`` (with ``state`` in the V0 agent-state vocabulary), ``observation`` (with ``of``: what it observes)
or ``error``. A rating names its segment by ``event_id`` or ``segment_index`` (0-based); with neither it rates
the session's last segment.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .events import ACTION_NAMES, OBSERVATION_NAMES, BadEvent, Event, as_id, as_int, as_text, dump, make_event


def normalize_canonical(raw_events: Iterable[Any]) -> tuple[list[Event], list[BadEvent]]:
    events: list[Event] = []
    bad: list[BadEvent] = []
    for position, e in enumerate(raw_events):
        if not isinstance(e, dict):
            bad.append(BadEvent(position, "event is not a JSON object", dump(e)))
            continue
        etype = e.get("type")
        original = agent_state = command = None
        exit_code = None
        if etype == "state":
            kind, name = "state", "agent_state_changed"
            agent_state = e.get("state") if isinstance(e.get("state"), str) else None
        elif etype in ("observation", "error"):
            kind = "observation"
            name = "error" if etype == "error" else str(e.get("of") or "other")
            if name not in OBSERVATION_NAMES:
                name, original = "other", name
            exit_code = as_int(e.get("exit_code"))
        elif isinstance(etype, str) and etype in ACTION_NAMES:
            kind, name = "action", etype
        else:
            kind, name, original = "other", "other", as_text(etype)
        if isinstance(e.get("command"), str):
            command = e["command"]
        text = as_text(e.get("text")) if e.get("text") is not None else command
        wait = e.get("wait_for_response") if isinstance(e.get("wait_for_response"), bool) else None
        source = e.get("source") if isinstance(e.get("source"), str) else "unknown"
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
