"""The canonical event model every adapter emits (``adapter.py`` builds the events from what an adapter parses).

An event is an action, an observation, a state change, or ``other`` (a shape we do not know, kept as is).
``name`` uses OpenHands V0 vocabulary (``message``, ``run``, ``run_ipython``, ``edit``, ``finish``, ...), so one
set of rules serves every source; a name we do not know becomes ``other`` and the original goes to
``original_name``. ``agent_state`` is set on state changes only, in V0 vocabulary (V1 states are mapped).

What the canonical model does not hold stays in each event's original JSON (``raw_json``), which
``features.event_features`` reads where it needs more: V0 ``llm_metrics``, V1 ``stats`` updates and V1
``critic_result`` scores. A session's LLM totals from a format that records them nowhere in its events go into the
session's metadata under ``llm_usage`` (``llm_usage`` below).

How every input is read from JSON and written back lives here too, so hostile input is handled once for every
format: ``parse_json`` (a byte order mark, integers beyond 64 bits, NaN and 1e400, nesting), ``dump`` (any depth,
any integer), ``read_id`` (what an id can be) and ``as_int`` (what fits an INTEGER column).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import orjson


class Event(NamedTuple):
    """One event in the canonical model; its fields are named as raw.events' columns (``event_columns``)."""

    event_id: str  # the source's id, else ``#`` + its position among the session's readable events
    timestamp: str | None
    source: str
    kind: str  # action | observation | state | other
    name: str
    original_name: str | None
    text: str | None
    command: str | None
    exit_code: int | None
    agent_state: str | None
    cause: str | None
    wait_for_response: bool | None
    raw_json: str


class BadEvent(NamedTuple):
    """An event that could not be read at all (not a JSON object); it goes to quarantine."""

    position: int
    reason: str
    raw_json: str


ACTION_NAMES = frozenset(
    [
        "message",
        "system",
        "start",
        "read",
        "write",
        "edit",
        "run",
        "run_ipython",
        "browse",
        "browse_interactive",
        "call_tool_mcp",
        "delegate",
        "think",
        "finish",
        "reject",
        "null",
        "pause",
        "resume",
        "stop",
        "change_agent_state",
        "push",
        "send_pr",
        "recall",
        "condensation",
        "condensation_request",
        "task_tracking",
        "loop_recovery",
    ]
)
OBSERVATION_NAMES = frozenset(
    [
        "run",
        "run_ipython",
        "read",
        "write",
        "edit",
        "browse",
        "error",
        "null",
        "success",
        "user_rejected",
        "delegate",
        "think",
        "recall",
        "condensation",
        "mcp",
        "task_tracking",
        "loop_recovery",
        "download",
        "agent_state_changed",
    ]
)
AGENT_STATES = frozenset(
    [
        "loading",
        "init",
        "running",
        "awaiting_user_input",
        "paused",
        "stopped",
        "finished",
        "rejected",
        "error",
        "awaiting_user_confirmation",
        "user_confirmed",
        "user_rejected",
        "rate_limited",
    ]
)
# A work segment closes at the first of these (field notes §1). V1's ``stuck`` is kept as its own state.
CLOSING_STATES = frozenset(
    ["awaiting_user_input", "finished", "stopped", "paused", "error", "rejected", "rate_limited", "stuck"]
)


def event_columns(events: list[Event]) -> dict[str, tuple[Any, ...]]:
    """The events column by column, ``{field: values}``: an ``Event``'s fields are named as raw.events' columns."""
    if not events:
        return {name: () for name in Event._fields}
    return dict(zip(Event._fields, zip(*events, strict=True), strict=True))


