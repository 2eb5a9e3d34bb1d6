"""How far two sets of judgements of the same items agree, each with a (1 - alpha) interval: Cohen's kappa of two
categorical verdicts, and the mean of a paired difference (the gain of one predictor's squared error over
another's).

Plain arrays in, a frozen :class:`Agreement` out. Degenerate inputs never raise: the value (or the interval) is NaN
and ``note`` says why.

Cohen's kappa (Cohen 1960) of verdicts a_i, b_i over n items, with p_ij the share of items a puts in category i
and b in j, p_i. and p_.j the margins::

    p_o = sum_i p_ii,   p_e = sum_i p_i. p_.i,   kappa = (p_o - p_e) / (1 - p_e)

(``sklearn.metrics.cohen_kappa_score``). Its large-sample variance where kappa is not 0 (Fleiss, Cohen & Everitt
1969; ``statsmodels.stats.inter_rater.cohens_kappa``'s ``var_kappa``, checked in ``tests/test_agreement_watch.py``)::

    A = sum_i p_ii [1 - (p_i. + p_.i)(1 - kappa)]^2
    B = (1 - kappa)^2 sum_{i != j} p_ij (p_.i + p_j.)^2
    C = [kappa - p_e (1 - kappa)]^2
    Var(kappa) = (A + B - C) / (n (1 - p_e)^2)

and the Wald interval kappa -+ z_{1 - alpha/2} sqrt(Var), cut to [-1, 1]. Why not a bootstrap: the formula is the
delta method of the same statistic, it costs nothing where a watch recomputes it for every window and arm, and
at the few dozen items a window holds it agrees with the percentile bootstrap (the test compares them); a bootstrap
of 1 000 resamples per window and arm would make the watch the slowest step of the modeling stage for the same
interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Agreement:
    """A statistic of ``n`` paired items with its (1 - alpha) interval; ``note`` says what was degenerate."""

    value: float
    ci_low: float
    ci_high: float
    n: int
    note: str | None = None


NAN = float("nan")


@lru_cache(maxsize=64)
def normal_quantile(level: float) -> float:
    """z_level of the standard normal (cached: a watch asks for the same one thousands of times)."""
    return float(stats.norm.ppf(level))


@lru_cache(maxsize=4096)
def t_quantile(level: float, df: int) -> float:
    """t_{level, df} (cached, as ``normal_quantile``)."""
    return float(stats.t.ppf(level, df))


def cohen_kappa(a, b, *, alpha: float = 0.05) -> Agreement:
    """Cohen's kappa of the verdicts ``a`` and ``b`` (any hashable categories; the same length), with the Wald
    interval of Fleiss, Cohen & Everitt's large-sample variance (module docstring).

    Undefined (NaN, with a note): no item; both verdicts one and the same category throughout (p_e = 1: nothing to
    agree on beyond chance). The interval is NaN (value kept) with fewer than 2 items."""
    a = np.asarray(a).reshape(-1)
    b = np.asarray(b).reshape(-1)
    if a.size != b.size:
        raise ValueError(f"a and b must have the same length, got {a.size} and {b.size}")
    n = int(a.size)
    if n == 0:
        return Agreement(NAN, NAN, NAN, 0, "no item judged by both")
    categories, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    k = categories.size
    table = np.zeros((k, k))
    np.add.at(table, (codes[:n], codes[n:]), 1.0)
    p = table / n
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    p_o = float(np.trace(p))
    p_e = float(np.dot(rows, cols))
    if p_e >= 1.0 - 1e-12:
        return Agreement(NAN, NAN, NAN, n, "kappa undefined: both verdicts one and the same value throughout")
    kappa = (p_o - p_e) / (1.0 - p_e)
    if n < 2:
        return Agreement(kappa, NAN, NAN, n, "one item: no interval")
    term_a = float(np.sum(np.diag(p) * (1.0 - (rows + cols) * (1.0 - kappa)) ** 2))
    spread = (cols[:, None] + rows[None, :]) ** 2  # (p_.i + p_j.)^2 at [i, j]
    np.fill_diagonal(spread, 0.0)
    term_b = (1.0 - kappa) ** 2 * float(np.sum(p * spread))
    term_c = (kappa - p_e * (1.0 - kappa)) ** 2
    var = max(0.0, (term_a + term_b - term_c) / (n * (1.0 - p_e) ** 2))
    half = normal_quantile(1.0 - alpha / 2.0) * math.sqrt(var)
    return Agreement(kappa, max(-1.0, kappa - half), min(1.0, kappa + half), n)


def paired_mean(d, *, alpha: float = 0.05) -> Agreement:
    """The mean of paired differences ``d`` with its t interval: mean -+ t_{1 - alpha/2, n - 1} sd(d) / sqrt(n).
    The interval is NaN (value kept) with fewer than 2 items; NaN throughout with none."""
    d = np.asarray(d, dtype=np.float64).reshape(-1)
    n = int(d.size)
    if n == 0:
        return Agreement(NAN, NAN, NAN, 0, "no item")
    mean = float(d.mean())
    if n < 2:
        return Agreement(mean, NAN, NAN, n, "one item: no interval")
    half = t_quantile(1.0 - alpha / 2.0, n - 1) * float(d.std(ddof=1)) / math.sqrt(n)
    return Agreement(mean, mean - half, mean + half, n)
