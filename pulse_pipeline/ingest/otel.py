"""OpenTelemetry traces of LLM applications (OTLP/JSON files, ``otlp.py``) as PULSE sessions, events and scores.

Three conventions name the same things differently; each attribute below is read in the order given, the first
present winning. Sources (checked in each project's own repository; the tests cite file and commit):
**GenAI** = OpenTelemetry GenAI semantic conventions (open-telemetry/semantic-conventions-genai,
``model/gen-ai/registry.yaml``, ``docs/gen-ai/gen-ai-events.md``); **OpenLLMetry** = Traceloop's indexed attributes
(traceloop/openllmetry, ``opentelemetry-semantic-conventions-ai/.../semconv_ai/__init__.py`` and its
instrumentations); **OpenInference** = Arize-ai/openinference ``spec/semantic_conventions.md``,
``spec/annotations.md``; **Langfuse** = the keys Langfuse's OTel endpoint reads (langfuse/langfuse
``web/src/features/otel/server/attributes.ts``).

- **A trace is one work segment.** Its first event is a user ``message`` whose event id is the trace id (so a
  rating or score on the trace names that event, and staging joins it to the segment), then one event per span,
  ordered by the span's end (a span is done when it ends; the root, which ends last, closes the segment), each with
  its span id as event id.
- **A session** is the first session id a span of the trace names (its root first, then by start time; a span's
  own attribute before its resource's): ``langfuse.session.id``, ``session.id`` (OpenInference, Langfuse),
  ``gen_ai.conversation.id`` (GenAI), ``traceloop.association.properties.session_id`` (OpenLLMetry); else the trace
  id (a trace of its own). Its traces are in order of their first span's start. The user is ``langfuse.user.id``,
  ``user.id``, ``enduser.id`` or ``traceloop.association.properties.user_id``.
- **The user's words** (the opening message's text) come from the trace's root span's input when it is a
  conversation or plain text, else from the input of its earliest LLM span: of a list of messages, the user
  messages after the last message of another role (an agent's first model call sends the history, then the new
  turn), else the last user message. Messages are ``gen_ai.input.messages`` (GenAI ``{role, parts}``, structured or
  a JSON string), ``llm.input_messages.N.message.{role,content,contents}`` (OpenInference),
  ``gen_ai.prompt.N.{role,content}`` (OpenLLMetry); plain input is OpenInference's ``input.value`` (text, or JSON
  with a ``messages`` list). Never the words: a system or developer message, a tool message, a user-role message
  holding only tool results (``tool_call_response`` parts), ``gen_ai.system_instructions``. A trace with no user
  words still opens its segment, with an empty message.
- **Spans** become events: an LLM call (``gen_ai.operation.name`` ``chat``/``text_completion``/``generate_content``,
  ``openinference.span.kind`` ``LLM``, ``llm.request.type``, or indexed prompt/completion attributes) is the agent's
  ``message`` with its output text (``gen_ai.output.messages``, ``llm.output_messages.N...``,
  ``gen_ai.completion.N.content``, ``output.value``); a tool call (``execute_tool``, ``TOOL``,
  ``traceloop.span.kind`` ``tool``) is an agent action named ``other`` (``original_name`` the tool's name:
  ``gen_ai.tool.name``, ``tool.name``, ``traceloop.entity.name``, the span's name) with its arguments as text, and
  its result an environment observation (event id ``<span id>:result``, ``error`` when the span's status is ERROR),
  never the user's; any other span is an ``other`` event named by its operation or kind. The root span, when it is no
  LLM call, is the agent's ``finish`` with its output (an ``error`` observation when its status is ERROR); when it is
  one, its message awaits the user. A span whose parent is missing from the file is still its trace's.
- **Model, tokens and cost** are summed per session into its metadata (``events.llm_usage``): tokens
  ``gen_ai.usage.input_tokens`` | ``gen_ai.usage.prompt_tokens`` | ``llm.token_count.prompt`` |
  ``llm.usage.prompt_tokens`` and the matching output keys; cost ``llm.cost.total`` (OpenInference) or
  ``gen_ai.usage.cost`` (OpenLIT, openlit/openlit ``sdk/python/src/openlit/semcov/__init__.py``), else
  ``llm.cost.prompt`` + ``llm.cost.completion``. A span's usage counts only when no span below it in its trace
  reports usage: agent and chain spans often carry their children's totals, which would count twice. The model is
  the one of the most LLM spans (``gen_ai.response.model``, ``gen_ai.request.model``, ``llm.response.model_name``,
  ``llm.model_name``). The metadata also keeps ``service_name``/``service_version`` (resource) and
  ``agent_name``/``agent_version`` (``gen_ai.agent.*``, ``agent.name``), which experiments may read as arms.
- **Scores** go through ``scores.add_score`` (one rule for every source): a ``gen_ai.evaluation.result`` event
  (``gen_ai.evaluation.name``, ``.score.value``, ``.score.label``, ``.explanation``) is an EVAL score of the span it
  is recorded on (GenAI has no human kind), as a span event or as an OpenTelemetry event, a log record of a
  ``resourceLogs`` document (``eventName``) naming the span (else the trace) by ``spanId``/``traceId``; an
  OpenInference annotation or evaluation
  (``annotations.N.annotation.*``, ``evaluations.N.evaluation.*``, with ``trace.`` and ``session.`` scopes: name,
  score, label, explanation, annotator_kind) is an ANNOTATION when its ``annotator_kind`` is ``HUMAN`` (a rating
  when its name is declared one) and an EVAL score otherwise (``LLM``, ``CODE``, custom or absent: only a person's
  judgement is ever a label). Span feedback names the span, trace feedback the trace (its segment), session
  feedback the session. A post-hoc carrier span (``openinference.span.kind`` ``EVALUATOR``, or a span with links
  carrying nothing but feedback) scores the span or trace its link names; its trace is no work and makes no
  session. A score's value is NUMERIC, BOOLEAN when written as ``boolValue``, CATEGORICAL with only a label, TEXT
  with only an explanation.
- **Messages recorded apart from their span**: a ``gen_ai.client.inference.operation.details`` event (a log
  record naming its span; current GenAI instrumentations write it when content goes to events, not spans) gives
  the span it names the ``gen_ai.input.messages``, ``gen_ai.output.messages`` and ``gen_ai.system_instructions``
  it lacks. Other log records (application logs, events of other names) are not read.
- **Other services' traces**: a trace none of whose spans carries an attribute of these conventions
  (``gen_ai.``, ``llm.``, ``openinference.``, ``traceloop.``, ``langfuse.``) or a session id is no LLM
  application's work (the Collector exports every trace of a service: HTTP, database): not read, and said in one
  quarantine row per file with how many traces and spans.
- **Quarantine** (counts reconcile: every span is an accepted event, a quarantined one, or a carrier's feedback):
  a span ``otlp.py`` cannot read, a span whose id appears twice in its trace (each span is read once), an envelope
  part that holds no spans, a score with no name.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from .. import tables
from .adapter import Adapter, EventFields, add_session
from .batch import Batch
from .events import as_int, as_text, dump, llm_usage, parse_json, read_id
from .otlp import (
    NOT_OTLP,
    BadSpan,
    LogEvent,
    Span,
    SpanEvent,
    is_otlp,
    is_otlp_traces,
    iso_time,
    read_document,
    read_log_document,
)
from .scores import Score, ScoreRules, add_score, score_rules

FORMAT = "otel"

SESSION_KEYS = (
    "langfuse.session.id",
    "session.id",
    "gen_ai.conversation.id",
    "traceloop.association.properties.session_id",
)
USER_KEYS = ("langfuse.user.id", "user.id", "enduser.id", "traceloop.association.properties.user_id")
MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.response.model_name", "llm.model_name")
INPUT_TOKEN_KEYS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "llm.usage.prompt_tokens",
)
OUTPUT_TOKEN_KEYS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "llm.usage.completion_tokens",
)
COST_KEYS = ("llm.cost.total", "gen_ai.usage.cost")  # OpenInference; OpenLIT (openlit/openlit semcov)
TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name", "traceloop.entity.name")
TOOL_ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input")
TOOL_RESULT_KEYS = ("gen_ai.tool.call.result", "output.value", "traceloop.entity.output")
LLM_OPERATIONS = frozenset(["chat", "text_completion", "generate_content"])
TOOL_OPERATIONS = frozenset(["execute_tool"])
EVALUATION_EVENT = "gen_ai.evaluation.result"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"  # a model call's messages, recorded apart from its span
CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
USER_ROLES = frozenset(["user", "human"])

# OpenInference feedback: (scope prefix, item word) -> the keys ``<prefix><word>s.<N>.<word>.<field>``
_FEEDBACK = re.compile(r"^(trace\.|session\.|)(annotation|evaluation)s\.(\d+)\.(annotation|evaluation)\.(\w+)$")
_INDEXED = re.compile(r"^(\d+)\.(.+)$")


@dataclass
class _Trace:
    trace_id: str
    spans: list[Span] = field(default_factory=list)

    @property
    def start(self) -> int | None:
        starts = [s.start_ns for s in self.spans if s.start_ns is not None]
        return min(starts) if starts else None


# --- reading the attributes' conventions ---------------------------------------------------------------------


def first(span: Span, keys: Iterable[str]) -> Any:
    """The first of ``keys`` the span (else its resource) holds."""
    for key in keys:
        value = span.get(key)
        if value is not None and value != "":
            return value
    return None


def first_id(span: Span, keys: Iterable[str]) -> str | None:
    """The first of ``keys`` holding an id (``events.read_id``); a value that is no id is passed over."""
    for key in keys:
        try:
            value = read_id(span.get(key), key)
        except ValueError:
            continue
        if value is not None:
            return value
    return None


def indexed(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened list attributes ``<prefix>.<N>.<rest>`` as a list of ``{rest: value}`` in index order."""
    items: dict[int, dict[str, Any]] = {}
    start = prefix + "."
    for key, value in attributes.items():
        if key.startswith(start):
            match = _INDEXED.match(key[len(start) :])
            if match:
                items.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return [items[i] for i in sorted(items)]


