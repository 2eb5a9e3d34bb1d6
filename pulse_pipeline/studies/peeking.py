"""The ``peeking`` validation scenario: daily looks at an experiment with no effect, fixed intervals vs sequences.

A team that looks at its experiment every day and stops at the first 95 % interval that excludes zero makes a
false discovery far more often than 5 %; the confidence sequence (``stats/sequential.py``) is built to keep that
at most 5 % over all looks together. This scenario measures both, the way ``estimates.effect_history`` computes
them.

Each replication draws one llm-backbone experiment from the generator as ``coverage`` does
(``scenario.PARAMS``, ratings missing at random, 6 x ``n_per_arm`` sessions of which llm-backbone keeps
~``n_per_arm`` per arm), except that every arm's ``ArmEffect`` is zero: both arms are the same population, so the
true effect is exactly 0. Each session gets a start day drawn uniformly from ``looks`` days (sessions are i.i.d.,
so this is the order of arrival), and ONE histogram GBM is cross-fit on all the labels (k = 5), as the pipeline's
stored predictions are (the history is a retrospective on today's model). Then at the end of each day d, on the
sessions started up to d:

- naive: Welch's difference of rated means (``stats.naive.welch_difference``);
- PPI: the difference of the arms' PPI++ means (``stats.ppi.ppi_mean`` and ``difference``);

the same functions ``effects.compare`` calls for its naive_welch and ppi rows (session-level: users are not the
unit here), called directly because the propensity fits and resamplings compare adds would cost 30 times per
replication for nothing these two rows use. Each look's estimate gets its fixed-horizon interval and the
confidence sequence effect -/+ ``cs_radius(se, n_sessions, planned_n)`` (n_sessions: both arms' sessions to date,
as in the history; ``planned_n`` the history's default, 5 000; the last look holds ~6 000).

The rows have ``scenario.ReplicationRow``'s fields, so ``coverage.summarize`` and the
``estimates.coverage_validation`` table take them; ``coverage`` here is the share of replications whose interval
held the truth (0) at EVERY look. Per estimator three methods:

- ``naive_welch`` / ``ppi``: the fixed-horizon interval, judged at every look (what a daily watcher acts on);
- ``naive_welch_cs`` / ``ppi_cs``: the confidence sequence, judged at every look;
- ``naive_welch_last_look`` / ``ppi_last_look``: the fixed interval at the last look only (the one look it is valid
  for: ~95 %).

``width`` is the interval's width at the last look, ``error`` the last look's estimate (the truth is 0), and
``flagged`` is always False (compare's flags are not computed here).

Targets (``check_peeking`` returns the unmet ones), at 95 % nominal:

- ``naive_welch`` and ``ppi`` coverage at most ``FIXED_MAX_COVERAGE`` (90 %): some look excludes 0 in at least
  10 % of replications, "well over 5 %": the harm of peeking shows;
- ``naive_welch_cs`` and ``ppi_cs`` coverage at least ``CS_MIN_COVERAGE`` (95 %).

Measured (500 replications, seed 0, 2 workers, 69 s): coverage at every look naive_welch 72.2 % and ppi 54.6 %;
naive_welch_cs 97.6 % and ppi_cs 96.8 %, 1.54 and 1.55 times as wide as the fixed interval at the last look;
at the last look alone 97.2 % and 96.2 %. PPI's excess is worst on the first day (~5 ratings per arm: its z
interval excluded 0 in 14 of 100 replications, naive's t interval in 2), then ~5 % a look. Every target met.

Deterministic in ``seed``: replication i uses a seed derived from (seed, "peeking", i) only, whatever the workers.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import polars as pl

from ..estimates.methods import Method
from ..modeling.crossfit import crossfit_predict
from ..stars import stars_to_label
from ..stats.naive import welch_difference
from ..stats.ppi import difference, ppi_mean
from ..stats.sequential import DEFAULT_PLANNED_N, cs_radius
from ..synth.model import ArmEffect, feature_matrix, simulate_sessions
from .scenario import (
    CONTROL,
    DEFAULT_FAMILY,
    DEFAULT_N_PER_ARM,
    EXPERIMENT,
    PARAMS,
    TREATMENT,
    value,
)

SCENARIO = "peeking"
ESTIMATORS: tuple[Method, ...] = (Method.NAIVE_WELCH, Method.PPI)
CS_SUFFIX = "_cs"
LAST_SUFFIX = "_last_look"
METHODS: tuple[str, ...] = tuple(e + suffix for e in ESTIMATORS for suffix in ("", CS_SUFFIX, LAST_SUFFIX))
DEFAULT_LOOKS = 30
NULL_PARAMS = replace(PARAMS, arm_effects=tuple((name, ArmEffect()) for name, _ in PARAMS.arm_effects))
"""scenario.PARAMS with every arm's effect zeroed: the true effect of every comparison is exactly 0."""
FIXED_MAX_COVERAGE = 0.90
CS_MIN_COVERAGE = 0.95


