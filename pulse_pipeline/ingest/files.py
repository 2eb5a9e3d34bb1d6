"""Reading one file of a drop: detect its shape from its content and hand each record to ``records``.

Shapes (tried in this order):

1. a whole JSON document: an array of events (one session, V0 or V1), an array of records, or one record (such
   as OpenHands' trajectory download ``{"trajectory": [...]}``);
2. JSON lines: one record per line, or one event per line (a V1 ``*.jsonl`` conversation, one session);
3. CSV with a header: rating and ask rows (a ``rating`` or ``ask_probability`` column) or assignment rows
   (``experiment``/``variant``).

An OpenTelemetry Collector's export (a file starting ``{"resourceSpans"`` or ``{"resourceLogs"``: one OTLP/JSON
document per line, or one per file) is read first and whole, a line at a time (``read_otlp_files``, ``otel.py``):
a trace's spans may be on any of its lines, so its lines are never records on their own.

A file that holds one session (shapes 1 except an array of records, and a JSON-lines event stream) takes the id
its location gives (``name_id``) when its content names none; records of a file of many records never do (see
``records.py`` for the whole precedence). Folders that hold one session are read by ``folders.py``.

A line or document that is not valid JSON (truncated, malformed, not UTF-8, nested deeper than 1 024 levels) goes
to quarantine with the parser's message; the rest of the file is still read. A UTF-8 byte order mark before a JSON
document, a JSON line or a CSV header is skipped; ``events.parse_json`` says how numbers JSON or a double cannot
hold (integers beyond 64 bits, NaN, 1e400) are kept.

A record (a line, or a file that is one document) of more bytes than ``PULSE_MAX_RECORD_MB`` or more JSON values
than ``PULSE_MAX_RECORD_VALUES`` is quarantined before it is parsed, with its size and the setting (``limits.py``);
a JSON file larger than the first is read line by line and never held whole (``_read_large_file``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import orjson

from .. import tables
from .adapter import add_session
from .batch import Batch
from .events import BOM, dump, parse_json
from .limits import EXCERPT_BYTES, Oversized, RecordLimits, bounded_lines, excerpt_text, record_limits
from .otel import OtlpReader, read_otlp_documents
from .otlp import is_otlp, starts_as_otlp
from .records import adapter_for, add_assignment, add_rating, add_record, classify, content_id

CHUNK_EVENTS = 50_000  # a batch is handed to the warehouse once it holds this many events
CHUNK_BYTES = 32 << 20  # ... or records of this many bytes (one large record goes to the warehouse nearly alone)


def why_unparseable(raw: bytes, error: Exception) -> str:
    """The quarantine reason for text ``events.parse_json`` refused with ``error``."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if "depth limit" in str(error):
        return f"JSON nested deeper than 1 024 levels, the most PULSE reads ({error})"
    return f"not valid JSON ({error})"


def _is_event_list(value: Any) -> bool:
    first = next((e for e in value if isinstance(e, dict)), None)
    return first is not None and classify(first) == "event"


def _add_event_stream(batch: Batch, source_file: str, raw_events: list[Any], name_id: str | None) -> None:
    """A file that is one session's events: bare events name no session, so the id is the location's, else the
    hash of the events (``content_id``)."""
    adapter = adapter_for(raw_events)
    session_id = name_id or content_id(raw_events)
    source_format = adapter.file_format or f"{adapter.format}_events"
    add_session(batch, source_file, 0, session_id, source_format, adapter, raw_events, {})


