"""Turning one parsed record (a session, a rating row, an assignment row) into canonical rows.

Which kind of record an object is, is read from its keys, never from its file's name:

========================  ==========================================================
``trajectory`` list        OpenHands feedback-dataset record (``{feedback, trajectory, ...}``)
``history`` list           OpenHands evaluation output line (``{instance_id, history, ...}``)
``events`` list            PULSE canonical session (see ``canonical.py``)
``rating``                 a star rating row (OpenHands ``conversation_feedback`` shape)
``variant``/``experiment`` an assignment row
========================  ==========================================================

Session ids come from ``session_id``, ``conversation_id``, ``instance_id`` or ``id``; a record with none gets
``h-`` + the first 16 hex digits of the SHA-1 of the record's JSON (keys sorted), stable across re-deliveries:
the same record on its own line, in an array, pretty-printed or with CRLF line ends keeps its id.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from .. import tables
from .batch import Batch
from .canonical import normalize_canonical
from .events import BadEvent, Event, as_id, dump, event_columns
from .openhands_v0 import normalize_v0
from .openhands_v1 import looks_like_v1, normalize_v1
from .segments import is_user_message, segment_events

Normalizer = Callable[[Iterable[Any]], tuple[list[Event], list[BadEvent]]]

_ID_KEYS = ("session_id", "conversation_id", "instance_id", "sid", "id")


def classify(obj: Any) -> str | None:
    """The record type of a parsed JSON value, or None when it is no record PULSE knows."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("trajectory"), list):
        return "feedback"
    if isinstance(obj.get("history"), list):
        return "eval"
    if isinstance(obj.get("events"), list):
        return "canonical"
    if "rating" in obj:
        return "rating"
    if "variant" in obj or "experiment" in obj:
        return "assignment"
    if looks_like_v1(obj):
        return "v1_event"
    if "action" in obj or "observation" in obj:
        return "v0_event"
    return None


