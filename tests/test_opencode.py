"""OpenCode (``ingest/opencode.py``): its SQLite database and its older storage/ tree, written by
``tests/opencode_fixture.py`` from OpenCode's own schema (anomalyco/opencode ``session/session.sql.ts`` at
063e8306d9895af9bdd175306cfa4fa3291fd83a, ``storage/json-migration.ts`` at
062aa8c024a00b7348dd3160c0b4fbbfce074ee2, ``session/message-v2.ts`` at 007a9409bafea06d6b9084ff1f6d1fe9f5e3a803,
``session/revert.ts`` at 089ee8d0e6acc3225e52064e1906714e7f1bc52c; its docstring has the whole history). Both
shapes hold the same history, so they give the same sessions and events; every figure below was worked out from
the fixture by hand.

Session ``ses_A001`` (``msg_A06`` and ``msg_A07`` undone by its ``revert``): 23 events (module docstring of the
fixture; seq in the list below), user messages ``msg_A01`` and ``msg_A04`` (2 segments: 0-15, closed by the last
text of ``msg_A03`` whose finish is ``stop``; 17-22, open at the end), 3 bash calls. Usage over the four assistant
messages, the undone ``msg_A07`` included: cost 0.0123 + 0.0050 + 0.0020 + 0.0010 = 0.0203; prompt tokens (input
+ cache read + cache write) 4700 + 4300 + 100 + 50 = 9150; completion (output + reasoning) 100 + 40 + 60 + 5 =
205; claude-sonnet-4-5 answers three of them (anthropic). Session ``ses_B001``: a sub-agent's, 6 events, no user
message. Session ``ses_C001``: no message, quarantined. Bad input: a part whose data is not JSON and a part naming
a message no one has (2 events quarantined); in the tree also ``todo/ses_A001.json``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from datetime import datetime

import orjson
import pytest

from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.features.user_text import build_user_text
from pulse_pipeline.ingest.drop import drop_units

from .helpers import assert_reconciled, ingest_paths, rows
from .opencode_fixture import SCHEMA, write_database, write_storage

SESSION_A = [  # seq, event id, source, kind, name, original name, cause, exit code, waits, segment
    (0, "msg_A01", "user", "action", "message", None, None, None, None, 0),
    (1, "prt_A01a", "user", "state", "text", None, None, None, None, 0),
    (2, "prt_A01b", "user", "state", "text", None, None, None, None, 0),
    (3, "prt_A01c", "user", "state", "file", None, None, None, None, 0),
    (4, "msg_A02", "environment", "state", "assistant_message", None, None, None, None, 0),
    (5, "prt_A02a", "environment", "state", "step_start", None, None, None, None, 0),
    (6, "prt_A02b", "agent", "action", "think", None, None, None, None, 0),
    (7, "toolu_01", "agent", "action", "run", None, None, None, None, 0),
    (8, "toolu_01:result", "environment", "observation", "run", None, "toolu_01", 1, None, 0),
    (9, "toolu_02", "agent", "action", "edit", None, None, None, None, 0),
    (10, "toolu_02:result", "environment", "observation", "edit", None, "toolu_02", None, None, 0),
    (11, "prt_A02e", "environment", "state", "step_finish", None, None, None, None, 0),
    (12, "msg_A03", "environment", "state", "assistant_message", None, None, None, None, 0),
    (13, "toolu_03", "agent", "action", "run", None, None, None, None, 0),
    (14, "toolu_03:result", "environment", "observation", "run", None, "toolu_03", 0, None, 0),
    (15, "prt_A03b", "agent", "action", "message", None, None, None, True, 0),
    (16, "prt_A03c", "environment", "state", "step_finish", None, None, None, None, None),
    (17, "msg_A04", "user", "action", "message", None, None, None, None, 1),
    (18, "prt_A04a", "user", "state", "text", None, None, None, None, 1),
    (19, "msg_A05", "environment", "state", "assistant_message", None, None, None, None, 1),
    (20, "toolu_04", "agent", "action", "run", None, None, None, None, 1),
    (21, "toolu_04:result", "environment", "observation", "run", None, "toolu_04", -1, None, 1),
    (22, "toolu_05", "agent", "action", "other", "question", None, None, None, 1),
]
METADATA_A = {
    "title": "Fix add",
    "directory": "/work/calc",
    "agent_version": "1.0.150",
    "project_id": "prj_calc",
    "slug": "fix-add",
    "time_created": 1767261600000,
    "time_updated": 1767261701000,
    "worktree": "/work/calc",
    "project_name": "calc",
    "llm_usage": {"cost_usd": pytest.approx(0.0203), "prompt_tokens": 9150, "completion_tokens": 205},
    "model": "claude-sonnet-4-5",
    "provider": "anthropic",
    "reverted_messages": 2,
}


@pytest.fixture(params=["database", "storage"])
def history(request, tmp_path):
    """The fixture's history as an ``opencode.db`` or as a ``storage/`` tree."""
    if request.param == "database":
        return write_database(tmp_path / "opencode.db")
    return write_storage(tmp_path / "storage")


