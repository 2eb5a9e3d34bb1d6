"""``features.event_features`` against values worked out by hand and against the synthetic generator's truth.

Fixtures (``fixtures/event_features/``), counted by reading them:

- ``canonical.jsonl`` ``ef-1``: user messages 1, 20; segments close at 19 (awaiting_user_input) and 33 (finished).
  ``run`` actions 3, 5, 7, 9, 22, 24, 25, 28, 30 (9). Git: commit at 5 (``git -C repo commit``); push at 11
  (``!git push`` in a cell) and 30; pull at 11 (``subprocess.run(['git', 'pull'])``) and 28
  (``GIT_TRACE=1 git pull``); rebase at 28; reset at 30 (``sudo git reset``); 7 is ``echo "git push"`` and 9 is
  ``git log --grep=push``: neither counts. Failed observations 4 (1), 27 (2), 29 (128). Tests: 3 (``pytest``,
  its observation 4 by cause: failed), 22 (``npm test``, no cause: the next run observation 23, exit 0), 24
  (``python -m pytest``; the next observation 26 answers 25, its own by cause is 27, exit 2: failed). Edits 13
  (edit), 14 (write); error 15; condensations 16, 17; finish 32 in the last segment; 12:00:00 to 12:20:30;
  llm_metrics at 3 (0.5, 1000, 50) and 30 (0.75, 1500, 80).
- ``canonical.jsonl`` ``ef-2``: user messages a, f; the finish d closes segment 0, segment 1 ends waiting for the
  user: the last segment has no finish. One run (``cd app && pytest``) with no cause; the next run observation
  is h (exit 1). No timestamps, no metrics.
- ``v0_eval_output.jsonl`` ``v0-ef`` (no state events): runs 1 (``git add -A && git commit``) and 5 (``pytest -q``,
  exit 1 at 6); cell 3 runs ``subprocess.check_call(['git', 'push', ...])`` and ``!git log``; edit 7; error 8;
  finish 9; 10:00:00 to 10:02:00; llm_metrics max (0.0625, 5000, 200) at 9.
- ``v1_conversation.jsonl``: a user MessageEvent; ``git push origin main`` (exit 0); ``go test ./...`` (exit 1);
  two stats events, the last with default (0.25, 3000, 300) and condenser (0.05, 500, 20); FinishAction; 100 s.
- ``v1_critic.jsonl`` (no id in the events: the session is named ``v1_critic`` by the file): user message c1,
  running c2, ``pytest -q`` at c3 (critic 0.2; its observation c4 exits 1) and c5 (critic 0.9; c6 exits 0), agent
  MessageEvent c7 (critic 0.6), ThinkAction c8 (critic 1.7: not a probability, not counted), FinishAction c9
  (``critic_result: null``), finished c10; 00:00:00 to 00:01:40. No stats.
- ``llm_usage.jsonl``: canonical sessions with no usage in their events but ``llm_usage`` in their metadata:
  usage-top (0.42 USD, 12000, 900 at the top level), usage-nested (no cost, 700, 30 under ``metadata``), and
  usage-both, whose agent message carries ``llm_metrics`` (0.1 USD, 100 prompt tokens, no completion tokens)
  next to metadata (9.9, 9999, 55).
"""

from __future__ import annotations

import json

import duckdb
import polars as pl
import pytest

from pulse_pipeline import tables
from pulse_pipeline.features.event_features import build_event_features, parse_command
from pulse_pipeline.features.sentiment import COLUMNS as SENTIMENT
from pulse_pipeline.features.user_text import build_user_text
from pulse_pipeline.synth import write_corpus
from pulse_pipeline.warehouse import Warehouse

from .helpers import FIXTURES, SAMPLES, ingest_paths, needs_samples

EF = FIXTURES / "event_features"
NULLABLE = (
    "duration_seconds",
    "llm_cost_usd",
    "llm_prompt_tokens",
    "llm_completion_tokens",
    "critic_score_last",
    "critic_score_mean",
    "critic_score_min",
    "llm_total_tokens",
)
COUNTS = [
    c for c in tables.EVENT_FEATURES.column_names if c != "session_id" and c not in NULLABLE and c not in SENTIMENT
]


