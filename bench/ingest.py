"""Ingestion benchmark: a paper-scale synthetic corpus through `pulse ingest`, against orjson's parse-only floor.

    .venv/bin/python bench/ingest.py                # 36 000 sessions, 15 000 users (the paper's scale)
    .venv/bin/python bench/ingest.py --sessions 5000 --drops 4

Prints sessions/s, events/s, MB/s of reading the drop into the raw tables, then the time `pulse ingest` takes to
rebuild every derived table after it, and the command's peak RSS (a child process, so its RSS is its own),
the rate at which orjson merely parses the same files, and the ratio of the two. With --drops K the corpus is
also split into K drops ingested one after another into one PULSE_HOME, printing each one's peak RSS: memory
must not grow with the number of drops already ingested.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from pulse_pipeline.synth import write_corpus

ROOT = Path(__file__).resolve().parent.parent


def parse_only(folder: Path) -> tuple[float, int]:
    """Seconds for orjson to parse every data file of the corpus (line by line for JSONL), and bytes read."""
    files = [p for p in sorted(folder.iterdir()) if p.suffix in (".jsonl", ".json") and not p.name.startswith("_")]
    started = time.perf_counter()
    total = 0
    for f in files:
        data = f.read_bytes()
        total += len(data)
        if f.suffix == ".jsonl":
            for line in data.split(b"\n"):
                if line:
                    orjson.loads(line)
        else:
            orjson.loads(data)
    return time.perf_counter() - started, total


def pulse_ingest(home: Path, drop: Path) -> tuple[float, dict, float]:
    """`pulse ingest` in a fresh interpreter: seconds, its JSON summary, and that process's peak RSS in MiB."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(drop)],
        env={**os.environ, "PULSE_HOME": str(home)},
        check=True,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    *summary, rss = out.stdout.strip().splitlines()
    return seconds, json.loads("\n".join(summary)), float(rss)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=36_000)
    ap.add_argument("--users", type=int, default=None)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--drops", type=int, default=4, help="also ingest the corpus split into this many drops")
    ap.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = ap.parse_args()

    corpus = args.workdir / f"corpus-{args.sessions}-seed{args.seed}"
    if not (corpus / "_truth.json").exists():
        started = time.perf_counter()
        s = write_corpus(corpus, args.sessions, seed=args.seed, n_users=args.users)
        print(
            f"generated {s.n_sessions} sessions ({s.n_events} events, {s.bytes_written / 1e6:.0f} MB) "
            f"in {time.perf_counter() - started:.1f} s"
        )

    parse_s, nbytes = parse_only(corpus)
    mb = nbytes / 1e6
    print(f"orjson parse only : {parse_s:6.2f} s  {mb / parse_s:7.1f} MB/s  ({mb:.0f} MB)")

    with tempfile.TemporaryDirectory(prefix="pulse-bench-") as tmp:
        total, summary, rss = pulse_ingest(Path(tmp) / "home", corpus)
    seconds = summary["read_seconds"]  # the drop into the raw tables; the rebuild of derived tables is apart
    print(
        f"pulse ingest      : {seconds:6.2f} s  {mb / seconds:7.1f} MB/s  "
        f"{summary['sessions'] / seconds:8.0f} sessions/s  {summary['events'] / seconds:9.0f} events/s  "
        f"peak RSS {rss:.0f} MiB"
    )
    print(
        f"  {summary['sessions']} sessions, {summary['events']} events, {summary['segments']} segments, "
        f"{summary['ratings']} ratings, {summary['quarantined']} quarantined, reconciled={summary['reconciled']}"
    )
    print(
        f"  then every derived table rebuilt (staging to estimates): {summary['derived_seconds']:.1f} s;"
        f" the whole command {total:.1f} s"
    )
    print(f"ratio ingest/parse-only throughput: {parse_s / seconds:.2f}")

    if args.drops > 1:
        files = sorted(p for p in corpus.iterdir() if p.name.startswith("sessions-"))
        with tempfile.TemporaryDirectory(prefix="pulse-bench-") as tmp:
            home = Path(tmp) / "home"
            chunks = [files[i :: args.drops] for i in range(args.drops)]
            for k, chunk in enumerate(chunks, start=1):
                drop = Path(tmp) / f"part-{k}"
                drop.mkdir()
                for f in chunk:
                    shutil.copy2(f, drop / f.name)
                seconds, summary, rss = pulse_ingest(home, drop)
                print(
                    f"drop {k}/{args.drops}: {summary['sessions']} sessions in {seconds:5.1f} s, peak RSS {rss:.0f} MiB"
                )


# Runs `pulse ingest` in a fresh interpreter and prints that process's own peak RSS (MiB) last.
_RSS_CHILD = """
import json, resource, sys, time
from dataclasses import asdict
from pathlib import Path
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.runs import ingest

marks = {}
def say(message):  # runs.ingest says "rebuilding derived tables" when the drop is in and the rebuild starts
    marks.setdefault(message.split()[0], time.perf_counter())
started = time.perf_counter()
summary = ingest(PulseHome.from_env().ensure(), Path(sys.argv[1]), say=say)
done = time.perf_counter()
if "rebuilding" not in marks:
    sys.exit("bench: runs.ingest no longer says 'rebuilding derived tables'; update the marker")
timing = {"read_seconds": marks["rebuilding"] - started, "derived_seconds": done - marks["rebuilding"]}
print(json.dumps({**asdict(summary), **timing}))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""

if __name__ == "__main__":
    main()
