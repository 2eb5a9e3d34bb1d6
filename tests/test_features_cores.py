"""The feature stage's per-session Python work in worker processes (``features/workers.py``): the same rows as in
one process, a small drop kept in this process, and no worker left behind by an interrupted or killed run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline import processes
from pulse_pipeline.features import workers
from pulse_pipeline.features.annotate import annotate_sessions
from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.features.heuristic import HeuristicAnnotator
from pulse_pipeline.features.rubric import load_rubric
from pulse_pipeline.features.sentiment import sentiment_table
from pulse_pipeline.features.transcripts import iter_transcripts
from pulse_pipeline.features.user_text import build_user_text
from pulse_pipeline.synth import write_corpus
from pulse_pipeline.warehouse import Warehouse

from .helpers import ingest_paths

SESSIONS = 60
TABLES = ("features.annotations", "features.annotation_values", "features.event_features")


def _features(wh: Warehouse) -> dict[str, list[tuple]]:
    """Every row of the tables the two assets write, in a stable order."""
    return {t: wh.con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


def _compute(wh: Warehouse, monkeypatch: pytest.MonkeyPatch, parallel_from: int) -> tuple[dict, int]:
    """Both assets' rows computed anew, in worker processes from ``parallel_from`` sessions on, and how many
    pools of workers ran."""
    pools = []

    class CountedPool(ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(args)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(processes, "ProcessPoolExecutor", CountedPool)
    monkeypatch.setattr(workers, "PARALLEL_SESSIONS", parallel_from)
    monkeypatch.setattr(workers, "usable_cores", lambda: 2)  # a one-core machine still runs the pool
    wh.con.execute("DELETE FROM staging.computed_versions WHERE table_name LIKE 'features.%'")
    rubric = load_rubric()
    annotate_sessions(wh, HeuristicAnnotator(rubric), rubric, say=lambda _: None)
    build_event_features(wh)
    return _features(wh), len(pools)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    drop = tmp_path_factory.mktemp("cores") / "d00"
    write_corpus(drop, SESSIONS, seed=16)
    con = duckdb.connect()
    wh = Warehouse(con)
    ingest_paths(wh, drop)
    build_user_text(wh)
    yield wh
    con.close()


def test_workers_write_the_rows_one_process_writes(warehouse, monkeypatch):
    in_process, no_pool = _compute(warehouse, monkeypatch, parallel_from=10**9)
    pooled, two_pools = _compute(warehouse, monkeypatch, parallel_from=1)
    assert (no_pool, two_pools) == (0, 2)  # the annotations' and the sentiment columns'
    assert pooled == in_process
    assert len(pooled["features.event_features"]) == SESSIONS
    # and they are the annotator's answers and the sentiment rules', computed here without the warehouse's tables
    rubric = load_rubric()
    answers = [a for batch in iter_transcripts(warehouse) for a in HeuristicAnnotator(rubric).annotate(batch, rubric)]
    assert len(answers) == SESSIONS
    summary = warehouse.con.execute(
        "SELECT session_id, status, sentiment, task_type FROM features.annotations ORDER BY session_id"
    ).fetchall()
    assert summary == sorted(
        (a.session_id, a.status, a.answers["sentiment"].value, a.answers["task_type"].value) for a in answers
    )
    values = warehouse.con.execute("SELECT count(*) FROM features.annotation_values").fetchone()[0]
    assert values == SESSIONS * len(rubric.features)


def test_sentiment_parts_in_workers_are_the_rows_of_one_part(warehouse):
    whole = sentiment_table(warehouse)
    parts = sentiment_table(warehouse, sessions_per_part=7, workers=2)
    assert parts.sort_by("session_id").equals(whole.sort_by("session_id"))
    with_message = "SELECT count(DISTINCT record_key) FROM raw.events WHERE kind = 'action' AND name = 'message'"
    assert parts.num_rows == warehouse.con.execute(with_message).fetchone()[0] == SESSIONS


def test_a_small_drop_stays_in_this_process(monkeypatch):
    monkeypatch.setattr(workers, "usable_cores", lambda: 2)
    assert workers.worker_count(100) == 1
    assert workers.worker_count(workers.PARALLEL_SESSIONS) == 2
    monkeypatch.setattr(workers, "usable_cores", lambda: 1)
    assert workers.worker_count(10 * workers.PARALLEL_SESSIONS) == 1


_SLOW_POOL = """
import time
from pulse_pipeline.processes import ordered_map

for _ in ordered_map(time.sleep, [30] * 8, 2):
    pass
"""


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _start_pool() -> tuple[subprocess.Popen, list[int]]:
    """A process whose two workers sleep 30 s per item, and its children (the workers, multiprocessing's resource
    tracker) once both workers are up."""
    parent = subprocess.Popen([sys.executable, "-c", _SLOW_POOL], start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = _children(parent.pid)
        spawned = [p for p in children if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
        if len(spawned) == 2:
            return parent, children
        time.sleep(0.1)
    parent.kill()
    raise AssertionError("the pool's workers did not start")


def _gone(pids: list[int], seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_or_interrupted_run_leaves_no_worker():
    parent, children = _start_pool()
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    assert _gone(children), "a process outlived its killed parent"

    parent, children = _start_pool()
    started = time.monotonic()
    os.killpg(parent.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
    assert parent.wait(timeout=60) != 0
    assert time.monotonic() - started < 10  # it did not wait for the 30 s items its workers held
    assert _gone(children), "a process outlived its interrupted parent"
