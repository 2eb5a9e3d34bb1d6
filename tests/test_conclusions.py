"""estimates.conclusions: the method each comparison is read by, why, and the sentence, as a table.

The expected sentences are worked out by hand from the rows below (stars = 4 x the 0-1 difference, 2 decimals).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb
import polars as pl

from pulse_pipeline import tables
from pulse_pipeline.connections import connect
from pulse_pipeline.defs.estimates.conclusions import conclusions as conclusions_asset
from pulse_pipeline.defs.resources import WarehouseResource
from pulse_pipeline.estimates.conclusions import choose, conclusion_rows, lead
from pulse_pipeline.estimates.methods import Method
from pulse_pipeline.stats.aipw import PREDICTIONS_MISS, WEIGHTS_VARY
from pulse_pipeline.warehouse import Warehouse

SHIFT = "rated sessions are not representative (AUC 0.71)"


def _row(experiment, treatment, control, method, effect=None, low=None, high=None, **more) -> dict:
    return {
        "experiment": experiment,
        "treatment": treatment,
        "control": control,
        "method": method,
        "effect": effect,
        "ci_low": low,
        "ci_high": high,
        "p_holm": more.pop("p_holm", None),
        "width_vs_naive": more.pop("width_vs_naive", None),
        "valid": more.pop("valid", True),
        "flags": more.pop("flags", None),
        "note": more.pop("note", None),
        **more,
    }


EFFECTS = [
    # t1: PPI valid and unflagged, its interval clear of zero, but Holm's p 0.08 over the 3 comparisons
    _row("exp1", "t1", "c1", "naive_welch", 0.05, 0.01, 0.09, p_holm=0.02, width_vs_naive=1.0),
    _row("exp1", "t1", "c1", "ppi", 0.04, 0.015, 0.065, p_holm=0.08, width_vs_naive=0.625),
    # t2: PPI flagged, so AIPW, whose interval holds zero: the naive MDE (0.1) says what could have been seen
    _row("exp1", "t2", "c1", "naive_welch", 0.01, -0.05, 0.07, p_holm=0.9, width_vs_naive=1.0),
    _row("exp1", "t2", "c1", "ppi", 0.02, -0.02, 0.06, p_holm=0.9, width_vs_naive=0.67, flags=SHIFT),
    _row("exp1", "t2", "c1", "aipw", -0.0126, -0.07, 0.045, p_holm=0.9, width_vs_naive=0.96),
    # t3: no method has a number
    _row("exp2", "t3", "c3", "naive_welch", valid=False, note="arm t3 has fewer than 2 ratings"),
    _row("exp2", "t3", "c3", "ppi", valid=False, note="arm t3 has fewer than 2 ratings"),
    # a single-arm experiment
    _row("exp3", None, "only", "none", valid=False, note="single-arm experiment: every session is in only"),
]
POWER = [
    {"experiment": "exp1", "treatment": "t1", "control": "c1", "mde_naive": 0.12, "mde_ppi": 0.09},
    {"experiment": "exp1", "treatment": "t2", "control": "c1", "mde_naive": 0.1, "mde_ppi": 0.08},
]


def test_each_comparison_gets_the_method_why_and_sentence_worked_out_by_hand():
    rows = {(r.experiment, r.treatment): r for r in conclusion_rows(EFFECTS, POWER)}
    assert list(rows) == [("exp1", "t1"), ("exp1", "t2"), ("exp2", "t3"), ("exp3", None)]

    t1 = rows[("exp1", "t1")]
    assert (t1.method, t1.direction, t1.p_holm_caveat, t1.mde) == ("ppi", "higher", 0.08, None)
    assert (t1.effect, t1.ci_low, t1.ci_high, t1.width_vs_naive) == (0.04, 0.015, 0.065, 0.625)
    assert t1.verdict == "t1 rated higher (not after Holm's correction)"
    # 4 x 0.04 = +0.16, 4 x 0.015 = +0.06, 4 x 0.065 = +0.26; its width 0.625 of naive's, to 2 decimals 0.62
    assert t1.sentence == (
        "t1 is rated higher than c1: +0.16 stars (95 % interval +0.06 to +0.26; +0.040 on the 0–1 scale), by PPI++,"
        " its interval 0.62× as wide as the naive one; after Holm's correction for the 3 comparisons of this report"
        " it is not significant (adjusted p = 0.080)."
        " (PPI++ is valid and not flagged.)"
    )

    t2 = rows[("exp1", "t2")]
    assert (t2.method, t2.direction, t2.p_holm_caveat, t2.mde) == ("aipw", None, None, 0.1)
    assert t2.why == f"PPI++ is flagged: {SHIFT}; AIPW corrects for who rates"
    assert t2.verdict == "no detectable difference"
    # 4 x -0.0126 = -0.05, 4 x -0.07 = -0.28, 4 x 0.045 = +0.18; the naive MDE 0.1 = 0.40 stars
    assert t2.sentence == (
        "No detectable difference between t2 and c1: -0.05 stars (95 % interval -0.28 to +0.18; -0.013 on the 0–1"
        " scale) by AIPW, its interval 0.96× as wide as the naive one; the test could have detected 0.40 stars or"
        " more (0.100 on the 0–1 scale, 80 % power)."
        f" (PPI++ is flagged: {SHIFT}; AIPW corrects for who rates.)"
    )

    t3 = rows[("exp2", "t3")]
    assert (t3.method, t3.effect, t3.verdict) == (None, None, "no conclusion")
    assert t3.sentence == "No conclusion: no method has a valid estimate (arm t3 has fewer than 2 ratings)."

    solo = rows[("exp3", None)]
    assert (solo.method, solo.verdict, solo.sentence) == (
        None,
        "not compared",
        "single-arm experiment: every session is in only.",
    )


def test_a_chosen_interval_wider_than_naive_says_so_and_why():
    # PPI++ flagged, so AIPW is read (the rule is fixed before the data), and its interval came out 1.18x naive's:
    # the sentence says so, and why from AIPW's note (the weights vary, the predictions miss)
    note = f"treatment: {WEIGHTS_VARY}: 31 effective ratings of 48; {PREDICTIONS_MISS}"
    rows = [
        _row("e", "t", "c", "naive_welch", 0.02, -0.03, 0.07, p_holm=0.4, width_vs_naive=1.0),
        _row("e", "t", "c", "ppi", 0.02, -0.02, 0.06, p_holm=0.4, width_vs_naive=0.8, flags=SHIFT),
        _row("e", "t", "c", "aipw", 0.03, -0.029, 0.089, p_holm=0.4, width_vs_naive=1.18, note=note),
    ]
    (row,) = conclusion_rows(rows)
    assert row.method == "aipw" and row.width_vs_naive == 1.18
    # 4 x 0.03 = +0.12, 4 x -0.029 = -0.12, 4 x 0.089 = +0.36
    assert row.sentence == (
        "No detectable difference between t and c: +0.12 stars (95 % interval -0.12 to +0.36; +0.030 on the 0–1"
        " scale) by AIPW, its interval 1.18× as wide as the naive one: wider than naive because the propensity"
        " weights vary (fewer ratings count fully) and the model predicts the ratings worse than their mean does."
        f" (PPI++ is flagged: {SHIFT}; AIPW corrects for who rates.)"
    )
    # PPI++ read and wider than naive: how weakly the predictions track the ratings
    ppi = _row("e", "t", "c", "ppi", 0.02, -0.031, 0.071, p_holm=0.4, width_vs_naive=1.02, oof_rho=0.043)
    (row,) = conclusion_rows([rows[0], ppi])
    assert row.sentence.endswith(
        "by PPI++, its interval 1.02× as wide as the naive one: wider than naive because the predictions track the"
        " ratings weakly (out-of-fold r = 0.04) and lambda is estimated from few ratings. (PPI++ is valid and not"
        " flagged.)"
    )
    # naive read: no width phrase (it is the yardstick)
    (row,) = conclusion_rows([rows[0]])
    assert "as wide as the naive one" not in row.sentence


def test_the_choice_falls_back_to_aipw_then_naive():
    ppi_flagged = _row("e", "t", "c", "ppi", 0.1, 0.0, 0.2, flags=SHIFT)
    aipw_flagged = _row("e", "t", "c", "aipw", 0.1, 0.0, 0.2, flags=SHIFT)
    naive = _row("e", "t", "c", "naive_welch", 0.1, 0.0, 0.2)
    chosen, why = choose([ppi_flagged, aipw_flagged, naive])
    assert chosen is naive and why == "no model-assisted estimate is valid and unflagged"
    chosen, why = choose([naive, _row("e", "t", "c", "aipw", 0.1, 0.0, 0.2)])
    assert chosen["method"] == Method.AIPW and why == "PPI++ has no valid estimate; AIPW corrects for who rates"


def test_the_lead_is_the_opening_of_the_sentence():
    for row in conclusion_rows(EFFECTS, POWER):
        opening = lead(row)
        assert opening is None if row.method is None else row.sentence.startswith(opening), row


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict]) -> None:
    frame = pl.DataFrame(rows, infer_schema_length=None)  # noqa: F841 (read by DuckDB by name)
    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM frame")


def test_the_asset_writes_the_table_from_the_effects_and_power_tables(tmp_path: Path):
    database = tmp_path / "work.duckdb"
    con = connect(database)
    Warehouse(con)
    _insert(con, tables.EXPERIMENT_EFFECTS.qualified, EFFECTS)
    _insert(con, tables.POWER.qualified, POWER)
    con.close()
    resource = WarehouseResource(database=str(database), publish_to=str(tmp_path / "pulse.duckdb"), drops_dir="")
    result = dg.materialize([conclusions_asset], resources={"warehouse": resource})
    assert result.success
    con = connect(database)  # the working database (its lake beside it)
    try:
        stored = con.execute(
            f"SELECT experiment, treatment, method, verdict, sentence FROM {tables.CONCLUSIONS.qualified}"
            " ORDER BY experiment, treatment NULLS FIRST"
        ).fetchall()
    finally:
        con.close()
    expected = conclusion_rows(EFFECTS, POWER)
    assert stored == [(r.experiment, r.treatment, r.method, r.verdict, r.sentence) for r in expected]
    assert stored[0][2] == "ppi" and type(stored[0][2]) is str  # the stored value, not the enum's name
    metadata = result.asset_materializations_for_node("estimates__conclusions")[0].metadata
    # the decision, its why and the sentence, whole, in the UI
    assert (
        metadata["exp1: t2 vs c1"].value == f"**keep collecting**: {expected[1].decision_why}\n\n{expected[1].sentence}"
    )
    assert metadata["with_a_difference"].value == 1


def test_stratified_ppi_is_read_when_it_has_strata_and_nothing_is_flagged():
    ppi = _row("e", "t", "c", "ppi", 0.10, 0.02, 0.18, se=0.04)
    stratified = _row("e", "t", "c", "ppi_stratified", 0.11, 0.04, 0.18, se=0.035)
    naive = _row("e", "t", "c", "naive_welch", 0.1, -0.01, 0.21)
    chosen, why = choose([naive, ppi, stratified])
    assert chosen is stratified and why == "stratified PPI++ (a lambda per stratum) is valid and not flagged"
    # without strata its row is PPI++'s numbers: PPI++ is named
    same = _row("e", "t", "c", "ppi_stratified", 0.10, 0.02, 0.18, se=0.04, note="no strata: the same as PPI++")
    assert choose([naive, ppi, same]) == (ppi, "PPI++ is valid and not flagged")
    # flagged (itself, or PPI++: the same assumption within strata): not read
    flagged = _row("e", "t", "c", "ppi_stratified", 0.11, 0.04, 0.18, se=0.035, flags=SHIFT)
    assert choose([naive, ppi, flagged])[0] is ppi
    ppi_flagged = _row("e", "t", "c", "ppi", 0.10, 0.02, 0.18, se=0.04, flags=SHIFT)
    aipw = _row("e", "t", "c", "aipw", 0.1, 0.0, 0.2)
    assert choose([naive, ppi_flagged, stratified, aipw])[0] is aipw
    assert choose([naive, _row("e", "t", "c", "ppi", valid=False), stratified])[0] is naive
