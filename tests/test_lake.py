"""The tables in a DuckLake (``PULSE_LAKE_CATALOG``, ``lake.py``): analysts open ``pulse.duckdb``, a file of views
over one snapshot's Parquet files, with plain DuckDB; an open analyst connection never blocks a run and never sees a
half-written state; two runs writing different drops into a PostgreSQL catalog at once give the embedded warehouse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import dagster as dg
import duckdb
import pytest

from pulse_pipeline import runs
from pulse_pipeline.connections import connect
from pulse_pipeline.defs.ingest.partitions import drops_partitions
from pulse_pipeline.defs.ingest.sensors import INGEST_JOB
from pulse_pipeline.features.llm import CachedAnswer, LLMCache
from pulse_pipeline.lake import location
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.publish import PUBLISHED_MODE, publish
from pulse_pipeline.settings import (
    DAGSTER_POSTGRES_URL,
    LAKE_CATALOG,
    LAKE_DATA,
    ONE_FILE,
    LakeSettings,
    SettingsError,
    lake_settings,
)
from pulse_pipeline.synth import write_corpus
from pulse_pipeline.warehouse import Warehouse
from pulse_pipeline.warehouse_diff import diff_warehouses

from .test_postgres_instance import DERIVED, POSTGRES_BINS, _two_drops, postgres_server

FAST = {"PULSE_CV_SEEDS": "1", "PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_INGEST_WORKERS": "1"}


def test_the_lake_is_the_default_and_one_file_stays_selectable(tmp_path):
    assert lake_settings({}) == LakeSettings("sqlite", None)  # unset: an SQLite catalog, files in PULSE_HOME/lake/
    assert lake_settings({LAKE_CATALOG: ONE_FILE}) is None  # the tables in one DuckDB file, as before the lake
    pg = lake_settings({LAKE_CATALOG: "postgres:dbname=pulse host=db", LAKE_DATA: "s3://bucket/pulse/"})
    assert (pg.catalog, pg.data) == ("postgres:dbname=pulse host=db", "s3://bucket/pulse/")
    wrongs = ({LAKE_CATALOG: "mysql:db"}, {LAKE_CATALOG: "postgres"}, {LAKE_CATALOG: ONE_FILE, LAKE_DATA: "/data"})
    for wrong in wrongs:
        with pytest.raises(SettingsError, match=LAKE_CATALOG):
            lake_settings(wrong)
    home = PulseHome(tmp_path / "home")
    where = location(home.work_db, lake_settings({}))
    assert (where.catalog, where.data) == (f"sqlite:{home.root}/lake/catalog.sqlite", f"{home.root}/lake/data/")


def test_a_home_written_in_one_file_is_not_shown_as_an_empty_lake(tmp_path, monkeypatch):
    work = tmp_path / "work.duckdb"
    monkeypatch.setenv(LAKE_CATALOG, ONE_FILE)
    Warehouse(connect(work)).con.close()
    monkeypatch.delenv(LAKE_CATALOG)
    with pytest.raises(RuntimeError, match="set PULSE_LAKE_CATALOG=none to keep using it"):
        connect(work)
    assert not (tmp_path / "lake").exists()
    monkeypatch.setenv(LAKE_CATALOG, ONE_FILE)
    connect(work).close()  # as it was


def test_the_published_file_is_views_over_one_snapshot_read_by_plain_duckdb(tmp_path, monkeypatch):
    """Rows deleted from a data file (a delete file) stay out of the view, an empty table is an empty typed view,
    an open connection keeps its snapshot through a rewrite, a new one sees the rewrite; nothing is copied."""
    monkeypatch.setenv(LAKE_CATALOG, "sqlite")
    work, published = tmp_path / "work.duckdb", tmp_path / "pulse.duckdb"
    con = connect(work)
    con.execute("CREATE SCHEMA raw")
    con.execute("CREATE TABLE raw.t (i INTEGER, s VARCHAR, ts TIMESTAMP)")
    con.execute("CREATE TABLE raw.empty (x DOUBLE)")
    con.execute("INSERT INTO raw.t SELECT range, 'first', TIMESTAMP '2025-01-01' FROM range(100)")
    con.execute("INSERT INTO raw.t SELECT range, 'second', NULL FROM range(100, 150)")
    con.execute("DELETE FROM raw.t WHERE i % 10 = 0")  # 10 of the first 100 and 5 of the next 50
    con.close()
    # files no snapshot names, as a writer killed before its commit leaves them: removed once a day old
    data = tmp_path / "lake" / "data" / "raw" / "t"
    stale, recent = data / "ducklake-killed-2-days-ago.parquet", data / "ducklake-being-written.parquet"
    for orphan in (stale, recent):
        orphan.write_bytes(b"PAR1")
    os.utime(stale, (time.time() - 2 * 86400,) * 2)
    assert publish(work, published) is None
    assert not stale.exists() and recent.exists()
    assert published.stat().st_mode & 0o777 == PUBLISHED_MODE and published.stat().st_size < 1_000_000

    # by hand: 135 rows left; sum of 0..149 is 11175, minus the multiples of ten (0 + 10 + ... + 140 = 1050);
    # 90 of them from the first insert, the ones with a timestamp
    t_state = "SELECT count(*), sum(i), count(ts), min(s) FROM raw.t"
    first, rewritten = [[135, 10125, 90, "first"]], [[7, 21, 0, "rewritten"]]

    analyst = subprocess.Popen(
        [sys.executable, "-c", ANALYST, str(published)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert _ask(analyst, "held", t_state) == first
        types = "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name IN ('t', 'empty') ORDER BY 1"
        expected = [["i", "INTEGER"], ["s", "VARCHAR"], ["ts", "TIMESTAMP"], ["x", "DOUBLE"]]
        assert _ask(analyst, "held", types) == expected
        assert _ask(analyst, "held", "SELECT count(*) FROM raw.empty") == [[0]]

        con = connect(work)
        con.begin()
        con.execute("DELETE FROM raw.t")
        con.execute("INSERT INTO raw.t SELECT range, 'rewritten', NULL FROM range(7)")
        con.commit()
        con.close()
        assert publish(work, published) is None
        assert _ask(analyst, "held", t_state) == first
        assert _ask(analyst, "fresh", t_state) == rewritten
    finally:
        analyst.stdin.close()
        analyst.wait(timeout=30)
    with duckdb.connect(str(published), read_only=True) as reader:
        assert [list(reader.execute(t_state).fetchone())] == rewritten


def test_llm_answers_commit_beside_an_open_asset_transaction_and_survive_its_rollback(tmp_path, monkeypatch):
    """The annotations asset holds its transaction open on the lake while the LLM cache commits each answer: with
    an SQLite catalog the cache lives in the working file, outside the lake (any other commit into the lake meanwhile
    fails "database is locked"), so the answer is kept when the asset's transaction is rolled back (a killed run),
    and the asset's own writes still commit."""
    monkeypatch.setenv(LAKE_CATALOG, "sqlite")
    work = tmp_path / "work.duckdb"
    answer = CachedAnswer(response='{"ok": true}', prompt_tokens=100, completion_tokens=20, cost_usd=0.12)
    con = connect(work)
    Warehouse(con)
    for kept in (False, True):  # the asset killed, then the asset committing
        con.begin()
        con.execute("DELETE FROM features.judge_scores")
        LLMCache(con).put("v1", "fake-model", f"prompt {kept}", answer)
        con.commit() if kept else con.rollback()
    con.close()
    con = connect(work)
    cache = LLMCache(con)
    assert cache.get("v1", "fake-model", "prompt False") == answer == cache.get("v1", "fake-model", "prompt True")
    in_lake = "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake' AND table_name = 'llm_cache'"
    assert con.execute(in_lake).fetchone() == (0,)  # not an empty twin in the lake, shown to analysts as the cache
    con.close()


