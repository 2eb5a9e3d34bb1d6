"""A history of drops ingested one after another equals the final drop folder materialized once from scratch, table
by table (issue 16 item 1), and each ingest's per-session stages touch only the sessions whose record changed.

The history (the ingests of PULSE_HOME A, in this order; drop i's files are dated i hundred seconds after a base,
so the later-drop-wins order is the order written here):

1. ``d1``: sessions c-s000001-c-s000200 of a 300-session corpus, every rating of the corpus (those of
   c-s000201-c-s000300 arrive before their sessions: quarantined, then joined), the assignments, and four broken
   rating lines;
2. ``d2``: sessions c-s000201-c-s000300, one broken session record, and in another file c-s000001-c-s000020
   delivered again with other content (another seed, the same id prefix ``c``): the later drop wins;
3. ``d2`` rewritten in place (the same name and files, so the same record keys; a new fingerprint): that other
   file now holds c-s000001-c-s000010 with a third content, and c-s000011-c-s000020 no longer, so they fall back to
   their ``d1`` records. Every session of ``d2`` is recomputed (its fingerprint changed): 100 + 10, and the 10 back
   in d1.

Three ingests, not one per rule: each runs every downstream asset (models, estimates, report), the test's cost.

PULSE_HOME B gets a copy of A's final drop folder and one ``runs.materialize``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from pulse_pipeline import runs, staging, tables
from pulse_pipeline.contract import ensure_tables
from pulse_pipeline.features.annotate import annotate_sessions
from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.features.heuristic import HeuristicAnnotator
from pulse_pipeline.features.rubric import load_rubric
from pulse_pipeline.features.user_text import build_user_text
from pulse_pipeline.incremental import Refreshed
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.synth import write_corpus
from pulse_pipeline.warehouse_diff import diff_warehouses

from .helpers import ingest_paths

BASE_TIME = 1_700_000_000
PER_SESSION = [tables.WORK_SEGMENTS, tables.EVENT_FEATURES, tables.ANNOTATIONS, tables.ANNOTATION_VALUES]
# sessions whose record changed at each ingest: 200 and 100 new ones, 20 re-delivered, then 10 rewritten + 10 back
EXPECTED_TOUCHED = [200, 120, 120]
# the models are not what is tested; they fit at every ingest (no kept fit reused, modeling/reuse.py), as one
# rebuild fits them, so the history's modeling tables equal the rebuild's
QUICK_MODELS = {"PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_CV_SEEDS": "1", "PULSE_MODEL_REFIT_SHARE": "0"}
BOOKKEEPING = "staging.computed_versions"  # what each session's rows were computed from: differs by history


def _dated(folder: Path, seconds: int) -> Path:
    """Date every file of ``folder`` ``seconds`` after the base: the later-drop-wins order."""
    for f in folder.iterdir():
        os.utime(f, (BASE_TIME + seconds, BASE_TIME + seconds))
    return folder


def _lines(path: Path, n: int) -> bytes:
    return b"".join(path.read_bytes().splitlines(keepends=True)[:n])


def _touched(instance: dg.DagsterInstance) -> dict[str, int]:
    """``sessions_touched`` of the latest materialization of each per-session asset."""
    out = {}
    for t in PER_SESSION:
        event = instance.get_latest_materialization_event(dg.AssetKey([t.schema, t.name]))
        touched = event.asset_materialization.metadata.get("sessions_touched")
        out[t.qualified] = touched.value if touched else None
    return out


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[PulseHome, PulseHome, list[dict[str, int]]]:
    """(A after the three ingests, B materialized from A's final drop folder, sessions touched at each ingest)."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in QUICK_MODELS.items():
            env.setenv(name, value)
        return _history(tmp_path_factory.mktemp("incremental"))


def _history(root: Path) -> tuple[PulseHome, PulseHome, list[dict[str, int]]]:
    corpus, redo, rewrite = root / "corpus", root / "redo", root / "rewrite"
    same = {"prefix": "c"}  # the corpora share ids on purpose: re-deliveries with other content
    write_corpus(corpus, 300, seed=5, sessions_per_file=100, rated_fraction=0.3, ask_log_share=0.3, malformed=5, **same)
    write_corpus(redo, 20, seed=6, **same)
    write_corpus(rewrite, 10, seed=7, **same)

    d1, d2 = root / "src" / "d1", root / "src" / "d2"
    for d in (d1, d2):
        d.mkdir(parents=True)
    for name in ("sessions-0000.jsonl", "sessions-0001.jsonl", "ratings.jsonl", "assignments.csv"):
        shutil.copy(corpus / name, d1 / name)
    shutil.copy(corpus / "sessions-0002.jsonl", d2 / "sessions-0002.jsonl")  # ends with the broken session
    shutil.copy(redo / "sessions-0000.jsonl", d2 / "sessions-redo.jsonl")

    a = PulseHome(root / "a").ensure()
    touched = []
    for i, drop in enumerate((d1, d2), start=1):
        runs.ingest(a, _dated(drop, 100 * i), say=lambda _: None)
        touched.append(_touched(runs.instance_for(a)))
    rewritten = a.drops / "d2"
    (rewritten / "sessions-redo.jsonl").write_bytes(_lines(rewrite / "sessions-0000.jsonl", 10))
    runs.ingest(a, _dated(rewritten, 300), say=lambda _: None)
    touched.append(_touched(runs.instance_for(a)))

    b = PulseHome(root / "b").ensure()
    shutil.copytree(a.drops, b.drops, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".*"))
    runs.materialize(b, say=lambda _: None)
    return a, b, touched


