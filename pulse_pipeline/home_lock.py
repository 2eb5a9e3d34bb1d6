"""One writer per PULSE_HOME at a time, on one machine: a lock file every CLI run that writes takes (issue 34).

Why: with a PostgreSQL lake catalog no working file is opened, so nothing kept two ``pulse ingest`` of one home
apart. DuckLake only finds a conflict when two transactions delete the same table's rows; two first runs each
computing a per-session table for sessions it had not computed delete nothing and both insert, so
``features.event_features`` and the annotations held every session twice (1 000 rows for 500 sessions), with the
bookkeeping saying each was computed (``incremental.py``), and every later run kept them. With an embedded home
two first runs created the Dagster instance's SQLite tables at once and both failed ("table runs already exists").

So ``writer_lock`` is held for a CLI run's whole work (``runs.ingest``, ``runs.materialize``, ``runs.remove_drop``)
and for creating the Dagster instance's storage (``runs.instance_for``): the second run waits, saying for whom,
then finds what the first made. An ``fcntl`` lock on ``PULSE_HOME/.work/writer.lock``: the kernel releases it when
its process ends however it ends (kill -9 included), so a dead run never leaves the home locked. It is re-entrant
within a process (the CLI's run takes it, then the instance it opens). Runs on other machines sharing one
PostgreSQL catalog are not covered: their per-session tables are repaired by the next refresh instead
(``incremental.refreshing`` recomputes a session recorded twice).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

LOCK_FILE = "writer.lock"  # in the working database's folder, PULSE_HOME/.work/

_held: dict[Path, int] = {}  # lock file -> how many times this process holds it
_guard = threading.Lock()


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # stdout may be a run's JSON (`pulse ingest --json`)


@contextlib.contextmanager
def writer_lock(folder: Path, say: Callable[[str], None] | None = None, name: str = LOCK_FILE) -> Iterator[None]:
    """Hold the home's writer lock (``folder / name``) while the body runs, waiting for another process that holds
    it (``say`` is told once whom it waits for; default stderr)."""
    path = (folder / name).resolve()
    with _guard:
        if _held.get(path):
            _held[path] += 1
            nested = True
        else:
            nested = False
    if nested:
        try:
            yield
        finally:
            with _guard:
                _held[path] -= 1
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            (say or _to_stderr)(f"waiting for another PULSE run in this home to finish (pid {holder}, {path})")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        with _guard:
            _held[path] = 1
        try:
            yield
        finally:
            with _guard:
                _held.pop(path, None)
    finally:
        os.close(fd)  # releases the lock