# An analyst's shell on the published file, plain DuckDB: "held <sql>" asks the connection opened at the start,
# "fresh <sql>" opens the file anew for that query (a new analyst); each answer is one JSON line.
ANALYST = """
import json, os, sys, duckdb
published = sys.argv[1]
held = duckdb.connect(published, read_only=True)

def fresh_rows(sql):
    # DuckDB shares one database per path within a process (the held one's): a new analyst opens a hard link
    link = published + ".fresh"
    if os.path.exists(link):
        os.unlink(link)
    os.link(published, link)
    with duckdb.connect(link, read_only=True) as fresh:
        return fresh.execute(sql).fetchall()

for line in sys.stdin:
    which, sql = line.rstrip("\\n").split(" ", 1)
    rows = held.execute(sql).fetchall() if which == "held" else fresh_rows(sql)
    print(json.dumps([list(r) for r in rows], default=str), flush=True)
"""


def _ask(analyst: subprocess.Popen, which: str, sql: str) -> list:
    analyst.stdin.write(f"{which} {sql}\n")
    analyst.stdin.flush()
    return json.loads(analyst.stdout.readline())


def _per_drop(table: str) -> str:
    counts = f"SELECT drop_id, count(*) AS n FROM {table} GROUP BY 1"
    return f"(SELECT list(drop_id || '=' || n ORDER BY drop_id) FROM ({counts}))"


# what a reader sees: sessions per drop, raw and after the duplicates rule, and the features computed from them
STATE = "SELECT {}, {}, (SELECT count(*) FROM features.event_features)".format(
    _per_drop("raw.sessions"), _per_drop("staging.sessions")
)


