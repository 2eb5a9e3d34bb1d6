"""Every input shape PULSE reads, on small hand-written fixtures (tests/fixtures/). Expected values were worked
out by reading the fixture files, not copied from the code's output; each test says where its numbers come from.

Fixtures:

- feedback/record_2024.json: one 2024 feedback record (pretty-printed, ``feedback: negative``): events with
  ``id: null`` (ids become ``#<n>``), ``initialize``, arguments under ``extras``, ``source: agent`` state
  changes, ``task_plan`` and ``rag_search``. Ten events; segment opens at the user message (#2), runs from
  ``running`` (#3), closes at ``awaiting_user_input`` (#9); the last agent message is #8; one ``run`` (#6).
- feedback/records.jsonl: line 0 a 2025 record (positive; ids 0..7, one segment closed by ``finished`` at 7,
  ``finish`` at 6, one ``run`` at 4 whose observation 5 has ``metadata.exit_code`` 0), line 1 the record of
  record_2024.json on one line.
- feedback/records_array.json: a JSON array: the 2025 record again, and the 2024 trajectory rated positive.
- session_dir/sessions/sess-dir-1/events/0..11.json: two segments (0..5 closed by awaiting_user_input, agent
  message 4; 6..11 closed by finished, finish 10), two ``run`` actions (2, 8).
- canonical/sessions.jsonl: canon-1 (17 events, three state-cut segments 1..6, 7..11, 12..17; ratings by
  event_id 5 = 5 stars, by segment_index 1 = 2 stars, by neither = 3 stars) and canon-2 (7 events, no states:
  segments 1..4 (agent waits at 4) and 5..7 (finish); rating segment_index 0 = 4 stars; experiment, variant and
  user in ``metadata``).
- ratings_drop/: sessions conv-a (folder, like sess-dir-1: segments 0..5 and 6..11, agent message 4, finish 10)
  and conv-b (folder, no state events: 0..3 where agent message 3 waits, 4..9 ending in finish 9), conv-c
  (canonical, with experiment metadata); feedback.jsonl and feedback.csv rating them; assignments.csv.
- content_shapes/: weird.txt (a V0 event array), ratings.csv (canonical JSONL), data.json (ratings JSONL),
  table.dat (an assignments CSV).
- downloads/: OpenHands "download trajectory" files, whose ids are only in their names.
  trajectory-4f2a9c1e.json ``{"trajectory": [...]}``: 7 V0 events, user message 0, running 1, ``ls`` at 2, edit 4,
  finish 5, finished 6: one segment, one command. trajectory-b71e0d33.json: 10 events, user messages 0 and 4;
  segment 0 closes at awaiting_user_input 3, segment 1 at finished 9; one command (``git mv`` at 6).
  9d0c5e57.json, a bare V0 event array: user message 0, ``pytest -q`` at 1, an agent message at 3 that waits (no
  state events): one segment, one command. conversation_feedback.csv rates them 5, 2 and 4 stars with
  ``event_id`` empty (so each rates its session's last segment); assignments.csv puts them in arms.
- app_server/0c3a5e1f-7d2b-4c89-9e61-2f4b8a7d1c05/: six V1 app-server event files (pretty-printed, no suffix).
  In content-time order: user message ...01 (09:30:00.10), running ...02 (09:30:00.25), ``ls -la`` ...03 (critic
  0.7), its observation ...04 (exit 0), FinishAction ...05, finished ...06. By file name ...02 would come first:
  both were written in second 093000 and ``ConversationStateUpdateEvent`` sorts before ``MessageEvent``.

The last section needs no fixture: a made-up chat-log adapter shows what the driver (``ingest/adapter.py``) does for
any format, and a row is checked against the contract by column name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from pulse_pipeline import tables
from pulse_pipeline.contract import ContractError
from pulse_pipeline.ingest.adapter import Adapter, EventFields, add_session
from pulse_pipeline.ingest.batch import Batch
from pulse_pipeline.ingest.load import load_drop, reconcile_drop

from .helpers import FIXTURES, ingest_paths, rebuild_staging

FEEDBACK = FIXTURES / "feedback"
CONTENT_ID = re.compile(r"^h-[0-9a-f]{16}$")


def rows(wh, sql: str, params: list | None = None) -> list[tuple]:
    return wh.con.execute(sql, params or []).fetchall()


def snapshot(wh) -> dict[str, list[tuple]]:
    """Full sorted contents of every table of the contract."""
    return {t.qualified: rows(wh, f"SELECT * FROM {t.qualified} ORDER BY ALL") for t in tables.ALL_TABLES}


def assert_reconciled(wh, *drop_ids: str) -> None:
    for drop_id in drop_ids:
        ok, facts = reconcile_drop(wh, drop_id)
        assert ok, (drop_id, facts)


def set_mtime(path: Path, mtime: float) -> None:
    """Give a drop (file, or every file of a folder) one modification time."""
    for f in [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]:
        os.utime(f, (mtime, mtime))


# --- 1. OpenHands feedback-dataset records ---------------------------------------------------------------------


def test_feedback_record_2024_shape_one_per_file(wh):
    ingest_paths(wh, FEEDBACK / "record_2024.json")
    assert_reconciled(wh, "record_2024.json")
    assert wh.count(tables.QUARANTINE) == 0
    (s,) = wh.frame("SELECT * FROM raw.sessions").to_dicts()
    assert s["session_id"] == "record_2024"  # the record names no session and is alone in its file: the file's stem
    assert (s["source_format"], s["feedback"], s["record_index"]) == ("openhands_v0_feedback", "negative", 0)
    assert (s["n_events"], s["n_user_messages"], s["n_segments"], s["n_shell_commands"]) == (10, 1, 1, 1)
    # the initialize and init-state events carry no timestamp; the others run 16:00:00 .. 16:00:31
    assert (s["started_at"], s["ended_at"]) == (datetime(2024, 6, 14, 16, 0, 0), datetime(2024, 6, 14, 16, 0, 31))
    assert json.loads(s["metadata_json"])["permissions"] == "public"

    events = rows(
        wh,
        "SELECT event_id, source, kind, name, original_name, agent_state, segment_index, segment_close"
        " FROM raw.events ORDER BY seq",
    )
    assert events == [
        ("#0", "agent", "action", "start", None, None, None, None),  # initialize -> start
        ("#1", "agent", "state", "agent_state_changed", None, "init", None, None),  # before any user message
        ("#2", "user", "action", "message", None, None, 0, None),
        ("#3", "agent", "state", "agent_state_changed", None, "running", 0, None),
        ("#4", "agent", "action", "other", "task_plan", None, 0, None),
        ("#5", "agent", "action", "other", "rag_search", None, 0, None),
        ("#6", "agent", "action", "run", None, None, 0, None),
        ("#7", "agent", "observation", "run", None, None, 0, None),
        ("#8", "agent", "action", "message", None, None, 0, None),
        ("#9", "agent", "state", "agent_state_changed", None, "awaiting_user_input", 0, "awaiting_user_input"),
    ]
    # arguments under `extras` are read: message text, the command, the old flat exit code, wait_for_response
    detail = rows(wh, "SELECT event_id, text, command, exit_code, wait_for_response FROM raw.events ORDER BY seq")
    assert detail[2][1] == "Write a script that prints the primes below 20"
    assert detail[6][2] == "python3 primes.py"
    assert detail[7][3] == 0
    assert detail[8][4] is True

    seg = wh.frame("SELECT * FROM staging.work_segments").to_dicts()
    assert [(g["open_event_id"], g["close_event_id"], g["rated_event_id"], g["n_events"]) for g in seg] == [
        ("#2", "#9", "#8", 8)
    ]
    assert (seg[0]["close_reason"], seg[0]["closed"], seg[0]["n_user_messages"]) == ("awaiting_user_input", True, 1)


def test_feedback_records_one_per_line(wh):
    ingest_paths(wh, FEEDBACK / "records.jsonl")
    assert_reconciled(wh, "records.jsonl")
    assert wh.count(tables.QUARANTINE) == 0
    sessions = rows(
        wh,
        "SELECT record_index, feedback, source_format, n_events, n_user_messages, n_segments, n_shell_commands"
        " FROM raw.sessions ORDER BY record_index",
    )
    assert sessions == [
        (0, "positive", "openhands_v0_feedback", 8, 1, 1, 1),
        (1, "negative", "openhands_v0_feedback", 10, 1, 1, 1),
    ]
    # the 2025 record: the shell exit code comes from extras.metadata.exit_code of observation 5
    new_id = rows(wh, "SELECT session_id FROM raw.sessions WHERE record_index = 0")[0][0]
    assert rows(wh, "SELECT exit_code FROM raw.events WHERE session_id = ? AND event_id = '5'", [new_id]) == [(0,)]
    seg = rows(
        wh,
        "SELECT open_event_id, close_event_id, rated_event_id, close_reason FROM staging.work_segments"
        " WHERE session_id = ?",
        [new_id],
    )
    assert seg == [("0", "7", "6", "finished")]


def test_feedback_records_in_one_array(wh):
    ingest_paths(wh, FEEDBACK / "records_array.json")
    assert_reconciled(wh, "records_array.json")
    assert wh.count(tables.QUARANTINE) == 0
    sessions = rows(wh, "SELECT record_index, feedback, n_events, n_segments FROM raw.sessions ORDER BY 1")
    assert sessions == [(0, "positive", 8, 1), (1, "positive", 10, 1)]
    assert wh.count(tables.EVENTS) == 18
    # the 2024 trajectory keeps its unknown actions as `other`
    assert rows(wh, "SELECT original_name FROM raw.events WHERE name = 'other' ORDER BY seq") == [
        ("task_plan",),
        ("rag_search",),
    ]


def test_records_without_id_get_a_stable_content_id(wh, tmp_path):
    """In a file of many records, an id-less record's id is its content hash: same content -> same id, whatever the
    file, packaging or line endings; other content -> other id. Alone in its file, a record takes the file's stem."""
    again = tmp_path / "again.jsonl"
    shutil.copyfile(FEEDBACK / "records.jsonl", again)
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes((FEEDBACK / "records.jsonl").read_bytes().replace(b"\n", b"\r\n"))
    record_2024 = json.loads((FEEDBACK / "record_2024.json").read_bytes())
    reordered = tmp_path / "reordered.jsonl"  # the 2024 record and the 2025 one, keys in reverse order, one a line
    reordered.write_text(
        "".join(
            json.dumps(dict(reversed(r.items()))) + "\n"
            for r in (record_2024, json.loads((FEEDBACK / "records.jsonl").read_text().splitlines()[0]))
        )
    )
    ingest_paths(wh, FEEDBACK / "record_2024.json", FEEDBACK / "records.jsonl", FEEDBACK / "records_array.json")
    ingest_paths(wh, again, crlf, reordered)
    ids = dict(((d, i), s) for d, i, s in rows(wh, "SELECT drop_id, record_index, session_id FROM raw.sessions"))
    assert len(ids) == 11
    assert ids.pop(("record_2024.json", 0)) == "record_2024"
    assert all(CONTENT_ID.match(s) for s in ids.values())
    new = ids["records.jsonl", 0]  # the 2025 record
    old = ids["records.jsonl", 1]  # the 2024 record, rated negative
    assert ids["records_array.json", 0] == ids["again.jsonl", 0] == ids["crlf.jsonl", 0] == ids["reordered.jsonl", 1]
    assert ids["records_array.json", 0] == new
    assert ids["again.jsonl", 1] == ids["crlf.jsonl", 1] == ids["reordered.jsonl", 0] == old
    old_positive = ids["records_array.json", 1]  # same trajectory, other feedback: other content
    assert len({new, old, old_positive}) == 3
    # staging counts each record once
    assert sorted(s for (s,) in rows(wh, "SELECT session_id FROM staging.sessions")) == sorted(
        ["record_2024", new, old, old_positive]
    )