def _sessions(wh) -> list[tuple]:
    return rows(
        wh,
        "SELECT session_id, source_format, n_events, n_user_messages, n_segments, n_shell_commands, started_at,"
        " ended_at FROM raw.sessions ORDER BY record_index",
    )


def test_sessions_and_counts(wh, history):
    ingest_paths(wh, history)
    assert _sessions(wh) == [
        ("ses_A001", "opencode", 23, 2, 2, 3, datetime(2026, 1, 1, 10, 0, 1), datetime(2026, 1, 1, 10, 1, 3)),
        ("ses_B001", "opencode", 6, 0, 0, 0, datetime(2026, 1, 1, 10, 0, 50), datetime(2026, 1, 1, 10, 0, 51, 100000)),
    ]
    assert_reconciled(wh, history.name)


def test_events_of_a_session(wh, history):
    ingest_paths(wh, history)
    got = rows(
        wh,
        "SELECT seq, event_id, source, kind, name, original_name, cause, exit_code, wait_for_response,"
        " segment_index FROM raw.events WHERE session_id = 'ses_A001' ORDER BY seq",
    )
    assert got == SESSION_A


def test_user_messages_are_the_users_own_text(wh, history):
    # the synthetic text (a file OpenCode read for the @calc.py) is not the user's, and no tool result is
    ingest_paths(wh, history)
    assert rows(wh, "SELECT session_id, text FROM raw.events WHERE name = 'message' AND source = 'user'") == [
        ("ses_A001", "Fix the add function in calc.py"),
        ("ses_A001", "Now push it"),
    ]


def test_usage_model_and_metadata(wh, history):
    ingest_paths(wh, history)
    (metadata,) = wh.frame("SELECT metadata_json FROM raw.sessions WHERE session_id = 'ses_A001'").to_series()
    assert orjson.loads(metadata) == METADATA_A


def test_undone_messages_are_left_out(wh, history):
    ingest_paths(wh, history)
    ids = {r[0] for r in rows(wh, "SELECT event_id FROM raw.events")}
    assert not {"msg_A06", "prt_A06a", "msg_A07", "prt_A07a"} & ids


def test_a_sub_agent_session_has_no_user(wh, history):
    ingest_paths(wh, history)
    got = rows(wh, "SELECT source, name FROM raw.events WHERE session_id = 'ses_B001' ORDER BY seq")
    assert got == [
        ("subagent", "message"),
        ("subagent", "text"),
        ("environment", "assistant_message"),
        ("subagent", "read"),
        ("environment", "read"),
        ("subagent", "message"),
    ]
    (metadata,) = wh.frame("SELECT metadata_json FROM raw.sessions WHERE session_id = 'ses_B001'").to_series()
    assert '"parent_id":"ses_A001"' in metadata and '"model":"claude-haiku-4-5"' in metadata


