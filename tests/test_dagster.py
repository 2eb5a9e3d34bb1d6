"""The Dagster shell: definitions load, the sensor turns drops into partitions, checks guard the tables."""

from __future__ import annotations

import shutil
import subprocess
import sys

import dagster as dg
import duckdb
import pytest

from pulse_pipeline import tables
from pulse_pipeline.definitions import build_definitions
from pulse_pipeline.defs.ingest.partitions import drops_partitions
from pulse_pipeline.defs.ingest.sensors import drop_sensor
from pulse_pipeline.defs.publish import publish_if_whole
from pulse_pipeline.defs.resources import warehouse_resource
from pulse_pipeline.ingest.drop import fingerprint
from pulse_pipeline.ingest.load import reconcile_drop
from pulse_pipeline.runs import instance_for, materialize

from .helpers import FIXTURES, SAMPLES, needs_samples


def test_definitions_load_with_every_contract_table(pulse_home):
    defs = build_definitions(pulse_home)
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    # every contract table is an asset, except the LLM cache (the annotator's own) and the per-session tables'
    # bookkeeping (incremental.py), plus the rubric-shaped wide table; one asset is a file, not a table: the report
    not_assets = (tables.LLM_CACHE, tables.COMPUTED_VERSIONS)
    expected = {f"{t.schema}/{t.name}" for t in tables.ALL_TABLES if t not in not_assets}
    assert keys == expected | {"features/session_features", "report/index_html"}
    jobs = {j.name for j in defs.resolve_all_job_defs()}
    assert jobs >= {"ingest_drop", "refresh_downstream", "ingest_drop_and_refresh"}
    assert {s.name for s in defs.sensors} == {
        "drop_sensor",
        "pulse_automation",
        "publish_warehouse",
        "langfuse_pull_sensor",
    }


def test_workspace_module_exposes_defs():
    import pulse_pipeline.definitions as module

    assert isinstance(module.defs, dg.Definitions)


def _evaluate(
    instance: dg.DagsterInstance, resources: dict, cursor: str | None = None, definitions: dg.Definitions | None = None
) -> dg.SensorResult:
    """One evaluation of the drop sensor (its resources set up and torn down around it, as the daemon does; in the
    code location's ``definitions`` when given, as the daemon evaluates it)."""
    with dg.build_sensor_context(
        instance=instance, resources=resources, cursor=cursor, definitions=definitions
    ) as context:
        return drop_sensor(context)


def test_sensor_adds_a_partition_and_a_run_per_drop(pulse_home):
    a = pulse_home.drops / "first batch.jsonl"
    a.write_text('{"session_id": "s1", "events": [{"source": "user", "type": "message", "text": "hi"}]}\n')
    folder = pulse_home.drops / "second"
    folder.mkdir()
    (folder / "ratings.csv").write_text("conversation_id,event_id,rating\ns1,,4\n")
    (pulse_home.drops / ".hidden").write_text("ignored")
    instance = dg.DagsterInstance.ephemeral()
    resources = {"warehouse": warehouse_resource(pulse_home)}

    result = _evaluate(instance, resources)
    assert sorted(r.partition_key for r in result.run_requests) == ["first_batch.jsonl", "second"]
    added = result.dynamic_partitions_requests[0]
    assert added.partitions_def_name == drops_partitions.name
    assert sorted(added.partition_keys) == ["first_batch.jsonl", "second"]
    assert {r.run_key for r in result.run_requests} == {
        f"first_batch.jsonl:{fingerprint(a)}",
        f"second:{fingerprint(folder)}",
    }

    # once registered, a drop is not added again; its run key only changes when the drop is rewritten
    instance.add_dynamic_partitions(drops_partitions.name, ["first_batch.jsonl", "second"])
    again = _evaluate(instance, resources)
    assert again.dynamic_partitions_requests == []
    before = {r.run_key for r in again.run_requests}
    (folder / "ratings.csv").write_text("conversation_id,event_id,rating\ns1,,5\n")
    rewritten = _evaluate(instance, resources)
    changed = {r.run_key for r in rewritten.run_requests} - before
    assert [k.split(":")[0] for k in changed] == ["second"]


