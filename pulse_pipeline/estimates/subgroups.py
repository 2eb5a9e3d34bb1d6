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

import numpy as np
import polars as pl

from ..stats.naive import welch_difference
from ..stats.ppi import difference, ppi_mean, wald_p_value
from ..stats.two_sample import welch_test
from .experiments import Experiment

DIMENSIONS = ("task_type", "development_cluster")
DEFAULT_MIN_RATINGS = 10


def subgroup_columns(columns: Sequence[str]) -> list[tuple[str, str, str]]:
    """(dimension, subgroup, column) for every one-hot subgroup column, e.g. ("task_type", "fix_bugs", ...)."""
    return [(d, c[len(d) + 2 :], c) for d in DIMENSIONS for c in columns if c.startswith(f"{d}__")]


def _arm(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rated = frame.filter(pl.col("labeled"))
    unrated = frame.filter(~pl.col("labeled"))
    return (
        rated["label"].to_numpy().astype(float),
        rated["prediction"].to_numpy().astype(float),
        unrated["prediction"].to_numpy().astype(float),
    )


def subgroup_effect_rows(frame: pl.DataFrame, exps: Sequence[Experiment], min_ratings: int) -> list[tuple]:
    """Rows of ``estimates.segment_effects`` (column order of ``tables.SEGMENT_EFFECTS``).

    ``frame``: one row per assigned session with ``experiment``, ``variant``, ``labeled``, ``label`` (normalized,
    null when unrated), ``prediction`` (normalized cross-fit prediction) and the 0/1 subgroup columns.
    """
    rows: list[tuple] = []
    subgroups = subgroup_columns(frame.columns)
    for exp in exps:
        sub = frame.filter(pl.col("experiment") == exp.name)
        if not exp.treatments:
            note = f"single-arm experiment (only {exp.control!r}): nothing to compare"
            rows.append((exp.name, None, exp.control, None, None, "none", *[None] * 9, note))
        for treatment in exp.treatments:
            for dimension, subgroup, column in subgroups:
                members = sub.filter(pl.col(column) == 1)
                y_t, f_t, u_t = _arm(members.filter(pl.col("variant") == treatment))
                y_c, f_c, u_c = _arm(members.filter(pl.col("variant") == exp.control))
                head = (exp.name, treatment, exp.control, dimension, subgroup)
                counts = (y_t.size, y_c.size, u_t.size, u_c.size)
                if min(y_t.size, y_c.size) < min_ratings:
                    reason = f"{y_t.size} and {y_c.size} ratings (fewer than {min_ratings} in an arm): not estimated"
                    rows.append((*head, "none", *counts, *[None] * 5, reason))
                    continue
                welch = welch_difference(y_t, y_c)
                p_welch = welch_test(y_t, y_c).p_value
                rows.append((*head, "naive_welch", *counts, *_interval(welch), p_welch, welch.note))
                ppi = difference(ppi_mean(y_t, f_t, u_t), ppi_mean(y_c, f_c, u_c))
                rows.append((*head, "ppi", *counts, *_interval(ppi), wald_p_value(ppi.estimate, ppi.se), ppi.note))
    return rows


def _interval(iv) -> tuple[float, float, float, float]:
    return iv.estimate, iv.se, iv.ci_low, iv.ci_high