def read_file(drop_id: str, path: Path, source_file: str, name_id: str | None = None) -> Iterator[Batch]:
    """Every record of one file, in batches of about ``CHUNK_EVENTS`` events (memory stays bounded).

    ``name_id`` is the session id the file's location gives (``drop.drop_units``); it names the file's session
    when the file holds one session whose content names none. A file larger than ``PULSE_MAX_RECORD_MB`` is
    read line by line (``_read_large_file``), and a file holding more JSON values than ``PULSE_MAX_RECORD_VALUES``
    is not parsed whole (``limits.py``)."""
    if starts_as_otlp(path):  # an OpenTelemetry Collector's export, read a line at a time (otel.py)
        yield from read_otlp_files(drop_id, [(path, source_file)])
        return
    limits = record_limits()
    if path.stat().st_size > limits.max_bytes and _starts_as_json(path):
        yield from _read_large_file(drop_id, path, source_file, limits)
        return
    raw = path.read_bytes().removeprefix(BOM)
    batch = Batch(drop_id, held_bytes=len(raw))
    if not raw.strip():
        batch.read["unknown"] += 1
        batch.quarantine(source_file, None, "unknown", "file is empty", "")
        yield batch
        return
    too_large = limits.why_too_large(raw)
    try:
        if too_large:  # tried as JSON lines, whose records are each measured, else quarantined unparsed
            raise orjson.JSONDecodeError(too_large, "", 0)
        whole = parse_json(raw)
    except orjson.JSONDecodeError as error:
        if raw.lstrip()[:1] not in (b"{", b"["):
            _read_csv(batch, raw, source_file)
        else:
            lines = raw.split(b"\n")
            mode = jsonl_mode(lines, limits=limits)
            if mode == "otlp":
                yield from _read_otlp_lines(batch, enumerate(lines), source_file, limits)
                return
            if mode == "records":
                yield from read_record_lines(drop_id, enumerate(lines), source_file)
                return
            if mode == "events" and not too_large:
                _read_event_lines(batch, lines, source_file, name_id)
            elif too_large:  # one document (or one session's event lines) of too many values
                kind = "session" if mode == "events" else "unknown"
                batch.read[kind] += 1
                batch.quarantine(source_file, 0 if mode else None, kind, too_large, excerpt_text(raw))
            else:
                # not JSON lines either: one document that does not parse (truncated or malformed), kept whole
                batch.read["unknown"] += 1
                batch.quarantine(
                    source_file, None, "unknown", why_unparseable(raw, error), raw.decode("utf-8", "replace")
                )
        yield batch
        return
    if isinstance(whole, list) and not whole:
        batch.read["unknown"] += 1
        batch.quarantine(source_file, None, "unknown", "file is an empty JSON array: no session, rating or event", "[]")
    elif is_otlp(whole):
        yield from read_otlp_documents(batch, source_file, [(0, whole)])
        return
    elif isinstance(whole, list) and _is_event_list(whole):
        _add_event_stream(batch, source_file, whole, name_id)
    elif isinstance(whole, list):
        for i, obj in enumerate(whole):
            add_record(batch, source_file, i, obj, dump(obj).encode())  # many records: none takes the file's name
    elif classify(whole) == "event":
        _add_event_stream(batch, source_file, [whole], name_id)  # a conversation of a single event
    else:
        add_record(batch, source_file, 0, whole, raw, name_id)
    yield batch


def jsonl_mode(lines: Iterable[bytes], sample: int = 20, limits: RecordLimits | None = None) -> str | None:
    """``records`` or ``events`` when most of the first non-empty lines are JSON objects, else None. A line too
    large to parse (``limits.py``) counts as a line that is no object, unparsed; only the first object is kept."""
    limits = limits or record_limits()
    first: Any = None
    objects = seen = 0
    for line in lines:
        if not line.strip():
            continue
        seen += 1
        try:
            obj = None if limits.why_too_large(line) else parse_json(line)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            objects += 1
            first = obj if first is None else first
        if seen >= sample:
            break
    if not objects or objects * 2 < seen:
        return None
    if is_otlp(first):
        return "otlp"  # an OpenTelemetry Collector's file export: one file, read whole (otel.py)
    return "events" if classify(first) == "event" else "records"


def _starts_as_json(path: Path) -> bool:
    """Whether the file's first 64 KiB, a byte order mark and white space aside, start a JSON object or array (a
    CSV file of ratings is read row by row, whatever its size)."""
    with path.open("rb") as f:
        head = f.read(1 << 16).removeprefix(BOM).lstrip()
    return head[:1] in (b"{", b"[", b"")


def _read_large_file(drop_id: str, path: Path, source_file: str, limits: RecordLimits) -> Iterator[Batch]:
    """A file larger than ``PULSE_MAX_RECORD_MB``, never held whole: JSON lines of records are read line by line
    (each line measured, ``read_record_lines``); anything else (one JSON document, one session's event lines) is
    one record over the limit, quarantined with its first bytes."""
    with path.open("rb") as f:
        if f.read(len(BOM)) != BOM:
            f.seek(0)
        start = f.tell()
        lines = bounded_lines(f, limits.max_bytes)
        mode = jsonl_mode((line.excerpt if isinstance(line, Oversized) else line for line in lines), limits=limits)
        f.seek(start)
        if mode == "records":
            yield from read_record_lines(drop_id, enumerate(bounded_lines(f, limits.max_bytes)), source_file, limits)
            return
        if mode == "otlp":
            yield from _read_otlp_lines(
                Batch(drop_id), enumerate(bounded_lines(f, limits.max_bytes)), source_file, limits
            )
            return
        head = f.read(EXCERPT_BYTES)
    kind = "session" if mode == "events" else "unknown"
    what = "a file of one session's event lines" if mode == "events" else "a file that is one JSON document"
    batch = Batch(drop_id)
    batch.read[kind] += 1
    reason = limits.too_many_bytes(path.stat().st_size, what)
    if mode is None and head.removeprefix(BOM).lstrip()[:1] == b"[":
        reason += (
            " A JSON array of records this large is read only as JSON lines, one record per line (e.g. `jq -c"
            " '.[]' FILE > FILE.jsonl`); an array of one session's events is one record."
        )
    batch.quarantine(source_file, 0 if mode else None, kind, reason, excerpt_text(head))
    yield batch


