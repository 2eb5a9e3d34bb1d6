"""What an ingest says about its outcome (issue 33, items 1 and 6): a drop that replaces sessions another drop
delivered is recorded and reported; an empty drop is refused; quarantine reasons are counted and shown, and
``--strict`` fails on them. Every count below is worked out by hand from the corpora written here."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from pulse_pipeline import staging
from pulse_pipeline.cli import main
from pulse_pipeline.defs.ingest.sensors import drop_sensor
from pulse_pipeline.defs.resources import warehouse_resource
from pulse_pipeline.ingest.drop import list_drops, why_empty
from pulse_pipeline.ingest.load import load_drop
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.quarantine import reasons, summary_lines
from pulse_pipeline.synth import write_corpus

from .helpers import rebuild_staging, rows

BASE_TIME = 1_700_000_000
QUICK_MODELS = {"PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_CV_SEEDS": "1"}


def _dated(folder: Path, seconds: int) -> Path:
    """Date every file of ``folder`` ``seconds`` after a base: a later drop wins a session id (staging/sql.py)."""
    for f in folder.rglob("*"):
        os.utime(f, (BASE_TIME + seconds, BASE_TIME + seconds))
    return folder


def _load(wh, *drops: Path) -> None:
    for d in drops:
        load_drop(wh, d.name, d)
    rebuild_staging(wh)


# --------------------------------------------------------------------------------------------------------
# a drop that replaces sessions of another drop


def test_a_later_drop_with_the_same_ids_replaces_sessions_and_each_replacement_is_recorded(wh, tmp_path):
    """By hand: A holds same-s000001..same-s000030, B (another seed, the same prefix) same-s000001..same-s000012,
    dated later: B wins those 12 (other content), A keeps 18. A copy of A under another name, dated later still,
    wins all 30; it replaces B's 12 (other content) and none of A's (the same content: a re-delivery)."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_corpus(a, 30, seed=1, prefix="same")
    write_corpus(b, 12, seed=2, prefix="same")
    _load(wh, _dated(a, 100), _dated(b, 200))

    winners = dict(rows(wh, "SELECT drop_id, count(*) FROM staging.sessions GROUP BY 1"))
    assert winners == {"a": 18, "b": 12}
    replaced = rows(wh, "SELECT session_id, drop_id, replaced_by_drop_id FROM staging.replaced_sessions ORDER BY 1")
    assert replaced == [(f"same-s{k:06d}", "a", "b") for k in range(1, 13)]
    assert staging.replacements(wh) == [("b", "a", 12)]
    first = rows(wh, "SELECT user_id, replaced_by_user_id FROM staging.replaced_sessions ORDER BY session_id")[0]
    assert first[0].startswith("same-u") and first[1].startswith("same-u")  # each corpus's own user

    again = tmp_path / "a-again"
    shutil.copytree(a, again)
    _load(wh, _dated(again, 300))
    assert dict(rows(wh, "SELECT drop_id, count(*) FROM staging.sessions GROUP BY 1")) == {"a-again": 30}
    assert staging.replacements(wh) == [("a-again", "b", 12)]

    load_drop(wh, "a-again", again)  # loading a drop again changes nothing
    rebuild_staging(wh)
    assert staging.replacements(wh) == [("a-again", "b", 12)]


def test_a_drop_delivered_twice_under_two_names_replaces_nothing(wh, tmp_path):
    a = tmp_path / "a"
    write_corpus(a, 15, seed=3)
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    _load(wh, _dated(a, 100), _dated(copy, 200))
    assert dict(rows(wh, "SELECT drop_id, count(*) FROM staging.sessions GROUP BY 1")) == {"copy": 15}
    assert rows(wh, "SELECT count(*) FROM raw.sessions") == [(30,)]
    assert staging.replacements(wh) == []


def test_two_default_synth_corpora_with_different_seeds_share_no_id(tmp_path, capsys):
    for seed in (5, 6):
        assert main(["synth", "--sessions", "25", "--seed", str(seed), "--out", str(tmp_path / f"s{seed}")]) == 0
    ids = {}
    for seed in (5, 6):
        lines = (tmp_path / f"s{seed}" / "assignments.csv").read_text().splitlines()[1:]
        ids[seed] = {line.split(",")[0] for line in lines} | {line.split(",")[3] for line in lines}
    assert len(ids[5]) > 25 and not ids[5] & ids[6]
    assert "ids: sessions c" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------------------
# empty drops


