"""Reading one file of a drop: detect its shape from its content and hand each record to ``records``.

Shapes (tried in this order):

1. a whole JSON document: an array of events (one session, V0 or V1), an array of records, or one record;
2. JSON lines: one record per line, or one event per line (a V1 ``*.jsonl`` conversation, one session);
3. CSV with a header: rating rows (a ``rating`` column) or assignment rows (``experiment``/``variant``).

A line or document that is not valid JSON (truncated, malformed, not UTF-8) goes to quarantine with the parser's
message; the rest of the file is still read.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import orjson

from .batch import Batch
from .events import dump
from .openhands_v0 import normalize_v0
from .openhands_v1 import looks_like_v1, normalize_v1
from .records import add_assignment, add_rating, add_record, add_session, classify, content_id

_EVENT_KINDS = ("v0_event", "v1_event")


def _why_unparseable(raw: bytes, error: Exception) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    return f"not valid JSON ({error})"


def _is_event_list(value: Any) -> bool:
    first = next((e for e in value if isinstance(e, dict)), None)
    return first is not None and classify(first) in _EVENT_KINDS


def _add_event_stream(batch: Batch, source_file: str, raw_events: list[Any], raw: bytes) -> None:
    """A file that is one session's events: the session id is derived from the file's content."""
    first = next((e for e in raw_events if isinstance(e, dict)), None)
    if looks_like_v1(first):
        events, bad = normalize_v1(raw_events)
        fmt = "openhands_v1_events"
    else:
        events, bad = normalize_v0(raw_events)
        fmt = "openhands_v0_events"
    add_session(batch, source_file, 0, content_id(raw), fmt, events, bad, {})


def read_file(batch: Batch, path: Path, source_file: str) -> None:
    raw = path.read_bytes()
    if not raw.strip():
        batch.read["unknown"] += 1
        batch.quarantine(source_file, None, "unknown", "file is empty", "")
        return
    try:
        whole = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        whole_error: Exception | None = error
    else:
        whole_error = None
    if whole_error is None:
        if isinstance(whole, list) and _is_event_list(whole):
            _add_event_stream(batch, source_file, whole, raw)
        elif isinstance(whole, list):
            for i, obj in enumerate(whole):
                add_record(batch, source_file, i, obj, orjson.dumps(obj))
        else:
            add_record(batch, source_file, 0, whole, raw)
        return
    first = raw.lstrip()[:1]
    if first not in (b"{", b"["):
        _read_csv(batch, raw, source_file)
    else:
        _read_json_lines(batch, raw, source_file, whole_error)


def _read_json_lines(batch: Batch, raw: bytes, source_file: str, whole_error: Exception) -> None:
    lines = raw.split(b"\n")
    parsed: list[tuple[int, bytes, Any, Exception | None]] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            parsed.append((i, line, orjson.loads(line), None))
        except orjson.JSONDecodeError as error:
            parsed.append((i, line, None, error))
    good = [p for p in parsed if p[3] is None]
    if sum(isinstance(p[2], dict) for p in good) * 2 < len(parsed):
        # not JSON lines (most lines are not objects): one document that does not parse, e.g. a truncated
        # or malformed JSON file; kept whole
        batch.read["unknown"] += 1
        batch.quarantine(
            source_file, None, "unknown", _why_unparseable(raw, whole_error), raw.decode("utf-8", "replace")
        )
        return
    first_kind = classify(good[0][2]) if good else None
    if first_kind in _EVENT_KINDS:
        # one conversation, one event per line; unreadable lines are quarantined as events
        events = [obj for _, _, obj, err in parsed if err is None]
        _add_event_stream(batch, source_file, events, raw)
        for i, line, _, error in parsed:
            if error is not None:
                batch.read["event"] += 1
                batch.quarantine(
                    source_file,
                    0,
                    "event",
                    _why_unparseable(line, error),
                    line.decode("utf-8", "replace"),
                    event_index=i,
                )
        return
    for i, line, obj, error in parsed:
        if error is not None:
            batch.read["unknown"] += 1
            batch.quarantine(source_file, i, "unknown", _why_unparseable(line, error), line.decode("utf-8", "replace"))
        else:
            add_record(batch, source_file, i, obj, line)


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
    header = [h.strip() for h in next(reader, [])]
    if "rating" in header:
        record_type = "rating"
    elif "experiment" in header or "variant" in header:
        record_type = "assignment"
    else:
        batch.read["unknown"] += 1
        batch.quarantine(
            source_file,
            0,
            "unknown",
            "not JSON, and not a CSV with a 'rating' or 'experiment'/'variant' column",
            raw.decode("utf-8", "replace")[:100_000],
        )
        return
    for row in reader:
        line_no = reader.line_num - 1
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


def read_session_dir(batch: Batch, events_dir: Path, source_file: str) -> None:
    """``sessions/<sid>/events/<n>.json``: one event per file, ordered by number; the folder names the session."""
    files = sorted(
        events_dir.glob("*.json"), key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit() else 0, p.name)
    )
    raw_events: list[Any] = []
    unreadable: list[tuple[int, Path, Exception]] = []
    for i, f in enumerate(files):
        data = f.read_bytes()
        try:
            raw_events.append(orjson.loads(data))
        except orjson.JSONDecodeError as error:
            unreadable.append((i, f, error))
    if looks_like_v1(next((e for e in raw_events if isinstance(e, dict)), None)):
        events, bad = normalize_v1(raw_events)
        fmt = "openhands_v1_session_dir"
    else:
        events, bad = normalize_v0(raw_events)
        fmt = "openhands_v0_session_dir"
    add_session(batch, source_file, 0, events_dir.parent.name, fmt, events, bad, {})
    for i, f, error in unreadable:
        batch.read["event"] += 1
        batch.quarantine(
            source_file,
            0,
            "event",
            f"{f.name}: {_why_unparseable(f.read_bytes(), error)}",
            f.read_bytes().decode("utf-8", "replace"),
            event_index=i,
        )