# --- 2. sessions/<sid>/events/<n>.json --------------------------------------------------------------------------


def test_session_folder_one_event_per_file(wh):
    ingest_paths(wh, FIXTURES / "session_dir")
    assert_reconciled(wh, "session_dir")
    assert wh.count(tables.QUARANTINE) == 0
    assert rows(
        wh,
        "SELECT session_id, source_file, source_format, n_events, n_user_messages, n_segments, n_shell_commands"
        " FROM staging.sessions",
    ) == [("sess-dir-1", "sessions/sess-dir-1/events", "openhands_v0_session_dir", 12, 2, 2, 2)]
    # numeric order: 10.json and 11.json come after 9.json
    assert [e for (e,) in rows(wh, "SELECT event_id FROM raw.events ORDER BY seq")] == [str(i) for i in range(12)]
    assert rows(
        wh,
        "SELECT segment_index, open_event_id, close_event_id, rated_event_id, n_events, close_reason"
        " FROM staging.work_segments ORDER BY segment_index",
    ) == [(0, "0", "5", "4", 6, "awaiting_user_input"), (1, "6", "11", "10", 6, "finished")]


# --- 3. PULSE canonical JSONL -----------------------------------------------------------------------------------


def test_canonical_sessions_with_inline_ratings(wh):
    ingest_paths(wh, FIXTURES / "canonical" / "sessions.jsonl")
    assert_reconciled(wh, "sessions.jsonl")
    assert wh.count(tables.QUARANTINE) == 0
    assert rows(
        wh,
        "SELECT session_id, source_format, user_id, experiment, variant, n_events, n_user_messages, n_segments,"
        " n_shell_commands, started_at, ended_at FROM staging.sessions ORDER BY 1",
    ) == [
        ("canon-1", "pulse_canonical", "u1", "llm-backbone", "gpt-5", 17, 3, 3, 2)
        + (datetime(2025, 6, 1, 12, 0), datetime(2025, 6, 1, 12, 31)),
        ("canon-2", "pulse_canonical", "u2", "llm-backbone", "claude", 7, 2, 2, 1)
        + (datetime(2025, 6, 3, 8, 0), datetime(2025, 6, 3, 8, 9)),
    ]
    meta = json.loads(rows(wh, "SELECT metadata_json FROM raw.sessions WHERE session_id = 'canon-1'")[0][0])
    assert meta["metadata"] == {"repo": "acme/web"} and "events" not in meta and "ratings" not in meta
    assert rows(
        wh,
        "SELECT session_id, segment_index, open_event_id, close_event_id, rated_event_id, close_reason"
        " FROM staging.work_segments ORDER BY 1, 2",
    ) == [
        ("canon-1", 0, "1", "6", "5", "awaiting_user_input"),
        ("canon-1", 1, "7", "11", "10", "awaiting_user_input"),
        ("canon-1", 2, "12", "17", "16", "finished"),
        ("canon-2", 0, "1", "4", "4", "awaiting_response"),
        ("canon-2", 1, "5", "7", "7", "finish"),
    ]
    # the observation of `run` 3 keeps its exit code
    assert rows(wh, "SELECT exit_code FROM raw.events WHERE session_id = 'canon-1' AND event_id = '4'") == [(1,)]
    assert rows(wh, "SELECT session_id, item_index, origin FROM raw.ratings ORDER BY 1, 2") == [
        ("canon-1", 0, "session"),
        ("canon-1", 1, "session"),
        ("canon-1", 2, "session"),
        ("canon-2", 0, "session"),
    ]
    assert rows(
        wh, "SELECT session_id, segment_index, rating, reason, matched_by FROM staging.segment_ratings ORDER BY 1, 2"
    ) == [
        ("canon-1", 0, 5.0, None, "event_id"),  # event 5 is in segment 0
        ("canon-1", 1, 2.0, "forgot context", "segment_index"),
        ("canon-1", 2, 3.0, None, "last_segment"),  # neither: the last of 3 segments
        ("canon-2", 0, 4.0, None, "segment_index"),
    ]
    labels = rows(wh, "SELECT session_id, n_rated_segments, label_stars, label FROM staging.session_labels ORDER BY 1")
    # canon-1: (5 + 2 + 3) / 3 = 10/3 stars, label (10/3 - 1) / 4 = 7/12; canon-2: 4 stars, (4 - 1) / 4 = 0.75
    assert [(s, n) for s, n, _, _ in labels] == [("canon-1", 3), ("canon-2", 1)]
    assert [(stars, label) for _, _, stars, label in labels] == [
        (pytest.approx(10 / 3), pytest.approx(7 / 12)),
        (pytest.approx(4.0), pytest.approx(0.75)),
    ]
    assert rows(wh, "SELECT * FROM staging.assignments ORDER BY 1") == [
        ("canon-1", "llm-backbone", "gpt-5", "u1", "session_metadata"),
        ("canon-2", "llm-backbone", "claude", "u2", "session_metadata"),
    ]


