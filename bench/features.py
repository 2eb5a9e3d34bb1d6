"""Features benchmark: event features and the heuristic annotator at paper scale; the LLM annotator against a fake
OpenAI-compatible server with 100 ms latency per call, at concurrency 1 and 16, and again with a warm cache.

    .venv/bin/python bench/features.py                  # 36 000 sessions (the paper's scale)
    .venv/bin/python bench/features.py --sessions 5000 --llm-sessions 48
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the scripted LLM server lives with the tests (tests/fake_llm.py)

from pulse_pipeline import staging, tables  # noqa: E402
from pulse_pipeline.connections import connect  # noqa: E402
from pulse_pipeline.features.event_features import build_event_features  # noqa: E402
from pulse_pipeline.features.heuristic import HeuristicAnnotator  # noqa: E402
from pulse_pipeline.features.llm import LLMAnnotator, LLMCache, LLMSettings  # noqa: E402
from pulse_pipeline.features.rubric import load_rubric  # noqa: E402
from pulse_pipeline.features.transcripts import iter_transcripts  # noqa: E402
from pulse_pipeline.features.user_text import build_user_text  # noqa: E402
from pulse_pipeline.ingest.load import load_drop  # noqa: E402
from pulse_pipeline.synth import write_corpus  # noqa: E402
from pulse_pipeline.warehouse import Warehouse  # noqa: E402
from tests.fake_llm import running_fake_llm  # noqa: E402


def warehouse_for(sessions: int, seed: int, workdir: Path) -> Warehouse:
    """A warehouse holding the corpus's raw and staging tables (built once, then reused)."""
    db = workdir / f"features-{sessions}-seed{seed}.duckdb"
    if not db.exists():
        corpus = workdir / f"corpus-{sessions}-seed{seed}"
        if not (corpus / "_truth.json").exists():
            write_corpus(corpus, sessions, seed=seed)
        wh = Warehouse(connect(db))
        load_drop(wh, "corpus", corpus)
        for build in (
            staging.build_sessions,
            staging.build_work_segments,
            staging.build_segment_ratings,
            staging.build_session_labels,
            staging.build_assignments,
        ):
            build(wh)
        wh.con.close()
    return Warehouse(connect(db))


def timed(label: str, n: int, fn) -> float:
    started = time.perf_counter()
    fn()
    seconds = time.perf_counter() - started
    print(f"{label:<44} {seconds:7.2f} s  {n / seconds:10.0f} sessions/s")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=36_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--llm-sessions", type=int, default=64, help="sessions sent to the fake LLM server")
    ap.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)

    wh = warehouse_for(args.sessions, args.seed, args.workdir)
    n = wh.count(tables.STAGING_SESSIONS)
    rubric = load_rubric()
    # every session computed, as on a first ingest: a kept warehouse remembers what it computed (incremental.py)
    for table in (tables.USER_TEXT, tables.EVENT_FEATURES):
        wh.con.execute("DELETE FROM staging.computed_versions WHERE table_name = ?", [table.qualified])
    timed("user text (read, redacted)", n, lambda: build_user_text(wh))
    timed("event features (SQL + git parsing)", n, lambda: build_event_features(wh))

    transcripts = []
    timed("read transcripts", n, lambda: transcripts.extend(t for batch in iter_transcripts(wh) for t in batch))
    heuristic = HeuristicAnnotator(rubric)
    timed("heuristic annotator", n, lambda: heuristic.annotate(transcripts, rubric))

    sample = [t for t in transcripts if t.user_messages][: args.llm_sessions]
    with running_fake_llm(delay_s=0.1) as fake:
        base = dict(model="openai/fake-model", api_base=fake.api_base, api_key="sk-fake", backoff_initial_s=0.01)
        seconds = {}
        for concurrency in (1, 16):
            cache = LLMCache(duckdb.connect())
            llm = LLMAnnotator(LLMSettings(concurrency=concurrency, **base), cache)
            before = len(fake.requests)
            seconds[concurrency] = timed(
                f"LLM annotator, 100 ms/call, concurrency {concurrency}",
                len(sample),
                lambda llm=llm: llm.annotate(sample, rubric),
            )
            print(f"{'':<44} {len(fake.requests) - before} calls")
        before = len(fake.requests)
        warm = LLMAnnotator(LLMSettings(concurrency=16, **base), cache)  # the concurrency-16 run's cache
        seconds["warm"] = timed("LLM annotator again, warm cache", len(sample), lambda: warm.annotate(sample, rubric))
        print(f"{'':<44} {len(fake.requests) - before} calls")
    print(f"speed-up from concurrency 16: {seconds[1] / seconds[16]:.1f}x (target >= 10x)")
    print(
        f"warm cache against a cold run at concurrency 16: {seconds[16] / seconds['warm']:.0f}x faster (target >= 50x)"
    )


if __name__ == "__main__":
    main()