@pytest.mark.parametrize("shape", ["empty folder", "empty file", "white space", "only sidecars and empty files"])
def test_an_empty_drop_is_refused_and_nothing_is_registered(pulse_home, tmp_path, capsys, shape):
    path = tmp_path / "nothing"
    if shape == "empty folder":
        path.mkdir()
    elif shape == "empty file":
        path = tmp_path / "nothing.jsonl"
        path.touch()
    elif shape == "white space":
        path = tmp_path / "nothing.jsonl"
        path.write_bytes(b"\xef\xbb\xbf \n\r\n\t\n")
    else:
        (path / "sub").mkdir(parents=True)
        (path / "_truth.json").write_text("{}")
        (path / ".notes").write_text("x")
        (path / "sub" / "ratings.csv").touch()
    assert main(["ingest", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"pulse ingest: refused: {path} ") and "Traceback" not in err[0]
    assert list(pulse_home.drops.iterdir()) == []  # no copy, no staging copy left behind
    assert not pulse_home.warehouse.exists() and not pulse_home.work_db.exists()  # no raw.drops row anywhere
    instance = dg.DagsterInstance.from_config(str(pulse_home.dagster_home))
    assert instance.get_dynamic_partitions("drops") == []


def test_a_drop_with_anything_to_read_or_to_quarantine_is_not_empty(tmp_path):
    (tmp_path / "garbage.txt").write_text("hello\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "empty.json").touch()
    (tmp_path / "folder" / "link").symlink_to(tmp_path / "garbage.txt")  # a quarantine row says why
    assert why_empty(tmp_path / "garbage.txt") is None
    assert why_empty(tmp_path / "folder") is None
    assert "holds no file with data" in why_empty(_empty(tmp_path / "blank"))


def _empty(path: Path) -> Path:
    path.mkdir()
    return path


def test_the_sensor_leaves_an_empty_folder_alone_until_it_holds_data(pulse_home):
    """An empty folder put in the drop folder was a permanent empty drop and a full pipeline run."""
    waiting = _empty(pulse_home.drops / "waiting")
    real = _empty(pulse_home.drops / "real")
    (real / "s.jsonl").write_text('{"session_id": "s1", "events": [{"source": "user", "type": "message"}]}\n')
    instance = dg.DagsterInstance.ephemeral()
    resources = {"warehouse": warehouse_resource(pulse_home)}

    with dg.build_sensor_context(instance=instance, resources=resources) as context:  # the resource opens and closes
        result = drop_sensor(context)
    assert [r.partition_key for r in result.run_requests] == ["real"]
    assert [req.partition_keys for req in result.dynamic_partitions_requests] == [["real"]]
    assert list(list_drops(pulse_home.drops)) == ["real"]

    (waiting / "s.jsonl").write_text('{"session_id": "s2", "events": [{"source": "user", "type": "message"}]}\n')
    with dg.build_sensor_context(instance=instance, resources=resources) as context:
        result = drop_sensor(context)
    assert sorted(r.partition_key for r in result.run_requests) == ["real", "waiting"]


# --------------------------------------------------------------------------------------------------------
# quarantine reasons


def test_quarantine_reasons_are_counted_most_frequent_first(wh, tmp_path):
    """By hand: three 7-star ratings (one reason), two identical broken lines (one reason: the same parser
    message), a CSV ratings file whose id column is misnamed (two rows, one reason), a CSV with no rating
    column at all (the whole file, one record), and a 9-star rating inside a session record (its second item)."""
    drop = tmp_path / "bad"
    drop.mkdir()
    session = '{"session_id": "s1", "events": [{"source": "user", "type": "message"}], "ratings": [{"rating": 4},'
    (drop / "s.jsonl").write_text(session + ' {"rating": 9}]}\n')
    seven = '{"conversation_id": "s1", "rating": 7}\n'
    (drop / "ratings.jsonl").write_text(seven * 3 + "{not json\n" * 2)
    (drop / "misnamed.csv").write_text("conv,rating\ns1,4\ns1,5\n")
    (drop / "columns.csv").write_text("session,stars\ns1,4\n")
    _load(wh, drop)

    found = reasons(wh.con, "bad")
    assert [(r.count, r.stage) for r in found] == [(3, "ingest"), (2, "ingest"), (2, "ingest"), (1, "ingest")] + [
        (1, "ingest")
    ]
    assert found[0].reason == "rating 7 is not a star rating: expected a number from 1 to 5"
    assert found[0].examples == (
        "bad/ratings.jsonl record 0",
        "bad/ratings.jsonl record 1",
        "bad/ratings.jsonl record 2",
    )
    two = {r.reason for r in found[1:3]}
    assert "rating names no session: expected a conversation_id or session_id (its fields: conv, rating)" in two
    assert any(r.startswith("not valid JSON") for r in two)
    columns = found[3].reason
    assert "its header (session, stars)" in columns and "expected a ratings file (conversation_id or" in columns
    assert (found[4].reason, found[4].examples) == (
        "rating 9 is not a star rating: expected a number from 1 to 5",
        ("bad/s.jsonl record 0 item 1",),
    )

    lines = summary_lines([(r.reason, r.count) for r in found], "bad", limit=2)
    assert lines[0] == "quarantined, by reason:"
    assert lines[1] == "       3  rating 7 is not a star rating: expected a number from 1 to 5"
    assert lines[3] == "       4  (3 other reasons)"
    assert lines[4].startswith("see them: pulse quarantine --drop bad ")
    assert summary_lines([], "bad") == []


# --------------------------------------------------------------------------------------------------------
# the command line, end to end: two ingests


@pytest.mark.slow
def test_ingest_reports_reasons_and_replacements_and_strict_fails_on_quarantine(
    pulse_home, tmp_path, capsys, monkeypatch
):
    """A: 30 sessions with the five broken records of ``corpus.MALFORMED`` (one reason each: a line that is no
    JSON, a 7-star rating, an ask of probability 0, a session whose history is no list, a rating of a session no
    drop has). B: 20 sessions with A's prefix, another seed, dated later: it replaces A's first 20 and quarantines
    nothing (20 sessions of seed 2 hold 2 rated ones: a smaller corpus would write an empty ratings file, which is
    quarantined as such)."""
    for name, value in QUICK_MODELS.items():
        monkeypatch.setenv(name, value)
    a, b = tmp_path / "A", tmp_path / "B"
    write_corpus(a, 30, seed=1, prefix="same", malformed=5)
    assert main(["synth", "--sessions", "20", "--seed", "2", "--prefix", "same", "--out", str(b)]) == 0
    _dated(a, 100), _dated(b, 200)
    capsys.readouterr()

    assert main(["ingest", str(a), "--strict"]) == 1  # five quarantined
    captured = capsys.readouterr()
    out = captured.out
    assert "drop A: 30 sessions," in out and " 5 quarantined" in out
    assert "quarantined, by reason:" in out and "see them: pulse quarantine --drop A " in out
    reason_lines = [line for line in out.splitlines() if line.startswith("       1  ")]
    assert len(reason_lines) == 5
    for expected in ("rating 7 is not a star rating", "ask_probability 0 is not", "no-such-session", "not valid JSON"):
        assert any(expected in line for line in reason_lines), expected
    assert "replaced" not in out
    assert "--strict: 5 records of drop A were quarantined" in captured.err

    assert main(["quarantine", "--drop", "A"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("5 records quarantined in drop A, 5 reasons\n")
    assert "e.g. A/ratings.jsonl record" in out and "every record with its raw text: pulse sql" in out
    assert main(["quarantine", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(r["count"] for r in listed) == [1] * 5
    assert {r["stage"] for r in listed} == {"ingest", "staging"}  # the unknown session is found at staging
    assert main(["quarantine", "--drop", "nope"]) == 2
    assert "no drop 'nope'" in capsys.readouterr().err

    assert main(["ingest", str(b), "--strict"]) == 0  # nothing of B quarantined
    out = capsys.readouterr().out
    assert "drop B: 20 sessions," in out and " 0 quarantined" in out and "quarantined, by reason" not in out
    assert "replaced 20 sessions another drop had delivered, with other content" in out
    assert "20 from drop A" in out and "staging.replaced_sessions" in out
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        by_drop = dict(con.execute("SELECT drop_id, count(*) FROM staging.sessions GROUP BY 1").fetchall())
        replaced = con.execute(
            "SELECT drop_id, replaced_by_drop_id, count(*) FROM staging.replaced_sessions GROUP BY ALL"
        )
        assert by_drop == {"A": 10, "B": 20} and replaced.fetchall() == [("A", "B", 20)]
    instance = dg.DagsterInstance.from_config(str(PulseHome.from_env().dagster_home))
    check = dg.AssetCheckKey(dg.AssetKey(["staging", "replaced_sessions"]), "no_session_replaced_by_another_drop")
    evaluation = instance.event_log_storage.get_latest_asset_check_execution_by_key([check])[check].event
    result = evaluation.dagster_event.event_specific_data
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert result.metadata["replaced_sessions"].value == 20


def test_pulse_quarantine_without_a_readable_warehouse_says_so_in_one_line(pulse_home, capsys):
    assert main(["quarantine"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"pulse quarantine: no warehouse at {pulse_home.warehouse} yet: run `pulse ingest PATH` or `pulse demo` first"
    )
    pulse_home.warehouse.write_text("not a database\n")
    assert main(["quarantine", "--drop", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"pulse quarantine: cannot read the quarantine of {pulse_home.warehouse}: "
    )