@pytest.mark.slow
def test_an_analyst_connection_held_open_through_a_run_sees_the_old_state_then_the_new(tmp_path, monkeypatch):
    """Drop A (60 sessions) ingested and published; an analyst opens pulse.duckdb and keeps it open while `pulse
    ingest B` (40 sessions, the same ids as A's first 40) runs in another process. The run succeeds; the held
    connection answers the A state throughout and after; a reader opening the file anew during the run sees A
    or, once published, A and B: never B's raw rows without its staging and features."""
    env = {**os.environ, **FAST, LAKE_CATALOG: "sqlite", "PULSE_HOME": str(tmp_path / "home")}
    env["DAGSTER_HOME"] = str(tmp_path / "home" / "dagster")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    home = PulseHome(tmp_path / "home").ensure({})
    write_corpus(tmp_path / "A", 60, seed=1, prefix="same")
    write_corpus(tmp_path / "B", 40, seed=2, prefix="same")
    runs.ingest(home, tmp_path / "A", say=lambda _: None)
    # by hand: with the same prefix both corpora number sessions same-s000001, same-s000002, ..., so B's 40 are A's
    # first 40 again and the later drop wins them (staging); A keeps 20
    old = [["A=60"], ["A=60"], 60]
    new = [["A=60", "B=40"], ["A=20", "B=40"], 60]

    analyst = subprocess.Popen(
        [sys.executable, "-c", ANALYST, str(home.warehouse)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    seen = []
    try:
        assert _ask(analyst, "held", STATE) == [old]
        with open(tmp_path / "run.log", "w") as log:
            run = subprocess.Popen(
                [sys.executable, "-m", "pulse_pipeline.cli", "ingest", str(tmp_path / "B")],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        while run.poll() is None:
            seen.append(("held", _ask(analyst, "held", STATE)))
            seen.append(("fresh", _ask(analyst, "fresh", STATE)))
            time.sleep(0.2)
        assert run.returncode == 0, (tmp_path / "run.log").read_text()[-3000:]
        assert _ask(analyst, "held", STATE) == [old]  # still the snapshot it opened: its files are kept
        assert _ask(analyst, "fresh", STATE) == [new]
    finally:
        analyst.stdin.close()
        analyst.wait(timeout=30)
    assert len(seen) >= 10, seen  # the analyst asked throughout the run
    assert all(answer == [old] for which, answer in seen if which == "held"), seen
    assert all(answer in ([old], [new]) for _, answer in seen), seen


CONCURRENT_LOAD = """
import sys
from pulse_pipeline import runs
from pulse_pipeline.defs.ingest.sensors import INGEST_JOB
from pulse_pipeline.features.llm import CachedAnswer, LLMCache
from pulse_pipeline.paths import PulseHome

home = PulseHome.from_env()
job = runs._definitions(home).resolve_job_def(INGEST_JOB)
runs._execute(job, runs.instance_for(home), sys.argv[1], runs.QUIET, f"run of {INGEST_JOB} ({sys.argv[1]})")
"""


@pytest.mark.slow
@pytest.mark.skipif(not POSTGRES_BINS, reason="no PostgreSQL server: /usr/lib/postgresql/*/bin/postgres is missing")
def test_two_concurrent_drop_runs_into_a_postgres_lake_give_the_embedded_warehouse(tmp_path, monkeypatch):
    """Two processes run the per-drop ingest job at once, one drop each, on an empty DuckLake whose catalog is in
    PostgreSQL (the Dagster instance too): both create DuckLake's own catalog tables (the later ATTACH fails and is
    retried: ``lake.attach``) and then PULSE's tables (one commit meets the other's and is retried:
    ``ensure_tables``). The derived tables are then rebuilt. Every published table equals the same drops run in one
    DuckDB file with an SQLite instance (``PULSE_LAKE_CATALOG=none``: the storage before the lake, which has the LLM
    cache among its tables as a PostgreSQL lake does)."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(LAKE_CATALOG, ONE_FILE)
    embedded = PulseHome(tmp_path / "embedded").ensure({})
    _two_drops(embedded)
    runs.materialize(embedded, say=lambda _: None)
    with postgres_server() as url:
        socket_dir = url.split("host=", 1)[1]
        lake = {LAKE_CATALOG: f"postgres:dbname=postgres host={socket_dir} user=pulse", DAGSTER_POSTGRES_URL: url}
        home = PulseHome(tmp_path / "postgres").ensure(lake)
        _two_drops(home)
        for name, value in lake.items():
            monkeypatch.setenv(name, value)
        instance = runs.instance_for(home)
        instance.add_dynamic_partitions(drops_partitions.name, ["a.jsonl", "b"])
        env = {**os.environ, "PULSE_HOME": str(home.root), "DAGSTER_HOME": str(home.dagster_home)}
        loads = [
            subprocess.Popen(
                [sys.executable, "-c", CONCURRENT_LOAD, drop],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for drop in ("a.jsonl", "b")
        ]
        outputs = [load.communicate(timeout=300)[0] for load in loads]
        assert [load.returncode for load in loads] == [0, 0], [o[-2000:] for o in outputs]
        records = instance.get_run_records(filters=dg.RunsFilter(job_name=INGEST_JOB))
        first, second = sorted(records, key=lambda r: r.start_time)
        assert second.start_time < first.end_time, "the two runs did not overlap"
        runs.materialize(home, DERIVED, say=lambda _: None)
        instance.dispose()
        assert not (home.work_db).exists()  # a PostgreSQL catalog: no local file, no lock
        assert diff_warehouses(embedded.warehouse, home.warehouse, digits=10) == []