def as_text(value: Any) -> str | None:
    """Text of a content field: strings as they are, OpenAI-style content part lists joined, else JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [_part_text(p) for p in value]
        return "\n".join(p for p in parts if p)
    return dump(value)


def _part_text(part: Any) -> str:
    """One part of a content list: its ``text`` (an image or tool part has none), a bare string, else JSON."""
    if isinstance(part, dict):
        text = part.get("text")
        return "" if text is None else text if isinstance(text, str) else dump(text)
    return part if isinstance(part, str) else dump(part)


INT32 = 2**31  # the INTEGER columns (exit_code, segment_index) hold -INT32 .. INT32 - 1
_WHOLE = re.compile(r"[+-]?[0-9]{1,10}")


def as_int(value: Any) -> int | None:
    """A whole number for an INTEGER column (an exit code, a token count), or None.

    A JSON integer, a float with no fraction (``1.0``) or a string of ASCII digits counts; a boolean does not
    (``true`` is no exit code). A number beyond 32 bits (an exit code of 2**70) is None: the column cannot hold it,
    and the event's ``raw_json`` keeps it with every digit."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str):
        value = value.strip()
        value = int(value) if _WHOLE.fullmatch(value) else None
    if isinstance(value, int) and -INT32 <= value < INT32:
        return value
    return None


class NotAnId(ValueError):
    """An id field holds a JSON value no id can be read from; the message is the quarantine reason."""


NUL = "\x00"
NUL_IN_ID = "PULSE's lake cannot filter on such an id; remove the NUL from the id at its source"
"""Why an id holding a NUL character is quarantined, not stored (issue 34).

The fault is in DuckLake (the ``ducklake`` extension of DuckDB 1.5.5), not in PULSE's SQL, where every value is a
parameter or an Arrow column: to find a table's data files DuckLake writes the constants of a filter on the table,
a comparison's or the minimum and maximum a join pushes down, into the SQL text it sends its catalog, and a NUL ends
that text. Measured: ``SELECT count(*) FROM t WHERE session_id = ?`` with the parameter ``'zz\\x00nul'`` on a lake
table fails with ``Parser Error: Failed to get data file list from DuckLake: unterminated quoted string at or near
"'zz))))"``, and so does a semi join of ``t`` with a temporary table holding that id. Every refresh of a
per-session table joins on ``session_id`` (``incremental.py``), so one such id, once stored, made every later run
of the home fail; quotes, backslashes, line breaks, other control characters and 10 000-character ids pass the
same queries (``tests/test_hostile_ids.py``). Every id a record names goes through ``read_id``, so the record (or
event) is quarantined with this reason and the rest of the drop loads, in either storage, so that a home behaves
the same whichever it uses. A home that stored such an id with an earlier PULSE is repaired by removing its drop:
``pulse drop rm NAME`` (``drops.py``)."""

EXACT_FLOAT = 2**53  # every whole number up to here is exactly a double, so ``12345.0`` has the digits of 12345


def read_id(value: Any, what: str) -> str | None:
    """An id (``what`` names the field, for the reason) as text; None when absent (null or ``""``).

    - A string is the id as it is.
    - A JSON integer keeps every digit, however long (``parse_json`` reads integers beyond 64 bits exactly).
    - A float with no fraction up to 2**53 is that whole number (``12345.0`` is ``"12345"``): pandas writes the
      integer ids of a column with gaps that way.
    - Anything else raises ``NotAnId`` with the reason, and the record or event holding it is quarantined: a
      boolean, an object or an array names nothing, a fraction (``1.5``) is no id anyone assigns, and a float
      beyond 2**53 (``1.2345678901234568e+22``) lost its digits before PULSE saw it, so two ids could collide.
    - A string holding a NUL character (``\\u0000``) is no id either (``NUL_IN_ID``): quotes, backslashes, line
      breaks, other control characters and any length are kept as they are.
    """
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if NUL in value:
            raise NotAnId(f"{what} {dump(value)[:80]} holds a NUL character (\\u0000): {NUL_IN_ID}")
        return value
    if isinstance(value, bool):
        raise NotAnId(f"{what} is a boolean ({dump(value)}): expected a string or a whole number")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) <= EXACT_FLOAT:
        return str(int(value))
    if isinstance(value, float):
        kind = "too large to have kept its digits" if value.is_integer() else "a fraction"
        raise NotAnId(f"{what} is the number {dump(value)}, {kind}: expected a string or a whole number")
    kind = {dict: "an object", list: "an array"}.get(type(value), type(value).__name__)
    raise NotAnId(f"{what} is {kind}: expected a string or a whole number")


