"""Hostile ids never stop a home (issue 34 item 1), and ``pulse drop ls`` / ``pulse drop rm`` (``drops.py``).

One JSON line whose session id held a NUL character made every later run of a lake home fail ("Parser Error: ...
unterminated quoted string at or near "'nul))))"): DuckLake writes a filter's constants into the SQL it sends its
catalog (``ingest/events.NUL_IN_ID`` has the evidence). Such an id is now quarantined with its reason; quotes,
backslashes, line breaks and 10 000 characters are kept exactly. A lake an earlier PULSE poisoned is repaired by
``pulse drop rm``. Every expected value below was worked out by hand from the records written here. Each test runs
on the embedded lake (SQLite catalog) and on the one-file storage (``PULSE_LAKE_CATALOG=none``).
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from pulse_pipeline import drops, runs
from pulse_pipeline.cli import main
from pulse_pipeline.connections import connect
from pulse_pipeline.defs.ingest.partitions import drops_partitions
from pulse_pipeline.defs.ingest.sensors import drop_sensor
from pulse_pipeline.defs.resources import warehouse_resource
from pulse_pipeline.ingest.drop import list_drops
from pulse_pipeline.ingest.load import load_drop, reconcile_drop
from pulse_pipeline.settings import LAKE_CATALOG, ONE_FILE
from pulse_pipeline.warehouse import Warehouse

from .helpers import rebuild_staging, rows

FAST = {"PULSE_CV_SEEDS": "1", "PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_INGEST_WORKERS": "1"}
USER = {"id": "1", "source": "user", "type": "message", "text": "go"}
AGENT = {"id": "2", "source": "agent", "type": "message", "text": "done", "wait_for_response": True}

NUL_ID = "zz\x00nul"
KEPT_IDS = {
    "quote": "it's \"quoted\" ''",
    "backslash": "back\\slash\\' \\x00 \\",
    "newline": "line\nbreak\r\n\ttab",
    "long": "L" * 10_000,
}


@pytest.fixture(params=["lake", "one file"])
def storage(request, monkeypatch) -> str:
    """The embedded lake (the default), or one DuckDB file."""
    if request.param == "one file":
        monkeypatch.setenv(LAKE_CATALOG, ONE_FILE)
    else:
        monkeypatch.delenv(LAKE_CATALOG, raising=False)
    return request.param


def session(session_id: str) -> dict:
    return {"session_id": session_id, "user_id": "u1", "experiment": "exp", "variant": "a", "events": [USER, AGENT]}


def write_drop(folder: Path, lines: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "sessions.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def hostile_drop(folder: Path) -> Path:
    """The NUL id as a session's, a rating's and an assignment's id (3 records quarantined), and each kept id as a
    session with a rating of 5 stars (label 1.0) and an assignment (4 x 3 records accepted)."""
    lines = [
        session(NUL_ID),
        {"session_id": NUL_ID, "rating": 3},
        {"session_id": NUL_ID, "experiment": "e", "variant": "b"},
    ]
    for sid in KEPT_IDS.values():
        lines += [
            session(sid),
            {"session_id": sid, "rating": 5},
            {"session_id": sid, "experiment": "e2", "variant": "b"},
        ]
    return write_drop(folder, lines)


def clean_drop(folder: Path) -> Path:
    """Two plain sessions, one rated 1 star (label 0.0)."""
    return write_drop(folder, [session("clean-1"), session("clean-2"), {"session_id": "clean-1", "rating": 1}])


def test_an_id_with_a_nul_is_quarantined_and_other_hostile_ids_are_kept_exactly_then_a_clean_drop_loads(
    storage, tmp_path
):
    con = connect(tmp_path / ".work" / "pulse-work.duckdb")
    wh = Warehouse(con)
    hostile = hostile_drop(tmp_path / "drops" / "hostile")
    load_drop(wh, "hostile", hostile)
    assert reconcile_drop(wh, "hostile") == (
        True,
        {
            "records_read": 15,
            "records_accepted": 12,
            "records_quarantined": 3,
            "events_read": 8,  # the NUL session's two events are in its quarantined record's raw text
            "events_accepted": 8,
            "events_quarantined": 0,
        },
    )
    reasons = rows(wh, "SELECT record_index, record_type, reason FROM raw.quarantine ORDER BY record_index")
    nul = '"zz\\u0000nul" holds a NUL character (\\u0000)'
    assert [(i, kind) for i, kind, _ in reasons] == [(0, "session"), (1, "rating"), (2, "assignment")]
    assert all(nul in reason for _, _, reason in reasons), reasons
    rebuild_staging(wh)  # failed on the lake: "Failed to get data file list from DuckLake: unterminated quoted ..."
    clean = clean_drop(tmp_path / "drops" / "clean")
    load_drop(wh, "clean", clean)
    rebuild_staging(wh)
    staged = sorted(
        rows(
            wh,
            "SELECT session_id, label FROM staging.session_labels RIGHT JOIN staging.sessions"
            " USING (session_id) ORDER BY session_id",
        )
    )
    assert staged == sorted([*((sid, 1.0) for sid in KEPT_IDS.values()), ("clean-1", 0.0), ("clean-2", None)])
    # each kept id is stored exactly, and found again as a parameter
    for sid in KEPT_IDS.values():
        assert rows(wh, "SELECT count(*) FROM staging.assignments WHERE session_id = ?", [sid]) == [(1,)]
    assert rows(wh, "SELECT max(length(session_id)) FROM staging.sessions") == [(10_000,)]
    assert drops.drops_with_nul_ids(con) == {}
    con.close()


POISONED_TABLES = (
    "raw.sessions",
    "raw.events",
    "staging.sessions",
    "staging.work_segments",
    "staging.computed_versions",
)


def _poison(wh: Warehouse, session_id: str) -> None:
    """Store a NUL session id where PULSE before issue 34 had stored one when its refresh failed: the session's
    raw rows, its staged session, its segments and their bookkeeping (``session_id`` renamed)."""
    for table in POISONED_TABLES:
        wh.con.execute(f"UPDATE {table} SET session_id = ? WHERE session_id = ?", [NUL_ID, session_id])


def test_drop_rm_repairs_a_lake_an_earlier_pulse_poisoned_with_a_nul_id(storage, tmp_path):
    con = connect(tmp_path / ".work" / "pulse-work.duckdb")
    wh = Warehouse(con)
    clean = clean_drop(tmp_path / "drops" / "clean")
    load_drop(wh, "clean", clean)
    poisoned = write_drop(tmp_path / "drops" / "poisoned", [session("p-1")])
    load_drop(wh, "poisoned", poisoned)
    rebuild_staging(wh)
    _poison(wh, "p-1")
    assert drops.drops_with_nul_ids(con) == {"poisoned": 3}  # one session, two events
    states = {s.drop: s.state for s in drops.drop_states(con, tmp_path / "drops")}
    assert states["clean"] == "loaded" and states["poisoned"].startswith("ids with NUL (3 rows)")
    if storage == "lake":  # what every later run met: the refresh's join on session_id
        wh.con.execute("CREATE OR REPLACE TEMP TABLE probe AS SELECT ?::VARCHAR AS session_id", [NUL_ID])
        with pytest.raises(duckdb.ParserException, match="unterminated quoted string"):
            wh.con.execute("SELECT count(*) FROM staging.work_segments SEMI JOIN probe USING (session_id)")
    removed = drops.remove_rows(wh, tmp_path / "drops", "poisoned")
    assert removed.raw_rows == {
        "raw.drops": 1,
        "raw.sessions": 1,
        "raw.events": 2,
        "raw.ratings": 0,
        "raw.asks": 0,
        "raw.assignments": 0,
        "raw.quarantine": 0,
        "raw.eval_scores": 0,
    }
    # its staged session, its segment (a user message, then the agent waits: one) and their bookkeeping
    assert removed.nul_id_rows == {
        "staging.sessions": 1,
        "staging.computed_versions": 1,
        "staging.work_segments": 1,
    }
    assert not poisoned.exists() and sorted(p.name for p in (tmp_path / "drops").iterdir()) == [
        ".register.lock",
        "clean",
    ]
    more = write_drop(tmp_path / "drops" / "more", [session("more-1")])
    load_drop(wh, "more", more)
    rebuild_staging(wh)
    assert rows(wh, "SELECT session_id FROM staging.sessions ORDER BY 1") == [("clean-1",), ("clean-2",), ("more-1",)]
    assert rows(wh, "SELECT count(*) FROM staging.work_segments") == [(3,)]
    con.close()


def test_a_failed_removal_leaves_the_drop_and_its_folder_as_they_were(storage, tmp_path, monkeypatch):
    con = connect(tmp_path / ".work" / "pulse-work.duckdb")
    wh = Warehouse(con)
    clean = clean_drop(tmp_path / "drops" / "clean")
    load_drop(wh, "clean", clean)
    rebuild_staging(wh)
    # the raw rows are deleted, then the statement after them fails
    monkeypatch.setattr(drops, "HOLDS_NUL", "{column} = error('disk gone')")
    with pytest.raises(duckdb.InvalidInputException, match="disk gone"):
        drops.remove_rows(wh, tmp_path / "drops", "clean")
    assert clean.is_dir() and (clean / "sessions.jsonl").is_file()
    assert rows(wh, "SELECT count(*) FROM raw.sessions") == [(2,)]
    monkeypatch.undo()
    assert [s.state for s in drops.drop_states(con, tmp_path / "drops")] == ["loaded"]
    con.close()


@pytest.mark.slow
def test_pulse_ingest_quarantines_a_nul_id_and_a_clean_drop_after_it_publishes(
    storage, pulse_home, tmp_path, monkeypatch, capsys
):
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    assert main(["ingest", str(hostile_drop(tmp_path / "hostile"))]) == 0
    assert "holds a NUL character" in capsys.readouterr().out
    assert main(["ingest", str(clean_drop(tmp_path / "clean"))]) == 0
    assert f"published {pulse_home.warehouse}" in capsys.readouterr().err
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        staged = con.execute("SELECT session_id FROM staging.sessions ORDER BY 1").fetchall()
    assert sorted(staged) == sorted([("clean-1",), ("clean-2",), *((sid,) for sid in KEPT_IDS.values())])


@pytest.mark.slow
def test_pulse_drop_ls_and_rm(storage, pulse_home, tmp_path, monkeypatch, capsys):
    """Drop A: two sessions, a rating and a line that is not JSON (quarantined); drop B: one session."""
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    a = write_drop(tmp_path / "A", [session("a-1"), session("a-2"), {"session_id": "a-1", "rating": 4}])
    with (a / "sessions.jsonl").open("a") as f:
        f.write("{not json\n")
    b = write_drop(tmp_path / "B", [session("b-1")])
    assert main(["ingest", str(a)]) == 0
    assert main(["ingest", str(b)]) == 0
    capsys.readouterr()
    assert main(["drop", "ls", "--json"]) == 0
    listed = {d["drop"]: d for d in json.loads(capsys.readouterr().out)}
    assert {k: (d["sessions"], d["quarantined"], d["state"]) for k, d in listed.items()} == {
        "A": (2, 1, "loaded"),
        "B": (1, 0, "loaded"),
    }
    assert all(d["fingerprint"] and d["loaded_at"] for d in listed.values())

    assert main(["drop", "rm", "A"]) == 0
    out, err = capsys.readouterr()
    # raw.drops 1, raw.sessions 2, raw.events 4 (two a session), raw.ratings 1, raw.quarantine 1
    assert (
        "removed drop A: 9 raw rows (1 raw.drops, 2 raw.sessions, 4 raw.events, 1 raw.ratings, 1 raw.quarantine)" in out
    )
    assert f"published {pulse_home.warehouse}" in err
    assert not (pulse_home.drops / "A").exists()
    instance = runs.instance_for(pulse_home)
    assert instance.get_dynamic_partitions(drops_partitions.name) == ["B"]
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        assert con.execute("SELECT session_id FROM staging.sessions").fetchall() == [("b-1",)]
        assert con.execute("SELECT count(*) FROM staging.session_labels").fetchall() == [(0,)]
        assert con.execute("SELECT count(*) FROM features.event_features").fetchall() == [(1,)]
    # neither the sensor nor `pulse materialize` (which reads the drop folder's listing) loads A again
    with dg.build_sensor_context(instance=instance, resources={"warehouse": warehouse_resource(pulse_home)}) as context:
        result = drop_sensor(context)
    # B is loaded as it is (the sensor never runs it again), and A is gone: nothing to request
    assert not result.run_requests and not result.dynamic_partitions_requests
    assert list(list_drops(pulse_home.drops)) == ["B"]
    assert main(["drop", "ls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].split()[0] == "B" and lines[1].endswith("loaded")

    assert main(["drop", "rm", "A"]) == 2
    assert capsys.readouterr().err.strip() == f"pulse drop: no drop 'A' in {pulse_home.root}; its drops: B"


def test_drop_ls_and_rm_before_anything_was_ingested(pulse_home, capsys):
    assert main(["drop", "ls"]) == 0
    assert "no drops in" in capsys.readouterr().out
    assert main(["drop", "rm", "x"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_home_and_warehouses_whose_paths_hold_a_quote_attach(storage, tmp_path):
    """ATTACH takes no parameter, so its paths are quoted literals (``lake.attach``, ``warehouse_diff``)."""
    home = tmp_path / "it's a home"
    con = connect(home / ".work" / "pulse-work.duckdb")
    Warehouse(con)
    con.execute("CREATE TABLE raw.probe AS SELECT 1 AS x")  # in the lake, or in the file
    con.close()
    files = []
    for name in ("o'one.duckdb", "t'two.duckdb"):
        with duckdb.connect(str(tmp_path / name)) as db:
            db.execute("CREATE SCHEMA s; CREATE TABLE s.t AS SELECT 1 AS x")
        files.append(str(tmp_path / name))
    assert main(["diff", *files]) == 0


def test_drop_rm_whose_refresh_fails_says_in_one_line_that_the_drop_is_gone_and_what_to_run(
    pulse_home, monkeypatch, capsys
):
    con = connect(pulse_home.work_db)
    load_drop(Warehouse(con), "A", clean_drop(pulse_home.drops / "A"))
    con.close()

    def refresh_fails(*args, **kwargs):
        raise RuntimeError("run of refresh_downstream (all drops) failed: disk full")

    monkeypatch.setattr(runs, "_execute", refresh_fails)
    assert main(["drop", "rm", "A"]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines()[-1] == (
        "pulse drop: drop A was removed, but refreshing the tables derived from it failed (run of refresh_downstream"
        " (all drops) failed: disk full); fix the cause, then run `pulse materialize`"
    )
    assert not (pulse_home.drops / "A").exists()
    assert main(["drop", "ls"]) == 0
    assert capsys.readouterr().out.startswith("no drops in")
