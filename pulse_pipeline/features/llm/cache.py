"""Valid LLM answers kept in ``features.llm_cache``, so an unchanged session costs no request on a re-run."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass

import duckdb

from ... import tables
from ...connections import cursor, own_commits_database
from ...contract import ensure_tables, insert_arrow, to_frame
from ..redact import redact


@dataclass(frozen=True)
class CachedAnswer:
    response: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


@dataclass(frozen=True)
class CacheRow:
    """One row of ``features.llm_cache``."""

    cache_key: str
    prompt_version: str
    model: str
    prompt: str
    response: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class LLMCache:
    """Valid LLM answers in ``features.llm_cache``, keyed by sha256 of (prompt version, model, redacted prompt).

    The prompt is redacted here as well as by the caller, so the table can hold no secret whatever the caller does.
    One cursor and one lock: a DuckDB connection must not be used from several threads at once.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        # its own cursor, committing each answer at once, so a run killed before its asset commits keeps what it
        # paid for; on the database that allows that while the asset's transaction is open (see the function)
        self._cur = cursor(con, own_commits_database(con))
        ensure_tables(self._cur, [tables.LLM_CACHE])
        self._lock = threading.Lock()
        self._loaded: dict[str, CachedAnswer] | None = None  # the table, read once: a lookup is a dict get

    def _entries(self) -> dict[str, CachedAnswer]:
        """Every cached answer by key, read on first use (a point query per lookup would scan the table)."""
        if self._loaded is None:
            rows = self._cur.execute(
                "SELECT cache_key, response, prompt_tokens, completion_tokens, cost_usd"
                f" FROM {tables.LLM_CACHE.qualified}"
            ).pl()
            self._loaded = {
                r["cache_key"]: CachedAnswer(
                    r["response"],
                    int(r["prompt_tokens"] or 0),
                    int(r["completion_tokens"] or 0),
                    float(r["cost_usd"] or 0.0),
                )
                for r in rows.iter_rows(named=True)
            }
        return self._loaded

    @staticmethod
    def key(prompt_version: str, model: str, prompt: str) -> str:
        """The key of a prompt as given (callers pass redacted prompts; ``put`` redacts again before storing)."""
        payload = json.dumps([prompt_version, model, prompt], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def get(self, prompt_version: str, model: str, prompt: str) -> CachedAnswer | None:
        key = self.key(prompt_version, model, prompt)
        with self._lock:
            return self._entries().get(key)

    def put(self, prompt_version: str, model: str, prompt: str, answer: CachedAnswer) -> None:
        prompt = redact(prompt)
        key = self.key(prompt_version, model, prompt)
        row = CacheRow(
            cache_key=key,
            prompt_version=prompt_version,
            model=model,
            prompt=prompt,
            response=answer.response,
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            cost_usd=answer.cost_usd,
        )
        with self._lock:
            self._cur.execute("BEGIN TRANSACTION")
            try:
                self._cur.execute(f"DELETE FROM {tables.LLM_CACHE.qualified} WHERE cache_key = ?", [key])
                insert_arrow(self._cur, tables.LLM_CACHE, to_frame(tables.LLM_CACHE, [row]).to_arrow())
                self._cur.execute("COMMIT")
                self._entries()[key] = answer
            except Exception:
                self._cur.execute("ROLLBACK")
                raise
