"""Correlation of paired values (e.g. per-cluster human-rating and benchmark differences) with bootstrap intervals.

:func:`correlations` returns Pearson's and Spearman's coefficients, each a frozen :class:`Correlation`. Degenerate
inputs (fewer than 3 pairs, a constant variable, a NaN) never raise and never return an unexplained NaN: the
reason is written in ``Correlation.note``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

MEASURES = ("pearson", "spearman")


@dataclass(frozen=True)
class Correlation:
    """A correlation coefficient of ``n`` pairs with a (1 - alpha) percentile-bootstrap interval.

    ``note`` is None for a regular result and otherwise says, in words, what was degenerate about the input (the
    coefficient is then NaN) or about the resamples (how many were dropped).
    """

    measure: str
    n: int
    coefficient: float
    ci_low: float
    ci_high: float
    note: str | None = None


def _degenerate(x: np.ndarray, y: np.ndarray) -> str | None:
    if x.size < 3:
        return f"{x.size} pairs: a correlation needs at least 3"
    bad = [name for name, v in (("x", x), ("y", y)) if not np.isfinite(v).all()]
    if bad:
        return f"{' and '.join(bad)} contain NaN or infinite values"
    flat = [name for name, v in (("x", x), ("y", y)) if np.ptp(v) == 0]
    if flat:
        return f"{' and '.join(flat)} constant: the correlation is undefined"
    return None


def _rowwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r of each row of ``a`` with the same row of ``b`` (rows must not be constant)."""
    ac = a - a.mean(axis=1, keepdims=True)
    bc = b - b.mean(axis=1, keepdims=True)
    return (ac * bc).sum(axis=1) / np.sqrt((ac * ac).sum(axis=1) * (bc * bc).sum(axis=1))


def correlations(x, y, *, n_boot: int = 10_000, seed: int = 0, alpha: float = 0.05) -> list[Correlation]:
    """Pearson's and Spearman's correlation of the pairs (x_i, y_i), with percentile bootstrap intervals.

    With centered values x̃ = x - mean(x), ỹ = y - mean(y)::

        pearson  r   = sum(x̃ ỹ) / sqrt(sum(x̃²) · sum(ỹ²))          (scipy.stats.pearsonr)
        spearman r_s = pearson r of rank(x), rank(y)                  (scipy.stats.spearmanr; ties: average ranks)

    Bootstrap: one (n_boot, n) index matrix drawn with ``numpy.random.default_rng(seed).integers`` resamples whole
    pairs; each row gives r (centered dot products) and r_s (``scipy.stats.rankdata(axis=1)`` then r), so both
    measures use the same resamples. A resample in which x or y is constant has no correlation and is dropped
    (the note counts them). Then::

        CI = [quantile(r*, alpha/2), quantile(r*, 1 - alpha/2)]      (numpy's default linear quantile)

    The point estimate is the observed coefficient, not the bootstrap mean. With a handful of pairs (the paper's
    Table 3 has 7 clusters per comparison) the intervals are very wide, typically spanning most of [-1, 1]: a
    coefficient from 7 points says little, and percentile intervals at such n are themselves rough. Memory is
    about a few times 8·n_boot·n bytes: this is meant for a small number of pairs.

    Args:
        x, y: paired values, 1-D, the same length n.
        n_boot: B, the number of bootstrap resamples (>= 2).
        seed: seed of the numpy Generator; the intervals are exactly reproducible for a given seed.
        alpha: error level; the intervals target coverage 1 - alpha. Must be in (0, 1).

    Returns:
        ``[pearson, spearman]``. Fewer than 3 pairs, a NaN or infinite value, or a constant x or y: coefficient
        and interval NaN, with the reason in the note. All resamples dropped: coefficient kept, interval NaN.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_boot < 2:
        raise ValueError("n_boot must be at least 2")
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if x.size != y.size:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}")
    n = int(x.size)
    nan = float("nan")
    why = _degenerate(x, y)
    if why is not None:
        return [Correlation(m, n, nan, nan, nan, note=why) for m in MEASURES]

    observed = {"pearson": float(stats.pearsonr(x, y).statistic), "spearman": float(stats.spearmanr(x, y).statistic)}
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    xs, ys = x[idx], y[idx]
    keep = (np.ptp(xs, axis=1) > 0) & (np.ptp(ys, axis=1) > 0)
    xs, ys = xs[keep], ys[keep]
    dropped = n_boot - int(keep.sum())
    draws = {
        "pearson": _rowwise_pearson(xs, ys),
        "spearman": _rowwise_pearson(stats.rankdata(xs, axis=1), stats.rankdata(ys, axis=1)),
    }
    note = None
    if dropped:
        note = f"{dropped} of {n_boot} resamples had a constant variable and were dropped"
    out = []
    for m in MEASURES:
        if draws[m].size == 0:
            out.append(Correlation(m, n, observed[m], nan, nan, note=f"all {n_boot} resamples had a constant variable"))
            continue
        lo, hi = np.quantile(draws[m], [alpha / 2.0, 1.0 - alpha / 2.0])
        out.append(Correlation(m, n, observed[m], float(lo), float(hi), note=note))
    return out
