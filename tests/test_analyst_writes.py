"""An analyst's writes into the published file never reach PULSE's own readers (issue 34, item 5 and item 9's
``.tmp.wal``).

``pulse.duckdb`` is mode 0444, but its owner (or root) can make it writable and open it read-write. PULSE's
readers (``pulse sql``, ``pulse report``, ``pulse quarantine``, ``pulse ask``) then publish it again from the
warehouse's tables before reading it (``cli._published_here``, ``publish.written_since_published``), and an
analyst's read-write connection held open does not make them fail (``cli._open_published``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline import cli, runs
from pulse_pipeline.connections import connect
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.publish import publish, wal_of, written_since_published
from pulse_pipeline.settings import LAKE_CATALOG
from pulse_pipeline.synth import write_corpus

FAST = {"PULSE_CV_SEEDS": "1", "PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_INGEST_WORKERS": "1"}

# An analyst in another process, as the issue did it: the file made writable, opened read-write, argv[2] run.
# argv[3] says how it ends: "close" (DuckDB checkpoints on close), "kill" (os._exit after the commit, which
# leaves the WAL beside the file) or "hold" (prints "open" and keeps the connection until stdin closes).
ANALYST = """
import os, sys
import duckdb
path, sql, end = sys.argv[1:4]
os.chmod(path, 0o644)
con = duckdb.connect(path)
con.execute(sql)
if end == "kill":
    sys.stdout.flush()
    os._exit(0)
if end == "hold":
    print("open", flush=True)
    sys.stdin.read()