# --- 4. separate ratings files and assignments -----------------------------------------------------------------


def test_ratings_files_join_segments_by_event_and_by_index(wh):
    ingest_paths(wh, FIXTURES / "ratings_drop")
    assert_reconciled(wh, "ratings_drop")
    assert wh.count(tables.QUARANTINE) == 0
    assert rows(wh, "SELECT session_id, source_format, n_segments FROM staging.sessions ORDER BY 1") == [
        ("conv-a", "openhands_v0_session_dir", 2),
        ("conv-b", "openhands_v0_session_dir", 2),
        ("conv-c", "pulse_canonical", 1),
    ]
    assert rows(
        wh,
        "SELECT session_id, segment_index, open_event_id, close_event_id, rated_event_id, close_reason"
        " FROM staging.work_segments WHERE session_id <> 'conv-c' ORDER BY 1, 2",
    ) == [
        ("conv-a", 0, "0", "5", "4", "awaiting_user_input"),
        ("conv-a", 1, "6", "11", "10", "finished"),
        ("conv-b", 0, "0", "3", "3", "awaiting_response"),
        ("conv-b", 1, "4", "9", "9", "finish"),
    ]
    # 3 JSONL rows + 2 CSV rows, all from files
    assert rows(
        wh, "SELECT source_file, count(*), min(origin), max(origin) FROM raw.ratings GROUP BY 1 ORDER BY 1"
    ) == [
        ("feedback.csv", 2, "feedback_file", "feedback_file"),
        ("feedback.jsonl", 3, "feedback_file", "feedback_file"),
    ]
    assert rows(
        wh,
        "SELECT session_id, segment_index, rating, rating_id, matched_by, reason FROM staging.segment_ratings"
        " ORDER BY 1, 2",
    ) == [
        ("conv-a", 0, 5.0, "101", "event_id", None),  # event 4: the last agent message of segment 0
        ("conv-a", 1, 2.0, "102", "event_id", "didn't finish the job"),  # event 11: the closing state
        ("conv-b", 0, 4.0, "201", "segment_index", None),  # rated twice: see the next test
        ("conv-b", 1, 2.0, "202", "segment_index", "unnecessary changes, should've asked first"),
    ]
    # conv-a: (5 + 2) / 2 = 3.5 stars, label (3.5 - 1) / 4 = 0.625; conv-b: (4 + 2) / 2 = 3, label 0.5
    assert rows(wh, "SELECT * FROM staging.session_labels ORDER BY 1") == [
        ("conv-a", 2, 3.5, 0.625, "stars_1_5"),
        ("conv-b", 2, 3.0, 0.5, "stars_1_5"),
    ]


