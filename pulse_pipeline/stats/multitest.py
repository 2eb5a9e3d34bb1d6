"""Adjusted p-values for many tests at once: Holm (family-wise error) and Benjamini-Hochberg (false discovery rate).

Both functions take a 1-D array of p-values and return the adjusted p-values in the same order; reject a
hypothesis at level alpha when its adjusted p-value is <= alpha. NaN p-values (a test that could not be run) stay
NaN and do not count towards m, the number of tests. The results equal
``statsmodels.stats.multitest.multipletests(p, method="holm" | "fdr_bh")[1]`` on the non-NaN entries.
"""

from __future__ import annotations

import numpy as np


def _sorted_finite(p_values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p as float array, indexes of the non-NaN entries in ascending p order, their sorted p-values)."""
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    bad = ~np.isnan(p) & ((p < 0.0) | (p > 1.0))
    if bad.any():
        raise ValueError(f"p-values must be in [0, 1] (or NaN), got {p[bad][:5].tolist()}")
    idx = np.flatnonzero(~np.isnan(p))
    order = idx[np.argsort(p[idx], kind="stable")]
    return p, order, p[order]


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values (controls the family-wise error rate).

    With the m non-NaN p-values sorted ascending, p_(1) <= ... <= p_(m)::

        adj_(i) = max_{j <= i} min(1, (m - j + 1) * p_(j))

    (the running maximum makes the adjusted values monotone in p).

    Args:
        p_values: 1-D array-like of p-values in [0, 1]; NaN allowed.

    Returns:
        Adjusted p-values, 1-D float64, in the order of the input; NaN where the input is NaN.
    """
    p, order, ps = _sorted_finite(p_values)
    out = np.full(p.shape, np.nan)
    m = ps.size
    if m:
        out[order] = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ps))
    return out


def benjamini_hochberg(p_values) -> np.ndarray:
    """Benjamini-Hochberg step-up adjusted p-values ("q-values"; controls the false discovery rate).

    With the m non-NaN p-values sorted ascending, p_(1) <= ... <= p_(m)::

        adj_(i) = min_{j >= i} min(1, m / j * p_(j))

    (the running minimum from the largest p down makes the adjusted values monotone in p).

    Args:
        p_values: 1-D array-like of p-values in [0, 1]; NaN allowed.

    Returns:
        Adjusted p-values, 1-D float64, in the order of the input; NaN where the input is NaN.
    """
    p, order, ps = _sorted_finite(p_values)
    out = np.full(p.shape, np.nan)
    m = ps.size
    if m:
        scaled = np.minimum(1.0, m / np.arange(1, m + 1) * ps)
        out[order] = np.minimum.accumulate(scaled[::-1])[::-1]
    return out
