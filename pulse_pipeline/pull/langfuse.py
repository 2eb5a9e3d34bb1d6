"""One pull from Langfuse (``pulse pull langfuse``, and the pull sensor under ``pulse ui``): page both list
endpoints from where the last pull stopped, keep what came, write the touched sessions whole as one drop.

Each endpoint is walked over a time window, newest first, as Langfuse pages it (``langfuse_client.py``): the first
pull asks for everything before now; each later one for [end of the last finished walk - overlap, now), the overlap
(``PULSE_LANGFUSE_PULL_OVERLAP``, default an hour) catching rows Langfuse ingested late. Within a walk the cursor
Langfuse returned is stored after every page with that page's rows (``langfuse_store.py``), so a pull stopped by
``--max-pages``, the sensor's time budget, a refusal or a kill resumes at the next page of the same window, never
asking again for what it has nor skipping what it has not. The window's end is fixed when the walk starts:
observations that arrive meanwhile are newer than it and wait for the next walk.

One pull of a Langfuse project at a time: a lock file beside its store (``fcntl``, released by the kernel when the
process ends however it ends); a second pull meanwhile stops at once saying so (the sensor skips its tick).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..settings import LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY, LangfuseSettings
from .langfuse_client import OBSERVATIONS_PATH, SCORES_PATH, LangfuseClient, PullError
from .langfuse_store import LangfuseStore, PageCounts, Walk, WrittenDrop

OBSERVATION_FIELDS = "core,basic,time,io,metadata,model,usage,prompt,metrics,trace_context"
"""Every field group of v2 observations (``observations.yml``): the reader needs ids and trace context (``core``,
``basic``: ``traceId``, ``sessionId``, ``userId``; ``trace_context``: ``traceName``, ``tags``, ``release``), the
words (``io``), model, tokens and cost (``model``, ``usage``), and the rest costs little beside ``io``."""
SCORE_FIELDS = "details,subject,annotation"
"""Every field group of v3 scores (``scores-v3.yml``): ``subject`` names what a score is on (trace, observation,
session), ``details`` its comment and config, ``annotation`` its author (an annotation queue's human)."""
PULL_FOLDER = "langfuse-pull"  # under PULSE_HOME/.work
LOCK_FILE = "pull.lock"


@dataclass(frozen=True)
class Endpoint:
    """A list endpoint: its path, the field groups asked for, its page limit and its time window parameters."""

    name: str
    path: str
    fields: str
    max_limit: int
    from_param: str  # inclusive
    to_param: str  # exclusive


OBSERVATIONS = Endpoint("observations", OBSERVATIONS_PATH, OBSERVATION_FIELDS, 1000, "fromStartTime", "toStartTime")
SCORES = Endpoint("scores", SCORES_PATH, SCORE_FIELDS, 100, "fromTimestamp", "toTimestamp")
ENDPOINTS = (OBSERVATIONS, SCORES)


class PullBusy(PullError):
    """Another pull of the same Langfuse project holds its lock."""


@dataclass
class EndpointReport:
    """One endpoint's share of a pull."""

    pages: int = 0
    received: int = 0
    changed: int = 0
    finished: bool = False  # the walk reached its last page (else the next pull resumes it)


@dataclass
class PullReport:
    """What one pull did, for the CLI's line and the sensor's tick."""

    host: str
    endpoints: dict[str, EndpointReport] = field(default_factory=dict)
    drop: WrittenDrop | None = None
    waiting_scores: int = 0
    requests: int = 0

    def line(self) -> str:
        """One paragraph: what was received, what was written, what waits."""
        parts = []
        for name, report in self.endpoints.items():
            state = "" if report.finished else "; not finished: the next pull resumes from the stored cursor"
            parts.append(f"{report.received} {name} in {report.pages} pages ({report.changed} new or changed{state})")
        said = f"pulled from {self.host}: " + ", ".join(parts)
        if self.drop is None:
            said += "; nothing new, so no drop written"
        else:
            drop = self.drop
            said += (
                f"; wrote drop {drop.path.name}: {drop.sessions} sessions whole ({drop.observations} observations,"
                f" {drop.scores} scores)"
            )
            if drop.loose:
                said += f" and {drop.loose} rows of no session"
        if self.waiting_scores:
            said += f"; {self.waiting_scores} scores wait for their trace's observations (kept, written with them)"
        return said


def source_id(host: str, public_key: str) -> str:
    """The store's folder name for a host and project: a digest, so the key is in no path."""
    return hashlib.sha256(f"{host}\n{public_key}".encode()).hexdigest()[:16]


def timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and ``Z``, as Langfuse writes and reads its times."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse(moment: str) -> datetime:
    parsed = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@contextmanager
def pull_lock(folder: Path) -> Iterator[None]:
    """Hold the pull's lock on ``folder`` (module docstring), or raise ``PullBusy`` at once."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PullBusy(
                f"another pull of this Langfuse project is running (it holds {folder / LOCK_FILE}): wait for it to end"
            ) from None
        yield
    finally:
        os.close(fd)


def keys_of(settings: LangfuseSettings) -> tuple[str, str]:
    """The two keys, or the ``PullError`` that names the variables unset."""
    missing = [
        name
        for name, value in ((LANGFUSE_PUBLIC_KEY, settings.public_key), (LANGFUSE_SECRET_KEY, settings.secret_key))
        if not value
    ]
    if missing:
        raise PullError(
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: set {LANGFUSE_PUBLIC_KEY} and"
            f" {LANGFUSE_SECRET_KEY} to a Langfuse project's API keys (Settings > API Keys), and PULSE_LANGFUSE_HOST"
            f" to its URL unless it is {LangfuseSettings.host}"
        )
    assert settings.public_key is not None and settings.secret_key is not None
    return settings.public_key, settings.secret_key


def pull_langfuse(
    work: Path,
    drops: Path,
    settings: LangfuseSettings,
    *,
    page_size: int | None = None,
    max_pages: int | None = None,
    deadline: float | None = None,
    timeout: float = 60.0,
    client: LangfuseClient | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    say: Callable[[str], None] = lambda line: None,
) -> PullReport:
    """Pull both endpoints into the store under ``work`` (``PULSE_HOME/.work``) and write the touched sessions as
    one drop in ``drops``. ``page_size``: rows a page (each endpoint's maximum when None); ``max_pages``: pages of
    each endpoint at most; ``deadline``: a ``time.monotonic()`` after which no new page is asked and no retry
    waits; ``timeout``: seconds a request may take (the client's, when ``client`` is None). Raises
    ``PullError`` (one line) when the keys are unset or Langfuse refuses; the pages kept until then stay kept."""
    public_key, secret_key = keys_of(settings)
    if client is None:
        client = LangfuseClient(settings.host, public_key, secret_key, timeout=timeout, say=say)
    client.deadline = deadline
    source = source_id(settings.host, public_key)
    folder = work / PULL_FOLDER / source
    report = PullReport(settings.host)
    stopped: PullError | None = None
    with pull_lock(folder), LangfuseStore(folder) as store:
        try:
            for endpoint in ENDPOINTS:
                report.endpoints[endpoint.name] = EndpointReport()
                _walk(
                    store,
                    client,
                    endpoint,
                    settings,
                    page_size,
                    max_pages,
                    deadline,
                    now,
                    report.endpoints[endpoint.name],
                )
        except PullError as error:  # what was kept is written all the same; then the error is said
            stopped = error
        drops.mkdir(parents=True, exist_ok=True)
        windows = {name: store.walk(name).watermark for name in report.endpoints}
        report.drop = store.write_drop(
            drops, source, now(), {"host": settings.host, "pulled_up_to": windows, "requests": client.requests}
        )
        report.waiting_scores = store.waiting_scores()
        report.requests = client.requests
    if stopped is not None:
        if report.drop is not None:
            drop = report.drop
            raise PullError(
                f"{stopped} (what came before was kept: drop {drop.path.name}, {drop.sessions} sessions)"
            ) from None
        raise stopped
    return report


def _walk(
    store: LangfuseStore,
    client: LangfuseClient,
    endpoint: Endpoint,
    settings: LangfuseSettings,
    page_size: int | None,
    max_pages: int | None,
    deadline: float | None,
    now: Callable[[], datetime],
    report: EndpointReport,
) -> None:
    """Walk ``endpoint``'s pages from its stored place until its last page, ``max_pages`` or ``deadline``."""
    walk = store.walk(endpoint.name)
    if not walk.in_walk:
        start = None
        if walk.watermark is not None:
            start = timestamp(_parse(walk.watermark) - timedelta(seconds=settings.overlap_seconds))
        walk = store.begin_walk(endpoint.name, start, timestamp(now()))
    limit = min(page_size or endpoint.max_limit, endpoint.max_limit)
    add = store.add_observations if endpoint is OBSERVATIONS else store.add_scores
    while walk.in_walk:
        if max_pages is not None and report.pages >= max_pages:
            return
        if deadline is not None and time.monotonic() >= deadline:
            return
        params = {
            "fields": endpoint.fields,
            "limit": limit,
            endpoint.from_param: walk.window_from,
            endpoint.to_param: walk.window_to,
            "cursor": walk.cursor,
        }
        data, cursor = client.get_page(endpoint.path, params)
        if cursor is not None and cursor == walk.cursor:
            raise PullError(
                f"Langfuse at {client.host} answered GET {endpoint.path} with the cursor it was asked with: stopping"
                " rather than asking for the same page forever"
            )
        walk, counts = add(walk, data, cursor)
        _count(report, counts)
    report.finished = True


def _count(report: EndpointReport, counts: PageCounts) -> None:
    report.pages += 1
    report.received += counts.received
    report.changed += counts.changed


__all__ = ["PullBusy", "PullError", "PullReport", "Walk", "pull_langfuse"]