def features(wh: Warehouse) -> dict[str, dict]:
    build_user_text(wh)
    n = build_event_features(wh).rows
    rows = wh.frame("SELECT * FROM features.event_features ORDER BY session_id").to_dicts()
    assert n == len(rows) == wh.count(tables.STAGING_SESSIONS)
    return {r["session_id"]: r for r in rows}


def expect(row: dict, **values) -> None:
    """Every column of the row but the sentiment ones (``test_sentiment.py``): the given values, else 0 for counts
    and NULL for the rest; doubles approximately."""
    expected = dict.fromkeys(COUNTS, 0) | dict.fromkeys(NULLABLE) | values
    if "llm_total_tokens" not in values and None not in (
        expected["llm_prompt_tokens"],
        expected["llm_completion_tokens"],
    ):  # prompt + completion, NULL unless both are known
        expected["llm_total_tokens"] = expected["llm_prompt_tokens"] + expected["llm_completion_tokens"]
    actual = {k: v for k, v in row.items() if k != "session_id" and k not in SENTIMENT}
    for c in ("duration_seconds", "llm_cost_usd", "critic_score_last", "critic_score_mean", "critic_score_min"):
        if expected[c] is not None:
            assert actual[c] == pytest.approx(expected[c]), c
            actual[c] = expected[c]
    assert actual == expected


def test_columns_are_the_contract(wh):
    ingest_paths(wh, EF / "canonical.jsonl")
    build_user_text(wh)
    build_event_features(wh)
    assert wh.frame("SELECT * FROM features.event_features").columns == tables.EVENT_FEATURES.column_names


def test_canonical_sessions(wh):
    ingest_paths(wh, EF / "canonical.jsonl")
    rows = features(wh)
    expect(
        rows["ef-1"],
        user_message_count=2,
        n_segments=2,
        git_commit_count=1,
        git_commit=1,
        git_push_count=2,
        git_push=1,
        git_pull_count=2,
        git_pull=1,
        git_reset_count=1,
        git_reset=1,
        git_rebase_count=1,
        git_rebase=1,
        shell_commands=9,
        failed_commands=3,
        test_runs=3,
        test_failures=2,
        file_edits=2,
        error_observations=1,
        condensations=2,
        last_segment_finished=1,
        duration_seconds=1230.0,
        llm_cost_usd=0.75,
        llm_prompt_tokens=1500,
        llm_completion_tokens=80,
    )
    expect(
        rows["ef-2"],
        user_message_count=2,
        n_segments=2,
        shell_commands=1,
        failed_commands=1,
        test_runs=1,
        test_failures=1,
        last_segment_finished=0,
    )


def test_v0_llm_metrics_stream(wh):
    ingest_paths(wh, EF / "v0_eval_output.jsonl")
    expect(
        features(wh)["v0-ef"],
        user_message_count=1,
        n_segments=1,
        git_commit_count=1,
        git_commit=1,
        git_push_count=1,
        git_push=1,
        shell_commands=2,
        failed_commands=1,
        test_runs=1,
        test_failures=1,
        file_edits=1,
        error_observations=1,
        last_segment_finished=1,
        duration_seconds=120.0,
        llm_cost_usd=0.0625,
        llm_prompt_tokens=5000,
        llm_completion_tokens=200,
    )


def test_v1_stats_stream(wh):
    ingest_paths(wh, EF / "v1_conversation.jsonl")
    (row,) = features(wh).values()
    expect(
        row,
        user_message_count=1,
        n_segments=1,
        git_push_count=1,
        git_push=1,
        shell_commands=2,
        failed_commands=1,
        test_runs=1,
        test_failures=1,
        last_segment_finished=1,
        duration_seconds=100.0,
        llm_cost_usd=0.30,
        llm_prompt_tokens=3500,
        llm_completion_tokens=320,
    )


