"""End to end: drops written by `pulse pull langfuse` (from the fake Langfuse) read by ingest and staging.

It checks that the pull's drops mean what the Langfuse reader's mapping says, with values worked out from the rows
served (``test_langfuse_pull._session_a``: session ``sess-a`` = traces ``t1`` (a1-a3) and ``t2`` (b1, b2); trace
``t3`` (c1, c2) has no session, so it is its own; every observation by ``user-1``):

- pull 1: a BOOLEAN ``user-feedback`` score ``false`` (source API) on trace ``t2``, a NUMERIC ``rating`` 4 (API) on
  session ``sess-a``, a NUMERIC ``helpfulness`` 0.8 (EVAL) on observation ``a2``. Two sessions; ``sess-a`` has two
  work segments opened by ``t1`` and ``t2`` (a trace is a segment, its opening event id the trace id), ``t3`` one.
  The thumb rates ``t2``'s segment (index 1) with 0 on the thumbs scale; the session rating has no event, so it
  rates the last segment (1), 4 stars; the label is the stars' (4 -> 0.75). The EVAL score is an eval score,
  never a rating. Nothing quarantined.
- pull 2 (an hour later): a thumb ``true`` on ``t1`` only. Its drop holds ``sess-a`` whole (the pull's store), so
  staging keeps both segments from the later drop and adds the thumb 1 on segment 0.
"""

from __future__ import annotations

from datetime import timedelta

from pulse_pipeline import tables
from pulse_pipeline.label_scales import STARS, THUMBS

from .fake_langfuse import running_fake_langfuse, score
from .helpers import assert_reconciled, ingest_paths, rows
from .test_langfuse_pull import PULL_1, PULL_2, T0, Puller, _session_a


def test_pulled_drops_become_sessions_segments_ratings_and_eval_scores(wh, tmp_path):
    with running_fake_langfuse() as fake:
        fake.observations = _session_a()
        fake.scores = [
            score("fb-t2", "user-feedback", False, T0 + timedelta(hours=1), kind="trace", subject_id="t2",
                  data_type="BOOLEAN"),
            score("r-sess", "rating", 4, T0 + timedelta(hours=2), kind="session", subject_id="sess-a"),
            score("ev-a2", "helpfulness", 0.8, T0 + timedelta(hours=3), kind="observation", subject_id="a2",
                  trace_id="t1", source="EVAL"),
        ]  # fmt: skip
        pull = Puller(fake, tmp_path)
        first = pull().drop.path
        fake.scores.append(
            score("fb-t1", "user-feedback", True, PULL_1 + timedelta(minutes=20), kind="trace", subject_id="t1",
                  data_type="BOOLEAN")
        )  # fmt: skip
        second = pull(now=PULL_2).drop.path

    ingest_paths(wh, first)
    assert_reconciled(wh, first.name)
    sessions = f"SELECT session_id, source_format, user_id FROM {tables.STAGING_SESSIONS.qualified} ORDER BY 1"
    assert rows(wh, sessions) == [("sess-a", "langfuse", "user-1"), ("t3", "langfuse", "user-1")]
    segments = f"SELECT session_id, segment_index, open_event_id FROM {tables.WORK_SEGMENTS.qualified} ORDER BY 1, 2"
    assert rows(wh, segments) == [("sess-a", 0, "t1"), ("sess-a", 1, "t2"), ("t3", 0, "t3")]
    ratings = f"SELECT session_id, segment_index, rating, scale FROM {tables.SEGMENT_RATINGS.qualified} ORDER BY ALL"
    assert rows(wh, ratings) == [("sess-a", 1, 0.0, THUMBS), ("sess-a", 1, 4.0, STARS)]
    labels = f"SELECT session_id, label, scale FROM {tables.SESSION_LABELS.qualified}"
    assert rows(wh, labels) == [("sess-a", 0.75, STARS)]
    assert rows(wh, f"SELECT name FROM {tables.EVAL_SCORES.qualified}") == [("helpfulness",)]
    assert rows(wh, f"SELECT count(*) FROM {tables.QUARANTINE.qualified}") == [(0,)]

    ingest_paths(wh, second)
    assert_reconciled(wh, second.name)
    kept = f"SELECT session_id, drop_id FROM {tables.STAGING_SESSIONS.qualified} ORDER BY 1"
    assert rows(wh, kept) == [("sess-a", second.name), ("t3", first.name)]
    assert rows(wh, segments) == [("sess-a", 0, "t1"), ("sess-a", 1, "t2"), ("t3", 0, "t3")]
    assert rows(wh, ratings) == [("sess-a", 0, 1.0, THUMBS), ("sess-a", 1, 0.0, THUMBS), ("sess-a", 1, 4.0, STARS)]
    assert rows(wh, f"SELECT count(*) FROM {tables.QUARANTINE.qualified}") == [(0,)]
