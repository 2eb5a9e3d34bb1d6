"""Adapters against every real sample file. Expected counts were worked out by reading the files:

- trajs_basic.json: one user message (id 0), no shell command, one segment closed by the finish (id 5).
- trajs_basic_gui_mode.json: state events; user message id 4, running at 5, awaiting_user_input at 17:
  one segment (ids 4..17, 14 events); two `run` commands (ids 7, 13).
- trajs_basic_interactions.json: no state events; user messages 0, 6, 12; agent messages 3 and 9 wait for a
  response, 15 is a finish: three segments closing at 3, 9 and 15.
- trajs_wrong_initial_state.json: one user message, one `run` (mv), finish at 9.
- resolver_mock_output.jsonl: two old-shape lines (no ids, no sources); each one task message; `run` actions:
  2 (touch, cat) and 1 (ls -R); both end in finish.
- multi_swe_bench_example_output.jsonl: three lines, one user message each, `run` actions 13, 12, 24; the third
  (ponyc-4588) has no finish, so its segment is open at stream end.
- sdk_goal_fixture_events.jsonl (V1): ten events, no user message, work starts at execution_status=running and
  never stops: one open segment; two terminal actions.
- sdk_v1_11_5_base_state.json (V1 SDK): a conversation's base state (id 11111111-2222-3333-4444-555555555555, model
  gpt-4o-mini, tools terminal, file_editor and task_tracker, an LLMSummarizingCondenser, masked api keys, empty
  stats). ``test_sdk_conversation_folder`` persists it with the ten events above as the SDK does.
"""

from __future__ import annotations

import json
import shutil

import pytest

from pulse_pipeline import tables
from pulse_pipeline.cli import main

from .helpers import SAMPLES, ingest_paths, needs_samples

V0 = SAMPLES / "openhands_v0"
V1 = SAMPLES / "openhands_v1"

# file -> (sessions, events, user messages per session, segments per session, shell commands per session)
EXPECTED = {
    V0 / "trajs_basic.json": (1, 4, [1], [1], [0]),
    V0 / "trajs_basic_gui_mode.json": (1, 18, [1], [1], [2]),
    V0 / "trajs_basic_interactions.json": (1, 6, [3], [3], [0]),
    V0 / "trajs_wrong_initial_state.json": (1, 8, [1], [1], [1]),
    V0 / "resolver_mock_output.jsonl": (2, 52, [1, 1], [1, 1], [2, 1]),
    V0 / "multi_swe_bench_example_output.jsonl": (3, 222, [1, 1, 1], [1, 1, 1], [13, 12, 24]),
    V1 / "sdk_goal_fixture_events.jsonl": (1, 10, [0], [1], [2]),
}


# samples that are no session on their own, and the test that reads them
PARTS_OF_FOLDERS = {V1 / "sdk_v1_11_5_base_state.json": "test_sdk_conversation_folder"}


@needs_samples
def test_every_sample_file_is_covered():
    on_disk = {p for folder in (V0, V1) for p in folder.iterdir() if p.suffix in (".json", ".jsonl")}
    assert on_disk == set(EXPECTED) | set(PARTS_OF_FOLDERS)


@needs_samples
@pytest.mark.parametrize("path", sorted(EXPECTED), ids=lambda p: p.name)
def test_sample_counts(wh, path):
    sessions, events, user_messages, segments, shell = EXPECTED[path]
    ingest_paths(wh, path)
    rows = wh.frame("SELECT n_user_messages, n_segments, n_shell_commands FROM raw.sessions ORDER BY record_index")
    assert rows.height == sessions
    assert wh.count(tables.EVENTS) == events
    assert rows["n_user_messages"].to_list() == user_messages
    assert rows["n_segments"].to_list() == segments
    assert rows["n_shell_commands"].to_list() == shell
    assert wh.count(tables.QUARANTINE) == 0
    # the staging segments agree with the counts made at ingest
    assert wh.con.execute("SELECT count(*) FROM staging.work_segments").fetchone()[0] == sum(segments)


@needs_samples
def test_segments_of_interactions_close_where_the_agent_waits(wh):
    ingest_paths(wh, V0 / "trajs_basic_interactions.json")
    segs = wh.frame("SELECT open_event_id, close_event_id, close_reason FROM staging.work_segments ORDER BY 1")
    assert segs.rows() == [("0", "3", "awaiting_response"), ("12", "15", "finish"), ("6", "9", "awaiting_response")]