con.close()
"""

FAKE = (
    "DROP VIEW staging.session_labels; CREATE TABLE staging.session_labels AS SELECT 'FAKE' AS session_id;"
    " CREATE TABLE staging.emptied AS SELECT * FROM staging.sessions WHERE false; DROP VIEW staging.sessions;"
    " ALTER TABLE staging.emptied RENAME TO sessions; CHECKPOINT"
)
SESSIONS = "SELECT count(*) FROM raw.sessions"
LABELS = "SELECT count(*), count(*) FILTER (session_id = 'FAKE') FROM staging.session_labels"


@pytest.fixture
def home(small_built_home, tmp_path, monkeypatch) -> tuple[Path, int]:
    """A copy of the small home the pipeline built once for the run (``conftest.small_built_home``: 40 synthetic
    sessions, a SQLite lake; times kept, as ``cp -a`` does), set as this test's PULSE_HOME."""
    source, sessions = small_built_home
    root = tmp_path / "home"
    shutil.copytree(source, root, symlinks=True)
    for name, value in {**FAST, "PULSE_HOME": str(root), LAKE_CATALOG: "sqlite"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster"))
    return root, sessions


def _analyst(published: Path, sql: str, end: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", ANALYST, str(published), sql, end], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def _sql(query: str, capfd) -> tuple[int, list[str], str]:
    """``pulse sql QUERY --csv`` in this process: its exit code, stdout's lines and stderr."""
    capfd.readouterr()
    code = cli.main(["sql", query, "--csv"])
    captured = capfd.readouterr()
    return code, captured.out.splitlines(), captured.err


def _labels(capfd) -> list[str]:
    code, out, err = _sql(LABELS, capfd)
    assert code == 0, err
    return out


def test_an_analyst_s_checkpointed_views_and_tables_never_reach_pulse_s_readers(home, capfd):
    root, sessions = home
    published = root / "pulse.duckdb"
    labels = _labels(capfd)
    assert labels[1].endswith(",0") and int(labels[1].split(",")[0]) > 0  # real labels, none of them fake

    _analyst(published, FAKE, "close")
    with duckdb.connect(str(published), read_only=True) as con:  # the analyst's objects are in the file now
        assert con.execute(LABELS).fetchall() == [(1, 1)]
    assert written_since_published(published) is not None

    code, out, err = _sql(SESSIONS, capfd)
    assert (code, out) == (0, ["count_star()", str(sessions)]), err
    assert _labels(capfd) == labels
    assert "written by another connection" in err and "publishing it again" in err and "Traceback" not in err
    assert written_since_published(published) is None
    assert os.stat(published).st_mode & 0o777 == 0o444

    _analyst(published, FAKE, "close")  # again, and the report is the next reader
    capfd.readouterr()
    assert cli.main(["report"]) == 0, capfd.readouterr().err
    page = (root / "report" / "index.html").read_text()
    assert "staging.sessions has no rows" not in page and "FAKE" not in page
    with duckdb.connect(str(published), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM staging.sessions").fetchone()[0] == sessions


def test_an_analyst_s_insert_left_in_a_wal_is_never_replayed_for_pulse_s_readers(home, capfd):
    root, sessions = home
    published = root / "pulse.duckdb"
    labels = _labels(capfd)
    _analyst(published, "CREATE TABLE raw.mine AS SELECT 1 AS i; INSERT INTO raw.mine VALUES (2)", "kill")
    assert wal_of(published).exists()  # what made every read-only open fail with "Failure while replaying WAL"

    code, out, err = _sql(SESSIONS, capfd)
    assert (code, out) == (0, ["count_star()", str(sessions)]), err
    said = err
    assert _labels(capfd) == labels
    code, out, err = _sql("SELECT count(*) FROM raw.mine", capfd)
    assert code != 0 and "mine" in err  # the analyst's table is gone
    assert not wal_of(published).exists()
    assert "write-ahead log" in said


@pytest.mark.parametrize("sql", ["SELECT 1", "CREATE TABLE raw.mine AS SELECT 1 AS i"], ids=["lock", "wal"])
def test_pulse_reads_while_an_analyst_holds_a_read_write_connection(sql, home, capfd):
    """Only DuckDB's lock ("Could not set lock" for every read-only open), or the lock and a WAL."""
    root, sessions = home
    published = root / "pulse.duckdb"
    labels = _labels(capfd)
    analyst = subprocess.Popen(
        [sys.executable, "-c", ANALYST, str(published), sql, "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert analyst.stdout.readline().strip() == "open"
        for _ in range(3):  # every fresh read succeeds, the first by publishing a new file beside the held one
            code, out, err = _sql(SESSIONS, capfd)
            assert (code, out) == (0, ["count_star()", str(sessions)]), err
        assert _labels(capfd) == labels
        capfd.readouterr()
        assert cli.main(["report"]) == 0, capfd.readouterr().err
    finally:
        analyst.stdin.close()
        analyst.wait(timeout=60)
    code, out, err = _sql(SESSIONS, capfd)  # the analyst closed its old file: nothing of it reaches this one
    assert (code, out) == (0, ["count_star()", str(sessions)]), err


def test_a_publish_removes_the_tmp_wal_a_killed_publish_left(tmp_path, monkeypatch):
    monkeypatch.setenv(LAKE_CATALOG, "sqlite")
    home = PulseHome(tmp_path)
    con = connect(home.work_db)
    con.execute("CREATE SCHEMA IF NOT EXISTS raw")
    con.execute("CREATE TABLE raw.t AS SELECT range AS i FROM range(5)")
    con.close()
    assert publish(home.work_db, home.warehouse) is None
    # what a publish killed inside lake.write_views leaves: its tmp file and the tmp file's WAL
    leftovers = [tmp_path / ".pulse.duckdb.4242.tmp", tmp_path / ".pulse.duckdb.4242.tmp.wal"]
    leftovers.append(tmp_path / f".pulse.duckdb.{os.getpid()}.tmp.wal")  # one DuckDB would replay onto the next
    for leftover in leftovers:
        leftover.write_bytes(b"not a WAL")
    assert publish(home.work_db, home.warehouse) is None
    assert [p for p in leftovers if p.exists()] == []
    assert sorted(p.name for p in tmp_path.glob(".pulse.duckdb*")) == [".pulse.duckdb.published"]
    with duckdb.connect(str(home.warehouse), read_only=True) as con:
        assert con.execute("SELECT sum(i) FROM raw.t").fetchone()[0] == 10


def test_one_file_storage_discards_an_analyst_s_delete_too(tmp_path, monkeypatch, capfd):
    """With ``PULSE_LAKE_CATALOG=none`` the published file is a copy of the tables, not views: an analyst's
    checkpointed DELETE empties it for every reader, until PULSE's reader publishes it again."""
    for name, value in {**FAST, "PULSE_HOME": str(tmp_path / "home"), LAKE_CATALOG: "none"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home" / "dagster"))
    corpus = write_corpus(tmp_path / "corpus" / "a", 20, seed=2)
    runs.ingest(PulseHome.from_env(), tmp_path / "corpus" / "a", say=lambda _: None)
    published = tmp_path / "home" / "pulse.duckdb"
    _analyst(published, "DELETE FROM raw.sessions; CHECKPOINT", "close")
    with duckdb.connect(str(published), read_only=True) as con:
        assert con.execute(SESSIONS).fetchone()[0] == 0
    code, out, err = _sql(SESSIONS, capfd)
    assert (code, out) == (0, ["count_star()", str(corpus.n_sessions)]), err
