"""OTLP/JSON trace documents, as the OpenTelemetry Collector's file exporter writes them: spans out of their envelope.

The shape (opentelemetry-proto ``trace/v1/trace.proto`` in its OTLP/JSON encoding, camelCase field names) is one
``{"resourceSpans": [...]}`` object per line, or one such document per file::

    {"resourceSpans": [{"resource": {"attributes": [KeyValue, ...]},
                        "scopeSpans": [{"scope": {"name", "version"},
                                        "spans": [{"traceId", "spanId", "parentSpanId", "name", "kind",
                                                   "startTimeUnixNano", "endTimeUnixNano",
                                                   "attributes": [KeyValue, ...],
                                                   "events": [{"timeUnixNano", "name", "attributes"}],
                                                   "links": [{"traceId", "spanId", "attributes"}],
                                                   "status": {"code", "message"}}]}]}]}

A ``KeyValue`` is ``{"key": ..., "value": AnyValue}`` and an ``AnyValue`` holds exactly one of ``stringValue``,
``boolValue``, ``intValue`` (a 64-bit integer, written as a decimal string), ``doubleValue``, ``arrayValue``
(``{"values": [AnyValue]}``), ``kvlistValue`` (``{"values": [KeyValue]}``) or ``bytesValue`` (base64); an empty
``{}`` is no value. ``decode_value`` turns one into plain Python (a ``bool`` stays a ``bool``, so a thumb kept as
``boolValue`` is told from a number). Trace and span ids are hex strings in OTLP/JSON (not base64 as in protobuf's
generic JSON mapping); times are nanoseconds since the epoch, as decimal strings or numbers. The status code is an
integer (2 is ERROR) or, from some writers, its enum name (``STATUS_CODE_ERROR``). Collectors before 0.50 wrote
``instrumentationLibrarySpans`` where newer ones write ``scopeSpans``: both are read.

What this module refuses, each with a reason the quarantine row carries (``BadSpan``): a span that is not an
object; one without a trace or span id (or with an id that is no id: ``events.read_id``); one whose attribute list
is not a list of ``{key, value}`` pairs or holds a value that is no ``AnyValue``. A ``resourceSpans`` entry or
``scopeSpans`` entry that is not an object, or whose span list is not a list, is refused whole (``BadPart``).
Nothing here knows what the attributes mean: ``otel.py`` reads the conventions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from .events import BOM, NotAnId, dump, read_id

ERROR_STATUS = (2, "2", "STATUS_CODE_ERROR")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SCOPE_KEYS = ("scopeSpans", "instrumentationLibrarySpans")


class NotAValue(ValueError):
    """An attribute value that is no OTLP ``AnyValue``; the message says why."""


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """An event recorded on a span (``gen_ai.evaluation.result`` is one)."""

    name: str
    time_ns: int | None
    attributes: dict[str, Any]


@dataclass(slots=True)
class Span:
    """One span, its attributes decoded, with where it was read (``line``: the record index of its document,
    ``position``: its place among the document's spans, counted across resources and scopes)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int | None
    end_ns: int | None
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[SpanEvent]
    links: list[tuple[str, str | None]]  # (trace id, span id) of each link
    error: bool
    status: Any  # the span's status object as written (its message says what failed)
    raw_json: str  # the span as written, compact: kept instead of its parsed JSON (a third of the memory)
    line: int
    position: int
    scope: str | None = None
    source_file: str = ""  # the drop's file it was read from (a Collector's rotated export is many files)

    def get(self, key: str) -> Any:
        """An attribute of the span, else of its resource."""
        value = self.attributes.get(key)
        return self.resource.get(key) if value is None else value


@dataclass(frozen=True, slots=True)
class BadSpan:
    """A span that cannot be read, with why."""

    line: int
    position: int
    reason: str
    raw_text: str


@dataclass(frozen=True, slots=True)
class BadPart:
    """A ``resourceSpans`` or ``scopeSpans`` entry that cannot be read (its spans are unreachable), with why."""

    line: int
    reason: str
    raw_text: str


@dataclass(frozen=True, slots=True)
class LogEvent:
    """A log record that is an OpenTelemetry event (its ``eventName``, else its older ``name`` field or
    ``event.name`` attribute): GenAI events such as ``gen_ai.evaluation.result`` are log records, tied to the span
    they describe by ``traceId``/``spanId``."""

    name: str
    trace_id: str | None
    span_id: str | None
    time_ns: int | None
    attributes: dict[str, Any]
    line: int
    position: int


@dataclass
class Document:
    """What one OTLP/JSON document holds: its spans, and what could not be read."""

    spans: list[Span] = field(default_factory=list)
    bad_spans: list[BadSpan] = field(default_factory=list)
    bad_parts: list[BadPart] = field(default_factory=list)
    events: list[LogEvent] = field(default_factory=list)


def starts_as_otlp(path: Path) -> bool:
    """Whether a file starts as an OTLP/JSON traces document (``{"resourceSpans"``, a byte order mark and white
    space aside): read from its first bytes only, so a drop's files can be told apart before they are read."""
    with path.open("rb") as f:
        head = f.read(256).removeprefix(BOM).lstrip()
    return head[:1] == b"{" and head[1:].lstrip().startswith((b'"resourceSpans"', b'"resourceLogs"'))


def is_otlp_traces(obj: Any) -> bool:
    """Whether a parsed JSON value is an OTLP/JSON traces document (an object with a ``resourceSpans`` list)."""
    return isinstance(obj, dict) and isinstance(obj.get("resourceSpans"), list)


def is_otlp_logs(obj: Any) -> bool:
    """Whether a parsed JSON value is an OTLP/JSON logs document (an object with a ``resourceLogs`` list)."""
    return isinstance(obj, dict) and isinstance(obj.get("resourceLogs"), list)


def is_otlp(obj: Any) -> bool:
    """An OTLP/JSON traces or logs document: what an OpenTelemetry Collector's file export holds."""
    return is_otlp_traces(obj) or is_otlp_logs(obj)


def decode_value(value: Any, depth: int = 0) -> Any:
    """An ``AnyValue`` as plain Python: str, bool, int, float, list, dict, or None for an empty value."""
    if not isinstance(value, dict):
        raise NotAValue(f"value {dump(value)[:80]} is not an OTLP AnyValue object")
    if depth > 64:
        raise NotAValue("value nested deeper than 64 arrays or key-value lists")
    if not value:
        return None
    if len(value) != 1:
        raise NotAValue(f"value holds {len(value)} fields ({', '.join(sorted(value))[:80]}), an AnyValue holds one")
    kind, inner = next(iter(value.items()))
    if kind == "stringValue" and isinstance(inner, str):
        return inner
    if kind == "boolValue" and isinstance(inner, bool):
        return inner
    if kind == "intValue" and not isinstance(inner, bool):
        number = _integer(inner)
        if number is not None:
            return number
    if kind == "doubleValue" and isinstance(inner, int | float) and not isinstance(inner, bool):
        return float(inner)
    if kind == "doubleValue" and inner in ("NaN", "Infinity", "-Infinity"):
        return float(inner)
    if kind == "bytesValue" and isinstance(inner, str):
        return inner
    if kind == "arrayValue" and isinstance(inner, dict):
        values = inner.get("values") or []
        if isinstance(values, list):
            return [decode_value(v, depth + 1) for v in values]
    if kind == "kvlistValue" and isinstance(inner, dict):
        values = inner.get("values") or []
        if isinstance(values, list):
            return decode_attributes(values, depth + 1)
    raise NotAValue(f"value {dump(value)[:80]} is not an OTLP AnyValue ({kind} of the wrong type, or unknown)")


def decode_attributes(pairs: Any, depth: int = 0) -> dict[str, Any]:
    """A list of ``{key, value}`` as a dict (a repeated key keeps its last value, as OTLP SDKs do)."""
    if pairs is None:
        return {}
    if not isinstance(pairs, list):
        raise NotAValue(f"attributes are {type(pairs).__name__}, not a list of {{key, value}}")
    decoded: dict[str, Any] = {}
    for i, pair in enumerate(pairs):
        if not isinstance(pair, dict) or not isinstance(pair.get("key"), str):
            raise NotAValue(f"attribute {i} is not a {{key, value}} object with a string key")
        try:
            decoded[pair["key"]] = decode_value(pair.get("value") or {}, depth)
        except NotAValue as error:
            raise NotAValue(f"attribute {pair['key']!r}: {error}") from None
    return decoded


def _integer(value: Any) -> int | None:
    """A whole number from an int or a decimal string (OTLP/JSON writes 64-bit integers as strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
    return None


def nanos(value: Any) -> int | None:
    """A time in nanoseconds since the epoch; None when absent, zero or no whole number."""
    number = _integer(value)
    return number if number else None


def iso_time(ns: int | None) -> str | None:
    """Nanoseconds since the epoch as an ISO timestamp in UTC without a zone (microseconds kept)."""
    if ns is None:
        return None
    try:
        return (_EPOCH + timedelta(microseconds=ns // 1000)).replace(tzinfo=None).isoformat()
    except OverflowError:
        return None


def _span_id(value: Any, what: str) -> str | None:
    """A trace or span id: a non-empty string or number (``events.read_id``), never all zeros (OTLP's "no id")."""
    text = read_id(value, what)
    if text is None or not text.strip("0"):
        return None
    return text


def read_document(doc: dict[str, Any], line: int) -> Document:
    """Every span of one document, in order, with the spans and envelope parts that cannot be read."""
    out = Document()
    position = 0
    for r, resource_spans in enumerate(doc["resourceSpans"]):
        if not isinstance(resource_spans, dict):
            out.bad_parts.append(BadPart(line, f"resourceSpans[{r}] is not an object", dump(resource_spans)))
            continue
        try:
            resource = decode_attributes((resource_spans.get("resource") or {}).get("attributes"))
        except (NotAValue, AttributeError) as error:
            out.bad_parts.append(BadPart(line, f"resourceSpans[{r}]'s resource: {error}", dump(resource_spans)))
            continue
        scopes = next((resource_spans[k] for k in _SCOPE_KEYS if k in resource_spans), [])
        if not isinstance(scopes, list):
            out.bad_parts.append(BadPart(line, f"resourceSpans[{r}].scopeSpans is not a list", dump(resource_spans)))
            continue
        for s, scope_spans in enumerate(scopes):
            spans = scope_spans.get("spans") if isinstance(scope_spans, dict) else None
            if not isinstance(spans, list):
                reason = f"resourceSpans[{r}].scopeSpans[{s}] has no list of spans"
                out.bad_parts.append(BadPart(line, reason, dump(scope_spans)))
                continue
            scope = scope_spans.get("scope") or scope_spans.get("instrumentationLibrary")
            scope_name = scope.get("name") if isinstance(scope, dict) else None
            for raw in spans:
                span = read_span(raw, resource, line, position)
                if isinstance(span, Span):
                    span.scope = scope_name if isinstance(scope_name, str) else None
                    out.spans.append(span)
                else:
                    out.bad_spans.append(span)
                position += 1
    return out


def read_log_document(doc: dict[str, Any], line: int) -> Document:
    """Every event of one logs document (``resourceLogs`` > ``scopeLogs`` > ``logRecords``), with what cannot be
    read (a log record that is not an object, or whose attributes or ids cannot be read, is a ``BadPart``). Log
    records that are no event (no event name) are application logs, not read."""
    out = Document()
    position = 0
    for r, resource_logs in enumerate(doc["resourceLogs"]):
        scopes = resource_logs.get("scopeLogs") if isinstance(resource_logs, dict) else None
        if not isinstance(scopes, list):
            out.bad_parts.append(BadPart(line, f"resourceLogs[{r}] has no list of scopeLogs", dump(resource_logs)))
            continue
        for s, scope_logs in enumerate(scopes):
            records = scope_logs.get("logRecords") if isinstance(scope_logs, dict) else None
            if not isinstance(records, list):
                reason = f"resourceLogs[{r}].scopeLogs[{s}] has no list of logRecords"
                out.bad_parts.append(BadPart(line, reason, dump(scope_logs)))
                continue
            for raw in records:
                try:
                    event = _log_event(raw, line, position)
                except (NotAValue, NotAnId) as error:
                    out.bad_parts.append(BadPart(line, f"log record {position}: {error}", dump(raw)))
                else:
                    if event is not None:
                        out.events.append(event)
                position += 1
    return out


def _log_event(raw: Any, line: int, position: int) -> LogEvent | None:
    if not isinstance(raw, dict):
        raise NotAValue("is not a JSON object")
    attributes = decode_attributes(raw.get("attributes"))
    name = raw.get("eventName") or raw.get("name") or attributes.get("event.name")
    if not isinstance(name, str) or not name:
        return None
    trace_id = _span_id(raw.get("traceId"), "log record's traceId")
    span_id = _span_id(raw.get("spanId"), "log record's spanId")
    return LogEvent(name, trace_id, span_id, nanos(raw.get("timeUnixNano")), attributes, line, position)


def read_span(raw: Any, resource: dict[str, Any], line: int, position: int) -> Span | BadSpan:
    """One span, or why it cannot be read."""
    if not isinstance(raw, dict):
        return BadSpan(line, position, "span is not a JSON object", dump(raw))
    try:
        trace_id = _span_id(raw.get("traceId"), "span's traceId")
        span_id = _span_id(raw.get("spanId"), "span's spanId")
        parent_id = _span_id(raw.get("parentSpanId"), "span's parentSpanId")
    except NotAnId as error:
        return BadSpan(line, position, str(error), dump(raw))
    if trace_id is None:
        return BadSpan(line, position, "span has no traceId: an OTLP span names its trace (32 hex digits)", dump(raw))
    if span_id is None:
        return BadSpan(line, position, "span has no spanId: an OTLP span has its own id (16 hex digits)", dump(raw))
    try:
        attributes = decode_attributes(raw.get("attributes"))
        events = [_span_event(e) for e in (raw.get("events") or [])]
        links = [_link(link) for link in (raw.get("links") or [])]
    except (NotAValue, NotAnId, TypeError) as error:
        return BadSpan(line, position, f"span {span_id}: {error}", dump(raw))
    status = raw.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    name = raw.get("name")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name if isinstance(name, str) else "",
        start_ns=nanos(raw.get("startTimeUnixNano")),
        end_ns=nanos(raw.get("endTimeUnixNano")),
        attributes=attributes,
        resource=resource,
        events=events,
        links=links,
        error=code in ERROR_STATUS,
        status=status,
        raw_json=compact_json(raw),
        line=line,
        position=position,
    )


def compact_json(value: Any) -> str:
    """``value`` as compact JSON text (``events.dump`` for what orjson refuses: integers beyond 64 bits). Text, not
    orjson's bytes: those keep the capacity orjson's buffer grew to (measured: 4 KB held for a span of 800 bytes)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return dump(value)


def _span_event(raw: Any) -> SpanEvent:
    if not isinstance(raw, dict):
        raise NotAValue("an event of the span is not an object")
    name = raw.get("name")
    try:
        attributes = decode_attributes(raw.get("attributes"))
    except NotAValue as error:
        raise NotAValue(f"event {name!r}: {error}") from None
    return SpanEvent(name if isinstance(name, str) else "", nanos(raw.get("timeUnixNano")), attributes)


def _link(raw: Any) -> tuple[str, str | None]:
    if not isinstance(raw, dict):
        raise NotAValue("a link of the span is not an object")
    trace_id = _span_id(raw.get("traceId"), "link's traceId")
    if trace_id is None:
        raise NotAValue("a link of the span names no traceId")
    return trace_id, _span_id(raw.get("spanId"), "link's spanId")


NOT_OTLP = (
    'not an OTLP/JSON traces or logs document ({"resourceSpans": [...]}) in a file of them: the Collector\'s file'
    " exporter writes one per line; keep other records in a file of their own"
)
OTLP_AMONG_RECORDS = (
    "an OTLP/JSON document in a file whose first records are of another kind: spans of one trace may be on many"
    " lines, so PULSE reads a Collector export only as a file of its own"
)
