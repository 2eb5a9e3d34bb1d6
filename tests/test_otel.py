"""OpenTelemetry traces of LLM applications (``ingest/otlp.py``, ``ingest/otel.py``) on fixtures written from each
convention's own source. Every count below was worked out by reading the fixtures (``tests/fixtures/otel/``).

Sources the fixtures follow (file and commit as read with the tool library):

- OTLP/JSON: open-telemetry/opentelemetry-proto ``opentelemetry/proto/trace/v1/trace.proto``
  @ 5cb53996db83838a8ce19ec7cf49b8f37b456d4f (resourceSpans > scopeSpans > spans, KeyValue/AnyValue, status code 2
  ERROR); the Collector's file exporter, open-telemetry/opentelemetry-collector-contrib
  ``exporter/fileexporter/README.md`` @ 001253caa26d24bde3c8b9154b10ced8c39cbbc3 ("each line in the file is a JSON
  object"; rotation renames ``data.json`` to ``data-<time>.json`` and starts a new file).
- GenAI: open-telemetry/semantic-conventions-genai ``model/gen-ai/registry.yaml`` and ``docs/gen-ai/gen-ai-events.md``
  @ 002c8a6ea1c8a42b14a4527db83b3cabcded610a (``gen_ai.operation.name`` chat / execute_tool / invoke_agent,
  ``gen_ai.conversation.id``, ``gen_ai.request.model``/``response.model``, ``gen_ai.usage.input_tokens``/
  ``output_tokens``, ``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``/``result``, ``gen_ai.agent.name``/
  ``version``, ``gen_ai.system_instructions``, the ``gen_ai.evaluation.result`` event with
  ``gen_ai.evaluation.name``, ``.score.value``, ``.score.label``, ``.explanation``);
  ``model/gen-ai/gen-ai-input-messages.json`` @ 2b902ce14e7fa9d3d97cac49de02bae6917c02ae (``{role, parts}``, parts
  ``text`` with ``content``, ``tool_call``, ``tool_call_response``; roles system, user, assistant, tool).
- OpenLLMetry: traceloop/openllmetry
  ``packages/opentelemetry-semantic-conventions-ai/opentelemetry/semconv_ai/__init__.py``
  @ d7aaf6cca2e22ef9ae2773559251dd531829cd9f (``gen_ai.prompt``/``gen_ai.completion`` prefixes,
  ``gen_ai.usage.prompt_tokens``/``completion_tokens``, ``llm.usage.total_tokens``, ``llm.request.type``,
  ``traceloop.span.kind``, ``traceloop.entity.name``/``input``/``output``, ``traceloop.association.properties``)
  and ``packages/opentelemetry-instrumentation-mistralai/opentelemetry/instrumentation/mistralai/__init__.py``
  @ 2876c5b990942868b8cd6a4c8cbcbd7eb34a3354 (``gen_ai.prompt.N.role``/``content``, ``gen_ai.completion.N.role``/
  ``content``/``finish_reason``); ``packages/traceloop-sdk/tests/test_association_properties.py`` (``...session_id``).
- OpenInference: Arize-ai/openinference ``spec/semantic_conventions.md``
  @ 1fe497f1d9f45a07eee55d97fe185e020560f9c7 (``openinference.span.kind``, ``session.id``, ``user.id``,
  ``input.value``/``input.mime_type``, ``output.value``, ``llm.input_messages.N.message.role``/``content``,
  ``llm.output_messages...message.contents.M.message_content.text``, ``llm.model_name``,
  ``llm.token_count.prompt``/``completion``, ``llm.cost.total``, ``tool.name``) and ``spec/annotations.md``
  @ 145e3c6d0626f37396b32d8e33347d386aa4097c (``annotations.N.annotation.*``, ``trace.annotations...``,
  ``session.evaluations...``; ``annotator_kind`` HUMAN | LLM | CODE; a post-hoc carrier is an ``EVALUATOR`` span
  whose link names the target).
- Langfuse's OTel keys: langfuse/langfuse ``web/src/features/otel/server/attributes.ts``
  @ fa2219c7f5bfc5124d5aa74d0b087c309f9873ca (``langfuse.session.id``, ``langfuse.user.id``, ``session.id``,
  ``user.id``).

The fixtures:

- ``genai.jsonl`` (two lines, as the Collector batches them; service ``support-agent`` 2.1.0). Trace A
  (``0af7…319c``, conversation ``conv-42``): root ``invoke_agent`` A1 (user ``enduser.id`` u-7, agent ``helper``
  2.1.0, input the user's question, usage 300/60: the sum of its children's, which must not count twice), chat A2
  (system instructions and a ``system`` message ``Be brief.`` before the question; output a tool call; usage
  100/20; a ``gen_ai.evaluation.result`` event Relevance 0.9), tool A3 ``run_tests`` (result ``1 failed:
  ImportError``), chat A4 (history ending in the tool's result; usage 200/40). Trace B (``1bf7…319d``, conv-42, a
  minute later): a root chat whose input is the history then the new turn ``Thanks! Can you also add a test for
  it?`` (usage 150/30). Trace C (``2cf7…319e``, no conversation id): root ``invoke_agent`` with status ERROR and a
  chat child (``claude-sonnet-4``, system prompt then ``List open issues``, usage 50/10). Line 1 also holds a span
  with no ``traceId`` and A3 again: 2 spans quarantined.
- ``openllmetry.json`` (one document): session ``chat-9`` (``traceloop.association.properties.session_id``), user
  ``alice``; trace D: workflow root (its ``traceloop.entity.input`` is call arguments, not a conversation), tool
  ``search_docs``, chat with ``gen_ai.prompt.0`` system and ``.1`` user ``What is PULSE?`` (legacy
  ``gen_ai.usage.prompt_tokens`` 25 / ``completion_tokens`` 12); trace E: workflow root, chat whose prompts are the
  history then user ``And how do I rate a session?`` (``gen_ai.usage.input_tokens`` 60 / ``output_tokens`` 20).
- ``openinference.jsonl`` (three lines): session ``sess-oi-1``, user ``bob``. Trace F: CHAIN root, ``input.value``
  ``Summarize the failing test`` (text/plain), a HUMAN trace annotation ``rating`` 4, a session evaluation
  ``frustration`` (LLM, label only); TOOL ``read_file``; LLM span (system then user message; 40/15 tokens, cost
  0.0012; an LLM span annotation ``correctness`` 0.8). Trace G: AGENT root whose ``input.value`` is JSON
  ``{"messages": [...]}`` ending in user ``Now fix it``; LLM span (a tool message in its input; 70/25 tokens, cost
  0.002; a HUMAN annotation with no name). Trace H (line 2): an EVALUATOR carrier span linked to G's root, with a
  HUMAN trace annotation ``user_feedback`` 2: it rates G's segment, and makes no session.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest

from pulse_pipeline import tables
from pulse_pipeline.ingest.otel import Message, users_words
from pulse_pipeline.ingest.otlp import OTLP_AMONG_RECORDS, decode_value, read_span

from .helpers import FIXTURES, assert_reconciled, ingest_paths, rows

FIX = FIXTURES / "otel"
GENAI, OPENLLMETRY, OPENINFERENCE = FIX / "genai.jsonl", FIX / "openllmetry.json", FIX / "openinference.jsonl"
A, B, C = "0af7651916cd43dd8448eb211c80319c", "1bf7651916cd43dd8448eb211c80319d", "2cf7651916cd43dd8448eb211c80319e"
F, G = "5f07651916cd43dd8448eb211c8031a1", "6a07651916cd43dd8448eb211c8031a2"


def sessions(wh) -> dict[str, dict]:
    found = wh.frame("SELECT * FROM raw.sessions ORDER BY session_id").to_dicts()
    return {r["session_id"]: {**r, "metadata": orjson.loads(r["metadata_json"])} for r in found}


def session_events(wh, session_id: str, columns: str) -> list[tuple]:
    return rows(wh, f"SELECT {columns} FROM raw.events WHERE session_id = ? ORDER BY seq", [session_id])


def user_messages(wh, session_id: str) -> list[str | None]:
    sql = "SELECT text FROM raw.events WHERE session_id = ? AND source = 'user' AND name = 'message' ORDER BY seq"
    return [r[0] for r in rows(wh, sql, [session_id])]


# --- GenAI semantic conventions -------------------------------------------------------------------------------


def test_genai_sessions_segments_and_events(wh):
    ingest_paths(wh, GENAI)
    found = sessions(wh)
    assert sorted(found) == [C, "conv-42"]
    conv = found["conv-42"]
    assert (conv["source_format"], conv["user_id"], conv["n_events"], conv["n_user_messages"], conv["n_segments"]) == (
        "otel",
        "u-7",
        8,
        2,
        2,
    )
    assert session_events(
        wh, "conv-42", "event_id, source, kind, name, original_name, segment_index, segment_close"
    ) == [
        (A, "user", "action", "message", None, 0, None),
        ("a2a2a2a2a2a2a2a2", "agent", "action", "message", None, 0, None),
        ("a3a3a3a3a3a3a3a3", "agent", "action", "other", "run_tests", 0, None),
        ("a3a3a3a3a3a3a3a3:result", "environment", "observation", "other", "run_tests", 0, None),
        ("a4a4a4a4a4a4a4a4", "agent", "action", "message", None, 0, None),
        ("a1a1a1a1a1a1a1a1", "agent", "action", "finish", "invoke_agent", 0, "finish"),
        (B, "user", "action", "message", None, 1, None),
        ("b1b1b1b1b1b1b1b1", "agent", "action", "message", None, 1, "awaiting_response"),
    ]
    assert (found[C]["n_events"], found[C]["n_user_messages"], found[C]["n_segments"], found[C]["user_id"]) == (
        3,
        1,
        1,
        None,
    )
    # the failed root is an error observation, not a finish
    assert session_events(wh, C, "name, kind") == [
        ("message", "action"),
        ("message", "action"),
        ("error", "observation"),
    ]
    assert rows(wh, "SELECT session_id, segment_index FROM staging.work_segments ORDER BY 1, 2") == [
        (C, 0),
        ("conv-42", 0),
        ("conv-42", 1),
    ]


def test_genai_user_words_are_never_system_prompts_or_tool_results(wh):
    ingest_paths(wh, GENAI)
    assert user_messages(wh, "conv-42") == ["Why does my build fail?", "Thanks! Can you also add a test for it?"]
    assert user_messages(wh, C) == ["List open issues"]
    every_user_text = " ".join(t or "" for t in user_messages(wh, "conv-42") + user_messages(wh, C))
    for not_the_user in ("Be brief.", "You are a build doctor.", "1 failed", "You triage issues."):
        assert not_the_user not in every_user_text
    # the tool's result is the environment's observation
    assert rows(wh, "SELECT text FROM raw.events WHERE event_id = 'a3a3a3a3a3a3a3a3:result'") == [
        ("1 failed: ImportError",)
    ]


def test_genai_model_and_tokens_count_each_call_once(wh):
    # conv-42: A2 100/20 + A4 200/40 + B1 150/30; A1's 300/60 is its children's sum and is not added again
    ingest_paths(wh, GENAI)
    found = sessions(wh)
    assert found["conv-42"]["metadata"]["llm_usage"] == {
        "cost_usd": None,
        "prompt_tokens": 450,
        "completion_tokens": 90,
    }
    assert found["conv-42"]["metadata"]["model"] == "gpt-4o-2024-08-06"
    assert {k: found["conv-42"]["metadata"][k] for k in ("service_name", "agent_name", "agent_version")} == {
        "service_name": "support-agent",
        "agent_name": "helper",
        "agent_version": "2.1.0",
    }
    assert found[C]["metadata"]["llm_usage"] == {"cost_usd": None, "prompt_tokens": 50, "completion_tokens": 10}
    assert found[C]["metadata"]["model"] == "claude-sonnet-4"


def test_genai_bad_spans_are_quarantined_and_counts_reconcile(wh):
    ingest_paths(wh, GENAI)
    reasons = rows(wh, "SELECT record_index, event_index, record_type, reason FROM raw.quarantine ORDER BY 2")
    assert [r[:3] for r in reasons] == [(1, 3, "event"), (1, 4, "event")]
    assert reasons[0][3].startswith("span has no traceId")
    assert reasons[1][3].startswith(
        f"span a3a3a3a3a3a3a3a3 of trace {A} appears again (first on line 0 of genai.jsonl)"
    )
    # 13 spans and results read: 11 events accepted, 2 quarantined
    assert rows(wh, "SELECT events_read, events_accepted, events_quarantined FROM raw.drops") == [(13, 11, 2)]
    assert_reconciled(wh, GENAI.name)


def test_genai_evaluation_event_is_an_eval_score_never_a_rating(wh):
    ingest_paths(wh, GENAI)
    assert rows(wh, "SELECT session_id, event_id, name, value, string_value, source FROM raw.eval_scores") == [
        ("conv-42", "a2a2a2a2a2a2a2a2", "Relevance", 0.9, "relevant", "EVAL")
    ]
    assert wh.count(tables.RATINGS) == 0
    assert rows(wh, "SELECT count(*) FROM staging.session_labels") == [(0,)]


def test_genai_evaluation_results_as_log_records_score_the_spans_they_name(wh, tmp_path):
    # logs/logs.json: a logs pipeline's file beside the traces' (one export): Groundedness 0.25 on A4 (conv-42), a
    # label-only Relevance on a span of a trace not in the export (its session left to staging), an application log
    drop = tmp_path / "collector"
    drop.mkdir()
    shutil.copy(GENAI, drop / "traces.json")
    shutil.copy(FIX / "logs" / "logs.json", drop / "logs.json")
    ingest_paths(wh, drop)
    assert rows(
        wh, "SELECT session_id, event_id, name, value, string_value, data_type FROM raw.eval_scores ORDER BY 2"
    ) == [
        (None, "9f9f9f9f9f9f9f9f", "Relevance", None, "relevant", "CATEGORICAL"),
        ("conv-42", "a2a2a2a2a2a2a2a2", "Relevance", 0.9, "relevant", "NUMERIC"),
        ("conv-42", "a4a4a4a4a4a4a4a4", "Groundedness", 0.25, None, "NUMERIC"),
    ]
    assert wh.count(tables.RATINGS) == 0
    assert sorted(sessions(wh)) == [C, "conv-42"]
    assert_reconciled(wh, drop.name)


def test_messages_recorded_as_an_inference_details_event_are_their_spans(wh, tmp_path):
    # C's chat span without its messages (content recorded to events only); logs.json's
    # gen_ai.client.inference.operation.details record names that span and holds them
    drop = tmp_path / "collector"
    drop.mkdir()
    lines = _lines(GENAI)
    for span in lines[0]["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        if span["spanId"] == "c2c2c2c2c2c2c2c2":
            span["attributes"] = [a for a in span["attributes"] if not a["key"].endswith(".messages")]
    (drop / "traces.json").write_text("".join(json.dumps(line) + "\n" for line in lines))
    ingest_paths(wh, drop)
    assert user_messages(wh, C) == [None]  # without the event: no words
    wh.con.execute(
        "DELETE FROM raw.sessions; DELETE FROM raw.events; DELETE FROM raw.drops; DELETE FROM raw.quarantine"
    )
    shutil.copy(FIX / "logs" / "logs.json", drop / "logs.json")
    ingest_paths(wh, drop)
    assert user_messages(wh, C) == ["List open issues"]
    assert rows(wh, "SELECT text FROM raw.events WHERE event_id = 'c2c2c2c2c2c2c2c2'") == [
        ("There are 3 open issues.",)
    ]


# --- OpenLLMetry's indexed attributes ---------------------------------------------------------------------------


def test_openllmetry_indexed_prompts_one_document(wh):
    ingest_paths(wh, OPENLLMETRY)
    found = sessions(wh)
    assert list(found) == ["chat-9"]
    chat = found["chat-9"]
    assert (chat["user_id"], chat["n_events"], chat["n_user_messages"], chat["n_segments"]) == ("alice", 8, 2, 2)
    assert user_messages(wh, "chat-9") == ["What is PULSE?", "And how do I rate a session?"]
    # 25 + 60 prompt tokens and 12 + 20 completion tokens, under the legacy and the current names
    assert chat["metadata"]["llm_usage"] == {"cost_usd": None, "prompt_tokens": 85, "completion_tokens": 32}
    assert chat["metadata"]["model"] == "gpt-3.5-turbo-0125"
    assert session_events(wh, "chat-9", "name, original_name, text")[1:5] == [
        ("other", "search_docs", '{"args": ["PULSE"], "kwargs": {}}'),
        ("other", "search_docs", '["README.md"]'),
        ("message", None, "PULSE estimates whether users got happier."),
        ("finish", "workflow", "PULSE estimates whether users got happier."),  # a JSON string, unquoted
    ]
    assert_reconciled(wh, OPENLLMETRY.name)


# --- OpenInference, with its annotations ------------------------------------------------------------------------


def test_openinference_sessions_words_usage_and_cost(wh):
    ingest_paths(wh, OPENINFERENCE)
    found = sessions(wh)
    assert list(found) == ["sess-oi-1"]  # the EVALUATOR carrier's trace is no session
    oi = found["sess-oi-1"]
    assert (oi["user_id"], oi["n_events"], oi["n_user_messages"], oi["n_segments"]) == ("bob", 8, 2, 2)
    assert user_messages(wh, "sess-oi-1") == ["Summarize the failing test", "Now fix it"]
    usage = oi["metadata"]["llm_usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (110, 40)
    assert usage["cost_usd"] == pytest.approx(0.0032)
    assert oi["metadata"]["model"] == "gpt-4o-mini"
    assert session_events(wh, "sess-oi-1", "event_id, name, text")[5:] == [
        (G, "message", "Now fix it"),
        ("a7a7a7a7a7a7a7a7", "message", "Fixed: f() returns 1."),  # from message.contents
        ("a6a6a6a6a6a6a6a6", "finish", "Fixed: f() returns 1."),
    ]


def test_openinference_human_annotations_rate_their_segments(wh):
    ingest_paths(wh, OPENINFERENCE)
    # the inline trace annotation rates F's segment (0); the post-hoc carrier's rates G's (1), through its link
    assert rows(wh, "SELECT session_id, event_id, rating, scale, origin FROM raw.ratings ORDER BY record_index") == [
        ("sess-oi-1", F, 4.0, "stars_1_5", "score"),
        ("sess-oi-1", G, 2.0, "stars_1_5", "score"),
    ]
    assert rows(wh, "SELECT session_id, segment_index, rating FROM staging.segment_ratings ORDER BY 2") == [
        ("sess-oi-1", 0, 4.0),
        ("sess-oi-1", 1, 2.0),
    ]
    # label: mean stars 3 -> (3 - 1) / 4
    assert rows(wh, "SELECT session_id, label FROM staging.session_labels") == [("sess-oi-1", 0.5)]


def test_openinference_llm_annotations_are_eval_scores_never_labels(wh):
    ingest_paths(wh, OPENINFERENCE)
    assert rows(wh, "SELECT event_id, name, value, string_value, data_type FROM raw.eval_scores ORDER BY name") == [
        ("f2f2f2f2f2f2f2f2", "correctness", 0.8, "correct", "NUMERIC"),
        (None, "frustration", None, "not_frustrated", "CATEGORICAL"),  # session scope
    ]
    assert rows(wh, "SELECT count(*) FROM raw.ratings WHERE score_json LIKE '%correctness%'") == [(0,)]
    # the nameless HUMAN annotation is quarantined with its reason; the drop reconciles
    assert rows(wh, "SELECT record_type, reason FROM raw.quarantine") == [("score", "score has no name")]
    assert_reconciled(wh, OPENINFERENCE.name)


# --- files, drops and malformed input -----------------------------------------------------------------------------


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_collector_export_rotated_into_two_files_is_one_drop_of_whole_sessions(wh, tmp_path):
    # the file exporter's rotation: trace A's spans are in both files, as are conv-42's traces
    drop = tmp_path / "collector"
    drop.mkdir()
    first, second = _lines(GENAI)
    (drop / "traces-2026-11-30T10-00-05.000.json").write_text(json.dumps(first) + "\n")
    (drop / "traces.json").write_text(json.dumps(second) + "\n")
    # a copy cut short, pretty-printed: one quarantine row for the file, not one for each of its lines
    (drop / "partial.json").write_text(json.dumps(first, indent=2)[:5000])
    ingest_paths(wh, drop)
    found = sessions(wh)
    assert sorted(found) == [C, "conv-42"]
    assert (found["conv-42"]["n_events"], found["conv-42"]["n_segments"]) == (8, 2)
    assert found["conv-42"]["metadata"]["llm_usage"]["prompt_tokens"] == 450
    assert rows(wh, "SELECT source_file, record_index, event_index FROM raw.quarantine ORDER BY 1, 3") == [
        ("partial.json", None, None),
        ("traces.json", 0, 3),
        ("traces.json", 0, 4),
    ]
    assert_reconciled(wh, drop.name)


def test_malformed_lines_and_parts_are_quarantined_with_their_reasons(wh, tmp_path):
    first, second = _lines(GENAI)
    bad_attributes = json.loads(json.dumps(second))
    bad_attributes["resourceSpans"][0]["scopeSpans"][0]["spans"] = [
        {"traceId": A, "spanId": "e0e0e0e0e0e0e0e0", "attributes": [{"key": "x", "value": {"intValue": "seven"}}]}
    ]
    lines = [
        json.dumps(first),
        '{"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [',  # truncated
        json.dumps({"resourceSpans": ["not an object"]}),
        json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": "none"}]}]}),
        json.dumps({"session_id": "x", "rating": 4}),  # another kind of record in an OTLP file
        json.dumps(bad_attributes),
        json.dumps(second),
    ]
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(lines) + "\n")
    ingest_paths(wh, path)
    reasons = rows(wh, "SELECT record_index, record_type, reason FROM raw.quarantine ORDER BY 1, event_index")
    assert [(i, t) for i, t, _ in reasons] == [
        (1, "unknown"),
        (2, "unknown"),
        (3, "unknown"),
        (4, "unknown"),
        (5, "event"),
        (6, "event"),
        (6, "event"),
    ]
    assert reasons[0][2].startswith("not valid JSON")
    assert reasons[1][2] == "resourceSpans[0] is not an object"
    assert reasons[2][2] == "resourceSpans[0].scopeSpans[0] has no list of spans"
    assert reasons[3][2].startswith("not an OTLP/JSON traces or logs document")
    assert reasons[4][2].startswith("span e0e0e0e0e0e0e0e0: attribute 'x': value")
    assert sorted(sessions(wh)) == [C, "conv-42"]
    assert_reconciled(wh, path.name)


def test_other_services_traces_are_said_in_one_row_not_read_as_sessions(wh, tmp_path):
    # the Collector exports every trace: two HTTP traces (three spans) with no GenAI attribute beside the fixture's
    http = [
        {"traceId": f"{i:x}" * 32, "spanId": f"{i:x}{j}" * 8, "name": "GET /health", "attributes": [
            {"key": "http.request.method", "value": {"stringValue": "GET"}}]}
        for i, j in ((10, 1), (10, 2), (11, 1))
    ]  # fmt: skip
    path = tmp_path / "traces.json"
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": http}]}]}
    path.write_text(GENAI.read_text() + json.dumps(doc) + "\n")
    ingest_paths(wh, path)
    assert sorted(sessions(wh)) == [C, "conv-42"]
    (reason,) = rows(wh, "SELECT reason FROM raw.quarantine WHERE record_type = 'unknown'")
    assert reason[0].startswith("2 traces (3 spans) carry no GenAI, OpenInference, OpenLLMetry or Langfuse attribute")
    assert_reconciled(wh, path.name)


def test_an_otlp_document_among_other_records_says_why(wh, tmp_path):
    path = tmp_path / "mixed.jsonl"
    ratings = [json.dumps({"session_id": f"s{i}", "rating": 4}) for i in range(3)]
    path.write_text("\n".join([*ratings, json.dumps(_lines(GENAI)[0])]) + "\n")
    ingest_paths(wh, path)
    assert rows(wh, "SELECT record_index, reason FROM raw.quarantine WHERE stage = 'ingest'") == [
        (3, OTLP_AMONG_RECORDS)
    ]
    assert_reconciled(wh, path.name)


def test_a_file_larger_than_a_record_is_read_line_by_line(wh, tmp_path, monkeypatch):
    # PULSE_MAX_RECORD_MB bounds a line, not a Collector file (rotation makes 100 MB files by default)
    path = tmp_path / "big.json"
    shutil.copy(GENAI, path)
    line_bytes = max(len(line) for line in GENAI.read_bytes().splitlines())
    monkeypatch.setenv("PULSE_MAX_RECORD_MB", str((line_bytes + 100) / (1 << 20)))
    assert path.stat().st_size > line_bytes + 100
    ingest_paths(wh, path)
    assert sorted(sessions(wh)) == [C, "conv-42"]
    assert_reconciled(wh, path.name)


# --- the pieces ---------------------------------------------------------------------------------------------------


def test_any_value_decodes_every_kind():
    value = {
        "kvlistValue": {
            "values": [
                {"key": "s", "value": {"stringValue": "x"}},
                {"key": "i", "value": {"intValue": "9007199254740993"}},  # beyond a double's exact integers
                {"key": "d", "value": {"doubleValue": 0.5}},
                {"key": "b", "value": {"boolValue": False}},
                {"key": "a", "value": {"arrayValue": {"values": [{"intValue": 1}, {}]}}},
            ]
        }
    }
    assert decode_value(value) == {"s": "x", "i": 9007199254740993, "d": 0.5, "b": False, "a": [1, None]}


def test_a_thumb_kept_as_a_boolean_is_a_boolean_score():
    from pulse_pipeline.ingest.otel import span_feedback

    span = read_span(
        {
            "traceId": A,
            "spanId": "f0f0f0f0f0f0f0f0",
            "attributes": [
                {"key": "trace.annotations.0.annotation.name", "value": {"stringValue": "thumbs"}},
                {"key": "trace.annotations.0.annotation.score", "value": {"boolValue": True}},
                {"key": "trace.annotations.0.annotation.annotator_kind", "value": {"stringValue": "HUMAN"}},
            ],
        },
        {},
        0,
        0,
    )
    (item,) = span_feedback(span)
    assert (item.scope, item.score.data_type, item.score.value, item.score.source) == (
        "trace",
        "BOOLEAN",
        1.0,
        "ANNOTATION",
    )


@pytest.mark.parametrize(
    ("messages", "words"),
    [
        ([("system", "rules", False), ("user", "hi", False)], "hi"),
        ([("user", "a", False), ("assistant", "b", False), ("user", "c", False), ("user", "d", False)], "c\n\nd"),
        # Anthropic-style tool results in a user-role message are no words: the last user message is
        ([("user", "fix it", False), ("assistant", None, False), ("user", None, True)], "fix it"),
        ([("system", "rules", False), ("tool", "output", True)], None),
    ],
)
def test_the_users_words_are_the_new_turn(messages, words):
    assert users_words([Message(*m) for m in messages]) == words


def test_cost_from_openinference_or_openlit_and_prompt_plus_completion():
    from pulse_pipeline.ingest.otel import span_usage

    def usage(attributes: dict) -> tuple:
        pairs = [{"key": k, "value": {"doubleValue": v}} for k, v in attributes.items()]
        return span_usage(read_span({"traceId": A, "spanId": "f0f0f0f0f0f0f0f0", "attributes": pairs}, {}, 0, 0))

    assert usage({"llm.cost.total": 0.5, "gen_ai.usage.cost": 9.0}) == (None, None, 0.5)
    assert usage({"gen_ai.usage.cost": 0.25}) == (None, None, 0.25)  # OpenLIT's key
    assert usage({"llm.cost.prompt": 0.125, "llm.cost.completion": 0.25}) == (None, None, 0.375)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("Summarize the failing test", "Summarize the failing test"),
        (json.dumps([{"role": "system", "content": "rules"}, {"role": "user", "content": "hi"}]), "hi"),
        (json.dumps({"messages": [["system", "rules"], ["human", "hello"]]}), "hello"),  # LangChain tuples
        (json.dumps({"input": "hi", "chat_history": []}), None),  # call arguments: not a conversation
    ],
)
def test_plain_input_value_as_text_or_a_conversation(value, words):
    from pulse_pipeline.ingest.otel import plain_input

    pairs = [{"key": "input.value", "value": {"stringValue": value}}]
    messages = plain_input(read_span({"traceId": A, "spanId": "f0f0f0f0f0f0f0f0", "attributes": pairs}, {}, 0, 0))
    assert (users_words(messages) if messages else None) == words
