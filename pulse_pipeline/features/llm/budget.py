"""What a response costs, and the spend cap every request of an annotator (or judge) instance checks first."""

from __future__ import annotations

import threading
from typing import Any

from ...settings import LLMSettings
from .litellm_loader import load_litellm


class SpendCapReached(RuntimeError):
    """The instance's responses have cost the cap or more; no further request is sent."""


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


def response_cost(settings: LLMSettings, response: Any, prompt_tokens: int, completion_tokens: int) -> float:
    """USD: tokens x the configured prices when either is set (a local model has no litellm price), else
    ``litellm.completion_cost`` from its bundled price map, and 0.0 for a model it does not know."""
    if settings.input_cost_per_token is not None or settings.output_cost_per_token is not None:
        return prompt_tokens * (settings.input_cost_per_token or 0.0) + completion_tokens * (
            settings.output_cost_per_token or 0.0
        )
    try:
        return float(load_litellm().completion_cost(completion_response=response) or 0.0)
    except Exception:  # a model litellm has no price for
        return 0.0