def test_segment_rated_twice_keeps_the_later_rating_by_created_at(wh, tmp_path):
    """conv-b segment 0: rating 103 (1 star, event 3, 10:00, feedback.jsonl) and 201 (4 stars, index 0, 11:00,
    feedback.csv). 201 is later although feedback.jsonl sorts after feedback.csv. A drop delivered later holding an
    earlier rating of conv-a segment 0 does not replace rating 101 (09:10) either."""
    drop = tmp_path / "ratings_drop"
    shutil.copytree(FIXTURES / "ratings_drop", drop)
    late = tmp_path / "late.jsonl"
    late.write_text(
        '{"id": 301, "conversation_id": "conv-a", "event_id": 2, "rating": 1, "created_at": "2025-06-02T09:05:00"}\n'
    )
    set_mtime(drop, 1_750_000_000)
    set_mtime(late, 1_750_000_000 + 3600)
    ingest_paths(wh, drop, late)
    assert_reconciled(wh, "ratings_drop", "late.jsonl")
    assert rows(
        wh, "SELECT session_id, segment_index, rating, rating_id FROM staging.segment_ratings ORDER BY 1, 2"
    ) == [
        ("conv-a", 0, 5.0, "101"),
        ("conv-a", 1, 2.0, "102"),
        ("conv-b", 0, 4.0, "201"),
        ("conv-b", 1, 2.0, "202"),
    ]


