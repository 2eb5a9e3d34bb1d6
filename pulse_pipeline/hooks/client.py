"""The hooks' HTTP client for the rating service: the standard library's ``urllib``, JSON in and out, short timeouts.

Why the standard library: a hook runs at every turn of the user's agent, which waits for it; importing an HTTP
library (httpx, requests) would cost more than the call itself. Why short timeouts (``PULSE_HOOK_TIMEOUT``, 2 s by
default): a service that is down or slow must cost the user at most that, once per turn.

Every failure (no service, a timeout, a 4xx with the service's ``{"error": ...}``, a 5xx, an answer that is not
JSON) is one ``ServiceError`` whose message is one line naming the URL and what happened, for the hook to print on
stderr before it exits 0.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_ANSWER_BYTES = 1 << 20  # a rating service answers a few hundred bytes; more is not the service


class ServiceError(RuntimeError):
    """The service could not be reached or refused the request; the message is one line."""


@dataclass(frozen=True)
class Service:
    """The rating service at ``url`` (no trailing ``/``), with an optional bearer ``token``."""

    url: str
    token: str | None = None
    timeout: float = 2.0

    @classmethod
    def from_settings(cls, url: str, token_file: Path | None, timeout: float) -> Service:
        """The token is the first line of ``token_file`` (the service reads one token per line, the hook sends
        one); a file that cannot be read is a ``ServiceError`` naming it."""
        token = None
        if token_file is not None:
            try:
                token = token_file.read_text(encoding="utf-8").strip().splitlines()[0].strip() or None
            except (OSError, UnicodeDecodeError, IndexError) as error:
                why = "it is empty" if isinstance(error, IndexError) else str(error)
                raise ServiceError(f"PULSE_HOOK_TOKEN_FILE {token_file}: cannot read a token ({why})") from None
        return cls(url, token, timeout)

    def post(self, path: str, body: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        """POST ``body`` as JSON to ``path``; the answer's JSON object, or a ``ServiceError``."""
        where = f"{self.url}{path}"
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(where, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 (http(s) only)
                raw = response.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as error:
            raise ServiceError(f"POST {where}: HTTP {error.code}: {_reason(error)}") from None
        except (OSError, http.client.HTTPException) as error:  # URLError, timeouts, resets, a bad status line
            why = getattr(error, "reason", None) or error
            raise ServiceError(f"POST {where}: the service did not answer ({why}); is `pulse serve` running?") from None
        if len(raw) > MAX_ANSWER_BYTES:
            raise ServiceError(f"POST {where}: the answer is over {MAX_ANSWER_BYTES} bytes, not the rating service's")
        try:
            answer = json.loads(raw)
        except ValueError:
            raise ServiceError(f"POST {where}: the answer is not JSON ({raw[:80]!r})") from None
        if not isinstance(answer, dict):
            raise ServiceError(f"POST {where}: the answer is not a JSON object ({raw[:80]!r})")
        return answer


def _reason(error: urllib.error.HTTPError) -> str:
    """The service's ``{"error": ...}`` line, else the HTTP reason."""
    try:
        body = json.loads(error.read(4096) or b"{}")
    except (ValueError, OSError):
        body = {}
    text = body.get("error") if isinstance(body, dict) else None
    return str(text) if text else str(error.reason)