def _excludes_zero(low: float, high: float) -> bool:
    return low > 0 or high < 0


def replicate_peeking(
    seed: int,
    scenario: str = SCENARIO,
    n_per_arm: int = DEFAULT_N_PER_ARM,
    rated_fraction: float = 0.05,
    family: str = DEFAULT_FAMILY,
    looks: int = DEFAULT_LOOKS,
    planned_n: float = DEFAULT_PLANNED_N,
) -> list[dict]:
    """One null llm-backbone experiment looked at daily: one row per ``METHODS`` entry, with the fields of
    ``scenario.ReplicationRow`` (module docstring), so it fits ``coverage.SCENARIOS``.

    A look where an arm has fewer than two ratings has no interval and cannot exclude 0.
    """
    table = simulate_sessions(6 * n_per_arm, seed=seed, scenario="random", rated_fraction=rated_fraction,
                              params=NULL_PARAMS)  # fmt: skip
    keep = np.asarray(table.experiment) == EXPERIMENT
    variant = np.asarray(table.variant)[keep]
    rated = np.asarray(table.rated, dtype=bool)[keep]
    y = stars_to_label(np.asarray(table.label, dtype=np.float64))[keep]
    X = feature_matrix(table, keep)
    day = np.random.default_rng(seed).integers(0, looks, size=keep.sum())
    # one thread: the validation runs one replication per core
    cf = crossfit_predict(X[rated], y[rated], X[~rated], family, k=5, seed=seed % (2**31), threads=1)
    f = np.empty(keep.sum())
    f[rated], f[~rated] = cf.oof, cf.unlabeled

    held = dict.fromkeys(METHODS, True)  # the truth (0) inside the interval at every look so far
    nan = float("nan")
    last = dict.fromkeys(ESTIMATORS, (False, nan, nan, nan))  # at the last look: covered, widths, estimate
    for d in range(looks):
        upto = day <= d
        arm = {a: upto & (variant == a) for a in (TREATMENT, CONTROL)}
        lab = {a: m & rated for a, m in arm.items()}
        if min(lab[a].sum() for a in arm) < 2:
            continue
        n_sessions = int(upto.sum())
        estimates = {
            Method.NAIVE_WELCH: welch_difference(y[lab[TREATMENT]], y[lab[CONTROL]]),
            Method.PPI: difference(*(ppi_mean(y[lab[a]], f[lab[a]], f[arm[a] & ~rated]) for a in (TREATMENT, CONTROL))),
        }
        for est, iv in estimates.items():
            radius = cs_radius(iv.se, n_sessions, planned_n)
            fixed_in = not _excludes_zero(iv.ci_low, iv.ci_high)
            held[est] &= fixed_in
            held[est + CS_SUFFIX] &= math.isnan(radius) or abs(iv.estimate) <= radius
            last[est] = (fixed_in, iv.ci_high - iv.ci_low, 2 * radius, iv.estimate)
    rows = []
    for est in ESTIMATORS:
        fixed_in, fixed_width, cs_width, estimate = last[est]
        for method, covered, width in (
            (str(est), held[est], fixed_width),
            (est + CS_SUFFIX, held[est + CS_SUFFIX], cs_width),
            (est + LAST_SUFFIX, fixed_in, fixed_width),
        ):
            rows.append(
                dict(scenario=scenario, method=method, covered=bool(covered), width=float(width),
                     error=float(estimate), flagged=False)
            )  # fmt: skip
    return rows


def check_peeking(frame: pl.DataFrame) -> list[str]:
    """The targets (module docstring) a ``coverage.summarize`` frame does not meet, in words; [] when met.

    A target whose peeking/method row is missing from ``frame`` is reported as unmet.
    """
    unmet = []
    for est in ESTIMATORS:
        for method, ok, target in (
            (est, lambda v: v <= FIXED_MAX_COVERAGE, f"<= {FIXED_MAX_COVERAGE:.0%} (peeking's harm shows)"),
            (est + CS_SUFFIX, lambda v: v >= CS_MIN_COVERAGE, f">= {CS_MIN_COVERAGE:.0%}"),
        ):
            v = value(frame, SCENARIO, method, "coverage")
            if v is None or math.isnan(v):
                unmet.append(f"{SCENARIO} {method} coverage at every look {target}: no row")
            elif not ok(v):
                unmet.append(f"{SCENARIO} {method} coverage at every look {target}: got {v:.1%}")
    return unmet
