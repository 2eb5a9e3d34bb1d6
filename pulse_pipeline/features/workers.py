"""The feature stage's per-session Python work on every usable core: worker processes over batches of sessions.

Why: the heuristic annotator's rules and the VADER scores of the sentiment columns are pure Python, one session at
a time. A run executes its steps one after another (one writer per PULSE_HOME), so inside a step that work used
one core of the machine while DuckDB, before and after it, uses them all. At the paper's scale (36 000 sessions,
two cores) ``event_features`` and ``annotations`` took 40.0 s on one core; with workers 21.4 s, the same 41 CPU
seconds (``tests/test_features_cores.py``: the same rows).

How (``processes.ordered_map``, which the ingest readers use too): this process reads a batch's rows from the
warehouse, hands them to a worker process as plain data (an Arrow table), and writes what comes back, in the
batches' order, so the rows are the ones one process writes. Workers never see the warehouse. At most two batches
per worker are in flight, so memory holds a few batches whatever the warehouse's size. Workers are spawned (this
process holds DuckDB's threads; forking them is unsafe), ignore Ctrl-C (the interrupt reaches this process, which
ends them and drops the batches in flight: the step's transaction writes nothing anyway) and exit as soon as this
process is gone, so a killed run leaves no process behind (measured: without that, the spawned workers of a
SIGKILLed parent wait forever).

When: starting two workers costs ~0.4 s and ~1 CPU second (two interpreters importing the annotator, polars and
VADER), and the workers save ~0.4 ms of wall time per session for the annotator, ~0.15 ms for the sentiment columns
(measured at 36 000 sessions); so fewer than ``PARALLEL_SESSIONS`` sessions (a day's drop of a few hundred) stay in
this process. Memory: a worker peaked at ~200 MiB, the batches being ``TASK_SESSIONS`` sessions at any scale.
"""

from __future__ import annotations

from ..settings import usable_cores

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