def test_assignments_file_beats_session_metadata(wh):
    """conv-c says onboarding/control in its own metadata; assignments.csv in the same drop says treatment (and
    leaves user_id empty, so the session's user u-c is kept). conv-b has no assignment at all."""
    ingest_paths(wh, FIXTURES / "ratings_drop")
    assert rows(wh, "SELECT variant FROM raw.sessions WHERE session_id = 'conv-c'") == [("control",)]
    assert rows(wh, "SELECT * FROM staging.assignments ORDER BY 1") == [
        ("conv-a", "onboarding", "control", "u-a", "assignments_file"),
        ("conv-c", "onboarding", "treatment", "u-c", "assignments_file"),
    ]


def test_excel_style_ratings_csv(wh, tmp_path):
    """A spreadsheet export: UTF-8 BOM, CRLF line ends, a quoted reason with a comma, a column order of its own."""
    csv_path = tmp_path / "excel.csv"
    csv_path.write_bytes(
        b"\xef\xbb\xbfrating,conversation_id,event_id,reason,created_at\r\n"
        b"4,sess-dir-1,4,,2025-05-20T15:00:00\r\n"
        b'3,sess-dir-1,10,"slow, but ok",2025-05-20T15:01:00\r\n'
    )
    ingest_paths(wh, FIXTURES / "session_dir", csv_path)
    assert_reconciled(wh, "session_dir", "excel.csv")
    assert wh.count(tables.QUARANTINE) == 0
    # event 4 is in segment 0, event 10 in segment 1 (see session_dir); (4 + 3) / 2 = 3.5 stars, label 0.625
    assert rows(wh, "SELECT segment_index, rating, reason FROM staging.segment_ratings ORDER BY 1") == [
        (0, 4.0, None),
        (1, 3.0, "slow, but ok"),
    ]
    assert rows(wh, "SELECT label_stars, label FROM staging.session_labels") == [(3.5, 0.625)]


# --- 5. shape from content, not name ----------------------------------------------------------------------------


def test_shape_is_detected_from_content_not_name(wh):
    drop = FIXTURES / "content_shapes"
    ingest_paths(wh, drop)
    assert_reconciled(wh, "content_shapes")
    assert wh.count(tables.QUARANTINE) == 0
    sessions = rows(
        wh, "SELECT source_file, record_index, session_id, source_format, n_events, n_segments FROM raw.sessions"
    )
    by_file = sorted(sessions)
    assert by_file[:2] == [
        ("ratings.csv", 0, "shape-1", "pulse_canonical", 2, 1),  # canonical JSONL named .csv
        ("ratings.csv", 1, "shape-2", "pulse_canonical", 2, 1),
    ]
    # a V0 event array named .txt: one session; bare events name none, so the file's stem does
    assert by_file[2] == ("weird.txt", 0, "weird", "openhands_v0_events", 4, 1)
    # ratings JSONL named data.json; one by segment_index, one by neither (the last segment)
    assert rows(wh, "SELECT source_file, session_id, origin FROM raw.ratings ORDER BY record_index") == [
        ("data.json", "shape-1", "feedback_file"),
        ("data.json", "shape-2", "feedback_file"),
    ]
    assert rows(wh, "SELECT session_id, segment_index, rating, matched_by FROM staging.segment_ratings ORDER BY 1") == [
        ("shape-1", 0, 4.0, "segment_index"),
        ("shape-2", 0, 2.0, "last_segment"),
    ]
    # an assignments CSV named table.dat
    assert rows(wh, "SELECT * FROM staging.assignments") == [("shape-1", "rename-tool", "on", None, "assignments_file")]