def json_lines(
    numbered_lines: Iterable[tuple[int, bytes | Oversized]], limits: RecordLimits
) -> Iterator[tuple[int, bytes | None, Any, tuple[str, str] | None]]:
    """Each non-blank line of a JSON-lines file as ``(line number, its bytes, its value, None)``, or, for a line
    that is no record, ``(line number, its bytes or None, None, (reason, raw text))`` for its quarantine row: a line
    too large to hold or parse (``limits.py``; its bytes None, never held) or one that is not JSON. The caller
    writes the rows, into whichever batch is current (a reader hands batches on as it goes)."""
    for i, line in numbered_lines:
        if isinstance(line, Oversized):
            yield i, None, None, (limits.too_many_bytes(line.size), line.text())
            continue
        if not line.strip():
            continue
        too_large = limits.why_too_large(line)
        if too_large:
            yield i, None, None, (too_large, excerpt_text(line))
            continue
        try:
            value = parse_json(line)
        except orjson.JSONDecodeError as error:
            yield i, line, None, (why_unparseable(line, error), line.decode("utf-8", "replace"))
            continue
        yield i, line, value, None


def read_record_lines(
    drop_id: str,
    numbered_lines: Iterable[tuple[int, bytes | Oversized]],
    source_file: str,
    limits: RecordLimits | None = None,
) -> Iterator[Batch]:
    """JSON lines, one record each; a record's index is its line number. A line too large to parse
    (``limits.py``) is quarantined with the reason; batches are handed on every ``CHUNK_EVENTS`` events or
    ``CHUNK_BYTES`` bytes of lines."""
    limits = limits or record_limits()
    batch = Batch(drop_id)
    for i, line, obj, problem in json_lines(numbered_lines, limits):
        if line is not None:
            batch.held_bytes += len(line)
        if problem is not None:
            batch.read["unknown"] += 1
            batch.quarantine(source_file, i, "unknown", *problem)
            continue
        add_record(batch, source_file, i, obj, line)
        if batch.count(tables.EVENTS) >= CHUNK_EVENTS or batch.held_bytes >= CHUNK_BYTES:
            yield batch
            batch = Batch(drop_id)
    yield batch


def otlp_lines(
    batch: Batch, numbered_lines: Iterable[tuple[int, bytes | Oversized]], source_file: str, limits: RecordLimits
) -> Iterator[tuple[int, Any]]:
    """The parsed lines of an OpenTelemetry Collector's file export (one ``{"resourceSpans": [...]}`` per line),
    as ``(line, value)``; a line too large or not JSON is quarantined as any JSON line is."""
    for i, _, value, problem in json_lines(numbered_lines, limits):
        if problem is None:
            yield i, value
        else:
            batch.read["unknown"] += 1
            batch.quarantine(source_file, i, "unknown", *problem)


def _read_otlp_lines(
    batch: Batch, numbered_lines: Iterable[tuple[int, bytes | Oversized]], source_file: str, limits: RecordLimits
) -> Iterator[Batch]:
    """One file of an export, read whole (``otel.py``: a trace's spans may be on many lines)."""
    yield from read_otlp_documents(batch, source_file, otlp_lines(batch, numbered_lines, source_file, limits))


def read_otlp_files(drop_id: str, members: Iterable[tuple[Path, str]]) -> Iterator[Batch]:
    """Every OTLP/JSON file of a drop (``drop.drop_units`` puts them in one unit), read as one export: the
    Collector's rotation renames a full file and starts a new one, so a trace's spans and a session's traces may be
    in several files. Each file is one document or JSON lines; a line larger than ``PULSE_MAX_RECORD_MB`` is
    quarantined, never held (a file is read line by line whatever its size)."""
    limits = record_limits()
    batch = Batch(drop_id)
    reader = OtlpReader(batch, CHUNK_EVENTS)
    for path, source_file in members:
        with path.open("rb") as f:
            if f.read(len(BOM)) != BOM:
                f.seek(0)
            head = f.tell()
            whole = None
            if path.stat().st_size <= limits.max_bytes:
                raw = f.read()
                try:
                    whole = None if limits.why_too_large(raw) else parse_json(raw)
                except orjson.JSONDecodeError:
                    whole = None
                raw = b""  # JSON lines are read again from the file, one at a time
                f.seek(head)
            if is_otlp(whole):
                reader.add(source_file, 0, whole)
                continue
            sample = [
                x.excerpt if isinstance(x, Oversized) else x for x in islice(bounded_lines(f, limits.max_bytes), 20)
            ]
            f.seek(head)
            if (
                jsonl_mode(sample, limits=limits) is None
            ):  # one document, unreadable or too large: one row, not one a line
                size = path.stat().st_size
                batch.read["unknown"] += 1
                reason = (
                    limits.too_many_bytes(size, "a file that is one JSON document")
                    if size > limits.max_bytes
                    else "not valid JSON: an OTLP/JSON document that does not parse (truncated or malformed)"
                )
                batch.quarantine(source_file, None, "unknown", reason, excerpt_text(f.read(EXCERPT_BYTES)))
                continue
            for line, value in otlp_lines(batch, enumerate(bounded_lines(f, limits.max_bytes)), source_file, limits):
                if is_otlp(value):
                    reader.add(source_file, line, value)
                else:
                    reader.other(source_file, line, value)
    yield from reader.finish()