def operation(span: Span) -> str | None:
    value = span.attributes.get("gen_ai.operation.name")
    return value if isinstance(value, str) else None


def oi_kind(span: Span) -> str | None:
    value = span.attributes.get("openinference.span.kind")
    return value.upper() if isinstance(value, str) else None


def is_llm(span: Span) -> bool:
    """Whether the span is one call of a model (see the module docstring)."""
    op = operation(span)
    if op is not None:
        return op in LLM_OPERATIONS
    kind = oi_kind(span)
    if kind is not None:
        return kind == "LLM"
    if isinstance(span.attributes.get("llm.request.type"), str):
        return True
    return any(k.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for k in span.attributes)


def is_tool(span: Span) -> bool:
    return (
        operation(span) in TOOL_OPERATIONS
        or oi_kind(span) == "TOOL"
        or span.attributes.get("traceloop.span.kind") == "tool"
    )


GENAI_PREFIXES = ("gen_ai.", "llm.", "openinference.", "traceloop.", "langfuse.")


def is_genai(span: Span) -> bool:
    """Whether a span speaks one of the conventions read here (an attribute of theirs, or a session id): the
    Collector exports every trace of a service, and an HTTP or database trace alone is no LLM application's work."""
    return any(k.startswith(GENAI_PREFIXES) or k in SESSION_KEYS for k in span.attributes)


