"""What the annotator and the judge share: the cache look-up before a prompt is asked, the spend budget, the totals,
the thread pool that runs sessions concurrently (one bad session never fails the run) and the progress lines."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, TypeVar

from ...settings import LLMSettings
from ..annotation import SessionTranscript
from ..prompts import PROMPT_VERSION
from ..redact import redact
from .answers import InvalidAnswer, SchemaCheck, parse_json
from .budget import SpendBudget
from .cache import CachedAnswer, LLMCache
from .complete import CallResult, complete_json

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class LLMTotals:
    """What an annotator (or judge) instance did, over all its calls: requests sent and what they cost (cache hits
    are counted apart and cost nothing), sessions failed and truncated."""

    sessions: int = 0
    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    skipped: int = 0
    truncated: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class Engine:
    """Shared by the annotator and the judge: cache, budget, totals, the thread pool and progress lines."""

    def __init__(
        self,
        settings: LLMSettings,
        cache: LLMCache | None,
        progress: Callable[[str], None] | None,
        progress_every: int,
        label: str,
    ) -> None:
        self.settings = settings
        self.cache = cache
        self.progress = progress
        self.progress_every = max(1, progress_every)
        self.label = label
        self.budget = SpendBudget(settings.spend_cap_usd)
        self.totals = LLMTotals()
        self._lock = threading.Lock()

    def _count_request(self) -> None:
        with self._lock:
            self.totals.calls += 1

    def ask(self, prompt: str, check: SchemaCheck) -> CallResult:
        """``prompt`` holds a transcript already redacted by ``render_transcript``: a cache hit costs no redaction
        pass; what is sent and stored is redacted once more (idempotent), whatever the caller did."""
        model = self.settings.model
        if self.cache is not None:
            hit = self.cache.get(PROMPT_VERSION, model, prompt)
            if hit is not None:
                try:
                    value = check(parse_json(hit.response))
                except InvalidAnswer:  # written under an older validator: ask again
                    value = None
                if value is not None:
                    with self._lock:
                        self.totals.cache_hits += 1
                    return CallResult(
                        "ok", value, hit.response, hit.prompt_tokens, hit.completion_tokens, hit.cost_usd, cached=True
                    )
        prompt = redact(prompt)
        res = complete_json(self.settings, prompt, check, budget=self.budget, on_request=self._count_request)
        with self._lock:
            self.totals.prompt_tokens += res.prompt_tokens
            self.totals.completion_tokens += res.completion_tokens
            self.totals.cost_usd += res.cost_usd
        if res.status == "ok" and self.cache is not None and res.raw is not None:
            self.cache.put(
                PROMPT_VERSION,
                model,
                prompt,
                CachedAnswer(res.raw, res.prompt_tokens, res.completion_tokens, res.cost_usd),
            )
        return res

    def run(self, items: list[Any], one: Callable[[Any], T], on_error: Callable[[Any, BaseException], T]) -> list[T]:
        """``one(item)`` for every item on the thread pool, in order; ``on_error`` turns a crash into a result."""

        def safe(item: Any) -> T:
            try:
                return one(item)
            except Exception as exc:  # one bad session never fails the run
                log.exception("%s: session failed unexpectedly", self.label)
                return on_error(item, exc)

        results: list[T | None] = [None] * len(items)
        with ThreadPoolExecutor(max_workers=max(1, self.settings.concurrency), thread_name_prefix="pulse-llm") as pool:
            futures = {pool.submit(safe, item): i for i, item in enumerate(items)}
            for done, fut in enumerate(as_completed(futures), 1):
                results[futures[fut]] = fut.result()
                if self.progress is not None and (done % self.progress_every == 0 or done == len(items)):
                    self.progress(self._progress_line(done, len(items)))
        return results  # type: ignore[return-value]

    def _progress_line(self, done: int, total: int) -> str:
        t = self.totals
        return (
            f"{self.label}: {done}/{total} sessions; {t.calls} requests, {t.cache_hits} cache hits,"
            f" {t.failures} failed, {t.truncated} truncated, {t.skipped} skipped;"
            f" {t.prompt_tokens + t.completion_tokens:,} tokens, ${t.cost_usd:.4f}"
        )

    def tally(self, status: str) -> None:
        with self._lock:
            self.totals.sessions += 1
            if status == "failed":
                self.totals.failures += 1
            elif status == "truncated":
                self.totals.truncated += 1
            elif status == "skipped":
                self.totals.skipped += 1


def has_user_message(t: SessionTranscript) -> bool:
    """Whether the session has a non-blank user message: without one there is nothing to ask."""
    return any(m and m.strip() for m in t.user_messages)


class LLMClient:
    """What the annotator and the judge share: settings, one engine (cache, concurrency, retries, spend cap) and
    the tokens and dollars this instance paid (``totals``). ``label`` names the client in progress lines."""

    label = "llm"

    def __init__(
        self,
        settings: LLMSettings,
        cache: LLMCache | None = None,
        progress: Callable[[str], None] | None = None,
        progress_every: int = 25,
    ) -> None:
        self.settings = settings
        self.engine = Engine(settings, cache, progress, progress_every, self.label)

    @property
    def totals(self) -> LLMTotals:
        return self.engine.totals
