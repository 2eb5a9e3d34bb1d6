"""Where to ask for ratings in each experiment: the share of asks per stratum that minimises the stratified
estimate's width (Neyman allocation, ``stats/allocation.py``), and what it saves against asking everyone alike.

Per experiment, over its sessions (both arms), with the strata ``estimates/strata.py`` makes (the experiment's
``strata`` column of ``experiments.toml``, default the task type; strata with fewer than 30 ratings in an arm
pooled by its rule):

    W_h        the stratum's share of the experiment's sessions
    sigma_h    the rectifier's sd, Y - lam_{a,h} f, each arm a at its own stratum lambda (``stats.stratified``:
               PPI++'s lambda on the stratum alone), pooled over the arms (the variances weighted by ratings)
    a_h        the stratum's answer rate, rated / asked over its asked sessions (None: no asks logged)
    share_neyman   A_h / A proportional to W_h sigma_h / sqrt(a_h) (per ask; a_h = 1 when unknown)
    ratings_saved  1 - (sum W sigma)^2 / sum W sigma^2: the ratings Neyman saves against asking alike at the
                   same width; ``asks_saved`` the same for asks, with sigma_h / sqrt(a_h)
    ratings_per_arm_uniform / _neyman: ratings per arm for the target effect at 80 % power, two-sided 5 %:
               n = 2 (z_{0.975} + z_{0.8})^2 c / target^2 (``stats.power.labels_per_arm_needed`` with sd = sqrt(c)),
               c = sum W sigma^2 asking alike, (sum W sigma)^2 by Neyman (the rated part of the stratified
               variance; the unrated part, ~1/N, is left out: a planning figure)

These are figures from the ratings so far (sigma_h is estimated): ``pulse power --experiments`` prints them, and
the ask policy's stratified form (``estimates/ask_policy.py``) acts on the same allocation when it beats asking
alike on held-out folds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..stats import allocation as al
from ..stats.power import labels_per_arm_needed
from ..stats.stratified import stratified_ppi
from .experiments import Experiment
from .power import DEFAULT_TARGET
from .strata import DEFAULT_STRATA, pooled, strata_problem, stratum_labels


@dataclass(frozen=True, kw_only=True)
class AllocationRow:
    """One row of ``estimates.ask_allocation``: one stratum of one experiment (or the experiment's only row, with
    ``stratum`` None and a note, when it has no strata)."""

    experiment: str
    strata_column: str
    stratum: str | None = None
    sessions: int = 0
    rated: int = 0
    share_sessions: float | None = None
    residual_sd: float | None = None
    answer_rate: float | None = None
    share_uniform: float | None = None
    share_neyman: float | None = None
    ratings_saved: float | None = None
    asks_saved: float | None = None
    ratings_per_arm_uniform: int | None = None
    ratings_per_arm_neyman: int | None = None
    note: str | None = None


def _pooled_sd(parts: list[tuple[int, float]]) -> float:
    """sqrt(sum n_a var_a / sum n_a) over the arms' (ratings, rectifier sd) of one stratum."""
    n = sum(k for k, _ in parts)
    return math.sqrt(sum(k * sd * sd for k, sd in parts) / n) if n else math.nan


def experiment_allocation(
    name: str, column: str, frame: pl.DataFrame, target: float = DEFAULT_TARGET
) -> list[AllocationRow]:
    """The rows of one experiment: ``frame`` holds its sessions (an ``assigned_sessions`` frame, every arm)."""
    problem = strata_problem(frame, column)
    if problem is not None:
        return [AllocationRow(experiment=name, strata_column=column, note=problem)]
    rated = frame["labeled"].to_numpy().astype(bool) & frame["prediction"].is_not_null().to_numpy()
    arm = frame["variant"].to_numpy()
    labels = pooled(stratum_labels(frame, column), rated, groups=arm).astype(str)
    y = frame["label"].cast(pl.Float64).to_numpy()
    f = frame["prediction"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    per_stratum: dict[str, list[tuple[int, float]]] = {}
    for a in np.unique(arm):
        here = arm == a
        rl, ru = here & rated, here & ~rated & np.isfinite(f)
        if rl.sum() < 2:
            continue
        result = stratified_ppi(y[rl], f[rl], f[ru], labels[rl], labels[ru])
        for part in result.strata:
            in_h = rl & (labels == part.stratum)
            per_stratum.setdefault(part.stratum, []).append(
                (int(in_h.sum()), al.rectifier_sd(y[in_h], f[in_h], part.lam))
            )
    strata = sorted(set(labels.tolist()))
    W = np.array([(labels == h).mean() for h in strata])
    sd = np.array([_pooled_sd(per_stratum.get(h, [])) for h in strata])
    asked = frame["ask_probability"].is_not_null().to_numpy()
    answer = None
    if asked.any():
        answer = np.array(
            [(rated & asked & (labels == h)).sum() / max(1, (asked & (labels == h)).sum()) for h in strata]
        )
    notes = []
    if not np.isfinite(sd).all() or not (sd > 0).any():
        notes.append("a stratum with fewer than 2 ratings in every arm, or no spread: no allocation")
        shares = saved = asks_saved = None
        n_uniform = n_neyman = None
    else:
        usable = answer is not None and bool((answer > 0).all())
        if answer is not None and not usable:
            notes.append("a stratum whose asks were never answered: answer rates left out of the shares")
        rates = answer if usable else None
        shares = al.ask_shares(W, sd, rates)
        saved = al.ratings_saved(W, sd)
        asks_saved = al.ratings_saved(W, sd, rates) if rates is not None else None
        c_uniform, c_neyman = float(np.sum(W * sd * sd)), float(np.sum(W * sd)) ** 2
        n_uniform = labels_per_arm_needed(target, math.sqrt(c_uniform)) if c_uniform > 0 else None
        n_neyman = labels_per_arm_needed(target, math.sqrt(c_neyman)) if c_neyman > 0 else None
    note = "; ".join(notes) or None
    return [
        AllocationRow(
            experiment=name,
            strata_column=column,
            stratum=h,
            sessions=int((labels == h).sum()),
            rated=int((rated & (labels == h)).sum()),
            share_sessions=float(W[i]),
            residual_sd=float(sd[i]) if np.isfinite(sd[i]) else None,
            answer_rate=None if answer is None else float(answer[i]),
            share_uniform=float(W[i]),
            share_neyman=None if shares is None else float(shares[i]),
            ratings_saved=saved,
            asks_saved=asks_saved,
            ratings_per_arm_uniform=n_uniform,
            ratings_per_arm_neyman=n_neyman,
            note=note,
        )
        for i, h in enumerate(strata)
    ]


def allocation_rows(
    sessions: pl.DataFrame,
    exps: Sequence[Experiment],
    columns: Mapping[str, str],
    target: float = DEFAULT_TARGET,
) -> list[AllocationRow]:
    """Rows of ``estimates.ask_allocation`` for every experiment of ``exps`` (``sessions``: an
    ``assigned_sessions`` frame with features; ``columns``: experiment -> strata column, default the task type)."""
    rows = []
    for exp in exps:
        sub = sessions.filter(pl.col("experiment") == exp.name)
        rows += experiment_allocation(exp.name, columns.get(exp.name, DEFAULT_STRATA), sub, target)
    return rows
