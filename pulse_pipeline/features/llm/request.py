"""One completion request through litellm, retried with backoff on what a retry can fix.

litellm's own retries are off (``max_retries=0``, ``num_retries=0``): they would multiply ours. tenacity retries
rate limits (429), timeouts, connection errors and 5xx, with exponential backoff and jitter, at most
``max_retries`` more times; a 4xx fails at once. The spend cap is checked before every attempt.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...settings import LLMSettings
from .litellm_loader import load_litellm

if TYPE_CHECKING:
    from .budget import SpendBudget

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=64)
def supports_json_mode(model: str) -> bool:
    """Whether litellm says ``model`` accepts ``response_format``."""
    try:
        return "response_format" in (load_litellm().get_supported_openai_params(model=model) or [])
    except Exception:  # an unknown provider: leave response_format out rather than have the request refused
        return False


def is_retryable(exc: BaseException) -> bool:
    """Rate limits, timeouts, connection errors and 5xx: a later attempt may succeed. Never a 4xx."""
    litellm = load_litellm()
    if isinstance(exc, litellm.RateLimitError | litellm.Timeout):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500:
        return status in (408, 429)
    if isinstance(exc, litellm.APIConnectionError | litellm.InternalServerError | litellm.ServiceUnavailableError):
        return True
    return isinstance(status, int) and status >= 500


def send(
    settings: LLMSettings,
    messages: list[dict[str, str]],
    budget: SpendBudget | None,
    on_request: Callable[[], None] | None,
) -> Any:
    """One completion, retried (tenacity) on retryable errors only; the spend cap is checked before each attempt."""
    import tenacity

    litellm = load_litellm()
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
    if settings.json_mode if settings.json_mode is not None else supports_json_mode(settings.model):
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
