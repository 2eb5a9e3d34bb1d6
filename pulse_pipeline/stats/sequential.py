"""Always-valid intervals: the asymptotic confidence sequence of Waudby-Smith et al., as GrowthBook uses it.

A 95 % interval promises coverage at ONE pre-planned look. A team that looks every day and stops at the first
interval that excludes zero makes many looks, and its false-positive rate is far above 5 %. A confidence sequence
(CS) is a sequence of intervals C_1, C_2, ... with P(theta in C_t for EVERY t) >= 1 - alpha, so one may look
after each new unit and stop whenever one likes.

The asymptotic CS (Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas, "Time-uniform central limit theory and
asymptotic confidence sequences", arXiv 2103.06476, eq. 9; GrowthBook's ``SequentialTwoSidedTTest``) replaces
the normal quantile of a Wald interval: an estimate that is asymptotically the mean of t i.i.d. units with
standard error se (so the per-unit variance is sigma^2 = t * se^2) gets::

    radius_t = sigma * sqrt( 2 (t rho^2 + 1) / (t^2 rho^2) * ln( sqrt(t rho^2 + 1) / alpha ) )
             = se * sqrt( (t rho^2 + 1) / (t rho^2) * ln( (t rho^2 + 1) / alpha^2 ) )

against the fixed-horizon se * z_{1 - alpha/2}. It grows like se * sqrt(ln t), i.e. shrinks like
sqrt(ln t / t) rather than sqrt(1 / t): the price of looking as often as one likes.

Tuning. rho > 0 is any constant fixed before the data; it sets WHERE the sequence is tightest. Eq. 161 of the
paper (GrowthBook's ``sequential_rho``) picks the rho that minimizes the radius at a planned number of units
``planned_n`` (GrowthBook's ``sequential_tuning_parameter``, default 5 000)::

    rho^2 = ( -2 ln alpha + ln(1 - 2 ln alpha) ) / planned_n

The radius depends on t only through t * rho^2 = 7.94 * t / planned_n (alpha = 0.05), and only weakly: at
t = planned_n it is 3.03 se (fixed horizon: 1.96 se), at a tenth of it 3.86 se, at ten times 3.24 se. A planned
n far off costs some width, never validity. ``DEFAULT_PLANNED_N`` keeps GrowthBook's 5 000.

What t counts is the caller's choice and must match ``planned_n``: the units the estimate averages over as they
arrive (``estimates.history`` uses sessions of both arms).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

DEFAULT_PLANNED_N = 5000
"""The number of units where the sequence is tightest (GrowthBook's default ``sequential_tuning_parameter``)."""


def tuning_rho(planned_n: float = DEFAULT_PLANNED_N, alpha: float = 0.05) -> float:
    """rho = sqrt((-2 ln alpha + ln(1 - 2 ln alpha)) / planned_n): the CS is tightest at ``planned_n`` units."""
    if not planned_n > 0:
        raise ValueError(f"planned_n must be > 0; got {planned_n}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1); got {alpha}")
    log_alpha = math.log(alpha)
    return math.sqrt((-2.0 * log_alpha + math.log(1.0 - 2.0 * log_alpha)) / planned_n)


def cs_radius(se, n, planned_n: float = DEFAULT_PLANNED_N, alpha: float = 0.05):
    """The confidence sequence's half-width for an estimate with standard error ``se`` from ``n`` units.

    radius = se * sqrt((n rho^2 + 1) / (n rho^2) * ln((n rho^2 + 1) / alpha^2)), rho from :func:`tuning_rho`.
    Scalars or arrays (broadcast). NaN where se is NaN or n < 1 (no units: no sequence); infinite where se is.
    """
    rho2 = tuning_rho(planned_n, alpha) ** 2
    se_arr = np.asarray(se, dtype=np.float64)
    x = np.asarray(n, dtype=np.float64) * rho2
    with np.errstate(divide="ignore", invalid="ignore"):
        radius = se_arr * np.sqrt((x + 1.0) / x * np.log((x + 1.0) / alpha**2))
    radius = np.where(x > 0, radius, np.nan)
    return float(radius) if radius.ndim == 0 else radius


def fixed_radius(se, alpha: float = 0.05):
    """The fixed-horizon Wald half-width z_{1 - alpha/2} * se, for comparison with :func:`cs_radius`."""
    radius = norm.ppf(1.0 - alpha / 2.0) * np.asarray(se, dtype=np.float64)
    return float(radius) if radius.ndim == 0 else radius


def confidence_sequence(
    estimate: float, se: float, n: int, planned_n: float = DEFAULT_PLANNED_N, alpha: float = 0.05
) -> tuple[float, float]:
    """(low, high) = estimate -/+ :func:`cs_radius`; (NaN, NaN) when the estimate or the radius is undefined."""
    radius = cs_radius(se, n, planned_n, alpha)
    if math.isnan(estimate) or math.isnan(radius):
        return float("nan"), float("nan")
    return estimate - radius, estimate + radius
