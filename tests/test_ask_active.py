"""The ``active`` validation scenarios: a replication's shape and ratings budget, and the summary and targets on
rows worked out by hand (the full run is a command: ``pulse validate --scenarios active,active_varying``)."""

from __future__ import annotations

import math

import polars as pl
import pytest

from pulse_pipeline.estimates.active import METHODS, check_active, replicate_active, width_ratios
from pulse_pipeline.estimates.validation import summarize, truth


@pytest.mark.parametrize("scenario", ["active", "active_varying"])
def test_one_small_replication(scenario):
    rows = replicate_active(3, scenario, n_per_arm=600, ratings_per_arm=60.0, history_ratings=300)
    assert [r["method"] for r in rows] == list(METHODS)
    for r in rows:
        assert r["scenario"] == scenario and r["flagged"] is False
        # same expected ratings, 120, for both designs: a sum of independent Bernoullis, sd < sqrt(120) ~ 11
        assert abs(r["n_rated"] - 120) < 5 * math.sqrt(120)
        assert 0 < r["width"] < 1
        # the interval is effect -/+ 1.96 se and covered means |effect - truth| <= half its width
        assert r["covered"] == (abs(r["error"]) <= r["width"] / 2)
    assert math.isfinite(truth())


def _rows(scenario, method, covered, width):
    return [
        {"scenario": scenario, "method": method, "covered": c, "width": width, "error": 0.01, "flagged": False}
        for c in covered
    ]


def test_summary_and_targets_by_hand():
    rows = (
        _rows("active", "uniform", [True] * 19 + [False], 0.10)  # 95 %
        + _rows("active", "active", [True] * 18 + [False] * 2, 0.09)  # 90 %: unmet
        + _rows("active_varying", "uniform", [True] * 19 + [False], 0.30)
        + _rows("active_varying", "active", [True] * 19 + [False], 0.33)  # wider: unmet
    )
    frame = summarize(rows)
    assert frame.columns == ["scenario", "method", "coverage", "mean_width", "bias", "replications", "share_flagged"]
    assert frame.filter(pl.col("method") == "active")["coverage"].to_list() == [0.90, 0.95]
    assert width_ratios(frame) == pytest.approx({"active": 0.9, "active_varying": 1.1})
    unmet = check_active(frame)
    assert len(unmet) == 2
    assert unmet[0].startswith("active active: coverage 90.0%")
    assert unmet[1].startswith("active_varying: active/uniform width ratio 1.1")
