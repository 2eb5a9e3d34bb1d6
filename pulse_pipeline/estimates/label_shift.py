"""Do rated sessions look like unrated ones? PPI assumes they do.

For every feature, the rank-biserial correlation between rated and unrated sessions: P(rated > unrated) minus
P(rated < unrated) over all pairs, from -1 to 1, 0 when the two look alike. The paper found 0.32 for the user
message count: chattier sessions get rated more. Above ``WARN_ABOVE`` in absolute value the asset check warns;
the effects table then carries the AIPW row, which reweights rated sessions to stand for all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from ..stats.multitest import benjamini_hochberg
from ..stats.two_sample import rank_biserial

WARN_ABOVE = 0.3


@dataclass(frozen=True)
class LabelShiftRow:
    """One row of ``estimates.label_shift``: one feature, rated against unrated sessions."""

    feature: str
    n_rated: int
    n_unrated: int
    mean_rated: float
    mean_unrated: float
    rank_biserial: float
    p_value: float
    p_bh: float | None  # set once every feature's p-value is known
    note: str | None


def label_shift_rows(frame: pl.DataFrame, features: Sequence[str]) -> list[LabelShiftRow]:
    """Rows of ``estimates.label_shift``.

    ``frame``: one row per session with ``labeled`` and the ``features`` columns (null = unknown, left out).
    """
    rated = frame.filter(pl.col("labeled"))
    unrated = frame.filter(~pl.col("labeled"))
    rows = []
    for feature in features:
        x_r = rated[feature].drop_nulls().cast(pl.Float64).to_numpy()
        x_u = unrated[feature].drop_nulls().cast(pl.Float64).to_numpy()
        result = rank_biserial(x_r, x_u)
        missing = [side for side, x in (("rated", x_r), ("unrated", x_u)) if not x.size]
        note = f"no {' and no '.join(missing)} sessions with a value: no shift measurable" if missing else result.note
        rows.append(
            LabelShiftRow(
                feature=feature,
                n_rated=x_r.size,
                n_unrated=x_u.size,
                mean_rated=float(x_r.mean()) if x_r.size else float("nan"),
                mean_unrated=float(x_u.mean()) if x_u.size else float("nan"),
                rank_biserial=result.statistic,
                p_value=result.p_value,
                p_bh=None,
                note=note,
            )
        )
    p_bh = benjamini_hochberg(np.array([r.p_value for r in rows], dtype=float))
    return [replace(r, p_bh=float(q)) for r, q in zip(rows, p_bh, strict=True)]
