"""The feature stage's per-session Python work on every usable core: worker processes over batches of sessions.

Why: the heuristic annotator's rules and the VADER scores of the sentiment columns are pure Python, one session at
a time. A run executes its steps one after another (one writer per PULSE_HOME), so inside a step that work used
one core of the machine while DuckDB, before and after it, uses them all. At the paper's scale (36 000 sessions,
two cores) ``event_features`` and ``annotations`` took 40.0 s on one core; with workers 21.4 s, the same 41 CPU
seconds (``tests/test_features_cores.py``: the same rows).

How (the ingest readers' pattern, ``ingest/load.py``): this process reads a batch's rows from the warehouse, hands
them to a worker process as plain data (an Arrow table), and writes what comes back, in the batches' order, so
the rows are the ones one process writes. Workers never see the warehouse. At most two batches per worker are in
flight, so memory holds a few batches whatever the warehouse's size. Workers are spawned (this process holds
DuckDB's threads; forking them is unsafe), ignore Ctrl-C (the interrupt reaches this process, which ends them and
drops the batches in flight: the step's transaction writes nothing anyway) and exit as soon as this process is
gone, so a killed run leaves no process behind (measured: without that, the spawned workers of a SIGKILLed parent
wait forever).

When: starting two workers costs ~0.4 s and ~1 CPU second (two interpreters importing the annotator, polars and
VADER), and the workers save ~0.4 ms of wall time per session for the annotator, ~0.15 ms for the sentiment columns
(measured at 36 000 sessions); so fewer than ``PARALLEL_SESSIONS`` sessions (a day's drop of a few hundred) stay in
this process. Memory: a worker peaked at ~200 MiB, the batches being ``TASK_SESSIONS`` sessions at any scale.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar

from ..settings import usable_cores

T = TypeVar("T")
R = TypeVar("R")

PARALLEL_SESSIONS = 4_000
"""Sessions from which a step's per-session Python work runs in worker processes (see the module docstring): two
batches of ``TASK_SESSIONS``, the least that keeps two workers busy at once."""

TASK_SESSIONS = 2_000
"""Sessions per batch handed to a worker: enough that sending them costs little next to working on them, few
enough that two per worker hold little memory and the last batches keep both cores busy."""


def worker_count(sessions: int) -> int:
    """Worker processes for a step over ``sessions`` sessions: one per usable core from ``PARALLEL_SESSIONS``
    sessions on (when there is more than one core), else 1 (the work stays in this process)."""
    cores = usable_cores()
    return cores if sessions >= PARALLEL_SESSIONS and cores > 1 else 1


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """``fn`` of each item, in the items' order: in this process when ``workers`` is 1, else in that many worker
    processes, with at most two items per worker taken from ``items`` ahead of the results (``items`` may be a
    generator reading the warehouse: it runs in this process while the workers work).

    ``fn`` and the items must pickle (a module-level function, or a ``functools.partial`` of one, over plain
    data). A worker's exception is raised here when its result is reached."""
    if workers <= 1:
        yield from map(fn, items)
        return
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker)
    finished = False
    try:
        pending = iter(items)
        in_flight: deque[Future[R]] = deque()
        more = True
        while more or in_flight:
            while more and len(in_flight) < 2 * workers:
                item = next(pending, _END)
                if item is _END:
                    more = False
                else:
                    in_flight.append(pool.submit(fn, item))
            if in_flight:
                yield in_flight.popleft().result()
        finished = True
    finally:
        if not finished:  # an error, an interrupt or an abandoned iteration: no batch's result is wanted any more
            _stop_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)


_END = object()


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """End the pool's workers now rather than after the batches they hold (Ctrl-C should not wait for them).
    Python 3.14 has ``ProcessPoolExecutor.terminate_workers``; before it, the processes are the pool's private
    ``_processes``."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


def _start_worker() -> None:
    """A worker ignores Ctrl-C (its parent handles it) and exits when its parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with_parent, args=(parent.sentinel,), daemon=True).start()


def _exit_with_parent(sentinel: int) -> None:
    """Wait until the parent process ends (its sentinel becomes ready), then end this worker at once."""
    multiprocessing.connection.wait([sentinel])
    os._exit(1)