def is_feedback_key(key: str) -> bool:
    return _FEEDBACK.match(key) is not None


def is_carrier(span: Span) -> bool:
    """A post-hoc feedback carrier: an EVALUATOR span, or a linked span that holds nothing but feedback and ids."""
    if oi_kind(span) == "EVALUATOR":
        return True
    if not span.links:
        return False
    keys = [k for k in span.attributes if k not in ("session.id", "user.id", "openinference.span.kind")]
    return bool(keys) and all(is_feedback_key(k) for k in keys)


# --- messages ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    text: str | None
    tool_result: bool  # holds only tool results (OpenAI's tool role, Anthropic's user-role tool_result blocks)


def _json(value: Any) -> Any:
    """A JSON string parsed, anything else as it is (GenAI allows structured values or their JSON text)."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return parse_json(value.encode())
        except (orjson.JSONDecodeError, ValueError):
            return value
    return value


def _parts_message(role: str, parts: Any) -> Message:
    """A GenAI ``{role, parts}`` message: its text parts joined; tool results and calls are not text."""
    if not isinstance(parts, list):
        return Message(role, as_text(parts), False)
    texts = []
    kinds = set()
    for part in parts:
        if isinstance(part, dict):
            kind = part.get("type")
            kinds.add(kind)
            if kind == "text" and isinstance(part.get("content"), str):
                texts.append(part["content"])
        elif isinstance(part, str):
            kinds.add("text")
            texts.append(part)
    only_results = bool(kinds) and kinds <= {"tool_call_response", "tool_result"}
    return Message(role, "\n".join(texts) if texts else None, only_results)


def _chat_message(obj: Any) -> Message | None:
    """A message of any of the shapes the conventions and frameworks write: ``{role, parts}`` (GenAI),
    ``{role, content}`` (OpenAI, OpenLLMetry), ``{message.role, message.content}`` (OpenInference, flattened),
    ``[role, content]`` (LangChain tuples)."""
    if isinstance(obj, list | tuple) and len(obj) == 2 and isinstance(obj[0], str):
        return Message(obj[0].lower(), as_text(obj[1]), False)
    if not isinstance(obj, dict):
        return None
    role = obj.get("role", obj.get("message.role", obj.get("type")))
    if not isinstance(role, str):
        return None
    role = role.lower()
    if "parts" in obj:
        return _parts_message(role, _json(obj["parts"]))
    content = obj.get("content", obj.get("message.content"))
    if content is None:
        contents = indexed(obj, "message.contents")
        texts = [c.get("message_content.text") for c in contents if isinstance(c.get("message_content.text"), str)]
        content = "\n".join(texts) if texts else None
    content = _json(content) if isinstance(content, str) and content[:1] == "[" else content
    if isinstance(content, list):
        kinds = {p.get("type") for p in content if isinstance(p, dict)}
        if kinds and kinds <= {"tool_result", "tool_call_response", "function_call_output"}:
            return Message(role, None, True)
    return Message(role, as_text(content) if content is not None else None, role in ("tool", "function", "ipython"))


def input_messages(span: Span) -> list[Message] | None:
    """The span's input as a list of messages, by the first convention it carries; None when it has none."""
    structured = _json(span.attributes.get("gen_ai.input.messages"))
    if isinstance(structured, list):
        return [m for m in map(_chat_message, structured) if m is not None]
    for prefix in ("llm.input_messages", "gen_ai.prompt"):
        items = indexed(span.attributes, prefix)
        if items:
            return [m for m in map(_chat_message, items) if m is not None]
    return None


