"""The Dagster instance on PostgreSQL (PULSE_DAGSTER_POSTGRES_URL): its dagster.yaml, and two drops' runs queued at
once against a real PostgreSQL server, whose warehouse equals the embedded (SQLite instance) run of the same drops."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest
import yaml

from pulse_pipeline import runs
from pulse_pipeline.defs.ingest.sensors import DROP_JOB
from pulse_pipeline.paths import PROJECT_ROOT, PulseHome
from pulse_pipeline.settings import DAGSTER_POSTGRES_URL, SettingsError, dagster_postgres_url
from pulse_pipeline.warehouse_diff import diff_warehouses

from .helpers import FIXTURES

POSTGRES_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))  # Debian's layout, one folder a version
SECRET = "not-in-any-log"  # the URL's password: trust authentication ignores it, the test looks for it in files
DERIVED = "not group:ingest and not group:validation"  # what definitions.DERIVED selects, in Dagster's syntax


def test_unset_url_keeps_the_sqlite_instance_and_set_url_adds_postgres_storage(tmp_path):
    """Selected by configuration alone: the project's dagster.yaml is kept whole (queue, launcher, monitoring),
    PostgreSQL storage is added when the variable is set, and the password never reaches the file."""
    project = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())
    assert "storage" not in project and "run_storage" not in project  # the merge adds the only storage key
    home = PulseHome(tmp_path / "home")
    target = home.dagster_home / "dagster.yaml"

    home.ensure({})
    assert yaml.safe_load(target.read_text()) == project
    assert type(dg.DagsterInstance.from_config(str(home.dagster_home)).run_storage).__name__ == "SqliteRunStorage"

    url = f"postgresql+psycopg2://pulse:{SECRET}@db.example:5432/dagster"
    home.ensure({DAGSTER_POSTGRES_URL: url})
    merged = yaml.safe_load(target.read_text())
    assert merged == {**project, "storage": {"postgres": {"postgres_url": {"env": DAGSTER_POSTGRES_URL}}}}
    assert SECRET not in target.read_text()

    home.ensure({})  # unset again: back to SQLite
    assert yaml.safe_load(target.read_text()) == project


@pytest.mark.parametrize("url", ["mysql://u:pw@h/db", "postgresql+psycopg2://u:pw@h:5432", "postgresql://u:pw@h/db"])
def test_a_url_that_is_not_postgres_is_one_sentence_without_the_password(url):
    with pytest.raises(SettingsError, match=DAGSTER_POSTGRES_URL) as raised:
        dagster_postgres_url({DAGSTER_POSTGRES_URL: url})
    assert ":pw@" not in str(raised.value)


@contextmanager
def postgres_server() -> Iterator[str]:
    """A throwaway PostgreSQL server from Debian's package; yields its URL, and stops it whatever happens.

    initdb and postgres refuse to run as root, so under root they run as ``nobody``. The server listens on a
    unix socket in its own temporary folder only (no TCP: no port to clash with another test or a real server).
    The folder is made with tempfile rather than pytest's tmp_path, whose parents ``nobody`` may not enter."""
    root = Path(tempfile.mkdtemp(prefix="pulse-pg-"))
    as_user: dict = {}
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    bin_dir = POSTGRES_BINS[-1].parent
    data, log = root / "data", root / "server.log"
    server = None
    try:
        subprocess.run(
            [bin_dir / "initdb", "-D", data, "-U", "pulse", "--auth=trust", "-E", "UTF8", "--no-sync"],
            check=True,
            capture_output=True,
            cwd=root,
            **as_user,
        )
        with open(log, "w") as out:
            server = subprocess.Popen(
                [bin_dir / "postgres", "-D", data, "-k", root, "-c", "listen_addresses=", "-c", "fsync=off"],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=root,
                start_new_session=True,
                **as_user,
            )
        deadline = time.monotonic() + 30
        # the socket file appears before the server takes connections ("the database system is starting up", seen
        # on a loaded machine): wait until one is accepted
        while not _accepts_connections(root):
            assert server.poll() is None and time.monotonic() < deadline, f"PostgreSQL did not start: {log.read_text()}"
            time.sleep(0.1)
        yield f"postgresql+psycopg2://pulse:{SECRET}@/postgres?host={root}"
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGINT)  # PostgreSQL's fast shutdown: ends sessions, then exits
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        shutil.rmtree(root, ignore_errors=True)


