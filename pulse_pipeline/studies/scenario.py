"""What every simulation study shares: the one experiment they draw (llm-backbone, control claude-4-sonnet,
treatment gpt-5), the generator's parameters as validation draws them (``PARAMS``), its known truth, the row a
replication yields, and reading one value of a summary.

A module of its own so that the studies (``coverage``, ``peeking``, ``active``) import it and ``coverage``, which
runs them all, imports the others: no study imports another's runner.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from ..estimates.effects import MethodEstimate
from ..synth.model import GeneratorParams, true_effects

EXPERIMENT = "llm-backbone"
CONTROL = "claude-4-sonnet"
TREATMENT = "gpt-5"
DEFAULT_FAMILY = "hist_gbm"
DEFAULT_N_PER_ARM = 3000
PARAMS = GeneratorParams(direct_chattiness=2.0, selection_log_messages=1.6)
"""The generator as validation draws it: an arm's direct effect falls harder on chattier users (k = 2), and in the
self_selected scenario who rates follows the user-message count more steeply than the paper's default (slope 1.6
instead of 0.8 on log M), so a shortfall PPI would show in production shows plainly in 500 replications."""


@dataclass(frozen=True)
class ReplicationRow:
    """One method's result in one replication, scored against the known truth."""

    scenario: str
    method: str
    covered: bool  # truth inside [ci_low, ci_high]
    width: float  # ci_high - ci_low (normalized scale)
    error: float  # effect - truth
    flagged: bool  # flags say "not representative" or "seen the labels"


def truth(params: GeneratorParams = PARAMS) -> float:
    """The true normalized effect of gpt-5 vs claude-4-sonnet under ``params`` (cached by the generator)."""
    return float(true_effects(params, experiment=EXPERIMENT, normalized=True)[TREATMENT])


def value(frame: pl.DataFrame, scenario: str, method: str, column: str) -> float | None:
    """``column`` of the ``scenario``/``method`` row of a summary frame (``coverage.summarize``), or None when the
    frame has no such row (a target checker then reports the target unmet)."""
    hit = frame.filter((pl.col("scenario") == scenario) & (pl.col("method") == method))
    return None if hit.is_empty() else float(hit[column][0])


def scored(scenario: str, rows: Sequence[MethodEstimate], theta: float, suffix: str = "") -> list[ReplicationRow]:
    """Each method's row of a ``compare`` scored against the truth ``theta`` (method names get ``suffix``): covered,
    width, error, and flagged when its flags say "not representative" or "seen the labels"."""
    out = []
    for r in rows:
        ok = not (math.isnan(r.ci_low) or math.isnan(r.ci_high))
        flags = r.flags or ""
        out.append(
            ReplicationRow(
                scenario,
                r.method + suffix,
                bool(ok and r.ci_low <= theta <= r.ci_high),
                float(r.ci_high - r.ci_low) if ok else float("nan"),
                float(r.effect - theta),
                "not representative" in flags or "seen the labels" in flags,
            )
        )
    return out