def plain_input(span: Span) -> list[Message] | None:
    """OpenInference's ``input.value`` as the user's message (text), or as a conversation (a JSON list of messages,
    or an object with a ``messages`` list); None when it is absent or JSON of another shape (not a conversation)."""
    value = span.attributes.get("input.value")
    if not isinstance(value, str) or not value.strip():
        return None
    parsed = _json(value) if span.attributes.get("input.mime_type") != "text/plain" else value
    if isinstance(parsed, str):
        return [Message("user", parsed, False)]
    if isinstance(parsed, list) and any(isinstance(m, dict) and "role" in m for m in parsed):
        return [m for m in map(_chat_message, parsed) if m is not None]  # a list of messages (OpenAI Agents SDK)
    if isinstance(parsed, dict) and isinstance(parsed.get("messages"), list):
        messages = parsed["messages"]
        if messages and isinstance(messages[0], list) and messages[0] and not isinstance(messages[0][0], str):
            messages = messages[0]  # LangChain's batch of conversations: [[message, ...]]
        return [m for m in map(_chat_message, messages) if m is not None]
    return None


def users_words(messages: list[Message]) -> str | None:
    """The new turn's words: the user messages after the last message of another role (never a system prompt or a
    tool result), else the last user message with text; None when there is none."""

    def said(m: Message) -> bool:
        return m.role in USER_ROLES and not m.tool_result and bool(m.text and m.text.strip())

    tail: list[str] = []
    for message in reversed(messages):
        if said(message):
            tail.append(message.text or "")
        elif message.role in USER_ROLES and not message.tool_result:
            continue  # an empty user message (an image alone) neither speaks nor ends the turn
        else:
            break
    if tail:
        return "\n\n".join(reversed(tail))
    last = next((m for m in reversed(messages) if said(m)), None)
    return last.text if last else None


def output_text(span: Span) -> str | None:
    """What the span answered: the assistant text of its output messages, else its output value."""
    structured = _json(span.attributes.get("gen_ai.output.messages"))
    items: list[Any] | None = structured if isinstance(structured, list) else None
    if items is None:
        for prefix in ("llm.output_messages", "gen_ai.completion"):
            found = indexed(span.attributes, prefix)
            if found:
                items = [f if "role" in f or "message.role" in f else {"role": "assistant", **f} for f in found]
                break
    if items:
        messages = [m for m in map(_chat_message, items) if m is not None]
        texts = [m.text for m in messages if m.text and m.role not in USER_ROLES]
        if texts:
            return "\n\n".join(texts)
    return _text(first(span, ("output.value", "traceloop.entity.output")))


# --- one trace's events --------------------------------------------------------------------------------------


def trace_words(trace: _Trace) -> str | None:
    """The user's words of one trace: its root's input, else its earliest LLM span's (module docstring)."""
    ordered = sorted(trace.spans, key=_start_key)
    ids = {s.span_id for s in trace.spans}
    roots = [s for s in ordered if s.parent_id is None or s.parent_id not in ids]
    for span in roots:
        messages = input_messages(span) or plain_input(span)
        words = users_words(messages) if messages else None
        if words:
            return words
    for span in ordered:
        if is_llm(span):
            messages = input_messages(span)
            words = users_words(messages) if messages else None
            if words:
                return words
    return None


def _start_key(span: Span) -> tuple[int, int, int]:
    return (span.start_ns if span.start_ns is not None else 2**63, span.line, span.position)


