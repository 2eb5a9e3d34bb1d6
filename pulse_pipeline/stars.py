"""The one rule that puts 1-5 star ratings on the [0, 1] label scale the paper reports effects on.

``label = (stars - 1) / 4``: 1 star is 0, 5 stars is 1. A difference of labels is a difference of stars / 4.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

Number = TypeVar("Number", float, np.ndarray)


def stars_to_label(stars: Number) -> Number:
    """Stars (or a mean of stars, or a predicted rating) on the [0, 1] label scale."""
    return (stars - 1) / 4


def label_difference_in_stars(difference: Number) -> Number:
    """A difference on the label scale (an effect, an interval end) in stars."""
    return 4 * difference


def stars_to_label_sql(expression: str) -> str:
    """The same rule in SQL, for queries that compute labels inside DuckDB."""
    return f"({expression} - 1) / 4"
