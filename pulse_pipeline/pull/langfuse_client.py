"""Langfuse's public API, one page at a time: authentication, retries, and a one-line reason when it refuses.

Checked against langfuse/langfuse at 62751446149b702b419a9292ddfc2280cdf74b8c:

- ``GET /api/public/v2/observations`` (``fern/apis/server/definition/observations.yml``,
  ``web/src/pages/api/public/v2/observations/index.ts``): query ``fields`` (groups ``core, basic, time, io,
  metadata, model, usage, prompt, metrics, trace_context``; ``core`` and ``basic`` when not given), ``limit`` (at
  most 1000, default 50), ``cursor``, ``fromStartTime`` (inclusive), ``toStartTime`` (exclusive); the answer is
  ``{"data": [...], "meta": {"cursor": "..."}}``, ``meta.cursor`` absent on the last page. Rows come newest first
  (``start_time DESC``, then the trace, then the id: ``packages/shared/src/server/repositories/events.ts``).
- ``GET /api/public/v3/scores`` (``fern/apis/server/definition/scores-v3.yml``,
  ``web/src/pages/api/public/v3/scores/index.ts``): query ``fields`` (``details, subject, annotation``), ``limit``
  (at most 100: more is a 400), ``cursor`` (base64url), ``fromTimestamp`` (inclusive), ``toTimestamp``
  (exclusive); the answer is ``{"data": [...], "meta": {"limit": n, "cursor": "..."}}``, newest first.

Authentication is HTTP basic with the project's public key as user and secret key as password. Neither key is
ever put in a message, a log line or a URL.

Retries: a 429 or a 5xx answer, a timeout or a dropped connection is asked again, up to ``RetryPolicy.attempts``
times in all, after the wait the answer's ``Retry-After`` names (seconds or an HTTP date), else an exponential
backoff (1 s, 2 s, 4 s, ... at most ``RetryPolicy.cap``). A ``Retry-After`` longer than ``max_retry_after`` is
not waited for: the pull stops saying when to try again (its stored cursor resumes it then); nor is a wait that
would pass the pull's ``deadline`` (the sensor's time budget). A 401 or 403 is the
keys (one line saying which variables to check), any other 4xx a question Langfuse refuses (its message, one
line); a redirect is refused too, since following it would send the keys to another address.
"""

from __future__ import annotations

import base64
import email.utils
import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from ..settings import LANGFUSE_HOST, LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY

OBSERVATIONS_PATH = "/api/public/v2/observations"
SCORES_PATH = "/api/public/v3/scores"
MESSAGE_CHARS = 300  # of a refusal's body, in the one-line error


class PullError(RuntimeError):
    """A pull that cannot go on, said in one line (the CLI prints it as ``pulse pull: ...``)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait before asking again (module docstring)."""

    attempts: int = 6  # requests in all for one page
    base: float = 1.0  # seconds before the first retry without Retry-After
    factor: float = 2.0
    cap: float = 60.0
    max_retry_after: float = 300.0

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1, 2, ...) when the answer names none."""
        return min(self.cap, self.base * self.factor ** (retry - 1))


def retry_after_seconds(value: str | None, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> float | None:
    """A ``Retry-After`` header's wait in seconds (a number, or an HTTP date from now; never below 0), None when
    absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - now()).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are answered, not followed: urllib would send the Authorization header to the new address."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102 - urllib's hook
        return None


