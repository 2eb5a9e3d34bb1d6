"""Turning one parsed record (a session, a rating row, an assignment row) into canonical rows.

Which kind of record an object is, is read from its keys, never from its file's name:

========================  ==========================================================
``trajectory`` list        OpenHands feedback-dataset record (``{feedback, trajectory, version, ...}``), or, with
                           none of ``feedback``, ``polarity``, ``version``, ``permissions``, OpenHands' trajectory
                           download (``{"trajectory": [...]}``, the "download trajectory" button)
``history`` list           OpenHands evaluation output line (``{instance_id, instruction, history, ...}``)
``messages`` list          chat-completions messages, the first with a ``role``: a SWE-Gym OpenHands trajectory
                           (``{instance_id, run_id, resolved, messages, tools, test_result}``, ``chat_messages.py``)
``events`` list            PULSE canonical session (see ``canonical.py``)
``rating``                 a star rating row (OpenHands ``conversation_feedback`` shape)
``variant``/``experiment`` an assignment row
``observations`` list      a Langfuse trace with its details (``langfuse.py``; a drop's Langfuse files are read
                           together by ``langfuse_files.py``, so a session's traces in several files make one)
an event of a known format a bare event (``EVENT_ADAPTERS``): a file of them is one session
========================  ==========================================================

**A session's id**, first that applies:

1. *Content*: the record's ``session_id``, ``conversation_id``, ``instance_id``, ``sid`` or ``id``; for an SDK
   conversation folder, the ``id`` in its ``base_state.json``; for a chat-message row with a ``run_id`` (SWE-Gym
   samples each task in several runs), ``<instance_id>@<run_id>``; an id the events themselves carry (an adapter's
   ``session_id()``, e.g. Claude Code's ``sessionId``; ``adapter.add_session`` applies it). Content wins when the
   location says otherwise (for the record and ``base_state.json`` ids, the location's id is then kept in the
   session's metadata as ``id_from_location``, so a rating keyed by the file name can be traced): the content is
   what the agent itself called the session, a file name is whatever the person who saved it chose.
2. *Location*, when the content names no session and the file or folder holds exactly one session (a JSON
   document that is one record, one event array or one event, a one-line JSON-lines file being such a document; a
   JSON-lines event stream; a session folder):
   a session folder's name (an SDK conversation folder, an app-server event folder, the ``<sid>`` of
   ``<sid>/events/<n>.json``); else, for a file under ``sessions/<id>/`` or ``conversations/<id>/``, that
   ``<id>``; else the file's stem with a leading ``trajectory-`` removed (``trajectory-<id>.json`` and
   ``<id>.json`` give ``<id>``). When two units of one drop would get the same location id (``a/x.json`` and
   ``b/trajectory-x.json``), each takes its path within the drop instead (``a/x.json``, ``b/trajectory-x.json``):
   different files are different sessions, and no file silently replaces another. ``drop.drop_units`` applies it.
3. *Content hash*, when nothing names the session (id-less records of a file of many records: JSON lines or a
   JSON array of records): ``h-`` + the first 16 hex digits of the SHA-1 of the record's JSON (keys sorted),
   stable across re-deliveries: the same record on its own line, in an array, pretty-printed or with CRLF line
   ends keeps its id.

**What an id can be** (``events.read_id``, for every id read here: a session's, a rating's and the event it names,
a user's, an experiment's and a variant's): a string as it is, or a JSON integer with every digit (``5`` is
``"5"``, ``12345678901234567890123`` keeps its 23 digits), or a float with no fraction up to 2**53 (``12345.0``
is ``"12345"``, as pandas writes integer ids). A boolean, an object, an array, a fraction or a float too large to
have kept its digits names nothing: the record is quarantined with the reason (``session id is a boolean (true):
expected a string or a whole number``), never stored as Python's text of it (``True``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from .. import tables
from ..label_scales import STARS
from .adapter import Adapter, add_session
from .batch import Batch
from .canonical import Canonical
from .chat_messages import ChatMessages, is_chat_message
from .claude_code import ClaudeCode
from .codex import Codex
from .events import INT32, NotAnId, as_int, as_text, dump, read_id
from .gemini_cli import PROMPT_LOG, GeminiCli, is_prompt_log_entry
from .langfuse import is_trace_with_details, read_trace_record
from .openhands_v0 import OpenHandsV0
from .openhands_v1 import OpenHandsV1
from .otlp import OTLP_AMONG_RECORDS, is_otlp

# The formats a bare event can be in, tried in this order (a V1 ActionEvent has an ``action`` key, as V0 events do).
EVENT_ADAPTERS: tuple[type[Adapter], ...] = (OpenHandsV1, OpenHandsV0, ClaudeCode, Codex, GeminiCli)

_ID_KEYS = ("session_id", "conversation_id", "instance_id", "sid", "id")
_FEEDBACK_KEYS = ("feedback", "polarity", "version", "permissions")  # a feedback-dataset record, not a download
_SESSION_FOLDERS = ("sessions", "conversations")  # sessions/<id>/... names the session <id>


def adapter_for(raw_events: Sequence[Any]) -> Adapter:
    """A new adapter for one session's events, chosen by their first JSON object; OpenHands V0 when no adapter
    claims it (V0 has the loosest shapes: old exports without ``id``, ``source`` or ``timestamp``)."""
    first = next((e for e in raw_events if isinstance(e, dict)), None)
    for adapter in EVENT_ADAPTERS:
        if adapter.recognizes(first):
            return adapter()
    return OpenHandsV0()


def classify(obj: Any) -> str | None:
    """The record type of a parsed JSON value, or None when it is no record PULSE knows."""
    if not isinstance(obj, dict):
        return None
    if is_otlp(obj):
        return "otlp"  # read by files.py as a whole file (otel.py); never one record among others
    if isinstance(obj.get("trajectory"), list):
        return "feedback" if any(k in obj for k in _FEEDBACK_KEYS) else "download"
    if isinstance(obj.get("history"), list):
        return "eval"
    if isinstance(obj.get("events"), list):
        return "canonical"
    if isinstance(obj.get("messages"), list) and is_chat_message(next(iter(obj["messages"]), None)):
        return "chat"
    if "rating" in obj or "ask_probability" in obj:
        return "rating"
    if "variant" in obj or "experiment" in obj:
        return "assignment"
    if is_prompt_log_entry(obj):  # Gemini CLI's logs.json: no session (``_why_unknown``), though Claude Code's shape
        return None
    if any(adapter.recognizes(obj) for adapter in EVENT_ADAPTERS):
        return "event"
    if is_trace_with_details(obj):
        return "langfuse"
    return None


def content_id(value: Any) -> str:
    """``h-`` + 16 hex digits of the SHA-1 of the parsed value with sorted keys (formatting does not matter)."""
    return "h-" + hashlib.sha1(dump(value, sort_keys=True).encode()).hexdigest()[:16]


def content_session_id(obj: dict[str, Any]) -> str | None:
    """The id a record's own keys give it (the first of ``_ID_KEYS`` present), or None; ``NotAnId`` when that key
    holds no id."""
    for key in _ID_KEYS:
        value = read_id(obj.get(key), f"session id ({key})")
        if value is not None:
            return value
    return None


def record_session_id(obj: dict[str, Any], name_id: str | None = None) -> str:
    """Content, else the location's ``name_id`` (None when the record shares its file), else the content hash;
    ``NotAnId`` when the content's id is no id. A chat-message row's ``run_id`` is added to its id
    (``<instance_id>@<run_id>``): one SWE-Gym task is sampled in several runs, each a session of its own."""
    session_id = content_session_id(obj)
    if session_id is not None and classify(obj) == "chat":
        run_id = read_id(obj.get("run_id"), "run id")
        return session_id if run_id is None else f"{session_id}@{run_id}"
    return session_id or name_id or content_id(obj)


def file_name_id(relative_path: str) -> str:
    """The session id a file's path within its drop gives: ``<id>`` of ``sessions/<id>/...`` or
    ``conversations/<id>/...``, else the stem without a leading ``trajectory-``."""
    path = PurePosixPath(relative_path)
    folders = path.parts[:-1]
    for i in range(len(folders) - 2, -1, -1):
        if folders[i] in _SESSION_FOLDERS:
            return folders[i + 1]
    stem = path.stem
    return stem.removeprefix("trajectory-") or stem


def with_location(info: dict[str, Any], session_id: str, name_id: str | None) -> dict[str, Any]:
    """The session's record, plus ``id_from_location`` when its location names it otherwise than its content."""
    return info if name_id is None or name_id == session_id else {**info, "id_from_location": name_id}