def test_reconciliation_fails_when_a_row_goes_missing(wh):
    drop = FIXTURES / "reconcile.jsonl"
    from pulse_pipeline.ingest.load import load_drop

    load_drop(wh, "d", drop)
    ok, facts = reconcile_drop(wh, "d")
    assert ok and facts["records_read"] == 3 and facts["events_read"] == 4
    wh.con.execute("DELETE FROM raw.events WHERE seq = 1")
    ok, facts = reconcile_drop(wh, "d")
    assert not ok and facts["events_accepted"] == 3


@needs_samples
def test_materialize_runs_every_asset_and_its_checks(pulse_home):
    for name in ("trajs_basic_gui_mode.json", "resolver_mock_output.jsonl"):
        shutil.copy2(SAMPLES / "openhands_v0" / name, pulse_home.drops / name)
    keys = materialize(pulse_home, say=lambda _: None).keys
    # every asset but the on-demand coverage validation: the contract tables less the LLM cache, the bookkeeping
    # and the validation, plus features/session_features and the report (a file)
    assert len(keys) == len(tables.ALL_TABLES) - 1
    assert (pulse_home.report / "index.html").is_file()
    con = duckdb.connect(str(pulse_home.warehouse), read_only=True)  # the published copy
    try:
        assert con.execute("SELECT count(*) FROM staging.sessions").fetchone()[0] == 3
        assert con.execute("SELECT count(*) FROM staging.work_segments").fetchone()[0] == 3
    finally:
        con.close()
    instance = dg.DagsterInstance.get()
    checks = [
        dg.AssetCheckKey(dg.AssetKey(["staging", table]), name)
        for table, name in (("sessions", "one_row_per_session"), ("work_segments", "segments_match_sessions"))
    ]
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(checks)
    assert {key: record.status.value for key, record in latest.items()} == {key: "SUCCEEDED" for key in checks}


@pytest.mark.slow
def test_published_copy_does_not_block_the_writer(pulse_home):
    """An analyst holding the published warehouse open must not stop the pipeline from writing."""
    from pulse_pipeline.runs import ingest

    drop = FIXTURES / "reconcile.jsonl"
    ingest(pulse_home, drop, say=lambda _: None)
    analyst = duckdb.connect(str(pulse_home.warehouse), read_only=True)
    try:
        other = pulse_home.root / "other.jsonl"
        other.write_text('{"session_id": "z", "events": [{"source": "user", "type": "message", "text": "x"}]}\n')
        summary = ingest(pulse_home, other, say=lambda _: None)
        assert summary.sessions == 1
        # the analyst still sees the copy they opened
        assert analyst.execute("SELECT count(*) FROM raw.drops").fetchone()[0] == 1
    finally:
        analyst.close()
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as fresh:
        assert fresh.execute("SELECT count(*) FROM raw.drops").fetchone()[0] == 2


def test_importing_the_definitions_creates_nothing(tmp_path):
    """Loading the code location (as `dg dev` and every run do) leaves PULSE_HOME alone: the CLI prepares it."""
    import subprocess
    import sys

    home = tmp_path / "not-yet"
    code = "import pulse_pipeline.definitions as d; print(len(list(d.defs.assets)))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PULSE_HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(out.stdout.strip()) > 0
    assert not home.exists()


def _requests(home, instance: dg.DagsterInstance, definitions: dg.Definitions | None = None) -> dg.SensorResult:
    """One evaluation of the drop sensor, as the daemon makes it (the daemon then adds the partitions it asks for)."""
    result = _evaluate(instance, {"warehouse": warehouse_resource(home)}, definitions=definitions)
    for added in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(added.partitions_def_name, list(added.partition_keys))
    return result


