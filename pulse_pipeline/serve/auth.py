"""Who may write: bearer tokens, the ``/rate`` link's signature, and how often (a token bucket per caller).

- **Tokens** come from the file PULSE_SERVE_TOKENS names (``settings.read_tokens``). A request's token is compared
  with *every* token by ``hmac.compare_digest`` (time independent of where the strings differ), and the results
  are combined without stopping early, so the time says nothing about which token, or how much of one, matched.
  Unset: no tokens, and ``pulse serve`` listens on loopback only (``cli.py`` refuses another host).
- **Signatures**: the ``/rate/{session_id}`` link carries ``sig`` = HMAC-SHA256 of the session id under a secret
  kept in ``PULSE_HOME/serve/secret`` (32 random bytes, created at first start with mode 0600). The page posts it
  back as ``signature``; it authorizes ratings of that one session, compared with ``hmac.compare_digest``.
- **Rate limit**: ``rate`` requests a second per caller (a token, a signed session, or a client address without
  auth), with a burst of ``2 x rate``; past it a 429 with ``Retry-After``.

Tokens and signatures are never logged: the service's own log lines name a caller by its token's position in the
file (``token #2``), and uvicorn's access log (which prints query strings) is off.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path

from .validation import Rejected

SECRET_BYTES = 32


class Tokens:
    """The accepted bearer tokens (None: no auth)."""

    def __init__(self, tokens: tuple[str, ...] | None):
        self._tokens = None if tokens is None else [t.encode() for t in tokens]

    @property
    def required(self) -> bool:
        return self._tokens is not None

    def caller(self, authorization: str | None) -> str | None:
        """``token #i`` for a valid ``Bearer`` header, None when there is none; Rejected (401) for a wrong one."""
        if authorization is None:
            return None
        scheme, _, given = authorization.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise Rejected(401, "unauthorized", "the Authorization header is not 'Bearer <token>'", _CHALLENGE)
        if self._tokens is None:
            return "anyone"  # no tokens configured: a header is allowed and means nothing
        presented = given.strip().encode("utf-8", "surrogateescape")
        found = -1
        for i, token in enumerate(self._tokens):  # every token compared, none skipped
            if hmac.compare_digest(presented, token):
                found = i
        if found < 0:
            raise Rejected(401, "unauthorized", "the bearer token is not one of PULSE_SERVE_TOKENS", _CHALLENGE)
        return f"token #{found + 1}"


_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="pulse"'}


def load_secret(path: Path) -> bytes:
    """The signing secret, created (mode 0600, written whole) at first start."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, secrets.token_bytes(SECRET_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):  # never replaces a secret another start wrote meanwhile
            os.link(partial, path)
        partial.unlink()
    secret = path.read_bytes()
    if len(secret) < 16:
        raise ValueError(f"{path}: the signing secret is {len(secret)} bytes, too short; delete it to make a new one")
    return secret


def signature(secret: bytes, session_id: str) -> str:
    """HMAC-SHA256 of the session id, hex."""
    return hmac.new(secret, session_id.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def signature_valid(secret: bytes, session_id: str, given: str | None) -> bool:
    if not given:
        return False
    return hmac.compare_digest(signature(secret, session_id).encode(), given.encode("utf-8", "surrogateescape"))


class RateLimiter:
    """A token bucket per caller: ``rate`` a second, ``burst`` at once; rate 0 allows everything."""

    def __init__(self, rate: float, burst: float | None = None, clock=time.monotonic, max_callers: int = 100_000):
        self.rate, self.burst = rate, burst if burst is not None else max(1.0, 2 * rate)
        self.clock, self.max_callers = clock, max_callers
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens, at)

    def check(self, caller: str) -> None:
        """Take one request from ``caller``'s bucket, or Rejected (429) with the seconds until the next."""
        if self.rate <= 0:
            return
        now = self.clock()
        tokens, at = self._buckets.get(caller, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens < 1.0:
            self._buckets[caller] = (tokens, now)
            wait = (1.0 - tokens) / self.rate
            raise Rejected(
                429,
                "rate_limited",
                f"more than {self.rate:g} requests a second from this caller: retry in {wait:.2f} s",
                {"Retry-After": str(max(1, round(wait + 0.5)))},
            )
        if len(self._buckets) >= self.max_callers and caller not in self._buckets:
            self._buckets.clear()  # many one-off callers (signed sessions): forget them rather than grow
        self._buckets[caller] = (tokens - 1.0, now)
