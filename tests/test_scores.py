"""Trace tools' scores (ingest/scores.py): which become ratings on which scale, which are judges' scores kept as
features, which are quarantined and why; the rows they write reconcile, and staging puts a rating on the segment
its trace opens (issue 39, item 1 "scores").

The vocabulary (``dataType`` NUMERIC | BOOLEAN | CATEGORICAL | TEXT | CORRECTION, ``source`` API | ANNOTATION |
EVAL, BOOLEAN stored as 1/0) is Langfuse's: langfuse/langfuse ``fern/apis/server/definition/commons.yml``
(``ScoreDataType``, ``ScoreSource``; commit named in ``tests/test_langfuse.py``)."""

from __future__ import annotations

import duckdb
import orjson
import pytest

from pulse_pipeline import tables
from pulse_pipeline.contract import ensure_tables
from pulse_pipeline.ingest.batch import Batch
from pulse_pipeline.ingest.drop import drop_row
from pulse_pipeline.ingest.load import load_drop, reconcile_drop
from pulse_pipeline.ingest.scores import NotARating, Score, ScoreRules, add_score, score_rules
from pulse_pipeline.label_scales import STARS, THUMBS
from pulse_pipeline.settings import SettingsError
from pulse_pipeline.warehouse import Warehouse

from .helpers import rebuild_staging, rows


def score(name="user-feedback", value=None, string_value=None, data_type="NUMERIC", source="API", **kw) -> Score:
    fields = dict(session_id=None, event_id="trace-1", score_id="s1", comment=None, created_at=None)
    fields.update(kw)
    return Score(name, value, string_value, data_type, source, **fields)


DEFAULT = ScoreRules()


def test_kind_eval_scores_are_never_ratings_whatever_their_name():
    assert DEFAULT.kind(score("user-feedback", 5.0, source="EVAL")) == "eval"
    assert DEFAULT.kind(score("hallucination", 0.1, source="EVAL")) == "eval"
    assert DEFAULT.kind(score("user-feedback", 5.0, source="API")) == "rating"
    assert DEFAULT.kind(score("User-Feedback", 5.0, source="ANNOTATION")) == "rating"  # names: case ignored
    assert DEFAULT.kind(score("correctness", 1.0, source="ANNOTATION")) == "ignored"  # a reviewer's, not the user's
    assert DEFAULT.kind(score("rating", 4.0, source="SDK")) == "ignored"


def test_numeric_ratings_map_their_declared_range_onto_stars():
    assert DEFAULT.rate(score(value=4.0)).rating == 4.0  # 1-5 when undeclared: as it is
    rules = score_rules({"PULSE_SCORE_RANGES": "rating=1:10, feedback=0:100"})
    ten = rules.rate(score("rating", 7.0))
    assert (ten.rating, ten.scale, ten.range) == (pytest.approx(1 + 4 * 6 / 9), STARS, (1.0, 10.0))
    assert rules.rate(score("feedback", 25.0)).rating == pytest.approx(2.0)  # 1 + 4 * 25/100
    assert rules.rate(score("RATING", 10.0)).rating == 5.0
    with pytest.raises(NotARating, match=r"off its range 1-5 .*user-feedback=thumbs"):
        DEFAULT.rate(score(value=0.0))  # a thumbs-down sent as 0: not clipped to 1 star
    with pytest.raises(NotARating, match="off its range 1-10"):
        rules.rate(score("rating", 11.0))


def test_boolean_ratings_are_thumbs_with_their_scale():
    up = DEFAULT.rate(score(value=1.0, data_type="BOOLEAN"))
    assert (up.rating, up.scale) == (1.0, THUMBS)
    assert DEFAULT.rate(score(string_value="False", data_type="BOOLEAN")).rating == 0.0
    with pytest.raises(NotARating, match="expected 1 or 0"):
        DEFAULT.rate(score(value=0.5, data_type="BOOLEAN"))
    # a NUMERIC 0/1 under a name declared thumbs (``thumbs`` by default) is a thumb too
    assert DEFAULT.rate(score("thumbs", 0.0)).scale == THUMBS
    with pytest.raises(NotARating, match="no thumb"):
        DEFAULT.rate(score("thumbs", 3.0))


