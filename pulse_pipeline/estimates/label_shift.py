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

from .. import tables
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

    ``frame``: one row per session with ``labeled`` and the ``features`` columns (null = unknown, left out); an
    ``assigned_sessions`` frame holds a session once per experiment it is in (a randomized one and one whose arms
    are a session field), so each session counts once here, its first row.
    """
    if "session_id" in frame.columns:
        frame = frame.unique("session_id", keep="first", maintain_order=True)
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


# What a shift means for the estimates, and what the report does about it: said wherever the shift is shown (the
# asset check's result in the Dagster UI), so that a warning explains itself.
WHAT_IT_MEANS = (
    "Users choose which sessions to rate. PPI++ corrects the model's predictions by the model's errors on the rated"
    " sessions, assuming rated sessions are like the unrated ones; where they differ on what the features record,"
    " that correction can be off and PPI++'s interval too narrow. AIPW weights each rated session by its estimated"
    " chance of being rated (a model on these features), and stays valid as long as the features record what"
    " drives rating."
)
WHAT_THE_REPORT_DOES = (
    "The report's section 'Do rated sessions look like unrated ones?' shows each feature's shift and advises AIPW"
    " over PPI++ while any is beyond the threshold. Each comparison's PPI++ rows are flagged 'rated sessions are"
    " not representative' when a model on these features tells rated from unrated sessions (out-of-fold AUC above"
    " PULSE_SHIFT_AUC, default 0.6); a flagged comparison is read by AIPW instead of PPI++"
    f" ({tables.EXPERIMENT_EFFECTS.qualified}, column flags)."
)


@dataclass(frozen=True)
class Shift:
    """One feature's difference between rated and unrated sessions, as ``estimates.label_shift`` holds it."""

    feature: str
    rank_biserial: float
    mean_rated: float
    mean_unrated: float


def _mean(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def describe_shift(shift: Shift) -> str:
    """``user_message_count: higher in rated sessions (rank-biserial +0.32; mean 18.5 rated, 12.5 unrated)``."""
    side = "higher" if shift.rank_biserial > 0 else "lower"
    return (
        f"{shift.feature}: {side} in rated sessions (rank-biserial {shift.rank_biserial:+.2f}; mean"
        f" {_mean(shift.mean_rated)} rated, {_mean(shift.mean_unrated)} unrated)"
    )


def shift_finding(shifts: Sequence[Shift], threshold: float = WARN_ABOVE) -> str:
    """One paragraph on what the rated-vs-unrated comparison found: the features beyond ``threshold`` (``shifts``
    ordered largest first), by how much, and what that means for PPI++; or the largest shift when none is.

    ``shifts``: every feature with a measurable shift, largest ``|rank_biserial|`` first."""
    if not shifts:
        return "No feature could be compared between rated and unrated sessions (none of one or the other)."
    beyond = [s for s in shifts if abs(s.rank_biserial) > threshold]
    if not beyond:
        return (
            f"No feature separates rated from unrated sessions beyond |rank-biserial| {threshold:g}; the largest"
            f" shift is {describe_shift(shifts[0])}. PPI++'s assumption that rated sessions are like the rest holds"
            " as far as the features show."
        )
    named = "; ".join(describe_shift(s) for s in beyond)
    return (
        f"{len(beyond)} of {len(shifts)} features differ between rated and unrated sessions beyond |rank-biserial|"
        f" {threshold:g} (0: alike; ±1: every rated session above, or below, every unrated one): {named}. Rated"
        " sessions are not a random sample of the sessions, so prefer AIPW to PPI++ for these comparisons."
    )