def _end_key(span: Span) -> tuple[int, int, int, int]:
    end = span.end_ns if span.end_ns is not None else span.start_ns
    return (end if end is not None else 2**63, span.start_ns or 0, span.line, span.position)


def span_events(span: Span, is_root: bool) -> list[EventFields]:
    """The canonical events of one span (module docstring)."""
    if is_llm(span):
        text = output_text(span)
        if span.error and not text:
            return [
                EventFields(
                    "environment",
                    "observation",
                    "error",
                    original_name="llm_error",
                    text=as_text(span.status),
                    event_id=span.span_id,
                )
            ]
        return [
            EventFields(
                "agent",
                "action",
                "message",
                text=text,
                wait_for_response=True if is_root else None,
                event_id=span.span_id,
            )
        ]
    if is_tool(span):
        tool = first(span, TOOL_NAME_KEYS) or span.name or "tool"
        arguments = first(span, TOOL_ARGUMENT_KEYS)
        result = first(span, TOOL_RESULT_KEYS)
        call = EventFields(
            "agent", "action", "other", original_name=as_text(tool), text=_text(arguments), event_id=span.span_id
        )
        answer = EventFields(
            "environment",
            "observation",
            "error" if span.error else "other",
            original_name=as_text(tool),
            text=_text(result),
            cause=span.span_id,
            event_id=f"{span.span_id}:result",
        )
        return [call, answer]
    what = operation(span) or oi_kind(span) or span.attributes.get("traceloop.span.kind") or span.name or None
    if is_root:
        if span.error:
            return [
                EventFields(
                    "environment",
                    "observation",
                    "error",
                    original_name=as_text(what),
                    text=as_text(span.status),
                    event_id=span.span_id,
                )
            ]
        return [
            EventFields(
                "agent", "action", "finish", original_name=as_text(what), text=output_text(span), event_id=span.span_id
            )
        ]
    return [EventFields("agent", "other", "other", original_name=as_text(what), text=None, event_id=span.span_id)]


def _text(value: Any) -> str | None:
    """A value as text: a string as it is (a JSON-encoded string, as OpenLLMetry writes ``traceloop.entity.*``,
    unquoted), anything else as JSON."""
    if value is None:
        return None
    if not isinstance(value, str):
        return dump(value)
    if value[:1] == '"':
        try:
            decoded = parse_json(value.encode())
        except (orjson.JSONDecodeError, ValueError):
            return value
        return decoded if isinstance(decoded, str) else value
    return value


# --- the adapter: one session's prepared events ----------------------------------------------------------------


class OtelSession(Adapter):
    """One session's events, prepared from its traces by ``read_spans`` (the adapter of the driver's design: the
    driver still assigns ids, timestamps, segments and rows). ``parse_all`` hands back each raw event's fields in
    order."""

    format = FORMAT

    def __init__(self, planned: list[list[EventFields]], info: dict[str, Any]) -> None:
        self.planned = planned
        self.next = 0
        self.info = info

    def parse_all(self, event: dict[str, Any]) -> list[EventFields]:
        fields = self.planned[self.next]
        self.next += 1
        return fields

    def session_info(self) -> dict[str, Any]:
        return self.info


@dataclass
class _Usage:
    prompt: int | None = None
    completion: int | None = None
    cost: float | None = None

    def add(self, prompt: int | None, completion: int | None, cost: float | None) -> None:
        if prompt is not None:
            self.prompt = (self.prompt or 0) + prompt
        if completion is not None:
            self.completion = (self.completion or 0) + completion
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def span_usage(span: Span) -> tuple[int | None, int | None, float | None]:
    """(prompt tokens, completion tokens, cost in USD) the span reports, each None when it reports none."""
    prompt = as_int(first(span, INPUT_TOKEN_KEYS))
    completion = as_int(first(span, OUTPUT_TOKEN_KEYS))
    cost = _number(first(span, COST_KEYS))
    if cost is None:
        parts = [_number(span.attributes.get(k)) for k in ("llm.cost.prompt", "llm.cost.completion")]
        cost = sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None
    return prompt, completion, cost


def session_usage(traces: list[_Trace]) -> tuple[_Usage, str | None]:
    """Tokens and cost of the session's leaf-most reporting spans, and the model of the most LLM spans."""
    usage = _Usage()
    models: Counter[str] = Counter()
    for trace in traces:
        reported = {s.span_id: span_usage(s) for s in trace.spans}
        reports = {sid for sid, u in reported.items() if any(x is not None for x in u)}
        parents = {s.span_id: s.parent_id for s in trace.spans}
        covered: set[str] = set()  # spans with a reporting span below them
        for sid in reports:
            parent, seen = parents.get(sid), {sid}
            while parent is not None and parent not in seen:
                covered.add(parent)
                seen.add(parent)
                parent = parents.get(parent)
        for sid in reports - covered:
            usage.add(*reported[sid])
        for span in trace.spans:
            model = first(span, MODEL_KEYS) if is_llm(span) else None
            if isinstance(model, str) and model:
                models[model] += 1
    return usage, (models.most_common(1)[0][0] if models else None)