def content_id(value: Any) -> str:
    """``h-`` + 16 hex digits of the SHA-1 of the parsed value with sorted keys (formatting does not matter)."""
    return "h-" + hashlib.sha1(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def record_session_id(obj: dict[str, Any]) -> str:
    for key in _ID_KEYS:
        value = as_id(obj.get(key))
        if value is not None:
            return value
    return content_id(obj)


def _meta(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None and isinstance(obj.get("metadata"), dict):
        value = obj["metadata"].get(key)
    return as_id(value)


def add_session(
    batch: Batch,
    source_file: str,
    record_index: int,
    session_id: str,
    source_format: str,
    events: list[Event],
    bad: list[BadEvent],
    info: dict[str, Any],
) -> None:
    """Write one session's rows: its events (with segments), its session row, its unreadable events."""
    batch.read["session"] += 1
    batch.read["event"] += len(events) + len(bad)
    for b in bad:
        batch.quarantine(source_file, record_index, "event", b.reason, b.raw_json, event_index=b.position)
    if not events:
        batch.quarantine(source_file, record_index, "session", "session has no readable events", dump(info))
        return
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
    metadata = {k: v for k, v in info.items() if k not in ("history", "trajectory", "events", "ratings")}
    batch.add(
        tables.SESSIONS,
        {
            "drop_id": batch.drop_id,
            "record_key": record_key,
            "source_file": source_file,
            "record_index": record_index,
            "session_id": session_id,
            "source_format": source_format,
            "user_id": _meta(info, "user_id"),
            "experiment": _meta(info, "experiment"),
            "variant": _meta(info, "variant"),
            "feedback": as_id(info.get("feedback") or info.get("polarity")),
            "started_at": min(stamps) if stamps else None,
            "ended_at": max(stamps) if stamps else None,
            "n_events": n,
            "n_user_messages": sum(1 for e in events if is_user_message(e)),
            "n_segments": seg.n_segments,
            "n_shell_commands": sum(1 for e in events if e.kind == "action" and e.name == "run"),
            "metadata_json": dump(metadata) if metadata else None,
        },
    )


def add_record(batch: Batch, source_file: str, record_index: int, obj: Any, raw: bytes) -> None:
    """Route one top-level record to the rows it becomes, or to quarantine with the reason."""
    kind = classify(obj)
    if kind in ("feedback", "eval", "canonical"):
        events_key, normalize, fmt = {
            "feedback": ("trajectory", normalize_v0, "openhands_v0_feedback"),
            "eval": ("history", normalize_v0, "openhands_v0_eval"),
            "canonical": ("events", normalize_canonical, "pulse_canonical"),
        }[kind]
        raw_events = obj[events_key]
        if (
            kind != "canonical"
            and raw_events
            and looks_like_v1(next((e for e in raw_events if isinstance(e, dict)), None))
        ):
            normalize, fmt = normalize_v1, fmt.replace("v0", "v1")
        events, bad = normalize(raw_events)
        session_id = record_session_id(obj)
        add_session(batch, source_file, record_index, session_id, fmt, events, bad, obj)
        if kind == "canonical" and events:
            for j, rating in enumerate(obj.get("ratings") or []):
                add_rating(
                    batch,
                    source_file,
                    record_index,
                    rating,
                    dump(rating),
                    "session",
                    default_session=session_id,
                    rating_index=j,
                )
    elif kind == "rating":
        add_rating(batch, source_file, record_index, obj, raw.decode("utf-8", "replace"), "feedback_file")
    elif kind == "assignment":
        add_assignment(batch, source_file, record_index, obj, raw.decode("utf-8", "replace"))
    else:
        batch.read["unknown"] += 1
        what = (
            type(obj).__name__
            if not isinstance(obj, dict)
            else "object with keys " + ", ".join(sorted(map(str, obj))[:8])
        )
        batch.quarantine(
            source_file,
            record_index,
            "unknown",
            f"not a record PULSE knows ({what}): expected a session, a rating or an assignment",
            raw.decode("utf-8", "replace"),
        )


def parse_rating(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, int | float) and math.isfinite(value) and 1 <= value <= 5:
        return float(value)
    return None


def add_rating(
    batch: Batch,
    source_file: str,
    record_index: int,
    obj: Any,
    raw_text: str,
    origin: str,
    default_session: str | None = None,
    rating_index: int | None = None,
) -> None:
    batch.read["rating"] += 1
    if not isinstance(obj, dict):
        batch.quarantine(source_file, record_index, "rating", "rating is not an object", raw_text, rating_index)
        return
    session_id = as_id(obj.get("conversation_id")) or as_id(obj.get("session_id")) or default_session
    rating = parse_rating(obj.get("rating"))
    segment = obj.get("segment_index")
    reason = None
    if session_id is None:
        reason = "rating names no session (conversation_id or session_id)"
    elif rating is None:
        reason = f"rating {dump(obj.get('rating'))} is not a number from 1 to 5"
    elif segment not in (None, "") and (not str(segment).lstrip("-").isdigit() or int(segment) < 0):
        reason = f"segment_index {dump(segment)} is not a non-negative whole number"
    if reason:
        batch.quarantine(source_file, record_index, "rating", reason, raw_text, rating_index)
        return
    batch.add(
        tables.RATINGS,
        {
            "drop_id": batch.drop_id,
            "source_file": source_file,
            "record_index": record_index,
            "item_index": rating_index or 0,
            "rating_id": as_id(obj.get("id")),
            "session_id": session_id,
            "event_id": as_id(obj.get("event_id")),
            "segment_index": int(segment) if segment not in (None, "") else None,
            "rating": rating,
            "reason": as_id(obj.get("reason")) or None,
            "created_at": as_id(obj.get("created_at")),
            "origin": origin,
        },
    )


def add_assignment(batch: Batch, source_file: str, record_index: int, obj: dict[str, Any], raw_text: str) -> None:
    batch.read["assignment"] += 1
    session_id = as_id(obj.get("session_id")) or as_id(obj.get("conversation_id"))
    experiment, variant = as_id(obj.get("experiment")), as_id(obj.get("variant"))
    missing = [
        name for name, v in (("session_id", session_id), ("experiment", experiment), ("variant", variant)) if v is None
    ]
    if missing:
        batch.quarantine(
            source_file, record_index, "assignment", f"assignment names no {' and no '.join(missing)}", raw_text
        )
        return
    batch.add(
        tables.ASSIGNMENTS,
        {
            "drop_id": batch.drop_id,
            "source_file": source_file,
            "record_index": record_index,
            "session_id": session_id,
            "experiment": experiment,
            "variant": variant,
            "user_id": as_id(obj.get("user_id")),
        },
    )