def test_v1_critic_scores(wh):
    ingest_paths(wh, EF / "v1_critic.jsonl")
    rows = features(wh)
    assert list(rows) == ["v1_critic"]
    expect(
        rows["v1_critic"],
        user_message_count=1,
        n_segments=1,
        shell_commands=2,
        failed_commands=1,
        test_runs=2,
        test_failures=1,
        last_segment_finished=1,
        duration_seconds=100.0,
        critic_score_last=0.6,  # c7: c8's 1.7 is later but no probability
        critic_score_mean=(0.2 + 0.9 + 0.6) / 3,
        critic_score_min=0.2,
        critic_scored_events=3,
    )
    # the whole critic result is kept with its event
    (raw,) = wh.con.execute("SELECT raw_json FROM raw.events WHERE event_id = 'c7'").fetchone()
    assert json.loads(raw)["critic_result"]["metadata"]["categorized_features"]["sentiment"] == {
        "predicted": "Positive"
    }


def test_llm_usage_from_session_metadata(wh):
    """The events' own usage wins column by column; the metadata fills what they leave empty."""
    ingest_paths(wh, EF / "llm_usage.jsonl")
    rows = features(wh)
    usage = {s: (r["llm_cost_usd"], r["llm_prompt_tokens"], r["llm_completion_tokens"]) for s, r in rows.items()}
    assert usage == {
        "usage-top": (0.42, 12000, 900),
        "usage-nested": (None, 700, 30),
        "usage-both": (0.1, 100, 55),
    }
    expect(
        rows["usage-top"],
        user_message_count=1,
        n_segments=1,
        llm_cost_usd=0.42,
        llm_prompt_tokens=12000,
        llm_completion_tokens=900,
    )


def test_total_tokens_are_null_unless_both_parts_are_known(wh):
    ingest_paths(wh, EF / "llm_usage.jsonl")
    rows = features(wh)
    assert {s: r["llm_total_tokens"] for s, r in rows.items()} == {
        "usage-top": 12900,
        "usage-nested": 730,
        "usage-both": 155,  # 100 prompt tokens from the event, 55 completion tokens from the metadata
    }


def test_user_stops_count_the_user_stopping_or_pausing_the_agent(wh, tmp_path):
    """Sessions made by hand: the user stops twice and pauses once (3); the agent's own stop and an environment
    pause are not the user's (0)."""
    records = [
        {"session_id": "stops", "events": [
            {"id": "1", "source": "user", "type": "message", "text": "refactor the parser"},
            {"id": "2", "source": "agent", "type": "run", "command": "ls"},
            {"id": "3", "source": "user", "type": "stop"},
            {"id": "4", "source": "user", "type": "message", "text": "no, only the lexer"},
            {"id": "5", "source": "user", "type": "pause"},
            {"id": "6", "source": "user", "type": "stop"},
        ]},
        {"session_id": "no-stops", "events": [
            {"id": "1", "source": "user", "type": "message", "text": "refactor the parser"},
            {"id": "2", "source": "agent", "type": "stop"},
            {"id": "3", "source": "environment", "type": "pause"},
        ]},
    ]  # fmt: skip
    path = tmp_path / "stops.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    ingest_paths(wh, path)
    rows = features(wh)
    assert {s: r["user_stops"] for s, r in rows.items()} == {"stops": 3, "no-stops": 0}
    # OpenHands V0's change_agent_state (a state event) counts when the user sends it to paused or stopped
    from pulse_pipeline.features.event_features import USER_STOP

    hand = duckdb.connect()
    hand.execute("CREATE TABLE ev (source VARCHAR, kind VARCHAR, name VARCHAR, agent_state VARCHAR)")
    hand.execute(
        "INSERT INTO ev VALUES ('user', 'state', 'change_agent_state', 'paused'),"
        " ('user', 'state', 'change_agent_state', 'stopped'), ('user', 'state', 'change_agent_state', 'running'),"
        " ('agent', 'state', 'change_agent_state', 'stopped'), ('user', 'state', 'agent_state_changed', 'paused')"
    )
    assert hand.execute(f"SELECT count(*) FILTER (WHERE {USER_STOP}) FROM ev").fetchone()[0] == 2


