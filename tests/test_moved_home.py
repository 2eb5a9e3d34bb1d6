"""A PULSE_HOME moved or copied elsewhere keeps reading its own files (issue 33, item 2).

The analysts' file, ``pulse.duckdb``, is views over the lake's Parquet files (``lake.write_views``). Opened
itself, from any working directory, it reads the files of the home it is in (``lake.home_of_file``); attached
under another name it reads the home it was published in, and refuses in one line when it is not there
(``lake.guard_where``): a copy never reads the original's files. PULSE's own readers publish again a file from
before this rule that names another home's files (``runs.publish_again_here``). Writers keep working in a moved
home, and a copy and its original then go their own ways."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline import cli, runs
from pulse_pipeline.connections import connect
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.publish import publish
from pulse_pipeline.settings import LAKE_CATALOG, ONE_FILE
from pulse_pipeline.synth import write_corpus

FAST = {"PULSE_CV_SEEDS": "1", "PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_INGEST_WORKERS": "1"}

# Plain DuckDB, as an analyst runs it: argv[1] is how the file is opened (``open``: duckdb.connect(path,
# read_only=True); ``attach``: ATTACH into an in-memory database; any other value: ATTACH into that DuckDB file
# of the analyst's own), argv[2] the path as typed (relative to the working directory), argv[3] the query.
ANALYST = """
import json, sys
import duckdb
how, path, query = sys.argv[1:4]
try:
    if how == "open":
        con = duckdb.connect(path, read_only=True)
    else:
        con = duckdb.connect() if how == "attach" else duckdb.connect(how)
        con.execute(f"ATTACH '{path}' AS p (READ_ONLY)")
        con.execute("USE p")
    print(json.dumps({"rows": [list(r) for r in con.execute(query).fetchall()]}, default=str))
except duckdb.Error as error:
    print(json.dumps({"error": str(error)}))
"""

T_STATE = "SELECT count(*), sum(i), min(s), max(s) FROM raw.t"


def _analyst(cwd: Path, how: str, path: str, query: str) -> dict:
    """What plain DuckDB in another process, working in ``cwd``, answers: ``{"rows": ...}`` or ``{"error": ...}``."""
    done = subprocess.run(
        [sys.executable, "-c", ANALYST, how, path, query], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _small_lake(root: Path, label: str, rows: int) -> Path:
    """A home whose lake holds raw.t (``rows`` rows, ``i`` = 0..rows-1, the multiples of ten deleted, which leaves a
    delete file) and an empty raw.empty, published to ``root/pulse.duckdb``; returns that file."""
    work, published = PulseHome(root).work_db, PulseHome(root).warehouse
    con = connect(work)
    con.execute("CREATE SCHEMA IF NOT EXISTS raw")
    con.execute("CREATE TABLE IF NOT EXISTS raw.t (i INTEGER, s VARCHAR)")
    con.execute("CREATE TABLE IF NOT EXISTS raw.empty (x DOUBLE)")
    con.execute("DELETE FROM raw.t")
    con.execute("INSERT INTO raw.t SELECT range, ? FROM range(?)", [label, rows])
    con.execute("DELETE FROM raw.t WHERE i % 10 = 0")
    con.close()
    assert publish(work, published) is None
    return published


def _t_state(rows: int, label: str) -> list[list]:
    """raw.t by hand: 0..rows-1 without the multiples of ten (rows a multiple of ten)."""
    kept = [i for i in range(rows) if i % 10]
    return [[len(kept), sum(kept), label, label]]


def test_a_moved_home_s_file_reads_its_own_files_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.setenv(LAKE_CATALOG, "sqlite")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _small_lake(tmp_path / "home", "first", 150)
    before = _t_state(150, "first")  # 135 rows, sum 10125
    (tmp_path / "link").symlink_to(tmp_path / "home")  # a home reached through a link is where it was published
    for how in ("open", "attach", str(elsewhere / "mine.duckdb")):  # attached in place: as before
        assert _analyst(elsewhere, how, "../home/pulse.duckdb", T_STATE) == {"rows": before}
        assert _analyst(elsewhere, how, "../link/pulse.duckdb", T_STATE) == {"rows": before}

    (tmp_path / "home").rename(tmp_path / "moved")
    assert _analyst(elsewhere, "open", "../moved/pulse.duckdb", T_STATE) == {"rows": before}
    assert _analyst(elsewhere, "open", str(tmp_path / "moved" / "pulse.duckdb"), T_STATE) == {"rows": before}
    assert _analyst(elsewhere, "open", "../moved/pulse.duckdb", "SELECT count(*) FROM raw.empty") == {"rows": [[0]]}
    # attached from its new place it cannot know where it is: an error, never rows
    assert "error" in _analyst(elsewhere, "attach", "../moved/pulse.duckdb", T_STATE)


def test_a_copied_home_reads_its_own_files_never_the_original_s(tmp_path, monkeypatch):
    monkeypatch.setenv(LAKE_CATALOG, "sqlite")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _small_lake(tmp_path / "original", "first", 150)
    shutil.copytree(tmp_path / "original", tmp_path / "copy")
    shutil.copytree(tmp_path / "original", tmp_path / "untouched")

    # an untouched copy attached from elsewhere while the original is still there: one line, never its rows
    answer = _analyst(elsewhere, "attach", "../untouched/pulse.duckdb", T_STATE)
    assert f"published for {tmp_path / 'original' / 'pulse.duckdb'}" in answer["error"]
    assert "open it itself" in answer["error"] and "pulse publish" in answer["error"]
    assert "\n" not in answer["error"]

    # the copy and the original go their own ways; each file reads its own home's rows
    _small_lake(tmp_path / "copy", "copied", 70)
    _small_lake(tmp_path / "original", "changed", 40)
    assert _analyst(elsewhere, "open", "../copy/pulse.duckdb", T_STATE) == {"rows": _t_state(70, "copied")}
    assert _analyst(elsewhere, "open", "../original/pulse.duckdb", T_STATE) == {"rows": _t_state(40, "changed")}
    assert _analyst(elsewhere, "open", "../untouched/pulse.duckdb", T_STATE) == {"rows": _t_state(150, "first")}

    # the original gone: the copies still read their own files
    shutil.rmtree(tmp_path / "original")
    assert _analyst(elsewhere, "open", "../copy/pulse.duckdb", T_STATE) == {"rows": _t_state(70, "copied")}
    assert _analyst(elsewhere, "attach", "../copy/pulse.duckdb", T_STATE) == {"rows": _t_state(70, "copied")}
    assert _analyst(elsewhere, "open", "../untouched/pulse.duckdb", T_STATE) == {"rows": _t_state(150, "first")}


def test_a_one_file_home_moves_too(tmp_path, monkeypatch):
    """With PULSE_LAKE_CATALOG=none the analysts' file is a copy of the whole working file: it names no path."""
    monkeypatch.setenv(LAKE_CATALOG, ONE_FILE)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _small_lake(tmp_path / "home", "first", 150)
    (tmp_path / "home").rename(tmp_path / "moved")
    assert _analyst(elsewhere, "open", "../moved/pulse.duckdb", T_STATE) == {"rows": _t_state(150, "first")}


