"""Do rated sessions look like unrated ones? PPI assumes they do.

For every feature, the rank-biserial correlation between rated and unrated sessions: P(rated > unrated) minus
P(rated < unrated) over all pairs, from -1 to 1, 0 when the two look alike. The paper found 0.32 for the user
message count: chattier sessions get rated more. Above ``WARN_ABOVE`` in absolute value the asset check warns;
the effects table then carries the AIPW row, which reweights rated sessions to stand for all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from ..stats.multitest import benjamini_hochberg
from ..stats.two_sample import rank_biserial

WARN_ABOVE = 0.3


def label_shift_rows(frame: pl.DataFrame, features: Sequence[str]) -> list[tuple]:
    """Rows of ``estimates.label_shift`` (column order of ``tables.LABEL_SHIFT``).

    ``frame``: one row per session with ``labeled`` and the ``features`` columns (null = unknown, left out).
    """
    rated = frame.filter(pl.col("labeled"))
    unrated = frame.filter(~pl.col("labeled"))
    rows = []
    for feature in features:
        x_r = rated[feature].drop_nulls().cast(pl.Float64).to_numpy()
        x_u = unrated[feature].drop_nulls().cast(pl.Float64).to_numpy()
        result = rank_biserial(x_r, x_u)
        mean_r = float(x_r.mean()) if x_r.size else float("nan")
        mean_u = float(x_u.mean()) if x_u.size else float("nan")
        rows.append([feature, x_r.size, x_u.size, mean_r, mean_u, result.statistic, result.p_value, None, result.note])
    p_bh = benjamini_hochberg(np.array([r[6] for r in rows], dtype=float))
    for r, q in zip(rows, p_bh, strict=True):
        r[7] = float(q)
    return [tuple(r) for r in rows]
