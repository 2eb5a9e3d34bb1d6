"""The features a hook sends with its ask are the features the ask policy is fitted on: for each log, the hook's
``transcript.read_progress`` equals the pipeline's ``features.event_features`` row of that session (ingest, staging
and the feature stage run on the same file, in memory, without Dagster). A policy evaluated on other numbers than
it was fitted on would ask with probabilities that are not the ones it meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.features.user_text import build_user_text
from pulse_pipeline.hooks.transcript import read_progress
from pulse_pipeline.ingest.claude_code import ClaudeCode
from pulse_pipeline.ingest.codex import Codex

from .helpers import ingest_paths
from .hook_helpers import claude_code_lines, write_jsonl
from .test_hooks_codex import THREAD, rollout_lines

SAMPLES = Path("/work/shared/samples")
COLUMNS = ("user_message_count", "n_segments", "file_edits", "failed_commands", "test_runs", "duration_seconds")


def pipeline_features(wh, log: Path) -> dict[str, float | None]:
    ingest_paths(wh, log)
    build_user_text(wh)
    build_event_features(wh)
    [row] = wh.con.execute(f"SELECT {', '.join(COLUMNS)} FROM features.event_features").fetchall()
    return dict(zip(COLUMNS, row, strict=True))


def hook_features(log: Path, adapter) -> dict[str, float | None]:
    features = read_progress(log, adapter).features
    return {c: features.get(c) for c in COLUMNS}


def test_a_claude_code_log_with_a_logged_rating_prompt(wh, tmp_path):
    log = write_jsonl(tmp_path / "cc.jsonl", claude_code_lines("cc-1", rating_prompt="rate 2: slow"))
    assert hook_features(log, ClaudeCode()) == pipeline_features(wh, log)


def test_a_codex_rollout(wh, tmp_path):
    log = write_jsonl(tmp_path / "rollout.jsonl", rollout_lines(THREAD))
    assert hook_features(log, Codex()) == pipeline_features(wh, log)


@pytest.mark.parametrize(
    ("name", "adapter"),
    [
        ("claude_code/daaain_representative_messages.jsonl", ClaudeCode),
        ("claude_code/daaain_edge_cases.jsonl", ClaudeCode),
        ("codex/kvsankar_real_sessions_codex_session-01.jsonl", Codex),
    ],
)
def test_real_logs(name, adapter, wh):
    log = SAMPLES / name
    if not log.is_file():
        pytest.skip(f"{log} is absent (the real samples live in /work/shared/samples)")
    assert hook_features(log, adapter()) == pipeline_features(wh, log)


def test_a_log_with_one_timestamp_lasts_0_seconds_as_in_the_pipeline(wh, tmp_path):
    lines = claude_code_lines("cc-2")
    for line in lines[1:]:
        del line["timestamp"]
    log = write_jsonl(tmp_path / "one-stamp.jsonl", lines)
    assert hook_features(log, ClaudeCode())["duration_seconds"] == pipeline_features(wh, log)["duration_seconds"] == 0
