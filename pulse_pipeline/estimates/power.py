"""Could this experiment have detected the effect at all, and how many ratings would it take?

Per comparison, from the labels and predictions it has now: the minimum detectable effect (MDE) at 80 % power
and 5 % two-sided error, for the naive difference and for PPI with the out-of-fold correlation ρ; and the ratings
per arm a target effect needs. A non-significant result with an MDE larger than any effect you care about says
"not enough ratings", not "no effect". Labels needed assume traffic keeps its current share of rated sessions r,
so N grows with n and PPI's variance factor is 1 − ρ²·(1 − r) whatever n.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from ..stats import power as pw
from .experiments import Experiment

DEFAULT_TARGET = 0.05  # on the normalized 0-1 label: 0.2 stars


@dataclass(frozen=True, kw_only=True)
class PowerRow:
    """One row of ``estimates.power``: one treatment-vs-control comparison."""

    experiment: str
    treatment: str | None
    control: str
    n_labeled_treatment: int
    n_labeled_control: int
    N_unlabeled_treatment: int
    N_unlabeled_control: int
    sd: float | None = None  # of the labels of both arms together
    oof_rho: float | None = None
    mde_naive: float | None = None
    mde_ppi: float | None = None
    target_effect: float | None = None
    labels_per_arm_naive: int | None = None
    labels_per_arm_ppi: int | None = None
    note: str | None = None


def power_row(
    experiment: str,
    treatment: str,
    control: str,
    y_t: np.ndarray,
    y_c: np.ndarray,
    N_t: int,
    N_c: int,
    rho: float,
    target: float = DEFAULT_TARGET,
) -> PowerRow:
    """The row of one comparison.

    ``y_t``, ``y_c``: the arms' normalized labels; ``N_t``, ``N_c``: their unrated sessions; ``rho``: out-of-fold
    correlation of predictions and labels (NaN: unknown, PPI figures then use 0).
    """
    n_t, n_c = y_t.size, y_c.size
    nan = float("nan")
    counts = PowerRow(
        experiment=experiment,
        treatment=treatment,
        control=control,
        n_labeled_treatment=n_t,
        n_labeled_control=n_c,
        N_unlabeled_treatment=N_t,
        N_unlabeled_control=N_c,
        oof_rho=rho,
        target_effect=target,
    )
    if min(n_t, n_c) < 2:
        return replace(counts, sd=nan, mde_naive=nan, mde_ppi=nan, note="fewer than 2 ratings in an arm")
    y = np.r_[y_t, y_c]
    sd = float(y.std(ddof=1))
    if not sd > 0:
        return replace(counts, sd=sd, mde_naive=nan, mde_ppi=nan, note="all ratings equal: no spread to power on")
    notes = []
    if math.isnan(rho):
        rho_used = 0.0
        notes.append("no out-of-fold correlation: PPI figures use rho = 0")
    else:
        rho_used = rho
    share = (n_t + n_c) / (n_t + n_c + N_t + N_c)
    return replace(
        counts,
        sd=sd,
        mde_naive=pw.minimum_detectable_effect(n_t, n_c, sd),
        mde_ppi=pw.minimum_detectable_effect(n_t, n_c, sd, N_treatment=N_t, N_control=N_c, rho=rho_used),
        labels_per_arm_naive=pw.labels_per_arm_needed(target, sd),
        labels_per_arm_ppi=pw.labels_per_arm_at_rated_share(target, sd, share, rho=rho_used),
        note="; ".join(notes) or None,
    )


def _labels_and_unrated(sessions: pl.DataFrame, arm: str) -> tuple[np.ndarray, int]:
    """The arm's normalized labels and how many of its sessions are unrated."""
    in_arm = sessions.filter(pl.col("variant") == arm)
    return in_arm.filter(pl.col("labeled"))["label"].to_numpy().astype(float), int((~in_arm["labeled"]).sum())


def power_rows(
    sessions: pl.DataFrame,
    exps: Sequence[Experiment],
    oof_rho: Mapping[tuple[str, str], float | None],
    target: float = DEFAULT_TARGET,
) -> list[PowerRow]:
    """Rows of ``estimates.power``: one per comparison, and one per single-arm experiment saying so.

    ``sessions``: an ``assigned_sessions`` frame; ``oof_rho``: (experiment, treatment) -> the out-of-fold
    correlation the effects table found (missing or None: unknown).
    """
    rows = []
    for exp in exps:
        sub = sessions.filter(pl.col("experiment") == exp.name)
        y_c, N_c = _labels_and_unrated(sub, exp.control)
        if not exp.treatments:
            rows.append(
                PowerRow(
                    experiment=exp.name,
                    treatment=None,
                    control=exp.control,
                    n_labeled_treatment=0,
                    n_labeled_control=y_c.size,
                    N_unlabeled_treatment=0,
                    N_unlabeled_control=N_c,
                    note=exp.nothing_to_compare,
                )
            )
        for treatment in exp.treatments:
            y_t, N_t = _labels_and_unrated(sub, treatment)
            known = oof_rho.get((exp.name, treatment))
            rho = float("nan") if known is None else float(known)
            rows.append(power_row(exp.name, treatment, exp.control, y_t, y_c, N_t, N_c, rho, target))
    return rows
