"""The canonical event model every adapter emits (``adapter.py`` builds the events from what an adapter parses).

An event is an action, an observation, a state change, or ``other`` (a shape we do not know, kept as is).
``name`` uses OpenHands V0 vocabulary (``message``, ``run``, ``run_ipython``, ``edit``, ``finish``, ...), so one
set of rules serves every source; a name we do not know becomes ``other`` and the original goes to
``original_name``. ``agent_state`` is set on state changes only, in V0 vocabulary (V1 states are mapped).

What the canonical model does not hold stays in each event's original JSON (``raw_json``), which
``features.event_features`` reads where it needs more: V0 ``llm_metrics``, V1 ``stats`` updates and V1
``critic_result`` scores. A session's LLM totals from a format that records them nowhere in its events go into the
session's metadata under ``llm_usage`` (``llm_usage`` below).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson


class Event(NamedTuple):
    """One event in the canonical model; its fields are named as raw.events' columns (``event_columns``)."""

    event_id: str  # the source's id, else ``#`` + its position among the session's readable events
    timestamp: str | None
    source: str
    kind: str  # action | observation | state | other
    name: str
    original_name: str | None
    text: str | None
    command: str | None
    exit_code: int | None
    agent_state: str | None
    cause: str | None
    wait_for_response: bool | None
    raw_json: str


class BadEvent(NamedTuple):
    """An event that could not be read at all (not a JSON object); it goes to quarantine."""

    position: int
    reason: str
    raw_json: str


ACTION_NAMES = frozenset(
    [
        "message",
        "system",
        "start",
        "read",
        "write",
        "edit",
        "run",
        "run_ipython",
        "browse",
        "browse_interactive",
        "call_tool_mcp",
        "delegate",
        "think",
        "finish",
        "reject",
        "null",
        "pause",
        "resume",
        "stop",
        "change_agent_state",
        "push",
        "send_pr",
        "recall",
        "condensation",
        "condensation_request",
        "task_tracking",
        "loop_recovery",
    ]
)
OBSERVATION_NAMES = frozenset(
    [
        "run",
        "run_ipython",
        "read",
        "write",
        "edit",
        "browse",
        "error",
        "null",
        "success",
        "user_rejected",
        "delegate",
        "think",
        "recall",
        "condensation",
        "mcp",
        "task_tracking",
        "loop_recovery",
        "download",
        "agent_state_changed",
    ]
)
AGENT_STATES = frozenset(
    [
        "loading",
        "init",
        "running",
        "awaiting_user_input",
        "paused",
        "stopped",
        "finished",
        "rejected",
        "error",
        "awaiting_user_confirmation",
        "user_confirmed",
        "user_rejected",
        "rate_limited",
    ]
)
# A work segment closes at the first of these (field notes §1). V1's ``stuck`` is kept as its own state.
CLOSING_STATES = frozenset(
    ["awaiting_user_input", "finished", "stopped", "paused", "error", "rejected", "rate_limited", "stuck"]
)


def event_columns(events: list[Event]) -> dict[str, tuple[Any, ...]]:
    """The events column by column, ``{field: values}``: an ``Event``'s fields are named as raw.events' columns."""
    if not events:
        return {name: () for name in Event._fields}
    return dict(zip(Event._fields, zip(*events, strict=True), strict=True))


def as_text(value: Any) -> str | None:
    """Text of a content field: strings as they are, OpenAI-style content part lists joined, else JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in value]
        return "\n".join(p for p in parts if p)
    return orjson.dumps(value).decode()


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if -(2**31) <= value < 2**31 else None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def as_id(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def dump(value: Any) -> str:
    return orjson.dumps(value).decode()


LLM_USAGE = "llm_usage"


def llm_usage(cost_usd: float | None, prompt_tokens: int | None, completion_tokens: int | None) -> dict[str, Any]:
    """A session's LLM totals as session metadata, ``{"llm_usage": {"cost_usd", "prompt_tokens",
    "completion_tokens"}}`` (None where unknown), for formats whose events carry them in neither V0 ``llm_metrics``
    nor V1 ``stats`` (an SDK ``base_state.json``, Claude Code, Codex). Merged into the record an adapter hands to
    ``adapter.add_session``, it lands in ``raw.sessions.metadata_json``; ``features.event_features`` reads it when
    the events have none."""
    return {LLM_USAGE: {"cost_usd": cost_usd, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}
