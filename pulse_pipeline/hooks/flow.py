"""What every hook does when a turn ends and when a rating comes, whatever the agent: ask the service once per
session, remember what was shown, send a rating for the segment that was asked.

The service decides once per session (``CONTRACT35.md``: the first ask flips the coin, a later one returns the same
answer), so the hook asks at the first turn that ends and remembers the answer (``state.py``); the user is shown how
to rate once, at that turn, for the segment that just ended. A rating carries an idempotency key made of the agent,
the session and the segment, so the same rating sent twice (a retried hook, a rating typed twice) is stored once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import state as states
from .client import Service, ServiceError
from .transcript import Progress


@dataclass(frozen=True)
class Hook:
    """What a hook call needs: the service, where it keeps its state, and where it hands logs (None: it does not)."""

    service: Service
    state_dir: Path
    drops: Path | None = None


@dataclass
class Outcome:
    """What the hook answers the agent: ``stdout`` (the agent's JSON protocol), one ``stderr`` line, the exit code."""

    stdout: str | None = None
    stderr: str | None = None
    exit_code: int = 0


def ask_once(hook: Hook, agent: str, session_id: str, progress: Progress) -> tuple[states.SessionState, bool]:
    """The session's decision, asking the service when there is none yet; True as second value when the service
    said ask just now (the caller shows the user how to rate). A ``ServiceError`` when the service cannot answer
    (nothing is remembered then: the next turn asks again)."""
    state = states.load(hook.state_dir, agent, session_id)
    if state.decided:
        return state, False
    body: dict[str, Any] = {"session_id": session_id}
    if progress.segment_index is not None:
        body["segment_index"] = progress.segment_index
    if progress.features:
        body["features"] = progress.features
    answer = hook.service.post("/v1/asks", body)
    ask, probability = answer.get("ask"), answer.get("probability")
    if not isinstance(ask, bool) or not isinstance(probability, int | float) or isinstance(probability, bool):
        raise ServiceError(f"POST {hook.service.url}/v1/asks: the answer has no boolean 'ask' and number 'probability'")
    rate_url = answer.get("rate_url") if isinstance(answer.get("rate_url"), str) else None
    state.decided, state.ask, state.probability = True, ask, float(probability)
    state.policy_version = answer.get("policy_version") if isinstance(answer.get("policy_version"), str) else None
    if ask:
        state.segment_index, state.rate_url, state.shown = progress.segment_index, rate_url, True
    states.save(hook.state_dir, agent, state)
    return state, ask


def idempotency_key(agent: str, session_id: str, segment_index: int | None) -> str:
    """One key per agent, session and segment: ``<agent>-<digest>``, the digest of the session id and segment."""
    digest = hashlib.sha256(f"{session_id}\0{segment_index}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{agent}-{digest}"


def send_rating(hook: Hook, agent: str, state: states.SessionState, stars: int, comment: str | None) -> str:
    """Send the user's rating of the asked segment; the line to show the user. A ``ServiceError`` when the
    service cannot take it."""
    key = idempotency_key(agent, state.session_id, state.segment_index)
    body: dict[str, Any] = {"session_id": state.session_id, "stars": stars, "idempotency_key": key}
    if state.segment_index is not None:
        body["segment_index"] = state.segment_index
    if comment:
        body["comment"] = comment
    answer = hook.service.post("/v1/ratings", body, idempotency_key=key)
    state.rated = True
    states.save(hook.state_dir, agent, state)
    if answer.get("duplicate") is True:
        return "PULSE: this turn's rating was already recorded; thank you."
    return f"PULSE: {stars} star{'s' if stars != 1 else ''} recorded for this turn; thank you."


def rate_hint(state: states.SessionState, typed: bool) -> str:
    """What the user is shown when asked: the typed form where a prompt hook catches it, and the link."""
    ways = []
    if typed:
        ways.append("type `rate 1` to `rate 5` as your next prompt (a comment after a colon: `rate 2: it broke X`)")
    if state.rate_url:
        ways.append(f"open {state.rate_url}")
    return "PULSE asks: how well did this turn go for you? " + (" or ".join(ways) or "rate it in PULSE") + "."
