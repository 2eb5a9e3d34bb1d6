"""Langfuse traces, observations and scores → sessions, work segments, events and ratings (issue 39).

Langfuse (langfuse/langfuse) keeps what an LLM application did as *traces* (one request of the application, with
``sessionId``, ``userId``, ``input``, ``release``, ``version``, ``environment``, ``tags``, ``metadata``), each made of
*observations* (``GENERATION`` an LLM call with ``model``, ``usageDetails``, ``costDetails``, ``totalCost``;
``TOOL``, ``SPAN``, ``AGENT``, ``CHAIN``, ``EVENT``, ...), and *scores* on traces, observations and sessions (see
``scores.py``). The same objects come in three spellings, all read here:

- the public API's camelCase objects: one trace with its details (``GET /api/public/traces/{id}``, a
  ``TraceWithFullDetails``: the trace with ``observations`` and ``scores`` arrays, or ``{"trace": ...,
  "observations": [...]}``), the v2 observations (``GET /api/public/v2/observations``: ``providedModelName``,
  ``sessionId``, ``userId``, ``traceName``, ``tags``, ``release`` on every observation) and the v3 scores
  (``GET /api/public/v3/scores``: ``value`` typed by ``dataType``, the target in ``subject{kind, id, traceId}``),
  which ``pulse pull langfuse`` writes;
- the blob-storage export's snake_case rows (``traces/``, ``observations/``, ``observations_v2/``, ``scores/``:
  ``trace_id``, ``session_id``, ``provided_model_name``, ``usage_details``, ``data_type``, ``string_value``, ...).

Field names are those of langfuse/langfuse at 62751446149b702b419a9292ddfc2280cdf74b8c:
``fern/apis/server/definition/commons.yml`` (``Trace``, ``TraceWithFullDetails``, ``ObservationsView``,
``BaseScore``), ``observations-v2.yml``, ``scores-v3.yml``; the export's columns in
``packages/shared/src/server/repositories/traces.ts``, ``scores.ts`` (``build*ForBlobStorageExportQuery``),
``packages/shared/src/domain/observation-field-groups.ts`` and
``packages/shared/src/server/queries/clickhouse-sql/event-query-builder.ts`` (``observations_v2``). ``input``,
``output`` and ``metadata`` may be JSON text, even JSON text of JSON text: they are decoded (``decoded``).

**The mapping.**

- A **session** is a ``sessionId``; a trace without one is a session of its own, named by the trace id.
- Each **trace is a work segment**: it opens with a user ``message`` whose event id is the **trace id** (so a score
  on the trace, a rating row with ``event_id`` = trace id, lands on that segment, even from a later drop), followed
  by the trace's observations in start order, each an event whose id is the observation id. Traces follow each
  other in time; a segment runs to the next trace's user message (``segments.py``: the next user message closes
  it).
- The **user's words** of a trace are the user messages of its ``input`` when that is a conversation or plain text;
  where it is empty or not a conversation (``{"prompt": ...}``, an object of the framework's), those of its earliest
  generation that has user messages. Only user-role messages (``user``, LangChain's ``human``) count, never a system
  or developer prompt, an assistant turn or a tool result; and of a conversation only its last turn (the user
  messages up to its last one, after the last assistant reply before it): a chat application sends the whole
  history with each request, and the earlier turns are the session's earlier traces. A conversation may be a list
  of messages (OpenAI chat, OpenAI Responses items, LangChain ``{type, content}``, content parts), an object with
  ``messages``, or a text transcript (``user: ...`` lines). A trace with no user words still opens its segment with
  a user message, with no text.
- **Agent steps**: a ``GENERATION`` is an agent ``message`` (its text the assistant's reply in the output); a
  ``TOOL`` observation, or a ``SPAN`` named as a tool the trace's generations called, is a tool call (``other``,
  the tool's name kept as ``original_name``); an observation of ``level`` ERROR is an ``error`` observation (its
  ``statusMessage`` the text); any other observation (span, agent, chain, event, ...) an ``other`` event whose
  ``original_name`` is its type.
- **Session metadata**: ``model`` (the model of most generations), ``llm_usage`` (cost: each generation's
  ``totalCost``, else ``costDetails.total``; tokens: ``usageDetails.input`` and ``.output``, summed over the
  session), ``tools`` (the tool names seen), and from the traces ``release``, ``version``, ``environment``,
  ``metadata`` (the session's first trace that has each), ``tags`` (all of them); ``userId`` is the user.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import orjson

from .. import tables
from .adapter import Adapter, add_session
from .batch import Batch
from .events import Event, NotAnId, as_text, dump, llm_usage, read_id
from .scores import Score, ScoreRules, add_score, score_rules, score_value

LANGFUSE = "langfuse"
CHUNK_EVENTS = 50_000  # a batch of sessions is handed to the warehouse once it holds this many events (files.py's)
EXPORT_TABLES = ("traces", "observations", "observations_v2", "scores")
"""The blob-storage export's folders (``<project>/<table>/<timestamp>.<ext>``), and the pull's."""

USER_ROLES = frozenset(["user", "human"])
ASSISTANT_ROLES = frozenset(["assistant", "ai", "model", "bot"])
_TRANSCRIPT_LINE = re.compile(r"^(system|developer|user|human|assistant|ai|tool|function)\s*:\s?", re.I | re.M)


# --- reading values --------------------------------------------------------------------------------------------


def decoded(value: Any, depth: int = 3) -> Any:
    """A value that may be JSON text (of JSON text...), decoded: Langfuse keeps ``input``, ``output`` and
    ``metadata`` as the text the SDK sent, and some SDKs send JSON of a JSON string. Text that is not JSON, or not
    an object, array or string once decoded, is kept as it was."""
    while depth and value.__class__ is str:
        head = value[:1]
        if head not in ("{", "[", '"'):
            stripped = value.lstrip()
            head = stripped[:1]
            if head not in ("{", "[", '"'):
                return value
        try:
            inner = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        if not isinstance(inner, dict | list | str):
            return value
        value, depth = inner, depth - 1
    return value


def pick(row: dict[str, Any], camel: str, snake: str) -> Any:
    """A field by its API (camelCase) name, else its export (snake_case) name."""
    value = row.get(camel)
    return row.get(snake) if value is None else value


def _text_id(value: Any, what: str) -> str | None:
    return read_id(value, what)


def _time(value: Any) -> str | None:
    """A timestamp as text (a Parquet export gives datetimes)."""
    if value is None or value.__class__ is str:
        return value or None
    if isinstance(value, datetime | date):
        return value.isoformat()
    return None


def _mapping(value: Any) -> dict[str, Any]:
    """A map column: a JSON object, its text, or Parquet's list of (key, value) pairs."""
    value = decoded(value, 2)
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and all(isinstance(p, list | tuple) and len(p) == 2 for p in value):
        return {str(k): v for k, v in value}
    return {}


