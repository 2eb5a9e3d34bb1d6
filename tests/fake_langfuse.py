"""A fake Langfuse public API on 127.0.0.1 (ports 18900-18999), for testing and benchmarking `pulse pull langfuse`
without a network.

It serves the two list endpoints the pull reads, as langfuse/langfuse at 62751446149b702b419a9292ddfc2280cdf74b8c
defines them:

- ``GET /api/public/v2/observations`` (``fern/apis/server/definition/observations.yml``; the route
  ``web/src/pages/api/public/v2/observations/index.ts``; the cursor and row schema
  ``web/src/features/public-api/types/observations.ts``; the order ``packages/shared/src/server/repositories/
  events.ts``, ``orderByForObservationsQuery``): rows newest first by ``(startTime, traceId, id)``, ``limit`` at
  most 1000 (default 50), ``fromStartTime`` inclusive, ``toStartTime`` exclusive, ``fields`` groups (``core`` and
  ``basic`` when not given; the enrichment fields ``modelId``, ``inputPrice``, ``outputPrice``, ``totalPrice``
  always present, null without ``model``), ``meta.cursor`` a base64 JSON ``{lastStartTimeTo, lastTraceId, lastId}``
  absent on the last page (the route fetches ``limit + 1`` rows to know).
- ``GET /api/public/v3/scores`` (``fern/apis/server/definition/scores-v3.yml``; the route
  ``web/src/pages/api/public/v3/scores/index.ts``; ``listScoresV3ForPublicApi`` and ``scoreDomainToV3`` in
  ``packages/shared/src/server/repositories/scores.ts``): rows newest first by ``(timestamp, id)``, ``limit`` at
  most 100 (more is a 400), ``fromTimestamp`` inclusive, ``toTimestamp`` exclusive, ``fields`` groups ``details``
  (comment, configId, metadata), ``subject``, ``annotation`` (authorUserId, queueId), ``meta`` ``{limit, cursor}``
  with the cursor a base64url JSON ``{v: 1, lastTimestamp, lastId}``.

Basic auth with one key pair (anything else is a 401). Tests queue faults (``push``): a status with headers (429
with ``Retry-After``, 500, 401), for one path or any; the server records every request (``requests``: path, query,
whether the keys were right). Observations and scores are lists a test may extend between pulls (a score arriving
after its trace), or, for the benchmark, ``GeneratedObservations``: rows made from their index on demand, so the
server holds none of them.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PORTS = range(18900, 19000)
PUBLIC_KEY = "pk-lf-fake-public"
SECRET_KEY = "sk-lf-fake-secret-do-not-log"
OBSERVATIONS_PATH = "/api/public/v2/observations"
SCORES_PATH = "/api/public/v3/scores"

# observations.yml, "Field Selection"; core is always returned
OBSERVATION_GROUPS: dict[str, tuple[str, ...]] = {
    "core": ("id", "traceId", "startTime", "endTime", "projectId", "parentObservationId", "type"),
    "basic": (
        "name", "level", "statusMessage", "version", "environment", "bookmarked", "public", "userId", "sessionId",
        "isRootObservation",
    ),
    "time": ("completionStartTime", "createdAt", "updatedAt"),
    "io": ("input", "output"),
    "metadata": ("metadata",),
    "model": ("providedModelName", "internalModelId", "modelParameters"),
    "usage": ("usageDetails", "costDetails", "totalCost", "usagePricingTierName"),
    "prompt": ("promptId", "promptName", "promptVersion"),
    "metrics": ("latency", "timeToFirstToken"),
    "trace_context": ("tags", "release", "traceName"),
}  # fmt: skip
ENRICHMENT = ("modelId", "inputPrice", "outputPrice", "totalPrice")  # always present; null without "model"
SCORE_CORE = (
    "id",
    "projectId",
    "name",
    "dataType",
    "value",
    "source",
    "timestamp",
    "environment",
    "createdAt",
    "updatedAt",
)
SCORE_GROUPS = {
    "details": ("comment", "configId", "metadata"),
    "subject": ("subject",),
    "annotation": ("authorUserId", "queueId"),
}
PROJECT = "proj-fake"


def at(moment: datetime) -> str:
    """Langfuse's JSON time: ISO 8601, UTC, milliseconds, ``Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _time(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def observation(
    obs_id: str,
    trace_id: str,
    start: datetime,
    *,
    type: str = "SPAN",
    session_id: str | None = None,
    user_id: str | None = None,
    name: str | None = None,
    parent: str | None = None,
    input: Any = None,
    output: Any = None,
    model: str | None = None,
    usage: dict | None = None,
    cost: dict | None = None,
    trace_name: str | None = None,
    release: str | None = None,
) -> dict:
    """A v2 observation with every field group (``commons.yml``, ``ObservationV2``); ``input``/``output`` given
    as Python values are sent as the raw JSON strings the v2 API returns."""
    raw = lambda value: value if value is None or isinstance(value, str) else json.dumps(value)  # noqa: E731
    return {
        "id": obs_id, "traceId": trace_id, "startTime": at(start), "endTime": at(start + timedelta(seconds=1)),
        "projectId": PROJECT, "parentObservationId": parent, "type": type,
        "name": name, "level": "DEFAULT", "statusMessage": None, "version": None, "environment": "default",
        "bookmarked": False, "public": False, "userId": user_id, "sessionId": session_id,
        "isRootObservation": parent is None,
        "completionStartTime": None, "createdAt": at(start), "updatedAt": at(start + timedelta(seconds=1)),
        "input": raw(input), "output": raw(output), "metadata": {},
        "providedModelName": model, "internalModelId": None, "modelParameters": None,
        "usageDetails": usage or {}, "costDetails": cost or {}, "totalCost": sum((cost or {}).values()) or None,
        "usagePricingTierName": None, "promptId": None, "promptName": None, "promptVersion": None,
        "latency": 1.0, "timeToFirstToken": None,
        "modelId": None, "inputPrice": None, "outputPrice": None, "totalPrice": None,
        "traceName": trace_name, "tags": [], "release": release,
    }  # fmt: skip


