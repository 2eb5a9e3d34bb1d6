"""Scores that already exist become columns of ``features.session_features``: the LLM judge's Likert score and the
numeric metadata fields named by ``PULSE_SCORE_FIELDS`` (hand-made rows; the expected values are the rows')."""

from __future__ import annotations

import json

import pytest

from pulse_pipeline import tables
from pulse_pipeline.features import store
from pulse_pipeline.features.llm import JudgeScore
from pulse_pipeline.features.rubric import load_rubric
from pulse_pipeline.features.wide import build_session_features, score_column
from pulse_pipeline.settings import SettingsError, feature_settings

META = {
    "s1": {"eval": {"score": 0.75}, "grade": 3},
    "s2": {"eval": {"score": "high"}, "grade": True},  # neither is a number: NULL, counted
    "s3": {"other": 1},  # absent: NULL, not counted
    "s4": None,  # no metadata at all
}


def _sessions(wh) -> None:
    cols = tables.STAGING_SESSIONS.column_names
    for sid, meta in META.items():
        row = {c: None for c in cols} | {"session_id": sid, "metadata_json": json.dumps(meta) if meta else None}
        wh.con.execute(
            f"INSERT INTO staging.sessions ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [row[c] for c in cols],
        )


def _judge(sid: str, model: str, likert: int | None, status: str = "ok") -> JudgeScore:
    return JudgeScore(sid, model, "a2-v1", None, likert, "why", status)


def test_judge_likert_and_metadata_scores_land_in_session_features(wh) -> None:
    _sessions(wh)
    store.append_judge_scores(
        wh,
        [
            _judge("s1", "openai/judge", 4),
            _judge("s2", "openai/judge", 2),
            _judge("s3", "openai/judge", None, status="failed"),  # no answer: NULL
            _judge("s1", "openai/other", 1),  # another model's score is not read
        ],
    )
    built = build_session_features(wh, load_rubric(), "llm", "none", "openai/judge", ("eval.score", "grade"))
    assert built.rows == 4
    assert built.non_numeric == {"score_eval_score": 1, "score_grade": 1}
    got = wh.con.execute(
        "SELECT session_id, judge_likert, score_eval_score, score_grade FROM features.session_features ORDER BY 1"
    ).fetchall()
    assert got == [("s1", 4.0, 0.75, 3.0), ("s2", 2.0, None, None), ("s3", None, None, None), ("s4", None, None, None)]
    cols = [r[0] for r in wh.con.execute("DESCRIBE features.session_features").fetchall()]
    assert cols[-4:] == ["judge_likert", "score_eval_score", "score_grade", "annotation_status"]


def test_without_a_judge_model_the_column_is_null(wh) -> None:
    _sessions(wh)
    store.append_judge_scores(wh, [_judge("s1", "openai/judge", 4)])
    built = build_session_features(wh, load_rubric(), "llm", "none")
    assert built.non_numeric == {}
    assert wh.con.execute("SELECT count(judge_likert) FROM features.session_features").fetchone() == (0,)


def test_score_fields_setting() -> None:
    assert feature_settings({"PULSE_SCORE_FIELDS": " eval.score , grade,eval.score"}).score_fields == (
        "eval.score",
        "grade",
    )
    assert feature_settings({}).score_fields == ()
    assert score_column("eval.score-v2") == "score_eval_score_v2"
    with pytest.raises(SettingsError, match="not a dot-separated path"):
        feature_settings({"PULSE_SCORE_FIELDS": "a..b"})
    with pytest.raises(SettingsError, match="same column"):
        feature_settings({"PULSE_SCORE_FIELDS": "a.b,a_b"})
