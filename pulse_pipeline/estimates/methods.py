"""The estimation methods, by the names the estimates tables store in their ``method`` column.

One enumeration instead of bare strings, so a misspelt method is an ``AttributeError`` at import rather than a
comparison that silently never matches. ``Method`` is a ``StrEnum``: each member *is* its stored string
(``Method.PPI == "ppi"``, ``f"{Method.PPI}" == "ppi"``), so rows written with a member hold exactly the values
they held before, and a value read back from the warehouse compares equal to its member.

One care with polars: a list of members given to polars (``pl.col("method").is_in([...])``, ``pl.Series``) is
read as a polars ``Enum`` of those members, which then refuses every other value of the column. Give polars the
stored strings (``stored(...)``); ``==`` with one member, DuckDB parameters and dataclass rows written through
``Warehouse`` (built as ``String``) are fine.

What each method computes is in ``estimates/effects.py`` (its docstring); the formulas are in ``stats/``.
"""

from __future__ import annotations

import enum
from typing import Final


class Method(enum.StrEnum):
    """An estimate of a treatment-vs-control difference, as stored in ``estimates.*.method``."""

    NAIVE_WELCH = "naive_welch"  # difference of the rated means, Welch interval
    NAIVE_BOOTSTRAP = "naive_bootstrap"  # the same difference, percentile bootstrap interval
    PPI = "ppi"  # PPI++ over the cross-fit predictions (lambda estimated, clipped to [0, 1])
    CROSSPPI = "crossppi"  # cross-prediction PPI (lambda tuned per arm, fold-mean predictions)
    AIPW = "aipw"  # doubly robust: corrects for who rates with a cross-fit propensity
    PPI_STRATIFIED = "ppi_stratified"  # PPI++ with a lambda per stratum (task type), strata weighted by their size
    PPI_INSAMPLE = "ppi_insample"  # PPI with a model fit on every label (the paper's way): never valid


NO_METHOD: Final = "none"
"""The ``method`` of a row that holds no estimate (a single-arm experiment, a segment with too few ratings): not a
method, so not a member of ``Method``."""

NAIVE: Final = (Method.NAIVE_WELCH, Method.NAIVE_BOOTSTRAP)
"""The methods that use the rated sessions alone (their p-value is the permutation test's)."""

PPI_METHODS: Final = (Method.PPI, Method.CROSSPPI, Method.PPI_INSAMPLE, Method.PPI_STRATIFIED)
"""The prediction-powered methods: the ones the honesty flags (labels seen, rated sessions unrepresentative) apply
to."""

REPORT_ORDER: Final = tuple(Method)
"""The order methods are listed in, in the report and the tables it shows: naive first, the paper's way last."""

LABELS: Final = {
    Method.NAIVE_WELCH: "naive (Welch)",
    Method.NAIVE_BOOTSTRAP: "naive (bootstrap)",
    Method.PPI: "PPI++",
    Method.CROSSPPI: "cross-PPI",
    Method.AIPW: "AIPW",
    Method.PPI_STRATIFIED: "stratified PPI++",
    Method.PPI_INSAMPLE: "PPI in-sample (paper)",
}
"""Each method's name for people: the report's legends and tables, and the conclusions' sentences."""


def stored(methods: tuple[Method, ...] | list[Method]) -> list[str]:
    """The plain stored strings of ``methods``, for polars (see the module's docstring)."""
    return [m.value for m in methods]


def method_label(method: str) -> str:
    """The name people read for ``method`` (a ``Method`` or its stored string); an unknown one as it is."""
    return LABELS.get(method, method)