def score(
    score_id: str,
    name: str,
    value: float | bool | str,
    moment: datetime,
    *,
    kind: str,
    subject_id: str,
    trace_id: str | None = None,
    data_type: str = "NUMERIC",
    source: str = "API",
    comment: str | None = None,
) -> dict:
    """A v3 score with every field group (``scores-v3.yml``; ``scoreDomainToV3``): ``value`` typed by
    ``dataType``, ``subject`` ``{kind, id}`` (and ``traceId`` for an observation's score)."""
    subject: dict[str, str] = {"kind": kind, "id": subject_id}
    if kind == "observation" and trace_id is not None:
        subject["traceId"] = trace_id
    return {
        "id": score_id, "projectId": PROJECT, "name": name, "dataType": data_type, "value": value,
        "source": source, "timestamp": at(moment), "environment": "default", "createdAt": at(moment),
        "updatedAt": at(moment), "comment": comment, "configId": None, "metadata": {},
        "authorUserId": None, "queueId": None, "subject": subject,
    }  # fmt: skip


def _obs_key(row: dict) -> tuple:
    return (_time(row["startTime"]), row["traceId"] or "", row["id"])


def _score_key(row: dict) -> tuple:
    return (_time(row["timestamp"]), row["id"])


@dataclass
class GeneratedObservations:
    """``count`` observations made from their index when asked (the benchmark's 100 000): observation ``i``
    starts ``i`` milliseconds after ``base``, ten a trace, five traces a session, a generation with a chat input
    and usage every fifth, the rest tool spans. Ordered as the API orders them (start time, then trace, then id:
    the index order), so a page is an index range."""

    count: int
    base: datetime = datetime(2026, 11, 1, tzinfo=UTC)
    per_trace: int = 10
    traces_per_session: int = 5

    def row(self, i: int) -> dict:
        trace = i // self.per_trace
        session = trace // self.traces_per_session
        first = i % self.per_trace == 0
        generation = i % 5 == 1
        return observation(
            f"obs-{i:07d}",
            f"trace-{trace:06d}",
            self.base + timedelta(milliseconds=i),
            type="GENERATION" if generation else ("AGENT" if first else "TOOL"),
            session_id=f"session-{session:05d}",
            user_id=f"user-{session % 97:03d}",
            name="llm-call" if generation else ("agent-run" if first else "bash"),
            parent=None if first else f"obs-{trace * self.per_trace:07d}",
            input=[{"role": "user", "content": f"please fix issue {trace}"}] if generation or first else {"cmd": "ls"},
            output={"role": "assistant", "content": "done"} if generation else "ok",
            model="gpt-4.1" if generation else None,
            usage={"input": 1200, "output": 300, "total": 1500} if generation else None,
            cost={"input": 0.0024, "output": 0.0024} if generation else None,
            trace_name="agent-run",
        )

    def page(self, lo: datetime | None, hi: datetime | None, after: tuple | None, limit: int) -> list[dict]:
        """Up to ``limit`` rows newest first with ``lo <= start < hi`` and key below ``after``."""
        ms = timedelta(milliseconds=1)
        top = self.count  # exclusive index bound
        if hi is not None:
            top = min(top, max(0, -((self.base - hi) // ms)))  # start < hi: i < ceil((hi - base) / 1 ms)
        if after is not None:
            top = min(top, int(after[2].split("-")[1]))
        bottom = 0 if lo is None else max(0, -((self.base - lo) // ms))  # start >= lo
        return [self.row(i) for i in range(top - 1, max(bottom, top - limit) - 1, -1)]


@dataclass
class Fault:
    """An answer given instead of the real one, once, to the next request whose path starts with ``path``."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: str = '{"message": "fault injected by the fake Langfuse"}'
    path: str = ""


@dataclass
class Request:
    path: str
    query: dict[str, str]
    authorized: bool


class FakeLangfuse:
    """The server's state: rows, faults, and the requests it saw (module docstring)."""

    def __init__(
        self, observations: list[dict] | GeneratedObservations | None = None, scores: list[dict] | None = None
    ):
        self.observations: list[dict] | GeneratedObservations = observations if observations is not None else []
        self.scores: list[dict] = scores if scores is not None else []
        self.faults: deque[Fault] = deque()
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.url = ""

    def push(self, status: int, headers: dict[str, str] | None = None, path: str = "", body: str | None = None) -> None:
        """Answer the next request to ``path`` (any when empty) with ``status`` instead of a page."""
        self.faults.append(Fault(status, headers or {}, body if body is not None else Fault.body, path))

    def _fault(self, path: str) -> Fault | None:
        for fault in list(self.faults):
            if path.startswith(fault.path):
                self.faults.remove(fault)
                return fault
        return None

    def answer(self, path: str, query: dict[str, str], authorization: str | None) -> tuple[int, dict[str, str], str]:
        expected = "Basic " + base64.b64encode(f"{PUBLIC_KEY}:{SECRET_KEY}".encode()).decode()
        with self.lock:
            self.requests.append(Request(path, dict(query), authorization == expected))
            fault = self._fault(path)
            if fault is not None:
                return fault.status, fault.headers, fault.body
            if authorization != expected:
                return 401, {}, json.dumps({"message": "Invalid credentials"})
            try:
                if path == OBSERVATIONS_PATH:
                    return 200, {}, json.dumps(self._observations(query))
                if path == SCORES_PATH:
                    return 200, {}, json.dumps(self._scores(query))
            except ValueError as error:
                return 400, {}, json.dumps({"message": str(error)})
            return 404, {}, json.dumps({"message": f"no route {path}"})

    def _observations(self, query: dict[str, str]) -> dict:
        limit = int(query.get("limit", "50"))
        if not 0 <= limit <= 1000:
            raise ValueError("limit: Number must be less than or equal to 1000")
        groups = {"core", *(query.get("fields") or "core,basic").split(",")}
        lo = _time(query["fromStartTime"]) if "fromStartTime" in query else None
        hi = _time(query["toStartTime"]) if "toStartTime" in query else None
        after = None
        if "cursor" in query:
            decoded = json.loads(base64.b64decode(query["cursor"]))
            after = (_time(decoded["lastStartTimeTo"]), decoded["lastTraceId"], decoded["lastId"])
        if isinstance(self.observations, GeneratedObservations):
            rows = self.observations.page(lo, hi, after, limit + 1)
        else:
            rows = sorted(
                (
                    row
                    for row in self.observations
                    if (lo is None or _time(row["startTime"]) >= lo)
                    and (hi is None or _time(row["startTime"]) < hi)
                    and (after is None or _obs_key(row) < after)
                ),
                key=_obs_key,
                reverse=True,
            )[: limit + 1]
        page = rows[:limit]
        keep = {key for group in groups for key in OBSERVATION_GROUPS.get(group, ())}
        data = []
        for row in page:
            shown = {k: v for k, v in row.items() if k in keep}
            shown.update({k: (row.get(k) if "model" in groups else None) for k in ENRICHMENT})
            data.append(shown)
        meta: dict[str, str] = {}
        if len(rows) > limit and page:
            last = page[-1]
            cursor = {"lastStartTimeTo": last["startTime"], "lastTraceId": last["traceId"] or "", "lastId": last["id"]}
            meta["cursor"] = base64.b64encode(json.dumps(cursor).encode()).decode()
        return {"data": data, "meta": meta}

    def _scores(self, query: dict[str, str]) -> dict:
        limit = int(query.get("limit", "50"))
        if not 1 <= limit <= 100:
            raise ValueError("limit must be at most 100")
        groups = set((query.get("fields") or "").split(",")) - {""}
        if groups - set(SCORE_GROUPS):
            raise ValueError(f"unknown field groups {sorted(groups - set(SCORE_GROUPS))}")
        lo = _time(query["fromTimestamp"]) if "fromTimestamp" in query else None
        hi = _time(query["toTimestamp"]) if "toTimestamp" in query else None
        after = None
        if "cursor" in query:
            decoded = json.loads(base64.urlsafe_b64decode(query["cursor"] + "=" * (-len(query["cursor"]) % 4)))
            after = (_time(decoded["lastTimestamp"]), decoded["lastId"])
        rows = sorted(
            (
                row
                for row in self.scores
                if (lo is None or _time(row["timestamp"]) >= lo)
                and (hi is None or _time(row["timestamp"]) < hi)
                and (after is None or _score_key(row) < after)
            ),
            key=_score_key,
            reverse=True,
        )[: limit + 1]
        page = rows[:limit]
        keep = set(SCORE_CORE) | {key for group in groups for key in SCORE_GROUPS[group]}
        meta: dict[str, Any] = {"limit": limit}
        if len(rows) > limit and page:
            cursor = {"v": 1, "lastTimestamp": page[-1]["timestamp"], "lastId": page[-1]["id"]}
            meta["cursor"] = base64.urlsafe_b64encode(json.dumps(cursor).encode()).decode().rstrip("=")
        return {"data": [{k: v for k, v in row.items() if k in keep} for row in page], "meta": meta}


def _handler(fake: FakeLangfuse) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            status, headers, body = fake.answer(parts.path, query, self.headers.get("Authorization"))
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:  # quiet
            pass

    return Handler


def _bind(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """A server on the first free port of ``PORTS``, starting at one that depends on the process (xdist workers)."""
    start = os.getpid() % len(PORTS)
    for offset in range(len(PORTS)):
        port = PORTS[(start + offset) % len(PORTS)]
        try:
            return ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError:
            continue
    raise OSError(f"no free port in {PORTS.start}-{PORTS.stop - 1} for the fake Langfuse")


@contextmanager
def running_fake_langfuse(fake: FakeLangfuse | None = None) -> Iterator[FakeLangfuse]:
    """Serve ``fake`` (a new one when None) until the block ends; ``fake.url`` is its base URL."""
    fake = fake or FakeLangfuse()
    server = _bind(_handler(fake))
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


if __name__ == "__main__":  # a standalone server for the benchmark: python -m tests.fake_langfuse COUNT
    import sys

    with running_fake_langfuse(FakeLangfuse(GeneratedObservations(int(sys.argv[1])))) as served:
        print(served.url, flush=True)
        threading.Event().wait()