# --- scores ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Feedback:
    """One score as read from a span, before its target is known: its scope and what it says."""

    scope: str  # span | trace | session
    score: Score
    raw_text: str


def _score(
    name: Any, value: Any, label: Any, explanation: Any, source: str, created_at: str | None, identifier: Any = None
) -> Score:
    number = None if isinstance(value, bool) else _number(value)
    if isinstance(value, bool):
        data_type, number = "BOOLEAN", float(value)
    elif number is not None:
        data_type = "NUMERIC"
    elif label is not None:
        data_type = "CATEGORICAL"
    else:
        data_type = "TEXT"
    return Score(
        name=as_text(name) or "",
        value=number,
        string_value=as_text(label),
        data_type=data_type,
        source=source,
        session_id=None,
        event_id=None,
        score_id=as_text(identifier),
        comment=as_text(explanation),
        created_at=created_at,
    )


def span_feedback(span: Span) -> list[_Feedback]:
    """The span's ``gen_ai.evaluation.result`` events and OpenInference annotations/evaluations."""
    found: list[_Feedback] = []
    for event in span.events:
        if event.name == EVALUATION_EVENT:
            found.append(_evaluation_event(span, event))
    groups: dict[tuple[str, str, int], dict[str, Any]] = {}
    for key, value in span.attributes.items():
        match = _FEEDBACK.match(key)
        if match:
            groups.setdefault((match.group(1), match.group(2), int(match.group(3))), {})[match.group(5)] = value
    for (prefix, _, _), item in sorted(groups.items()):
        scope = {"trace.": "trace", "session.": "session"}.get(prefix, "span")
        raw_text = dump({"span": span.span_id, "scope": scope, **item})
        kind = item.get("annotator_kind")
        source = "ANNOTATION" if isinstance(kind, str) and kind.upper() == "HUMAN" else "EVAL"
        score = _score(
            item.get("name"),
            item.get("score"),
            item.get("label"),
            item.get("explanation"),
            source,
            iso_time(span.end_ns or span.start_ns),
            item.get("identifier"),
        )
        found.append(_Feedback(scope, score, raw_text))
    return found


def _evaluation_event(span: Span, event: SpanEvent) -> _Feedback:
    a = event.attributes
    raw_text = dump({"span": span.span_id, "event": event.name, "attributes": a})
    score = _score(
        a.get("gen_ai.evaluation.name"),
        a.get("gen_ai.evaluation.score.value"),
        a.get("gen_ai.evaluation.score.label"),
        a.get("gen_ai.evaluation.explanation"),
        "EVAL",
        iso_time(event.time_ns or span.end_ns),
    )
    return _Feedback("span", score, raw_text)


# --- a file -------------------------------------------------------------------------------------------------------