def test_categorical_ratings_need_a_declared_map():
    with pytest.raises(NotARating, match="no declared map.*PULSE_SCORE_CATEGORIES"):
        DEFAULT.rate(score("feedback", 0.0, "good", "CATEGORICAL"))
    rules = score_rules({"PULSE_SCORE_CATEGORIES": '{"feedback": {"good": 5, "ok": 3, "bad": 1}}'})
    assert rules.rate(score("feedback", 0.0, " Good ", "CATEGORICAL")).rating == 5.0
    with pytest.raises(NotARating, match="label 'meh'"):
        rules.rate(score("feedback", 1.0, "meh", "CATEGORICAL"))
    thumbs = score_rules(
        {"PULSE_SCORE_CATEGORIES": '{"feedback": {"up": 1, "down": 0}}', "PULSE_SCORE_RANGES": "feedback=thumbs"}
    )
    down = thumbs.rate(score("feedback", 1.0, "down", "CATEGORICAL"))
    assert (down.rating, down.scale) == (0.0, THUMBS)
    with pytest.raises(NotARating, match="words, not a rating"):
        DEFAULT.rate(score(string_value="great job", data_type="TEXT"))


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"PULSE_SCORE_RANGES": "rating=5:1"}, "LOW < HIGH"),
        ({"PULSE_SCORE_RANGES": "rating"}, "name=LOW:HIGH"),
        ({"PULSE_SCORE_CATEGORIES": "{not json"}, "not JSON"),
        ({"PULSE_SCORE_CATEGORIES": '{"feedback": {"good": "five"}}'}, "label: number"),
    ],
)
def test_bad_score_settings_say_what_they_expect(environ, message):
    with pytest.raises(SettingsError, match=message):
        score_rules(environ)


def test_rating_names_come_from_the_setting():
    rules = score_rules({"PULSE_RATING_SCORES": "stars, csat"})
    assert rules.kind(score("CSAT", 4.0)) == "rating"
    assert rules.kind(score("user-feedback", 4.0)) == "ignored"


def _scored_batch(drop_id: str, scores: list[Score], rules: ScoreRules = DEFAULT) -> Batch:
    batch = Batch(drop_id)
    for i, s in enumerate(scores):
        add_score(batch, "scores.jsonl", i, s, rules, orjson.dumps({"name": s.name}).decode())
    return batch


def test_each_score_is_one_row_and_the_batch_reconciles():
    batch = _scored_batch(
        "d",
        [
            score(value=4.0, comment="nice", created_at="2025-06-01T10:00:00Z"),  # rating, stars
            score(value=0.0, data_type="BOOLEAN", event_id="obs-9"),  # rating, thumb on an observation
            score("hallucination", 0.1, source="EVAL"),  # eval
            score("correctness", 1.0, source="ANNOTATION"),  # not declared a rating: quarantined
            score(value=9.0),  # off its range: quarantined
            score(value=4.0, event_id=None),  # names nothing: quarantined
            score(value=4.0, event_id=True),  # an id that is no id: quarantined
        ],
    )
    assert batch.read["score"] == 7
    ratings = batch.columns[tables.RATINGS.qualified]
    assert ratings["rating"] == [4.0, 0.0]
    assert ratings["scale"] == [STARS, THUMBS]
    assert ratings["event_id"] == ["trace-1", "obs-9"]
    assert ratings["reason"] == ["nice", None]
    assert ratings["origin"] == ["score", "score"]
    assert orjson.loads(ratings["score_json"][0]) == {
        "name": "user-feedback",
        "value": 4.0,
        "string_value": None,
        "data_type": "NUMERIC",
        "source": "API",
        "range": [1.0, 5.0],
    }
    evals = batch.columns[tables.EVAL_SCORES.qualified]
    assert (evals["name"], evals["value"], evals["source"]) == (["hallucination"], [0.1], ["EVAL"])
    q = batch.columns[tables.QUARANTINE.qualified]
    assert q["record_type"] == ["score"] * 4
    assert q["record_index"] == [3, 4, 5, 6]
    assert "not declared a users' rating" in q["reason"][0]
    assert "off its range" in q["reason"][1]
    assert "names no trace, observation or session" in q["reason"][2]
    assert "is a boolean" in q["reason"][3]


