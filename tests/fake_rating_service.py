"""A stand-in for `pulse serve` on loopback, for the hooks' tests: a threaded ``http.server`` that records every
request (path, headers, JSON body) and answers as ``CONTRACT35.md`` says the service does:

- ``POST /v1/asks`` -> ``{"ask", "probability", "policy_version", "rate_url"}``, the same answer for every ask of a
  session (the service decides once per session); ``ask`` is what the test sets (``FakeService.ask``);
- ``POST /v1/ratings`` -> 201 ``{"stored": true, "duplicate": <key seen before>, "unknown_session": <no ask seen>}``;
- ``down``: every request answered 503 with ``{"error": ...}``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

POLICY_VERSION = "fake-policy-1"
PROBABILITY = 0.25


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeService:
    url: str = ""
    ask: bool = True
    down: bool = False
    requests: list[Request] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    decided: dict[str, bool] = field(default_factory=dict)

    def bodies(self, path: str) -> list[Any]:
        return [r.body for r in self.requests if r.path == path]


def _handler(service: FakeService):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            service.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if service.down:
                return self._answer(503, {"error": "the service is stopping"})
            if self.path == "/v1/asks":
                sid = body["session_id"]
                ask = service.decided.setdefault(sid, service.ask)
                segment = body.get("segment_index")
                url = f"{service.url}/rate/{sid}?segment={segment}&sig=test-signature" if ask else None
                return self._answer(
                    200, {"ask": ask, "probability": PROBABILITY, "policy_version": POLICY_VERSION, "rate_url": url}
                )
            if self.path == "/v1/ratings":
                key = self.headers.get("Idempotency-Key") or body.get("idempotency_key")
                duplicate = key is not None and key in service.keys
                if key:
                    service.keys.add(key)
                sid = body.get("session_id") or body.get("conversation_id")
                unknown = sid not in service.decided
                return self._answer(201, {"stored": True, "duplicate": duplicate, "unknown_session": unknown})
            return self._answer(404, {"error": f"no route {self.path}"})

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    return Handler


class running:
    """``with running() as service:`` a fake service on a free loopback port."""

    def __enter__(self) -> FakeService:
        self.service = FakeService()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.service))
        self.service.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self.service

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
