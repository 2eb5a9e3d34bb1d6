"""Langfuse files, export folders and API objects read as sessions, segments, user messages, agent steps, ratings
and eval-score features (issue 39, item 1; ``ingest/langfuse.py``, ``ingest/langfuse_files.py``).

Shapes checked against langfuse/langfuse at commit 62751446149b702b419a9292ddfc2280cdf74b8c:

- ``fern/apis/server/definition/commons.yml``: ``Trace`` (``id, timestamp, name, input, output, sessionId, release,
  version, userId, metadata, tags, environment``), ``TraceWithFullDetails`` (``observations``: ObservationsView
  list, ``scores``), ``ObservationsView`` (``traceId, type, startTime, model, usageDetails, costDetails,
  totalCost``), ``BaseScore``/``Score`` (``traceId, observationId, sessionId, name, source, dataType, value,
  stringValue``; BOOLEAN value 1/0), ``ScoreSource`` (ANNOTATION | API | EVAL), ``ScoreDataType``;
- ``packages/shared/src/server/repositories/traces.ts`` and ``scores.ts`` (``build*ForBlobStorageExportQuery``: the
  export's ``traces/`` and ``scores/`` columns), ``packages/shared/src/server/queries/clickhouse-sql/
  event-query-builder.ts`` (the ``observations_v2/`` columns: ``trace_id``, ``session_id``, ``provided_model_name``,
  ``usage_details``, ``is_root_observation``, ...), ``worker/src/features/blobstorage/
  handleBlobStorageIntegrationProjectJob.ts`` (``<project>/<table>/<timestamp>.<ext>``, ``.gz``);
- the pull's camelCase v2 observations and v3 scores (``subject{kind, id, traceId}``, BOOLEAN ``value`` a JSON
  boolean): ``fern/apis/server/definition/observations-v2.yml``, ``scores-v3.yml`` as ``/work/wt/NOTES39.md``
  records them.

The real samples (``../shared/samples/langfuse``: five traces of agent frameworks, fetched from Langfuse's API) are
read in place; their tests skip when the folder is absent.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil

import orjson
import pytest

from pulse_pipeline import tables
from pulse_pipeline.features.rubric import load_rubric
from pulse_pipeline.features.wide import build_session_features
from pulse_pipeline.ingest.drop import drop_units
from pulse_pipeline.ingest.events import lines_with_long_integers
from pulse_pipeline.ingest.langfuse import conversation, last_turn_user_words, trace_input_words
from pulse_pipeline.ingest.langfuse_files import timestamp_texts
from pulse_pipeline.ingest.load import load_drop
from pulse_pipeline.label_scales import STARS, THUMBS
from pulse_pipeline.synth.langfuse_export import FORMATS, write_export

from .helpers import SAMPLES, assert_reconciled, ingest_paths, rebuild_staging, rows

LANGFUSE_SAMPLES = SAMPLES / "langfuse"
needs_langfuse_samples = pytest.mark.skipif(
    not LANGFUSE_SAMPLES.is_dir(),
    reason=f"real Langfuse traces not found at {LANGFUSE_SAMPLES} (they live beside the repo, in shared/samples)",
)


def _sample(name: str) -> dict:
    return json.loads((LANGFUSE_SAMPLES / name).read_text())


def _generation_totals(doc: dict) -> tuple[float, int, int, str]:
    """What the trace's generations add up to, read straight off the file (the test's own arithmetic)."""
    gens = [o for o in doc["observations"] if o["type"] == "GENERATION"]
    cost = sum(o["totalCost"] for o in gens)
    prompt = sum(o["usageDetails"]["input"] for o in gens)
    completion = sum(o["usageDetails"]["output"] for o in gens)
    return cost, prompt, completion, gens[0]["model"]


# The user's words of each sample, read by a person from the trace (its input, else its first generation's user
# message), and the session each belongs to.
SAMPLE_TRUTH = {
    "agno-2025-06-11.trace.json": (
        "35cc6c90-b657-4819-b66c-c931c03ad569",
        "What is currently trending on Twitter?",  # the input is an agno RunResponse: from the generations
    ),
    "langgraph-python-2025-08-22.trace.json": (
        "e1fde3efec57ce8a69bafd3fb928a7eb",  # no sessionId: the trace is its own session
        "Search the web for 'example' and summarize.",  # not the generation's "Be helpful!" system-ish message
    ),
    "openai-agents-2025-09-30.trace.json": ("fee618f96dc31e0ca38b2f7b26eb8b29", "What's the weather in Tokyo?"),
    "pydantic-ai-tools-2025-06-06.trace.json": ("session_abc", "What is Langfuse?"),
    "vercel-aisdk-2025-11-17.trace.json": (
        "df41e597d0a85e0d7a6ae8ebfaa70aa0",
        "What is the weather like today in San Francisco?",  # {"prompt": ...} is no conversation
    ),
}


@needs_langfuse_samples
def test_real_langfuse_traces_become_sessions_with_the_users_words_models_and_cost(wh):
    load_drop(wh, "langfuse", LANGFUSE_SAMPLES)
    rebuild_staging(wh)
    assert_reconciled(wh, "langfuse")
    sessions = {
        r[0]: (r[1], r[2], json.loads(r[3]))
        for r in rows(wh, "SELECT session_id, user_id, n_segments, metadata_json FROM raw.sessions")
    }
    assert sorted(sessions) == sorted(sid for sid, _ in SAMPLE_TRUTH.values())
    for name, (session_id, words) in SAMPLE_TRUTH.items():
        user_id, n_segments, meta = sessions[session_id]
        assert n_segments == 1, name
        (opening,) = rows(
            wh, "SELECT event_id, text FROM raw.events WHERE session_id = ? AND source = 'user'", [session_id]
        )
        doc = _sample(name)
        assert opening == (doc["trace"]["id"], words), name  # one user message, the trace id as its event id
        cost, prompt, completion, model = _generation_totals(doc)
        assert meta["model"] == model, name
        assert meta["llm_usage"]["cost_usd"] == pytest.approx(cost), name
        assert (meta["llm_usage"]["prompt_tokens"], meta["llm_usage"]["completion_tokens"]) == (prompt, completion)
        assert meta["environment"] == "default"
        # every observation is an event, with its own id; none of them is a user message
        (n_events,) = rows(wh, "SELECT count(*) FROM raw.events WHERE session_id = ?", [session_id])[0]
        assert n_events == 1 + len(doc["observations"]), name
    assert sessions["session_abc"][0] == "user_123"
    assert sessions["session_abc"][2]["version"] == "1.0.0"
    assert sessions["session_abc"][2]["tags"] == ["dev", "pydantic-ai"]
    # tools keep their names: an OpenAI Agents TOOL observation, a LangGraph span named as the tool it runs
    tools = dict(rows(wh, "SELECT session_id, original_name FROM raw.events WHERE kind = 'action' AND name = 'other'"))
    assert tools["fee618f96dc31e0ca38b2f7b26eb8b29"] == "get_weather"
    assert tools["e1fde3efec57ce8a69bafd3fb928a7eb"] == "Web-Search"
    # the LICENSE file beside the traces is the only thing quarantined
    assert rows(wh, "SELECT source_file FROM raw.quarantine") == [("LICENSE_langfuse_MIT.txt",)]


@needs_langfuse_samples
def test_real_eval_scores_are_features_never_labels(wh):
    load_drop(wh, "langfuse", LANGFUSE_SAMPLES)
    rebuild_staging(wh)
    assert rows(wh, "SELECT count(*) FROM raw.ratings") == [(0,)]
    assert rows(wh, "SELECT count(*) FROM staging.session_labels") == [(0,)]
    expected = {}
    for name, (session_id, _) in SAMPLE_TRUTH.items():
        values = [s["value"] for s in _sample(name)["trace"]["scores"] if s["source"] == "EVAL"]
        expected[session_id] = values  # hallucination and toxicity, each already on [0, 1]
    assert rows(wh, "SELECT count(*) FROM raw.eval_scores") == [(sum(map(len, expected.values())),)]
    build_session_features(wh, load_rubric(None), "heuristic", "", None, ())
    got = {
        r[0]: r[1:]
        for r in rows(
            wh, "SELECT session_id, eval_score_mean, eval_score_min, eval_scored FROM features.session_features"
        )
    }
    for session_id, values in expected.items():
        if values:
            assert got[session_id] == (pytest.approx(sum(values) / len(values)), min(values), len(values))
        else:
            assert got[session_id] == (None, None, 0)


def test_the_users_words_are_the_last_turns_user_messages_never_system_or_tool_text():
    history = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": [{"type": "text", "text": "second"}, {"type": "image_url"}]},
        {"role": "user", "content": "and more"},
    ]
    assert trace_input_words(json.dumps(history)) == ["second", "and more"]  # JSON text of the list, too
    assert trace_input_words({"messages": [{"type": "human", "content": "hi"}]}) == ["hi"]  # LangChain
    assert trace_input_words('"just text"') == ["just text"]  # JSON of a JSON string: decoded twice
    assert trace_input_words({"prompt": "x"}) is None  # no conversation: the generations are asked
    tool_loop = [
        {"role": "user", "content": "weather?"},
        {"type": "function_call", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "output": "sunny"},
    ]
    assert last_turn_user_words(conversation(tool_loop)) == ["weather?"]
    transcript = "developer: be brief\nuser: what is trending?\nassistant: None\ntool: [results]"
    assert last_turn_user_words(conversation(transcript)) == ["what is trending?"]


# --- export folders ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_export_folder_in_each_file_kind_gives_the_generators_sessions(wh, tmp_path, fmt):
    export = tmp_path / f"export-{fmt}"
    truth = write_export(export, traces=24, fmt=fmt, seed=3)
    ingest_paths(wh, export)
    assert_reconciled(wh, export.name)
    assert rows(wh, "SELECT count(*) FROM raw.quarantine") == [(0,)]
    got = {r[0]: r[1:] for r in rows(wh, "SELECT session_id, user_id, n_segments, metadata_json FROM raw.sessions")}
    assert sorted(got) == sorted(truth.sessions)
    for session_id, expected in truth.sessions.items():
        user_id, n_segments, meta_json = got[session_id]
        meta = json.loads(meta_json)
        assert (user_id, n_segments) == (expected.user_id, len(expected.trace_ids))
        assert meta["model"] == expected.model and meta["release"] == expected.release
        assert meta["llm_usage"]["cost_usd"] == pytest.approx(expected.cost)
        assert meta["llm_usage"]["prompt_tokens"] == expected.prompt_tokens
        assert meta["llm_usage"]["completion_tokens"] == expected.completion_tokens
        opening = rows(
            wh,
            "SELECT event_id, text FROM raw.events WHERE session_id = ? AND source = 'user' ORDER BY seq",
            [session_id],
        )
        # each trace opens its segment with the new user message only (the history in its input is not repeated)
        assert opening == list(zip(expected.trace_ids, expected.user_words, strict=True))
    ratings = rows(
        wh,
        "SELECT w.open_event_id, r.rating, r.scale FROM staging.segment_ratings r"
        " JOIN staging.work_segments w USING (session_id, segment_index)",
    )
    assert sorted(ratings) == sorted((t, *v) for t, v in truth.ratings.items())
    assert rows(wh, "SELECT count(*) FROM raw.eval_scores") == [(len(truth.evals),)]


def test_scores_in_a_later_drop_land_on_their_traces_segments(wh, tmp_path):
    first = tmp_path / "traces-drop"
    truth = write_export(first, traces=12, fmt="jsonl", seed=5, tables=("traces", "observations_v2"))
    later = tmp_path / "scores-drop"
    write_export(later, traces=12, fmt="csv", seed=5, tables=("scores",))
    os.utime(later / "proj-synth" / "scores" / "2026-01-05T09-00-00.csv", (2e9, 2e9))
    load_drop(wh, first.name, first)
    rebuild_staging(wh)
    assert rows(wh, "SELECT count(*) FROM staging.segment_ratings") == [(0,)]
    load_drop(wh, later.name, later)
    rebuild_staging(wh)
    assert_reconciled(wh, first.name, later.name)
    # the scores name only their traces; each finds the session holding its trace and that trace's segment
    assert rows(wh, "SELECT count(*) FROM raw.ratings WHERE session_id IS NULL") == [(len(truth.ratings),)]
    ratings = rows(
        wh,
        "SELECT w.open_event_id, r.rating, r.scale, r.matched_by FROM staging.segment_ratings r"
        " JOIN staging.work_segments w USING (session_id, segment_index)",
    )
    assert sorted(ratings) == sorted((t, *v, "event_id") for t, v in truth.ratings.items())
    assert rows(wh, "SELECT count(*) FROM raw.quarantine") == [(0,)]


def test_the_pulls_camelcase_v2_observations_and_v3_scores(wh, tmp_path):
    """The shapes ``pulse pull langfuse`` writes (NOTES39.md): no traces/ folder, trace fields on each observation,
    input/output as raw strings, v3 scores with ``subject`` and BOOLEAN values as JSON booleans."""
    drop = tmp_path / "langfuse-pull-20260105T100000Z"
    (drop / "observations_v2").mkdir(parents=True)
    (drop / "scores").mkdir()
    common = {"projectId": "p1", "sessionId": "chat-9", "userId": "u-7", "environment": "prod", "release": "r2"}
    observations = [
        {
            **common,
            "id": "root-1",
            "traceId": "t-1",
            "type": "AGENT",
            "name": "agent",
            "startTime": "2026-01-05T10:00:00.000Z",
            "parentObservationId": None,
            "isRootObservation": True,
            "traceName": "chat",
            "tags": ["beta"],
            "input": json.dumps([{"role": "user", "content": "rename the function"}]),
        },
        {
            **common,
            "id": "gen-1",
            "traceId": "t-1",
            "type": "GENERATION",
            "name": "llm",
            "startTime": "2026-01-05T10:00:01.000Z",
            "parentObservationId": "root-1",
            "providedModelName": "claude-sonnet-4",
            "usageDetails": {"input": 1000, "output": 200, "total": 1200},
            "costDetails": {"total": 0.006},
            "totalCost": 0.006,
            "output": json.dumps({"role": "assistant", "content": "Renamed."}),
        },
        {
            **common,
            "id": "root-2",
            "traceId": "t-2",
            "type": "AGENT",
            "name": "agent",
            "startTime": "2026-01-05T10:05:00.000Z",
            "parentObservationId": None,
            "isRootObservation": True,
            "input": "now add a test",  # plain text: the user's words
        },
    ]
    (drop / "observations_v2" / "observations-00001.jsonl").write_bytes(
        b"".join(orjson.dumps(o) + b"\n" for o in observations)
    )
    scores = [
        {"id": "s1", "projectId": "p1", "name": "user-feedback", "dataType": "BOOLEAN", "value": True,
         "source": "API", "timestamp": "2026-01-05T10:06:00Z", "subject": {"kind": "trace", "id": "t-2"}},
        {"id": "s2", "projectId": "p1", "name": "rating", "dataType": "NUMERIC", "value": 2,
         "source": "ANNOTATION", "timestamp": "2026-01-05T10:06:00Z",
         "subject": {"kind": "observation", "id": "gen-1", "traceId": "t-1"}},
        {"id": "s3", "projectId": "p1", "name": "feedback", "dataType": "CATEGORICAL", "value": "meh",
         "source": "API", "timestamp": "2026-01-05T10:06:00Z", "subject": {"kind": "session", "id": "chat-9"}},
        {"id": "s4", "projectId": "p1", "name": "helpfulness", "dataType": "NUMERIC", "value": 0.9,
         "source": "EVAL", "timestamp": "2026-01-05T10:06:00Z", "subject": {"kind": "trace", "id": "t-1"}},
        {"id": "s5", "projectId": "p1", "name": "rating", "dataType": "NUMERIC", "value": 4,
         "source": "API", "timestamp": "2026-01-05T10:07:00Z", "subject": {"kind": "session", "id": "chat-9"}},
    ]  # fmt: skip
    (drop / "scores" / "scores-00001.jsonl").write_bytes(b"".join(orjson.dumps(s) + b"\n" for s in scores))
    ingest_paths(wh, drop)
    assert_reconciled(wh, drop.name)
    ((session_id, user_id, n_segments, meta_json),) = rows(
        wh, "SELECT session_id, user_id, n_segments, metadata_json FROM raw.sessions"
    )
    meta = json.loads(meta_json)
    assert (session_id, user_id, n_segments) == ("chat-9", "u-7", 2)
    assert (meta["model"], meta["release"], meta["environment"], meta["tags"]) == (
        "claude-sonnet-4",
        "r2",
        "prod",
        ["beta"],
    )
    assert meta["llm_usage"] == {"cost_usd": 0.006, "prompt_tokens": 1000, "completion_tokens": 200}
    assert rows(wh, "SELECT event_id, text FROM raw.events WHERE source = 'user' ORDER BY seq") == [
        ("t-1", "rename the function"),
        ("t-2", "now add a test"),
    ]
    assert rows(wh, "SELECT segment_index, rating, scale FROM staging.segment_ratings ORDER BY 1, 3") == [
        (0, 2.0, STARS),  # the observation's score, on the trace it belongs to
        (1, 4.0, STARS),  # the session's score, on its last segment
        (1, 1.0, THUMBS),  # true: a thumb up on the second trace
    ]
    (reason,) = rows(wh, "SELECT reason FROM raw.quarantine WHERE record_type = 'score'")
    assert "no declared map" in reason[0]  # a CATEGORICAL rating without PULSE_SCORE_CATEGORIES
    assert rows(wh, "SELECT event_id, name, value FROM raw.eval_scores") == [("t-1", "helpfulness", 0.9)]


def test_sessions_spread_over_trace_files_are_one_session(wh, tmp_path):
    """Two traces of one Langfuse session fetched one per file (``GET /api/public/traces/{id}``) are one session
    of two segments, however the files are named and where in the drop they lie."""
    drop = tmp_path / "traces"  # named like the export's folder: its files are traces with their details all the same
    (drop / "b").mkdir(parents=True)
    for n, (folder, when) in enumerate([(drop, "2026-01-05T10:00:00Z"), (drop / "b", "2026-01-05T11:00:00Z")]):
        trace = {"id": f"tr-{n}", "projectId": "p", "timestamp": when, "sessionId": "S", "input": f"question {n}"}
        step = {"id": f"g-{n}", "traceId": f"tr-{n}", "type": "GENERATION", "startTime": when, "model": "m"}
        doc = {**trace, "observations": [step], "scores": []}
        (folder / f"x{n}.json").write_text(json.dumps(doc))
    ingest_paths(wh, drop)
    assert_reconciled(wh, drop.name)
    assert rows(wh, "SELECT session_id, n_segments, n_user_messages FROM raw.sessions") == [("S", 2, 2)]
    assert rows(wh, "SELECT event_id, text FROM raw.events WHERE source = 'user' ORDER BY seq") == [
        ("tr-0", "question 0"),
        ("tr-1", "question 1"),
    ]
    assert rows(wh, "SELECT count(*) FROM raw.events WHERE name = 'message' AND source = 'agent'") == [(2,)]


def test_bad_langfuse_records_are_quarantined_with_the_reason_and_counted(wh, tmp_path):
    drop = tmp_path / "export"
    truth = write_export(drop, traces=3, fmt="jsonl", seed=1)
    observations = drop / "proj-synth" / "observations_v2" / "2026-01-05T09-00-00.jsonl"
    first = observations.read_bytes().split(b"\n")[0]
    legacy = drop / "proj-synth" / "observations"
    legacy.mkdir()
    orphan = {"id": "o-x", "type": "SPAN", "start_time": "2026-01-05 09:00:00", "project_id": "proj-synth"}
    (legacy / "2026-01-05.jsonl.gz").write_bytes(
        gzip.compress(first + b"\n" + b'{"id": "broken",\n' + orjson.dumps({**orphan, "trace_id": None}) + b"\n")
    )
    ingest_paths(wh, drop)
    assert_reconciled(wh, drop.name)
    reasons = [r[0] for r in rows(wh, "SELECT reason FROM raw.quarantine ORDER BY record_index")]
    assert len(reasons) == 3
    assert "read again" in reasons[0]  # the same observation in observations/ and observations_v2/: kept once
    assert reasons[1].startswith("not valid JSON")
    assert "o-x names no trace" in reasons[2]
    assert rows(wh, "SELECT count(*) FROM raw.sessions") == [(len(truth.sessions),)]


def test_a_file_that_only_mentions_a_project_is_read_as_any_file(wh, tmp_path):
    drop = tmp_path / "mixed"
    drop.mkdir()
    rating = {"session_id": "s-1", "rating": 4, "projectId": "not-langfuse"}
    (drop / "ratings.jsonl").write_text(json.dumps(rating) + "\n")
    units = drop_units(drop)
    assert [u.layout for u in units] == ["langfuse"]  # chosen by its head: it names a project ...
    load_drop(wh, drop.name, drop)
    assert_reconciled(wh, drop.name)
    assert rows(wh, "SELECT session_id, rating FROM raw.ratings") == [("s-1", 4.0)]  # ... and read as a rating


@needs_langfuse_samples
def test_one_sample_file_is_a_drop_of_its_own(wh, tmp_path):
    single = tmp_path / "one.trace.json"
    shutil.copy(LANGFUSE_SAMPLES / "openai-agents-2025-09-30.trace.json", single)
    load_drop(wh, single.name, single)
    assert_reconciled(wh, single.name)
    assert rows(wh, "SELECT session_id, source_format FROM raw.sessions") == [
        ("fee618f96dc31e0ca38b2f7b26eb8b29", "langfuse")
    ]


def test_a_large_unit_hands_its_sessions_on_in_batches_that_add_up(tmp_path):
    """Sessions are built into batches of about ``chunk_events`` events, so the warehouse is given bounded
    inserts; together they hold every session, event and score once."""
    from pulse_pipeline.ingest.batch import Batch
    from pulse_pipeline.ingest.langfuse import TABLE_KINDS, Where, collect, session_batches
    from pulse_pipeline.ingest.langfuse_files import _rows
    from pulse_pipeline.ingest.scores import ScoreRules

    export = tmp_path / "export"
    truth = write_export(export, traces=20, fmt="jsonl", seed=4)
    first = Batch("d")
    records = [
        (obj, Where(path.name, i), TABLE_KINDS[path.parent.name])
        for path in sorted(export.rglob("*.jsonl"))
        for obj, i in _rows(first, path, path.name)
    ]
    collected = collect(first, records, lambda obj, where: pytest.fail(f"not Langfuse: {obj}"))
    batches = list(session_batches(first, collected, ScoreRules(), chunk_events=12))
    assert len(batches) > 3
    assert all(b.count(tables.EVENTS) < 12 + 5 * 4 for b in batches)  # one session past the chunk at most
    assert sum(b.read["session"] for b in batches) == len(truth.sessions)
    assert sum(b.count(tables.EVENTS) for b in batches) == truth.observations + 20
    assert sum(b.count(tables.RATINGS) for b in batches) == len(truth.ratings)


def test_export_lines_with_long_integers_nan_and_a_byte_order_mark_read_as_parse_json_reads_them(wh, tmp_path):
    # The JSON-lines reader asks orjson alone for a line unless the file holds a 20-digit integer somewhere (then
    # every line goes through parse_json) or orjson refuses the line (a BOM, NaN): each case keeps its value.
    drop = tmp_path / "export"
    write_export(drop, traces=3, fmt="jsonl", seed=2)
    observations = drop / "proj-synth" / "observations_v2" / "2026-01-05T09-00-00.jsonl"
    lines = observations.read_bytes().split(b"\n")
    first, second, third = (orjson.loads(line) for line in lines[:3])
    first["metadata"] = {"n": 12345678901234567890123}  # beyond 64 bits: orjson alone would give a double
    second["metadata"] = {"cost": float("nan")}  # written by Python's json as NaN, which orjson refuses
    bom = b"\xef\xbb\xbf" + orjson.dumps(third)  # a line starting with a byte order mark
    text = json.dumps(first).encode() + b"\n" + json.dumps(second).encode() + b"\n" + bom + b"\n"
    observations.write_bytes(text + b"\n".join(lines[3:]))
    ingest_paths(wh, drop)
    assert_reconciled(wh, drop.name)
    assert rows(wh, "SELECT count(*) FROM raw.quarantine") == [(0,)]
    raw = dict(rows(wh, "SELECT event_id, raw_json FROM raw.events"))
    assert '"metadata":{"n":12345678901234567890123}' in raw[first["id"]]
    assert '"metadata":{"cost":"NaN"}' in raw[second["id"]]
    assert orjson.loads(raw[third["id"]]) == third


def test_the_lines_read_again_for_long_integers_are_those_with_twenty_digits_in_a_row():
    raw = (
        b'{"a": 1}\n'  # 0: none
        b'{"x": 12345678901234567890}\n'  # 1: twenty digits
        b'{"id": "4bf92f3577b34da6a3ce929d0e0e4736"}\n'  # 2: a hex id, no twenty digits
        b'{"n": -1234567890123456789, "m": 1234567890123456789012345}\n'  # 3: nineteen after a minus, and more
        b"\n"  # 4: blank
        b'{"s": "00000000000000000000"}'  # 5: twenty digits in a string (read again all the same)
    )
    assert lines_with_long_integers(raw) == {1, 3, 5}


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("zone", [None, "UTC", "Europe/Berlin"])
def test_parquet_timestamps_are_read_as_the_text_arrows_cast_writes(unit, zone):
    # timestamp_texts writes them with Polars where it writes the same text; the truth is Arrow's own cast.
    import random

    import pyarrow as pa

    rng = random.Random(7)
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
    first, last = (-9_000_000_000, 200_000_000_000) if unit != "ns" else (-9_000_000_000, 9_000_000_000)
    values = [
        rng.randint(first, last) * per_second + rng.randrange(per_second) if rng.random() > 0.1 else None
        for _ in range(2000)
    ]
    values.append(-30_000_000_000 * per_second if unit != "ns" else None)  # the year 1019 ... or none
    column = pa.chunked_array([pa.array(values, type=pa.timestamp(unit, zone))])
    assert timestamp_texts(column) == column.cast(pa.string()).to_pylist()
    early = pa.chunked_array([pa.array([-50_000_000_000], type=pa.timestamp("s", zone))])  # the year 385
    assert timestamp_texts(early) == early.cast(pa.string()).to_pylist()
