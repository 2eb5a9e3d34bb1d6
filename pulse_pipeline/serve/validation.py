"""What a request body may hold, checked field by field; anything else is a ``Rejected`` (a 4xx with one line).

Every refusal names the field, what it got and what is expected, and carries a short ``code`` for
``/metrics``' ``rejected`` counter. The limits:

- a body is at most ``MAX_BODY`` bytes (64 KiB), said by ``Content-Length`` or counted as it streams (413);
- it is one JSON object (UTF-8, no NaN or Infinity, nesting as deep as ``orjson`` reads, 1 024 levels);
- no field the endpoint does not know (a typo such as ``star`` is refused, not ignored);
- ids are non-empty strings of at most ``MAX_ID_CHARS`` characters without a NUL (``\\u0000``), which PULSE's lake
  cannot filter on (``ingest/events.py`` quarantines such an id; the service refuses it at the door instead);
- ``stars`` is a whole number from 1 to 5 (``4.0`` is 4; ``4.5``, ``"4"``, ``true`` are refused: a star widget
  gives whole stars, so anything else is a client's bug, said at once rather than stored);
- ``segment_index`` a whole number from 0 to 2**31 - 1; ``features`` an object of at most ``MAX_FEATURES`` names,
  each a finite number (booleans are not numbers).

A JSON ``null`` for an optional field is the same as leaving it out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import orjson

MAX_BODY = 64 * 1024
MAX_ID_CHARS = 512
MAX_FEATURES = 64
MAX_SEGMENT = 2**31 - 1


class Rejected(Exception):
    """A request the service refuses: ``status`` (4xx), ``code`` (for the metrics) and the one-line ``message``."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}


@dataclass(frozen=True)
class AskRequest:
    session_id: str
    segment_index: int | None = None
    features: dict[str, float] = field(default_factory=dict)
    user_id: str | None = None


@dataclass(frozen=True)
class RatingRequest:
    session_id: str
    stars: int
    segment_index: int | None = None
    comment: str | None = None
    idempotency_key: str | None = None
    signature: str | None = None
    event_id: str | None = None  # OpenHands' body names the event it rates
    metadata: dict[str, Any] | None = None  # OpenHands' body: kept in the journal, not in the drop row
    shape: str = "pulse"  # or "openhands"


ASK_FIELDS = frozenset({"session_id", "segment_index", "features", "user_id"})
RATING_FIELDS = frozenset({"session_id", "segment_index", "stars", "comment", "idempotency_key", "signature"})
OPENHANDS_FIELDS = frozenset({"conversation_id", "event_id", "rating", "reason", "metadata", "idempotency_key"})


def _dump(value: Any) -> str:
    """A value as it was sent, shortened for a message."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # what orjson cannot write back (it read it, so rarely): Python's text of it
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_body(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or Rejected (400)."""
    if not body.strip():
        raise Rejected(400, "empty_body", "the body is empty: expected a JSON object")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        why = str(error).split(":")[0]
        raise Rejected(400, "malformed_json", f"the body is not valid JSON ({why}): expected a JSON object") from None
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
        raise Rejected(400, "not_an_object", f"the body is {kind}: expected a JSON object")
    return value


def _unknown(obj: dict[str, Any], known: frozenset[str], what: str) -> None:
    extra = sorted(set(obj) - known)
    if extra:
        names = ", ".join(_dump(k) for k in extra[:5])
        raise Rejected(
            400, "unknown_field", f"unknown field(s) {names} in {what}: the fields are {', '.join(sorted(known))}"
        )


def text(obj: dict[str, Any], name: str, required: bool = False, max_chars: int = MAX_ID_CHARS) -> str | None:
    """A string field: non-empty, at most ``max_chars`` characters, no NUL."""
    value = obj.get(name)
    if value is None:
        if required:
            raise Rejected(400, "missing_field", f"{name} is missing: expected a non-empty string")
        return None
    if not isinstance(value, str):
        raise Rejected(400, "wrong_type", f"{name} {_dump(value)} is not a string")
    if not value:
        raise Rejected(400, "wrong_type", f"{name} is empty: expected a non-empty string")
    if "\x00" in value:
        raise Rejected(400, "nul_in_text", f"{name} holds a NUL character (\\u0000), which PULSE cannot store")
    if len(value) > max_chars:
        raise Rejected(400, "too_long", f"{name} has {len(value)} characters: at most {max_chars}")
    return value


