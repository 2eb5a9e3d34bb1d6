"""Which behaviours changed between arms: the paper's Tables 6-9 (features) and 10 (agent cost per session).

For every experiment comparison and every session feature, each arm's mean and the difference with its test:
Welch's t for counts and other numbers, Fisher's exact test for 0/1 features. Twice: on the rated sessions, as
the paper does, and on all sessions (no reason to throw the unrated ones away when asking what the agent did).
The p-values are Benjamini-Hochberg adjusted within each table (experiment x comparison x population): with
fifty features some differ by chance, and BH bounds the share of false discoveries among those called different.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl

from ..stats.multitest import benjamini_hochberg
from ..stats.two_sample import binary_test, welch_test
from .experiments import Experiment

POPULATIONS = ("rated", "all")


def _is_binary(values: np.ndarray) -> bool:
    return values.size > 0 and bool(np.isin(values, (0.0, 1.0)).all())


def compare_feature(x_t: np.ndarray, x_c: np.ndarray) -> tuple:
    """(kind, mean_t, mean_c, sd_t, sd_c, difference, relative_difference, test, p_value, note) of one feature."""
    nan = float("nan")
    kind = "binary" if _is_binary(np.r_[x_t, x_c]) else "numeric"
    mean_t = float(x_t.mean()) if x_t.size else nan
    mean_c = float(x_c.mean()) if x_c.size else nan
    sd_t = float(x_t.std(ddof=1)) if x_t.size > 1 else nan
    sd_c = float(x_c.std(ddof=1)) if x_c.size > 1 else nan
    diff = mean_t - mean_c
    relative = diff / mean_c if mean_c and not math.isnan(mean_c) else nan
    result = binary_test(x_t, x_c) if kind == "binary" else welch_test(x_t, x_c)
    return kind, mean_t, mean_c, sd_t, sd_c, diff, relative, result.test, result.p_value, result.note


def feature_comparison_rows(frame: pl.DataFrame, features: Sequence[str], exps: Sequence[Experiment]) -> list[tuple]:
    """Rows of ``estimates.feature_comparisons`` (column order of ``tables.FEATURE_COMPARISONS``).

    ``frame``: one row per assigned session with ``experiment``, ``variant``, ``labeled`` and the ``features``
    columns (numbers; null where unknown, left out of that feature's test and counted in its n).
    """
    rows: list[tuple] = []
    for exp in exps:
        sub = frame.filter(pl.col("experiment") == exp.name)
        if not exp.treatments:
            note = f"single-arm experiment (only {exp.control!r}): nothing to compare"
            rows.append((exp.name, None, exp.control, None, None, None, 0, sub.height, *[None] * 9, note))
        for treatment in exp.treatments:
            for population in POPULATIONS:
                pop = sub if population == "all" else sub.filter(pl.col("labeled"))
                arm_t = pop.filter(pl.col("variant") == treatment)
                arm_c = pop.filter(pl.col("variant") == exp.control)
                table = []
                for feature in features:
                    x_t = arm_t[feature].drop_nulls().cast(pl.Float64).to_numpy()
                    x_c = arm_c[feature].drop_nulls().cast(pl.Float64).to_numpy()
                    kind, m_t, m_c, s_t, s_c, diff, rel, test, p, note = compare_feature(x_t, x_c)
                    table.append(
                        [exp.name, treatment, exp.control, population, feature, kind, x_t.size, x_c.size]
                        + [m_t, m_c, s_t, s_c, diff, rel, test, p, None, note]
                    )
                p_bh = benjamini_hochberg(np.array([r[15] for r in table], dtype=float))
                for r, q in zip(table, p_bh, strict=True):
                    r[16] = float(q)
                    rows.append(tuple(r))
    return rows