def _names(value: Any) -> list[str]:
    value = decoded(value, 2)
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str) and v]
    return []


# --- messages ----------------------------------------------------------------------------------------------------


def _role(message: dict[str, Any]) -> str | None:
    role = message.get("role")
    if role is None:
        role = message.get("type")  # LangChain: human, ai, system, tool
        if role in ("function_call", "tool_call"):
            return "assistant"  # OpenAI Responses: a tool call the model made
        if role in ("function_call_output", "tool_result"):
            return "tool"
    return role.lower() if isinstance(role, str) else None


def _content_text(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if content is None:
        content = message.get("text")
    if content is None and isinstance(message.get("parts"), list):  # Gemini, OTel GenAI
        content = message["parts"]
    text = as_text(content) if content is not None else None
    return text if text and text.strip() else None


def conversation(value: Any) -> list[tuple[str, str | None]] | None:
    """``(role, text)`` of each message when ``value`` is a conversation, else None (see the module docstring)."""
    value = decoded(value)
    if isinstance(value, dict):
        for key in ("messages", "input"):
            if isinstance(value.get(key), list):
                return conversation(value[key])
        role = _role(value) if "content" in value or "parts" in value else None
        return [(role, _content_text(value))] if role else None
    if isinstance(value, list):
        found = []
        for item in value:
            if isinstance(item, dict):
                role = _role(item)
                if role:
                    found.append((role, _content_text(item)))
            elif isinstance(item, str) and _TRANSCRIPT_LINE.match(item):
                found.extend(_transcript(item))
        return found or None
    if isinstance(value, str) and _TRANSCRIPT_LINE.match(value):
        return _transcript(value)
    return None


def _transcript(text: str) -> list[tuple[str, str | None]]:
    """``user: ...`` / ``assistant: ...`` lines (a prompt some instrumentations record as one text)."""
    marks = list(_TRANSCRIPT_LINE.finditer(text))
    turns = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[mark.end() : end].strip()
        turns.append((mark.group(1).lower(), body or None))
    return turns


def last_turn_user_words(messages: list[tuple[str, str | None]]) -> list[str]:
    """The user messages of a conversation's last turn: those up to its last user message, after the last
    assistant message before it (system and tool messages in between do not end the turn)."""
    last_user = max((i for i, (role, _) in enumerate(messages) if role in USER_ROLES), default=None)
    if last_user is None:
        return []
    start = last_user
    while start > 0 and messages[start - 1][0] not in ASSISTANT_ROLES:
        start -= 1
    return [text for role, text in messages[start : last_user + 1] if role in USER_ROLES and text]


def trace_input_words(value: Any) -> list[str] | None:
    """The user's words a trace's input gives: its conversation's last turn, or the text itself when the input is
    plain text (what an application passes as a trace's input is the user's request); None when the input is empty
    or not a conversation (then the earliest generation is asked)."""
    value = decoded(value)
    messages = conversation(value)
    if messages is not None:
        return last_turn_user_words(messages) or None
    if isinstance(value, str) and value.strip():
        return [value]
    return None


def assistant_text(value: Any) -> str | None:
    """The assistant's reply in a generation's output: text, a message, a list of messages (the last assistant's),
    an OpenAI chat completion (``choices[0].message``), an OpenAI Responses output (``output[].content[]``)."""
    value = decoded(value)
    if isinstance(value, str):
        return value if value.strip() and value != "None" else None
    if isinstance(value, dict):
        if isinstance(value.get("choices"), list) and value["choices"]:
            choice = value["choices"][0]
            return assistant_text(choice.get("message") or choice.get("text")) if isinstance(choice, dict) else None
        if isinstance(value.get("output"), list):
            return assistant_text(value["output"])
        if isinstance(value.get("message"), dict):
            return assistant_text(value["message"])
        if "content" in value or "text" in value:
            return _content_text(value)
        return None
    if isinstance(value, list):
        texts = []
        for item in value:
            if isinstance(item, dict) and (_role(item) in ASSISTANT_ROLES or item.get("type") == "message"):
                if item.get("type") == "function_call":
                    continue
                text = _content_text(item)
                if text:
                    texts.append(text)
        return "\n".join(texts) or None
    return None


def called_tools(value: Any, found: set[str], depth: int = 0) -> None:
    """Add to ``found`` the names of the tools a generation's output calls: OpenAI ``tool_calls[].function.name``,
    Responses ``{"type": "function_call", "name"}``, the AI SDK's ``toolName``, Anthropic ``tool_use``."""
    if depth > 6:
        return
    if depth == 0:
        value = decoded(value)
    if isinstance(value, dict):
        function = value.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            found.add(function["name"])
        if value.get("type") in ("function_call", "tool_use", "tool_call") and isinstance(value.get("name"), str):
            found.add(value["name"])
        if isinstance(value.get("toolName"), str):
            found.add(value["toolName"])
        for key in ("tool_calls", "additional_kwargs", "choices", "message", "output", "content"):
            inner = value.get(key)
            if isinstance(inner, dict | list):
                called_tools(inner, found, depth + 1)
    elif isinstance(value, list):
        for item in value[:200]:
            if isinstance(item, dict | list):
                called_tools(item, found, depth + 1)


# --- the objects ---------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Where:
    """Where a record was read: the file (within the drop), the record's index, an item's index within it."""

    source_file: str
    record_index: int
    item_index: int | None = None


@dataclass(slots=True)
class Observation:
    id: str
    trace_id: str
    type: str
    name: str | None
    start: str | None
    raw: dict[str, Any]
    where: Where
    parent: str | None = None
    level: str | None = None


@dataclass(slots=True)
class Trace:
    id: str
    timestamp: str | None
    raw: dict[str, Any] | None  # the trace's own fields; None: known only from its observations
    where: Where | None
    session_id: str | None = None
    user_id: str | None = None
    observations: list[Observation] = field(default_factory=list)


def observation_from(row: dict[str, Any], where: Where) -> Observation:
    """An observation row or object (either spelling); ``NotAnId`` when its id or trace id is no id, ``ValueError``
    when it has none."""
    obs_id = row.get("id")
    if obs_id.__class__ is not str or not obs_id or "\x00" in obs_id:
        obs_id = _text_id(obs_id, "observation id")
    trace_id = row.get("traceId") or row.get("trace_id")
    if trace_id.__class__ is not str or "\x00" in trace_id:
        trace_id = _text_id(trace_id, "observation's trace id")
    if obs_id is None:
        raise ValueError("observation has no id")
    if trace_id is None:
        raise ValueError(f"observation {obs_id} names no trace (traceId)")
    kind = row.get("type")
    name = row.get("name")
    start = row.get("startTime")
    if start is None:
        start = row.get("start_time")
    if start.__class__ is not str or not start:  # (a string, as it mostly is, needs no call)
        start = _time(start)
    parent = row.get("parentObservationId")
    if parent is None:
        parent = row.get("parent_observation_id")
    if parent is not None:
        parent = read_id(parent, "parent observation id")
    level = row.get("level")
    return Observation(
        obs_id,
        trace_id,
        kind.upper() if isinstance(kind, str) else "OBSERVATION",
        name if isinstance(name, str) else None,
        start,
        row,
        where,
        parent,
        level if isinstance(level, str) else None,
    )


def trace_from(row: dict[str, Any], where: Where) -> Trace:
    """A trace row or object (either spelling), without its ``observations`` and ``scores``."""
    trace_id = _text_id(row.get("id"), "trace id")
    if trace_id is None:
        raise ValueError("trace has no id")
    own = {k: v for k, v in row.items() if k not in ("observations", "scores")} if "observations" in row else row
    return Trace(
        trace_id,
        _time(row.get("timestamp")),
        own,
        where,
        _text_id(pick(row, "sessionId", "session_id"), "trace's session id"),
        _text_id(pick(row, "userId", "user_id"), "trace's user id"),
    )


def score_from(row: dict[str, Any]) -> Score:
    """A score row or object in any of Langfuse's spellings: v1/v2 and the export (``traceId``/``trace_id``,
    ``observationId``, ``sessionId``, numeric ``value`` with ``stringValue``), and v3 (``subject{kind, id,
    traceId}``, ``value`` typed by ``dataType``: a BOOLEAN's a JSON boolean, a CATEGORICAL's its label)."""
    data_type = pick(row, "dataType", "data_type")
    raw_value = row.get("value")
    string_value = pick(row, "stringValue", "string_value")
    if not isinstance(data_type, str) or not data_type:
        data_type = (
            "BOOLEAN" if isinstance(raw_value, bool) else "CATEGORICAL" if isinstance(raw_value, str) else "NUMERIC"
        )
    data_type = data_type.upper()
    if isinstance(raw_value, str) and data_type in ("CATEGORICAL", "TEXT", "CORRECTION"):
        value, string_value = None, string_value or raw_value  # v3: the label is the value
    else:
        value = score_value(raw_value)
    if string_value is not None and not isinstance(string_value, str):
        string_value = as_text(string_value)
    trace_id = _text_id(pick(row, "traceId", "trace_id"), "score's trace id")
    observation_id = _text_id(pick(row, "observationId", "observation_id"), "score's observation id")
    session_id = _text_id(pick(row, "sessionId", "session_id"), "score's session id")
    subject = row.get("subject")
    if isinstance(subject, dict):
        kind, target = subject.get("kind"), _text_id(subject.get("id"), "score's subject id")
        if kind == "trace":
            trace_id = trace_id or target
        elif kind == "observation":
            observation_id = observation_id or target
            trace_id = trace_id or _text_id(subject.get("traceId"), "score's subject trace id")
        elif kind == "session":
            session_id = session_id or target
    source = row.get("source")
    comment = row.get("comment")
    return Score(
        name=row.get("name") if isinstance(row.get("name"), str) else "",
        value=value,
        string_value=string_value if string_value else None,
        data_type=data_type,
        source=source.upper() if isinstance(source, str) else "",
        session_id=session_id,
        event_id=observation_id or trace_id,
        score_id=_text_id(row.get("id"), "score id"),
        comment=comment if isinstance(comment, str) and comment else None,
        created_at=_time(row.get("timestamp")) or _time(pick(row, "createdAt", "created_at")),
    )


def is_trace_with_details(obj: Any) -> bool:
    """``{"trace": {...}, "observations": [...]}`` or a trace object with ``observations`` (and ``scores``)."""
    if not isinstance(obj, dict):
        return False
    if isinstance(obj.get("trace"), dict):
        return "id" in obj["trace"] and isinstance(obj.get("observations", obj["trace"].get("observations")), list)
    return "id" in obj and isinstance(obj.get("observations"), list) and ("scores" in obj or "timestamp" in obj)


def row_kind(obj: Any) -> str | None:
    """Which Langfuse row a JSON object is (``trace_details``, ``score``, ``observation``, ``trace``), or None."""
    if not isinstance(obj, dict):
        return None
    if is_trace_with_details(obj):
        return "trace_details"
    has = obj.__contains__
    if has("name") and (has("dataType") or has("data_type")) and "type" not in obj:
        return "score"
    if has("id") and (has("traceId") or has("trace_id")) and has("type") and (has("startTime") or has("start_time")):
        return "observation"
    if has("id") and has("timestamp") and any(map(has, ("sessionId", "session_id", "projectId", "project_id"))):
        return "trace"
    return None


TABLE_KINDS = {"traces": "trace", "observations": "observation", "observations_v2": "observation", "scores": "score"}


# --- collecting a drop's Langfuse records ----------------------------------------------------------------------


@dataclass
class Collected:
    """Every Langfuse record of one unit, before sessions are built: traces by id, scores with where they were."""

    traces: dict[str, Trace] = field(default_factory=dict)
    scores: list[tuple[Score, Where, str]] = field(default_factory=list)
    seen_observations: set[str] = field(default_factory=set)
    seen_scores: set[str] = field(default_factory=set)


def _trace(collected: Collected, trace_id: str) -> Trace:
    trace = collected.traces.get(trace_id)
    if trace is None:
        trace = collected.traces[trace_id] = Trace(trace_id, None, None, None)
    return trace


def add_row(batch: Batch, collected: Collected, kind: str, obj: dict[str, Any], where: Where) -> None:
    """Collect one Langfuse record of ``kind`` (``row_kind``), or quarantine it with the reason."""
    if kind == "trace_details":
        _add_trace_details(batch, collected, obj, where)
    elif kind == "trace":
        _add_trace(batch, collected, obj, where)
    elif kind == "observation":
        _add_observation(batch, collected, obj, where)
    elif kind == "score":
        _add_score_row(batch, collected, obj, where)
    else:
        raise ValueError(f"not a Langfuse row kind: {kind!r}")


def _add_trace(batch: Batch, collected: Collected, obj: dict[str, Any], where: Where) -> Trace | None:
    try:
        new = trace_from(obj, where)
    except (ValueError, NotAnId) as error:
        batch.read["event"] += 1
        batch.quarantine(where.source_file, where.record_index, "event", str(error), dump(obj), where.item_index)
        return None
    trace = collected.traces.get(new.id)
    if trace is not None and trace.raw is not None:
        batch.read["event"] += 1
        batch.quarantine(
            where.source_file,
            where.record_index,
            "event",
            f"trace {new.id} read again (its first copy: {trace.where.source_file} record {trace.where.record_index}):"
            " kept once",
            dump(obj),
            where.item_index,
        )
        return trace
    if trace is not None:  # known from its observations until now
        new.observations = trace.observations
    collected.traces[new.id] = new
    return new


def _add_trace_details(batch: Batch, collected: Collected, obj: dict[str, Any], where: Where) -> None:
    head = obj["trace"] if isinstance(obj.get("trace"), dict) else obj
    trace = _add_trace(batch, collected, head, where)
    observations = obj.get("observations")
    if not isinstance(observations, list):
        observations = head.get("observations") if isinstance(head.get("observations"), list) else []
    for i, item in enumerate(observations):
        item_where = Where(where.source_file, where.record_index, i)
        if isinstance(item, dict) and trace is not None and pick(item, "traceId", "trace_id") is None:
            item = {**item, "traceId": trace.id}
        if not isinstance(item, dict):
            batch.read["event"] += 1
            reason = (
                "observation given only by its id (a trace list's TraceWithDetails): fetch the trace itself"
                " (GET /api/public/traces/{id}) for its observations"
                if isinstance(item, str)
                else "observation is not a JSON object"
            )
            batch.quarantine(where.source_file, where.record_index, "event", reason, dump(item), i)
            continue
        _add_observation(batch, collected, item, item_where)
    scores = obj.get("scores") if isinstance(obj.get("scores"), list) else head.get("scores")
    for j, item in enumerate(scores if isinstance(scores, list) else []):
        item_where = Where(where.source_file, where.record_index, j)
        if isinstance(item, dict):
            targets = (("traceId", "trace_id"), ("sessionId", "session_id"))
            names_nothing = all(pick(item, camel, snake) is None for camel, snake in targets)
            if trace is not None and names_nothing and "subject" not in item:
                item = {**item, "traceId": trace.id}
            _add_score_row(batch, collected, item, item_where)
        else:  # a score id only (TraceWithDetails): no score to read
            batch.read["score"] += 1
            batch.quarantine(
                where.source_file, where.record_index, "score", "score given only by its id: no value", dump(item), j
            )


def _add_observation(batch: Batch, collected: Collected, obj: dict[str, Any], where: Where) -> None:
    try:
        obs = observation_from(obj, where)
    except (ValueError, NotAnId) as error:
        batch.read["event"] += 1
        batch.quarantine(where.source_file, where.record_index, "event", str(error), dump(obj), where.item_index)
        return
    if obs.id in collected.seen_observations:
        batch.read["event"] += 1
        batch.quarantine(
            where.source_file,
            where.record_index,
            "event",
            f"observation {obs.id} read again (the export's observations/ and observations_v2/, or two drops' files"
            " in one): kept once",
            dump(obj),
            where.item_index,
        )
        return
    collected.seen_observations.add(obs.id)
    trace = _trace(collected, obs.trace_id)
    trace.observations.append(obs)


def _add_score_row(batch: Batch, collected: Collected, obj: dict[str, Any], where: Where) -> None:
    try:
        score = score_from(obj)
    except NotAnId as error:
        batch.read["score"] += 1
        batch.quarantine(where.source_file, where.record_index, "score", str(error), dump(obj), where.item_index)
        return
    if score.score_id is not None:
        if score.score_id in collected.seen_scores:
            batch.read["score"] += 1
            batch.quarantine(
                where.source_file,
                where.record_index,
                "score",
                f"score {score.score_id} read again: kept once",
                dump(obj),
                where.item_index,
            )
            return
        collected.seen_scores.add(score.score_id)
    collected.scores.append((score, where, dump(obj)))


# --- sessions ----------------------------------------------------------------------------------------------------


class LangfuseAdapter(Adapter):
    """The adapter of a Langfuse session, whose events ``trace_events`` has already built (``add_session``'s
    ``events``): a session's events are made from its traces and observations together (which trace a span is a
    tool of, the earliest generation's words), so no raw event is parsed on its own."""

    format = LANGFUSE


ADAPTER = LangfuseAdapter()


@dataclass
class SessionTotals:
    """What a session's generations add up to (its metadata)."""

    models: Counter = field(default_factory=Counter)
    cost: float | None = None
    prompt: int | None = None
    completion: int | None = None
    tools: set[str] = field(default_factory=set)

    def add_generation(self, raw: dict[str, Any]) -> None:
        model = raw.get("model") or pick(raw, "providedModelName", "provided_model_name")
        if isinstance(model, str) and model:
            self.models[model] += 1
        cost = score_value(pick(raw, "totalCost", "total_cost"))
        usage = _mapping(pick(raw, "usageDetails", "usage_details"))
        if cost is None or cost == 0:
            details = _mapping(pick(raw, "costDetails", "cost_details"))
            cost = score_value(details.get("total")) if details else cost
            if cost is None:
                cost = score_value(raw.get("calculatedTotalCost"))
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        if not usage:
            usage = _mapping(raw.get("usage"))
        prompt = score_value(usage.get("input", usage.get("promptTokens", raw.get("inputUsage"))))
        completion = score_value(usage.get("output", usage.get("completionTokens", raw.get("outputUsage"))))
        if prompt is not None:
            self.prompt = (self.prompt or 0) + int(prompt)
        if completion is not None:
            self.completion = (self.completion or 0) + int(completion)


def _user_words(trace: Trace, generations: list[Observation]) -> str | None:
    words = None
    if trace.raw is not None:
        words = trace_input_words(trace.raw.get("input"))
    else:  # known from its observations: the trace's input is its root observation's (Langfuse v4)
        roots = [o for o in trace.observations if o.raw.get("isRootObservation") or o.raw.get("is_root_observation")]
        roots = roots or [o for o in trace.observations if o.parent is None]
        if roots:
            words = trace_input_words(roots[0].raw.get("input"))
    if not words:
        for generation in generations:
            messages = conversation(generation.raw.get("input"))
            words = last_turn_user_words(messages) if messages else None
            if words:
                break
    return "\n\n".join(words) if words else None


def _order(obs: Observation) -> tuple[str, str]:
    return (_sortable(obs.start), obs.id)


def _sortable(stamp: str | None) -> str:
    """A timestamp that sorts with the others: the API writes ``2026-01-05T09:00:00.000Z``, the export ``2026-01-05
    09:00:00.000000``, and one session may mix the two (a pull's observations, an export's traces)."""
    return stamp.replace("T", " ", 1) if stamp else ""


def trace_events(trace: Trace, totals: SessionTotals) -> list[Event]:
    """One trace's events: its user message, then its observations in start order (each event as
    ``adapter.read_events`` would make it of the raw trace or observation and its ``EventFields``)."""
    observations = in_order(trace.observations)
    generations = [o for o in observations if o.type == "GENERATION"]
    tools: set[str] = set()
    outputs = {}
    inner_spans = any(o.type == "SPAN" and o.parent is not None for o in observations)
    for generation in generations:
        totals.add_generation(generation.raw)
        output = outputs[generation.id] = decoded(generation.raw.get("output"))
        if inner_spans:  # the tools the generations called tell which spans are tool calls (no span: not needed)
            tools.update(_names(pick(generation.raw, "toolCallNames", "tool_call_names")))
            called_tools(output, tools)
    start = trace.timestamp or (observations[0].start if observations else None)
    head = trace.raw if trace.raw is not None else _derived_head(trace)
    words = _user_words(trace, generations)
    fields = ("user", "action", "message", None, words)
    events = [_event(trace.id, start, fields, head)]
    for obs in observations:
        event_id = obs.id if obs.id != trace.id else f"{obs.id}#observation"
        events.append(_event(event_id, obs.start, _observation_fields(obs, tools, totals, outputs), obs.raw))
    return events


def _event(event_id: str, timestamp: str | None, fields: tuple[Any, ...], raw: dict[str, Any]) -> Event:
    """The event ``adapter.read_events`` makes of ``raw`` and its fields ``(source, kind, name, original_name,
    text)``: the fields' timestamp, else the raw object's own when it is text; its JSON as orjson writes it."""
    if not timestamp:
        timestamp = raw.get("timestamp")
        if timestamp.__class__ is not str:
            timestamp = None
    try:
        raw_json = orjson.dumps(raw).decode()
    except TypeError:  # deeper than orjson writes, or an integer beyond 64 bits: ``dump`` writes any
        raw_json = dump(raw)
    return _new_event(Event, (event_id, timestamp, *fields, None, None, None, None, None, raw_json))


_new_event = tuple.__new__  # Event(*fields) without the Python-level __new__ a named tuple adds


def in_order(observations: list[Observation]) -> list[Observation]:
    """A trace's observations by start time, a parent before the children that start with it (spans often start
    in the same millisecond as their first child), then by id."""
    if len(observations) < 2:
        return list(observations)
    by_start = sorted(observations, key=_order)
    starts = [_sortable(o.start) for o in by_start]
    if len(set(starts)) == len(starts):  # no two start together: start order is the order
        return by_start
    parents = {o.id: o.parent for o in observations}

    def depth(obs: Observation) -> int:
        d, parent = 0, obs.parent
        while parent in parents and d < 100:
            d, parent = d + 1, parents[parent]
        return d

    return sorted(observations, key=lambda o: (_sortable(o.start), depth(o), o.id))


def _derived_head(trace: Trace) -> dict[str, Any]:
    """A trace known only from its observations: the trace fields they carry (v2 observations and the
    ``observations_v2`` export repeat them on every observation)."""
    first = min(trace.observations, key=_order).raw if trace.observations else {}
    head: dict[str, Any] = {"id": trace.id, "from": "observations"}
    for camel, snake in (
        ("sessionId", "session_id"),
        ("userId", "user_id"),
        ("traceName", "trace_name"),
        ("environment", "environment"),
        ("release", "release"),
        ("tags", "tags"),
    ):
        value = pick(first, camel, snake)
        if value is not None:
            head[camel] = value
    return head


def _observation_fields(
    obs: Observation, tools: set[str], totals: SessionTotals, outputs: dict[str, Any]
) -> tuple[Any, ...]:
    """An observation's ``(source, kind, name, original_name, text)``."""
    if obs.level == "ERROR":
        message = pick(obs.raw, "statusMessage", "status_message")
        return (
            "environment",
            "observation",
            "error",
            obs.type.lower(),
            message if isinstance(message, str) else obs.name,
        )
    if obs.type == "GENERATION":
        return ("agent", "action", "message", None, assistant_text(outputs[obs.id]))
    if obs.type == "TOOL" or (obs.type == "SPAN" and obs.name in tools):
        if obs.name:
            totals.tools.add(obs.name)
        arguments = obs.raw.get("input")  # the arguments as Langfuse keeps them (JSON text, mostly)
        text = arguments if isinstance(arguments, str) or arguments is None else dump(arguments)
        return ("agent", "action", "other", obs.name or "tool", text)
    return ("agent", "other", "other", obs.type.lower(), obs.name)


def _session_of(trace: Trace) -> str:
    if trace.session_id is None and trace.raw is None and trace.observations:
        first = min(trace.observations, key=_order).raw
        trace.session_id = as_session(pick(first, "sessionId", "session_id"))
        trace.user_id = as_session(pick(first, "userId", "user_id"))
    return trace.session_id or trace.id


def as_session(value: Any) -> str | None:
    try:
        return read_id(value, "session id")
    except NotAnId:
        return None


def _first(traces: list[Trace], camel: str, snake: str) -> Any:
    for trace in traces:
        if trace.raw is not None:
            value = pick(trace.raw, camel, snake)
            if value not in (None, "", [], {}):
                return value
    return None


def session_metadata(traces: list[Trace], totals: SessionTotals) -> dict[str, Any]:
    """The session row's record: user, the traces' release, version, environment, tags and metadata, and what its
    generations add up to."""
    info: dict[str, Any] = {"user_id": next((t.user_id for t in traces if t.user_id), None)}
    for camel, snake in (("release", "release"), ("version", "version"), ("environment", "environment")):
        value = _first(traces, camel, snake)
        if value is None:  # v2 observations carry the trace's release and environment
            value = next(
                (pick(o.raw, camel, snake) for t in traces for o in t.observations if pick(o.raw, camel, snake)), None
            )
        info[camel] = value
    tags: list[str] = []
    for trace in traces:
        source = trace.raw if trace.raw is not None else (trace.observations[0].raw if trace.observations else {})
        tags.extend(t for t in _names(source.get("tags")) if t not in tags)
    info["tags"] = tags
    metadata = _first(traces, "metadata", "metadata")
    info["metadata"] = decoded(metadata) if metadata is not None else None
    info["traces"] = len(traces)
    info.update(llm_usage(totals.cost, totals.prompt, totals.completion))
    info["model"] = totals.models.most_common(1)[0][0] if totals.models else None
    info["tools"] = sorted(totals.tools)
    return info


def add_sessions(batch: Batch, collected: Collected, rules: ScoreRules) -> None:
    """The sessions of everything collected, then the scores, all into ``batch``."""
    for _ in session_batches(batch, collected, rules, chunk_events=None):
        pass


def session_batches(
    batch: Batch, collected: Collected, rules: ScoreRules, chunk_events: int | None = CHUNK_EVENTS
) -> Iterator[Batch]:
    """The sessions of everything collected, then the scores (a score on a trace read here gets that trace's
    session; on a trace not read here it names only the trace, and staging finds its session), written into
    ``batch`` and handed on, a new batch begun, each time it holds ``chunk_events`` events (None: never)."""
    by_session: dict[str, list[Trace]] = {}
    for trace in collected.traces.values():
        by_session.setdefault(_session_of(trace), []).append(trace)
    for session_id, traces in by_session.items():
        traces.sort(key=lambda t: (_sortable(t.timestamp) or _earliest(t), t.id))
        totals = SessionTotals()
        events: list[Event] = []
        for trace in traces:
            events.extend(trace_events(trace, totals))
        where = _session_where(traces)
        info = session_metadata(traces, totals)
        add_session(
            batch, where.source_file, where.record_index, session_id, LANGFUSE, ADAPTER, (), info, events=events
        )
        if chunk_events is not None and batch.count(tables.EVENTS) >= chunk_events:
            yield batch
            batch = Batch(batch.drop_id)
    trace_sessions = {trace.id: _session_of(trace) for trace in collected.traces.values()}
    observation_traces = {o.id: t.id for t in collected.traces.values() for o in t.observations}
    for score, where, raw_text in collected.scores:
        if score.session_id is None and score.event_id is not None:
            trace_id = observation_traces.get(score.event_id, score.event_id)
            session_id = trace_sessions.get(trace_id)
            if session_id is not None:
                score = _with_session(score, session_id)
        add_score(batch, where.source_file, where.record_index, score, rules, raw_text, where.item_index)
    yield batch


def _with_session(score: Score, session_id: str) -> Score:
    return Score(
        score.name,
        score.value,
        score.string_value,
        score.data_type,
        score.source,
        session_id,
        score.event_id,
        score.score_id,
        score.comment,
        score.created_at,
    )


def _earliest(trace: Trace) -> str:
    return min((_sortable(o.start) for o in trace.observations), default="")


def _session_where(traces: list[Trace]) -> Where:
    """The session row's place: its first trace's record, else its first observation's (unique per session)."""
    for trace in traces:
        if trace.where is not None:
            return trace.where
    first = min((o for t in traces for o in t.observations), key=_order)
    return first.where


def collect(
    batch: Batch, records: Iterable[tuple[Any, Where, str | None]], other: Callable[[Any, Where], None]
) -> Collected:
    """The Langfuse records of ``records`` (``(object, where, table kind or None)``: the kind an export folder
    gives, else found by content), gathered (what cannot be read is quarantined into ``batch``); a record that is
    no Langfuse record is handed to ``other``."""
    collected = Collected()
    for obj, where, kind in records:
        found = row_kind(obj) if kind is None or kind == "trace" else kind  # a trace with details in traces/
        if found is None or not isinstance(obj, dict):
            other(obj, where)
        elif found == "observation":  # most records: no dispatch
            _add_observation(batch, collected, obj, where)
        else:
            add_row(batch, collected, found, obj, where)
    return collected


def read_trace_record(batch: Batch, source_file: str, record_index: int, obj: dict[str, Any]) -> None:
    """One trace with its details read on its own (``records.add_record``): its session holds this trace alone."""
    collected = Collected()
    add_row(batch, collected, "trace_details", obj, Where(source_file, record_index))
    add_sessions(batch, collected, score_rules())
