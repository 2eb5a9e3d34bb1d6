"""Model fits side by side in worker processes: how the modeling stage uses more than one core.

Why: every fit runs on one native thread (PULSE_MODEL_THREADS = 1, ``threads.py`` says why), so one process fitting
the families one after another leaves the other cores idle while the boosting, the ordinal logit and the text ridge
run (the forest alone used them, through its own threads). With the text model and the stack the modeling stage at
the paper's scale (1 800 rated of 36 000 sessions) took 155 s on 2 cores (``bench/modeling.py --stage``).

Why processes and not threads: the fits spend much of their time in Python (the ordinal logit's optimizer, the
boosting loops, the forest's out-of-bag loop), so seeds run in threads were 1.9x SLOWER than one after another
(measured: 128 s against 69 s for the cross-validation), the threads queueing for the GIL.

How: ``map_jobs`` runs ``fn(*job)`` for each job in ``usable_cores()`` joblib (loky) worker processes, each capped
at one native thread (``threads.native_threads(1)``); callers pass the forest one thread too. Workers are CPU-bound
and never spin, so two runs at once share the cores as two CPU-bound processes do (the forest's policy in
``threads.py``). Results come back in job order, and a job's result does not depend on the process that ran it
(fixed seeds; a forest on one thread adds its trees in a fixed order). Below ``MIN_ROWS`` labeled rows the jobs
run here, one after another: starting workers (~1 s) and sending them the data would cost more than it saves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from joblib import Parallel, delayed

from ..settings import usable_cores
from .threads import native_threads

MIN_ROWS = 500
"""Labeled rows from which fits go to worker processes (smaller problems run in this process)."""


def _capped(fn: Callable[..., Any], job: tuple) -> Any:
    with native_threads(1):
        return fn(*job)


def workers_for(n_jobs: int, n_rows: int, min_rows: int | None = None) -> int:
    """How many worker processes ``map_jobs`` uses for ``n_jobs`` jobs on ``n_rows`` labeled rows (1: none)."""
    if n_rows < (MIN_ROWS if min_rows is None else min_rows):
        return 1
    return max(1, min(n_jobs, usable_cores()))


def forest_threads(n_rows: int, workers: int = 1) -> int | None:
    """The random forest's threads (``families.make_model``'s ``forest_jobs``) for a fit on ``n_rows`` labeled rows:
    1 in a worker process (the cores are shared out already) or below ``MIN_ROWS`` rows, where starting threads
    costs more than they save (400 trees on 28 rows: 0.45 s on two threads, 0.27 s on one); None, every usable
    core, otherwise (1 500 rows: 2.4 s against 4.3 s on one)."""
    return 1 if workers > 1 or n_rows < MIN_ROWS else None


def release_workers() -> None:
    """Stop the idle worker processes ``map_jobs`` leaves for its next call (joblib keeps them 300 s).

    Why: once the cross-validation's fits are done they hold what the fits left behind: at 10x the paper's scale
    two workers of ~0.6 GB each, idle beside the step's own memory through the whole cross-fit."""
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)


def map_jobs(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int) -> list[Any]:
    """``[fn(*job) for job in jobs]``, in ``workers`` processes when more than one (``fn`` must be a module-level
    function and the jobs picklable). Put the longest jobs first: they are handed out in order."""
    if workers <= 1:
        return [fn(*job) for job in jobs]
    return Parallel(n_jobs=workers, backend="loky")(delayed(_capped)(fn, job) for job in jobs)
