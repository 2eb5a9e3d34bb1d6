"""Large drops are read in pieces by worker processes; the tables must not depend on how the drop was read.
And a warehouse written by an older PULSE is brought to the current table contract, or refused with the reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline import tables
from pulse_pipeline.connections import connect
from pulse_pipeline.contract import ensure_tables
from pulse_pipeline.ingest import drop as drop_module
from pulse_pipeline.ingest.drop import DropTally, DropUnit, plan, plan_reads
from pulse_pipeline.ingest.load import load_drop, reconcile_drop
from pulse_pipeline.synth import write_corpus
from pulse_pipeline.warehouse import Warehouse

from .helpers import FIXTURES


def _contents(wh: Warehouse, which=tables.RAW_TABLES) -> dict[str, list[tuple]]:
    return {t.qualified: sorted(wh.con.execute(f"SELECT * FROM {t.qualified}").fetchall(), key=repr) for t in which}


def test_pieces_cover_every_line_once(tmp_path):
    f = tmp_path / "records.jsonl"
    lines = [
        f'{{"session_id": "s{i}", "events": [{{"source": "user", "type": "message", "text": "{"x" * i}"}}]}}'
        for i in range(50)
    ]
    f.write_text("\n".join(lines) + "\n")
    pieces = plan(DropUnit(f, f.name, False), split_bytes=500)
    assert len(pieces) > 3
    assert pieces[0].start == 0 and pieces[-1].end == f.stat().st_size
    assert all(a.end == b.start for a, b in zip(pieces, pieces[1:], strict=False))
    data = f.read_bytes()
    # each piece starts at a line start, and first_line is that line's number
    for p in pieces:
        assert p.start == 0 or data[p.start - 1 : p.start] == b"\n"
        assert data.count(b"\n", 0, p.start) == p.first_line


def test_a_pretty_printed_document_is_never_split(tmp_path):
    f = tmp_path / "events.json"
    f.write_text(
        '[\n  {"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}}\n' + " " * 2000 + "]"
    )
    assert len(plan(DropUnit(f, f.name, False), split_bytes=100)) == 1


@pytest.mark.parametrize("workers", ["1", "2"])
def test_parallel_pieces_give_the_same_tables_as_one_serial_read(tmp_path, monkeypatch, workers):
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 120, seed=11, sessions_per_file=60)

    serial = Warehouse(duckdb.connect())
    monkeypatch.setenv("PULSE_INGEST_WORKERS", "1")
    load_drop(serial, "d", corpus)

    monkeypatch.setattr(drop_module, "SPLIT_BYTES", 200_000)  # many pieces per file
    monkeypatch.setenv("PULSE_INGEST_WORKERS", workers)
    pieced = Warehouse(duckdb.connect())
    tally = load_drop(pieced, "d", corpus)

    assert tally.records_read == tally.records_accepted and tally.events_read == tally.events_accepted
    assert _contents(pieced) == _contents(serial)


def test_a_load_that_fails_midway_leaves_no_partial_drop_in_staging(tmp_path, monkeypatch):
    from pulse_pipeline.ingest import load as load_module

    from .helpers import rebuild_staging

    corpus = tmp_path / "corpus"
    write_corpus(corpus, 40, seed=2, sessions_per_file=10)
    wh = Warehouse(duckdb.connect())
    load_drop(wh, "d", corpus)
    rebuild_staging(wh)
    before = _contents(wh, tables.ALL_TABLES)

    real = load_module._read_serial

    def failing(drop_id, reads):
        for n, batch in enumerate(real(drop_id, reads)):
            if n == 3:  # after three of the four sessions files (with assignments.csv and ratings.jsonl)
                raise OSError("disk went away")
            yield batch

    monkeypatch.setattr(load_module, "CHUNK_EVENTS", 1)  # hand over each sessions file's rows on their own ...
    monkeypatch.setattr(load_module, "COMMIT_ROWS", 1)  # ... and commit after every batch, as a large drop would
    monkeypatch.setattr(load_module, "_read_serial", failing)
    with pytest.raises(OSError):
        load_drop(wh, "d", corpus)
    assert wh.count(tables.SESSIONS) > 0  # partial rows were committed ...
    rebuild_staging(wh)
    assert wh.count(tables.STAGING_SESSIONS) == 0  # ... but without its raw.drops row the drop is not in staging

    monkeypatch.setattr(load_module, "_read_serial", real)
    load_drop(wh, "d", corpus)
    rebuild_staging(wh)
    assert _contents(wh, tables.ALL_TABLES) == before


def test_a_roll_added_while_the_drop_is_read_leaves_the_drop_not_loaded_as_it_is(tmp_path):
    """Issue 35: the rating service adds roll files to its day's drop while the drop sensor's run reads it. The
    ``raw.drops`` row recorded the fingerprint taken after the read, which covered a roll the read never saw: the
    drop counted as loaded as it is, and that roll's ratings stayed out until the next roll changed the
    fingerprint again (never, for the day's last roll). The row now vouches for the drop as it was when it was
    listed, so the sensor loads it again and the roll is read then."""
    day = tmp_path / "serve-2026-12-04"
    day.mkdir()
    (day / "roll-00000001.jsonl").write_text('{"id": "r1", "session_id": "s1", "rating": 4}\n')
    listed = drop_module.fingerprint(day)
    wh = Warehouse(duckdb.connect())

    def a_roll_arrives(done: int, total: int) -> None:  # called once the first batch's rows are inserted
        (day / "roll-00000002.jsonl").write_text('{"id": "r2", "session_id": "s1", "rating": 2}\n')

    load_drop(wh, "serve-2026-12-04", day, advance=a_roll_arrives)
    assert wh.con.execute("SELECT rating_id FROM raw.ratings").fetchall() == [("r1",)]  # the roll was not read ...
    (recorded,) = wh.con.execute("SELECT fingerprint FROM raw.drops").fetchone()
    assert recorded == listed != drop_module.fingerprint(day)  # ... and the drop is not recorded as it is now
    load_drop(wh, "serve-2026-12-04", day)
    assert sorted(wh.con.execute("SELECT rating_id FROM raw.ratings").fetchall()) == [("r1",), ("r2",)]
    assert wh.con.execute("SELECT fingerprint FROM raw.drops").fetchone() == (drop_module.fingerprint(day),)


def _write_small_sessions(folder: Path, n: int) -> None:
    """``n`` sessions, one OpenHands V0 event array each (``s<i>.json``: a user message, a command, a finish), and
    ratings.csv rating every tenth session: the shape of a drop of per-session downloads."""
    folder.mkdir()
    for i in range(n):
        events = [
            {"id": 0, "source": "user", "action": "message", "args": {"content": f"fix bug {i}"}},
            {"id": 1, "source": "agent", "action": "run", "args": {"command": "pytest -q"}},
            {"id": 2, "source": "agent", "action": "finish", "args": {"final_thought": "Fixed."}},
        ]
        (folder / f"s{i:05d}.json").write_text(json.dumps(events))
    (folder / "ratings.csv").write_text("conversation_id,rating\n" + "".join(f"s{i:05d},4\n" for i in range(0, n, 10)))


def _row_counts(wh: Warehouse) -> dict[str, int]:
    which = (tables.SESSIONS, tables.EVENTS, tables.RATINGS, tables.QUARANTINE, tables.DROPS)
    return {t.name: wh.count(t) for t in which}


def test_small_files_are_packed_into_reads_and_large_ones_split(tmp_path):
    for name in ("a.json", "b.json", "c.json", "e.json"):
        (tmp_path / name).write_text("[" + " " * 298 + "]")  # 300 bytes each
    big = tmp_path / "d.jsonl"  # JSON-lines records, 20 lines of 100 bytes
    big.write_text("".join(f'{{"session_id": "s{i:02d}", "events": []}}'.ljust(99) + "\n" for i in range(20)))
    units = [DropUnit(tmp_path / n, n, False) for n in ("a.json", "b.json", "c.json", "d.jsonl", "e.json")]

    reads = plan_reads(units, split_bytes=700)

    # a and b fill a read (600 bytes, c would make 900); c is packed alone because d (2 000 bytes) is split into
    # pieces of at least 700 bytes cut at line ends (three of them), each a read of its own, in order; e follows
    names = [[(p.unit.source_file, p.end is not None) for p in read] for read in reads]
    assert names[0] == [("a.json", False), ("b.json", False)]
    assert names[1] == [("c.json", False)]
    assert all(read == [("d.jsonl", True)] for read in names[2:-1]) and len(names[2:-1]) == 3
    assert names[-1] == [("e.json", False)]
    pieces = [p for read in reads[2:-1] for p in read]
    assert pieces[0].start == 0 and pieces[-1].end == 2000
    assert all(a.end == b.start and a.end % 100 == 0 for a, b in zip(pieces, pieces[1:], strict=False))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_packed_reads_give_the_same_tables_as_reading_file_by_file(tmp_path, monkeypatch, workers):
    drop = tmp_path / "drop"
    _write_small_sessions(drop, 60)
    for k in range(10):  # session folders are packed too: the fixture's sessions/<sid>/events/ holds 12 events
        shutil.copytree(FIXTURES / "session_dir" / "sessions" / "sess-dir-1", drop / "sessions" / f"sd-{k}")
    monkeypatch.setenv("PULSE_INGEST_WORKERS", "1")
    monkeypatch.setattr(drop_module, "SPLIT_BYTES", 1)  # every file a read of its own: the rows of one file a batch
    one_by_one = Warehouse(duckdb.connect())
    load_drop(one_by_one, "d", drop)

    monkeypatch.setattr(drop_module, "SPLIT_BYTES", 8_000)  # ~30 files of 250 bytes, or 2 folders of 2 700, a read
    monkeypatch.setenv("PULSE_INGEST_WORKERS", workers)
    packed = Warehouse(duckdb.connect())
    load_drop(packed, "d", drop)

    assert _row_counts(packed) == {"sessions": 70, "events": 300, "ratings": 6, "quarantine": 0, "drops": 1}
    assert _contents(packed) == _contents(one_by_one)


def test_a_drop_of_thousands_of_small_files_loads_in_little_memory(tmp_path, monkeypatch):
    """Issue 11: every small file was inserted on its own inside one transaction, and DuckDB held memory for each
    insert; 3 000 files failed with "Out of Memory" at a 100 MB limit (300 files were enough to fail). Memory is
    asserted by success under a small limit, not by timing."""
    drop = tmp_path / "drop"
    _write_small_sessions(drop, 3000)
    monkeypatch.setenv("PULSE_DUCKDB_MEMORY", "100MB")
    con = connect(tmp_path / "w.duckdb")
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] in ("95.3 MiB", "100.0 MB")
    wh = Warehouse(con)

    tally = load_drop(wh, "d", drop)

    # written above: 3 000 sessions of 3 events, and one rating for every tenth session
    assert tally == DropTally(records_read=3300, records_accepted=3300, events_read=9000, events_accepted=9000)
    assert _row_counts(wh) == {"sessions": 3000, "events": 9000, "ratings": 300, "quarantine": 0, "drops": 1}
    assert reconcile_drop(wh, "d")[0]
    con.close()


def _limits_seen_by_inserts(wh: Warehouse, monkeypatch) -> list[str]:
    """DuckDB's memory limit at every insert of a load, as DuckDB prints it."""
    seen: list[str] = []
    insert = wh.insert

    def recording(t, data):
        seen.append(wh.con.execute("SELECT current_setting('memory_limit')").fetchone()[0])
        insert(t, data)

    monkeypatch.setattr(wh, "insert", recording)
    return seen


@pytest.mark.parametrize(
    ("configured", "while_loading", "after"),
    [("2GB", "256.0 MiB", "1.8 GiB"), ("100MB", "95.3 MiB", "95.3 MiB")],  # 2e9 bytes is 1.86 GiB, 1e8 95.4 MiB
)
def test_a_load_lowers_duckdbs_memory_limit_and_sets_it_back(tmp_path, monkeypatch, configured, while_loading, after):
    drop = tmp_path / "drop"
    _write_small_sessions(drop, 30)
    monkeypatch.setenv("PULSE_DUCKDB_MEMORY", configured)
    wh = Warehouse(connect(tmp_path / "w.duckdb"))
    seen = _limits_seen_by_inserts(wh, monkeypatch)

    load_drop(wh, "d", drop)

    assert seen and set(seen) == {while_loading}  # lowered to LOAD_MEMORY_MIB, never raised
    assert wh.con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == after
    wh.con.close()


def test_tables_of_an_older_pulse_are_rebuilt_if_derived_and_refused_if_raw():
    con = duckdb.connect()
    con.execute("CREATE SCHEMA estimates")
    con.execute("CREATE TABLE estimates.experiment_effects (experiment VARCHAR, effect DOUBLE)")  # an old shape
    con.execute("INSERT INTO estimates.experiment_effects VALUES ('e', 0.1)")
    ensure_tables(con, [tables.EXPERIMENT_EFFECTS])
    cols = [r[0] for r in con.execute("DESCRIBE estimates.experiment_effects").fetchall()]
    assert cols == tables.EXPERIMENT_EFFECTS.column_names  # recreated empty: the next run refills it
    ensure_tables(con, [tables.EXPERIMENT_EFFECTS])  # an up-to-date table is left alone
    con.execute("CREATE SCHEMA features")  # event features are recomputed from raw events: rebuilt too
    con.execute("CREATE TABLE features.event_features (session_id VARCHAR, user_message_count INTEGER)")
    ensure_tables(con, [tables.EVENT_FEATURES])
    cols = [r[0] for r in con.execute("DESCRIBE features.event_features").fetchall()]
    assert cols == tables.EVENT_FEATURES.column_names
    con.execute("CREATE SCHEMA raw")
    con.execute("CREATE TABLE raw.ratings (session_id VARCHAR)")
    with pytest.raises(RuntimeError, match="raw.ratings has columns"):
        ensure_tables(con, [tables.RATINGS])


def test_connections_draw_no_progress_bar(tmp_path):
    # DuckDB's progress bar writes to stdout and broke `pulse ingest --json` at the paper's scale
    con = connect(tmp_path / "w.duckdb")
    assert con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0] is False
    con.close()


