"""Effects within subgroups: does the treatment help with some kinds of work and hurt with others?

A subgroup is a task type or a development cluster (the annotator's one-hot columns ``task_type__*`` and
``development_cluster__*``; a session may sit in two clusters). Within each, the naive difference of rated means
(Welch) and the PPI difference over the same cross-fit predictions the whole-experiment estimate uses. A subgroup
with fewer than ``min_ratings`` ratings in either arm gets one row saying so instead of an estimate that would
only be noise. Subgroup estimates are many and small: read them as where to look, not as findings.

The rows go to ``estimates.segment_effects``, whose column ``segment`` names the subgroup (the warehouse contract
keeps that name; elsewhere in PULSE a segment is a work segment, the unit users rate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import polars as pl

from ..stats.naive import Interval, welch_difference
from ..stats.ppi import difference, ppi_mean, wald_p_value
from ..stats.two_sample import welch_test
from .effects import arm_data
from .experiments import Experiment
from .methods import NO_METHOD, Method

DIMENSIONS = ("task_type", "development_cluster")
DEFAULT_MIN_RATINGS = 10


@dataclass(frozen=True, kw_only=True)
class SubgroupEffectRow:
    """One row of ``estimates.segment_effects``: one method's effect within one subgroup (``segment``)."""

    experiment: str
    treatment: str | None
    control: str
    dimension: str | None = None  # "task_type" or "development_cluster"
    segment: str | None = None  # the subgroup, e.g. "fix_bugs"
    method: str  # Method.NAIVE_WELCH, Method.PPI, or NO_METHOD "none" (not estimated; the note says why)
    n_labeled_treatment: int | None = None
    n_labeled_control: int | None = None
    N_unlabeled_treatment: int | None = None
    N_unlabeled_control: int | None = None
    effect: float | None = None
    se: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    note: str | None = None


def subgroup_columns(columns: Sequence[str]) -> list[tuple[str, str, str]]:
    """(dimension, subgroup, column) for every one-hot subgroup column, e.g. ("task_type", "fix_bugs", ...)."""
    return [(d, c[len(d) + 2 :], c) for d in DIMENSIONS for c in columns if c.startswith(f"{d}__")]


def subgroup_effect_rows(frame: pl.DataFrame, exps: Sequence[Experiment], min_ratings: int) -> list[SubgroupEffectRow]:
    """Rows of ``estimates.segment_effects``.

    ``frame``: one row per assigned session with ``experiment``, ``variant``, ``labeled``, ``label`` (normalized,
    null when unrated), ``prediction`` (normalized cross-fit prediction) and the 0/1 subgroup columns.
    """
    rows: list[SubgroupEffectRow] = []
    subgroups = subgroup_columns(frame.columns)
    for exp in exps:
        sub = frame.filter(pl.col("experiment") == exp.name)
        if not exp.treatments:
            rows.append(
                SubgroupEffectRow(
                    experiment=exp.name,
                    treatment=None,
                    control=exp.control,
                    method=NO_METHOD,
                    note=exp.nothing_to_compare,
                )
            )
        for treatment in exp.treatments:
            for dimension, subgroup, column in subgroups:
                members = sub.filter(pl.col(column) == 1)
                t = arm_data(treatment, members.filter(pl.col("variant") == treatment))
                c = arm_data(exp.control, members.filter(pl.col("variant") == exp.control))
                counts = SubgroupEffectRow(
                    experiment=exp.name,
                    treatment=treatment,
                    control=exp.control,
                    dimension=dimension,
                    segment=subgroup,
                    method=NO_METHOD,
                    n_labeled_treatment=t.y.size,
                    n_labeled_control=c.y.size,
                    N_unlabeled_treatment=t.f_unlabeled.size,
                    N_unlabeled_control=c.f_unlabeled.size,
                )
                if min(t.y.size, c.y.size) < min_ratings:
                    reason = f"{t.y.size} and {c.y.size} ratings (fewer than {min_ratings} in an arm): not estimated"
                    rows.append(replace(counts, note=reason))
                    continue
                welch = welch_difference(t.y, c.y)
                p_welch = welch_test(t.y, c.y).p_value
                rows.append(
                    replace(counts, method=Method.NAIVE_WELCH, **_interval(welch), p_value=p_welch, note=welch.note)
                )
                ppi = difference(ppi_mean(t.y, t.f_labeled, t.f_unlabeled), ppi_mean(c.y, c.f_labeled, c.f_unlabeled))
                p_ppi = wald_p_value(ppi.estimate, ppi.se)
                rows.append(replace(counts, method=Method.PPI, **_interval(ppi), p_value=p_ppi, note=ppi.note))
    return rows


def _interval(iv: Interval) -> dict[str, float]:
    """The effect and its interval, by column name."""
    return {"effect": iv.estimate, "se": iv.se, "ci_low": iv.ci_low, "ci_high": iv.ci_high}