@pytest.fixture
def built_home(small_built_home) -> tuple[Path, dict[str, int]]:
    """The small home the pipeline built once for the run (``conftest.small_built_home``: drop ``a`` of 40
    synthetic sessions ingested and published, a SQLite lake, the settings of ``FAST``). Each test copies it.
    Returns the home and the sessions per drop as the generator wrote them."""
    return small_built_home.home, {"a": small_built_home.sessions}


def _pulse(home: Path, *args: str) -> subprocess.CompletedProcess:
    """``pulse ARGS`` on ``home`` in another process (what a user sees: its exit code, stdout and stderr)."""
    env = {**FAST, "PULSE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), LAKE_CATALOG: "sqlite"}
    command = [sys.executable, "-m", "pulse_pipeline.cli", *args]
    return subprocess.run(command, env={**_environ(), **env}, capture_output=True, text=True, timeout=300)


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PULSE_", "DAGSTER_"))}


PER_DROP = "SELECT drop_id, count(*) FROM raw.sessions GROUP BY drop_id ORDER BY drop_id"


def test_pulse_reads_and_writes_a_moved_home_and_its_copy_stays_its_own(built_home, tmp_path, monkeypatch):
    built, sessions = built_home
    # the home both come from: a copy of the built one (other tests read that one), published where it is, as the
    # pipeline published the built home in its own folder
    origin = tmp_path / "origin"
    shutil.copytree(built, origin, symlinks=True)
    monkeypatch.setenv(LAKE_CATALOG, "sqlite")
    assert publish(PulseHome(origin).work_db, PulseHome(origin).warehouse) is None
    shutil.copytree(origin, tmp_path / "home", symlinks=True)
    shutil.copytree(origin, tmp_path / "copy", symlinks=True)
    (tmp_path / "home").rename(tmp_path / "moved")
    moved = tmp_path / "moved"
    with _aside(origin):  # the home both came from is gone: nothing may read its files
        _moved_and_copied(moved, tmp_path / "copy", sessions, tmp_path, monkeypatch)


@contextlib.contextmanager
def _aside(home: Path) -> Iterator[None]:
    """``home`` renamed away meanwhile."""
    away = home.with_name(home.name + ".away")
    home.rename(away)
    try:
        yield
    finally:
        away.rename(home)


def _moved_and_copied(moved: Path, copy: Path, sessions: dict[str, int], tmp_path: Path, monkeypatch) -> None:
    """`pulse sql` and `pulse report` on the moved home, a drop ingested into it, and the copy read after."""
    done = _pulse(moved, "sql", PER_DROP, "--csv")
    assert (done.returncode, done.stdout.split()) == (0, ["drop_id,count_star()", f"a,{sessions['a']}"]), done.stderr
    done = _pulse(moved, "report")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip() == str(moved / "report" / "index.html")

    # attached from elsewhere, the file cannot know it moved: it fails (its old home is gone) until it is published
    # for where it is now
    assert "error" in _analyst(tmp_path, "attach", "moved/pulse.duckdb", PER_DROP)
    for name, value in {**FAST, "PULSE_HOME": str(moved), "DAGSTER_HOME": str(moved / "dagster")}.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["publish"]) == 0
    assert _analyst(tmp_path, "attach", "moved/pulse.duckdb", PER_DROP) == {"rows": [["a", sessions["a"]]]}

    # a writer in the moved home: a second drop ingested, published, and read from its own files
    corpus = write_corpus(tmp_path / "corpus" / "b", 12, seed=2)
    runs.ingest(PulseHome.from_env(), tmp_path / "corpus" / "b", say=lambda _: None)
    expected = [["a", sessions["a"]], ["b", corpus.n_sessions]]
    assert _analyst(tmp_path, "open", "moved/pulse.duckdb", PER_DROP) == {"rows": expected}
    # the copy made before the move has drop a alone, read from its own files
    assert _analyst(copy.parent, "open", f"{copy.name}/pulse.duckdb", PER_DROP) == {"rows": [["a", sessions["a"]]]}


