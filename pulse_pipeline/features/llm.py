"""The LLM annotator and the LLM-as-a-judge baseline: the paper's prompts, through litellm, cached, capped.

How one prompt is answered (``complete_json``):

1. the prompt is redacted (``redact.py``): nothing leaves the machine, or reaches the cache, unredacted;
2. the cache (``features.llm_cache``) is looked up by sha256 of (``PROMPT_VERSION``, model, redacted prompt);
3. otherwise one ``litellm.completion`` request, with litellm's own retries off (``max_retries=0``,
   ``num_retries=0``: its retries multiply ours and need tenacity anyway). We retry with tenacity, exponential
   backoff with jitter, at most ``max_retries`` more times, only on what a retry can fix: rate limits (429),
   timeouts, connection errors and 5xx. A 4xx (bad request, auth, not found, context too long) fails at once;
4. the answer is parsed as JSON (```json fences and prose around the object tolerated) and validated against the
   rubric (``analysis_check``, ``issues_check``, ``judge_check``: categories from the options, at most
   ``max_choices`` of them, YES/NO). An invalid answer is re-asked ONCE, with the answer and what is wrong with it
   appended to the conversation; a second invalid answer fails the prompt;
5. a valid answer is cached (only valid answers are).

Cost: when ``LLMSettings`` gives prices (``input_cost_per_token``/``output_cost_per_token``, from
``PULSE_LLM_INPUT_COST_PER_TOKEN``/``PULSE_LLM_OUTPUT_COST_PER_TOKEN``), cost = tokens x price, computed here (a
local or self-hosted model has no litellm price). Otherwise ``litellm.completion_cost`` from its bundled price map,
and 0.0 for a model it does not know. Tokens are the response's ``usage``.

Spend cap (``PULSE_LLM_SPEND_CAP_USD``): the cost of every response of this annotator (or judge) instance adds up;
before each new request (retries and re-asks included), once the total is at or above the cap no request is made
and the prompt fails with "spend cap of $X reached". Requests already in flight finish, so the total can exceed the
cap by at most ``concurrency`` requests. Cache hits cost nothing and are still used after the cap, so a re-run
after raising the cap pays only for what is missing.

Sessions (``LLMAnnotator``, ``LLMJudge``) run concurrently on ``concurrency`` threads; one bad session never fails
the run, its status says what happened:

- ``ok``: every answer valid; ``truncated``: valid, but the transcript was cut to ``transcript_chars``
  (``notes["truncated"]`` says how much);
- ``skipped``: the session has no user message, so there is nothing to ask and no request is made (every answer is
  the empty value with explanation "no user message");
- ``failed``: a prompt got no valid answer (error, cap, or invalid twice). The fallback for each feature of that
  prompt is the empty value ``""`` with the error as its explanation; it is not a guess at a category, so no
  downstream count mistakes a failure for an answer. Answers of the session's other prompt, when valid, are kept.

litellm is imported on first use with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` and ``LITELLM_OFFLINE_MODE=true``
(unless already set): otherwise its import fetches a price map over the network and token counting can hang
offline. Its own cache is not used (it crashes on a hit in 1.110.2); ``LLMCache`` is ours.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, TypeVar

import duckdb

from .. import tables
from ..warehouse import ensure_tables
from .annotation import Annotation, Answer, SessionTranscript
from .prompts import (
    JUDGE_TEMPLATE,
    PROMPT_VERSION,
    analysis_template,
    issues_template,
    render_transcript,
)
from .redact import redact
from .rubric import Rubric, RubricFeature

log = logging.getLogger(__name__)

T = TypeVar("T")
SchemaCheck = Callable[[Any], Any]  # parsed JSON -> normalized value; raises InvalidAnswer


# --- settings ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMSettings:
    """Which model, how hard to push it, and what it may cost.

    ``from_env`` reads PULSE_LLM_MODEL (required; a litellm model name such as ``openai/gpt-5-mini``, or
    ``openai/<name>`` for any OpenAI-compatible server), PULSE_LLM_API_BASE, PULSE_LLM_API_KEY,
    PULSE_LLM_CONCURRENCY (8), PULSE_LLM_MAX_RETRIES (4), PULSE_LLM_TIMEOUT (seconds, 60), PULSE_LLM_SPEND_CAP_USD
    (none), PULSE_LLM_TRANSCRIPT_CHARS (40000), PULSE_LLM_INPUT_COST_PER_TOKEN and PULSE_LLM_OUTPUT_COST_PER_TOKEN
    (USD; unset: litellm's price map) and PULSE_LLM_JSON_MODE (auto | true | false: whether to send
    ``response_format``; auto asks litellm whether the model supports it).
    """

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never printed
    concurrency: int = 8
    max_retries: int = 4  # retries after the first request, for retryable errors only
    timeout_s: float = 60.0
    spend_cap_usd: float | None = None
    transcript_chars: int = 40_000
    input_cost_per_token: float | None = None  # USD; when either price is set, cost = tokens x price
    output_cost_per_token: float | None = None
    backoff_initial_s: float = 1.0  # first retry waits about this (plus up to as much jitter), doubling up to the max
    backoff_max_s: float = 30.0
    json_mode: bool | None = None  # send response_format=json_object; None: when litellm says the model supports it

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMSettings:
        env = os.environ if environ is None else environ

        def num(name: str, default: float | None, kind: type = float) -> Any:
            raw = (env.get(name) or "").strip()
            if not raw:
                return default
            try:
                return kind(raw)
            except ValueError as exc:
                raise ValueError(f"{name}={raw!r} is not a number") from exc

        json_mode = (env.get("PULSE_LLM_JSON_MODE") or "auto").strip().lower()
        if json_mode not in ("auto", "true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"PULSE_LLM_JSON_MODE={json_mode!r} must be auto, true or false")
        model = (env.get("PULSE_LLM_MODEL") or "").strip()
        if not model:
            raise ValueError("PULSE_LLM_MODEL is not set (a litellm model name, e.g. openai/gpt-5-mini)")
        return cls(
            model=model,
            api_base=env.get("PULSE_LLM_API_BASE") or None,
            api_key=env.get("PULSE_LLM_API_KEY") or None,
            concurrency=max(1, num("PULSE_LLM_CONCURRENCY", 8, int)),
            max_retries=max(0, num("PULSE_LLM_MAX_RETRIES", 4, int)),
            timeout_s=num("PULSE_LLM_TIMEOUT", 60.0),
            spend_cap_usd=num("PULSE_LLM_SPEND_CAP_USD", None),
            transcript_chars=max(1000, num("PULSE_LLM_TRANSCRIPT_CHARS", 40_000, int)),
            input_cost_per_token=num("PULSE_LLM_INPUT_COST_PER_TOKEN", None),
            output_cost_per_token=num("PULSE_LLM_OUTPUT_COST_PER_TOKEN", None),
            json_mode=None if json_mode == "auto" else json_mode in ("true", "1", "yes"),
        )


# --- cache ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CachedAnswer:
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
        ensure_tables(con, [tables.LLM_CACHE])
        self._cur = con.cursor()
        self._lock = threading.Lock()
        self._loaded: dict[str, CachedAnswer] | None = None  # the table, read once: a lookup is a dict get

    def _entries(self) -> dict[str, CachedAnswer]:
        """Every cached answer by key, read on first use (a point query per lookup would scan the table)."""
        if self._loaded is None:
            rows = self._cur.execute(
                "SELECT cache_key, response, prompt_tokens, completion_tokens, cost_usd"
                f" FROM {tables.LLM_CACHE.qualified}"
            ).fetchall()
            self._loaded = {r[0]: CachedAnswer(r[1], int(r[2] or 0), int(r[3] or 0), float(r[4] or 0.0)) for r in rows}
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
        with self._lock:
            self._cur.execute("BEGIN TRANSACTION")
            try:
                self._cur.execute(f"DELETE FROM {tables.LLM_CACHE.qualified} WHERE cache_key = ?", [key])
                self._cur.execute(
                    f"INSERT INTO {tables.LLM_CACHE.qualified} ({', '.join(tables.LLM_CACHE.column_names)})"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        key,
                        prompt_version,
                        model,
                        prompt,
                        answer.response,
                        answer.prompt_tokens,
                        answer.completion_tokens,
                        answer.cost_usd,
                    ],
                )
                self._cur.execute("COMMIT")
                self._entries()[key] = answer
            except Exception:
                self._cur.execute("ROLLBACK")
                raise


# --- parsing and validation ----------------------------------------------------------------------------------


class InvalidAnswer(ValueError):
    """The model's answer is not the JSON the prompt asked for; the message is shown to the model on a re-ask."""


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)\s*```", re.S)


def parse_json(text: str | None) -> Any:
    """The JSON object in a model's answer, tolerating ```json fences and prose around the object."""
    text = (text or "").strip()
    if not text:
        raise InvalidAnswer("the answer is empty")
    candidates = [text]
    fenced = _FENCE.search(text)
    if fenced:
        candidates.append(fenced.group(1))
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{") : text.rindex("}") + 1])
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError:
            continue
    raise InvalidAnswer("the answer is not valid JSON")


def _option(f: RubricFeature, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidAnswer(f"{f.name}: expected one of {list(f.options)}, got {value!r}")

    def norm(text: str) -> str:  # the prompt typesets ' as ’ (prompts._typeset), so either spelling is the option
        return " ".join(text.replace("’", "'").split()).casefold()

    wanted = norm(value)
    for o in f.options:
        if norm(o) == wanted:
            return o
    raise InvalidAnswer(f"{f.name}: {value!r} is not one of {list(f.options)}")


def feature_value(f: RubricFeature, value: Any) -> str:
    """A feature's answer normalized to the rubric's spelling (``Answer.value``), or ``InvalidAnswer``."""
    if f.value_type == "yes_no":
        if isinstance(value, bool):
            return "YES" if value else "NO"
        if isinstance(value, str) and value.strip().upper() in ("YES", "NO"):
            return value.strip().upper()
        raise InvalidAnswer(f'{f.name}: expected "YES" or "NO", got {value!r}')
    if f.value_type == "category":
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        return _option(f, value)
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise InvalidAnswer(f"{f.name}: expected a list of 1 to {f.max_choices} of {list(f.options)}, got {value!r}")
    chosen = list(dict.fromkeys(_option(f, v) for v in values))
    if len(chosen) > f.max_choices:
        raise InvalidAnswer(f"{f.name}: at most {f.max_choices} categories, got {len(chosen)}")
    return "|".join(chosen)


def _unwrap(value: Any) -> tuple[Any, str, Any]:
    """(answer, explanation, example messages) from a bare value or an object wrapping one."""
    if isinstance(value, dict):
        answer = value.get("answer", value.get("classification", value.get("value")))
        explanation = value.get("explanation") or ""
        return (
            answer,
            explanation if isinstance(explanation, str) else json.dumps(explanation),
            value.get("example_messages"),
        )
    return value, "", None


@dataclass(frozen=True)
class ParsedAnnotation:
    task_description: str
    answers: dict[str, Answer]
    notes: dict[str, str]


def _features_check(features: list[RubricFeature], with_task: bool) -> SchemaCheck:
    def check(obj: Any) -> ParsedAnnotation:
        if not isinstance(obj, dict):
            raise InvalidAnswer("the answer is not a JSON object")
        task = ""
        if with_task:
            task = obj.get("task_description")
            if not isinstance(task, str):
                raise InvalidAnswer('missing field "task_description" (a string)')
        answers: dict[str, Answer] = {}
        notes: dict[str, str] = {}
        for f in features:
            if f.name not in obj:
                raise InvalidAnswer(f"missing field {f.name!r}")
            raw, explanation, examples = _unwrap(obj[f.name])
            answers[f.name] = Answer(feature_value(f, raw), explanation)
            if isinstance(examples, list) and examples:
                notes[f"{f.name}_examples"] = json.dumps([str(e) for e in examples], ensure_ascii=False)
        return ParsedAnnotation(task.strip(), answers, notes)

    return check


def analysis_check(rubric: Rubric) -> SchemaCheck:
    """Validator of the analysis prompt's answer: task_description, and each analysis feature from its options."""
    return _features_check(rubric.by_prompt("analysis"), with_task=True)


