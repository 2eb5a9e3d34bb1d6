"""The rating service's state and its two writes (an ask decision, a rating), apart from HTTP (``app.py``).

Files, under ``PULSE_HOME``: ``serve/journal/`` (``journal.py``), ``serve/rolled.json`` (the roll watermark,
``roller.py``), ``serve/secret`` (the ``/rate`` links' signing secret, ``auth.py``), ``serve/lock`` (one service per
home: two would append to one journal), and the drops it rolls, ``drops/serve-YYYY-MM-DD/roll-<n>.jsonl``.

A start (``open``) takes the lock, finishes an interrupted roll, replays the journal into ``memory.Memory`` (every
decision, every stored rating id) and hands the records past the watermark to the roller; a stop (``close``) writes
what waits to the journal and rolls everything. Nothing is answered 2xx before its record is fsynced.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..settings import ServeSettings
from .auth import RateLimiter, Tokens, load_secret, signature, signature_valid
from .journal import Journal, JournalError
from .memory import Decision, Memory, Stored, content_digest
from .metrics import Metrics
from .policy import PolicySource
from .roller import Roller
from .validation import AskRequest, RatingRequest, Rejected

log = logging.getLogger("pulse.serve")


@dataclass(frozen=True)
class AskAnswer:
    ask: bool
    probability: float
    policy_version: str
    rate_url: str | None

    def as_json(self) -> dict[str, Any]:
        return vars(self)


@dataclass(frozen=True)
class RatingAnswer:
    duplicate: bool
    unknown_session: bool

    def as_json(self) -> dict[str, Any]:
        return {"stored": True, "duplicate": self.duplicate, "unknown_session": self.unknown_session}


def _unavailable(error: BaseException) -> Rejected:
    return Rejected(503, "journal_failed", f"not stored, retry later: {error}")


class Service:
    def __init__(
        self,
        home: Path,
        settings: ServeSettings,
        public_url: str,
        rng: random.Random | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self.home = home
        self.folder = home / "serve"
        self.settings = settings
        self.public_url = public_url.rstrip("/")
        self.rng = rng or random.SystemRandom()
        self.clock = clock
        self.memory = Memory()
        self.metrics = Metrics()
        self.roller = Roller(
            home / "drops", self.folder / "rolled.json", settings.roll_records, settings.roll_seconds, clock
        )
        self.journal = Journal(self.folder / "journal", on_durable=self.roller.add)
        self.policy = PolicySource(home / "ask_policy")
        self.tokens = Tokens(settings.tokens)
        self.limiter = RateLimiter(settings.rate_limit)
        self.secret = b""
        self._lock_fd: int | None = None

    # --- start and stop ------------------------------------------------------------------------------------

    def open(self) -> Service:
        """Lock, recover, replay, start the threads; nothing when already open."""
        if self._lock_fd is not None:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.home / "drops").mkdir(parents=True, exist_ok=True)
        self._lock()
        self.secret = load_secret(self.folder / "secret")
        self.roller.recover()
        replayed = []
        for record in self.journal.replay():
            self.memory.remember(record)
            if record["seq"] > self.roller.state.rolled_through:
                replayed.append(record)
        self.roller.add(replayed)
        self.journal.start()
        self.roller.start()
        log.info(
            "journal %s: %d records (%d sessions decided, %d ratings), %d to roll into %s",
            self.journal.folder,
            self.journal.last_seq,
            len(self.memory.decisions),
            len(self.memory.ratings),
            len(replayed),
            self.home / "drops",
        )
        return self

    def _lock(self) -> None:
        fd = os.open(self.folder / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RuntimeError(
                f"another pulse serve (pid {holder}) already serves {self.home}: one service per PULSE_HOME"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def close(self) -> None:
        """Journal what waits, roll everything, release the lock; nothing when not open."""
        if self._lock_fd is None:
            return
        self.journal.close()
        try:
            self.roller.close()
        except OSError as error:  # a full disk: the journal keeps every record, and the next start rolls them
            log.error("the last roll failed (%s): the next start rolls from the journal", error)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        log.info("stopped; every record through seq %d is in a drop file", self.roller.state.rolled_through)

    # --- who asks ------------------------------------------------------------------------------------------

    def caller(self, authorization: str | None, client: str, rating: RatingRequest | None = None) -> str:
        """The caller's name for the rate limit and the log (never a token), or Rejected (401, 403)."""
        by_token = self.tokens.caller(authorization)
        if by_token is not None:
            return by_token
        if rating is not None and rating.signature is not None:
            if not signature_valid(self.secret, rating.session_id, rating.signature):
                raise Rejected(403, "bad_signature", "the signature does not match this session's rating link")
            return f"link of {rating.session_id}"
        if self.tokens.required:
            raise Rejected(
                401,
                "unauthorized",
                "no Authorization header: send 'Bearer <token>' (a token of PULSE_SERVE_TOKENS)",
                {"WWW-Authenticate": 'Bearer realm="pulse"'},
            )
        return f"client {client}"

    def rate_url(self, session_id: str, segment_index: int | None) -> str:
        query = "" if segment_index is None else f"segment={segment_index}&"
        sig = signature(self.secret, session_id)
        return f"{self.public_url}/rate/{quote(session_id, safe='')}?{query}sig={sig}"

    # --- the two writes ------------------------------------------------------------------------------------

    async def ask(self, request: AskRequest) -> AskAnswer:
        """The session's decision: the first ask flips the coin (journaled before the answer), later ones reuse it."""
        decision = self.memory.decisions.get(request.session_id)
        if decision is not None:
            await self._durable(decision)
            self.metrics.count("asks", "repeat")
        else:
            policy = self.policy.current()
            q = min(1.0, max(0.0, policy.probability(request.features)))
            ask = self.rng.random() < q
            decision = Decision(ask, q, policy.version, asyncio.get_running_loop().create_future())
            self.memory.decisions[request.session_id] = decision
            now = self.clock().isoformat()
            row = None
            if ask:
                row = {"id": uuid.uuid4().hex, "session_id": request.session_id}
                if request.segment_index is not None:
                    row["segment_index"] = request.segment_index
                row |= {"ask_probability": q, "created_at": now, "policy_version": policy.version}
            record = {
                "kind": "decision",
                "session_id": request.session_id,
                "segment_index": request.segment_index,
                "ask": ask,
                "probability": q,
                "policy_version": policy.version,
                "features": request.features,
                "user_id": request.user_id,
                "at": now,
                "row": row,
            }
            await self._journal(record, decision, lambda: self.memory.decisions.pop(request.session_id, None))
            self.metrics.count("asks", "ask" if ask else "skip")
        url = self.rate_url(request.session_id, request.segment_index) if decision.ask else None
        return AskAnswer(decision.ask, decision.probability, decision.policy_version, url)

    async def rate(self, request: RatingRequest, caller: str) -> RatingAnswer:
        row: dict[str, Any] = {"id": request.idempotency_key or uuid.uuid4().hex, "session_id": request.session_id}
        if request.segment_index is not None:
            row["segment_index"] = request.segment_index
        if request.event_id is not None:
            row["event_id"] = request.event_id
        row["rating"] = request.stars
        if request.comment is not None:
            row["reason"] = request.comment
        digest = content_digest(row)
        unknown = request.session_id not in self.memory.decisions
        stored = self.memory.ratings.get(row["id"])
        if stored is not None:
            await self._durable(stored)
            if stored.digest != digest:
                raise Rejected(
                    409,
                    "key_reused",
                    "this idempotency key was stored with another rating: use a new key for a new rating",
                )
            self.metrics.count("ratings", "duplicate")
            return RatingAnswer(duplicate=True, unknown_session=unknown)
        stored = Stored(digest, asyncio.get_running_loop().create_future())
        self.memory.ratings[row["id"]] = stored
        row["created_at"] = self.clock().isoformat()
        record = {"kind": "rating", "row": row, "digest": digest, "shape": request.shape, "caller": caller}
        if request.metadata is not None:
            record["metadata"] = request.metadata
        await self._journal(record, stored, lambda: self.memory.ratings.pop(row["id"], None))
        self.metrics.count("ratings", "stored")
        if unknown:
            self.metrics.count("unknown_sessions")
        return RatingAnswer(duplicate=False, unknown_session=unknown)

    async def _journal(self, record: dict[str, Any], entry: Decision | Stored, forget: Callable[[], Any]) -> None:
        """Journal ``record``; ``entry`` (already in memory, so a concurrent request waits on it) becomes durable,
        or is forgotten when the disk fails, and the request gets a 503 (not stored: retry)."""
        durable = entry.durable
        assert durable is not None
        try:
            await self.journal.append(record)
        except JournalError as error:
            forget()
            durable.set_result(False)
            raise _unavailable(error) from None
        entry.durable = None
        durable.set_result(True)

    @staticmethod
    async def _durable(entry: Decision | Stored) -> None:
        """Wait until ``entry``'s journal write is on disk (another request made it); 503 if it failed."""
        if entry.durable is not None and not await asyncio.shield(entry.durable):
            raise _unavailable(JournalError("the journal write of the first request failed"))

    # --- for /healthz and /metrics -------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return {
            "ok": self.roller.last_error is None and self.journal.failed is None,
            "journal_error": self.journal.failed,
            "journal_seq": self.journal.last_seq,
            "rolled_through": self.roller.state.rolled_through,
            "waiting_to_roll": self.roller.waiting,
            "rolls": self.roller.state.rolls,
            "last_roll": self.roller.last_roll,
            "roll_error": self.roller.last_error,
            "policy_version": self.policy.current().version,
            "sessions_decided": len(self.memory.decisions),
            "ratings_stored": len(self.memory.ratings),
        }

    def gauges(self) -> dict[str, tuple[float, str]]:
        return {
            "journal_seq": (self.journal.last_seq, "the last journal record's seq"),
            "journal_fsyncs": (self.journal.fsyncs, "fsyncs of the journal (group commits) since start"),
            "waiting_to_roll": (self.roller.waiting, "durable records not yet in a drop file"),
            "rolls": (self.roller.state.rolls, "drop files rolled in this home"),
        }
