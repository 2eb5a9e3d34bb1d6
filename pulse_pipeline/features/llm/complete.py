"""One prompt answered: redacted, sent (with retries and the spend cap), parsed, validated, re-asked once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...settings import LLMSettings
from ..redact import redact
from .answers import InvalidAnswer, SchemaCheck, parse_json
from .budget import SpendBudget, SpendCapReached, response_cost
from .request import send


@dataclass(frozen=True)
class CallResult:
    """What one prompt came to: the validated answer or the error, and what its requests cost."""

    status: str  # "ok" or "failed"
    value: Any = None  # what the schema check returned for the valid answer
    raw: str | None = None  # the valid answer's text; when failed, the last answer received (if any)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    requests: int = 0  # completion requests sent (retries and the re-ask included)
    error: str | None = None
    cached: bool = False


def describe_error(exc: BaseException) -> str:
    """An error as a row's ``error`` text: its type and first 300 characters (the cap's message as it is)."""
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
            response = send(settings, messages, budget, counted)
        except Exception as exc:  # any failure of the call is this prompt's failure, not the run's
            return result("failed", error=describe_error(exc))
        usage = getattr(response, "usage", None)
        p_tok = int(getattr(usage, "prompt_tokens", 0) or 0)
        c_tok = int(getattr(usage, "completion_tokens", 0) or 0)
        call_cost = response_cost(settings, response, p_tok, c_tok)
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