def _read_event_lines(batch: Batch, lines: list[bytes], source_file: str, name_id: str | None) -> None:
    """One conversation, one event per line (V1 JSONL, Claude Code, Codex); an unreadable line is quarantined as an
    event whose ``record_index`` and ``event_index`` are both its line number (0-based, as every JSON-lines
    record's: the file's 13th line is 12). Why: the session is record 0 of the file, and every bad line reported
    as "record 0" said nothing of where it was (issue 34, item 9)."""
    events: list[Any] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            events.append(parse_json(line))
        except orjson.JSONDecodeError as error:
            batch.read["event"] += 1
            batch.quarantine(
                source_file, i, "event", why_unparseable(line, error), line.decode("utf-8", "replace"), event_index=i
            )
    _add_event_stream(batch, source_file, events, name_id)


def _read_csv(batch: Batch, raw: bytes, source_file: str) -> None:
    """Rating or assignment rows; a row's record_index is its line number (the header is line 0)."""
    text_lines: list[str] = []
    for i, line in enumerate(raw.split(b"\n")):
        try:
            text_lines.append(line.decode("utf-8-sig" if i == 0 else "utf-8").rstrip("\r"))
        except UnicodeDecodeError as exc:
            text_lines.append("")
            batch.read["unknown"] += 1
            batch.quarantine(
                source_file,
                i,
                "unknown",
                f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                line.decode("utf-8", "replace"),
            )
    reader = csv.reader(io.StringIO("\n".join(text_lines)))
    rows = _csv_rows(reader)
    _, header_row = next(rows, (0, []))
    header = [h.strip() for h in header_row] if isinstance(header_row, list) else []
    if "rating" in header or "ask_probability" in header:
        record_type = "rating"
    elif "experiment" in header or "variant" in header:
        record_type = "assignment"
    else:
        batch.read["unknown"] += 1
        batch.quarantine(
            source_file,
            None,
            "unknown",
            _why_not_csv(header),
            raw.decode("utf-8", "replace")[:100_000],
        )
        return
    for line_no, row in rows:
        if isinstance(row, csv.Error):
            batch.read[record_type] += 1
            batch.quarantine(source_file, line_no, record_type, f"CSV row cannot be read ({row})", text_lines[line_no])
            continue
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            batch.read[record_type] += 1
            batch.quarantine(
                source_file, line_no, record_type, f"row has {len(row)} cells, the header has {len(header)}", dump(row)
            )
            continue
        obj = {k: (v if v != "" else None) for k, v in zip(header, row, strict=True)}
        if record_type == "rating":
            add_rating(batch, source_file, line_no, obj, dump(obj), "feedback_file")
        else:
            add_assignment(batch, source_file, line_no, obj, dump(obj))


def _why_not_csv(header: list[str]) -> str:
    """The reason for a file that is neither JSON nor a ratings or assignments CSV: the columns it has, and those
    each kind of file needs."""
    shown = ", ".join(header[:8]) + (f", ... ({len(header)} columns)" if len(header) > 8 else "")
    return (
        f"not JSON, and its header ({shown[:200] or 'empty'}) is not a ratings or assignments CSV header: expected a"
        " ratings file (conversation_id or session_id, rating; optional event_id, segment_index, reason,"
        " created_at, ask_probability) or an assignments file (session_id, experiment, variant; optional user_id)"
    )


def _csv_rows(reader: Any) -> Iterator[tuple[int, list[str] | csv.Error]]:
    """``(line number, cells)`` of each row, or ``(line number, the error)`` for a row the csv module cannot read
    (a cell longer than its 131 072-character limit, a carriage return inside an unquoted cell): that row is
    quarantined, and the reader goes on with the next line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            yield reader.line_num - 1, error
            continue
        yield reader.line_num - 1, row