def test_llm_usage_of_an_sdk_conversation_comes_from_its_base_state(wh, tmp_path):
    """An SDK conversation folder whose events carry no stats: base_state.json's stats (agent 0.3 USD, 4000 and 250
    tokens; condenser 0.05, 600 and 40) are summed into the session's llm_usage."""
    conv = tmp_path / "convs" / "c0ffee"
    (conv / "events").mkdir(parents=True)
    metrics = {
        "agent": {
            "accumulated_cost": 0.3,
            "accumulated_token_usage": {"prompt_tokens": 4000, "completion_tokens": 250},
        },
        "condenser": {
            "accumulated_cost": 0.05,
            "accumulated_token_usage": {"prompt_tokens": 600, "completion_tokens": 40},
        },
    }
    state = {
        "id": "c0ffee-1",
        "agent": {"kind": "Agent", "llm": {"model": "m-1", "api_key": "**********"}},
        "stats": {"usage_to_metrics": metrics},
    }
    (conv / "base_state.json").write_text(json.dumps(state))
    user = {
        "id": "u1",
        "timestamp": "2026-03-01T00:00:00",
        "source": "user",
        "kind": "MessageEvent",
        "llm_message": {"role": "user", "content": [{"type": "text", "text": "hello"}]},
    }
    (conv / "events" / "event-00000-a1b2c3d4-0001.json").write_text(json.dumps(user))
    ingest_paths(wh, tmp_path / "convs")
    rows = features(wh)
    assert list(rows) == ["c0ffee-1"]
    expect(
        rows["c0ffee-1"],
        user_message_count=1,
        n_segments=1,
        duration_seconds=0.0,
        llm_cost_usd=0.35,
        llm_prompt_tokens=4600,
        llm_completion_tokens=290,
    )


def test_only_the_winning_record_counts_and_rebuilds_replace(wh, tmp_path):
    """A later drop re-delivers ef-2 with one command: its features follow that record, and a rebuild does not
    add rows."""
    later = tmp_path / "z-later"
    later.mkdir()
    (later / "s.jsonl").write_text(
        '{"session_id": "ef-2", "events": [{"id": "1", "source": "user", "type": "message", "text": "hi"},'
        ' {"id": "2", "source": "agent", "type": "run", "command": "git push"}]}\n'
    )
    ingest_paths(wh, EF / "canonical.jsonl", later)
    build_user_text(wh)
    build_event_features(wh)
    rows = features(wh)
    assert len(rows) == 2
    assert (rows["ef-2"]["shell_commands"], rows["ef-2"]["git_push_count"], rows["ef-2"]["test_runs"]) == (1, 1, 0)
    assert rows["ef-1"]["shell_commands"] == 9


def test_empty_warehouse(wh):
    assert build_event_features(wh).rows == 0


@pytest.mark.parametrize(
    ("body", "is_code", "ops", "is_test"),
    [
        ("git add -A && git commit -m x && git push", False, {"commit": 1, "push": 1}, False),
        ("git push; git push", False, {"push": 2}, False),
        ("pytest -q", False, {}, True),
        ("!pytest -q\n!git pull", True, {"pull": 1}, False),  # test runs are counted on run actions only
    ],
)
def test_parse_command(body, is_code, ops, is_test):
    counts, test = parse_command(body, is_code)
    assert {k: v for k, v in counts.items() if v} == ops
    assert test is is_test


# --------------------------------------------------------------------------------------------------------
# real samples

V0 = SAMPLES / "openhands_v0"
V1 = SAMPLES / "openhands_v1"


@needs_samples
def test_multi_swe_bench_sample(wh):
    """Counted by reading the file: run actions 13, 12, 24; run observations with a non-zero exit code:
    ponyc-4595 ids 36 (127), 38 (2), 40 (2), 42 (127), 46 (127); ponyc-4593 ids 8 (2), 20 (1); ponyc-4588 ids 16,
    89, 99, 101 (1), 67, 69, 71, 85, 87, 97 (2), 91, 103 (100). Edits 2, 11, 16; error observations 0, 1, 1; no
    test or git command (``make`` and ``./test`` are neither). llm_metrics cost is 0.0 throughout; token maxima
    are those of each line's ``metrics``. The third line has no finish."""
    ingest_paths(wh, V0 / "multi_swe_bench_example_output.jsonl")
    rows = features(wh)
    expected = {
        "ponylang__ponyc-4595": (13, 5, 2, 0, 1, 565158, 2558, 88.24115),
        "ponylang__ponyc-4593": (12, 2, 11, 1, 1, 410169, 5156, 114.480929),
        "ponylang__ponyc-4588": (24, 12, 16, 1, 0, 938015, 5627, 449.886828),
    }
    assert set(rows) == set(expected)
    for sid, (shell, failed, edits, errors, finished, prompt, completion, seconds) in expected.items():
        expect(
            rows[sid],
            user_message_count=1,
            n_segments=1,
            shell_commands=shell,
            failed_commands=failed,
            file_edits=edits,
            error_observations=errors,
            last_segment_finished=finished,
            duration_seconds=seconds,
            llm_cost_usd=0.0,
            llm_prompt_tokens=prompt,
            llm_completion_tokens=completion,
        )


