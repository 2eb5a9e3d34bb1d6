"""What a hook remembers about a session between its calls (each call is a new process): the service's decision for
the session, whether the user was shown how to rate, whether the rating came, when the log was last handed over.

Why remember: the service decides once per session (``CONTRACT``: a later ask returns the same answer), so a hook
that knows the decision asks no more; the prompt to rate is shown once per asked session (at the first turn the
service says ask), not at every turn; a rating typed at the next prompt needs the segment that was asked. One small
JSON file per agent and session under ``PULSE_HOOK_STATE`` (``settings.hook_settings``), named by a digest of the
session id (any id is a safe file name that way), written to a temporary name and renamed (a killed hook leaves the
old state or the new, never half).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class SessionState:
    session_id: str
    decided: bool = False  # the service answered an ask for this session
    ask: bool = False
    probability: float | None = None
    policy_version: str | None = None
    segment_index: int | None = None  # the segment the user was asked to rate
    rate_url: str | None = None
    shown: bool = False
    rated: bool = False
    handed_at: float | None = None  # when the log was last copied into the drop folder (time.time())


def state_file(directory: Path, agent: str, session_id: str) -> Path:
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return directory / agent / f"{digest}.json"


def load(directory: Path, agent: str, session_id: str) -> SessionState:
    """The session's state; a fresh one when there is none or it cannot be read (a hook never fails on it)."""
    try:
        data = json.loads(state_file(directory, agent, session_id).read_text(encoding="utf-8"))
        known = {k: v for k, v in data.items() if k in SessionState.__dataclass_fields__}
        state = SessionState(**known)
    except (OSError, ValueError, TypeError):
        return SessionState(session_id)
    return state if state.session_id == session_id else SessionState(session_id)


def save(directory: Path, agent: str, state: SessionState) -> None:
    path = state_file(directory, agent, state.session_id)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(asdict(state), file)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
