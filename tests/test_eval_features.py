"""Judges' scores from trace tools as session features (features/eval_scores.py): each put on [0, 1] by its data
type and declared range, else as it is on [0, 1], else min-max over the corpus; per session mean, min and count
(issue 39: "EVAL scores are never labels ... kept as features")."""

from __future__ import annotations

import orjson
import pytest

from pulse_pipeline.features.rubric import load_rubric
from pulse_pipeline.features.wide import build_session_features
from pulse_pipeline.ingest.load import load_drop
from pulse_pipeline.ingest.scores import ScoreRules

from .helpers import rebuild_staging, rows
from .test_scores import _load_batch, _scored_batch, score


def _sessions(tmp_path, names):
    path = tmp_path / "sessions"
    path.mkdir()
    lines = []
    for name in names:
        events = [
            {"id": f"{name}-trace", "source": "user", "type": "message", "text": "go"},
            {"id": f"{name}-reply", "source": "agent", "type": "message", "text": "ok", "wait_for_response": True},
        ]
        lines.append(orjson.dumps({"session_id": name, "events": events}))
    (path / "s.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_eval_scores_reach_the_unit_interval_and_each_session_gets_mean_min_and_count(wh, tmp_path):
    load_drop(wh, "sessions", _sessions(tmp_path, ["A", "B", "C", "D"]))

    def judge(name, value, session, data_type="NUMERIC", event=None):
        return score(name, value, data_type=data_type, source="EVAL", session_id=session, event_id=event)

    evals = [
        judge("quality", 3.0, "A"),  # declared 1-5: (3 - 1) / 4 = 0.5
        judge("quality", 5.0, "A"),  # 1.0
        judge("tone", None, "A", "CATEGORICAL"),  # no number: left out
        judge("latency_judge", 10.0, "B"),  # undeclared, beyond [0, 1]: min-max over 10..30 -> 0
        judge("latency_judge", 30.0, "C"),  # -> 1
        judge("passed", 1.0, "C", "BOOLEAN"),  # as it is
        judge("quality", 2.0, None, event="C-trace"),  # names only C's trace: (2 - 1) / 4 = 0.25
    ]
    _load_batch(wh, _scored_batch("evals", evals, ScoreRules()), "2100-01-01 00:00:00")
    rebuild_staging(wh)
    build_session_features(wh, load_rubric(None), "heuristic", "", None, (), score_ranges={"quality": (1.0, 5.0)})
    got = {
        r[0]: r[1:]
        for r in rows(
            wh, "SELECT session_id, eval_score_mean, eval_score_min, eval_scored FROM features.session_features"
        )
    }
    assert got["A"] == (pytest.approx(0.75), 0.5, 2)
    assert got["B"] == (0.0, 0.0, 1)
    assert got["C"] == (pytest.approx((1 + 1 + 0.25) / 3), 0.25, 3)
    assert got["D"] == (None, None, 0)
    # and a column per judge name, each name's mean on [0, 1], so "high is bad" and "high is good" stay apart; the
    # CATEGORICAL "tone" has no number and no column
    per_name = {
        r[0]: r[1:]
        for r in rows(
            wh,
            "SELECT session_id, eval__quality, eval__latency_judge, eval__passed FROM features.session_features",
        )
    }
    assert per_name["A"] == (pytest.approx(0.75), None, None)
    assert per_name["B"] == (None, 0.0, None)
    assert per_name["C"] == (0.25, 1.0, 1.0)
    assert per_name["D"] == (None, None, None)
    columns = [d[0] for d in wh.con.execute("SELECT * FROM features.session_features LIMIT 0").description]
    assert [c for c in columns if c.startswith("eval__")] == ["eval__quality", "eval__latency_judge", "eval__passed"]


def test_without_eval_scores_the_columns_are_not_added(wh, tmp_path):
    load_drop(wh, "sessions", _sessions(tmp_path, ["A"]))
    rebuild_staging(wh)
    build_session_features(wh, load_rubric(None), "heuristic", "", None, ())
    columns = [d[0] for d in wh.con.execute("SELECT * FROM features.session_features LIMIT 0").description]
    assert "judge_likert" in columns and not any(c.startswith("eval_score") for c in columns)
