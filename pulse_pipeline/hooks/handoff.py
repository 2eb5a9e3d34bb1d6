"""Handing an agent's log to PULSE's drop folder, so a session and its rating arrive together.

The log is copied to a hidden name in ``PULSE_HOME/drops/`` (``.<name>.tmp``: the drop sensor never reads names
starting with ``.``), fsynced, and renamed to ``<agent>-<session id>.jsonl`` (``ingest/drop_names.py``: one plain
entry; characters a drop name cannot hold become ``_``). One file is one session for ingest (its id from the
log's content, so the name only keeps drops apart). Handing the same session again replaces its drop file: the
sensor sees a new fingerprint and loads that drop again whole, so the later, longer log replaces the earlier
one's rows (the drop's partition), never adds a second copy of the session.

When to hand it over is the caller's choice (``claude_code.py``: at ``SessionEnd``, once, the whole session;
``codex.py``: at a turn's end, at most every ``codex.HANDOFF_INTERVAL`` seconds, since Codex says nothing when a
session ends): a growing log handed at every turn would make the pipeline load that session again at every turn.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..ingest.drop_names import why_bad_drop_name

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def drop_name(agent: str, session_id: str) -> str:
    """``<agent>-<session id>.jsonl`` with every character a drop name should not hold replaced by ``_``."""
    name = f"{agent}-{_UNSAFE.sub('_', session_id)[:180]}.jsonl"
    problem = why_bad_drop_name(name, "the drop's name")
    if problem:
        raise ValueError(problem)
    return name


def hand_over(log: Path, drops: Path, agent: str, session_id: str) -> Path:
    """Copy ``log`` into ``drops`` atomically under the session's drop name; returns the drop's path."""
    drops.mkdir(parents=True, exist_ok=True)
    target = drops / drop_name(agent, session_id)
    temporary = drops / f".{target.name}.tmp"
    try:
        with log.open("rb") as source, temporary.open("wb") as copy:
            shutil.copyfileobj(source, copy, 1 << 20)
            copy.flush()
            os.fsync(copy.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return target