def whole_number(obj: dict[str, Any], name: str, low: int, high: int, code: str = "wrong_type") -> int | None:
    """A whole number in [low, high]: an int, or a float without a fraction (JSON ``4.0``); never a boolean."""
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Rejected(400, "wrong_type", f"{name} {_dump(value)} is not a number: expected a whole number")
    if isinstance(value, float) and not value.is_integer():
        raise Rejected(400, code, f"{name} {_dump(value)} is not a whole number from {low} to {high}")
    if not low <= value <= high:
        raise Rejected(400, code, f"{name} {_dump(value)} is outside {low} to {high}")
    return int(value)


def comment(obj: dict[str, Any], name: str) -> str | None:
    """Free text the user typed: a string (empty: no comment), no NUL; its length is bounded by the body's."""
    return None if obj.get(name) == "" else text(obj, name, max_chars=MAX_BODY)


def features(obj: dict[str, Any]) -> dict[str, float]:
    value = obj.get("features")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Rejected(400, "wrong_type", f"features {_dump(value)} is not an object of names and numbers")
    if len(value) > MAX_FEATURES:
        raise Rejected(400, "too_long", f"features has {len(value)} names: at most {MAX_FEATURES}")
    out = {}
    for name, x in value.items():
        if "\x00" in name or len(name) > 128:
            raise Rejected(400, "wrong_type", f"feature name {_dump(name)} is not a plain name of at most 128 chars")
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise Rejected(400, "wrong_type", f"feature {_dump(name)} is {_dump(x)}: expected a finite number")
        out[name] = float(x)
    return out


def ask_request(obj: dict[str, Any]) -> AskRequest:
    _unknown(obj, ASK_FIELDS, "an ask")
    return AskRequest(
        session_id=text(obj, "session_id", required=True),
        segment_index=whole_number(obj, "segment_index", 0, MAX_SEGMENT),
        features=features(obj),
        user_id=text(obj, "user_id"),
    )


def _stars(obj: dict[str, Any], name: str) -> int:
    if obj.get(name) is None:
        raise Rejected(400, "missing_field", f"{name} is missing: expected a whole number of stars from 1 to 5")
    stars = whole_number(obj, name, 1, 5, code="stars_out_of_range")
    assert stars is not None
    return stars


def _same_key(body_key: str | None, header_key: str | None) -> str | None:
    if header_key is not None:
        if "\x00" in header_key or not header_key or len(header_key) > MAX_ID_CHARS:
            raise Rejected(400, "wrong_type", f"the Idempotency-Key header is not 1 to {MAX_ID_CHARS} characters")
        if body_key is not None and body_key != header_key:
            raise Rejected(400, "key_mismatch", "idempotency_key and the Idempotency-Key header differ: send one")
    return body_key if body_key is not None else header_key


def rating_request(obj: dict[str, Any], header_key: str | None = None) -> RatingRequest:
    """PULSE's body, or OpenHands' feedback body (recognized by its ``conversation_id``) unchanged."""
    if "conversation_id" in obj:
        _unknown(obj, OPENHANDS_FIELDS, "an OpenHands feedback body")
        event = obj.get("event_id")
        if isinstance(event, int) and not isinstance(event, bool) and event >= 0:
            event_id = str(event)
        else:
            event_id = text(obj, "event_id")
        metadata = obj.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise Rejected(400, "wrong_type", f"metadata {_dump(metadata)} is not an object")
        return RatingRequest(
            session_id=text(obj, "conversation_id", required=True),
            stars=_stars(obj, "rating"),
            comment=comment(obj, "reason"),
            idempotency_key=_same_key(text(obj, "idempotency_key"), header_key),
            event_id=event_id,
            metadata=metadata,
            shape="openhands",
        )
    _unknown(obj, RATING_FIELDS, "a rating")
    return RatingRequest(
        session_id=text(obj, "session_id", required=True),
        stars=_stars(obj, "stars"),
        segment_index=whole_number(obj, "segment_index", 0, MAX_SEGMENT),
        comment=comment(obj, "comment"),
        idempotency_key=_same_key(text(obj, "idempotency_key"), header_key),
        signature=text(obj, "signature"),
    )
