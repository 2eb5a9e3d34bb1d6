"""The one driver every input format plugs into: an adapter parses events, the driver does everything else.

An adapter knows one agent's event format and nothing more: whether an event is of its format (``recognizes``)
and what one event says in the canonical model (``parse``, returning ``EventFields``). What every format shares is
written once, here:

- ``read_events``: walk a session's raw events, send those that are not JSON objects to quarantine by position,
  parse the rest, and give each canonical event its id (the adapter's, else the raw event's ``id``, else ``#seq``),
  timestamp and original JSON;
- ``add_session``: count what was read, segment the events into work segments, write the session's event rows and
  its session row, and quarantine its unreadable events (or the whole session when none was readable).

A raw event usually becomes one canonical event; an adapter whose raw events hold several (a Claude Code line
holds one per content block) overrides ``parse_all`` instead of ``parse``, and each of them keeps the whole raw
event as its original JSON.

**The session's id: its content wins.** An adapter that reads a session id in the events themselves (Claude Code
``sessionId``, Codex ``session_meta``) returns it from ``session_id()``, and that id is used whatever the caller
derived from the record, the file's location or the content hash. What an adapter learns about the whole session
(model, token usage and cost) comes from ``session_info()`` and is kept in the session's metadata JSON.

A new format is one module with an ``Adapter`` subclass, listed in ``records.EVENT_ADAPTERS`` so files and records
of its events are recognized.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from .. import tables
from .events import NUL, BadEvent, Event, NotAnId, as_text, dump, event_columns, read_id
from .segments import is_user_message, segment_events

if TYPE_CHECKING:  # only a type here: importing it loads polars and pyarrow, which `pulse hook` must not wait for
    from .batch import Batch


@dataclass(slots=True)
class EventFields:
    """What an adapter reads off one event, in the canonical model of ``events.py``; the driver adds the id,
    timestamp and original JSON, which every format stores the same way."""

    source: str  # user | agent | environment | ... (as the format says; adapters infer it where it is missing)
    kind: str  # action | observation | state | other
    name: str  # V0 vocabulary; a name the vocabulary lacks is "other", with the format's own in original_name
    original_name: str | None = None
    text: str | None = None
    command: str | None = None
    exit_code: int | None = None
    agent_state: str | None = None  # state changes only, in V0 vocabulary
    cause: str | None = None  # id of the event this one answers
    wait_for_response: bool | None = None
    event_id: str | None = None  # the event's id when the format keeps it elsewhere than the raw event's ``id``
    timestamp: str | None = None  # ISO time when the format keeps it elsewhere than the raw event's ``timestamp``


class UnreadableEvent(ValueError):
    """An adapter's reason a raw event cannot be read (a Cline ``api_req_started`` whose text is not JSON); the
    message is the quarantine reason, and the event is quarantined by position like one that is no JSON object."""


class Adapter:
    """One event format. A subclass sets ``format`` and implements ``parse`` (or ``parse_all``), and
    ``recognizes`` when files of bare events of its format are to be found by their content.

    One instance reads one session, so an adapter may remember what it saw earlier in the session (OpenHands V0
    infers who wrote a message that way; Claude Code and Codex learn the session's id, model and usage).
    """

    format: ClassVar[str]  # the start of raw.sessions.source_format, e.g. openhands_v1
    file_format: ClassVar[str | None] = None  # a file of its events' source_format, when not ``<format>_events``

    @staticmethod
    def recognizes(event: Any) -> bool:
        """Whether a session's first JSON object is an event of this format."""
        return False

    def events(self, raw_events: Iterable[Any]) -> Iterable[Any]:
        """The session's events one by one, as positions count them (V0 unpacks old (action, observation) pairs)."""
        return raw_events

    def parse(self, event: dict[str, Any]) -> EventFields:
        """The canonical fields of one event (a JSON object; anything else never reaches an adapter)."""
        raise NotImplementedError

    def parse_all(self, event: dict[str, Any]) -> list[EventFields]:
        """The canonical events one raw event holds, in order: ``parse``'s one for most formats. Never empty, so
        no raw event is lost."""
        return [self.parse(event)]

    def session_id(self) -> str | None:
        """The session id the events themselves name, learned while parsing them; None when they name none."""
        return None

    def session_info(self) -> dict[str, Any]:
        """What the events say about the whole session (learned while parsing them), kept in its metadata JSON;
        Claude Code and Codex give ``{"llm_usage": {"cost_usd", "prompt_tokens", "completion_tokens"}, "model"}``."""
        return {}


def number_events(events: list[EventFields], raw_id: str | None) -> list[EventFields]:
    """The raw record's id names its first canonical event without an id of its own; a later one is
    ``<raw_id>:<k>`` (``k`` its position among the record's events). For formats whose one record holds several
    events (a Claude Code line, a Gemini CLI message)."""
    first = True
    for k, fields in enumerate(events):
        if fields.event_id is None and raw_id:
            fields.event_id = raw_id if first else f"{raw_id}:{k}"
            first = False
    return events


def read_events(adapter: Adapter, raw_events: Iterable[Any]) -> tuple[list[Event], list[BadEvent]]:
    """A session's canonical events, and the events that could not be read, by position: those that are not JSON
    objects, and those with an id field (their own, a ``cause``, a tool call's) that holds no id
    (``events.read_id``: a boolean, an object, an array, a fraction).

    This loop runs once per event of every drop, so it calls as little Python as it can: each ``Event`` is made
    from a tuple of its fields (``tuple.__new__``, which skips the named tuple's own ``__new__``), the JSON is
    written by orjson directly (``dump`` only for what orjson refuses), and a string or integer id is read without
    ``read_id``. Keyword arguments and a call per id and per dump were a quarter of reading's time (issue 16)."""
    events: list[Event] = []
    bad: list[BadEvent] = []
    for position, raw in enumerate(adapter.events(raw_events)):
        if not isinstance(raw, dict):
            bad.append(BadEvent(position, "event is not a JSON object", dump(raw)))
            continue
        timestamp = raw.get("timestamp")
        if not isinstance(timestamp, str):
            timestamp = None
        try:
            raw_json = orjson.dumps(raw).decode()
        except TypeError:  # deeper than orjson writes, or an integer beyond 64 bits: ``dump`` writes any
            raw_json = dump(raw)
        try:
            parsed = adapter.parse_all(raw)
            ids = [fields.event_id or _raw_id(raw) for fields in parsed]
        except (NotAnId, UnreadableEvent) as error:
            bad.append(BadEvent(position, str(error), raw_json))
            continue
        for fields, event_id in zip(parsed, ids, strict=True):
            state = fields.agent_state
            events.append(
                _new_event(
                    Event,
                    (
                        event_id or f"#{len(events)}",
                        fields.timestamp or timestamp,
                        fields.source,
                        fields.kind,
                        fields.name,
                        fields.original_name,
                        fields.text,
                        fields.command,
                        fields.exit_code,
                        state if isinstance(state, str) else None,
                        fields.cause,
                        fields.wait_for_response,
                        raw_json,
                    ),
                )
            )
    return events, bad


_new_event = tuple.__new__  # Event(*fields) without the Python-level __new__ a named tuple adds


def _raw_id(raw: dict[str, Any]) -> str | None:
    """The raw event's own ``id`` as ``events.read_id`` reads it (a non-empty string or an integer without a call)."""
    value = raw.get("id")
    if value.__class__ is str and value and NUL not in value:  # a NUL: ``read_id`` says why it is no id
        return value
    if value.__class__ is int:  # not a boolean, whose class is bool
        return str(value)
    return read_id(value, "event id")


def task_event(task: str) -> Event:
    """The user's request given beside the events (an evaluation output's ``instruction``) as a user message."""
    fields = (TASK_EVENT_ID, None, "user", "action", "message", None, task, None, None, None, None, None)
    return Event(*fields, dump({"instruction": task}))


TASK_EVENT_ID = "instruction"


def _meta(info: dict[str, Any], key: str) -> str | None:
    """A session attribute from the record itself, else from its ``metadata`` object (``NotAnId`` when it is no
    id: a boolean user, an object experiment)."""
    value = info.get(key)
    if value is None and isinstance(info.get("metadata"), dict):
        value = info["metadata"].get(key)
    return read_id(value, key)


def add_session(
    batch: Batch,
    source_file: str,
    record_index: int,
    session_id: str,
    source_format: str,
    adapter: Adapter,
    raw_events: Iterable[Any],
    info: dict[str, Any],
    task: Any = None,
    events: list[Event] | None = None,
) -> int:
    """Read one session's events with ``adapter`` and write its rows; returns how many events were accepted
    (0: the session went to quarantine, because it had no readable event, or because its user, experiment or
    variant is no id: ``events.read_id``).

    ``session_id`` is the caller's (from the record, the file's location or the content hash); an id the events
    themselves name (``adapter.session_id()``) wins over it. ``info`` is the record the events came from (empty for
    a file of bare events): its user, experiment, variant and feedback fill the session row, and its other keys,
    with ``adapter.session_info()``, are kept as the session's metadata JSON.

    ``task``: the user's request as the record states it apart from its events (an evaluation output's
    ``instruction``). When it is text and no readable event is a user message, it becomes the session's first
    event: a user ``message`` with event id ``instruction`` whose original JSON is ``{"instruction": task}``, so
    the session has its user message and its work segment. When the events hold a user message (newer outputs
    log the task as one) nothing is added: the request is not counted twice.

    ``events``: the session's events already read, as ``read_events`` would give them (none unreadable), for a
    format that builds them together (``langfuse.py``: ``EventFields`` handed one by one through an adapter were
    about a twentieth of its reading time); then ``adapter`` gives only ``session_id`` and ``session_info``.
    """
    batch.read["session"] += 1
    try:
        people = {key: _meta(info, key) for key in ("user_id", "experiment", "variant")}
    except NotAnId as error:
        # the record is quarantined whole, its events with it (in its raw text), so they are not counted
        batch.quarantine(source_file, record_index, "session", f"session {error}", dump(info))
        return 0
    events, bad = read_events(adapter, raw_events) if events is None else (events, [])
    if isinstance(task, str) and task.strip() and events and not any(is_user_message(e) for e in events):
        events.insert(0, task_event(task))
    session_id = adapter.session_id() or session_id
    batch.read["event"] += len(events) + len(bad)
    for b in bad:
        batch.quarantine(source_file, record_index, "event", b.reason, b.raw_json, event_index=b.position)
    if not events:
        batch.quarantine(source_file, record_index, "session", "session has no readable events", dump(info))
        return 0
    record_key = f"{batch.drop_id}:{source_file}:{record_index}"
    seg = segment_events(events)
    n = len(events)
    batch.extend(
        tables.EVENTS,
        {
            "drop_id": [batch.drop_id] * n,
            "record_key": [record_key] * n,
            "session_id": [session_id] * n,
            "seq": range(n),
            **event_columns(events),
            "segment_index": seg.index,
            "segment_close": seg.close,
        },
    )
    stamps = [e.timestamp for e in events if e.timestamp]
    metadata = {k: v for k, v in info.items() if k not in ("history", "trajectory", "events", "ratings", "messages")}
    metadata.update(adapter.session_info())
    batch.add(
        tables.SESSIONS,
        {
            "drop_id": batch.drop_id,
            "record_key": record_key,
            "source_file": source_file,
            "record_index": record_index,
            "session_id": session_id,
            "source_format": source_format,
            **people,
            "feedback": as_text(info.get("feedback") or info.get("polarity")),
            "started_at": min(stamps) if stamps else None,
            "ended_at": max(stamps) if stamps else None,
            "n_events": n,
            "n_user_messages": sum(1 for e in events if is_user_message(e)),
            "n_segments": seg.n_segments,
            "n_shell_commands": sum(1 for e in events if e.kind == "action" and e.name == "run"),
            "metadata_json": dump(metadata) if metadata else None,
        },
    )
    return n
