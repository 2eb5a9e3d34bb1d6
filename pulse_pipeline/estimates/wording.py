"""What a comparison's conclusion and its decision both write: numbers as the report writes them, the directions
of a difference, and the words for a single-arm experiment.

Its own module so that ``conclusions`` (the method, the verdict, the sentence) and ``decisions`` (ship, hold, keep
collecting), which ``conclusions`` calls, read the same words without importing each other. Effects in stars are
4 x the 0-1 difference (``stars.label_difference_in_stars``), 2 decimals.
"""

from __future__ import annotations

import math

from ..stars import label_difference_in_stars

HIGHER, LOWER = "higher", "lower"
"""A difference's direction when its interval excludes zero (``conclusions.verdict``)."""
NOTHING_TO_COMPARE = "single-arm experiment: nothing to compare"
"""Why a single-arm experiment has no conclusion and no decision."""


def missing(value: object) -> bool:
    """None or NaN: a statistic that is undefined (too few ratings), stored as NULL."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: float | None, digits: int = 3, signed: bool = False) -> str:
    """The number as the report shows it: ``digits`` decimals (ASCII '-', so it pastes into a calculator), whole
    with thousands separators from 1 000 up (token counts, durations), '–' when missing."""
    if missing(value):
        return "–"
    if abs(value) >= 1000:
        return f"{value:+,.0f}" if signed else f"{value:,.0f}"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def in_stars(value: float | None, signed: bool = True) -> str:
    """A difference on the 0-1 label scale in stars (4 x: ``stars.label_difference_in_stars``), 2 decimals."""
    return number(None if missing(value) else label_difference_in_stars(value), 2, signed)