def test_bad_input_is_quarantined_with_its_reason(wh, history):
    ingest_paths(wh, history)
    reasons = sorted(r[0] for r in rows(wh, "SELECT record_type || ': ' || reason FROM raw.quarantine"))
    expected = ["event: not valid JSON", "event: msg_ghost", "session: session has no readable events"]
    if history.name == "storage":
        expected.append("unknown: todo/ses_A001.json: an OpenCode storage file that is not part of a conversation")
    assert len(reasons) == len(expected)
    for want in expected:
        kind, _, text = want.partition(": ")
        assert any(r.startswith(kind + ": ") and text in r for r in reasons), (want, reasons)
    drop = rows(
        wh, "SELECT records_read, records_accepted, records_quarantined, events_read, events_quarantined FROM raw.drops"
    )
    sessions_read = 3 + (1 if history.name == "storage" else 0)  # the todo file is a record read
    assert drop == [(sessions_read, 2, sessions_read - 2, 31, 2)]


def test_features_read_the_sessions(wh, history):
    ingest_paths(wh, history)
    build_user_text(wh)
    build_event_features(wh)
    got = wh.frame(
        "SELECT session_id, user_message_count, shell_commands, failed_commands, git_commit_count, test_runs,"
        " test_failures, file_edits, llm_cost_usd, llm_prompt_tokens, llm_completion_tokens"
        " FROM features.event_features ORDER BY session_id"
    ).rows()
    assert got == [
        ("ses_A001", 2, 3, 2, 1, 2, 1, 1, pytest.approx(0.0203), 9150, 205),
        ("ses_B001", 0, 0, 0, 0, 0, 0, 0, pytest.approx(0.001), 500, 20),
    ]


# --- the database file: read-only, never written, and what is not an OpenCode database -----------------------------


def _listing(folder) -> list[tuple[str, int, int]]:
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir())


def test_the_database_is_never_written(wh, tmp_path):
    drop = tmp_path / "drop"
    drop.mkdir()
    write_database(drop / "opencode.db")
    before = _listing(drop)
    ingest_paths(wh, drop)
    assert _listing(drop) == before  # no -shm, -wal or -journal made beside it, nothing touched
    assert len(_sessions(wh)) == 2


def test_a_write_ahead_log_beside_the_database_is_read(wh, tmp_path):
    # OpenCode runs SQLite in WAL mode: the latest transactions sit in opencode.db-wal until a checkpoint. The
    # database is copied with its log (and its -shm) while a connection holds them, as a user copying the folder
    # of a running OpenCode would; the sessions are in the log only.
    live = tmp_path / "live"
    live.mkdir()
    con = sqlite3.connect(live / "opencode.db")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.executescript(SCHEMA)
    con.commit()
    write_database(tmp_path / "source.db")
    con.execute("ATTACH DATABASE ? AS source", (str(tmp_path / "source.db"),))
    for table in ("project", "session", "message", "part"):
        con.execute(f"INSERT INTO main.{table} SELECT * FROM source.{table}")  # noqa: S608 (fixed names)
    con.commit()
    con.execute("DETACH DATABASE source")
    drop = tmp_path / "drop"
    drop.mkdir()
    for name in ("opencode.db", "opencode.db-wal", "opencode.db-shm"):
        shutil.copyfile(live / name, drop / name)
    con.close()
    assert (drop / "opencode.db-wal").stat().st_size > 0
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copyfile(drop / "opencode.db", alone / "opencode.db")
    ingest_paths(wh, alone)
    assert _sessions(wh) == []  # without its log the database holds none of them
    units = drop_units(drop)
    assert [u.source_file for u in units] == ["opencode.db"]  # the log and -shm belong to the database
    before = _listing(drop)
    ingest_paths(wh, drop)
    assert _listing(drop) == before
    assert [r[0] for r in _sessions(wh)] == ["ses_A001", "ses_B001"]
    assert_reconciled(wh, drop.name, alone.name)


def test_a_sqlite_file_that_is_not_opencodes_is_quarantined(wh, tmp_path):
    other = tmp_path / "notes.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    con.commit()
    con.close()
    ingest_paths(wh, other)
    (reason,) = [r[0] for r in rows(wh, "SELECT reason FROM raw.quarantine WHERE record_type = 'unknown'")]
    assert reason.startswith("a SQLite database without the table(s) session, message, part of an OpenCode database")
    assert "(its tables: notes)" in reason
    assert_reconciled(wh, other.name)