def _load_batch(wh: Warehouse, batch: Batch, mtime: str) -> None:
    """Write a batch as a drop of its own, as ``load.load_drop`` writes a drop's batches."""
    frozen = batch.freeze()
    for t in tables.RAW_TABLES:
        if frozen.count(t):
            wh.insert(t, frozen.tables[t.qualified])
    from pulse_pipeline.ingest.drop import DropTally

    tally = DropTally()
    tally.add(frozen)
    state = {"path": "scores", "fingerprint": batch.drop_id, "n_files": 1, "bytes": 1, "mtime": mtime}
    row = Batch(batch.drop_id)
    row.add(tables.DROPS, drop_row(batch.drop_id, state, tally))
    wh.insert(tables.DROPS, row.arrow(tables.DROPS))


def _two_trace_session(tmp_path):
    """A session of two work segments whose opening user messages have the trace ids as event ids (the
    contract's rule for Langfuse and OTel), delivered as a canonical session."""
    events = []
    for trace in ("trace-1", "trace-2"):
        events += [
            {"id": trace, "source": "user", "type": "message", "text": f"do {trace}"},
            {"id": f"{trace}-run", "source": "environment", "type": "state", "state": "running"},
            {"id": f"{trace}-reply", "source": "agent", "type": "message", "text": "done", "wait_for_response": True},
            {"id": f"{trace}-wait", "source": "environment", "type": "state", "state": "awaiting_user_input"},
        ]
    path = tmp_path / "sessions"
    path.mkdir()
    (path / "s.jsonl").write_bytes(orjson.dumps({"session_id": "sess-A", "events": events}) + b"\n")
    return path


def test_a_score_in_a_later_drop_rates_the_segment_its_trace_opens(wh, tmp_path):
    load_drop(wh, "sessions", _two_trace_session(tmp_path))
    later = _scored_batch(
        "scores",
        [
            score(value=2.0, event_id="trace-2"),  # stars on the second segment, no session named
            score(value=1.0, data_type="BOOLEAN", event_id="trace-1"),  # a thumb up on the first
            score("hallucination", 0.3, source="EVAL", event_id="trace-1"),
            score(value=5.0, event_id="trace-unknown"),  # its trace has not arrived
        ],
    )
    _load_batch(wh, later, "2100-01-01 00:00:00")
    assert reconcile_drop(wh, "scores")[0]
    rebuild_staging(wh)
    assert rows(wh, "SELECT session_id, segment_index, rating, scale, matched_by FROM staging.segment_ratings") == [
        ("sess-A", 0, 1.0, THUMBS, "event_id"),
        ("sess-A", 1, 2.0, STARS, "event_id"),
    ]
    # one label per session on one scale: the stars win, (2 - 1) / 4
    assert rows(wh, "SELECT session_id, label, scale FROM staging.session_labels") == [("sess-A", 0.25, STARS)]
    (problem,) = rows(wh, "SELECT reason FROM raw.quarantine WHERE stage = 'staging'")
    assert problem[0].startswith("rating names event trace-unknown and no session")
    assert rows(wh, "SELECT count(*) FROM raw.eval_scores") == [(1,)]


def test_an_older_raw_ratings_table_gains_the_scale_column_and_its_rows_stay_stars():
    con = duckdb.connect()
    old = tables.RATINGS.columns[:-2]
    con.execute("CREATE SCHEMA raw")
    con.execute(f"CREATE TABLE raw.ratings ({', '.join(f'{c} {t}' for c, t in old)})")
    con.execute("INSERT INTO raw.ratings (session_id, rating) VALUES ('s', 4)")
    ensure_tables(con, [tables.RATINGS])
    assert con.execute("SELECT session_id, rating, scale, score_json FROM raw.ratings").fetchall() == [
        ("s", 4.0, None, None)
    ]
    con.close()
