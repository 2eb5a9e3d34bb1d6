"""What analysts open is only ever a whole state: runs killed at random points publish nothing half-built, a
publish happens only when the working database is whole, and an analyst's own writes never reach other readers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from pulse_pipeline import tables
from pulse_pipeline.connections import connect
from pulse_pipeline.defs.publish import publish_if_whole, publish_sensor, stale_assets, why_not_whole
from pulse_pipeline.defs.resources import WarehouseResource
from pulse_pipeline.ingest import load
from pulse_pipeline.ingest.load import load_drop, unfinished_drops
from pulse_pipeline.publish import PUBLISHED_MODE, publish, wal_of
from pulse_pipeline.settings import LAKE_CATALOG, ONE_FILE
from pulse_pipeline.warehouse import Warehouse


def _drop(folder: Path, name: str, sessions: int, files: int = 1) -> Path:
    """A drop of ``sessions`` one-event sessions named ``<name>-<i>``, in ``files`` canonical JSONL files."""
    path = folder / name
    path.mkdir(parents=True)
    lines = [
        f'{{"session_id": "{name}-{i}", "events": [{{"source": "user", "type": "message", "text": "hi {i}"}}]}}\n'
        for i in range(sessions)
    ]
    for f in range(files):
        (path / f"sessions-{f}.jsonl").write_text("".join(lines[f::files]))
    return path


def _per_drop(published: Path) -> dict[str, int]:
    """Sessions per drop as a new reader of the published file sees them."""
    with duckdb.connect(str(published), read_only=True) as con:
        return dict(con.execute("SELECT drop_id, count(*) FROM raw.sessions GROUP BY 1").fetchall())


# An analyst's shell: a read-write connection to the published file that runs each line it is sent and stays open;
# it answers "done", or "refused: <why>" when DuckDB refuses the statement.
ANALYST = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
for line in sys.stdin:
    try:
        con.execute(line)
        print("done", flush=True)
    except duckdb.Error as exc:
        print("refused: " + str(exc).splitlines()[0], flush=True)
"""