@pytest.mark.slow
def test_the_sensors_run_refreshes_what_the_drop_makes_stale_and_publishes(pulse_home):
    """Issue 33, item 5: the drop sensor's run used to load the drop alone; publishing was then refused ("tables are
    older than what they read") until the automation sensor's run ended, minutes later. The run it requests now
    leaves a whole state: published at once, with the drop's two sessions (canon-1, canon-2) visible.

    The request names the job's every asset (``sensors.drop_job_assets``): a run without an asset selection let the
    automation sensor see each table the run refreshed as updated behind its children, and rebuild the report
    after the run (CI, 2026-12-04). Named, the run is still the whole job, its asset checks included."""
    shutil.copyfile(FIXTURES / "canonical" / "sessions.jsonl", pulse_home.drops / "a.jsonl")
    instance = instance_for(pulse_home)
    defs = build_definitions(pulse_home)
    (request,) = _requests(pulse_home, instance, defs).run_requests
    job = defs.resolve_job_def(drop_sensor.job_name)
    graph = defs.resolve_asset_graph()
    assert set(request.asset_selection) == set(job.asset_layer.selected_asset_keys)
    assert dg.AssetKey(["report", "index_html"]) in request.asset_selection
    result = job.execute_in_process(
        instance=instance,
        partition_key=request.partition_key,
        asset_selection=request.asset_selection,
        raise_on_error=False,
    )
    assert result.success
    assert result.dagster_run.asset_selection == set(request.asset_selection)  # what the automation sensor reads
    checks = {e.asset_check_key for e in result.get_asset_check_evaluations()}
    assert checks == {k for k in graph.asset_check_keys if k.asset_key in set(request.asset_selection)}

    assert publish_if_whole(instance, graph, pulse_home.work_db, pulse_home.warehouse) is None
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        assert con.execute("SELECT session_id FROM staging.sessions ORDER BY 1").fetchall() == [
            ("canon-1",),
            ("canon-2",),
        ]
        assert con.execute("SELECT count(*) FROM features.session_features").fetchone()[0] == 2
    # and the drop, loaded as it is, is not requested again (not only left to Dagster's run-key check)
    assert _requests(pulse_home, instance).run_requests == []


@pytest.mark.slow
def test_the_sensor_never_runs_a_drop_pulse_ingest_loaded(pulse_home, tmp_path):
    """Issue 33, item 5: `pulse ui` on a home where `pulse demo` (or `pulse ingest`) had loaded a drop requested a
    run for it again, and the automation then rebuilt everything. Loaded as it is now means no request: by the
    Dagster instance's record, and, for an instance that has none (a new DAGSTER_HOME, a home loaded before the
    record existed), by the warehouse's raw.drops; a rewritten drop is requested."""
    from pulse_pipeline.runs import ingest

    source = tmp_path / "a.jsonl"
    shutil.copyfile(FIXTURES / "canonical" / "sessions.jsonl", source)
    summary = ingest(pulse_home, source, say=lambda _: None)
    assert summary.sessions == 2
    assert _requests(pulse_home, instance_for(pulse_home)).run_requests == []
    assert _requests(pulse_home, dg.DagsterInstance.ephemeral()).run_requests == []

    # a run writing holds the working database: what the instance does not vouch for waits for a later tick
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_FILE, str(pulse_home.work_db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        busy = _requests(pulse_home, dg.DagsterInstance.ephemeral())
        assert busy.run_requests == [] and "is busy" in busy.skip_reason.skip_message
    finally:
        holder.kill()
        holder.wait()

    drop = pulse_home.drops / "a.jsonl"
    drop.write_text(drop.read_text() + drop.read_text().splitlines()[0] + "\n")
    (rewritten,) = _requests(pulse_home, instance_for(pulse_home)).run_requests
    assert rewritten.partition_key == "a.jsonl" and rewritten.run_key == f"a.jsonl:{fingerprint(drop)}"


HOLD_THE_FILE = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])  # DuckDB's lock on the file, as a run's step takes it
print("holding", flush=True)
time.sleep(120)
"""