@needs_samples
def test_state_segments_of_gui_mode(wh):
    ingest_paths(wh, V0 / "trajs_basic_gui_mode.json")
    seg = wh.frame("SELECT * FROM staging.work_segments").row(0, named=True)
    assert (seg["open_event_id"], seg["close_event_id"], seg["rated_event_id"]) == ("4", "17", "15")
    assert (seg["n_events"], seg["close_reason"], seg["closed"]) == (14, "awaiting_user_input", True)


@needs_samples
def test_events_are_lossless(wh):
    import orjson

    path = V0 / "trajs_basic_gui_mode.json"
    ingest_paths(wh, path)
    stored = [orjson.loads(r) for (r,) in wh.con.execute("SELECT raw_json FROM raw.events ORDER BY seq").fetchall()]
    assert stored == orjson.loads(path.read_bytes())


@needs_samples
def test_v1_exit_codes_and_states(wh):
    ingest_paths(wh, V1 / "sdk_goal_fixture_events.jsonl")
    obs = wh.frame("SELECT exit_code FROM raw.events WHERE kind = 'observation' AND name = 'run' ORDER BY seq")
    # the first two report no top-level exit code but metadata.exit_code -1 (not run: "multiple commands")
    assert obs["exit_code"].to_list() == [-1, -1, 1]
    assert wh.frame("SELECT agent_state FROM raw.events WHERE agent_state IS NOT NULL")["agent_state"].to_list() == [
        "running"
    ]


@needs_samples
@pytest.mark.parametrize(
    "path", [V0 / "trajs_basic_interactions.json", V0 / "multi_swe_bench_example_output.jsonl"], ids=lambda p: p.name
)
def test_pulse_ingest_cli_on_samples(pulse_home, path, capsys):
    import json

    sessions, events, _, segments, _ = EXPECTED[path]
    assert main(["ingest", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["sessions"], summary["events"], summary["segments"]) == (sessions, events, sum(segments))
    assert summary["quarantined"] == 0 and summary["reconciled"]


@needs_samples
def test_sdk_conversation_folder(wh, tmp_path):
    """The SDK's on-disk layout (persistence_const.py), built from the samples: the folder is named by the
    conversation id's hex, base_state.json is the sample, and line i of sdk_goal_fixture_events.jsonl is
    events/event-<i:05d>-<its id>.json, beside the SDK's hidden lock and count marker. The counts are the JSONL's
    (EXPECTED): one session of ten events, no user message, one segment, two terminal commands."""
    folder = tmp_path / "persistence" / "11111111222233334444555555555555"
    (folder / "events").mkdir(parents=True)
    shutil.copyfile(V1 / "sdk_v1_11_5_base_state.json", folder / "base_state.json")
    lines = [line for line in (V1 / "sdk_goal_fixture_events.jsonl").read_text().splitlines() if line.strip()]
    for i, line in enumerate(lines):
        (folder / "events" / f"event-{i:05d}-{json.loads(line)['id']}.json").write_text(line)
    (folder / "events" / ".eventlog.lock").write_text("")
    (folder / "events" / f".eventlog-count-{len(lines)}.marker").write_text("")
    ingest_paths(wh, tmp_path / "persistence")
    assert wh.count(tables.QUARANTINE) == 0
    (s,) = wh.frame("SELECT * FROM raw.sessions").to_dicts()
    assert s["session_id"] == "11111111-2222-3333-4444-555555555555"  # base_state.json's id wins over the folder's
    assert (s["source_file"], s["source_format"]) == (folder.name, "openhands_v1_sdk_conversation")
    _, events, user_messages, segments, shell = EXPECTED[V1 / "sdk_goal_fixture_events.jsonl"]
    counts = (s["n_events"], [s["n_user_messages"]], [s["n_segments"]], [s["n_shell_commands"]])
    assert counts == (events, user_messages, segments, shell)
    stored = [e for (e,) in wh.con.execute("SELECT event_id FROM raw.events ORDER BY seq").fetchall()]
    assert stored == [json.loads(line)["id"] for line in lines]  # index order
    meta = json.loads(s["metadata_json"])
    assert meta["model"] == "gpt-4o-mini"
    assert [t["name"] for t in meta["agent"]["tools"]] == ["terminal", "file_editor", "task_tracker"]
    assert (meta["agent"]["kind"], meta["agent"]["condenser"]["kind"]) == ("Agent", "LLMSummarizingCondenser")
    assert meta["agent"]["llm"]["usage_id"] == "test-llm" and meta["execution_status"] == "idle"
    assert meta["id_from_location"] == folder.name
    # credentials are not copied (the sample's keys are masked, "**********"); empty stats give no llm_usage
    assert "api_key" not in s["metadata_json"] and "secret_registry" not in meta and "llm_usage" not in meta