def test_a_damaged_database_is_quarantined_not_a_crash(wh, tmp_path):
    damaged = tmp_path / "opencode.db"
    write_database(damaged)
    data = bytearray(damaged.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the schema page overwritten, the header kept
    damaged.write_bytes(bytes(data))
    ingest_paths(wh, damaged)
    (reason,) = [r[0] for r in rows(wh, "SELECT reason FROM raw.quarantine")]
    assert reason.startswith("SQLite cannot read this database")
    assert_reconciled(wh, damaged.name)


def test_a_file_named_db_that_is_not_sqlite_is_read_as_any_file(wh, tmp_path):
    fake = tmp_path / "opencode.db"
    fake.write_text("just some text\n")
    ingest_paths(wh, fake)
    (reason,) = [r[0] for r in rows(wh, "SELECT reason FROM raw.quarantine")]
    assert reason.startswith("not JSON")
    assert_reconciled(wh, fake.name)


def test_storage_tree_inside_a_drop_is_one_unit(tmp_path):
    drop = tmp_path / "drop"
    write_storage(drop / "opencode" / "storage")
    (drop / "notes.csv").write_text("session_id,rating\nses_A001,4\n")
    units = drop_units(drop)
    assert [(u.source_file, u.layout) for u in units] == [
        ("opencode/storage", "opencode_storage"),
        ("notes.csv", None),
    ]
    assert not any(os.path.islink(u.path) for u in units)


def test_hostile_rows_are_quarantined_one_by_one(wh, tmp_path):
    # ids that are numbers, a NULL and an array for data, a session id no message has: each row is counted
    path = tmp_path / "opencode.db"
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.execute("INSERT INTO project VALUES ('p', '/w', NULL, NULL, NULL, NULL, 0, 0, NULL, '[]')")
    con.execute(
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated)"
        " VALUES (7, 'p', 's', '/w', 't', '1', 0, 0)"
    )
    user = '{"role": "user", "time": {"created": 1767261600000}}'
    con.execute("INSERT INTO message VALUES (70, 7, 0, 0, ?)", (user,))
    con.execute("""INSERT INTO part VALUES (700, 70, 7, 0, 0, '{"type": "text", "text": "hi"}')""")
    con.execute("INSERT INTO part VALUES (701, 70, 7, 0, 0, '[1, 2]')")
    con.execute("INSERT INTO message VALUES (71, 7, 1, 1, 'null')")
    con.commit()
    con.close()
    ingest_paths(wh, path)
    assert rows(wh, "SELECT session_id, n_events, n_user_messages FROM raw.sessions") == [("7", 2, 1)]
    assert rows(wh, "SELECT event_id, text FROM raw.events ORDER BY seq") == [("70", "hi"), ("700", None)]
    assert sorted(r[0] for r in rows(wh, "SELECT reason FROM raw.quarantine")) == [
        "message 71: not a JSON object (null)",
        "part 701: not a JSON object (an array)",
    ]
    assert_reconciled(wh, path.name)


def test_a_session_kept_only_in_the_newer_message_table_is_quarantined_saying_so(wh, tmp_path):
    # session.sql.ts (063e8306) also declares session_message (id, session_id, type, time_created, time_updated,
    # data); a session whose history is only there is not read yet, and says why
    path = write_database(tmp_path / "opencode.db")
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE session_message (id text PRIMARY KEY, session_id text NOT NULL, type text NOT NULL,"
        " time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL)"
    )
    con.execute("INSERT INTO session_message VALUES ('m1', 'ses_C001', 'user', 0, 0, '{\"text\": \"hello\"}')")
    con.commit()
    con.close()
    ingest_paths(wh, path)
    got = rows(wh, "SELECT record_index, reason FROM raw.quarantine WHERE record_type = 'session'")
    assert got == [
        (
            2,
            "session ses_C001: its history is in OpenCode's newer session_message table (1 rows), which PULSE does"
            " not read yet; the message and part tables hold none of it",
        )
    ]
    assert len(_sessions(wh)) == 2
    assert_reconciled(wh, path.name)
