"""The decision of ``estimates.conclusions`` (docs/decisions.md): ship, hold, keep collecting or no decision, read
from the primary outcome and the comparison's rows of ``estimates.guardrails``.

Every row is made by hand here; the expected decisions and words are worked out from the rule as docs/decisions.md
states it (stars = 4 x the 0-1 difference, 2 decimals; a relative effect 0.4 is +40.0 %).
"""

from __future__ import annotations

from datetime import datetime

import dagster as dg
import polars as pl
import pytest

from pulse_pipeline import tables
from pulse_pipeline.connections import connect
from pulse_pipeline.defs.estimates.conclusions import conclusions as conclusions_asset
from pulse_pipeline.defs.resources import WarehouseResource
from pulse_pipeline.estimates.conclusions import conclusion_rows
from pulse_pipeline.estimates.decisions import HOLD, KEEP_COLLECTING, NO_DECISION, SHIP
from pulse_pipeline.warehouse import Warehouse


def _effect(experiment, treatment, effect, low, high, **more) -> dict:
    """A valid, unflagged PPI++ row (the one a comparison is read by) with Holm's p 0.01 (the correction keeps
    it), and the naive row beside it."""
    base = {"experiment": experiment, "treatment": treatment, "control": "ctrl", "p_holm": 0.01, "valid": True,
            "flags": None, "note": None, "width_vs_naive": 0.8, **more}  # fmt: skip
    return [
        {**base, "method": "ppi", "effect": effect, "ci_low": low, "ci_high": high},
        {**base, "method": "naive_welch", "effect": effect, "ci_low": low - 0.01, "ci_high": high + 0.01},
    ]


def _guardrail(experiment, treatment, name, verdict, relative, low, high, **more) -> dict:
    """A row of estimates.guardrails with the contract's columns: lower is better, a relative margin of 10 %."""
    return {
        "experiment": experiment, "treatment": treatment, "control": "ctrl", "guardrail": name,
        "metric": more.pop("metric", "llm_cost_usd"), "direction": more.pop("direction", "lower"), "unit": "session",
        "method": "plain", "n_treatment": 500, "n_control": 500, "treatment_mean": 1.0 + relative,
        "control_mean": 1.0, "effect": relative, "ci_low": low, "ci_high": high, "relative_effect": relative,
        "relative_ci_low": low, "relative_ci_high": high, "cs_low": low - 0.05, "cs_high": high + 0.05,
        "margin": more.pop("margin", 0.10), "margin_type": more.pop("margin_type", "relative"), "alpha": 0.05,
        "p_noninferiority": 0.5, "verdict": verdict, "variance_reduction": None,
        "design": more.pop("design", "randomized"), "note": more.pop("note", None), **more,
    }  # fmt: skip


POSITIVE = (0.04, 0.015, 0.065)  # PPI++ above zero: +0.16 stars, 95 % interval +0.06 to +0.26
NEGATIVE = (-0.04, -0.065, -0.015)  # below zero: -0.16 stars, -0.26 to -0.06
UNSETTLED = (0.01, -0.02, 0.04)  # holds zero: +0.04 stars, -0.08 to +0.16

COST_FAILS = ("cost", "fail", 0.40, 0.35, 0.45)  # +40 % cost, its interval wholly beyond the tolerated +10 %
DURATION_PASSES = ("duration", "pass", -0.02, -0.06, 0.02)


def _decide(effects, guardrails=(), history=()):
    return {(r.experiment, r.treatment): r for r in conclusion_rows(effects, (), guardrails, history)}


def test_a_failing_guardrail_holds_a_change_users_rate_higher_and_names_it():
    rows = _decide(
        _effect("e", "t", *POSITIVE),
        [_guardrail("e", "t", *COST_FAILS), _guardrail("e", "t", *DURATION_PASSES, metric="duration_seconds")],
    )
    row = rows[("e", "t")]
    assert row.decision == HOLD
    assert (row.guardrails_passed, row.guardrails_failed, row.guardrails_inconclusive) == (1, 1, 0)
    assert row.decision_why == (
        "Guardrail cost (llm_cost_usd) fails: +40.0 % (95 % interval +35.0 % to +45.0 %) against a tolerated"
        " +10.0 %, so the change is held whatever the ratings say (t is rated higher than ctrl (+0.16 stars, 95 %"
        " interval +0.06 to +0.26))."
    )
    # the sentence stays one sentence and gains the guardrails' verdicts before the reason in parentheses
    assert row.sentence.endswith("; its guardrails: cost fails, duration passes. (PPI++ is valid and not flagged.)")
    assert row.sentence.count(". ") == 1


