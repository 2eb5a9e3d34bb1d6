"""Sample-ratio mismatch: were the arms of each experiment filled in the proportions intended?

A split that drifts from its design (a bug in assignment, a crash that drops one arm's sessions, bots in one arm)
biases every comparison in the experiment, whatever the estimator. Experimentation platforms therefore test the
assignment counts first: a chi-squared goodness of fit against the intended shares, alarming at p < 0.001.

The counts are of the randomized unit (``experiments.resolve_unit``): sessions, or users when the experiment
randomizes users. Counting sessions of a user-randomized experiment would test the wrong thing: one heavy user
moves an arm's session count by hundreds while the split of users is fine, so the chi-square on sessions alarms
falsely (its variance assumes independent sessions). Under unit = "user" a user seen in several arms is left out
(the note says how many) and a session without a user id counts as one unit of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from ..stats.two_sample import sample_ratio_test
from .experiments import for_unit, resolve_unit

ALARM_P = 0.001


@dataclass(frozen=True)
class SrmRow:
    """One row of ``estimates.srm_check``: one arm of one experiment, with the experiment's test."""

    experiment: str
    arm: str
    sessions: int
    intended_share: float
    expected_sessions: float
    observed_share: float
    chi2: float
    p_value: float
    mismatch: bool
    note: str | None
    unit: str = "session"  # what was counted and tested: "session" or "user"
    unit_source: str | None = None  # "configured" or "detected: <evidence>" (None: not resolved)
    units: int = 0  # randomized units in the arm (users or sessions): what the chi-square tests
    expected_units: float = 0.0  # intended_share x all units of the experiment


@dataclass(frozen=True)
class UnitCounts:
    """One experiment's randomized unit, its source, units per arm and what was left out (a note or None)."""

    unit: str
    source: str
    counts: dict[str, int]
    note: str | None = None


def unit_counts(assignments: pl.DataFrame, configured: Mapping[str, str]) -> dict[str, UnitCounts]:
    """experiment -> :class:`UnitCounts` from ``staging.assignments`` rows (``experiment``, ``variant``,
    ``user_id``): sessions per arm, or (unit user) distinct users per arm, switching users left out and each
    session without a user id one unit. ``configured``: ``experiments.read_units``."""
    out: dict[str, UnitCounts] = {}
    for (name,), group in assignments.group_by("experiment", maintain_order=True):
        unit = resolve_unit(group, configured.get(name))
        if unit.unit == "user":
            kept = for_unit(group, unit)
            per_arm = kept.group_by("variant").agg(
                (pl.col("user_id").drop_nulls().n_unique() + pl.col("user_id").null_count()).alias("n")
            )
        else:
            per_arm = group.group_by("variant").agg(pl.len().alias("n"))
        counts = dict(zip(per_arm["variant"].to_list(), per_arm["n"].to_list(), strict=True))
        for arm in group["variant"].unique().to_list():
            counts.setdefault(arm, 0)  # every user of the arm switched: 0 units left
        out[name] = UnitCounts(unit.unit, unit.source, counts, unit.note)
    return out


def srm_rows(
    counts: dict[str, dict[str, int]],
    splits: dict[str, dict[str, float]],
    units: Mapping[str, UnitCounts] | None = None,
) -> list[SrmRow]:
    """Rows of ``estimates.srm_check``.

    ``counts``: experiment -> arm -> assigned sessions; ``splits``: experiment -> arm -> intended weight (an
    experiment without one is meant to split equally). An arm the split names but the data lack counts 0; an arm
    the data have but the split omits is tested against share 0, which always flags the mismatch, and says so.
    ``splits`` comes from ``experiments.read_splits``, which refuses a bad split (the command stops before any work,
    ``settings_files``), so there is no half-usable split here. ``units``: experiment ->
    :class:`UnitCounts` (:func:`unit_counts`); the test runs on those units; an experiment without an entry is
    tested on its sessions (unit "session", source None).
    """
    rows: list[SrmRow] = []
    for experiment in sorted(counts):
        sessions = dict(counts[experiment])
        unit = (units or {}).get(experiment)
        observed = dict(unit.counts) if unit is not None else dict(sessions)
        weights = splits.get(experiment)
        notes = [unit.note] if unit is not None and unit.note else []
        if weights is None:
            weights = dict.fromkeys(observed, 1.0)
        else:
            for arm in weights:
                observed.setdefault(arm, 0)
            unplanned = sorted(a for a in observed if a not in weights)
            if unplanned:
                notes.append(f"arm(s) {', '.join(unplanned)} not in the configured split")
        for arm in observed:
            sessions.setdefault(arm, 0)
        arms = sorted(observed)
        total_sessions = sum(sessions.get(a, 0) for a in arms)
        total_weight = sum(weights.get(a, 0.0) for a in arms)
        shares = [weights.get(a, 0.0) / total_weight for a in arms]
        total = sum(observed.values())
        chi2 = p = float("nan")
        if len(arms) < 2:
            notes.append("single-arm experiment: no split to test")
            mismatch = False
        elif any(share == 0 for share in shares):
            mismatch = True  # sessions in an arm meant to get none: a mismatch whatever the counts
        else:
            result = sample_ratio_test([observed[a] for a in arms], shares)
            chi2, p = result.statistic, result.p_value
            mismatch = bool(p < ALARM_P)
            if result.note:
                notes.append(result.note)
        note = "; ".join(notes) or None
        for arm, share in zip(arms, shares, strict=True):
            rows.append(
                SrmRow(
                    experiment=experiment,
                    arm=arm,
                    sessions=sessions.get(arm, 0),
                    intended_share=share,
                    expected_sessions=share * total_sessions,
                    observed_share=observed[arm] / total if total else float("nan"),
                    chi2=chi2,
                    p_value=p,
                    mismatch=mismatch,
                    note=note,
                    unit=unit.unit if unit is not None else "session",
                    unit_source=unit.source if unit is not None else None,
                    units=observed[arm],
                    expected_units=share * total,
                )
            )
    return rows
