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

from typing import Any

from .adapter import Adapter, EventFields
from .events import ACTION_NAMES, OBSERVATION_NAMES, as_int, as_text, read_id


class Canonical(Adapter):
    """PULSE canonical events (the ``events`` list of a canonical session record)."""

    format = "pulse_canonical"

    def parse(self, event: dict[str, Any]) -> EventFields:
        command = event.get("command") if isinstance(event.get("command"), str) else None
        wait = event.get("wait_for_response")
        fields = EventFields(
            source=event.get("source") if isinstance(event.get("source"), str) else "unknown",
            kind="other",
            name="other",
            text=as_text(event.get("text")) if event.get("text") is not None else command,
            command=command,
            cause=read_id(event.get("cause"), "cause"),
            wait_for_response=wait if isinstance(wait, bool) else None,
        )
        etype = event.get("type")
        if etype == "state":
            fields.kind, fields.name = "state", "agent_state_changed"
            fields.agent_state = event.get("state") if isinstance(event.get("state"), str) else None
        elif etype in ("observation", "error"):
            fields.kind = "observation"
            fields.name = "error" if etype == "error" else as_text(event.get("of")) or "other"
            if fields.name not in OBSERVATION_NAMES:
                fields.name, fields.original_name = "other", fields.name
            fields.exit_code = as_int(event.get("exit_code"))
        elif isinstance(etype, str) and etype in ACTION_NAMES:
            fields.kind, fields.name = "action", etype
        else:
            fields.original_name = as_text(etype)
        return fields
