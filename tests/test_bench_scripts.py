"""Smoke tests of the benchmark scripts at a tiny scale: they run and print their figures (no timing asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_estimation_bench_times_the_stage():
    out = _run("bench/estimation.py", "--stage-only", "--sessions", "3000")
    assert "Estimation stage: 3,000 sessions" in out
    assert "every method of 4 comparisons" in out and "estimation stage (sum)" in out


def test_modeling_bench_runs_one_family():
    out = _run("bench/modeling.py", "--sessions", "3000", "--seeds", "1", "--families", "hist_gbm")
    assert "hist_gbm" in out and "20 features" in out


@pytest.mark.slow
def test_ingest_bench_reads_and_rebuilds(tmp_path):
    out = _run("bench/ingest.py", "--sessions", "300", "--drops", "2", "--workdir", str(tmp_path))
    assert "pulse ingest      :" in out and "then every derived table rebuilt" in out
    assert "drop 2/2:" in out


@pytest.mark.slow
def test_ingest_bench_compares_small_files_with_one_jsonl_file(tmp_path):
    out = _run("bench/ingest.py", "--sessions", "300", "--layout", "both", "--workdir", str(tmp_path))
    # 300 session files, ratings.csv and assignments.csv; or sessions.jsonl and the same two
    assert "files layout (302 files" in out and "jsonl layout (3 files" in out
    assert out.count("300 sessions,") == 2 and out.count("reconciled=True") == 2  # one summary per layout
    assert "files/jsonl: reading takes" in out


def test_concurrent_fits_bench_times_one_process_alone_and_two_at_once():
    out = _run("bench/concurrent_fits.py", "--sessions", "2000", "--families", "ordinal_logit", "--folds", "2")
    # simulate_sessions(2000, seed=7) rates 88 sessions; one family x 2 folds x 1 seed
    assert "88 rated sessions x 20 features" in out and "(2 folds x 1 CV seeds = 2 fits" in out
    total = next(line for line in out.splitlines() if line.startswith("total")).split()
    assert len(total) == 7  # alone, two at once and their ratio, for each of the two limits
    # each limit's verdict quotes the ratio of its "total" row
    assert f"threads=1 (default): two at once / alone = {total[3]} (" in out
    assert f"(no limit): two at once / alone = {total[6]} (" in out
    assert "one process alone, default / no limit = " in out
