"""Processes PULSE watches or starts: whether a run's process still lives, `pulse ui`'s children stopped as one,
and worker processes that never outlive the process that started them (``ordered_map``).

Both answer the same operator complaint: something was killed and something else waited for it forever. A run
whose process died must be seen as dead (``process_alive``, used by ``defs/run_launcher.py``), and stopping
``pulse ui`` must stop the webserver, the daemon, the code servers and any run they started
(``run_process_group``). ``ui_command`` and ``environment_of`` make ``pulse ui`` start those children from the
Python environment ``pulse`` runs in, whether or not it was activated.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# How long `pulse ui` lets its children stop after forwarding SIGINT or SIGTERM before it kills them.
STOP_GRACE_SECONDS = 10.0
# /proc gives a process's start time to the clock tick, from a boot time rounded to the second.
_CLOCK_SLACK_SECONDS = 2.0


def ui_command(*, port: int, host: str, python: Path = Path(sys.executable)) -> list[str]:
    """``dg dev`` (the Dagster webserver, daemon and code server) from the environment of ``python``.

    ``dg`` is the one installed beside ``python``, never one found on PATH, and ``dg dev`` starts the webserver,
    the daemon and the code server with its own interpreter (``sys.executable``), which starts the runs, so the
    whole tree runs from this one environment. ``python`` is not resolved: a virtualenv's interpreter is a
    symlink whose target lies outside the virtualenv."""
    return [str(python.parent / "dg"), "dev", "--host", host, "--port", str(port)]


def environment_of(base: Mapping[str, str], *, python: Path = Path(sys.executable)) -> dict[str, str]:
    """``base`` as if the environment of ``python`` were activated: its bin folder first on PATH, and VIRTUAL_ENV
    naming it when it is a virtualenv (else unset).

    So anything the children look up by name (``dagster``, ``python``, a run's own tools) is the same install,
    and ``dg`` does not warn that the active virtualenv differs from the project's when none was activated."""
    env = dict(base)
    env["PATH"] = os.pathsep.join([str(python.parent), *(p for p in env.get("PATH", "").split(os.pathsep) if p)])
    if (python.parent.parent / "pyvenv.cfg").is_file():  # a virtualenv: <venv>/bin/python beside <venv>/pyvenv.cfg
        env["VIRTUAL_ENV"] = str(python.parent.parent)
    else:  # not one: another virtualenv activated in the calling shell is not the one the children run from
        env.pop("VIRTUAL_ENV", None)
    return env


def process_alive(pid: int, running_at: float) -> bool:
    """Whether process ``pid`` is alive and is the process that was already running at ``running_at``.

    ``running_at`` is a Unix time at which the process was known to run (for a Dagster run, its RUN_START
    event). A process that started later only reuses the pid, so the original one is dead; a zombie (exited,
    not yet reaped) is dead too. Where /proc is missing (macOS) only the pid's existence can be checked."""
    if not Path("/proc/self/stat").exists():
        return _pid_exists(pid)
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone, or exiting while we read
        return False
    # Fields after the command name, which is in parentheses and may itself hold spaces or parentheses.
    fields = text[text.rindex(")") + 2 :].split()
    state, start_ticks = fields[0], int(fields[19])
    if state in ("Z", "X"):
        return False
    started = _boot_time() + start_ticks / os.sysconf("SC_CLK_TCK")
    return started <= running_at + _CLOCK_SLACK_SECONDS


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise RuntimeError("/proc/stat has no btime line")


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_process_group(
    command: Sequence[str], *, cwd: Path, env: Mapping[str, str], grace_seconds: float = STOP_GRACE_SECONDS
) -> int:
    """Run ``command`` in a new session (its own process group) until it ends or this process is told to stop.

    On SIGINT or SIGTERM the signal goes to the whole group (every descendant that did not start its own
    session), which then has ``grace_seconds`` to exit before the group is killed (SIGKILL). A child that ends
    by itself gets the same treatment for what it leaves behind. Returns the child's exit code, or 128 + the
    signal number when stopped by a signal (130 for SIGINT, 143 for SIGTERM), as a shell reports it.

    A new session also keeps a terminal's Ctrl-C from reaching the children directly, so each receives the
    signal once, from here."""
    received: list[int] = []
    stop_signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda signum, _frame: received.append(signum)) for s in stop_signals}
    try:
        child = subprocess.Popen(list(command), cwd=cwd, env=dict(env), start_new_session=True)
        forwarded = 0
        deadline: float | None = None
        while True:
            for signum in received[forwarded:]:
                _signal_group(child.pid, signum)
                forwarded += 1
                deadline = deadline or time.monotonic() + grace_seconds
            ended = child.poll() is not None
            if ended and not _group_alive(child.pid):
                break
            if ended and deadline is None:
                _signal_group(child.pid, signal.SIGTERM)
                deadline = time.monotonic() + grace_seconds
            if deadline is not None and time.monotonic() >= deadline:
                _signal_group(child.pid, signal.SIGKILL)
                child.wait()
                break
            time.sleep(0.1)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 + received[0] if received else child.returncode


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group has ended
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """``fn`` of each item, in the items' order: in this process when ``workers`` is 1, else in that many worker
    processes, with at most two items per worker taken from ``items`` ahead of the results (``items`` may be a
    generator reading the warehouse: it runs in this process while the workers work).

    ``fn`` and the items must pickle (a module-level function, or a ``functools.partial`` of one, over plain
    data). A worker's exception is raised here when its result is reached.

    Workers are spawned (the caller holds DuckDB's threads; forking them is unsafe), ignore Ctrl-C (the interrupt
    reaches the caller, which ends them at once) and exit as soon as the caller is gone: the spawned workers of a
    SIGKILLed parent otherwise waited forever on their task queue (measured). The feature stage's per-session
    work (``features/workers.py``) and the ingest readers (``ingest/load.py``) both run through here."""
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