@dataclass
class OtlpReader:
    """The spans of one export, gathered document by document (``add``), then read as sessions (``finish``): a
    trace's spans may be spread over many lines of the Collector's file, or over the files its rotation made, and
    a session over many traces. A session's row names the file and the place (its order among the export's
    sessions, as ``record_index``) of its first span; a quarantined span or score names its own file and line."""

    batch: Batch
    chunk_events: int = 50_000  # a batch is handed on once it holds this many events (memory stays bounded)
    rules: ScoreRules = field(default_factory=score_rules)
    spans: list[Span] = field(default_factory=list)
    events: list[tuple[str, LogEvent]] = field(default_factory=list)  # (file, event) of the logs documents
    scored: Counter[tuple[str, int]] = field(default_factory=Counter)  # scores per (file, line): their item index

    def add(self, source_file: str, line: int, doc: dict[str, Any]) -> None:
        """One OTLP/JSON traces or logs document (a line of a file, or a whole file as line 0)."""
        read = read_document(doc, line) if is_otlp_traces(doc) else read_log_document(doc, line)
        self.events.extend((source_file, e) for e in read.events if e.name in (EVALUATION_EVENT, DETAILS_EVENT))
        for span in read.spans:
            span.source_file = source_file
        self.spans.extend(read.spans)
        for bad in read.bad_spans:
            self._quarantine_span(source_file, bad)
        for part in read.bad_parts:
            self.batch.read["unknown"] += 1
            self.batch.quarantine(source_file, part.line, "unknown", part.reason, part.raw_text)

    def other(self, source_file: str, line: int, obj: Any) -> None:
        """A JSON value in an export that is no OTLP traces document: quarantined with why."""
        self.batch.read["unknown"] += 1
        self.batch.quarantine(source_file, line, "unknown", NOT_OTLP, dump(obj))

    def _quarantine_span(self, source_file: str, bad: BadSpan) -> None:
        self.batch.read["event"] += 1
        self.batch.quarantine(source_file, bad.line, "event", bad.reason, bad.raw_text, event_index=bad.position)

    def finish(self) -> Iterator[Batch]:
        """Group the spans into traces and sessions, write each session and its scores: the batch, handed on every
        ``chunk_events`` events and at the end (a session's rows are never split)."""
        traces: dict[str, _Trace] = {}
        seen: dict[tuple[str, str], Span] = {}
        for span in self.spans:
            key = (span.trace_id, span.span_id)
            if key in seen:
                first_seen = seen[key]
                reason = (
                    f"span {span.span_id} of trace {span.trace_id} appears again (first on line {first_seen.line} of"
                    f" {first_seen.source_file}):"
                    " each span is read once; export each span once"
                )
                self._quarantine_span(span.source_file, BadSpan(span.line, span.position, reason, span.raw_json))
                continue
            seen[key] = span
            traces.setdefault(span.trace_id, _Trace(span.trace_id)).spans.append(span)
        for _, event in self.events:
            described = seen.get((event.trace_id or "", event.span_id or "")) if event.name == DETAILS_EVENT else None
            for content in CONTENT_KEYS if described is not None else ():
                if content in event.attributes and content not in described.attributes:
                    described.attributes[content] = event.attributes[content]
        work, carriers = [], []
        plain: dict[str, list[_Trace]] = {}  # traces of no LLM application, by the file of their first span
        for trace in traces.values():
            ids = {s.span_id for s in trace.spans}
            roots = [s for s in trace.spans if s.parent_id is None or s.parent_id not in ids]
            if roots and all(is_carrier(r) for r in roots):
                carriers.append(trace)
            elif any(is_genai(s) for s in trace.spans):
                work.append(trace)
            else:
                plain.setdefault(min(trace.spans, key=_start_key).source_file, []).append(trace)
        for source_file, found in plain.items():
            self.batch.read["unknown"] += 1
            spans = sum(len(t.spans) for t in found)
            reason = (
                f"{len(found)} traces ({spans} spans) carry no GenAI, OpenInference, OpenLLMetry or Langfuse attribute"
                " and no session id: not an LLM application's work, not read (the first trace ids are in raw_text)"
            )
            self.batch.quarantine(source_file, None, "unknown", reason, dump([t.trace_id for t in found[:100]]))
        sessions: dict[str, list[_Trace]] = {}
        session_of: dict[str, str] = {}
        for trace in work:
            sid = trace_session(trace)
            sessions.setdefault(sid, []).append(trace)
            session_of[trace.trace_id] = sid
        for index, (sid, session_traces) in enumerate(sessions.items()):
            session_traces.sort(key=lambda t: t.start if t.start is not None else 2**63)
            self._write_session(index, sid, session_traces)
            for trace in session_traces:
                for span in trace.spans:
                    self._scores(span, sid, trace.trace_id, session_of)
            if self.batch.count(tables.EVENTS) >= self.chunk_events:
                yield self.batch
                self.batch = Batch(self.batch.drop_id)
        for trace in carriers:
            for span in trace.spans:
                self._scores(span, None, trace.trace_id, session_of)
        for source_file, event in self.events:
            if event.name == EVALUATION_EVENT:
                self._log_score(source_file, event, session_of)
        self.spans, self.events = [], []
        yield self.batch

    def _log_score(self, source_file: str, event: LogEvent, session_of: dict[str, str]) -> None:
        """A ``gen_ai.evaluation.result`` log record: an EVAL score of the span (else the trace) it names; its
        session is its trace's when the trace is in this export, else staging finds the session holding the event."""
        a = event.attributes
        raw_text = dump({"event": event.name, "traceId": event.trace_id, "spanId": event.span_id, "attributes": a})
        score = _score(
            a.get("gen_ai.evaluation.name"),
            a.get("gen_ai.evaluation.score.value"),
            a.get("gen_ai.evaluation.score.label"),
            a.get("gen_ai.evaluation.explanation"),
            "EVAL",
            iso_time(event.time_ns),
        )
        session = session_of.get(event.trace_id) if event.trace_id else None
        self._add(source_file, event.line, _with_target(score, session, event.span_id or event.trace_id), raw_text)

    def _add(self, source_file: str, line: int, score: Score, raw_text: str) -> None:
        place = (source_file, line)
        item_index = self.scored[place]
        self.scored[place] += 1
        add_score(self.batch, source_file, line, score, self.rules, raw_text, item_index)

    def _write_session(self, index: int, session_id: str, traces: list[_Trace]) -> int:
        raws: list[dict[str, Any]] = []
        planned: list[list[EventFields]] = []
        for trace in traces:
            words = trace_words(trace)
            raws.append(
                {
                    "id": trace.trace_id,
                    "timestamp": iso_time(trace.start),
                    "traceId": trace.trace_id,
                    "user_words": words,
                }
            )
            planned.append([EventFields("user", "action", "message", text=words, event_id=trace.trace_id)])
            ordered = sorted((s for s in trace.spans if not is_carrier(s)), key=_end_key)
            ids = {s.span_id for s in trace.spans}
            for i, span in enumerate(ordered):
                is_root = i == len(ordered) - 1 and (span.parent_id is None or span.parent_id not in ids)
                raws.append(
                    {"timestamp": iso_time(span.end_ns or span.start_ns), "span": orjson.Fragment(span.raw_json)}
                )
                planned.append(span_events(span, is_root))
        usage, model = session_usage(traces)
        spans = [s for t in traces for s in sorted(t.spans, key=_start_key)]
        info: dict[str, Any] = {"traces": [t.trace_id for t in traces]}
        user = next((u for u in (first_id(s, USER_KEYS) for s in spans) if u), None)
        if user:
            info["user_id"] = user
        for key, names in (
            ("service_name", ("service.name",)),
            ("service_version", ("service.version",)),
            ("agent_name", ("gen_ai.agent.name", "agent.name")),
            ("agent_version", ("gen_ai.agent.version",)),
        ):
            value = next((v for v in (first(s, names) for s in spans) if isinstance(v, str) and v), None)
            if value:
                info[key] = value
        about: dict[str, Any] = {}
        if model:
            about["model"] = model
        if usage.prompt is not None or usage.completion is not None or usage.cost is not None:
            about.update(llm_usage(usage.cost, usage.prompt, usage.completion))
        adapter = OtelSession(planned, about)
        source_file = min(spans, key=_start_key).source_file
        return add_session(self.batch, source_file, index, session_id, FORMAT, adapter, raws, info)

    def _scores(self, span: Span, session_id: str | None, trace_id: str, session_of: dict[str, str]) -> None:
        carrier = is_carrier(span)
        for item in span_feedback(span):
            target_session, event_id = session_id, None
            if item.scope == "span":
                event_id = span.span_id
            elif item.scope == "trace":
                event_id = trace_id
            if carrier and item.scope != "session" and span.links:
                linked_trace, linked_span = span.links[0]
                event_id = linked_span if item.scope == "span" and linked_span else linked_trace
                # a target outside this export: staging finds the session holding the event (None here)
                target_session = session_of.get(linked_trace) or first_id(span, SESSION_KEYS)
            if item.scope == "session":
                event_id = None
                target_session = first_id(span, SESSION_KEYS) or target_session
            if target_session is None and event_id is None:
                target_session = first_id(span, SESSION_KEYS)
            self._add(span.source_file, span.line, _with_target(item.score, target_session, event_id), item.raw_text)


