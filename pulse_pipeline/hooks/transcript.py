"""What a hook reads off the agent's own log when a turn ends: the work segment that just ended and the ask policy's
features, computed by PULSE's own adapters and segment rule, so the numbers are those ingest will compute later.

Rules (``features/event_features.py`` defines each column over a staged session; this is the same count over the
events read so far):

- the events are those ``ingest.adapter.read_events`` makes of the file's JSON lines with the agent's adapter
  (``ingest/claude_code.py``, ``ingest/codex.py``); a line that is not JSON (the agent is writing it) is skipped;
- ``segment_index``: the last work segment of ``ingest.segments.segment_events``, counted from 0, the one that just
  ended (None when the log holds no user message yet). The user's message that opened it is written before the
  turn ends, so a log that lags the agent's last reply still gives the right segment;
- ``user_message_count``: user ``message`` actions; ``n_segments``: the segments; ``file_edits``: ``edit`` and
  ``write`` actions; ``failed_commands``: ``run`` observations with an exit code other than 0;
  ``test_runs``: ``run`` actions whose command ``features.shell.is_test_command`` accepts;
  ``duration_seconds``: the last minus the first event timestamp (absent without timestamps).

A log larger than ``MAX_LOG_BYTES`` is not read (the hook must stay fast): the ask goes without features, which the
policy reads as missing values (z = 0). Import cost: the adapters and ``features.shell`` only (no polars, pyarrow or
DuckDB); ``bench/hooks.py`` prints the hook's import and run time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..ingest.adapter import Adapter, read_events
from ..ingest.segments import is_user_message, segment_events

MAX_LOG_BYTES = 64 << 20


@dataclass(frozen=True)
class Progress:
    """A session as its log stands when a turn ends."""

    session_id: str | None  # the id the log itself names (Claude Code's sessionId, Codex's session_meta)
    segment_index: int | None
    features: dict[str, float] = field(default_factory=dict)


def _lines(path: Path) -> Iterator[Any]:
    with path.open("rb") as file:
        for line in file:
            if not line.strip():
                continue
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError:  # a line still being written, or not JSON: ingest quarantines it later
                continue


def _instant(stamp: str | None) -> datetime | None:
    """An event's time as DuckDB casts it to TIMESTAMP: an offset applied (UTC), no zone kept. Differences of these
    are exact to the microsecond, as DuckDB's ``date_diff`` is (epoch floats are not: 6.059999942779541 s)."""
    if not stamp:
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def read_progress(path: Path, adapter: Adapter) -> Progress:
    """The segment that ended and the features of the session logged at ``path``; an ``OSError`` when the file
    cannot be read, an empty ``Progress`` when it is too large."""
    if path.stat().st_size > MAX_LOG_BYTES:
        return Progress(None, None)
    from ..features.shell import is_test_command

    events, _ = read_events(adapter, _lines(path))
    segments = segment_events(events)
    stamps = [s for s in (_instant(e.timestamp) for e in events) if s is not None]
    features: dict[str, float] = {
        "user_message_count": sum(1 for e in events if is_user_message(e)),
        "n_segments": segments.n_segments,
        "file_edits": sum(1 for e in events if e.kind == "action" and e.name in ("edit", "write")),
        "failed_commands": sum(
            1 for e in events if e.kind == "observation" and e.name == "run" and e.exit_code not in (None, 0)
        ),
        "test_runs": sum(
            1 for e in events if e.kind == "action" and e.name == "run" and is_test_command(e.command or e.text or "")
        ),
    }
    if stamps:  # one timestamp: 0, as the pipeline's max - min
        features["duration_seconds"] = (max(stamps) - min(stamps)).total_seconds()
    last = segments.n_segments - 1 if segments.n_segments else None
    return Progress(adapter.session_id(), last, features)