@needs_samples
def test_gui_mode_sample(wh):
    """trajs_basic_gui_mode.json: runs 7 (mkdir, exit 0) and 13 (``python3 -m http.server``, exit -1: the
    command was still running); edits 9, 11; the segment ends awaiting the user, no finish; no llm_metrics."""
    ingest_paths(wh, V0 / "trajs_basic_gui_mode.json")
    (row,) = features(wh).values()
    expect(
        row,
        user_message_count=1,
        n_segments=1,
        shell_commands=2,
        failed_commands=1,
        file_edits=2,
        duration_seconds=81.910037,
    )


@needs_samples
def test_v1_sample_cost_from_last_stats_event(wh):
    """sdk_goal_fixture_events.jsonl: the last stats event (bc1cee85) has default 0.0 / 107458 / 1347 and
    condenser 0 / 0 / 0. Two terminal actions; the three observations exit with -1, -1 (metadata.exit_code: the
    commands were refused) and 1, all non-zero."""
    ingest_paths(wh, V1 / "sdk_goal_fixture_events.jsonl")
    (row,) = features(wh).values()
    expect(
        row,
        n_segments=1,
        shell_commands=2,
        failed_commands=3,
        duration_seconds=42.365548,
        llm_cost_usd=0.0,
        llm_prompt_tokens=107458,
        llm_completion_tokens=1347,
    )


# --------------------------------------------------------------------------------------------------------
# end to end against the generator's truth

TRUTH = {
    "git_commit": "git_commit_count",
    "git_push": "git_push_count",
    "git_pull": "git_pull_count",
    "git_reset": "git_reset_count",
    "git_rebase": "git_rebase_count",
    "test_runs": "test_runs",
    "test_failures": "test_failures",
    "failed_commands": "failed_commands",
    "file_edits": "file_edits",
    "user_messages": "user_message_count",
    "n_segments": "n_segments",
    "finished": "last_segment_finished",
}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> tuple[pl.DataFrame, pl.DataFrame]:
    corpus = tmp_path_factory.mktemp("corpus") / "synthetic"
    write_corpus(corpus, 300, seed=11)
    con = duckdb.connect()
    try:
        wh = Warehouse(con)
        ingest_paths(wh, corpus)
        build_user_text(wh)
        build_event_features(wh)
        got = wh.frame("SELECT * FROM features.event_features ORDER BY session_id")
    finally:
        con.close()
    truth = pl.read_csv(corpus / "_sessions_truth.csv").sort("session_id")
    return truth, got


def test_synthetic_corpus_matches_the_generator_truth(synthetic):
    truth, got = synthetic
    assert got["session_id"].to_list() == truth["session_id"].to_list()
    assert truth["git_push"].sum() > 0 and truth["test_failures"].sum() > 0 and truth["git_rebase"].sum() > 0
    for source, column in TRUTH.items():
        expected = truth[source].cast(pl.Int64).to_list()
        assert got[column].cast(pl.Int64).to_list() == expected, column
    for op in ("commit", "push", "pull", "reset", "rebase"):
        assert got[f"git_{op}"].to_list() == (truth[f"git_{op}"] > 0).cast(pl.Int32).to_list()


def test_synthetic_corpus_cost_and_duration(synthetic):
    _, got = synthetic
    has_runs = got.filter(pl.col("shell_commands") > 0)
    assert has_runs["llm_cost_usd"].null_count() == 0 and (has_runs["llm_prompt_tokens"] > 0).all()
    assert got.filter(pl.col("shell_commands") == 0)["llm_cost_usd"].null_count() == (got["shell_commands"] == 0).sum()
    assert (got["duration_seconds"] > 0).all()