def _with_target(score: Score, session_id: str | None, event_id: str | None) -> Score:
    return Score(
        name=score.name,
        value=score.value,
        string_value=score.string_value,
        data_type=score.data_type,
        source=score.source,
        session_id=session_id,
        event_id=event_id,
        score_id=score.score_id,
        comment=score.comment,
        created_at=score.created_at,
    )


def trace_session(trace: _Trace) -> str:
    """The session a trace belongs to (module docstring): the first session id its spans name, else its id."""
    ids = {s.span_id for s in trace.spans}
    ordered = sorted(trace.spans, key=lambda s: (s.parent_id is not None and s.parent_id in ids, _start_key(s)))
    for span in ordered:
        sid = first_id(span, SESSION_KEYS)
        if sid:
            return sid
    return trace.trace_id


# --- entry point for files.py -----------------------------------------------------------------------------------


def read_otlp_documents(batch: Batch, source_file: str, docs: Iterable[tuple[int, Any]]) -> Iterator[Batch]:
    """One file of OTLP/JSON documents already parsed, as ``(record index, document)``: its batches, the first
    ``batch`` (which may hold rows already)."""
    reader = OtlpReader(batch)
    for line, doc in docs:
        if is_otlp(doc):
            reader.add(source_file, line, doc)
        else:
            reader.other(source_file, line, doc)
    yield from reader.finish()
