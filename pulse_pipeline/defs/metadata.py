"""Numbers in asset and check metadata as the Dagster UI shows them: floats to ``SIGNIFICANT`` significant digits.

Why: the UI prints a float metadata value with every digit Python keeps (``0.31234567890123456``: up to 19 shown),
which reads as precision no estimate has. Four significant digits are what the markdown tables show
(``markdown.py``, ``.4g``), enough to tell runs apart on the UI's plots over materializations. The warehouse keeps
every digit; metadata is for reading.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import dagster as dg
import numpy as np

SIGNIFICANT = 4


def significant(value: float, digits: int = SIGNIFICANT) -> float:
    """``value`` rounded to ``digits`` significant digits (0.0123456 → 0.01235, 1234.5678 → 1235.0); NaN, ±inf and
    0 as they are."""
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.{digits}g}")


def rounded(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` with every float (a Python or NumPy float, or a float metadata value) to ``SIGNIFICANT``
    significant digits; other values (counts, text, tables) as they are."""
    out: dict[str, Any] = {}
    for name, value in metadata.items():
        if isinstance(value, dg.FloatMetadataValue) and value.value is not None:
            value = dg.MetadataValue.float(significant(value.value))
        elif isinstance(value, float | np.floating):
            value = significant(value)
        out[name] = value
    return out