def issues_check(rubric: Rubric) -> SchemaCheck:
    """Validator of the issues prompt's answer: each issues feature as {"answer": YES/NO, "explanation": ...}."""
    return _features_check(rubric.by_prompt("issues"), with_task=False)


@dataclass(frozen=True)
class JudgeAnswer:
    binary_satisfied: bool
    likert_score: int
    explanation: str


def judge_check(obj: Any) -> JudgeAnswer:
    """Validator of the judge's answer: binary_satisfied a boolean, likert_score an integer 1..5."""
    if not isinstance(obj, dict):
        raise InvalidAnswer("the answer is not a JSON object")
    sat = obj.get("binary_satisfied")
    if isinstance(sat, str) and sat.strip().lower() in ("true", "false"):
        sat = sat.strip().lower() == "true"
    if not isinstance(sat, bool):
        raise InvalidAnswer(f"binary_satisfied: expected true or false, got {sat!r}")
    score = obj.get("likert_score")
    if isinstance(score, str) and score.strip().isdigit():
        score = int(score.strip())
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
        raise InvalidAnswer(f"likert_score: expected an integer from 1 to 5, got {score!r}")
    explanation = obj.get("explanation") or ""
    return JudgeAnswer(sat, score, explanation if isinstance(explanation, str) else json.dumps(explanation))