def _absolute_views(home: Path) -> None:
    """Publish ``home`` as PULSE did before this change: every view over the absolute paths of its Parquet files
    (``lake.view_sql`` as it was), no guard."""
    con = connect(PulseHome(home).work_db)
    con.begin()
    tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'lake'").fetchall()
    published = PulseHome(home).warehouse
    tmp = published.with_name("old.duckdb")
    out = duckdb.connect(str(tmp))
    for schema, table in tables:
        columns = con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = 'lake' AND schema_name = ?"
            " AND table_name = ? ORDER BY column_index",
            [schema, table],
        ).fetchall()
        files = con.execute(
            "SELECT data_file, delete_file FROM ducklake_list_files('lake', ?, schema => ?)", [table, schema]
        ).fetchall()
        select = ", ".join(f'"{name}"::{kind} AS "{name}"' for name, kind in columns)
        parts = [
            f"SELECT {select} FROM read_parquet('{data}', file_row_number = true)"
            + (f" WHERE file_row_number NOT IN (SELECT pos FROM read_parquet('{deletes}'))" if deletes else "")
            for data, deletes in files
        ] or ["SELECT " + ", ".join(f'NULL::{kind} AS "{name}"' for name, kind in columns) + " WHERE false"]
        out.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        out.execute(f'CREATE VIEW "{schema}"."{table}" AS ' + " UNION ALL ".join(parts))
    out.close()
    con.close()
    tmp.replace(published)


def test_a_file_published_for_the_home_before_a_move_is_published_again(built_home, tmp_path, monkeypatch):
    """A home published before views found their own home, then moved: `pulse sql` publishes it again first."""
    home, sessions = built_home
    shutil.copytree(home, tmp_path / "home", symlinks=True)
    monkeypatch.setenv(LAKE_CATALOG, "sqlite")
    _absolute_views(tmp_path / "home")
    assert _analyst(tmp_path, "open", "home/pulse.duckdb", PER_DROP) == {"rows": [["a", sessions["a"]]]}
    (tmp_path / "home").rename(tmp_path / "moved")
    assert "No files found" in _analyst(tmp_path, "open", "moved/pulse.duckdb", PER_DROP)["error"]

    done = _pulse(tmp_path / "moved", "sql", PER_DROP, "--csv")
    assert (done.returncode, done.stdout.split()) == (0, ["drop_id,count_star()", f"a,{sessions['a']}"]), done.stderr
    assert f"reads the files of {tmp_path / 'home'}/ (this home was moved or copied)" in done.stderr
    assert _analyst(tmp_path, "open", "moved/pulse.duckdb", PER_DROP) == {"rows": [["a", sessions["a"]]]}
