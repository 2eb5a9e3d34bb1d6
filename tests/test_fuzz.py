"""Fuzzing ingest (issue 12): every adapter is fed valid records turned hostile, and a drop never crashes.

Each example starts from valid input of one format (a fixture, or rows built here), mutates it and writes it as a
drop of two files: the mutated file and ``good.jsonl``, one valid canonical session. The drop is loaded through the
real path (``load.load_drop``: shape detection, parsing, quarantine, row building, the DuckDB insert), and:

- nothing raises;
- the drop reconciles: records read = accepted + quarantined, and events alike (``load.reconcile_drop``);
- the good neighbour is accepted whole (session ``good`` with its 2 events): a hostile file costs only itself.

Mutations, applied to the parsed JSON of a record (1 to 3 of them): a node replaced by a hostile value (another
JSON type, an integer beyond 64 bits, a fraction, a huge string, a deep nest, NaN, 1e400, an object or array id),
a key dropped, a known key added with such a value; and to the bytes of the file: a UTF-8 byte order mark, cut-off
text, invalid UTF-8, a stray byte, random bytes. CSV rows get hostile cells instead (a cell beyond the csv module's
limit, a carriage return, NUL, digits that are not ASCII).

Seeded and bounded: ``derandomize=True`` (the same examples on every run, no database) and few examples per
format, so the module runs in well under a minute. A crash found here is fixed and kept as a named regression test
in ``test_hostile_records.py``.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulse_pipeline.ingest.load import load_drop, reconcile_drop
from pulse_pipeline.warehouse import Warehouse

from .helpers import FIXTURES

EXAMPLES = 80
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)

GOOD = (
    json.dumps(
        {
            "session_id": "good",
            "events": [
                {"id": "1", "source": "user", "type": "message", "text": "go"},
                {"id": "2", "source": "agent", "type": "message", "text": "done", "wait_for_response": True},
            ],
        }
    )
    + "\n"
)

# --- hostile values --------------------------------------------------------------------------------------------


class Raw(str):
    """JSON text written into the file as it is (what no Python value serializes to: NaN, 1e400, deep nests)."""


def nest(depth: int) -> Raw:
    return Raw("[" * depth + "1" + "]" * depth)


RAW_LITERALS = st.sampled_from(
    ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1E+99999", "1e-400", "-0", "1" * 30, "9" * 5000]
).map(Raw)
DEEP = st.sampled_from([200, 253, 254, 255, 600, 1020, 1024, 1025, 3000]).map(nest)
BIG_INTS = st.sampled_from([2**31, -(2**31) - 1, 2**63, 2**64, -(2**63) - 1, 2**70, -(2**70), 10**22 + 3])
ODD_TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", " ", "²", "٣", "-", "+7", " 42 ", "1.5", "nan", "\x00", "\ud7ff", "\r", "a\r\nb", "\u2028"]),
    st.integers(100_000, 400_000).map(lambda n: "x" * n),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    BIG_INTS,
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1.5, 12345.0, 1e22, -0.0, 2.0**53, 2.0**53 + 2]),
    ODD_TEXT,
)
SMALL_JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
HOSTILE = st.one_of(SMALL_JSON, RAW_LITERALS, DEEP, st.just({}), st.just([]))

# keys the adapters read, so an added key reaches their code paths
KNOWN_KEYS = [
    "id", "session_id", "conversation_id", "instance_id", "sid", "user_id", "experiment", "variant", "metadata",
    "events", "ratings", "trajectory", "history", "feedback", "rating", "segment_index", "event_id", "reason",
    "created_at", "timestamp", "source", "type", "kind", "state", "of", "exit_code", "text", "command", "cause",
    "wait_for_response", "action", "observation", "args", "extras", "content", "message", "llm_message", "value",
    "key", "tool_name", "sessionId", "uuid", "isSidechain", "agentId", "payload", "call_id", "output", "role",
    "usage", "costUSD", "model", "info", "error", "metadata",
]  # fmt: skip


def _paths(tree: Any) -> list[tuple[Any, ...]]:
    """Every node of a parsed JSON value, as the keys and indexes leading to it (the root is ``()``)."""
    paths: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), tree)]
    while stack and len(paths) < 2_000:
        path, node = stack.pop()
        paths.append(path)
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        stack.extend((path + (key,), child) for key, child in children)
    return sorted(paths, key=lambda p: (len(p), [str(k) for k in p]))


def _replace(tree: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return tree


def _delete(tree: Any, path: tuple[Any, ...]) -> Any:
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return tree


@st.composite
def mutated(draw: st.DrawFn, tree: Any) -> Any:
    """``tree`` (a parsed record) after 1 to 3 mutations."""
    tree = copy.deepcopy(tree)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(tree)))
        op = draw(st.sampled_from(["replace", "delete", "add"]))
        if op == "delete" and path:
            tree = _delete(tree, path)
            continue
        node = tree
        for key in path:
            node = node[key]
        value = copy.deepcopy(draw(HOSTILE))  # never a value Hypothesis hands out again, since later steps edit it
        if op == "add" and isinstance(node, dict):
            node[draw(st.sampled_from(KNOWN_KEYS))] = value
        else:
            tree = _replace(tree, path, value)
    return tree


def serialize(tree: Any) -> bytes:
    """JSON bytes of a mutated tree, with each ``Raw`` written as the text it holds."""
    raws: list[str] = []

    def mark(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value)
            return f"\x00raw{len(raws) - 1}\x00"
        if isinstance(value, dict):
            return {k: mark(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mark(v) for v in value]
        return value

    text = json.dumps(mark(tree), ensure_ascii=False)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00raw{i}\x00"), raw)
    return text.encode("utf-8", "surrogatepass")


@st.composite
def byte_damage(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` as it is (most of the time), or with damage no JSON value can carry."""
    kind = draw(st.sampled_from(["none", "none", "none", "bom", "cut", "invalid_utf8", "stray_byte", "random"]))
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if kind == "random":
        return draw(st.binary(max_size=200))
    at = draw(st.integers(0, len(data)))
    if kind == "cut":
        return data[:at]
    if kind == "invalid_utf8":
        return (
            data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])) + data[at:]
        )
    if kind == "stray_byte":
        return data[:at] + draw(st.binary(min_size=1, max_size=3)) + data[at:]
    return data