@pytest.mark.parametrize("storage", ["lake", ONE_FILE])
def test_an_analysts_writes_to_the_published_file_never_reach_other_readers(tmp_path, monkeypatch, storage):
    """The issue's reproduction: an analyst deleted drop c3's sessions through their own connection and left it
    open; the next publish showed c3 = 500 and c2 missing to every reader (DuckDB replayed the analyst's WAL onto
    the new copy by row id), an UPDATE landed on other sessions, and it persisted across later publishes.

    In the lake (the default) the published file holds views, so DuckDB refuses the writes outright; with one file
    (``PULSE_LAKE_CATALOG=none``) a copy takes them, and publishing discards them. Other readers see every drop
    whole either way."""
    if storage == ONE_FILE:
        monkeypatch.setenv(LAKE_CATALOG, ONE_FILE)
    work, published = tmp_path / "work.duckdb", tmp_path / "pulse.duckdb"
    drops = {name: _drop(tmp_path / "drops", name, 500) for name in ("c1", "c2", "c3")}
    taken = "done" if storage == ONE_FILE else "refused: Binder Error: Can only {} base table"

    def load_and_publish(*names: str) -> None:
        con = connect(work)
        try:
            for name in names:
                load_drop(Warehouse(con), name, drops[name])
        finally:
            con.close()
        assert publish(work, published) is None

    load_and_publish("c1", "c2", "c3")
    analyst = subprocess.Popen(
        [sys.executable, "-c", ANALYST, str(published)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )

    def analyst_runs(sql: str) -> str:
        analyst.stdin.write(sql + "\n")
        analyst.stdin.flush()
        return analyst.stdout.readline().rstrip("\n")

    try:
        assert analyst_runs("DELETE FROM raw.sessions WHERE drop_id = 'c3'") == taken.format("delete from")
        # one file: the analyst's delete sits in the WAL beside the published file
        assert wal_of(published).exists() == (storage == ONE_FILE)
        load_and_publish("c1")  # c1 is loaded again: its rows move to the end of the working table
        assert _per_drop(published) == {"c1": 500, "c2": 500, "c3": 500}

        update = "UPDATE raw.sessions SET user_id = 'analyst' WHERE drop_id = 'c2'"
        assert analyst_runs(update) == taken.format("update")
        load_and_publish("c2")
        assert _per_drop(published) == {"c1": 500, "c2": 500, "c3": 500}
        load_and_publish()  # and a second publish after it
        assert _per_drop(published) == {"c1": 500, "c2": 500, "c3": 500}
        with duckdb.connect(str(published), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM raw.sessions WHERE user_id = 'analyst'").fetchone()[0] == 0
            ids = con.execute("SELECT count(DISTINCT session_id) FROM raw.sessions").fetchone()[0]
        assert ids == 1500
    finally:
        analyst.stdin.close()
        analyst.wait(timeout=30)
    # the published file is read-only by design: DuckDB refuses an analyst's read-write connection (root aside)
    assert published.stat().st_mode & 0o777 == PUBLISHED_MODE


@dg.asset
def upstream() -> None:
    pass


@dg.asset(deps=[upstream])
def downstream() -> None:
    pass


def _graph():
    return dg.Definitions(assets=[upstream, downstream]).resolve_asset_graph()


def test_nothing_is_published_while_the_working_database_is_not_whole(tmp_path):
    """A table older than what it reads, a drop whose load died half-way, a run still executing: each keeps the
    analysts' copy as it was, says why, and the copy is replaced once the state is whole again."""
    instance = dg.DagsterInstance.ephemeral()
    work, published = tmp_path / "work.duckdb", tmp_path / "pulse.duckdb"
    with connect(work) as con:
        Warehouse(con)
    assert publish_if_whole(instance, _graph(), work, published) is None  # nothing materialized yet: whole
    before = published.read_bytes()

    # upstream rebuilt, downstream not yet: downstream was computed from the old upstream
    assert dg.materialize([upstream, downstream], instance=instance, selection=[upstream]).success
    assert stale_assets(instance, _graph()) == ["downstream (older than upstream)"]
    with connect(work) as con:
        con.execute("CREATE TABLE raw.marker AS SELECT 1 AS changed")  # a change the copy must not get
    reason = publish_if_whole(instance, _graph(), work, published)
    assert "downstream (older than upstream)" in reason
    assert published.read_bytes() == before

    # a run executing (the ephemeral instance's launcher cannot tell a dead process, so STARTED counts)
    assert dg.materialize([upstream, downstream], instance=instance).success
    running = dg.DagsterRun(job_name="ingest_drop", run_id="0123456789abcdef", status=dg.DagsterRunStatus.STARTED)
    instance.add_run(running)
    reason = publish_if_whole(instance, _graph(), work, published)
    assert reason.startswith("a run is executing: ingest_drop (01234567)")
    assert published.read_bytes() == before
    instance.report_run_failed(running)

    # now whole: replaced, with the change, read-only
    assert publish_if_whole(instance, _graph(), work, published) is None
    with duckdb.connect(str(published), read_only=True) as con:
        assert con.execute("SELECT changed FROM raw.marker").fetchall() == [(1,)]


def test_a_load_that_dies_half_way_blocks_publishing_until_the_drop_loads_again(tmp_path, monkeypatch):
    drop = _drop(tmp_path, "d", 30, files=3)
    work, published = tmp_path / "work.duckdb", tmp_path / "pulse.duckdb"
    con = connect(work)
    wh = Warehouse(con)
    load_drop(wh, "d", drop)
    assert unfinished_drops(con) == []

    # the next load commits its first batch, then dies: the old rows are gone, some new ones are in, no raw.drops
    real_read = load._read_serial

    def dies_after_one_batch(drop_id, reads):
        for batch in real_read(drop_id, reads):
            yield batch
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(load, "COMMIT_ROWS", 1)
    monkeypatch.setattr(load, "CHUNK_EVENTS", 10)
    monkeypatch.setattr(load, "_read_serial", dies_after_one_batch)
    with pytest.raises(KeyboardInterrupt):
        load_drop(wh, "d", drop)
    assert 0 < wh.count(tables.SESSIONS) < 30 and wh.count(tables.DROPS) == 0
    assert unfinished_drops(con) == ["d"]
    assert why_not_whole(dg.DagsterInstance.ephemeral(), _graph(), con) == (
        "the last load of drop(s) d did not finish; ingest them again"
    )
    con.close()
    reason = publish(work, published, ready=lambda c: why_not_whole(dg.DagsterInstance.ephemeral(), _graph(), c))
    assert reason.startswith("the last load of drop(s) d") and not published.exists()

    monkeypatch.setattr(load, "_read_serial", real_read)
    with connect(work) as con:
        load_drop(Warehouse(con), "d", drop)
        assert unfinished_drops(con) == [] and Warehouse(con).count(tables.SESSIONS) == 30


def test_a_killed_publish_leaves_nothing_behind(tmp_path):
    """A publish killed mid-copy leaves its tmp file (never a partial pulse.duckdb); the next removes it, and a
    WAL left beside the published file goes too."""
    work, published = tmp_path / "work.duckdb", tmp_path / "pulse.duckdb"
    with connect(work) as con:
        con.execute("CREATE TABLE t AS SELECT range AS x FROM range(1000)")
    leftover = tmp_path / ".pulse.duckdb.4242.tmp"
    leftover.write_bytes(b"half a copy")
    wal_of(published).write_bytes(b"an analyst's log")
    assert publish(work, published) is None
    # and the record of what was published (size and time: a later write into the file is noticed)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".pulse.duckdb.published",
        "lake",
        "pulse.duckdb",
        "work.duckdb",
    ]
    with duckdb.connect(str(published), read_only=True) as con:
        assert con.execute("SELECT count(*), sum(x) FROM t").fetchone() == (1000, 999 * 1000 // 2)


def test_an_asset_body_that_fails_leaves_its_table_as_it_was(tmp_path):
    """Each asset's writes are one transaction: a derived table is a DELETE and INSERTs, and a failure between
    them must not leave it empty or half written."""
    resource = WarehouseResource(
        database=str(tmp_path / "work.duckdb"), publish_to=str(tmp_path / "pulse.duckdb"), drops_dir=str(tmp_path)
    )
    with resource.warehouse() as wh:
        wh.con.execute("INSERT INTO raw.quarantine (drop_id, stage, reason) VALUES ('d', 'staging', 'kept')")
    with pytest.raises(RuntimeError), resource.warehouse() as wh:
        wh.con.execute("DELETE FROM raw.quarantine")
        raise RuntimeError("the asset failed half-way")
    with resource.warehouse() as wh:
        assert wh.count(tables.QUARANTINE) == 1


def test_the_publish_sensor_publishes_after_a_successful_run_if_whole(pulse_home):
    from pulse_pipeline.definitions import build_definitions

    defs = build_definitions(pulse_home)
    instance = dg.DagsterInstance.ephemeral()
    with connect(pulse_home.work_db) as con:
        Warehouse(con)
        in_lake = _row_counts(con, "lake")
    result = dg.materialize([upstream], instance=instance)
    run = instance.get_run_by_id(result.run_id)
    success = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_SUCCESS)
    with dg.build_run_status_sensor_context(
        sensor_name="publish_warehouse",
        dagster_event=success,
        dagster_instance=instance,
        dagster_run=run,
        resources={"warehouse": defs.resources["warehouse"]},
        repository_def=defs.get_repository_def(),
    ) as context:
        assert publish_sensor(context) is None  # nothing of this code location materialized: whole
    assert pulse_home.warehouse.exists()
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        assert _row_counts(con, "pulse") == in_lake  # every table of the lake, as it is there
    assert len(in_lake) == len(tables.ALL_TABLES) - 1  # the LLM cache lives beside the lake (own_commits_database)


def _row_counts(con: duckdb.DuckDBPyConnection, database: str) -> dict[str, int]:
    """Rows in each table or view of ``database``, by ``schema.name``."""
    names = con.execute(
        "SELECT schema_name || '.' || table_name FROM duckdb_tables() WHERE database_name = $db UNION ALL "
        "SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE database_name = $db AND NOT internal",
        {"db": database},
    ).fetchall()
    return {name: con.execute(f"SELECT count(*) FROM {database}.{name}").fetchone()[0] for (name,) in names}


# --- killing `pulse ingest` at random points ---------------------------------------------------------------------

# Each kill is a `pulse ingest` of its own (start-up, then the phase up to the kill): the smoke-sized form of
# bench/killed_runs.py (its long form kills 6 times a phase), with one kill in each half of each phase, so kills
# still land while the drop is read and while the derived tables are rebuilt, and one at least must land in the
# rebuild (the command fails otherwise).
KILLS_PER_PHASE = 2


@pytest.mark.slow
def test_a_run_killed_at_random_points_publishes_only_whole_states(tmp_path):
    """S0: drop A ingested. Then `pulse ingest B`, killed (SIGKILL) at seeded random times spread over reading the
    drop and rebuilding the derived tables, each attempt starting from what the previous kill left. After every
    kill the analysts' pulse.duckdb is S0 or S1 (A then B ingested cleanly, in another home), table for table;
    one run to the end then gives S1. ``bench/killed_runs.py`` checks it and exits 1, saying why, otherwise."""
    bench = Path(__file__).resolve().parent.parent / "bench" / "killed_runs.py"
    command = [sys.executable, str(bench), "--kills-per-phase", str(KILLS_PER_PHASE), "--workdir", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    kills = [line for line in done.stdout.splitlines() if line.startswith("kill ")]
    assert len(kills) == 2 * KILLS_PER_PHASE, done.stdout
    assert "every published state was S0 or S1, and the last run gave S1" in done.stdout
    print(done.stdout)  # shown with -s
