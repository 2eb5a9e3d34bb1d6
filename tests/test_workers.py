"""Fits in worker processes (modeling/workers.py) give exactly what the same fits give in this process: the
cross-validation of every family and the stack, the stack's cross-fit, permutation importance and the text
vectorizer, each run once with workers forced on (``MIN_ROWS`` = 0) and once with them off."""

from __future__ import annotations

import numpy as np
import pytest

from pulse_pipeline.modeling import text as text_module
from pulse_pipeline.modeling import workers
from pulse_pipeline.modeling.importance import permutation_importance_oof
from pulse_pipeline.modeling.stack import cross_validate_all, stack_crossfit_predict
from pulse_pipeline.modeling.text import vectorize
from pulse_pipeline.settings import usable_cores

pytestmark = pytest.mark.skipif(usable_cores() < 2, reason="one usable core: map_jobs never starts workers")

FAMILIES = ["ordinal_logit", "random_forest", "lightgbm"]


def data(n: int = 160) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(n, 6))
    return X, np.clip(np.round(3 + X[:, 0] + np.sign(X[:, 1] * X[:, 2]) + rng.normal(scale=0.5, size=n)), 1, 5)


def both_ways(monkeypatch, run):
    monkeypatch.setattr(workers, "MIN_ROWS", 10**9)
    here = run()
    monkeypatch.setattr(workers, "MIN_ROWS", 0)
    assert workers.workers_for(4, 10) == min(4, usable_cores())
    return here, run()


def test_cross_validation_is_the_same_in_workers(monkeypatch):
    X, y = data()
    cheap = ["ordinal_logit", "lightgbm"]  # the forest's threads are the stack test's
    here, there = both_ways(monkeypatch, lambda: cross_validate_all(X, y, cheap, seeds=(42, 43)))
    assert [r.family for r in here] == [r.family for r in there] == [*cheap, "stack", "constant"]
    for a, b in zip(here, there, strict=True):
        assert np.array_equal(a.oof, b.oof)
        assert a.metric("mse").mean == pytest.approx(b.metric("mse").mean, rel=1e-12)


def test_the_stacks_cross_fit_and_importance_are_the_same_in_workers(monkeypatch):
    X, y = data(200)

    def run():
        fit, stack = stack_crossfit_predict(X[:160], y[:160], X[160:], FAMILIES, k=5, seed=42)
        ranked = permutation_importance_oof(fit, X[:160], y[:160], [f"x{j}" for j in range(6)], n_repeats=2)
        return fit, stack, ranked

    (fit_a, stack_a, imp_a), (fit_b, stack_b, imp_b) = both_ways(monkeypatch, run)
    assert np.allclose(fit_a.oof, fit_b.oof, rtol=1e-12) and np.allclose(fit_a.unlabeled, fit_b.unlabeled)
    assert np.allclose(stack_a.weights, stack_b.weights)
    assert [(i.feature, round(i.mean, 12)) for i in imp_a] == [(i.feature, round(i.mean, 12)) for i in imp_b]


def test_text_is_vectorized_the_same_in_chunks(monkeypatch):
    rng = np.random.default_rng(2)
    words = ["thanks", "great", "broken", "again", "why", "works", "fix", "test", "nope", "merci"]
    ids = [f"s{i:03d}" for i in range(90)]
    messages = {s: [" ".join(rng.choice(words, 6)) for _ in range(1 + i % 3)] for i, s in enumerate(ids)}
    monkeypatch.setattr(text_module, "TRANSFORM_MIN_ROWS", 10**9)
    whole = vectorize(ids, messages)
    monkeypatch.setattr(text_module, "TRANSFORM_MIN_ROWS", 0)
    monkeypatch.setattr(workers, "MIN_ROWS", 0)
    chunked = vectorize(ids, messages)
    assert whole.terms == chunked.terms and np.array_equal(whole.rows, chunked.rows)
    assert (whole.Z != chunked.Z).nnz == 0 and whole.Z.shape == (90, len(whole.terms))


def test_the_forest_gets_one_thread_in_a_worker_or_on_few_rows():
    assert workers.forest_threads(workers.MIN_ROWS - 1) == 1  # threads cost more than they save on a few rows
    assert workers.forest_threads(workers.MIN_ROWS, workers=2) == 1  # the worker processes share the cores out
    assert workers.forest_threads(workers.MIN_ROWS) is None  # alone on many rows: every usable core


def _worker_pids() -> set[int]:
    """This process's children that are joblib (loky) workers, from /proc."""
    import os
    from pathlib import Path

    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if parent == os.getpid() and b"loky" in command and b"resource_tracker" not in command:
            pids.add(int(stat.parent.name))
    return pids


def test_release_workers_stops_the_idle_ones():
    assert workers.map_jobs(abs, [(-1,), (-2,)], 2) == [1, 2]
    assert _worker_pids(), "map_jobs left no idle worker to stop: the test cannot tell"
    workers.release_workers()
    assert not _worker_pids()