# --- seeds ---------------------------------------------------------------------------------------------------


def _lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _csv_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


@st.composite
def jsonl_file(draw: st.DrawFn, lines: list[Any]) -> bytes:
    """A JSON-lines file of ``lines``, 1 to 3 of them mutated."""
    lines = list(lines)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = draw(mutated(lines[i]))
    data = b"\n".join(serialize(line) for line in lines) + b"\n"
    return draw(byte_damage(data))


@st.composite
def json_file(draw: st.DrawFn, tree: Any) -> bytes:
    return draw(byte_damage(serialize(draw(mutated(tree)))))


CSV_CELLS = st.one_of(
    ODD_TEXT,
    st.sampled_from(["1", "5", "0", "6", "3.0", "1e400", "NaN", "-1", "99999999999", "12345678901234567890123"]),
    st.sampled_from(['"', '"unclosed', 'a"b', ",", "\n", "\x00", "true", "{}", "[]"]),
    st.integers(130_000, 200_000).map(lambda n: "y" * n),
)


@st.composite
def csv_file(draw: st.DrawFn, rows: list[list[str]]) -> bytes:
    """A CSV file of ``rows`` (the first is the header) with hostile cells, and rows cut or grown."""
    rows = [list(r) for r in rows]
    for _ in range(draw(st.integers(1, 4))):
        r = draw(st.integers(0, len(rows) - 1))
        op = draw(st.sampled_from(["cell", "cell", "cut", "grow"]))
        if op == "cell":
            rows[r][draw(st.integers(0, len(rows[r]) - 1))] = draw(CSV_CELLS)
        elif op == "cut" and rows[r]:
            rows[r].pop()
        else:
            rows[r].append(draw(CSV_CELLS))
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return draw(byte_damage(out.getvalue().encode("utf-8", "surrogatepass")))


# --- the property -------------------------------------------------------------------------------------------


def check_drop(wh: Warehouse, name: str, data: bytes) -> None:
    """Load a drop of ``data`` (as ``name``) beside ``good.jsonl``: no exception, counts reconcile, good is whole.

    Every example loads the same drop id, so each load replaces the last one's rows and the warehouse stays small."""
    with tempfile.TemporaryDirectory(prefix="pulse-fuzz-") as tmp:
        drop = Path(tmp) / "fuzz"
        drop.mkdir()
        (drop / name).write_bytes(data)
        (drop / "good.jsonl").write_text(GOOD)
        load_drop(wh, "fuzz", drop)
    ok, facts = reconcile_drop(wh, "fuzz")
    assert ok, facts
    good = wh.con.execute("SELECT n_events FROM raw.sessions WHERE session_id = 'good'").fetchall()
    assert good == [(2,)], good