# --- 6. re-ingest idempotency and duplicate sessions -------------------------------------------------------------

B_DROP = (
    '{"session_id": "conv-a", "events": ['
    '{"id": "1", "source": "user", "type": "message", "text": "Create hello.py"},'
    '{"id": "2", "source": "agent", "type": "message", "text": "Which folder?", "wait_for_response": true},'
    '{"id": "3", "source": "user", "type": "message", "text": "src/"},'
    '{"id": "4", "source": "agent", "type": "write", "text": "src/hello.py"},'
    '{"id": "5", "source": "agent", "type": "finish", "text": "Created src/hello.py."}]}\n'
    '{"conversation_id": "conv-b", "segment_index": 1, "rating": 5, "created_at": "2025-06-03T00:00:00"}\n'
)


def _a_and_b(tmp_path: Path) -> tuple[Path, Path]:
    """A: the ratings drop; B (one hour later): a newer conv-a (2 segments, no states) and a later conv-b rating."""
    a = tmp_path / "A"
    shutil.copytree(FIXTURES / "ratings_drop", a)
    b = tmp_path / "B.jsonl"
    b.write_text(B_DROP)
    set_mtime(a, 1_750_000_000)
    set_mtime(b, 1_750_000_000 + 3600)
    return a, b


def test_loading_the_same_drop_twice_changes_nothing(wh):
    paths = [FIXTURES / "ratings_drop", FIXTURES / "canonical" / "sessions.jsonl", FEEDBACK / "record_2024.json"]
    ingest_paths(wh, *paths)
    before = snapshot(wh)
    assert sum(map(len, before.values())) > 100  # the snapshot is not vacuous
    ingest_paths(wh, FIXTURES / "ratings_drop")
    assert snapshot(wh) == before
    ingest_paths(wh, *paths)
    assert snapshot(wh) == before
    assert_reconciled(wh, "ratings_drop", "sessions.jsonl", "record_2024.json")


def test_loading_a_then_b_then_a_again_changes_nothing(wh, tmp_path):
    a, b = _a_and_b(tmp_path)
    ingest_paths(wh, a, b)
    before = snapshot(wh)
    ingest_paths(wh, a)
    assert snapshot(wh) == before
    assert_reconciled(wh, "A", "B.jsonl")
    # B is the later drop: its conv-a (5 events, segments 1..2 and 3..5) wins, and its conv-b rating (later
    # created_at) replaces 202. A's conv-a ratings name events 4 and 11: B's version has an event 4 (the write, in
    # segment 1) but no event 11, so 101 now rates segment 1 and 102 is quarantined at staging.
    assert rows(wh, "SELECT session_id, drop_id, n_events, n_segments FROM staging.sessions ORDER BY 1") == [
        ("conv-a", "B.jsonl", 5, 2),
        ("conv-b", "A", 10, 2),
        ("conv-c", "A", 2, 1),
    ]
    assert rows(wh, "SELECT session_id, segment_index, rating, drop_id FROM staging.segment_ratings ORDER BY 1, 2") == [
        ("conv-a", 1, 5.0, "A"),
        ("conv-b", 0, 4.0, "A"),
        ("conv-b", 1, 5.0, "B.jsonl"),
    ]
    assert rows(wh, "SELECT source_file, record_index, reason FROM raw.quarantine WHERE stage = 'staging'") == [
        ("feedback.jsonl", 1, "rating names event 11, which session conv-a does not have"),
    ]