def test_every_guardrail_passing_and_a_positive_primary_ship():
    history = [
        {"experiment": "e", "treatment": "t", "method": "ppi", "day": datetime(2025, 6, d), "cs_low": low,
         "cs_high": high}
        for d, low, high in ((1, -0.2, 0.3), (3, 0.005, 0.08), (2, -0.05, 0.1))
    ]  # fmt: skip
    rows = _decide(_effect("e", "t", *POSITIVE), [_guardrail("e", "t", *DURATION_PASSES)], history)
    row = rows[("e", "t")]
    assert (row.decision, row.guardrails_passed, row.guardrails_failed, row.guardrails_inconclusive) == (SHIP, 1, 0, 0)
    # the last look is 3 June (not the last row): 4 x 0.005 = +0.02, 4 x 0.08 = +0.32
    assert row.decision_why == (
        "t is rated higher than ctrl (+0.16 stars, 95 % interval +0.06 to +0.26) and 1 guardrail passes"
        " (duration); the always-valid confidence sequence at the last look (2025-06-03) excludes zero too"
        " (+0.02 to +0.32 stars)."
    )


def test_a_ship_whose_confidence_sequence_still_holds_zero_says_to_wait_after_earlier_looks():
    history = [{"experiment": "e", "treatment": "t", "method": "ppi", "day": datetime(2025, 6, 3), "cs_low": -0.01,
                "cs_high": 0.09}]  # fmt: skip
    row = _decide(_effect("e", "t", *POSITIVE), [], history)[("e", "t")]
    assert row.decision == SHIP
    assert "no guardrail is declared, so the ratings alone decided" in row.decision_why
    assert "still holds zero (-0.04 to +0.36 stars)" in row.decision_why
    assert "wait until the sequence excludes zero" in row.decision_why


def test_an_observational_comparison_never_ships():
    effects = [{**r, "design": "observational"} for r in _effect("model", "gpt-5", *POSITIVE)]
    passing = [_guardrail("model", "gpt-5", *DURATION_PASSES, design="observational")]
    failing = [_guardrail("model", "gpt-5", *COST_FAILS, design="observational")]
    for guardrails in (passing, failing, []):
        row = _decide(effects, guardrails)[("model", "gpt-5")]
        assert row.decision == NO_DECISION, guardrails
        assert row.decision_why.startswith("An association, not an effect: the arms of model come from a session")
        assert "assign users (or sessions) to gpt-5 and ctrl at random" in row.decision_why
    assert (row.guardrails_passed, row.guardrails_failed) == (0, 0)
    assert _decide(effects, failing)[("model", "gpt-5")].guardrails_failed == 1


def test_a_clearly_negative_primary_holds_and_one_holm_does_not_keep_keeps_collecting():
    row = _decide(_effect("e", "t", *NEGATIVE))[("e", "t")]
    assert row.decision == HOLD
    assert row.decision_why.startswith(
        "t is rated lower than ctrl (-0.16 stars, 95 % interval -0.26 to -0.06), kept by Holm's correction"
    )
    # two comparisons, Holm's p 0.2 for the negative one: the correction does not keep it
    effects = _effect("e", "t", *NEGATIVE, p_holm=0.2) + _effect("e", "u", *UNSETTLED)
    rows = _decide(effects)
    assert rows[("e", "t")].decision == KEEP_COLLECTING
    assert "but not after Holm's correction (adjusted p = 0.200)" in rows[("e", "t")].decision_why
    assert rows[("e", "u")].decision == KEEP_COLLECTING
    assert rows[("e", "u")].decision_why == (
        "No difference between u and ctrl is detected yet (+0.04 stars, 95 % interval -0.08 to +0.16);"
        " no guardrail is declared."
    )


def test_a_positive_primary_ships_with_an_open_guardrail_named_as_a_caveat():
    """Only evidence of harm blocks a ship: an inconclusive guardrail, or one not estimable, is named in the why
    (its effect and interval against the tolerated +10 %), not a reason to wait."""
    guardrails = [
        _guardrail("e", "t", *DURATION_PASSES),
        _guardrail("e", "t", "cost", "inconclusive", 0.06, 0.01, 0.11),
        _guardrail("e", "t", "stops", None, float("nan"), float("nan"), float("nan"), metric="user_stops",
                   note="no session carries user_stops"),
    ]  # fmt: skip
    row = _decide(_effect("e", "t", *POSITIVE), guardrails)[("e", "t")]
    assert (row.decision, row.guardrails_passed, row.guardrails_failed, row.guardrails_inconclusive) == (
        SHIP, 1, 0, 2
    )  # fmt: skip
    assert row.decision_why.startswith(
        "t is rated higher than ctrl (+0.16 stars, 95 % interval +0.06 to +0.26) and no guardrail fails, but cost"
        " (llm_cost_usd) is not yet shown within its tolerated +10.0 % (+6.0 %, 95 % interval +1.0 % to +11.0 %);"
        " stops (user_stops) could not be estimated (no session carries user_stops); no confidence sequence"
    )
    # the same guardrails beside an unsettled primary: keep collecting, no guardrail failing
    row = _decide(_effect("e", "t", *UNSETTLED), guardrails)[("e", "t")]
    assert row.decision == KEEP_COLLECTING and row.decision_why.endswith("; no guardrail fails (1 of 3 pass).")


