"""Bad input: every bad record lands in raw.quarantine (stage, source_file, record_index, reason, raw_text) and
every drop still reconciles (records read = accepted + quarantined). Small inputs are written inline, so the bad
bytes are visible here; expected values were worked out by hand from those bytes (comments say how).

Sessions for the rating tests are PULSE canonical lines built by ``session_line``: segment k (0-based) is a user
message with id ``2k+1`` and an agent message that waits for the user with id ``2k+2`` (no state events, so the
fallback rule closes each segment at the waiting message).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline import tables
from pulse_pipeline.cli import main
from pulse_pipeline.connections import connect
from pulse_pipeline.ingest.load import load_drop, reconcile_drop

from .helpers import FIXTURES, ingest_paths, rebuild_staging


def write(folder: Path, name: str, data: str | bytes, mtime: float | None = None) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def session_line(session_id: str, n_segments: int, **extra: object) -> str:
    events = []
    for k in range(n_segments):
        events.append({"id": str(2 * k + 1), "source": "user", "type": "message", "text": f"task {k}"})
        events.append(
            {"id": str(2 * k + 2), "source": "agent", "type": "message", "text": "done?", "wait_for_response": True}
        )
    return json.dumps({"session_id": session_id, **extra, "events": events}) + "\n"


def quarantine(wh, stage: str = "ingest") -> list[dict]:
    return wh.frame(
        "SELECT * FROM raw.quarantine WHERE stage = ?"
        " ORDER BY source_file, record_index NULLS FIRST, event_index NULLS FIRST",
        [stage],
    ).to_dicts()


def ingest_reconciled(wh, *paths: Path) -> None:
    """Load each path as one drop, rebuild staging, and check every drop loaded so far reconciles."""
    ingest_paths(wh, *paths)
    for (drop_id,) in wh.con.execute("SELECT drop_id FROM raw.drops").fetchall():
        ok, facts = reconcile_drop(wh, drop_id)
        assert ok, (drop_id, facts)


def records_read(wh, drop_id: str) -> tuple[int, int, int]:
    return wh.con.execute(
        "SELECT records_read, records_accepted, records_quarantined FROM raw.drops WHERE drop_id = ?", [drop_id]
    ).fetchone()


def snapshot(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    """Every table's rows but the LLM cache's, which no ingest without an LLM writes and which sits beside the lake
    (``connections.own_commits_database``), created when an LLM is first asked."""
    return {
        t.qualified: con.execute(f"SELECT * FROM {t.qualified} ORDER BY ALL").fetchall()
        for t in tables.ALL_TABLES
        if t is not tables.LLM_CACHE
    }


# --- unreadable files and lines ---------------------------------------------------------------------------------


def test_malformed_json_line_in_jsonl(wh, tmp_path):
    bad = '{"session_id": "bad", "events": [{"id": "1",}]}'
    path = write(tmp_path, "sessions.jsonl", session_line("ok-1", 1) + bad + "\n" + session_line("ok-2", 1))
    ingest_reconciled(wh, path)
    assert [s for (s,) in wh.con.execute("SELECT session_id FROM staging.sessions ORDER BY 1").fetchall()] == [
        "ok-1",
        "ok-2",
    ]
    (q,) = quarantine(wh)
    assert (q["source_file"], q["record_index"], q["event_index"]) == ("sessions.jsonl", 1, None)
    assert q["record_type"] == "unknown"
    assert q["reason"].startswith("not valid JSON") and q["raw_text"] == bad
    assert records_read(wh, "sessions.jsonl") == (3, 2, 1)


def test_malformed_line_in_a_v1_conversation_is_a_bad_event(wh, tmp_path):
    """A V1 conversation (one event per line) with its third line cut: 3 events kept, line 2 quarantined as an
    event of the conversation (record 0); the segment opens at running and closes at finished."""
    lines = [
        '{"kind": "MessageEvent", "id": "m1", "timestamp": "2025-08-01T10:00:00", "source": "user",'
        ' "llm_message": {"role": "user", "content": [{"type": "text", "text": "List files"}]}}',
        '{"kind": "ConversationStateUpdateEvent", "id": "s1", "source": "environment", "key": "execution_status",'
        ' "value": "running"}',
        '{"kind": "ActionEvent", "id": "a1", "source": "agent", "tool_name": "terminal", "action": {"kind": "Termi',
        '{"kind": "ConversationStateUpdateEvent", "id": "s2", "source": "environment", "key": "execution_status",'
        ' "value": "finished"}',
    ]
    path = write(tmp_path, "conv.jsonl", "\n".join(lines) + "\n")
    ingest_reconciled(wh, path)
    assert [e for (e,) in wh.con.execute("SELECT event_id FROM raw.events ORDER BY seq").fetchall()] == [
        "m1",
        "s1",
        "s2",
    ]
    (q,) = quarantine(wh)
    assert (q["record_index"], q["event_index"], q["record_type"]) == (2, 2, "event")  # its line, 0-based
    assert q["reason"].startswith("not valid JSON") and q["raw_text"] == lines[2]
    assert wh.con.execute("SELECT events_read, events_accepted, events_quarantined FROM raw.drops").fetchone() == (
        4,
        3,
        1,
    )


def test_malformed_whole_json_file(wh, tmp_path):
    text = '{"version": "1.0", "feedback": "negative", "trajectory": [{"id": 0, "action": "message",, }]}\n'
    ingest_reconciled(wh, write(tmp_path, "feedback.json", text))
    (q,) = quarantine(wh)
    # the whole file is the unit: no record inside it could be told apart, so record_index is NULL
    assert (q["source_file"], q["record_index"], q["record_type"]) == ("feedback.json", None, "unknown")
    assert q["reason"].startswith("not valid JSON") and q["raw_text"] == text
    assert wh.count(tables.SESSIONS) == 0
    assert records_read(wh, "feedback.json") == (1, 0, 1)


def test_truncated_pretty_printed_array_is_one_quarantine_row(wh, tmp_path):
    # a V0 event list written with indent=2 and cut inside the second event: 17 lines, none of them an object
    text = """[
  {
    "id": 0,
    "source": "user",
    "message": "Fix the bug",
    "action": "message",
    "args": {
      "content": "Fix the bug"
    }
  },
  {
    "id": 1,
    "source": "agent",
    "action": "run",
    "args": {
      "command": "pyt"""
    ingest_reconciled(wh, write(tmp_path, "trajs_cut.json", text))
    (q,) = quarantine(wh)
    assert (q["source_file"], q["record_index"], q["record_type"]) == ("trajs_cut.json", None, "unknown")
    assert q["reason"].startswith("not valid JSON") and "unexpected end of data" in q["reason"]
    assert q["raw_text"] == text
    assert wh.count(tables.EVENTS) == 0
    assert records_read(wh, "trajs_cut.json") == (1, 0, 1)


def test_non_utf8_bytes_in_a_jsonl_line(wh, tmp_path):
    # line 1 is Latin-1: b'{"session_id": "caf\xe9"}'; \xe9 sits at byte 19 ('{' is 0, '"session_id"' 1..12,
    # ':' 13, ' ' 14, '"' 15, 'c' 16, 'a' 17, 'f' 18) and is followed by '"', not a continuation byte
    bad = b'{"session_id": "caf\xe9"}'
    path = write(tmp_path, "sessions.jsonl", session_line("ok-1", 1).encode() + bad + b"\n")
    ingest_reconciled(wh, path)
    assert wh.con.execute("SELECT session_id FROM staging.sessions").fetchall() == [("ok-1",)]
    (q,) = quarantine(wh)
    assert (q["record_index"], q["record_type"]) == (1, "unknown")
    assert q["reason"] == "not UTF-8 text (invalid continuation byte at byte 19)"
    assert q["raw_text"] == '{"session_id": "caf\ufffd"}'


def test_non_utf8_bytes_in_a_csv_row(wh, tmp_path):
    # row 2 (the header is line 0) holds \xe9 at byte 5: 'conv-' is bytes 0..4
    path = write(tmp_path, "ratings.csv", b"conversation_id,rating\nok-1,4\nconv-\xe9,3\n")
    ingest_reconciled(wh, write(tmp_path, "s.jsonl", session_line("ok-1", 1)), path)
    (q,) = quarantine(wh)
    assert (q["source_file"], q["record_index"]) == ("ratings.csv", 2)
    assert q["reason"] == "not UTF-8 text (invalid continuation byte at byte 5)"
    assert q["raw_text"] == "conv-\ufffd,3"
    assert wh.con.execute("SELECT session_id, rating FROM raw.ratings").fetchall() == [("ok-1", 4.0)]
    assert records_read(wh, "ratings.csv") == (2, 1, 1)


def test_empty_files(wh, tmp_path):
    empty = write(tmp_path, "empty.jsonl", b"")
    blank = write(tmp_path, "blank.json", b"\n  \r\n\n")
    ingest_reconciled(wh, empty, blank)
    rows = quarantine(wh)
    assert [(q["source_file"], q["record_index"], q["record_type"], q["reason"], q["raw_text"]) for q in rows] == [
        ("blank.json", None, "unknown", "file is empty", ""),
        ("empty.jsonl", None, "unknown", "file is empty", ""),
    ]
    assert records_read(wh, "empty.jsonl") == records_read(wh, "blank.json") == (1, 0, 1)


# --- events ----------------------------------------------------------------------------------------------------


def test_event_of_unknown_type_is_kept_as_other(wh, tmp_path):
    record = {
        "version": "1.0",
        "feedback": "positive",
        "trajectory": [
            {"id": 0, "source": "user", "action": "message", "args": {"content": "Take a screenshot"}},
            {"id": 1, "source": "environment", "type": "telemetry", "cpu": 0.4},  # neither action nor observation
            {"id": 2, "source": "agent", "observation": "screenshot", "content": "<png>", "extras": {}},
            {"id": 3, "source": "agent", "action": "finish", "args": {"final_thought": "Done."}},
        ],
    }
    canonical = {
        "session_id": "c-1",
        "events": [
            {"id": "1", "source": "user", "type": "message", "text": "Hi"},
            {"id": "2", "source": "agent", "type": "hologram", "text": "?"},
        ],
    }
    path = write(tmp_path, "mixed.jsonl", json.dumps(record) + "\n" + json.dumps(canonical) + "\n")
    ingest_reconciled(wh, path)
    assert quarantine(wh) == []
    others = wh.con.execute(
        "SELECT record_key LIKE '%:1' AS canonical, event_id, kind, name, original_name FROM raw.events"
        " WHERE name = 'other' ORDER BY 1, seq"
    ).fetchall()
    assert others == [
        (False, "1", "other", "other", "telemetry"),
        (False, "2", "observation", "other", "screenshot"),
        (True, "2", "other", "other", "hologram"),
    ]
    assert wh.con.execute("SELECT n_events FROM raw.sessions ORDER BY record_index").fetchall() == [(4,), (2,)]


def test_event_that_is_not_an_object(wh, tmp_path):
    """Record 0: events 1 and 2 are a string and a number (quarantined), 0 and 3 are kept. Record 1: its only event
    is a string, so the session itself has no readable event and is quarantined too."""
    rec0 = {
        "feedback": "negative",
        "trajectory": [
            {"id": 0, "source": "user", "action": "message", "args": {"content": "Fix it"}},
            "just text",
            42,
            {"id": 3, "source": "agent", "action": "message", "args": {"content": "Fixed?", "wait_for_response": True}},
        ],
    }
    rec1 = {"feedback": "positive", "trajectory": ["only junk"]}
    path = write(tmp_path, "fb.jsonl", json.dumps(rec0) + "\n" + json.dumps(rec1) + "\n")
    ingest_reconciled(wh, path)
    rows = [(q["record_index"], q["event_index"], q["record_type"], q["reason"], q["raw_text"]) for q in quarantine(wh)]
    assert rows == [
        (0, 1, "event", "event is not a JSON object", '"just text"'),
        (0, 2, "event", "event is not a JSON object", "42"),
        (1, None, "session", "session has no readable events", json.dumps(rec1, separators=(",", ":"))),
        (1, 0, "event", "event is not a JSON object", '"only junk"'),
    ]
    assert wh.con.execute("SELECT event_id FROM raw.events ORDER BY seq").fetchall() == [("0",), ("3",)]
    # records: 2 read, 1 accepted, 1 quarantined; events: 5 read, 2 accepted, 3 quarantined
    assert wh.con.execute(
        "SELECT records_read, records_accepted, records_quarantined, events_read, events_accepted,"
        " events_quarantined FROM raw.drops"
    ).fetchone() == (2, 1, 1, 5, 2, 3)


# --- sessions ---------------------------------------------------------------------------------------------------


def test_session_with_no_user_message_is_kept(wh, tmp_path):
    """Documented rule (segments.py): with state events, work that starts with no user message opens a segment at
    `running`; without state events there is no segment. Both sessions are kept with n_user_messages 0."""
    state = {
        "session_id": "auto-state",
        "events": [
            {"id": "1", "source": "environment", "type": "state", "state": "running"},
            {"id": "2", "source": "agent", "type": "run", "command": "make nightly"},
            {"id": "3", "source": "agent", "type": "finish", "text": "Nightly build ok."},
            {"id": "4", "source": "environment", "type": "state", "state": "finished"},
        ],
    }
    plain = {"session_id": "auto-plain", "events": [{"id": "1", "source": "agent", "type": "think", "text": "hm"}]}
    sessions = write(tmp_path, "auto.jsonl", json.dumps(state) + "\n" + json.dumps(plain) + "\n")
    ratings = write(
        tmp_path,
        "ratings.jsonl",
        '{"session_id": "auto-state", "rating": 4}\n{"session_id": "auto-plain", "rating": 2}\n',
    )
    ingest_reconciled(wh, sessions, ratings)
    assert wh.con.execute(
        "SELECT session_id, n_events, n_user_messages, n_segments FROM staging.sessions ORDER BY 1"
    ).fetchall() == [("auto-plain", 1, 0, 0), ("auto-state", 4, 0, 1)]
    assert wh.con.execute(
        "SELECT session_id, open_event_id, close_event_id, n_user_messages, close_reason FROM staging.work_segments"
    ).fetchall() == [("auto-state", "1", "4", 0, "finished")]
    assert wh.con.execute("SELECT session_id, segment_index, rating FROM staging.segment_ratings").fetchall() == [
        ("auto-state", 0, 4.0)
    ]
    (q,) = quarantine(wh, "staging")
    assert (q["source_file"], q["record_index"], q["record_type"]) == ("ratings.jsonl", 1, "rating")
    assert q["reason"] == "session auto-plain has no work segment to rate"


def test_duplicate_session_ids_across_drops_later_drop_wins(wh, tmp_path):
    """Session dup in a session folder (drop `folder`, 4 events) and as a canonical line (drop `line.jsonl`, 2
    segments, 4 events). The folder is the newer drop; raw keeps both."""
    folder = tmp_path / "folder"
    for i, event in enumerate(
        [
            {"id": 0, "source": "user", "action": "message", "args": {"content": "Go"}},
            {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}},
            {"id": 2, "source": "agent", "observation": "run", "content": "", "extras": {"metadata": {"exit_code": 0}}},
            {"id": 3, "source": "agent", "action": "finish", "args": {"final_thought": "ok"}},
        ]
    ):
        write(folder / "sessions" / "dup" / "events", f"{i}.json", json.dumps(event), mtime=1_750_000_000 + 60)
    line = write(tmp_path, "line.jsonl", session_line("dup", 2), mtime=1_750_000_000)
    ingest_reconciled(wh, folder, line)
    assert wh.con.execute("SELECT drop_id, source_format FROM raw.sessions ORDER BY 1").fetchall() == [
        ("folder", "openhands_v0_session_dir"),
        ("line.jsonl", "pulse_canonical"),
    ]
    assert wh.con.execute("SELECT drop_id, n_shell_commands, n_segments FROM staging.sessions").fetchall() == [
        ("folder", 1, 1)
    ]
    assert wh.con.execute(
        "SELECT open_event_id, close_event_id, close_reason FROM staging.work_segments"
    ).fetchall() == [("0", "3", "finish")]
    # the line drop is re-delivered later: now it wins
    os.utime(line, (1_750_000_000 + 120, 1_750_000_000 + 120))
    load_drop(wh, "line.jsonl", line)
    rebuild_staging(wh)
    assert wh.con.execute("SELECT drop_id, n_segments FROM staging.sessions").fetchall() == [("line.jsonl", 2)]
    assert wh.count(tables.SESSIONS) == 2


# --- ratings ----------------------------------------------------------------------------------------------------


def test_rating_outside_one_to_five(wh, tmp_path):
    sessions = write(tmp_path, "s.jsonl", session_line("s1", 2))
    lines = [
        '{"session_id": "s1", "segment_index": 0, "rating": 1}',  # boundary: kept
        '{"session_id": "s1", "segment_index": 0, "rating": 0}',
        '{"session_id": "s1", "segment_index": 1, "rating": 6}',
        '{"session_id": "s1", "segment_index": 1, "rating": 5}',  # boundary: kept
        '{"session_id": "s1", "segment_index": 1, "rating": -2}',
        '{"session_id": "s1", "segment_index": 1, "rating": 50}',
    ]
    ratings = write(tmp_path, "r.jsonl", "\n".join(lines) + "\n")
    ingest_reconciled(wh, sessions, ratings)
    assert [(q["record_index"], q["record_type"], q["reason"], q["raw_text"]) for q in quarantine(wh)] == [
        (1, "rating", "rating 0 is not a star rating: expected a number from 1 to 5", lines[1]),
        (2, "rating", "rating 6 is not a star rating: expected a number from 1 to 5", lines[2]),
        (4, "rating", "rating -2 is not a star rating: expected a number from 1 to 5", lines[4]),
        (5, "rating", "rating 50 is not a star rating: expected a number from 1 to 5", lines[5]),
    ]
    assert wh.con.execute("SELECT segment_index, rating FROM staging.segment_ratings ORDER BY 1").fetchall() == [
        (0, 1.0),
        (1, 5.0),
    ]
    assert records_read(wh, "r.jsonl") == (6, 2, 4)


def test_rating_that_is_not_a_number(wh, tmp_path):
    sessions = write(tmp_path, "s.jsonl", session_line("s1", 1))
    lines = [
        '{"session_id": "s1", "rating": "five"}',
        '{"session_id": "s1", "rating": true}',
        '{"session_id": "s1", "rating": null}',
        '{"session_id": "s1", "rating": "NaN"}',
        '{"session_id": "s1", "rating": [4]}',
        '{"session_id": "s1", "rating": "4"}',  # a numeric string, as every CSV cell is: kept
    ]
    ratings = write(tmp_path, "r.jsonl", "\n".join(lines) + "\n")
    ingest_reconciled(wh, sessions, ratings)
    assert [(q["record_index"], q["reason"], q["raw_text"]) for q in quarantine(wh)] == [
        (0, 'rating "five" is not a star rating: expected a number from 1 to 5', lines[0]),
        (1, "rating true is not a star rating: expected a number from 1 to 5", lines[1]),
        (2, "rating null is not a star rating: expected a number from 1 to 5", lines[2]),
        (3, 'rating "NaN" is not a star rating: expected a number from 1 to 5', lines[3]),
        (4, "rating [4] is not a star rating: expected a number from 1 to 5", lines[4]),
    ]
    assert wh.con.execute("SELECT record_index, rating FROM raw.ratings").fetchall() == [(5, 4.0)]


def test_rating_for_unknown_session_returns_when_the_session_arrives(wh, tmp_path):
    ratings = write(
        tmp_path, "ratings.jsonl", '{"id": "r9", "conversation_id": "late-1", "event_id": 4, "rating": 2}\n'
    )
    ingest_reconciled(wh, ratings)
    assert records_read(wh, "ratings.jsonl") == (1, 1, 0)  # accepted at ingest: raw.ratings keeps it
    assert quarantine(wh) == []
    (q,) = quarantine(wh, "staging")
    assert (q["drop_id"], q["source_file"], q["record_index"], q["record_type"]) == (
        "ratings.jsonl",
        "ratings.jsonl",
        0,
        "rating",
    )
    assert q["reason"] == "rating names session late-1, which no drop contains"
    raw = json.loads(q["raw_text"])
    assert (raw["rating_id"], raw["session_id"], raw["event_id"], raw["rating"]) == ("r9", "late-1", "4", 2.0)
    assert wh.count(tables.SEGMENT_RATINGS) == 0

    ingest_reconciled(wh, write(tmp_path, "late.jsonl", session_line("late-1", 2)))
    assert quarantine(wh, "staging") == []
    # event 4 is the agent message closing segment 1; 2 stars -> label (2 - 1) / 4 = 0.25
    assert wh.con.execute(
        "SELECT session_id, segment_index, rating, matched_by FROM staging.segment_ratings"
    ).fetchall() == [("late-1", 1, 2.0, "event_id")]
    assert wh.con.execute("SELECT label FROM staging.session_labels").fetchall() == [(0.25,)]


def test_rating_for_unknown_event_returns_when_the_session_grows(wh, tmp_path):
    """v1.jsonl holds s-ev with one segment (events 1, 2); the rating names event 4. v2.jsonl, a later drop,
    holds s-ev with two segments (events 1..4): event 4 closes segment 1."""
    v1 = write(tmp_path, "v1.jsonl", session_line("s-ev", 1), mtime=1_750_000_000)
    ratings = write(tmp_path, "r.csv", "conversation_id,event_id,rating\ns-ev,4,5\n", mtime=1_750_000_000)
    ingest_reconciled(wh, v1, ratings)
    (q,) = quarantine(wh, "staging")
    assert (q["source_file"], q["record_index"]) == ("r.csv", 1)
    assert q["reason"] == "rating names event 4, which session s-ev does not have"
    ingest_reconciled(wh, write(tmp_path, "v2.jsonl", session_line("s-ev", 2), mtime=1_750_000_000 + 60))
    assert quarantine(wh, "staging") == []
    assert wh.con.execute("SELECT segment_index, rating FROM staging.segment_ratings").fetchall() == [(1, 5.0)]


# --- assignments ------------------------------------------------------------------------------------------------


def test_assignment_naming_no_experiment(wh, tmp_path):
    sessions = write(tmp_path, "s.jsonl", session_line("s1", 1) + session_line("s2", 1))
    csv_path = write(
        tmp_path, "assignments.csv", "session_id,experiment,variant,user_id\ns1,,treatment,u1\ns2,exp,control,u2\n"
    )
    jsonl = write(tmp_path, "assignments.jsonl", '{"session_id": "s1", "variant": "B"}\n{"experiment": "exp"}\n')
    ingest_reconciled(wh, sessions, csv_path, jsonl)
    rows = [(q["source_file"], q["record_index"], q["record_type"], q["reason"]) for q in quarantine(wh)]
    assert rows == [
        ("assignments.csv", 1, "assignment", "assignment names no experiment"),
        ("assignments.jsonl", 0, "assignment", "assignment names no experiment"),
        ("assignments.jsonl", 1, "assignment", "assignment names no session_id and no variant"),
    ]
    assert all(q["raw_text"] for q in quarantine(wh))
    assert wh.con.execute("SELECT * FROM staging.assignments").fetchall() == [
        ("s2", "exp", "control", "u2", "assignments_file")
    ]


def test_assignment_for_unknown_session_returns_when_the_session_arrives(wh, tmp_path):
    assignments = write(tmp_path, "a.csv", "session_id,experiment,variant,user_id\nghost,exp,treatment,u7\n")
    ingest_reconciled(wh, assignments)
    assert quarantine(wh) == []
    (q,) = quarantine(wh, "staging")
    assert (q["source_file"], q["record_index"], q["record_type"]) == ("a.csv", 1, "assignment")
    assert q["reason"] == "assignment for session ghost, which no drop contains"
    assert json.loads(q["raw_text"])["variant"] == "treatment"
    ingest_reconciled(wh, write(tmp_path, "ghost.jsonl", session_line("ghost", 1)))
    assert quarantine(wh, "staging") == []
    assert wh.con.execute("SELECT * FROM staging.assignments").fetchall() == [
        ("ghost", "exp", "treatment", "u7", "assignments_file")
    ]


# --- CSV --------------------------------------------------------------------------------------------------------


def test_csv_row_with_the_wrong_number_of_cells(wh, tmp_path):
    sessions = write(tmp_path, "s.jsonl", session_line("s1", 2))
    text = (
        "conversation_id,segment_index,rating,reason,created_at\n"
        "s1,0,2,didn't finish, sorry,2025-06-01T10:00:00\n"  # unquoted comma: 6 cells
        "s1,1,4\n"  # 3 cells
        "s1,1,5,,2025-06-01T10:05:00\n"
    )
    ratings = write(tmp_path, "r.csv", text)
    assignments = write(tmp_path, "a.csv", "session_id,experiment,variant\ns1,exp\n")
    ingest_reconciled(wh, sessions, ratings, assignments)
    rows = [(q["source_file"], q["record_index"], q["record_type"], q["reason"], q["raw_text"]) for q in quarantine(wh)]
    assert rows == [
        ("a.csv", 1, "assignment", "row has 2 cells, the header has 3", '["s1","exp"]'),
        (
            "r.csv",
            1,
            "rating",
            "row has 6 cells, the header has 5",
            '["s1","0","2","didn\'t finish"," sorry","2025-06-01T10:00:00"]',
        ),
        ("r.csv", 2, "rating", "row has 3 cells, the header has 5", '["s1","1","4"]'),
    ]
    assert wh.con.execute("SELECT segment_index, rating FROM staging.segment_ratings").fetchall() == [(1, 5.0)]
    assert records_read(wh, "r.csv") == (3, 1, 2)


# --- the command line ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_ingest_of_a_mixed_drop_twice(pulse_home, capsys):
    """tests/fixtures/mixed_drop, counted by hand:

    - sessions.jsonl: mix-1 (4 events, 1 segment cut by states), a malformed line, mix-2 (4 events, 2 segments:
      the agent waits at 2, finishes at 4)                           -> 2 sessions, 8 events, 3 segments, 1 bad
    - ratings.csv: r1 good; r2 "five"; r3 8 cells for 7 columns; r4 for session ghost -> 2 ratings, 2 bad at
      ingest, and r4 quarantined at staging
    - assignments.csv: mix-1 good, mix-2 without experiment           -> 1 assignment, 1 bad
    - broken.json (malformed), empty.jsonl                           -> 2 bad
    Quarantined: 1 + 2 + 1 + 2 = 6 at ingest, + 1 at staging = 7.
    """
    drop = FIXTURES / "mixed_drop"
    expected = {
        "drop": "mixed_drop",
        "sessions": 2,
        "events": 8,
        "segments": 3,
        "ratings": 2,
        "assignments": 1,
        "quarantined": 7,
        "reconciled": True,
    }
    summaries, snapshots = [], []
    for _ in range(2):
        assert main(["ingest", str(drop), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert {k: summary[k] for k in expected} == expected
        assert Path(summary["path"]) == pulse_home.drops / "mixed_drop"
        summaries.append(summary)
        con = connect(pulse_home.work_db, read_only=True)
        try:
            snapshots.append(snapshot(con))
            assert con.execute(
                "SELECT records_read, records_accepted, records_quarantined FROM raw.drops"
            ).fetchone() == (11, 5, 6)
            assert con.execute("SELECT count(*) FROM raw.quarantine WHERE stage = 'staging'").fetchone() == (1,)
        finally:
            con.close()
    assert summaries[0] == summaries[1]
    assert snapshots[0] == snapshots[1]


def test_empty_json_array_is_quarantined_not_lost(wh, tmp_path):
    # by hand: "[]" holds nothing to accept, so it is one quarantined record with the reason
    f = tmp_path / "nothing.json"
    f.write_text("[]")
    ingest_paths(wh, f)
    rows = wh.con.execute("SELECT record_type, reason, raw_text FROM raw.quarantine").fetchall()
    assert rows == [("unknown", "file is an empty JSON array: no session, rating or event", "[]")]
    assert reconcile_drop(wh, "nothing.json")[0]


def test_a_file_holding_a_single_event_is_a_one_event_session(wh, tmp_path):
    f = tmp_path / "one.json"
    f.write_text('{"id": 7, "source": "user", "action": "message", "args": {"content": "hello"}}')
    ingest_paths(wh, f)
    assert wh.con.execute("SELECT n_events, n_user_messages FROM raw.sessions").fetchall() == [(1, 1)]
    assert wh.count(tables.QUARANTINE) == 0


# --- ids from names, and session folders ------------------------------------------------------------------------


def test_name_and_content_disagree_on_the_id_content_wins(wh, tmp_path):
    """trajectory-abc123.json holds a record whose conversation_id is xyz789: the session is xyz789 (the file name is
    kept in its metadata), so a rating keyed by the name is quarantined at staging and one keyed by the content
    joins."""
    drop = tmp_path / "renamed"
    events = [{"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}}]
    write(drop, "trajectory-abc123.json", json.dumps({"conversation_id": "xyz789", "trajectory": events}))
    write(drop, "ratings.csv", "conversation_id,rating\nabc123,5\nxyz789,3\n")
    ingest_reconciled(wh, drop)
    (session_id, meta) = wh.con.execute("SELECT session_id, metadata_json FROM raw.sessions").fetchone()
    assert session_id == "xyz789" and json.loads(meta)["id_from_location"] == "abc123"
    assert [(q["record_type"], q["reason"]) for q in quarantine(wh, "staging")] == [
        ("rating", "rating names session abc123, which no drop contains")
    ]
    assert wh.con.execute("SELECT session_id, label_stars FROM staging.session_labels").fetchall() == [("xyz789", 3.0)]


def sdk_event(event_id: str, second: int, kind: str, **body: object) -> str:
    return json.dumps({"id": event_id, "timestamp": f"2026-04-01T08:00:{second:02d}", "kind": kind, **body})


def test_sdk_folder_with_a_gap_unreadable_and_misnamed_files_and_a_broken_base_state(wh, tmp_path):
    """By hand: indexes 0, 1, 3, 4, 5, 6 are present, 2 is missing; 4 is truncated JSON and 5 a JSON list, so the
    events kept are 0, 1, 3, 6. events/notes.txt is not an event file name; .eventlog.lock is hidden.
    base_state.json is cut off: quarantined, and the session is named by its folder, conv-1.
    Records read: the session and two unknown files (3; 1 accepted). Events read: 4 kept + the gap + 2 unreadable."""
    conv = tmp_path / "persistence" / "conv-1"
    write(conv, "base_state.json", '{"id": "conv-1-in-content", "agent": {"llm": ')
    msg = {"role": "user", "content": [{"type": "text", "text": "run the tests"}]}
    write(
        conv,
        "events/event-00000-aaaaaaa1.json",
        sdk_event("aaaaaaa1", 0, "MessageEvent", source="user", llm_message=msg),
    )
    running = sdk_event(
        "aaaaaaa2", 1, "ConversationStateUpdateEvent", source="environment", key="execution_status", value="running"
    )
    write(conv, "events/event-00001-aaaaaaa2.json", running)
    action = {"kind": "TerminalAction", "command": "make test"}
    write(
        conv,
        "events/event-00003-aaaaaaa4.json",
        sdk_event("aaaaaaa4", 3, "ActionEvent", source="agent", tool_name="terminal", action=action),
    )
    write(conv, "events/event-00004-aaaaaaa5.json", '{"id": "aaaaaaa5", "kind": "Observ')
    write(conv, "events/event-00005-aaaaaaa6.json", "[1, 2]")
    finish = {"kind": "FinishAction", "message": "done"}
    write(
        conv,
        "events/event-00006-aaaaaaa7.json",
        sdk_event("aaaaaaa7", 6, "ActionEvent", source="agent", tool_name="finish", action=finish),
    )
    write(conv, "events/notes.txt", "remember to rerun")
    write(conv, "events/.eventlog.lock", "")
    ingest_reconciled(wh, tmp_path / "persistence")
    assert records_read(wh, "persistence") == (3, 1, 2)
    assert wh.con.execute("SELECT events_read, events_accepted, events_quarantined FROM raw.drops").fetchone() == (
        7,
        4,
        3,
    )
    assert wh.con.execute("SELECT session_id, source_format, n_events, metadata_json FROM raw.sessions").fetchall() == [
        ("conv-1", "openhands_v1_sdk_conversation", 4, None)
    ]
    kept = [e for (e,) in wh.con.execute("SELECT event_id FROM raw.events ORDER BY seq").fetchall()]
    assert kept == ["aaaaaaa1", "aaaaaaa2", "aaaaaaa4", "aaaaaaa7"]
    expected = [  # (record type, event index, how the reason starts); every row names the folder as its file
        ("unknown", None, "base_state.json: not valid JSON ("),
        ("unknown", None, "events/notes.txt: not an SDK event file (named event-<index>-<event id>.json); not read"),
        ("event", 2, "events/: no event file with index 00002 (a gap in the index)"),
        ("event", 4, "events/event-00004-aaaaaaa5.json: not valid JSON ("),
        ("event", 5, "events/event-00005-aaaaaaa6.json: event is not a JSON object (a JSON list)"),
    ]
    got = sorted(quarantine(wh), key=lambda q: (q["event_index"] is not None, q["event_index"] or 0, q["reason"]))
    assert [(q["source_file"], q["record_type"], q["event_index"]) for q in got] == [
        ("conv-1", t, i) for t, i, _ in expected
    ]
    assert all(q["reason"].startswith(start) for q, (_, _, start) in zip(got, expected, strict=True))
    assert (
        "events are read without it" in got[0]["reason"] and got[3]["raw_text"] == '{"id": "aaaaaaa5", "kind": "Observ'
    )


def test_sdk_folder_without_event_files(wh, tmp_path):
    """A conversation folder with a base_state.json but no events: the session has nothing to read and is
    quarantined with base_state.json's metadata as its raw text (one record read, none accepted, no event).
    The drop is the conversation folder itself."""
    conv = tmp_path / "conv-2"
    write(
        conv, "base_state.json", json.dumps({"id": "conv-2-id", "agent": {"llm": {"model": "m-2", "api_key": "sk-1"}}})
    )
    (conv / "events").mkdir()
    ingest_reconciled(wh, conv)
    assert records_read(wh, "conv-2") == (1, 0, 1)
    (q,) = quarantine(wh)
    assert (q["source_file"], q["record_type"], q["reason"]) == ("conv-2", "session", "session has no readable events")
    assert json.loads(q["raw_text"]) == {
        "agent": {"llm": {"model": "m-2"}},
        "model": "m-2",
        "id_from_location": "conv-2",
    }


def test_a_failed_trajectory_download_is_quarantined_with_the_servers_error(wh, tmp_path):
    # the OpenHands server's answer when it cannot build the trajectory: no events, an error
    f = write(tmp_path, "trajectory-5e5e.json", '{"trajectory": null, "error": "Error getting trajectory: timeout"}')
    ingest_reconciled(wh, f)
    assert [(q["record_type"], q["reason"]) for q in quarantine(wh)] == [
        (
            "unknown",
            "a trajectory download that failed (Error getting trajectory: timeout): download the conversation again",
        )
    ]


def test_a_renamed_single_file_keeps_its_name_and_so_its_session_id(pulse_home, tmp_path):
    """`pulse ingest trajectory-<id>.json --name NAME` stores the file as drops/NAME/trajectory-<id>.json: the
    session is still named by its file, and the same delivery again changes nothing."""
    from pulse_pipeline.ingest.register import register_drop

    download = tmp_path / "trajectory-conv42.json"
    download.write_text('{"trajectory": [{"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}}]}')
    key, target = register_drop(pulse_home, download, name="monday")
    assert (key, target) == ("monday", pulse_home.drops / "monday")
    assert [p.name for p in target.iterdir()] == ["trajectory-conv42.json"]
    assert register_drop(pulse_home, download, name="monday") == (key, target)
    download.write_text('{"trajectory": []}')
    with pytest.raises(FileExistsError, match="a different drop named 'monday'"):
        register_drop(pulse_home, download, name="monday")