def test_duplicate_session_later_drop_wins(wh, tmp_path):
    """Session dup-1 in two drops: new.jsonl (3 events, 1 segment) is an hour newer than old.jsonl (5 events,
    2 segments) but sorts before it by name; it is loaded first. Later = mtime first, then drop_id."""
    old = tmp_path / "old.jsonl"
    old.write_text(
        '{"session_id": "dup-1", "variant": "x", "experiment": "e", "events": ['
        '{"id": "1", "source": "user", "type": "message", "text": "a"},'
        '{"id": "2", "source": "agent", "type": "message", "text": "b", "wait_for_response": true},'
        '{"id": "3", "source": "user", "type": "message", "text": "c"},'
        '{"id": "4", "source": "agent", "type": "run", "command": "make"},'
        '{"id": "5", "source": "agent", "type": "finish", "text": "d"}]}\n'
    )
    new = tmp_path / "new.jsonl"
    new.write_text(
        '{"session_id": "dup-1", "variant": "y", "experiment": "e", "events": ['
        '{"id": "10", "source": "user", "type": "message", "text": "a"},'
        '{"id": "11", "source": "agent", "type": "run", "command": "make test"},'
        '{"id": "12", "source": "agent", "type": "finish", "text": "done"}]}\n'
    )
    set_mtime(old, 1_750_000_000)
    set_mtime(new, 1_750_000_000 + 3600)
    ingest_paths(wh, new, old)
    assert_reconciled(wh, "new.jsonl", "old.jsonl")
    assert rows(wh, "SELECT drop_id, n_events FROM raw.sessions ORDER BY 1") == [("new.jsonl", 3), ("old.jsonl", 5)]
    assert wh.count(tables.EVENTS) == 8  # raw keeps both versions' events
    assert rows(wh, "SELECT session_id, drop_id, n_events, n_segments FROM staging.sessions") == [
        ("dup-1", "new.jsonl", 3, 1)
    ]
    assert rows(wh, "SELECT segment_index, open_event_id, close_event_id, n_events FROM staging.work_segments") == [
        (0, "10", "12", 3)
    ]
    assert rows(wh, "SELECT variant FROM staging.assignments") == [("y",)]

    # same mtime: the greater drop_id wins ("old.jsonl" > "new.jsonl"); a reload records the new mtime
    set_mtime(new, 1_750_000_000)
    load_drop(wh, "new.jsonl", new)
    rebuild_staging(wh)
    assert rows(wh, "SELECT drop_id, n_events, n_segments FROM staging.sessions") == [("old.jsonl", 5, 2)]
    assert rows(wh, "SELECT open_event_id, close_event_id FROM staging.work_segments ORDER BY segment_index") == [
        ("1", "2"),
        ("3", "5"),
    ]
    assert rows(wh, "SELECT variant FROM staging.assignments") == [("x",)]


# --- 7. the adapter driver: a new format is only its parsing -----------------------------------------------------


class ChatLog(Adapter):
    """A made-up format: ``{"who": "user" | "bot", "says": text, "done": bool}``, no ids, no timestamps."""

    format = "chat_log"

    def parse(self, event: dict) -> EventFields:
        source = "user" if event.get("who") == "user" else "agent"
        return EventFields(source, "action", "message", text=event.get("says"), wait_for_response=event.get("done"))


def test_a_new_adapter_is_only_its_parsing():
    # two user turns, each answered by a bot message that waits for the user: two segments by the no-state rule
    # (user message to the agent's next waiting message); "oops" is not an object, so it is quarantined at
    # position 2 and the events after it are numbered without it (#2, #3)
    raw_events = [
        {"who": "user", "says": "fix it"},
        {"who": "bot", "says": "fixed", "done": True},
        "oops",
        {"who": "user", "says": "thanks, now test it"},
        {"who": "bot", "says": "tested", "done": True},
    ]
    batch = Batch("d")
    accepted = add_session(batch, "log.json", 0, "chat-1", "chat_log", ChatLog(), raw_events, {"user_id": "u1"})
    assert accepted == 4
    assert batch.read == {"session": 1, "event": 5}
    events = batch.columns[tables.EVENTS.qualified]
    assert events["event_id"] == ["#0", "#1", "#2", "#3"]
    assert events["source"] == ["user", "agent", "user", "agent"]
    assert events["segment_index"] == [0, 0, 1, 1]
    assert events["segment_close"] == [None, "awaiting_response", None, "awaiting_response"]
    session = {name: values[0] for name, values in batch.columns[tables.SESSIONS.qualified].items()}
    assert (session["session_id"], session["source_format"], session["user_id"]) == ("chat-1", "chat_log", "u1")
    assert (session["n_events"], session["n_user_messages"], session["n_segments"]) == (4, 2, 2)
    quarantine = batch.columns[tables.QUARANTINE.qualified]
    assert (quarantine["event_index"], quarantine["reason"]) == ([2], ["event is not a JSON object"])


def test_a_row_is_added_by_column_name_and_checked_against_the_contract():
    batch = Batch("d")
    row = {"drop_id": "d", "source_file": "a.csv", "record_index": 1, "session_id": "s", "experiment": "e"}
    with pytest.raises(ContractError, match="missing column.s. variant, user_id; extra column.s. arm"):
        batch.add(tables.ASSIGNMENTS, {**row, "arm": "x"})
    assert batch.count(tables.ASSIGNMENTS) == 0
    batch.add(tables.ASSIGNMENTS, {**row, "variant": "x", "user_id": None})
    assert batch.arrow(tables.ASSIGNMENTS).to_pylist() == [{**row, "variant": "x", "user_id": None}]


# --- 7. ids from locations; OpenHands downloads and session folders ----------------------------------------------