def test_rows_by_name_are_checked_against_the_contract(wh):
    """A writer that hands the wrong columns is told which, before anything is written."""
    from dataclasses import dataclass

    import polars as pl

    from pulse_pipeline import tables
    from pulse_pipeline.contract import ContractError

    @dataclass
    class Label:
        session_id: str
        n_rated_segments: int
        label_stars: float
        label: float
        scale: str = "stars_1_5"

    assert wh.append(tables.SESSION_LABELS, [Label("a", 1, 5.0, 1.0), Label("b", 2, 3.0, 0.5)]) == 2
    with pytest.raises(ContractError, match=r"missing column\(s\) label; extra column\(s\) lbl"):
        wh.replace(
            tables.SESSION_LABELS,
            pl.DataFrame(
                {
                    "session_id": ["c"],
                    "n_rated_segments": [1],
                    "label_stars": [4.0],
                    "lbl": [0.75],
                    "scale": ["stars_1_5"],
                }
            ),
        )
    with pytest.raises(ContractError, match="column label_stars is String, the contract says DOUBLE"):
        wh.replace(
            tables.SESSION_LABELS,
            pl.DataFrame(
                {
                    "session_id": ["c"],
                    "n_rated_segments": [1],
                    "label_stars": ["four"],
                    "label": [0.75],
                    "scale": ["stars_1_5"],
                }
            ),
        )
    with pytest.raises(ContractError, match="n_rated_segments"):
        wh.append(tables.SESSION_LABELS, [Label("c", 1.5, 4.0, 0.75)])
    assert wh.count(tables.SESSION_LABELS) == 2  # nothing was deleted or written by the failed calls