def add_record(
    batch: Batch, source_file: str, record_index: int, obj: Any, raw: bytes, name_id: str | None = None
) -> None:
    """Route one top-level record to the rows it becomes, or to quarantine with the reason.

    ``name_id`` is the id the record's location gives, passed only when the record is alone in its file."""
    kind = classify(obj)
    if kind in ("feedback", "download", "eval", "canonical", "chat"):
        try:
            session_id = record_session_id(obj, name_id)
        except NotAnId as error:
            batch.read["session"] += 1
            batch.quarantine(source_file, record_index, "session", str(error), raw.decode("utf-8", "replace"))
            return
    if kind in ("feedback", "download", "eval"):
        raw_events = obj["history" if kind == "eval" else "trajectory"]
        adapter = adapter_for(raw_events)
        source_format = f"{adapter.format}_{kind}"  # e.g. openhands_v0_feedback, openhands_v0_download
        info = with_location(obj, session_id, name_id)
        task = obj.get("instruction") if kind == "eval" else None
        add_session(batch, source_file, record_index, session_id, source_format, adapter, raw_events, info, task=task)
    elif kind == "chat":
        info = with_location(obj, session_id, name_id)
        adapter = ChatMessages()
        add_session(batch, source_file, record_index, session_id, adapter.format, adapter, obj["messages"], info)
    elif kind == "canonical":
        adapter = Canonical()
        info = with_location(obj, session_id, name_id)
        if add_session(batch, source_file, record_index, session_id, adapter.format, adapter, obj["events"], info):
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
    elif kind == "otlp":
        batch.read["unknown"] += 1
        batch.quarantine(source_file, record_index, "unknown", OTLP_AMONG_RECORDS, raw.decode("utf-8", "replace"))
    elif kind == "langfuse":  # a trace with its details met outside a drop's Langfuse files (langfuse_files.py)
        read_trace_record(batch, source_file, record_index, obj)
    else:
        batch.read["unknown"] += 1
        batch.quarantine(source_file, record_index, "unknown", _why_unknown(obj), raw.decode("utf-8", "replace"))


