"""Headline figures as numeric asset metadata, which the Dagster UI plots over materializations: each equals the
warehouse row it comes from. ``assert_headline_metadata`` runs on a materialized PULSE_HOME; the pipeline test of
``test_estimates.py`` calls it, so no extra materialization is needed."""

from __future__ import annotations

import math
from dataclasses import replace

import dagster as dg
import duckdb
import numpy as np
import pytest

from pulse_pipeline.defs.estimates.assets import MAX_HEADLINE_COMPARISONS, headline_metadata
from pulse_pipeline.defs.metadata import rounded, significant
from pulse_pipeline.estimates.experiment_effects import EffectRow
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.runs import instance_for

PLOTTED_METHODS = ("naive_welch", "ppi", "crossppi", "aipw")


def _metadata(instance: dg.DagsterInstance, *path: str) -> dict:
    event = instance.get_latest_materialization_event(dg.AssetKey(list(path)))
    assert event is not None and event.asset_materialization is not None, path
    return event.asset_materialization.metadata


def assert_headline_metadata(home: PulseHome) -> None:
    """The latest materializations' numeric metadata equal the rows of the tables they describe."""
    instance = instance_for(home)
    effects = _metadata(instance, "estimates", "experiment_effects")
    cv = _metadata(instance, "modeling", "cv_metrics")
    predictions = _metadata(instance, "modeling", "predictions")
    with duckdb.connect(str(home.warehouse), read_only=True) as con:
        rows = con.execute("""
            SELECT experiment, treatment, control, method, effect, ci_low, ci_high, width_vs_naive
            FROM estimates.experiment_effects WHERE treatment IS NOT NULL""").fetchall()
        chosen, pearson, n_labeled = con.execute("""
            SELECT model, mean, n_labeled FROM modeling.cv_metrics WHERE chosen AND metric = 'pearson'""").fetchone()
        labels, predicted = np.array(
            con.execute("SELECT label, prediction FROM modeling.predictions WHERE labeled").fetchall()
        ).T

    expected = {}
    for experiment, treatment, control, method, *values in rows:
        if method not in PLOTTED_METHODS:
            continue
        names = ("effect", "ci_low", "ci_high") + (() if method == "naive_welch" else ("width_vs_naive",))
        for name, value in zip(names, values, strict=False):
            if value is not None and math.isfinite(value):
                expected[f"{experiment}: {treatment} vs {control} / {method} {name}"] = significant(value)
    assert 0 < len(expected) <= 15 * MAX_HEADLINE_COMPARISONS
    plotted = {k: v.value for k, v in effects.items() if isinstance(v, dg.FloatMetadataValue)}
    assert plotted == expected
    # e.g. the width of PPI relative to naive, the figure that says how much the unrated sessions helped
    assert any(k.endswith("/ ppi width_vs_naive") for k in plotted)

    assert cv["chosen_model"].value == chosen
    assert cv["chosen_pearson"].value == significant(pearson)
    assert cv["rated_sessions"].value == n_labeled == len(labels)
    assert predictions["model"].value == chosen
    assert predictions["rated_sessions"].value == len(labels)
    assert predictions["oof_pearson"].value == pytest.approx(np.corrcoef(labels, predicted)[0, 1], rel=5e-4)
    # every float of every asset's latest metadata is shown to four significant digits (issue 33, item 9)
    for key in instance.get_asset_keys():
        event = instance.get_latest_materialization_event(key)
        metadata = event.asset_materialization.metadata if event and event.asset_materialization else {}
        for name, value in metadata.items():
            if isinstance(value, dg.FloatMetadataValue) and value.value is not None and math.isfinite(value.value):
                assert significant(value.value) == value.value, (key, name, value.value)


def _row(experiment: str, treatment: str, method: str, effect: float) -> EffectRow:
    return EffectRow(
        experiment=experiment,
        treatment=treatment,
        control="base",
        method=method,
        effect=effect,
        ci_low=effect - 0.1,
        ci_high=effect + 0.1,
        width_vs_naive=1.0 if method == "naive_welch" else 0.8,
        valid=True,
    )


def test_headline_metadata_keeps_to_the_first_comparisons_and_skips_undefined_figures():
    treatments = [f"arm-{i}" for i in range(MAX_HEADLINE_COMPARISONS + 2)]
    rows = [_row("exp", t, m, 0.01 * i) for i, t in enumerate(treatments) for m in (*PLOTTED_METHODS, "ppi_insample")]
    rows.append(EffectRow(experiment="solo", treatment=None, control="only", method="none", valid=False))
    rows[1] = replace(rows[1], effect=float("nan"))  # arm-0's ppi effect, undefined
    metadata = headline_metadata(rows)

    shown = {key.split(" vs ")[0] for key in metadata if " vs " in key}
    assert shown == {f"exp: {t}" for t in treatments[:MAX_HEADLINE_COMPARISONS]}
    # naive: effect and interval; three prediction-powered methods: those and the width; less the undefined effect,
    # plus the entry saying comparisons were left out
    assert len(metadata) == MAX_HEADLINE_COMPARISONS * (3 + 3 * 4) - 1 + 1
    assert "exp: arm-0 vs base / ppi effect" not in metadata and "exp: arm-0 vs base / ppi ci_low" in metadata
    assert metadata["exp: arm-1 vs base / ppi ci_high"].value == pytest.approx(0.11)
    assert "exp: arm-1 vs base / naive_welch width_vs_naive" not in metadata
    assert metadata["headline comparisons"].value == (
        f"figures of the first {MAX_HEADLINE_COMPARISONS} of {len(treatments)} comparisons; every one is in the table"
    )


def test_metadata_floats_are_rounded_to_four_significant_digits():
    """Issue 33, item 9: the UI showed 19 digits (0.31234567890123456). Floats are now rounded to four significant
    digits, by hand: 0.123456789 -> 0.1235, -0.0234567 -> -0.02346, 1.0 -> 1.0, 1234.5678 -> 1235.0."""
    row = replace(_row("exp", "t", "ppi", 0.123456789), ci_low=-0.0234567, ci_high=1234.5678, width_vs_naive=1.0)
    metadata = headline_metadata([row])
    assert {k.split(" / ")[1]: v.value for k, v in metadata.items()} == {
        "ppi effect": 0.1235,
        "ppi ci_low": -0.02346,
        "ppi ci_high": 1235.0,
        "ppi width_vs_naive": 1.0,
    }
    assert rounded({"pearson": 0.31234567890123456, "n": 601, "p": np.float64(2 / 3), "model": "stack"}) == {
        "pearson": 0.3123,
        "n": 601,
        "p": 0.6667,
        "model": "stack",
    }
    assert math.isnan(significant(float("nan"))) and significant(0.0) == 0.0