def as_id(value: Any) -> str | None:
    """``read_id``, with None for a value that is no id: for fields where no id is as good as a wrong one."""
    try:
        return read_id(value, "id")
    except NotAnId:
        return None


# --- JSON in and out -----------------------------------------------------------------------------------------

BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark, which Windows editors and PowerShell put before the text
# every digit becomes 0, a minus sign stays, anything else is a space: then ``in`` finds a run of digits, ten
# times faster than a regular expression would (it is looked for in every document read)
_DIGIT_RUNS = bytes(ord("0") if ord("0") <= i <= ord("9") else i if i == ord("-") else ord(" ") for i in range(256))
_NON_STANDARD = re.compile(rb"NaN|Infinity|[0-9]{20}|[eE][+-]?[0-9]{3}")  # what only Python's json may read


def parse_json(raw: bytes) -> Any:
    """One JSON document (a whole file, a line, an event file), read as a demanding operator expects.

    - A leading UTF-8 byte order mark is skipped.
    - Integers keep every digit: orjson reads integers beyond 64 bits as doubles (an id
      12345678901234567890123 became ``1.2345678901234568e+22``), so text holding such a number (20 digits, or
      19 after a minus sign) is read again by Python's ``json``, whose integers are exact.
    - ``NaN``, ``Infinity`` and ``-Infinity`` (which Python's ``json.dumps`` writes) and numbers beyond a double
      (``1e400``) are kept as the text they were (the string ``"1e400"``): no number column can hold them, and a
      session with a NaN cost somewhere is still a session. orjson refuses them, so such text is read again by
      Python's ``json``.
    - Anything else orjson refuses raises ``orjson.JSONDecodeError`` (the caller quarantines the text with the
      message): malformed or cut-off JSON, text that is not UTF-8, a lone UTF-16 surrogate (``"\\ud800"``, no
      character) and nesting deeper than ``MAX_DEPTH`` (1 024) levels, orjson's limit.
    """
    raw = raw.removeprefix(BOM)
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        # a JSON-lines file tried as one document fails with "unexpected content after document": not worth a look
        if "after document" in error.msg or not _NON_STANDARD.search(raw):
            raise
        exact = _parse_exactly(raw)
        if exact is _UNREAD:
            raise
        return exact
    if _has_long_integer(raw):
        exact = _parse_exactly(raw)
        return value if exact is _UNREAD else exact
    return value


def _has_long_integer(raw: bytes) -> bool:
    """Whether ``raw`` holds 20 digits in a row, or 19 after a minus sign: an integer orjson reads as a double."""
    runs = raw.translate(_DIGIT_RUNS)
    return b"0" * 20 in runs or b"-" + b"0" * 19 in runs


def lines_with_long_integers(raw: bytes) -> set[int]:
    """The lines of ``raw`` (0-based, as ``raw.split(b"\\n")`` counts them) that hold what ``parse_json`` reads
    again with Python's ``json`` (``_has_long_integer``): a JSON-lines file is looked at once, and only those lines
    need more than orjson. (Digits inside strings count too, such as a hexadecimal trace id's: a line read again
    gives the same value, only slower.)"""
    runs = raw.translate(_DIGIT_RUNS)
    hits = sorted(at for needle in (b"0" * 20, b"-" + b"0" * 19) for at in _finds(runs, needle, raw))
    lines: set[int] = set()
    line, counted = 0, 0
    for at in hits:
        line += raw.count(b"\n", counted, at)
        counted = at
        lines.add(line)
    return lines


