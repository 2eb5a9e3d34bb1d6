"""The ``allocation_neyman`` validation scenario (studies/allocation.py): its generator's rectifier spreads worked
out by hand, a smoke run of a few replications, and its targets on made-up summaries."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pulse_pipeline.stats.allocation import ratings_saved, rectifier_sd
from pulse_pipeline.studies.allocation import METHODS, SCENARIO, SHARES, _arm, check_allocation
from pulse_pipeline.studies.coverage import COLUMNS, check_targets, validate


def test_the_generators_rectifier_spreads_by_hand():
    """f = y + u, Var(y) = 0.25^2 within a stratum, Var(u) = tau_h^2: lam_h = Var(y) / (Var(y) + tau_h^2) and
    Var(Y - lam f) = (1 - lam)^2 Var(y) + lam^2 tau^2, so sigma = (0.0490, 0.1768, 0.2425) for tau = (0.05, 0.25,
    1); Neyman then saves 1 - (sum W sigma)^2 / sum W sigma^2 = 28.9 % of the ratings."""
    h, y, f = _arm(np.random.default_rng(0), 400_000, effect=False)
    by_hand = []
    for k, tau in enumerate((0.05, 0.25, 1.0)):
        lam = 0.0625 / (0.0625 + tau**2)
        by_hand.append(np.sqrt((1 - lam) ** 2 * 0.0625 + lam**2 * tau**2))
        assert rectifier_sd(y[h == k], f[h == k], lam) == pytest.approx(by_hand[-1], rel=0.01)
    assert by_hand == pytest.approx([0.0490, 0.1768, 0.2425], abs=1e-4)
    assert ratings_saved(SHARES, by_hand) == pytest.approx(0.289, abs=0.001)


def test_smoke_run_and_targets():
    frame = validate(6, (SCENARIO,), seed=3, workers=1)
    assert frame.columns == list(COLUMNS) and frame["method"].to_list() == list(METHODS)
    assert frame["replications"].to_list() == [6, 6, 6] and (frame["mean_width"] > 0).all()

    def summary(widths, coverage=0.95):
        return pl.DataFrame(
            {
                "scenario": [SCENARIO] * 3,
                "method": list(METHODS),
                "coverage": [coverage] * 3,
                "mean_width": widths,
                "bias": [0.0] * 3,
                "replications": [500] * 3,
                "share_flagged": [0.0] * 3,
            }
        )

    assert check_allocation(summary([0.063, 0.045, 0.044])) == []
    assert check_targets(summary([0.063, 0.045, 0.044]), [SCENARIO]) == []
    unmet = check_allocation(summary([0.063, 0.045, 0.046], coverage=0.92))
    assert len(unmet) == 4 and unmet[-1].endswith("as narrow as ppi_stratified: got 1.022 x its width")
    assert unmet[0] == f"{SCENARIO} ppi coverage within 93%-97%: got 92.0%"
