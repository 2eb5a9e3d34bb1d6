"""Work segments: the unit a user rates (field notes §1, the paper's §3.1).

With state events (any event carrying an ``agent_state``), a segment

- opens at a user ``message`` (or, when work starts with no user message in the stream, at a ``running``
  state: automations and fixtures that begin mid-conversation),
- is active from the next ``running`` state; user messages typed while it runs belong to it,
- closes at the first closing state (awaiting_user_input, finished, stopped, paused, error, rejected,
  rate_limited, stuck) after it became active.

Without state events (evaluation outputs, old exports) a segment runs from a user message to the first of:
the agent's next ``message`` that waits for a response, a ``finish``, or the event before the next user message.

A segment still open when the stream ends is closed at its last event with reason ``stream_end``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .events import CLOSING_STATES, Event


@dataclass(frozen=True)
class Segmentation:
    index: list[int | None]  # segment of each event, None outside every segment
    close: list[str | None]  # on a segment's last event: why it closed
    n_segments: int


def is_user_message(e: Event) -> bool:
    return e.name == "message" and e.source == "user"


def segment_events(events: Sequence[Event]) -> Segmentation:
    if any(e.agent_state for e in events):
        return _by_state(events)
    return _by_fallback(events)


def _by_state(events: Sequence[Event]) -> Segmentation:
    index: list[int | None] = [None] * len(events)
    close: list[str | None] = [None] * len(events)
    current: int | None = None
    active = False
    n = 0
    for i, e in enumerate(events):
        state = e.agent_state
        if current is None and (is_user_message(e) or state == "running"):
            current, active, n = n, state == "running", n + 1
        if current is None:
            continue
        index[i] = current
        if state == "running":
            active = True
        elif active and state in CLOSING_STATES:
            close[i] = state
            current, active = None, False
    if current is not None:
        close[len(events) - 1] = "stream_end"
    return Segmentation(index, close, n)


def _by_fallback(events: Sequence[Event]) -> Segmentation:
    index: list[int | None] = [None] * len(events)
    close: list[str | None] = [None] * len(events)
    current: int | None = None
    n = 0
    for i, e in enumerate(events):
        if is_user_message(e):
            if current is not None and i > 0:
                close[i - 1] = "next_user_message"
            current, n = n, n + 1
        if current is None:
            continue
        index[i] = current
        if e.source != "user" and (e.name == "finish" or (e.name == "message" and e.wait_for_response)):
            close[i] = "finish" if e.name == "finish" else "awaiting_response"
            current = None
    if current is not None:
        close[len(events) - 1] = "stream_end"
    return Segmentation(index, close, n)