def _finds(runs: bytes, needle: bytes, raw: bytes) -> Iterator[int]:
    """Where ``needle`` starts in ``runs`` (``raw`` translated, its line breaks made spaces), at most once a line."""
    at = runs.find(needle)
    while at != -1:
        yield at
        end = raw.find(b"\n", at)
        if end == -1:
            return
        at = runs.find(needle, end)


_UNREAD = object()
MAX_DEPTH = 1024  # orjson reads JSON nested this deep, no deeper; Python's json is held to the same limit


def _parse_exactly(raw: bytes) -> Any:
    """``raw`` read by Python's ``json`` (exact integers; non-finite numbers as their text), or ``_UNREAD`` when
    it cannot read it either, nests deeper than ``MAX_DEPTH``, or holds text no column can store (a lone
    surrogate).

    Python's ``json`` recurses once per level, against the interpreter's recursion limit, so how deep it could read
    would depend on how deep the caller's stack is (a worker process, a Dagster run, a test). It runs with room for
    ``MAX_DEPTH`` levels more than the caller has, and deeper text is refused here, so the same text is always read
    or refused alike."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + MAX_DEPTH + 100)
    try:
        value = json.loads(raw.decode("utf-8"), parse_float=_finite_or_text, parse_constant=str)
        dump(value).encode("utf-8")
    except (ValueError, RecursionError, TypeError, UnicodeError):
        return _UNREAD
    finally:
        sys.setrecursionlimit(limit)
    return _UNREAD if _deeper_than(value, MAX_DEPTH) else value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels deep in ``value`` (walked without recursing)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _finite_or_text(text: str) -> float | str:
    number = float(text)
    return number if math.isfinite(number) else text


def dump(value: Any, sort_keys: bool = False) -> str:
    """JSON text of a parsed value, compact; keys sorted when asked (``records.content_id``).

    orjson writes it, except what orjson refuses: nesting deeper than 254 levels (orjson's writing limit, while it
    reads 1 024) and integers beyond 64 bits. Those are written by ``_dump_any``, so a record that was read can
    always be written back."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None).decode()
    except TypeError:
        return _dump_any(value, sort_keys)


class _Token(str):
    """Text ``_dump_any`` writes as it is (a bracket, a comma, a key), told apart from the string values."""


def _dump_any(value: Any, sort_keys: bool) -> str:
    """JSON text of a parsed value of any depth and any integer, as orjson would write it.

    It keeps its own stack of what is left to write, so no depth makes it recurse."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Token):
            out.append(item)
        elif isinstance(item, dict):
            keys = sorted(item) if sort_keys else list(item)
            stack.append(_Token("}"))
            for i in range(len(keys) - 1, -1, -1):  # pushed last to first, so written first to last
                stack.append(item[keys[i]])
                stack.append(_Token(("," if i else "") + orjson.dumps(keys[i]).decode() + ":"))
            stack.append(_Token("{"))
        elif isinstance(item, list):
            stack.append(_Token("]"))
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                if i:
                    stack.append(_Token(","))
            stack.append(_Token("["))
        elif isinstance(item, int) and not isinstance(item, bool):
            out.append(str(item))
        else:
            out.append(orjson.dumps(item).decode())  # a string, a float, true, false, null
    return "".join(out)


LLM_USAGE = "llm_usage"


def llm_usage(cost_usd: float | None, prompt_tokens: int | None, completion_tokens: int | None) -> dict[str, Any]:
    """A session's LLM totals as session metadata, ``{"llm_usage": {"cost_usd", "prompt_tokens",
    "completion_tokens"}}`` (None where unknown), for formats whose events carry them in neither V0 ``llm_metrics``
    nor V1 ``stats`` (an SDK ``base_state.json``, Claude Code, Codex). Merged into the record an adapter hands to
    ``adapter.add_session``, it lands in ``raw.sessions.metadata_json``; ``features.event_features`` reads it when
    the events have none."""
    return {LLM_USAGE: {"cost_usd": cost_usd, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}
