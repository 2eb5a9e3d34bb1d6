"""Two `pulse ingest` started at the same moment into an empty home (issue 34 items 2 and 3): on an embedded home both
failed creating the Dagster instance's tables ("table runs already exists"); on an empty PostgreSQL lake both
computed the per-session tables for the same new sessions and each inserted them, so every session was there twice
for good. Now both succeed (one waits for the other: ``home_lock.writer_lock``) and the home equals the same two
drops ingested one after the other. One trial each: with the lock taken out (``home_lock.writer_lock`` a no-op),
a single trial failed every time it was run (see TRIALS). A session recorded twice (two machines' runs) is computed
again once by the next refresh (``incremental.refreshing``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from pulse_pipeline import runs
from pulse_pipeline.connections import connect
from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.settings import LAKE_CATALOG, ONE_FILE
from pulse_pipeline.warehouse import Warehouse
from pulse_pipeline.warehouse_diff import diff_warehouses

from .helpers import FIXTURES
from .test_postgres_instance import POSTGRES_BINS, postgres_server

FAST = {"PULSE_CV_SEEDS": "1", "PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_INGEST_WORKERS": "1"}
DROPS = {"a.jsonl": FIXTURES / "canonical" / "sessions.jsonl", "b": FIXTURES / "ratings_drop"}
# One trial of each race: with the lock taken out (writer_lock a no-op), a single trial failed every time, 5 of 5
# embedded (one run could not open the working file) and 4 of 4 on PostgreSQL (both runs stopped by the
# *_cover_sessions checks: the sessions computed twice); three trials cost two more pairs of whole ingests a test.
TRIALS = 1
PULSE = [sys.executable, "-c", "import sys; from pulse_pipeline.cli import main; sys.exit(main())"]


def _sequential(root: Path, monkeypatch) -> Path:
    """The two drops ingested one after the other into an embedded home: its published file."""
    monkeypatch.setenv("PULSE_HOME", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster"))
    home = PulseHome(root).ensure({})
    for name, source in DROPS.items():
        runs.ingest(home, source, name, say=lambda _: None)
    return home.warehouse


@pytest.fixture(scope="module")
def sequential_home(tmp_path_factory) -> Path:
    """The two drops ingested one after the other into an embedded home with ``FAST``, once for this module: the
    state the embedded race must equal, and (copied) the home the refresh test duplicates a session in."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in FAST.items():
            env.setenv(name, value)
        env.delenv(LAKE_CATALOG, raising=False)  # the default storage
        return _sequential(tmp_path_factory.mktemp("sequential") / "home", env).parent


def _ingest_at_once(root: Path, env: dict[str, str]) -> None:
    """Start `pulse ingest` of each drop at the same moment into the empty home ``root``; both must succeed."""
    env = {**os.environ, **FAST, **env, "PULSE_HOME": str(root), "DAGSTER_HOME": str(root / "dagster")}
    started = [
        subprocess.Popen(
            [*PULSE, "ingest", str(source), "--name", name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, source in DROPS.items()
    ]
    outputs = [p.communicate(timeout=600)[0] for p in started]
    assert [p.returncode for p in started] == [0, 0], [o[-3000:] for o in outputs]


@pytest.mark.slow
def test_two_first_ingests_at_once_into_an_empty_embedded_home_equal_them_one_after_the_other(
    sequential_home, tmp_path
):
    expected = PulseHome(sequential_home).warehouse
    for trial in range(TRIALS):
        home = PulseHome(tmp_path / f"trial{trial}")
        _ingest_at_once(home.root, {})
        assert diff_warehouses(expected, home.warehouse, digits=10) == [], f"trial {trial}"


@pytest.mark.slow
@pytest.mark.skipif(not POSTGRES_BINS, reason="no PostgreSQL server: /usr/lib/postgresql/*/bin/postgres is missing")
def test_two_ingests_at_once_on_an_empty_postgres_lake_equal_them_one_after_the_other(tmp_path, monkeypatch):
    import psycopg2

    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    # one DuckDB file: it has the LLM cache among its tables, as a PostgreSQL lake does (tests/test_lake.py)
    monkeypatch.setenv(LAKE_CATALOG, ONE_FILE)
    expected = _sequential(tmp_path / "sequential", monkeypatch)
    with postgres_server() as url:
        socket_dir = url.split("host=", 1)[1]
        server = psycopg2.connect(dbname="postgres", host=socket_dir, user="pulse")
        server.autocommit = True
        for trial in range(TRIALS):
            with server.cursor() as cur:
                cur.execute(f"CREATE DATABASE lake{trial}")  # an empty catalog each trial
            catalog = f"postgres:dbname=lake{trial} host={socket_dir} user=pulse"
            home = PulseHome(tmp_path / f"trial{trial}").ensure({})
            # the Dagster instance made first, so that the lake is what both runs start at once on (the instance's
            # own race is the embedded test's)
            dg.DagsterInstance.from_config(str(home.dagster_home)).dispose()
            _ingest_at_once(home.root, {LAKE_CATALOG: catalog})
            assert diff_warehouses(expected, home.warehouse, digits=10) == [], f"trial {trial}"
        server.close()


def test_a_session_recorded_twice_is_computed_again_once(sequential_home, tmp_path, monkeypatch):
    """What two machines' runs on one PostgreSQL catalog can still leave (each computed the same new sessions and
    neither saw the other's rows): every event feature row and bookkeeping row of one session twice. The next
    refresh deletes that session's rows and computes them once, instead of keeping both copies for good."""
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(LAKE_CATALOG, raising=False)
    home = tmp_path / "home"
    shutil.copytree(sequential_home, home, symlinks=True)  # a copy: the module's other test compares with it
    monkeypatch.setenv("PULSE_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    work = PulseHome(home).work_db
    con = connect(work)
    try:
        wh = Warehouse(con)
        one = con.execute("SELECT min(session_id) FROM features.event_features").fetchone()[0]
        rows = con.execute("SELECT count(*) FROM features.event_features WHERE session_id = ?", [one]).fetchone()[0]
        assert rows == 1  # one row per session
        twice = "INSERT INTO features.event_features SELECT * FROM features.event_features WHERE session_id = ?"
        con.execute(twice, [one])
        con.execute(
            "INSERT INTO staging.computed_versions SELECT * FROM staging.computed_versions"
            " WHERE table_name = 'features.event_features' AND session_id = ?",
            [one],
        )
        con.begin()
        build_event_features(wh)
        con.commit()
        twice = con.execute(
            "SELECT count(*) FROM (SELECT session_id FROM features.event_features GROUP BY session_id"
            " HAVING count(*) > 1)"
        ).fetchone()[0]
        assert twice == 0
        recorded = con.execute(
            "SELECT count(*) FROM staging.computed_versions WHERE table_name = 'features.event_features'"
            " AND session_id = ?",
            [one],
        ).fetchone()[0]
        assert recorded == 1
    finally:
        con.close()
