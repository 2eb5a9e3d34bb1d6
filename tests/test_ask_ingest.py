"""Asks (the rating widget shown with a known ask_probability, answered or not) through ingest and staging: what is
kept, what is quarantined and why, and the counts that reconcile. Expected values worked out by hand from the
lines below; sessions are ``test_bad_input.session_line`` canonical sessions (segment k closes at event 2k+2)."""

from __future__ import annotations

import json

from pulse_pipeline import staging, tables

from .test_bad_input import ingest_reconciled, quarantine, records_read, session_line, write


def _ingest(wh, tmp_path, name: str, text: str) -> None:
    sessions = write(tmp_path, "s.jsonl", session_line("s1", 2) + session_line("s2", 1) + session_line("s3", 1))
    ingest_reconciled(wh, sessions, write(tmp_path, name, text))
    staging.build_session_asks(wh)


def test_asks_answered_and_not_with_their_probabilities(wh, tmp_path):
    lines = [
        '{"conversation_id": "s1", "event_id": "2", "ask_probability": 0.2, "created_at": "2026-01-01T10:00:00"}',
        '{"conversation_id": "s1", "event_id": "4", "ask_probability": 0.2, "rating": 4,'
        ' "created_at": "2026-01-01T11:00:00"}',
        '{"conversation_id": "s2", "ask_probability": "0.05", "rating": null}',  # a CSV-like text number
        '{"conversation_id": "s3", "rating": 5}',  # a rating without a probability: not an ask
        '{"conversation_id": "s2", "ask_probability": 1}',  # asked again with another probability
    ]
    _ingest(wh, tmp_path, "asks.jsonl", "\n".join(lines) + "\n")
    assert records_read(wh, "asks.jsonl") == (5, 5, 0)
    assert quarantine(wh) == [] and quarantine(wh, "staging") == []
    assert wh.count(tables.ASKS) == 4 and wh.count(tables.RATINGS) == 1
    # the answered ask is a rating like any other: s1 segment 1 (event 4) 4 stars, s3 its last segment 5 stars
    assert wh.con.execute(
        "SELECT session_id, segment_index, rating FROM staging.segment_ratings ORDER BY 1"
    ).fetchall() == [
        ("s1", 1, 4.0),
        ("s3", 0, 5.0),
    ]
    # s1: two asks, one answered, 0.2; s2: two unanswered asks, first (no created_at: delivery order) 0.05, two
    # different probabilities; s3 was never asked with a probability
    assert wh.con.execute(
        "SELECT session_id, n_asks, n_answered, ask_probability, n_probabilities FROM staging.session_asks"
    ).fetchall() == [("s1", 2, 1, 0.2, 1), ("s2", 2, 0, 0.05, 2)]


def test_bad_asks_are_quarantined_with_their_reason(wh, tmp_path):
    lines = [
        '{"conversation_id": "s1", "ask_probability": 0}',
        '{"conversation_id": "s1", "ask_probability": 1.5, "rating": 3}',
        '{"conversation_id": "s1", "ask_probability": "often"}',
        '{"conversation_id": "s1", "ask_probability": true}',
        '{"ask_probability": 0.3}',  # no session id
        '{"conversation_id": "s1", "ask_probability": 0.3, "rating": 9}',
        '{"conversation_id": "ghost", "ask_probability": 0.3}',  # accepted at ingest, joins nothing at staging
        '{"conversation_id": "s1", "ask_probability": 0.5}',  # kept
    ]
    _ingest(wh, tmp_path, "asks.jsonl", "\n".join(lines) + "\n")
    assert [(q["record_index"], q["record_type"], q["reason"]) for q in quarantine(wh)] == [
        (0, "rating", "ask_probability 0 is not a number in (0, 1]"),
        (1, "rating", "ask_probability 1.5 is not a number in (0, 1]"),
        (2, "rating", 'ask_probability "often" is not a number in (0, 1]'),
        (3, "rating", "ask_probability true is not a number in (0, 1]"),
        (4, "rating", "ask names no session: expected a conversation_id or session_id (its fields: ask_probability)"),
        (5, "rating", "rating 9 is not a star rating: expected a number from 1 to 5"),
    ]
    assert records_read(wh, "asks.jsonl") == (8, 2, 6)  # read = accepted + quarantined
    (q,) = quarantine(wh, "staging")
    assert q["reason"] == "ask names session ghost, which no drop contains"
    assert json.loads(q["raw_text"])["ask_probability"] == 0.3
    assert wh.con.execute("SELECT session_id, n_asks, ask_probability FROM staging.session_asks").fetchall() == [
        ("s1", 1, 0.5)
    ]


def test_a_csv_of_asks(wh, tmp_path):
    text = "conversation_id,event_id,rating,ask_probability\ns1,2,,0.25\ns1,4,5,0.25\ns2,,,\n"
    _ingest(wh, tmp_path, "asks.csv", text)
    # the third row has neither a rating nor a probability: a rating row without its rating, as before
    assert [(q["record_index"], q["reason"]) for q in quarantine(wh)] == [
        (3, "rating null is not a star rating: expected a number from 1 to 5")
    ]
    assert records_read(wh, "asks.csv") == (3, 2, 1)
    assert wh.con.execute(
        "SELECT session_id, n_asks, n_answered, ask_probability FROM staging.session_asks"
    ).fetchall() == [("s1", 2, 1, 0.25)]