CANONICAL = _lines(FIXTURES / "canonical" / "sessions.jsonl")
FEEDBACK = _lines(FIXTURES / "feedback" / "records.jsonl")
FEEDBACK_ARRAY = json.loads((FIXTURES / "feedback" / "records_array.json").read_text())
EVAL = _lines(FIXTURES / "event_features" / "v0_eval_output.jsonl")
V0_EVENTS = json.loads((FIXTURES / "downloads" / "trajectory-4f2a9c1e.json").read_text())["trajectory"]
V1_EVENTS = _lines(FIXTURES / "event_features" / "v1_conversation.jsonl")
CLAUDE = _lines(FIXTURES / "claude_code" / "session.jsonl")
CODEX = _lines(next((FIXTURES / "codex").glob("rollout-*.jsonl")))
GEMINI = _lines(FIXTURES / "gemini_cli" / "checkpoint.jsonl")
GEMINI_LEGACY = json.loads(next((FIXTURES / "gemini_cli").glob("session-*.json")).read_text())
RATINGS_CSV = _csv_rows(FIXTURES / "downloads" / "conversation_feedback.csv")
ASSIGNMENTS_CSV = _csv_rows(FIXTURES / "downloads" / "assignments.csv")


def _as_objects(rows: list[list[str]]) -> list[dict[str, Any]]:
    header, *body = rows
    return [dict(zip(header, row, strict=True)) for row in body]


RATINGS_JSONL = _as_objects(RATINGS_CSV) + [
    {"conversation_id": 12345, "event_id": 7, "rating": 4.0, "segment_index": 0, "id": 99}
]
ASSIGNMENTS_JSONL = _as_objects(ASSIGNMENTS_CSV)
MIXED_ARRAY = [CANONICAL[0], RATINGS_JSONL[0], ASSIGNMENTS_JSONL[0]]  # a JSON array of records of every kind
OTEL_GENAI = _lines(FIXTURES / "otel" / "genai.jsonl")  # OpenTelemetry Collector exports (ingest/otel.py)
OTEL_OPENINFERENCE = _lines(FIXTURES / "otel" / "openinference.jsonl")
OTEL_DOCUMENT = json.loads((FIXTURES / "otel" / "openllmetry.json").read_text())

CASES: dict[str, tuple[str, Callable[[], st.SearchStrategy[bytes]]]] = {
    "canonical": ("sessions.jsonl", lambda: jsonl_file(CANONICAL)),
    "openhands_v0_feedback": ("records.jsonl", lambda: jsonl_file(FEEDBACK)),
    "openhands_v0_feedback_array": ("records.json", lambda: json_file(FEEDBACK_ARRAY)),
    "openhands_v0_eval": ("output.jsonl", lambda: jsonl_file(EVAL)),
    "records_array": ("mixed.json", lambda: json_file(MIXED_ARRAY)),
    "openhands_v0_event_list": ("trajs.json", lambda: json_file(V0_EVENTS)),
    "openhands_v0_download": ("trajectory-x.json", lambda: json_file({"trajectory": V0_EVENTS[:6]})),
    "openhands_v1": ("conversation.jsonl", lambda: jsonl_file(V1_EVENTS)),
    "claude_code": ("session.jsonl", lambda: jsonl_file(CLAUDE)),
    "codex": ("rollout.jsonl", lambda: jsonl_file(CODEX)),
    "gemini_cli": ("session-x.jsonl", lambda: jsonl_file(GEMINI)),
    "gemini_cli_legacy": ("session-x.json", lambda: json_file(GEMINI_LEGACY)),
    "ratings_csv": ("ratings.csv", lambda: csv_file(RATINGS_CSV)),
    "ratings_jsonl": ("ratings.jsonl", lambda: jsonl_file(RATINGS_JSONL)),
    "assignments_csv": ("assignments.csv", lambda: csv_file(ASSIGNMENTS_CSV)),
    "assignments_jsonl": ("assignments.jsonl", lambda: jsonl_file(ASSIGNMENTS_JSONL)),
    "otel_genai": ("traces.json", lambda: jsonl_file(OTEL_GENAI)),
    "otel_openinference": ("openinference.jsonl", lambda: jsonl_file(OTEL_OPENINFERENCE)),
    "otel_document": ("otel.json", lambda: json_file(OTEL_DOCUMENT)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fuzz(case: str, wh: Warehouse) -> None:
    name, strategy = CASES[case]

    @FUZZ
    @given(strategy())
    def run(data: bytes) -> None:
        check_drop(wh, name, data)

    run()