def test_an_absolute_margin_on_a_higher_is_better_metric_is_written_in_its_units():
    """A metric where higher is better tolerates a fall: the bound is -margin, in the metric's units."""
    guardrail = _guardrail("e", "t", "turns", "fail", -0.3, -0.5, -0.1, metric="turns", direction="higher",
                           margin=0.25, margin_type="absolute")  # fmt: skip
    guardrail |= {"effect": -3.0, "ci_low": -4.5, "ci_high": -1.5}
    row = _decide(_effect("e", "t", *UNSETTLED), [guardrail])[("e", "t")]
    assert row.decision == HOLD
    assert "turns (turns) fails: -3.000 (95 % interval -4.500 to -1.500) against a tolerated -0.250" in row.decision_why


@pytest.mark.parametrize(
    ("effects", "why"),
    [
        ([{"experiment": "solo", "treatment": None, "control": "ctrl", "method": "none", "valid": False,
           "note": "single-arm experiment: every session is in ctrl"}], "Single-arm experiment: nothing to compare."),
        ([{"experiment": "solo", "treatment": "t", "control": "ctrl", "method": m, "valid": False,
           "note": "arm t has fewer than 2 ratings"} for m in ("ppi", "naive_welch")],
         "No valid estimate of the rating difference: no method has a valid estimate (arm t has fewer than 2"
         " ratings)."),
    ],
)  # fmt: skip
def test_nothing_to_compare_or_no_valid_estimate_is_no_decision(effects, why):
    (row,) = conclusion_rows(effects, (), [_guardrail("solo", "t", *DURATION_PASSES)])
    assert (row.decision, row.decision_why) == (NO_DECISION, why)


def test_the_asset_reads_the_guardrails_and_the_history_and_shows_the_decision_in_the_ui(tmp_path):
    """The conclusions asset over a warehouse holding the rows above: the stored decisions are the ones worked out
    by hand (t held by its cost guardrail, u keeps collecting), and the UI's metadata shows each."""
    database = tmp_path / "work.duckdb"
    con = connect(database)
    Warehouse(con)
    effects = _effect("e", "t", *POSITIVE) + _effect("e", "u", *UNSETTLED)
    for table, rows in (
        (tables.EXPERIMENT_EFFECTS, effects),
        (tables.GUARDRAILS, [_guardrail("e", "t", *COST_FAILS), _guardrail("e", "u", *DURATION_PASSES)]),
        (tables.EFFECT_HISTORY, [{"experiment": "e", "treatment": "t", "control": "ctrl", "method": "ppi",
                                  "day": datetime(2025, 6, 3), "cs_low": 0.01, "cs_high": 0.07}]),
    ):  # fmt: skip
        frame = pl.DataFrame(rows, infer_schema_length=None)  # noqa: F841 (read by DuckDB by name)
        con.execute(f"INSERT INTO {table.qualified} BY NAME SELECT * FROM frame")
    con.close()
    resource = WarehouseResource(database=str(database), publish_to=str(tmp_path / "pulse.duckdb"), drops_dir="")
    result = dg.materialize([conclusions_asset], resources={"warehouse": resource})
    assert result.success
    con = connect(database)
    try:
        stored = con.execute(
            f"""SELECT treatment, decision, guardrails_passed, guardrails_failed, guardrails_inconclusive
                FROM {tables.CONCLUSIONS.qualified} ORDER BY treatment"""
        ).fetchall()
    finally:
        con.close()
    assert stored == [("t", HOLD, 0, 1, 0), ("u", KEEP_COLLECTING, 1, 0, 0)]
    metadata = result.asset_materializations_for_node("estimates__conclusions")[0].metadata
    assert metadata["e: t vs ctrl"].value.startswith("**hold**: Guardrail cost (llm_cost_usd) fails: +40.0 %")
    assert (metadata["decided hold"].value, metadata["decided keep collecting"].value) == (1, 1)
    assert metadata["decided ship"].value == 0 and metadata["guardrails_failed"].value == 1
