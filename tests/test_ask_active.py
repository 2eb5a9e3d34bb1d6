"""The ``active`` validation scenarios: a replication's shape and ratings budget, and the summary and targets on
rows worked out by hand (the full run is a command: ``pulse validate --scenarios
active,active_varying,active_answer``)."""

from __future__ import annotations

import math

import polars as pl
import pytest

from pulse_pipeline.studies.active import METHODS, check_active, replicate_active, width_ratios
from pulse_pipeline.studies.coverage import summarize, truth


@pytest.mark.parametrize("scenario", ["active", "active_varying", "active_answer"])
def test_one_small_replication(scenario):
    rows = replicate_active(3, scenario, n_per_arm=600, asks_per_arm=120.0, history_asks=600)
    assert [r["method"] for r in rows] == list(METHODS)
    for r in rows:
        assert r["scenario"] == scenario and r["flagged"] is False
        # same expected asks, 240, for every design: a sum of independent Bernoullis, sd < sqrt(240) ~ 15.5
        assert abs(r["n_asked"] - 240) < 5 * math.sqrt(240)
        assert 0 < r["n_rated"] <= r["n_asked"]
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
    ok = [True] * 19 + [False]  # 95 %
    rows = (
        _rows("active", "uniform", ok, 0.10)
        + _rows("active", "error_only", ok, 0.10)
        + _rows("active", "active", [True] * 18 + [False] * 2, 0.09)  # 90 %: unmet
        + _rows("active_varying", "uniform", ok, 0.30)
        + _rows("active_varying", "error_only", ok, 0.32)
        + _rows("active_varying", "active", ok, 0.33)  # wider than uniform: unmet
        + _rows("active_answer", "uniform", ok, 0.20)
        + _rows("active_answer", "error_only", ok, 0.19)
        + _rows("active_answer", "active", ok, 0.19)  # not narrower than error_only: unmet
    )
    frame = summarize(rows)
    assert frame.columns == ["scenario", "method", "coverage", "mean_width", "bias", "replications", "share_flagged"]
    assert frame.filter(pl.col("method") == "active")["coverage"].to_list() == [0.90, 0.95, 0.95]
    assert width_ratios(frame) == pytest.approx({"active": 0.9, "active_varying": 1.1, "active_answer": 0.95})
    assert width_ratios(frame, "error_only")["active_answer"] == pytest.approx(1.0)
    unmet = check_active(frame)
    assert len(unmet) == 3
    assert unmet[0].startswith("active active: coverage 90.0%")
    assert unmet[1].startswith("active_varying: active/uniform width ratio 1.1")
    assert unmet[2].startswith("active_answer: active/error_only width ratio 1.0")
    # the same rows with active narrower than error_only in active_answer: that target is met
    rows = [r | {"width": 0.18} if (r["scenario"], r["method"]) == ("active_answer", "active") else r for r in rows]
    assert len(check_active(summarize(rows))) == 2