def _message(body: bytes) -> str:
    """What a refusal's body says, in one short line (Langfuse answers ``{"message": ...}`` or ``{"error": ...}``)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        for key in ("message", "error", "detail"):
            if isinstance(parsed.get(key), str) and parsed[key].strip():
                text = parsed[key]
                break
    text = " ".join(text.split())
    return text[:MESSAGE_CHARS] + ("..." if len(text) > MESSAGE_CHARS else "")


class LangfuseClient:
    """GET pages of Langfuse's public API (module docstring). ``sleep`` and ``say`` are the waits and the lines
    about retries (tests pass their own, and no test waits for real)."""

    def __init__(
        self,
        host: str,
        public_key: str,
        secret_key: str,
        *,
        timeout: float = 60.0,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.host = host.rstrip("/")
        token = base64.b64encode(f"{public_key}:{secret_key}".encode()).decode("ascii")
        self._authorization = f"Basic {token}"
        self.timeout = timeout
        self.retry = retry
        self.sleep = sleep
        self.say = say
        self.requests = 0  # HTTP requests made, retries included
        self.deadline: float | None = None  # a time.monotonic() no wait may pass (the sensor's budget)
        self._opener = urllib.request.build_opener(_NoRedirect)

    def __repr__(self) -> str:  # never the keys
        return f"LangfuseClient({self.host!r})"

    def url(self, path: str, params: Mapping[str, object]) -> str:
        """The request's URL: the host, the path, the parameters that are set (no credentials in it)."""
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        return f"{self.host}{path}" + (f"?{query}" if query else "")

    def get_page(self, path: str, params: Mapping[str, object]) -> tuple[list, str | None]:
        """One page: its ``data`` list and ``meta.cursor`` (None on the last page). Raises ``PullError``."""
        body = self.get(path, params)
        data = body.get("data") if isinstance(body, dict) else None
        meta = body.get("meta") if isinstance(body, dict) else None
        if not isinstance(data, list) or not isinstance(meta, dict):
            raise PullError(
                f"Langfuse at {self.host} answered GET {path} with JSON that is not a page ({{data: [...], meta:"
                " {...}}}): is PULSE_LANGFUSE_HOST the Langfuse base URL?"
            )
        cursor = meta.get("cursor")
        if cursor is not None and (not isinstance(cursor, str) or not cursor):
            raise PullError(f"Langfuse at {self.host} answered GET {path} with a cursor that is not text: {cursor!r}")
        return data, cursor

    def get(self, path: str, params: Mapping[str, object]) -> object:
        """The JSON answer to ``GET path?params``, retried as the module docstring says."""
        url = self.url(path, params)
        request = urllib.request.Request(
            url,
            headers={
                "Authorization": self._authorization,
                "Accept": "application/json",
                "User-Agent": "pulse-pipeline (pulse pull langfuse)",
            },
        )
        for attempt in range(1, self.retry.attempts + 1):
            self.requests += 1
            wait: float | None
            try:
                with self._opener.open(request, timeout=self.timeout) as answer:
                    raw = answer.read()
            except urllib.error.HTTPError as error:
                status = error.code
                body = error.read() if error.fp is not None else b""
                wait = self._refusal(path, status, error.reason, error.headers, body, attempt)
                why = f"answered {status}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as e:
                reason = getattr(e, "reason", None) or e
                if attempt == self.retry.attempts:
                    raise PullError(
                        f"cannot reach Langfuse at {self.host} ({reason}) after {attempt} attempts: check"
                        f" {LANGFUSE_HOST} and the network; the next pull resumes from the stored cursor"
                    ) from None
                wait = self.retry.backoff(attempt)
                why = f"could not be reached ({reason})"
            else:
                try:
                    return json.loads(raw)
                except ValueError:
                    raise PullError(
                        f"Langfuse at {self.host} answered GET {path} with something that is not JSON"
                        f" ({_message(raw)[:80]!r}): is {LANGFUSE_HOST} the Langfuse base URL?"
                    ) from None
            if attempt == self.retry.attempts:
                raise PullError(
                    f"Langfuse at {self.host} {why} to GET {path} {attempt} times: giving up for now; the next pull"
                    " resumes from the stored cursor"
                )
            if self.deadline is not None and time.monotonic() + wait > self.deadline:
                raise PullError(
                    f"Langfuse at {self.host} {why} to GET {path}; waiting {wait:g} s to ask again would pass this"
                    " pull's time budget: the next pull resumes from the stored cursor"
                )
            self.say(
                f"Langfuse at {self.host} {why} to GET {path}: asking again in {wait:g} s"
                f" (attempt {attempt + 1} of {self.retry.attempts})"
            )
            self.sleep(wait)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _refusal(self, path: str, status: int, reason: str, headers, body: bytes, attempt: int) -> float:
        """The wait before asking again after answer ``status``, or the ``PullError`` that ends the pull."""
        if status in (401, 403):
            what = "rejected the keys" if status == 401 else "does not let these keys read the project"
            raise PullError(
                f"Langfuse at {self.host} {what} ({status} {reason}): check {LANGFUSE_PUBLIC_KEY} and"
                f" {LANGFUSE_SECRET_KEY} (a project's API keys, Settings > API Keys) and {LANGFUSE_HOST}"
            )
        if 300 <= status < 400:
            target = headers.get("Location") if headers is not None else None
            raise PullError(
                f"Langfuse at {self.host} redirects GET {path} to {target} ({status}): set {LANGFUSE_HOST} to the"
                " address it names (redirects are not followed: they would carry the keys elsewhere)"
            )
        if status == 429 or status >= 500:
            asked = retry_after_seconds(headers.get("Retry-After") if headers is not None else None)
            if asked is not None and asked > self.retry.max_retry_after:
                raise PullError(
                    f"Langfuse at {self.host} answered {status} to GET {path} and asks to wait {asked:g} s (more"
                    f" than {self.retry.max_retry_after:g}): pull again later; it resumes from the stored cursor"
                )
            return asked if asked is not None else self.retry.backoff(attempt)
        hint = ""
        if status == 404:
            hint = " (the v2 observations and v3 scores endpoints need Langfuse v4 or Langfuse Cloud)"
        raise PullError(f"Langfuse at {self.host} refused GET {path} ({status} {reason}): {_message(body)}{hint}")