@pytest.mark.slow  # the history fixture: four whole pipeline runs (~60-80 s in CI), so the module starts early
def test_the_history_is_what_was_written(history):
    """The test's own premises: each rule the history means to exercise happened."""
    a, _, _ = history
    with duckdb.connect(str(a.warehouse), read_only=True) as con:
        winners = dict(con.execute("SELECT drop_id, count(*) FROM staging.sessions GROUP BY 1").fetchall())
        assert winners == {"d1": 190, "d2": 110}
        redelivered = "SELECT count(*) FROM raw.sessions WHERE session_id = 'c-s000005'"
        assert con.execute(redelivered).fetchone()[0] == 2  # d1's record and the rewritten d2's
        broken = "SELECT drop_id, count(*) FROM raw.quarantine WHERE stage = 'ingest' GROUP BY 1"
        assert dict(con.execute(broken).fetchall()) == {"d1": 3, "d2": 1}  # the corpus's broken lines (MALFORMED)
        unknown = "SELECT count(*) FROM raw.quarantine WHERE reason LIKE '%session no-such-session%'"
        assert con.execute(unknown).fetchone()[0] == 1  # its fifth: a rating of a session no drop has
        late = "SELECT count(*) FROM staging.segment_ratings WHERE session_id > 'c-s000200'"
        assert con.execute(late).fetchone()[0] > 0  # ratings delivered in d1 joined sessions that came in d2


@pytest.mark.slow
def test_an_incremental_history_equals_one_rebuild_from_scratch(history):
    a, b, _ = history
    differences = diff_warehouses(a.warehouse, b.warehouse, digits=10)  # as published: the tables are in a lake
    assert [str(d) for d in differences if d.table != BOOKKEEPING] == []


@pytest.mark.slow
def test_each_ingest_touches_only_the_sessions_whose_record_changed(history):
    _, _, touched = history
    for expected, seen in zip(EXPECTED_TOUCHED, touched, strict=True):
        assert seen == dict.fromkeys(seen, expected)


@pytest.fixture
def small(wh, tmp_path):
    """An in-memory warehouse with a 12-session drop staged and its per-session tables refreshed once."""
    write_corpus(tmp_path / "d", 12, seed=3)
    ingest_paths(wh, tmp_path / "d")
    build_user_text(wh)
    build_event_features(wh)
    return wh


def test_a_table_recreated_in_a_new_shape_is_refreshed_whole(small):
    """``ensure_tables`` recreates event features of an older shape empty and forgets their bookkeeping, so the next
    refresh computes all 12 sessions; the work segments, untouched, keep theirs."""
    assert build_event_features(small) == Refreshed(12, 0)
    small.con.execute("ALTER TABLE features.event_features DROP COLUMN ends_on_agent_turn")
    ensure_tables(small.con)
    assert small.count(tables.EVENT_FEATURES) == 0
    assert build_event_features(small) == Refreshed(12, 12)
    assert staging.build_work_segments(small).sessions_touched == 0


def test_a_new_dependency_annotates_every_session_again_in_place(small):
    """The same prompt version with a different ``depends_on`` (an LLM's model, say) re-annotates all 12 sessions,
    replacing their rows; a second run with nothing changed annotates none."""
    rubric = load_rubric()

    class OtherModel(HeuristicAnnotator):
        def depends_on(self) -> str:
            return "another model"

    first = annotate_sessions(small, HeuristicAnnotator(rubric), rubric, say=lambda _: None)
    again = annotate_sessions(small, HeuristicAnnotator(rubric), rubric, say=lambda _: None)
    other = annotate_sessions(small, OtherModel(rubric), rubric, say=lambda _: None)
    assert [r.sessions_touched for r in (first, again, other)] == [12, 0, 12]
    assert small.count(tables.ANNOTATIONS) == 12
    assert small.count(tables.ANNOTATION_VALUES) == 12 * len(rubric.features)


def test_a_failed_annotation_is_asked_again_at_the_next_run(small):
    """A session whose annotation failed (an LLM timing out, say) is not recorded as done: the next run annotates it
    again, as a rebuild would, and once it succeeds it is left alone."""
    rubric = load_rubric()
    first = small.con.execute("SELECT min(session_id) FROM staging.sessions").fetchone()[0]

    class FailsOnce(HeuristicAnnotator):
        def annotate(self, transcripts, rubric=None):
            done = super().annotate(transcripts, rubric)
            return [replace(a, status="failed") if a.session_id == first else a for a in done]

    runs = [FailsOnce(rubric), FailsOnce(rubric), HeuristicAnnotator(rubric), HeuristicAnnotator(rubric)]
    touched = [annotate_sessions(small, a, rubric, say=lambda _: None).sessions_touched for a in runs]
    assert touched == [12, 1, 1, 0]
    statuses = "SELECT status, count(*) FROM features.annotations GROUP BY 1"
    assert dict(small.con.execute(statuses).fetchall()) == {"ok": 12}