# --- one prompt ----------------------------------------------------------------------------------------------


class SpendCapReached(RuntimeError):
    pass


class SpendBudget:
    """What responses have cost so far, against an optional cap; thread-safe."""

    def __init__(self, cap_usd: float | None) -> None:
        self.cap_usd = cap_usd
        self.spent_usd = 0.0
        self._lock = threading.Lock()

    def check(self) -> None:
        with self._lock:
            if self.cap_usd is not None and self.spent_usd >= self.cap_usd:
                raise SpendCapReached(f"spend cap of ${self.cap_usd:g} reached")

    def add(self, cost_usd: float) -> None:
        with self._lock:
            self.spent_usd += cost_usd


@dataclass(frozen=True)
class CallResult:
    status: str  # "ok" or "failed"
    value: Any = None  # what the schema check returned for the valid answer
    raw: str | None = None  # the valid answer's text; when failed, the last answer received (if any)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    requests: int = 0  # completion requests sent (retries and the re-ask included)
    error: str | None = None
    cached: bool = False


def _litellm() -> Any:
    """litellm, imported on first use with its network look-ups turned off (see the module docstring)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


@functools.lru_cache(maxsize=64)
def _supports_json_mode(model: str) -> bool:
    try:
        return "response_format" in (_litellm().get_supported_openai_params(model=model) or [])
    except Exception:  # an unknown provider: leave response_format out rather than have the request refused
        return False


def is_retryable(exc: BaseException) -> bool:
    """Rate limits, timeouts, connection errors and 5xx: a later attempt may succeed. Never a 4xx."""
    litellm = _litellm()
    if isinstance(exc, litellm.RateLimitError | litellm.Timeout):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500:
        return status in (408, 429)
    if isinstance(exc, litellm.APIConnectionError | litellm.InternalServerError | litellm.ServiceUnavailableError):
        return True
    return isinstance(status, int) and status >= 500


def _cost(settings: LLMSettings, response: Any, prompt_tokens: int, completion_tokens: int) -> float:
    if settings.input_cost_per_token is not None or settings.output_cost_per_token is not None:
        return prompt_tokens * (settings.input_cost_per_token or 0.0) + completion_tokens * (
            settings.output_cost_per_token or 0.0
        )
    try:
        return float(_litellm().completion_cost(completion_response=response) or 0.0)
    except Exception:  # a model litellm has no price for
        return 0.0


def _request(
    settings: LLMSettings,
    messages: list[dict[str, str]],
    budget: SpendBudget | None,
    on_request: Callable[[], None] | None,
) -> Any:
    """One completion, retried (tenacity) on retryable errors only; the spend cap is checked before each attempt."""
    import tenacity

    litellm = _litellm()
    kwargs: dict[str, Any] = {
        "model": settings.model,
        "messages": messages,
        "timeout": settings.timeout_s,
        "max_retries": 0,
        "num_retries": 0,
    }
    if settings.api_base:
        kwargs["api_base"] = settings.api_base
    if settings.api_key:
        kwargs["api_key"] = settings.api_key
    if settings.json_mode if settings.json_mode is not None else _supports_json_mode(settings.model):
        kwargs["response_format"] = {"type": "json_object"}

    def before_sleep(state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning("LLM request failed (%s), attempt %d; retrying", type(exc).__name__, state.attempt_number)

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(settings.max_retries + 1),
        wait=tenacity.wait_exponential_jitter(
            multiplier=settings.backoff_initial_s, max=settings.backoff_max_s, jitter=settings.backoff_initial_s
        ),
        retry=tenacity.retry_if_exception(is_retryable),
        before_sleep=before_sleep,
        reraise=True,
    )
    for attempt in retrying:
        with attempt:
            if budget is not None:
                budget.check()
            if on_request is not None:
                on_request()
            return litellm.completion(**kwargs)
    raise AssertionError("unreachable: tenacity re-raises the last error")


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if not isinstance(exc, SpendCapReached) else str(exc)


def complete_json(
    settings: LLMSettings,
    prompt: str,
    schema_check: SchemaCheck,
    *,
    budget: SpendBudget | None = None,
    on_request: Callable[[], None] | None = None,
) -> CallResult:
    """Ask ``prompt`` (redacted here), parse and validate the JSON answer, re-asking once if it is invalid.

    Never raises for what the model or its server does: errors come back as ``status="failed"`` with ``error``.
    ``on_request`` is called before every request sent (for counting); ``budget`` enforces the spend cap.
    """
    messages = [{"role": "user", "content": redact(prompt)}]
    tokens_in = tokens_out = requests = 0
    cost = 0.0
    content: str | None = None

    def counted() -> None:
        nonlocal requests
        requests += 1
        if on_request is not None:
            on_request()

    def result(status: str, value: Any = None, error: str | None = None) -> CallResult:
        return CallResult(status, value, content, tokens_in, tokens_out, cost, requests, error)

    for ask in range(2):
        try:
            response = _request(settings, messages, budget, counted)
        except Exception as exc:  # any failure of the call is this prompt's failure, not the run's
            return result("failed", error=_describe(exc))
        usage = getattr(response, "usage", None)
        p_tok = int(getattr(usage, "prompt_tokens", 0) or 0)
        c_tok = int(getattr(usage, "completion_tokens", 0) or 0)
        call_cost = _cost(settings, response, p_tok, c_tok)
        tokens_in, tokens_out, cost = tokens_in + p_tok, tokens_out + c_tok, cost + call_cost
        if budget is not None:
            budget.add(call_cost)
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError):
            content = None
        try:
            return result("ok", schema_check(parse_json(content)))
        except InvalidAnswer as exc:
            if ask == 1:
                return result("failed", error=f"invalid answer after a re-ask: {exc}")
            messages += [
                {"role": "assistant", "content": redact(content or "")},
                {
                    "role": "user",
                    "content": redact(
                        f"Your answer is not valid: {exc}. Reply again with only the JSON object, with every field"
                        " filled in and every category spelled exactly as listed."
                    ),
                },
            ]
    raise AssertionError("unreachable")


# --- sessions ------------------------------------------------------------------------------------------------


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


class _Engine:
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


def _has_user_message(t: SessionTranscript) -> bool:
    return any(m and m.strip() for m in t.user_messages)


def _joined_error(errors: list[str]) -> str | None:
    unique = list(dict.fromkeys(errors))
    return "; ".join(unique) if unique else None


class _LLMClient:
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
        self._engine = _Engine(settings, cache, progress, progress_every, self.label)

    @property
    def totals(self) -> LLMTotals:
        return self._engine.totals


class LLMAnnotator(_LLMClient):
    """The paper's two annotation prompts, rendered from the rubric, for every session (see the module docstring).

    ``Annotation.prompt_tokens``/``completion_tokens``/``cost_usd`` are what the answers cost, whether paid now or
    by an earlier run (a cached answer reports its original cost, so a re-run writes identical rows); ``totals``
    counts only what this instance paid. ``notes`` records ``truncated``, ``cached`` (which prompts came from the
    cache) and ``sentiment_examples`` (the example messages the analysis prompt asks for).
    """

    name = "llm"
    label = "llm annotator"

    def annotate(self, transcripts: list[SessionTranscript], rubric: Rubric) -> list[Annotation]:
        prompts = [
            (kind, template, check, rubric.by_prompt(kind))
            for kind, template, check in (
                ("analysis", analysis_template(rubric), analysis_check(rubric)),
                ("issues", issues_template(rubric), issues_check(rubric)),
            )
            if rubric.by_prompt(kind)
        ]
        version = f"{PROMPT_VERSION}+{rubric.digest}"

        def base(t: SessionTranscript, status: str, explanation: str, error: str | None) -> Annotation:
            answers = {f.name: Answer("", explanation) for f in rubric.features}
            return Annotation(t.session_id, self.name, version, "", answers, status, self.settings.model, error=error)

        def one(t: SessionTranscript) -> Annotation:
            if not _has_user_message(t):
                self._engine.tally("skipped")
                return base(t, "skipped", "no user message", None)
            text, truncated = render_transcript(t, self.settings.transcript_chars, redact=redact)
            answers: dict[str, Answer] = {}
            notes: dict[str, str] = {"truncated": truncated} if truncated else {}
            task, errors, cached = "", [], []
            p_tok = c_tok = 0
            cost = 0.0
            for kind, template, check, features in prompts:
                res = self._engine.ask(template.format(combined_messages=text), check)
                p_tok, c_tok, cost = p_tok + res.prompt_tokens, c_tok + res.completion_tokens, cost + res.cost_usd
                if res.status == "ok":
                    parsed: ParsedAnnotation = res.value
                    answers.update(parsed.answers)
                    notes.update(parsed.notes)
                    task = task or parsed.task_description
                    if res.cached:
                        cached.append(kind)
                else:
                    errors.append(res.error or "failed")
                    answers.update({f.name: Answer("", res.error or "failed") for f in features})
            if cached:
                notes["cached"] = ",".join(cached)
            status = "failed" if errors else "truncated" if truncated else "ok"
            self._engine.tally(status)
            return Annotation(
                t.session_id,
                self.name,
                version,
                task,
                answers,
                status,
                self.settings.model,
                p_tok,
                c_tok,
                cost,
                _joined_error(errors),
                notes,
            )

        def crashed(t: SessionTranscript, exc: BaseException) -> Annotation:
            self._engine.tally("failed")
            return base(t, "failed", _describe(exc), _describe(exc))

        return self._engine.run(list(transcripts), one, crashed)


@dataclass(frozen=True)
class JudgeScore:
    """One row of ``features.judge_scores`` (same columns, same order)."""

    session_id: str
    model: str
    prompt_version: str
    binary_satisfied: bool | None
    likert_score: int | None
    explanation: str
    status: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None


class LLMJudge(_LLMClient):
    """The paper's LLM-as-a-judge baseline: its prompt, verbatim, over the whole conversation of each session."""

    label = "llm judge"

    def judge(self, transcripts: list[SessionTranscript]) -> list[JudgeScore]:
        model = self.settings.model

        def one(t: SessionTranscript) -> JudgeScore:
            if not _has_user_message(t):
                self._engine.tally("skipped")
                return JudgeScore(t.session_id, model, PROMPT_VERSION, None, None, "no user message", "skipped")
            text, truncated = render_transcript(t, self.settings.transcript_chars, conversation=True, redact=redact)
            res = self._engine.ask(JUDGE_TEMPLATE.format(conversation=text), judge_check)
            if res.status != "ok":
                self._engine.tally("failed")
                return JudgeScore(
                    t.session_id, model, PROMPT_VERSION, None, None, res.error or "failed", "failed",
                    res.prompt_tokens, res.completion_tokens, res.cost_usd, res.error,
                )  # fmt: skip
            status = "truncated" if truncated else "ok"
            self._engine.tally(status)
            ans: JudgeAnswer = res.value
            return JudgeScore(
                t.session_id, model, PROMPT_VERSION, ans.binary_satisfied, ans.likert_score, ans.explanation, status,
                res.prompt_tokens, res.completion_tokens, res.cost_usd, None,
            )  # fmt: skip

        def crashed(t: SessionTranscript, exc: BaseException) -> JudgeScore:
            self._engine.tally("failed")
            return JudgeScore(
                t.session_id, model, PROMPT_VERSION, None, None, _describe(exc), "failed", error=_describe(exc)
            )

        return self._engine.run(list(transcripts), one, crashed)