def _accepts_connections(socket_dir: Path) -> bool:
    import psycopg2

    if not (socket_dir / ".s.PGSQL.5432").exists():
        return False
    try:
        psycopg2.connect(dbname="postgres", host=str(socket_dir), user="pulse").close()
    except psycopg2.OperationalError:
        return False
    return True


def _two_drops(home: PulseHome) -> None:
    """Two drops of different shapes: a sessions file, and a folder with ratings, feedback and assignments."""
    shutil.copyfile(FIXTURES / "canonical" / "sessions.jsonl", home.drops / "a.jsonl")
    shutil.copytree(FIXTURES / "ratings_drop", home.drops / "b")


def _wait_for_runs(instance: dg.DagsterInstance, daemon: subprocess.Popen, log: Path) -> list[dg.RunRecord]:
    # each drop's run reads the drop and then refreshes every derived table: two of them, one after the other
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        records = instance.get_run_records(filters=dg.RunsFilter(job_name=DROP_JOB))
        if len(records) == 2 and all(r.dagster_run.is_finished for r in records):
            return records
        assert daemon.poll() is None, f"the daemon stopped: {log.read_text()[-3000:]}"
        time.sleep(0.5)
    raise AssertionError(f"the two drops' runs did not finish within 300 s: {log.read_text()[-3000:]}")


@pytest.mark.slow
@pytest.mark.skipif(not POSTGRES_BINS, reason="no PostgreSQL server: /usr/lib/postgresql/*/bin/postgres is missing")
def test_two_queued_runs_on_postgres_give_the_embedded_warehouse(tmp_path, monkeypatch):
    """The daemon's drop sensor requests both drops' runs in one tick; the run queue (dagster.yaml: one run at a
    time, they share one DuckDB file) holds the second while the first runs, all of it in PostgreSQL. The derived
    tables are then rebuilt, and every table equals the same drops run with the SQLite instance.

    The embedded run goes on in this process while the daemon works (different PULSE_HOMEs; the daemon's time is
    mostly waiting for code to load), which keeps the test near half a minute on an idle machine."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # runs.materialize points it at the home it runs
    embedded = PulseHome(tmp_path / "embedded").ensure({})
    _two_drops(embedded)
    daemon_log = tmp_path / "daemon.log"
    with postgres_server() as url:
        home = PulseHome(tmp_path / "postgres").ensure({DAGSTER_POSTGRES_URL: url})
        _two_drops(home)
        monkeypatch.setenv(DAGSTER_POSTGRES_URL, url)
        instance = dg.DagsterInstance.from_config(str(home.dagster_home))  # reads the URL now, once
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        env = {**os.environ, "DAGSTER_HOME": str(home.dagster_home), "PULSE_HOME": str(home.root)}
        with daemon_log.open("w") as out:
            daemon = subprocess.Popen(
                [Path(sys.executable).parent / "dagster-daemon", "run", "-w", PROJECT_ROOT / "workspace.yaml"],
                cwd=PROJECT_ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            monkeypatch.delenv(DAGSTER_POSTGRES_URL)
            runs.materialize(embedded, say=lambda _: None)  # the SQLite instance: the variable is unset
            records = _wait_for_runs(instance, daemon, daemon_log)
        finally:  # the daemon, its code server and any run it started (the automation sensor's, say)
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()
        first, second = sorted(records, key=lambda r: r.start_time)
        assert {r.dagster_run.status for r in records} == {dg.DagsterRunStatus.SUCCESS}
        assert {r.dagster_run.tags["dagster/partition"] for r in records} == {"a.jsonl", "b"}
        assert second.create_timestamp.timestamp() < first.end_time, "the second run was not queued while the first ran"
        assert second.start_time >= first.end_time, "the queue let two runs write the DuckDB file at once"

        monkeypatch.setenv(DAGSTER_POSTGRES_URL, url)
        runs.materialize(home, DERIVED, say=lambda _: None)
        assert instance.get_run_records(filters=dg.RunsFilter(job_name=runs.MATERIALIZE_JOB), limit=1)
        instance.dispose()

    assert diff_warehouses(embedded.warehouse, home.warehouse, digits=10) == []  # as published: tables are in a lake
    # every process (daemon, run workers, this one) kept the run history in PostgreSQL, none in SQLite files
    assert list(home.dagster_home.rglob("*.db")) == [] and list(embedded.dagster_home.rglob("*.db"))
    for written in (home.dagster_home / "dagster.yaml", daemon_log):
        assert SECRET not in written.read_text()
