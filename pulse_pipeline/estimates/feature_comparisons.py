"""Which behaviours changed between arms: the paper's Tables 6-9 (features) and 10 (agent cost per session).

For every experiment comparison and every session feature, each arm's mean and the difference with its test:
Welch's t for counts and other numbers, Fisher's exact test for 0/1 features. Twice: on the rated sessions, as
the paper does, and on all sessions (no reason to throw the unrated ones away when asking what the agent did).
The p-values are Benjamini-Hochberg adjusted within each table (experiment x comparison x population): with
fifty features some differ by chance, and BH bounds the share of false discoveries among those called different.

Each row also has the standardized difference (``standardized_difference``, Austin 2009's standardized mean
difference): d = (mean_t − mean_c) / √((sd_t² + sd_c²) / 2), the arms' sample sds (ddof 1) for counts and 0/1
features alike. Unlike the p-value it does not grow with the sample, so it measures balance: how alike the arms'
sessions are. That is what an observational comparison (arms from a session field, ``field_arms.py``) needs
beside its difference of ratings; |d| above 0.1 is the usual mark of arms that differ in that feature.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from ..stats.multitest import benjamini_hochberg
from ..stats.two_sample import binary_test, welch_test
from .experiments import Experiment

POPULATIONS = ("rated", "all")


@dataclass(frozen=True, kw_only=True)
class FeatureComparisonRow:
    """One row of ``estimates.feature_comparisons``: one feature in one population of one comparison."""

    experiment: str
    treatment: str | None
    control: str
    population: str | None = None
    feature: str | None = None
    kind: str | None = None  # "binary" (0/1 values only) or "numeric"
    n_treatment: int
    n_control: int
    mean_treatment: float | None = None
    mean_control: float | None = None
    sd_treatment: float | None = None
    sd_control: float | None = None
    difference: float | None = None
    relative_difference: float | None = None
    test: str | None = None
    p_value: float | None = None
    p_bh: float | None = None  # set once every p-value of the table is known
    note: str | None = None
    standardized_difference: float | None = None  # (mean_t - mean_c) / sqrt((sd_t^2 + sd_c^2) / 2): the balance


def _is_binary(values: np.ndarray) -> bool:
    return values.size > 0 and bool(np.isin(values, (0.0, 1.0)).all())


def compare_feature(
    x_t: np.ndarray, x_c: np.ndarray, exp: Experiment, treatment: str, population: str, feature: str
) -> FeatureComparisonRow:
    """One feature's row (``p_bh`` not yet set): each arm's mean and sd, the difference, its test and p-value."""
    nan = float("nan")
    kind = "binary" if _is_binary(np.r_[x_t, x_c]) else "numeric"
    mean_t = float(x_t.mean()) if x_t.size else nan
    mean_c = float(x_c.mean()) if x_c.size else nan
    difference = mean_t - mean_c
    result = binary_test(x_t, x_c) if kind == "binary" else welch_test(x_t, x_c)
    return FeatureComparisonRow(
        experiment=exp.name,
        treatment=treatment,
        control=exp.control,
        population=population,
        feature=feature,
        kind=kind,
        n_treatment=x_t.size,
        n_control=x_c.size,
        mean_treatment=mean_t,
        mean_control=mean_c,
        sd_treatment=float(x_t.std(ddof=1)) if x_t.size > 1 else nan,
        sd_control=float(x_c.std(ddof=1)) if x_c.size > 1 else nan,
        difference=difference,
        relative_difference=difference / mean_c if mean_c and not math.isnan(mean_c) else nan,
        test=result.test,
        p_value=result.p_value,
        note=result.note,
        standardized_difference=standardized_difference(x_t, x_c),
    )


def standardized_difference(x_t: np.ndarray, x_c: np.ndarray) -> float:
    """(mean_t − mean_c) / √((sd_t² + sd_c²) / 2) with sample sds (ddof 1); NaN when an arm has fewer than two
    values or both arms are constant (no spread to measure the difference against)."""
    if x_t.size < 2 or x_c.size < 2:
        return float("nan")
    pooled = math.sqrt((float(x_t.var(ddof=1)) + float(x_c.var(ddof=1))) / 2)
    return (float(x_t.mean()) - float(x_c.mean())) / pooled if pooled > 0 else float("nan")


def feature_comparison_rows(
    frame: pl.DataFrame, features: Sequence[str], exps: Sequence[Experiment]
) -> list[FeatureComparisonRow]:
    """Rows of ``estimates.feature_comparisons``.

    ``frame``: one row per assigned session with ``experiment``, ``variant``, ``labeled`` and the ``features``
    columns (numbers; null where unknown, left out of that feature's test and counted in its n).
    """
    rows: list[FeatureComparisonRow] = []
    for exp in exps:
        sub = frame.filter(pl.col("experiment") == exp.name)
        if not exp.treatments:
            rows.append(
                FeatureComparisonRow(
                    experiment=exp.name,
                    treatment=None,
                    control=exp.control,
                    n_treatment=0,
                    n_control=sub.height,
                    note=exp.nothing_to_compare,
                )
            )
        for treatment in exp.treatments:
            for population in POPULATIONS:
                pop = sub if population == "all" else sub.filter(pl.col("labeled"))
                arm_t = pop.filter(pl.col("variant") == treatment)
                arm_c = pop.filter(pl.col("variant") == exp.control)
                table = []
                for feature in features:
                    x_t = arm_t[feature].drop_nulls().cast(pl.Float64).to_numpy()
                    x_c = arm_c[feature].drop_nulls().cast(pl.Float64).to_numpy()
                    table.append(compare_feature(x_t, x_c, exp, treatment, population, feature))
                p_bh = benjamini_hochberg(np.array([r.p_value for r in table], dtype=float))
                rows.extend(replace(r, p_bh=float(q)) for r, q in zip(table, p_bh, strict=True))
    return rows