def _why_unknown(obj: Any) -> str:
    if isinstance(obj, dict) and "trajectory" in obj and obj.get("error"):
        # the server's answer when a download failed: {"trajectory": null, "error": "Error getting trajectory: ..."}
        return f"a trajectory download that failed ({as_text(obj['error'])}): download the conversation again"
    if is_prompt_log_entry(obj):
        return PROMPT_LOG
    what = type(obj).__name__
    if isinstance(obj, dict):
        what = "object with keys " + ", ".join(sorted(map(str, obj))[:8])
    return (
        f"not a record PULSE knows ({what}): expected a session (a history, trajectory or events list), a rating"
        " (rating, with conversation_id or session_id) or an assignment (session_id, experiment, variant); or a file"
        " of a format in docs/formats.md (agents' logs, Langfuse traces, OTLP/JSON)"
    )


def _number(value: Any) -> float | None:
    """A finite number, or the text of one; None for anything else (booleans included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def parse_rating(value: Any) -> float | None:
    """A star rating from 1 to 5, else None."""
    x = _number(value)
    return x if x is not None and 1 <= x <= 5 else None


def parse_probability(value: Any) -> float | None:
    """An ask probability in (0, 1], else None."""
    x = _number(value)
    return x if x is not None and 0 < x <= 1 else None


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
    """One star rating (a ratings file's row or line, or an item of a canonical session's ``ratings``), or its
    quarantine with the reason: no session, a rating that is not 1 to 5, a ``segment_index`` that is no whole
    number from 0 to 2**31 - 1, or an id that is no id (``events.read_id``).

    A row with an ``ask_probability`` is an ask (the widget was shown with that probability) and goes to
    ``raw.asks``: with its rating when the user answered, with none (no ``rating`` key, null or empty) when they did
    not. Its probability must be a number in (0, 1]; an unanswered ask needs a session like any rating."""
    batch.read["rating"] += 1
    if not isinstance(obj, dict):
        batch.quarantine(source_file, record_index, "rating", "rating is not an object", raw_text, rating_index)
        return
    try:
        session_id = (
            read_id(obj.get("conversation_id"), "conversation_id")
            or read_id(obj.get("session_id"), "session_id")
            or default_session
        )
        rating_id, event_id = read_id(obj.get("id"), "id"), read_id(obj.get("event_id"), "event_id")
    except NotAnId as error:
        batch.quarantine(source_file, record_index, "rating", f"rating's {error}", raw_text, rating_index)
        return
    rating = parse_rating(obj.get("rating"))
    logged = obj.get("ask_probability")
    is_ask = logged not in (None, "")
    probability = parse_probability(logged) if is_ask else None
    answered = obj.get("rating") not in (None, "")
    segment = obj.get("segment_index")
    segment_index = as_int(segment)
    reason = None
    if session_id is None:
        what = "rating" if answered or not is_ask else "ask"
        keys = ", ".join(sorted(map(str, obj))[:8])
        reason = f"{what} names no session: expected a conversation_id or session_id (its fields: {keys})"
    elif is_ask and probability is None:
        reason = f"ask_probability {dump(logged)} is not a number in (0, 1]"
    elif rating is None and (answered or not is_ask):
        reason = f"rating {dump(obj.get('rating'))} is not a star rating: expected a number from 1 to 5"
    elif segment not in (None, "") and (segment_index is None or segment_index < 0):
        reason = f"segment_index {dump(segment)} is not a whole number from 0 to {INT32 - 1}"
    if reason:
        batch.quarantine(source_file, record_index, "rating", reason, raw_text, rating_index)
        return
    row = {
        "drop_id": batch.drop_id,
        "source_file": source_file,
        "record_index": record_index,
        "item_index": rating_index or 0,
        "rating_id": rating_id,
        "session_id": session_id,
        "event_id": event_id,
        "segment_index": segment_index,
        "rating": rating,
        "reason": as_text(obj.get("reason")) or None,
        "created_at": as_text(obj.get("created_at")),
        "origin": origin,
    }
    if is_ask:
        batch.add(tables.ASKS, {**row, "ask_probability": probability})
    else:
        batch.add(tables.RATINGS, {**row, "scale": STARS, "score_json": None})


def add_assignment(batch: Batch, source_file: str, record_index: int, obj: dict[str, Any], raw_text: str) -> None:
    """One assignment row, or its quarantine: it names no session, experiment or variant, or one of its ids is no
    id (``events.read_id``)."""
    batch.read["assignment"] += 1
    try:
        session_id = read_id(obj.get("session_id"), "session_id") or read_id(
            obj.get("conversation_id"), "conversation_id"
        )
        experiment, variant = read_id(obj.get("experiment"), "experiment"), read_id(obj.get("variant"), "variant")
        user_id = read_id(obj.get("user_id"), "user_id")
    except NotAnId as error:
        batch.quarantine(source_file, record_index, "assignment", f"assignment's {error}", raw_text)
        return
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
            "user_id": user_id,
        },
    )
