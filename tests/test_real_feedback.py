"""Real feedback as labels (issue 34, item 8): OpenHands' thumbs become labels with their scale, SWE-Gym's
chat-message trajectories are sessions, and an evaluation output's ``instruction`` is the user's request.

Every count below was worked out by reading the fixtures (written from the field notes §8 shapes):

- thumbs/feedback_rows.json, a JSON array of four feedback rows ``{version, feedback, permissions, timestamp,
  trajectory, id}``:
  fb-a (positive, 2025-04-01T11:30:00+02:00, so 09:30 UTC): user message 0, running 1, ``ls`` 2, its observation
  3, finish 4, finished 5: 6 events, one segment (0..5).
  fb-b (negative, 2025-04-02T11:00:00): user message 0, running 1, an agent question 2, awaiting_user_input 3,
  user message 4, running 5, ``pytest -q`` 6, observation 7, finish 8, finished 9: 10 events, two segments
  (0..3, 4..9); its thumb rates segment 1.
  fb-c (``neutral``): user message, finish: one segment, but no thumb: quarantined at staging.
  fb-d (positive): only a system action: no user message, no segment: its thumb rates nothing (quarantined).
- thumbs/feedback_rows.jsonl, one row a line: fb-e (`` Positive `` with blanks and a capital, 2024-11-20
  08:00:00; one segment closed by awaiting_user_input) and fb-f (``polarity: negative``, no timestamp; no state
  events: one segment from the user message to the agent's waiting message).
- thumbs/ratings.csv: fb-b's segment 0 rated 4 stars (line 1).
- swe_gym/trajectories.jsonl: two SWE-Gym rows of one task (``acme__widgets-17``), runs ``run-a`` and ``run-b``.
  run-a: system, user (task as text parts), assistant text + ``execute_bash ls`` (2 events), tool result (exit
  0), ``str_replace_editor view`` (read), result, ``str_replace`` (edit), result, ``finish``: 10 events, 1 user
  message, 1 segment (user message 1 to finish 9), 1 shell command. run-b: system, user, an assistant question
  with no tool call (waits: segment 0 closes), the harness's "please continue" (user: segment 1), ``pytest -q``,
  result (exit 1), assistant text + ``finish`` (2 events): 8 events, 2 user messages, 2 segments, 1 command.
- eval_instruction/output.jsonl: line 0 an old evaluation output whose history is (action, observation) pairs
  with no message (run, its observation, finish, a null observation) and whose task is only in ``instruction``;
  line 1 a newer one whose history logs the task as a user message too.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl
import pytest

from pulse_pipeline import tables
from pulse_pipeline.estimates import sessions as estimate_sessions
from pulse_pipeline.estimates.effects import Settings
from pulse_pipeline.estimates.experiment_effects import experiment_effect_rows
from pulse_pipeline.ingest.load import load_drop

from .helpers import FIXTURES, SAMPLES, assert_reconciled, ingest_paths, rebuild_staging, rows

THUMBS = FIXTURES / "thumbs"
FAST = Settings(n_resamples=200, n_permutations=200)


# --- thumbs become labels ------------------------------------------------------------------------------------------


def test_thumbs_become_labels_one_and_zero_on_the_scale_thumbs(wh):
    ingest_paths(wh, THUMBS)
    assert_reconciled(wh, "thumbs")
    sessions = rows(
        wh, "SELECT session_id, feedback, n_events, n_user_messages, n_segments FROM staging.sessions ORDER BY 1"
    )
    assert sessions == [
        ("fb-a", "positive", 6, 1, 1),
        ("fb-b", "negative", 10, 2, 2),
        ("fb-c", "neutral", 2, 1, 1),
        ("fb-d", "positive", 1, 0, 0),
        ("fb-e", " Positive ", 5, 1, 1),
        ("fb-f", "negative", 4, 1, 1),
    ]
    assert rows(
        wh,
        "SELECT session_id, segment_index, rating, created_at, matched_by, source_file, record_index, scale"
        " FROM staging.segment_ratings ORDER BY session_id, segment_index, scale",
    ) == [
        ("fb-a", 0, 1.0, datetime(2025, 4, 1, 9, 30), "last_segment", "feedback_rows.json", 0, "thumbs"),
        ("fb-b", 0, 4.0, datetime(2025, 4, 2, 10, 0), "segment_index", "ratings.csv", 1, "stars_1_5"),
        ("fb-b", 1, 0.0, datetime(2025, 4, 2, 11, 0), "last_segment", "feedback_rows.json", 1, "thumbs"),
        ("fb-e", 0, 1.0, datetime(2024, 11, 20, 8, 0), "last_segment", "feedback_rows.jsonl", 0, "thumbs"),
        ("fb-f", 0, 0.0, None, "last_segment", "feedback_rows.jsonl", 1, "thumbs"),
    ]
    # fb-b has stars and a thumb: labelled by its stars, (4 - 1) / 4, the thumb left out of the label
    assert rows(wh, "SELECT * FROM staging.session_labels ORDER BY session_id") == [
        ("fb-a", 1, None, 1.0, "thumbs"),
        ("fb-b", 1, 4.0, 0.75, "stars_1_5"),
        ("fb-e", 1, None, 1.0, "thumbs"),
        ("fb-f", 1, None, 0.0, "thumbs"),
    ]
    assert rows(
        wh,
        "SELECT source_file, record_index, record_type, reason FROM raw.quarantine WHERE stage = 'staging' ORDER BY 2",
    ) == [
        (
            "feedback_rows.json",
            2,
            "rating",
            'feedback "neutral" of session fb-c is not a thumb: expected positive or negative',
        ),
        ("feedback_rows.json", 3, "rating", "session fb-d has no work segment for its thumb to rate"),
    ]
    assert rows(wh, "SELECT count(*) FROM raw.quarantine WHERE stage = 'ingest'") == [(0,)]


def test_the_feedback_fixtures_rated_sessions_give_labels(wh):
    """The three feedback fixtures of test_formats (the field notes' 2024 and 2025 shapes): every thumb a label."""
    feedback = FIXTURES / "feedback"
    ingest_paths(wh, feedback / "record_2024.json", feedback / "records.jsonl", feedback / "records_array.json")
    labels = rows(
        wh,
        "SELECT s.session_id, s.feedback, l.label, l.scale, l.label_stars FROM staging.session_labels l"
        " RIGHT JOIN staging.sessions s USING (session_id) ORDER BY 3, 2",
    )
    # four sessions (records.jsonl's line 0 and records_array.json's item 0 are one record, so one session):
    # record_2024.json and records.jsonl's line 1 negative, the 2025 record and records_array.json's item 1 positive
    assert [(feedback, label, scale, stars) for _, feedback, label, scale, stars in labels] == [
        ("negative", 0.0, "thumbs", None),
        ("negative", 0.0, "thumbs", None),
        ("positive", 1.0, "thumbs", None),
        ("positive", 1.0, "thumbs", None),
    ]
    assert "record_2024" in {session_id for session_id, *_ in labels}


def test_star_only_labels_keep_their_values_and_say_stars(wh):
    """Star ratings alone: the label rows are what they were ((mean - 1) / 4), plus the scale."""
    ingest_paths(wh, FIXTURES / "ratings_drop")
    labels = rows(wh, "SELECT n_rated_segments, label_stars, label, scale FROM staging.session_labels")
    assert labels and all(scale == "stars_1_5" for *_, scale in labels)
    assert all(label == pytest.approx((stars - 1) / 4) for _, stars, label, _ in labels)
    assert rows(wh, "SELECT DISTINCT scale FROM staging.segment_ratings") == [("stars_1_5",)]


# --- SWE-Gym's chat-message trajectories ----------------------------------------------------------------------------


def test_swe_gym_rows_are_sessions_with_user_messages_and_segments(wh):
    ingest_paths(wh, FIXTURES / "swe_gym" / "trajectories.jsonl")
    assert_reconciled(wh, "trajectories.jsonl")
    assert wh.count(tables.QUARANTINE) == 0
    assert rows(
        wh,
        "SELECT session_id, source_format, n_events, n_user_messages, n_segments, n_shell_commands,"
        " json_extract(metadata_json, '$.resolved')::BOOLEAN, json_extract_string(metadata_json, '$.run_id'),"
        " json_exists(metadata_json, '$.messages') FROM raw.sessions ORDER BY 1",
    ) == [
        ("acme__widgets-17@run-a", "chat_messages", 10, 1, 1, 1, True, "run-a", False),
        ("acme__widgets-17@run-b", "chat_messages", 8, 2, 2, 1, False, "run-b", False),
    ]
    run_a = rows(
        wh,
        "SELECT event_id, source, kind, name, command, exit_code, cause, segment_index, segment_close FROM raw.events"
        " WHERE session_id = 'acme__widgets-17@run-a' ORDER BY seq",
    )
    assert run_a == [
        ("#0", "agent", "action", "system", None, None, None, None, None),
        ("#1", "user", "action", "message", None, None, None, 0, None),
        ("#2", "agent", "action", "message", None, None, None, 0, None),
        ("toolu_01", "agent", "action", "run", "ls /workspace/acme__widgets__1.0", None, None, 0, None),
        ("#4", "environment", "observation", "run", None, 0, "toolu_01", 0, None),
        ("toolu_02", "agent", "action", "read", None, None, None, 0, None),
        ("#6", "environment", "observation", "read", None, None, "toolu_02", 0, None),
        ("toolu_03", "agent", "action", "edit", None, None, None, 0, None),
        ("#8", "environment", "observation", "edit", None, None, "toolu_03", 0, None),
        ("toolu_04", "agent", "action", "finish", None, None, None, 0, "finish"),
    ]
    # the task's text parts are the user's message
    assert rows(wh, "SELECT text FROM raw.events WHERE session_id = 'acme__widgets-17@run-a' AND seq = 1")[0][0] == (
        "<uploaded_files>\n/workspace/acme__widgets__1.0\n</uploaded_files>\nFix the off-by-one error in"
        " widgets/count.py."
    )
    segments = rows(
        wh,
        "SELECT segment_index, open_event_id, close_event_id, n_user_messages, close_reason FROM"
        " staging.work_segments WHERE session_id = 'acme__widgets-17@run-b' ORDER BY 1",
    )
    assert segments == [(0, "#1", "#2", 1, "awaiting_response"), (1, "#3", "toolu_12", 1, "finish")]
    assert rows(wh, "SELECT exit_code FROM raw.events WHERE cause = 'toolu_11'") == [(1,)]


def test_swe_gym_rows_in_a_json_list(wh):
    ingest_paths(wh, FIXTURES / "swe_gym" / "one_row.json")
    assert wh.count(tables.QUARANTINE) == 0
    assert rows(wh, "SELECT session_id, n_events, n_user_messages, n_segments FROM raw.sessions") == [
        ("acme__widgets-17@run-a", 10, 1, 1)
    ]


# --- an evaluation output's instruction -------------------------------------------------------------------------


def test_evaluation_instruction_is_the_users_request_when_history_lacks_it(wh):
    ingest_paths(wh, FIXTURES / "eval_instruction" / "output.jsonl")
    assert_reconciled(wh, "output.jsonl")
    assert wh.count(tables.QUARANTINE) == 0
    assert rows(
        wh, "SELECT session_id, n_events, n_user_messages, n_segments, n_shell_commands FROM raw.sessions ORDER BY 1"
    ) == [("acme__widgets-10", 5, 1, 1, 0), ("acme__widgets-9", 5, 1, 1, 1)]
    old = rows(
        wh,
        "SELECT event_id, source, name, text, raw_json, segment_index, segment_close FROM raw.events"
        " WHERE session_id = 'acme__widgets-9' ORDER BY seq",
    )
    task = "Fix the failing test in tests/test_count.py."
    assert old[0] == ("instruction", "user", "message", task, '{"instruction":"' + task + '"}', 0, None)
    assert [(e[2], e[5], e[6]) for e in old[1:]] == [
        ("run", 0, None),
        ("run", 0, None),
        ("finish", 0, "finish"),
        ("null", None, None),
    ]
    # the newer output logs the task as a message: not added twice
    assert rows(wh, "SELECT count(*) FROM raw.events WHERE session_id = 'acme__widgets-10' AND source = 'user'") == [
        (1,)
    ]


@pytest.mark.skipif(not (SAMPLES / "openhands_v0").is_dir(), reason=f"no real OpenHands samples at {SAMPLES}")
@pytest.mark.parametrize(
    ("sample", "sessions"), [("resolver_mock_output.jsonl", 2), ("multi_swe_bench_example_output.jsonl", 3)]
)
def test_real_evaluation_outputs_have_the_instruction_as_their_one_user_message(wh, sample, sessions):
    """The real evaluation outputs (OpenHands' resolver mock output and multi-SWE-bench example, MIT) log their
    task as the first message (the resolver's without a source), so the instruction is not added again: each
    session has exactly one user message, whose text begins the ``instruction``, and one work segment. (The
    samples hold no feedback rows and no SWE-Gym rows: those shapes are tested on the fixtures above.)"""
    import json

    path = SAMPLES / "openhands_v0" / sample
    ingest_paths(wh, path)
    assert_reconciled(wh, sample)
    found = rows(wh, "SELECT n_user_messages, n_segments FROM raw.sessions")
    assert found == [(1, 1)] * sessions
    instructions = [json.loads(line)["instruction"] for line in path.read_text().splitlines() if line.strip()]
    texts = rows(wh, "SELECT text FROM raw.events WHERE source = 'user' AND name = 'message' ORDER BY record_key")
    assert len(texts) == sessions
    assert sorted(t[:60] for (t,) in texts) == sorted(i[:60] for i in instructions)


# --- estimates never mix scales -------------------------------------------------------------------------------------


def _mixed(n_stars: int, n_thumbs: int, seed: int = 3) -> pl.DataFrame:
    """One experiment, arms t and c; ``n_stars`` star-rated and ``n_thumbs`` thumbs-rated sessions per arm, and as
    many unrated. Star labels: c 0.5, t 0.75 (exactly, every session); thumbs: c all down (0), t all up (1)."""
    rng = np.random.default_rng(seed)
    parts = []
    for arm, star, thumb in (("t", 0.75, 1.0), ("c", 0.5, 0.0)):
        scales = ["stars_1_5"] * n_stars + ["thumbs"] * n_thumbs + [None] * (n_stars + n_thumbs)
        labels = [star] * n_stars + [thumb] * n_thumbs + [None] * (n_stars + n_thumbs)
        n = len(scales)
        parts.append(
            pl.DataFrame(
                {
                    "session_id": [f"{arm}{i}" for i in range(n)],
                    "experiment": "e",
                    "variant": arm,
                    "user_id": [f"{arm}u{i}" for i in range(n)],
                    "labeled": [x is not None for x in labels],
                    "label": labels,
                    "prediction": rng.uniform(0.4, 0.8, n),
                    "ask_probability": [None] * n,
                    "label_scale": scales,
                    "feature": rng.normal(size=n),
                },
                schema_overrides={"label": pl.Float64, "ask_probability": pl.Float64, "label_scale": pl.Utf8},
            )
        )
    return pl.concat(parts)


def test_an_experiment_is_estimated_on_the_scale_most_of_its_ratings_carry():
    frame = estimate_sessions.one_scale_per_experiment(_mixed(n_stars=12, n_thumbs=3))
    rows_ = {r.method: r for r in experiment_effect_rows(frame, {"e": "c"}, FAST)}
    welch = rows_["naive_welch"]
    # stars only: 12 rated per arm, 0.75 - 0.5; the 3 thumbs per arm count as unrated (15 + 3 = 18 unrated)
    assert (welch.scale, welch.n_labeled_treatment, welch.n_labeled_control) == ("stars_1_5", 12, 12)
    assert (welch.N_unlabeled_treatment, welch.N_unlabeled_control) == (18, 18)
    assert welch.effect == pytest.approx(0.25)
    assert welch.effect_stars == pytest.approx(1.0)
    assert "6 sessions rated on thumbs left out" in welch.note
    assert all(r.scale == "stars_1_5" for r in rows_.values())


def test_a_thumbs_experiment_is_estimated_on_thumbs_with_no_stars():
    frame = estimate_sessions.one_scale_per_experiment(_mixed(n_stars=2, n_thumbs=10))
    welch = {r.method: r for r in experiment_effect_rows(frame, {"e": "c"}, FAST)}["naive_welch"]
    # thumbs only: every t session up, every c session down: the share of thumbs up differs by exactly 1
    assert (welch.scale, welch.n_labeled_treatment, welch.n_labeled_control) == ("thumbs", 10, 10)
    assert welch.effect == pytest.approx(1.0)
    assert (welch.effect_stars, welch.ci_low_stars, welch.ci_high_stars) == (None, None, None)
    assert "4 sessions rated on stars_1_5 left out" in welch.note


def test_a_tie_goes_to_stars_and_one_scale_is_kept_per_experiment():
    frame = estimate_sessions.one_scale_per_experiment(_mixed(n_stars=5, n_thumbs=5))
    assert frame["scale"].unique().to_list() == ["stars_1_5"]
    kept = frame.filter(pl.col("labeled"))
    assert kept["label_scale"].unique().to_list() == ["stars_1_5"] and kept.height == 10


def test_the_warehouse_frame_keeps_one_scale_per_experiment(wh):
    """Through the warehouse: thumbs-rated and star-rated sessions assigned to one experiment; the frame every
    estimate reads keeps the majority's scale (thumbs: fb-a, fb-e, fb-f) and counts fb-b's stars as unrated."""
    drop = THUMBS
    load_drop(wh, drop.name, drop)
    wh.con.execute(
        "INSERT INTO raw.assignments VALUES"
        " ('thumbs', 'x.csv', 1, 'fb-a', 'e', 't', NULL), ('thumbs', 'x.csv', 2, 'fb-b', 'e', 'c', NULL),"
        " ('thumbs', 'x.csv', 3, 'fb-e', 'e', 'c', NULL), ('thumbs', 'x.csv', 4, 'fb-f', 'e', 't', NULL)"
    )
    rebuild_staging(wh)
    frame = estimate_sessions.assigned_sessions(wh, with_features=False)
    got = frame.select("session_id", "labeled", "label", "label_scale", "scale").rows()
    assert got == [
        ("fb-a", True, 1.0, "thumbs", "thumbs"),
        ("fb-b", False, None, "stars_1_5", "thumbs"),
        ("fb-e", True, 1.0, "thumbs", "thumbs"),
        ("fb-f", True, 0.0, "thumbs", "thumbs"),
    ]


def test_a_warehouse_of_an_older_pulse_gets_the_scale_columns_and_its_labels_back(tmp_path):
    """staging.segment_ratings and staging.session_labels are rebuilt whole from the raw rows every run, so an older
    warehouse's (without ``scale``) are recreated in the new shape, and the next staging run refills them; the
    raw tables, which hold what was read, keep their shape (thumbs come from raw.sessions.feedback)."""
    import duckdb

    from pulse_pipeline.warehouse import Warehouse

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    wh = Warehouse(con)
    load_drop(wh, "ratings_drop", FIXTURES / "ratings_drop")
    rebuild_staging(wh)
    before = rows(wh, "SELECT session_id, n_rated_segments, label_stars, label FROM staging.session_labels ORDER BY 1")
    # the older shapes: no scale column
    con.execute("ALTER TABLE staging.segment_ratings DROP COLUMN scale")
    con.execute("ALTER TABLE staging.session_labels DROP COLUMN scale")
    con.close()
    con = duckdb.connect(str(path))
    wh = Warehouse(con)  # creates what is missing and recreates what a newer PULSE reshaped
    assert [r[0] for r in con.execute("DESCRIBE staging.session_labels").fetchall()] == (
        tables.SESSION_LABELS.column_names
    )
    assert [r[0] for r in con.execute("DESCRIBE staging.segment_ratings").fetchall()] == (
        tables.SEGMENT_RATINGS.column_names
    )
    rebuild_staging(wh)
    assert rows(wh, "SELECT * FROM staging.session_labels ORDER BY 1") == [(*r, "stars_1_5") for r in before]
    con.close()


def test_the_ask_policy_learns_its_error_model_from_star_labels_only(tmp_path):
    """The policy's error model is |label - prediction| of the model, which predicts stars: the same 60 rated
    sessions fit it on stars, and fit nothing when their labels are thumbs."""
    import duckdb

    from pulse_pipeline.estimates.ask_policy import policy_from_warehouse

    from .test_ask_policy import _warehouse_with_sessions

    path = tmp_path / "w.duckdb"
    _warehouse_with_sessions(path)
    with duckdb.connect(str(path), read_only=True) as con:
        policy, _ = policy_from_warehouse(con)
    assert policy.fitted_on_ratings == 60
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE staging.session_labels SET scale = 'thumbs', label = round(label)")
    with duckdb.connect(str(path), read_only=True) as con:
        policy, _ = policy_from_warehouse(con)
    assert policy.fitted_on_ratings == 0