def test_trajectory_downloads_join_conversation_feedback_ratings(wh):
    """Ratings keyed by conversation id join downloads whose id is only in the file name: every rated session
    gets a label."""
    ingest_paths(wh, FIXTURES / "downloads")
    assert_reconciled(wh, "downloads")
    assert wh.count(tables.QUARANTINE) == 0  # no rating or assignment is left without its session
    assert rows(
        wh,
        "SELECT source_file, session_id, source_format, n_events, n_user_messages, n_segments, n_shell_commands"
        " FROM staging.sessions ORDER BY source_file",
    ) == [
        ("9d0c5e57.json", "9d0c5e57", "openhands_v0_events", 4, 1, 1, 1),
        ("trajectory-4f2a9c1e.json", "4f2a9c1e", "openhands_v0_download", 7, 1, 1, 1),
        ("trajectory-b71e0d33.json", "b71e0d33", "openhands_v0_download", 10, 2, 2, 1),
    ]
    assert rows(wh, "SELECT session_id, segment_index, rating, matched_by FROM staging.segment_ratings ORDER BY 1") == [
        ("4f2a9c1e", 0, 5.0, "last_segment"),
        ("9d0c5e57", 0, 4.0, "last_segment"),
        ("b71e0d33", 1, 2.0, "last_segment"),
    ]
    # label = (stars - 1) / 4
    assert rows(
        wh, "SELECT session_id, n_rated_segments, label_stars, label FROM staging.session_labels ORDER BY 1"
    ) == [
        ("4f2a9c1e", 1, 5.0, 1.0),
        ("9d0c5e57", 1, 4.0, 0.75),
        ("b71e0d33", 1, 2.0, 0.25),
    ]
    assert rows(wh, "SELECT session_id, variant FROM staging.assignments ORDER BY 1") == [
        ("4f2a9c1e", "control"),
        ("9d0c5e57", "treatment"),
        ("b71e0d33", "treatment"),
    ]


def _v0_events(task: str) -> list[dict]:
    return [
        {"id": 0, "source": "user", "action": "message", "args": {"content": task}},
        {"id": 1, "source": "agent", "action": "finish", "args": {"final_thought": "done"}},
    ]


def _write(path: Path, value: object, lines: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(v) + "\n" for v in value) if lines else json.dumps(value))


def test_session_ids_from_locations(wh, tmp_path):
    """Each rule of the precedence in records.py, one file each; a stem two files share gives both their paths."""
    drop = tmp_path / "ids"
    _write(drop / "sessions" / "s-42" / "trajectory.json", _v0_events("a"))  # sessions/<id>/...
    v1 = [
        {"id": "e1", "source": "user", "kind": "MessageEvent", "llm_message": {"role": "user", "content": "b"}},
        {
            "id": "e2",
            "source": "agent",
            "kind": "ActionEvent",
            "tool_name": "finish",
            "action": {"kind": "FinishAction"},
        },
    ]
    _write(drop / "conversations" / "c-7" / "events.jsonl", v1, lines=True)  # conversations/<id>/..., V1 JSON lines
    _write(drop / "a" / "trajectory-x.json", {"trajectory": _v0_events("c")})  # stem x ...
    _write(drop / "b" / "x.json", _v0_events("d"))  # ... twice in this drop
    _write(drop / "y.json", _v0_events("e"))  # a bare event array: its stem
    _write(drop / "solo.json", {"events": [{"id": "1", "source": "user", "type": "message", "text": "f"}]})
    two = [{"events": [{"id": "1", "source": "user", "type": "message", "text": t}]} for t in ("g", "h")]
    _write(drop / "many.jsonl", two, lines=True)  # records sharing a file: content hashes
    ingest_paths(wh, drop)
    assert_reconciled(wh, "ids")
    assert wh.count(tables.QUARANTINE) == 0
    ids = dict(rows(wh, "SELECT source_file || ':' || record_index, session_id FROM raw.sessions"))
    many = [ids.pop("many.jsonl:0"), ids.pop("many.jsonl:1")]
    assert ids == {
        "sessions/s-42/trajectory.json:0": "s-42",
        "conversations/c-7/events.jsonl:0": "c-7",
        "a/trajectory-x.json:0": "a/trajectory-x.json",
        "b/x.json:0": "b/x.json",
        "y.json:0": "y",
        "solo.json:0": "solo",
    }
    assert all(CONTENT_ID.match(s) for s in many) and many[0] != many[1]


def test_app_server_event_folder(wh):
    drop = FIXTURES / "app_server"
    ingest_paths(wh, drop)
    assert_reconciled(wh, "app_server")
    assert wh.count(tables.QUARANTINE) == 0
    conversation = "0c3a5e1f-7d2b-4c89-9e61-2f4b8a7d1c05"
    assert rows(
        wh,
        "SELECT session_id, source_file, source_format, n_events, n_user_messages, n_segments, n_shell_commands"
        " FROM staging.sessions",
    ) == [(conversation, conversation, "openhands_v1_app_server", 6, 1, 1, 1)]
    # ordered by each event's own timestamp: the user message before the running state of the same second
    order = [e for (e,) in rows(wh, "SELECT event_id FROM raw.events ORDER BY seq")]
    assert order == [f"3f1c2b7a-000{i}-4c3d-9a8b-00000000000{i}" for i in range(1, 7)]
    assert rows(wh, "SELECT open_event_id, close_event_id, close_reason, n_events FROM staging.work_segments") == [
        (order[0], order[5], "finished", 6)
    ]
