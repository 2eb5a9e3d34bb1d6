"""`pulse ui` stops every process it started (webserver, daemon, code servers) on SIGINT and SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes() -> dict[int, tuple[int, str, str]]:
    """Every live process: pid -> (parent pid, state, start time in clock ticks). Zombies count as gone."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended while we looked
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if fields[0] not in ("Z", "X"):
            table[int(stat.parent.name)] = (int(fields[1]), fields[0], fields[19])
    return table


def _descendants(root: int) -> dict[int, str]:
    """The live descendants of ``root`` (pid -> start time, so a reused pid is not mistaken for one of them)."""
    table = _processes()
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _, started) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = started
                frontier.append(pid)
    return found


def _still_running(recorded: dict[int, str]) -> list[int]:
    table = _processes()
    return [pid for pid, started in recorded.items() if pid in table and table[pid][2] == started]


def stop_and_check_gone(ui: subprocess.Popen, signum: int, code: int) -> dict[int, str]:
    """Send ``signum`` to `pulse ui` and assert it exits with ``code`` and leaves none of its processes running
    (at least dg dev, the webserver, the daemon and a code server were there). Returns the processes it had."""
    children = _descendants(ui.pid)
    assert len(children) >= 4, children
    ui.send_signal(signum)
    assert ui.wait(timeout=15) == code
    deadline = time.monotonic() + 15
    while _still_running(children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _still_running(children) == []
    return children


def kill_what_is_left(ui: subprocess.Popen) -> None:
    """After a test, pass or fail: kill `pulse ui` and every process under it still alive (a failure before the
    stop must not leave a webserver and a daemon running)."""
    children = _descendants(ui.pid) if ui.poll() is None else {}
    ui.kill()
    ui.wait()
    for pid in _still_running(children):
        os.kill(pid, signal.SIGKILL)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc (Linux)")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143)])  # SIGINT (Ctrl-C): tests/test_ui.py
def test_pulse_ui_stops_every_child(tmp_path, signum, code):
    """The issue's reproduction: `pulse ui` used to leave its children running on SIGTERM, and on SIGINT too
    (Ctrl-C is checked with the rest of the UI in tests/test_ui.py, which starts it once for both)."""
    port = _free_port()
    # without the virtualenv on PATH, as from a shell that never activated it
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) != VENV_BIN)
    env = {**os.environ, "PULSE_HOME": str(tmp_path / "home"), "PATH": path}
    env.pop("DAGSTER_HOME", None)
    log = (tmp_path / "ui.log").open("w")
    ui = subprocess.Popen(
        [str(VENV_BIN / "pulse"), "ui", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 90
        while not _answers(f"http://127.0.0.1:{port}/server_info"):
            assert ui.poll() is None, f"pulse ui exited with {ui.returncode}: {(tmp_path / 'ui.log').read_text()}"
            assert time.monotonic() < deadline, "the Dagster UI did not answer within 90 s"
            time.sleep(1)
        stop_and_check_gone(ui, signum, code)
    finally:
        kill_what_is_left(ui)
        log.close()


STUBBORN = """
import sys
from pathlib import Path
from pulse_pipeline.processes import run_process_group
# a shell that ignores SIGTERM, as do the two sleeps it starts (an ignored signal is inherited)
command = ["sh", "-c", "trap '' TERM; sleep 60 & sleep 60 & wait"]
sys.exit(run_process_group(command, cwd=Path("."), env={"PATH": "/usr/bin:/bin"}, grace_seconds=1.0))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc (Linux)")
def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period():
    runner = subprocess.Popen([sys.executable, "-c", STUBBORN])
    children: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 30
        while len(children) < 3:  # the shell and its two sleeps
            assert time.monotonic() < deadline, "the shell did not start its sleeps"
            time.sleep(0.1)
            children = _descendants(runner.pid)
        started = time.monotonic()
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=10) == 143
        assert 1.0 <= time.monotonic() - started < 5.0  # the grace period, then SIGKILL
        time.sleep(0.5)
        assert _still_running(children) == []
    finally:
        runner.kill()
        runner.wait()
        for pid in _still_running(children):
            os.kill(pid, signal.SIGKILL)
