"""The demo's corpus plan (``synth/demo.py``): enough ratings for the benchmark correlation, ask rows, broken records
and stand-in human labels, checked on the generator's truth and on a small drop read as the pipeline reads it (not
a second full demo)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import numpy as np
import orjson
import polars as pl
import pytest

from pulse_pipeline import staging
from pulse_pipeline.features.agreement import read_human_labels
from pulse_pipeline.synth.corpus import MALFORMED, write_corpus
from pulse_pipeline.synth.demo import (
    DEMO_ASK_LOG_SHARE,
    DEMO_MALFORMED,
    DEMO_RATED_FRACTION,
    DEMO_SESSIONS,
    demo_params,
    write_human_labels,
)
from pulse_pipeline.synth.model import default_n_users, simulate_sessions
from pulse_pipeline.synth.render import BASE_TIME, SPAN_SECONDS
from pulse_pipeline.warehouse import Warehouse
from tests.helpers import assert_reconciled, ingest_paths, rows

CI_TASK = "Fix Failing Continuous Integration"


# Share of each task type's sessions the heuristic annotator puts in the continuous-integration and the
# administrative clusters, measured on a 4 000-session demo warehouse (features.session_features joined to the
# truth's task_type); python and testing hold 60-87 % and 33-67 % of every task type, so these two are the binding ones.
CI_SHARE = {CI_TASK: 0.64}  # every other task type ~0.05
ADMIN_SHARE = {"Perform Deployments": 0.82, "Write Documentation": 0.48}  # every other task type ~0.25


def test_the_llm_backbone_arms_get_enough_ratings_for_four_clusters() -> None:
    p = demo_params()
    assert p.experiment_weights == (4.0, 1.0, 1.0)  # in EXPERIMENTS order: llm-backbone first
    assert abs(sum(p.task_probs) - 1.0) < 1e-12
    table = simulate_sessions(
        DEMO_SESSIONS, 0, default_n_users(DEMO_SESSIONS, p), "self_selected", DEMO_RATED_FRACTION, params=p
    )
    for arm in ("claude-4-sonnet", "gpt-5"):
        tasks = table.task_type[(table.variant == arm) & table.rated]
        in_ci = sum(CI_SHARE.get(t, 0.05) for t in tasks)
        in_admin = sum(ADMIN_SHARE.get(t, 0.25) for t in tasks)
        assert min(in_ci, in_admin) >= 40, (arm, in_ci, in_admin)  # 35 and a margin for the annotator's noise


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Warehouse]:
    """A 300-session drop with the demo's asks, broken records and human labels, read into an in-memory warehouse.
    The generator's default params, not the demo's: their true arm means (a Monte Carlo, seconds) are cached for the
    whole test session, and the demo's own mix is checked above and by the demo test in test_pipeline.py."""
    drop = tmp_path_factory.mktemp("demo") / "demo-300"
    write_corpus(drop, 300, seed=3, ask_log_share=DEMO_ASK_LOG_SHARE, malformed=DEMO_MALFORMED)
    write_human_labels(drop, seed=3)
    wh = Warehouse(duckdb.connect())
    ingest_paths(wh, drop)
    staging.build_session_asks(wh)
    yield drop, wh
    wh.con.close()


def _lines(path: Path) -> list[dict | None]:
    out = []
    for line in path.read_bytes().splitlines():
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            out.append(None)
    return out


def test_asks_are_logged_in_the_last_quarter_and_change_no_label(small_demo: tuple[Path, Warehouse]) -> None:
    drop, wh = small_demo
    truth = pl.read_csv(drop / "_sessions_truth.csv")
    sessions = {}
    for path in sorted(drop.glob("sessions-*.jsonl")):
        for obj in _lines(path):
            if obj and isinstance(obj.get("history"), list):
                sessions[obj["session_id"]] = obj["history"]
    cutoff = BASE_TIME.timestamp() + (1 - DEMO_ASK_LOG_SHARE) * SPAN_SECONDS
    late = {s for s, h in sessions.items() if datetime.fromisoformat(h[0]["timestamp"]).timestamp() >= cutoff}
    segments = dict(zip(truth["session_id"], truth["n_segments"], strict=True))
    assert 0 < len(late) < len(sessions)
    # every segment of a late session is one ask row; answered ones carry the rating
    (n_asks, n_answered, n_asked_sessions) = rows(
        wh, "SELECT count(*), count(rating), count(DISTINCT session_id) FROM raw.asks"
    )[0]
    assert n_asks == sum(segments[s] for s in late)
    assert n_asked_sessions == len(late)
    assert rows(wh, "SELECT min(ask_probability), max(ask_probability) FROM raw.asks")[0] == (1.0, 1.0)
    rated_late = truth.filter(pl.col("session_id").is_in(list(late)) & pl.col("rated"))
    assert n_answered == rated_late["n_rated_segments"].sum()
    assert rows(wh, "SELECT count(*) FROM staging.session_asks")[0][0] == len(late)
    # the labels are the truth's, asks or not: the mean of each rated session's star ratings
    labels = dict(rows(wh, "SELECT session_id, label FROM staging.session_labels"))
    rated = truth.filter(pl.col("rated"))
    assert set(labels) == set(rated["session_id"])
    expected = dict(zip(rated["session_id"], rated["label"], strict=True))
    assert max(abs(labels[s] - (expected[s] - 1) / 4) for s in labels) < 1e-9


def test_the_broken_records_are_quarantined_and_counts_reconcile(small_demo: tuple[Path, Warehouse]) -> None:
    drop, wh = small_demo
    reasons = [r for (r,) in rows(wh, "SELECT reason FROM raw.quarantine ORDER BY source_file, record_index")]
    assert len(reasons) == len(MALFORMED)
    joined = " | ".join(reasons)
    for expected in (
        "rating 7 is not a star rating: expected a number from 1 to 5",
        "ask_probability 0 is not a number in (0, 1]",
    ):
        assert expected in joined
    assert any("no-such-session" in r for r in reasons)
    assert_reconciled(wh, drop.name)


def test_human_labels_are_the_true_task_types(small_demo: tuple[Path, Warehouse]) -> None:
    drop, _ = small_demo
    labels, ignored = read_human_labels(drop / "_human_labels.csv")
    truth = pl.read_csv(drop / "_sessions_truth.csv")
    assert ignored == [] and len(labels) == 300  # 400 asked for, the drop has 300 sessions
    assert labels == {s: {"task_type": t} for s, t in zip(truth["session_id"], truth["task_type"], strict=True)}


def test_without_the_options_a_corpus_is_unchanged(tmp_path: Path) -> None:
    """ask_log_share=0 and malformed=0 (the defaults) write what write_corpus always wrote: no ask row."""
    plain = write_corpus(tmp_path / "plain", 60, seed=1)
    asked = write_corpus(tmp_path / "asked", 60, seed=1, ask_log_share=1.0)
    assert plain.n_unanswered_asks == 0 and asked.n_unanswered_asks > 0
    assert plain.n_ratings == asked.n_ratings
    answered = [o for o in _lines(tmp_path / "asked" / "ratings.jsonl") if o and "rating" in o]
    bare = [{k: v for k, v in o.items() if k != "ask_probability"} for o in answered]
    original = _lines(tmp_path / "plain" / "ratings.jsonl")
    assert [{k: v for k, v in o.items() if k != "id"} for o in bare] == [
        {k: v for k, v in o.items() if k != "id"} for o in original
    ]
    assert np.all([o["ask_probability"] == 1.0 for o in answered])
