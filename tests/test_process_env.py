"""PULSE runs where ``HOME`` is unset (cron, a bare systemd unit, ``env -i``): DuckDB's ``LOAD ducklake`` failed
there with "Can't find the home directory at ''" and every command that opens the lake stopped
(``process_env.py``)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys

from pulse_pipeline.process_env import ensure_home_variable


def test_an_unset_home_becomes_the_users_home_from_the_password_database(monkeypatch):
    monkeypatch.delenv("HOME", raising=False)
    ensure_home_variable()
    assert os.environ["HOME"] == pwd.getpwuid(os.getuid()).pw_dir


def test_a_set_home_is_left_as_it_is(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    ensure_home_variable()
    assert os.environ["HOME"] == str(tmp_path)


def test_the_lake_opens_in_a_process_started_without_home(tmp_path):
    code = (
        "from pathlib import Path\n"
        "from pulse_pipeline.connections import connect\n"
        f"con = connect(Path({str(tmp_path / 'pulse-work.duckdb')!r}))\n"
        "print(con.execute('SELECT 41 + 1').fetchone()[0])\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PULSE_HOME": str(tmp_path)}  # no HOME, as cron starts a job
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "42"
