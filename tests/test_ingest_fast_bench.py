"""`bench/ingest.py --load-only`: the figure issue 16's ingestion target is measured on (``load_drop`` alone)."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # a corpus is generated and the bench starts in its own interpreter: about 8 s
def test_load_only_reads_every_record_and_event_of_the_corpus(tmp_path):
    done = subprocess.run(
        [sys.executable, "bench/ingest.py", "--sessions", "100", "--load-only", "--workdir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    corpus = tmp_path / "corpus-100-seed7"
    # counted from the corpus's own files: one session record per line of sessions-*.jsonl with its history's
    # events, one rating per line of ratings.jsonl, one assignment per row of assignments.csv
    sessions = [orjson.loads(line) for f in corpus.glob("sessions-*.jsonl") for line in f.read_bytes().splitlines()]
    ratings = [line for line in (corpus / "ratings.jsonl").read_bytes().splitlines() if line.strip()]
    with (corpus / "assignments.csv").open() as f:
        assignments = list(csv.DictReader(f))
    events = sum(len(s["history"]) for s in sessions)
    records = len(sessions) + len(ratings) + len(assignments)
    assert len(sessions) == 100
    out = done.stdout
    assert f"{events} events, {records} records)" in out
    assert "load_drop alone   :" in out and "ratio to orjson" in out
    cpu = next(line for line in out.splitlines() if line.strip().startswith("CPU seconds:"))
    total, own, _appending, readers = (float(x) for x in re.findall(r"[0-9]+\.[0-9]", cpu))
    assert abs(total - (own + readers)) < 0.15  # each printed to one decimal
