"""What the service remembers between requests and across restarts: each session's ask decision and each stored
rating's id (its idempotency key), rebuilt from the journal at start (``remember``) and kept as requests come.

**Once per session.** Staging reads one ask probability per session (the first), so the policy decides once: the
first ask of a session flips the coin, and every later ask of it gets the same ``ask``, ``probability`` and
``policy_version`` without a new coin. The decision is entered here *before* its journal write is awaited, so two
asks of one session at once flip one coin; the second waits for the same write (``Decision.durable``) before it
answers, so no answer ever rests on a decision a crash could forget.

**Stored once.** A rating's id is its idempotency key when it has one (else a fresh uuid). A key seen before is a
duplicate: answered ``duplicate: true`` and not journaled again, once the first is durable. The same key with
another content (session, segment, stars, comment, event) is a 409: the client reuses a key it should not.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass
class Decision:
    ask: bool
    probability: float
    policy_version: str
    durable: asyncio.Future | None = None  # None once known to be on disk (replayed, or its write awaited)


@dataclass
class Stored:
    digest: str  # of the rating's content, to tell a retry from a reused key
    durable: asyncio.Future | None = None


def content_digest(row: dict[str, Any]) -> str:
    """What makes two ratings the same rating: session, segment, stars, comment, event."""
    keys = ("session_id", "segment_index", "rating", "reason", "event_id")
    return hashlib.sha256(orjson.dumps([row.get(k) for k in keys])).hexdigest()[:16]


class Memory:
    def __init__(self) -> None:
        self.decisions: dict[str, Decision] = {}
        self.ratings: dict[str, Stored] = {}

    def remember(self, record: dict[str, Any]) -> None:
        """One journal record, replayed at start."""
        if record["kind"] == "decision":
            self.decisions.setdefault(
                record["session_id"], Decision(record["ask"], record["probability"], record["policy_version"])
            )
        elif record["kind"] == "rating":
            self.ratings.setdefault(record["row"]["id"], Stored(record["digest"]))
