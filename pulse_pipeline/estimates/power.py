"""Could this experiment have detected the effect at all, and how many ratings would it take?

Per comparison, from the labels and predictions it has now: the minimum detectable effect (MDE) at 80 % power
and 5 % two-sided error, for the naive difference and for PPI with the out-of-fold correlation ρ; and the ratings
per arm a target effect needs. A non-significant result with an MDE larger than any effect you care about says
"not enough ratings", not "no effect". Labels needed assume traffic keeps its current share of rated sessions r,
so N grows with n and PPI's variance factor is 1 − ρ²·(1 − r) whatever n.
"""

from __future__ import annotations

import math

import numpy as np

from ..stats import power as pw

DEFAULT_TARGET = 0.05  # on the normalized 0-1 label: 0.2 stars


def power_row(
    head: tuple[str, str, str],
    y_t: np.ndarray,
    y_c: np.ndarray,
    N_t: int,
    N_c: int,
    rho: float,
    target: float = DEFAULT_TARGET,
) -> tuple:
    """One row of ``estimates.power`` (column order of ``tables.POWER``); ``head`` = (experiment, treatment, control).

    ``y_t``, ``y_c``: the arms' normalized labels; ``rho``: out-of-fold correlation of predictions and labels.
    """
    n_t, n_c = y_t.size, y_c.size
    nan = float("nan")
    counts = (n_t, n_c, N_t, N_c)
    if min(n_t, n_c) < 2:
        return (*head, *counts, nan, rho, nan, nan, target, None, None, "fewer than 2 ratings in an arm")
    y = np.r_[y_t, y_c]
    sd = float(y.std(ddof=1))
    if not sd > 0:
        return (*head, *counts, sd, rho, nan, nan, target, None, None, "all ratings equal: no spread to power on")
    notes = []
    if math.isnan(rho):
        rho_used = 0.0
        notes.append("no out-of-fold correlation: PPI figures use rho = 0")
    else:
        rho_used = rho
    mde_naive = pw.minimum_detectable_effect(n_t, n_c, sd)
    mde_ppi = pw.minimum_detectable_effect(n_t, n_c, sd, N_treatment=N_t, N_control=N_c, rho=rho_used)
    share = (n_t + n_c) / (n_t + n_c + N_t + N_c)
    need_naive = pw.labels_per_arm_needed(target, sd)
    need_ppi = pw.labels_per_arm_at_rated_share(target, sd, share, rho=rho_used)
    note = "; ".join(notes) or None
    return (*head, *counts, sd, rho, mde_naive, mde_ppi, target, need_naive, need_ppi, note)
