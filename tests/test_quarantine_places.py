"""Where a quarantined record was, and that no file named like data leaves a drop unaccounted for (issue 34,
item 9): the bad lines of a JSON-lines file carry their line numbers (0-based: the 13th line is 12), whether the
file holds one record per line or one session's events per line; and a hidden file named like data
(``..dotdot..json``) becomes a quarantine row instead of being skipped as a sidecar."""

from __future__ import annotations

import json

from .helpers import assert_reconciled, ingest_paths, rows

BAD = (13, 15, 16)  # 1-based, as an editor shows them


def _lines(line) -> str:
    return "\n".join("{broken" if n in BAD else json.dumps(line(n)) for n in range(1, 17)) + "\n"


def test_bad_record_lines_carry_their_line_numbers(wh, tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(
        _lines(lambda n: {"session_id": f"s{n}", "events": [{"id": "1", "source": "user", "type": "message"}]})
    )
    ingest_paths(wh, path)
    assert rows(wh, "SELECT record_index, event_index FROM raw.quarantine ORDER BY 1") == [
        (12, None),
        (14, None),
        (15, None),
    ]
    assert rows(wh, "SELECT count(*) FROM raw.sessions") == [(13,)]
    assert_reconciled(wh, "records.jsonl")


def test_bad_event_lines_carry_their_line_numbers(wh, tmp_path):
    """A Claude Code transcript: one session, one event per line. Each bad line was ``record_index`` 0 (the
    session's record), its line only in ``event_index``."""
    path = tmp_path / "transcript.jsonl"
    path.write_text(
        _lines(
            lambda n: {
                "sessionId": "cc-1",
                "type": "user" if n % 2 else "assistant",
                "uuid": f"u{n}",
                "timestamp": f"2025-10-01T09:00:{n:02d}.000Z",
                "message": {"role": "user" if n % 2 else "assistant", "content": f"line {n}"},
            }
        )
    )
    ingest_paths(wh, path)
    got = rows(wh, "SELECT record_index, event_index, record_type FROM raw.quarantine ORDER BY 1")
    assert got == [(12, 12, "event"), (14, 14, "event"), (15, 15, "event")]
    assert rows(wh, "SELECT session_id, record_index, n_events FROM raw.sessions") == [("cc-1", 0, 13)]
    assert_reconciled(wh, "transcript.jsonl")


def test_a_hidden_file_named_like_data_is_quarantined_not_skipped(wh, tmp_path):
    from pulse_pipeline.ingest.drop import HIDDEN_DATA  # here, so the other tests run on code without it

    drop = tmp_path / "drop"
    (drop / "sub").mkdir(parents=True)
    session = {"session_id": "d", "events": [{"id": "1", "source": "user", "type": "message", "text": "hi"}]}
    (drop / "ok.json").write_text(json.dumps({**session, "session_id": "ok"}))
    (drop / "..dotdot..json").write_text(json.dumps(session))
    (drop / "sub" / ".partial.jsonl").write_text(json.dumps(session))
    (drop / "_truth.json").write_text("{}")  # a sidecar: not part of the drop
    (drop / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")  # hidden and not named like data: not part of the drop
    ingest_paths(wh, drop)
    got = rows(wh, "SELECT source_file, record_index, record_type, reason FROM raw.quarantine ORDER BY 1")
    assert got == [
        ("..dotdot..json", None, "unknown", HIDDEN_DATA),
        ("sub/.partial.jsonl", None, "unknown", HIDDEN_DATA),
    ]
    assert rows(wh, "SELECT session_id FROM raw.sessions") == [("ok",)]
    assert rows(wh, "SELECT records_read, records_accepted, records_quarantined FROM raw.drops") == [(3, 1, 2)]
    assert_reconciled(wh, "drop")


def test_a_folder_of_only_a_hidden_data_file_is_a_drop(tmp_path):
    """It is not empty: its one entry becomes a quarantine row saying why (``drop.why_empty``)."""
    from pulse_pipeline.ingest.drop import why_empty

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "..dotdot..json").write_text("{}")
    assert why_empty(tmp_path / "d") is None
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / ".lock").write_text("x")
    assert "holds no file with data" in why_empty(tmp_path / "e")
