"""The tables around the estimate: sample-ratio check, feature differences, label shift, segments, power, Holm."""

from __future__ import annotations

import math

import dagster as dg
import duckdb
import numpy as np
import polars as pl
import pytest
from scipy.stats import chi2 as chi2_dist
from scipy.stats import t as t_dist
from statsmodels.stats.multitest import multipletests

from pulse_pipeline import tables
from pulse_pipeline.contract import nan_to_null
from pulse_pipeline.estimates.experiment_effects import EffectRow, with_holm
from pulse_pipeline.estimates.experiments import Experiment, read_splits
from pulse_pipeline.estimates.feature_comparisons import feature_comparison_rows
from pulse_pipeline.estimates.label_shift import LabelShiftRow, label_shift_rows
from pulse_pipeline.estimates.power import power_row
from pulse_pipeline.estimates.srm import srm_rows
from pulse_pipeline.estimates.subgroups import subgroup_effect_rows
from pulse_pipeline.runs import ingest
from pulse_pipeline.settings_files import SettingsFileError
from pulse_pipeline.synth import write_corpus

Z80 = 1.959963984540054 + 0.8416212335729143  # z_{0.975} + z_{0.80}


def _col(table: tables.Table, row, name: str):
    assert name in table.column_names  # the row types' fields are the table's columns
    return getattr(row, name)


# ---------------------------------------------------------------- sample-ratio mismatch


def test_srm_equal_split_by_hand():
    [a, b] = srm_rows({"exp": {"a": 520, "b": 480}}, {})
    # expected 500 each: chi2 = (20^2 + 20^2) / 500 = 1.6 on 1 df
    assert _col(tables.SRM_CHECK, a, "chi2") == pytest.approx(1.6)
    assert _col(tables.SRM_CHECK, a, "p_value") == pytest.approx(chi2_dist.sf(1.6, 1))
    assert _col(tables.SRM_CHECK, a, "expected_sessions") == 500 and not _col(tables.SRM_CHECK, a, "mismatch")
    assert _col(tables.SRM_CHECK, b, "observed_share") == pytest.approx(0.48)


def test_srm_flags_a_broken_split_and_reads_the_configured_one(tmp_path):
    [a, _] = srm_rows({"exp": {"a": 600, "b": 400}}, {})
    assert _col(tables.SRM_CHECK, a, "chi2") == pytest.approx(40.0) and _col(tables.SRM_CHECK, a, "mismatch")
    path = tmp_path / "experiments.toml"
    path.write_text('[experiments.exp]\ncontrol = "a"\nsplit = { a = 1, b = 2 }\n')
    splits = read_splits(path)
    assert splits == {"exp": {"a": 1.0, "b": 2.0}}
    # 1:2 intended: 333.3 and 666.7 expected of 1000; 340 / 660 is fine
    [a, b] = srm_rows({"exp": {"a": 340, "b": 660}}, splits)
    expected = (340 - 1000 / 3) ** 2 / (1000 / 3) + (660 - 2000 / 3) ** 2 / (2000 / 3)
    assert _col(tables.SRM_CHECK, a, "chi2") == pytest.approx(expected)
    assert _col(tables.SRM_CHECK, b, "intended_share") == pytest.approx(2 / 3)


def test_srm_bad_input_gives_reasons(tmp_path):
    [row] = srm_rows({"solo": {"only": 10}}, {})
    assert "single-arm" in _col(tables.SRM_CHECK, row, "note") and not _col(tables.SRM_CHECK, row, "mismatch")
    rows = srm_rows({"exp": {"a": 10, "b": 10, "c": 3}}, {"exp": {"a": 1, "b": 1, "d": 1}})
    by_arm = {_col(tables.SRM_CHECK, r, "arm"): r for r in rows}
    assert set(by_arm) == {"a", "b", "c", "d"} and _col(tables.SRM_CHECK, by_arm["d"], "sessions") == 0
    assert _col(tables.SRM_CHECK, by_arm["c"], "mismatch")  # sessions in an arm meant to get none
    assert "c not in the configured split" in _col(tables.SRM_CHECK, by_arm["c"], "note")
    path = tmp_path / "bad.toml"
    path.write_text('[experiments.exp]\nsplit = { a = "half", b = 1 }\n')
    with pytest.raises(ValueError, match="split.a must be a positive number"):
        read_splits(path)


# ---------------------------------------------------------------- feature comparisons


def _sessions() -> pl.DataFrame:
    """Two arms of four sessions; the first two of each arm are rated."""
    return pl.DataFrame(
        {
            "session_id": [f"s{i}" for i in range(8)],
            "experiment": ["e"] * 8,
            "variant": ["c"] * 4 + ["t"] * 4,
            "labeled": [True, True, False, False] * 2,
            "label": [0.5, 0.75, None, None, 1.0, 0.75, None, None],
            "prediction": [0.6, 0.7, 0.6, 0.5, 0.8, 0.8, 0.7, 0.9],
            "messages": [2, 4, 6, 8, 1, 3, 5, None],
            "pushed": [1, 0, 0, 0, 1, 1, 1, 0],
            "constant": [3] * 8,
        }
    )


EXP = [Experiment("e", "c", ("t",))]


def test_feature_comparisons_by_hand():
    rows = feature_comparison_rows(_sessions(), ["messages", "pushed", "constant"], EXP)
    t = tables.FEATURE_COMPARISONS
    by = {(_col(t, r, "population"), _col(t, r, "feature")): r for r in rows}
    assert len(rows) == 6
    m = by["all", "messages"]  # t: [1, 3, 5] (one unknown), c: [2, 4, 6, 8]
    assert (_col(t, m, "n_treatment"), _col(t, m, "n_control")) == (3, 4)
    assert _col(t, m, "difference") == pytest.approx(3 - 5)
    assert _col(t, m, "relative_difference") == pytest.approx(-2 / 5)
    # Welch by hand: var_t = 4, var_c = 20/3; se^2 = 4/3 + 5/3 = 3; t = -2 / sqrt(3)
    assert _col(t, m, "test") == "welch t" and _col(t, m, "kind") == "numeric"
    df = 9 / ((4 / 3) ** 2 / 2 + (5 / 3) ** 2 / 3)
    assert _col(t, m, "p_value") == pytest.approx(2 * t_dist.sf(2 / math.sqrt(3), df))
    p = by["all", "pushed"]  # t: 3 of 4, c: 1 of 4 -> Fisher exact; tables as extreme: p = (1 + 16 + 16 + 1) / 70
    assert _col(t, p, "kind") == "binary" and _col(t, p, "test") == "fisher exact"
    assert _col(t, p, "p_value") == pytest.approx(34 / 70)
    r = by["rated", "messages"]
    assert (_col(t, r, "mean_treatment"), _col(t, r, "mean_control")) == (2.0, 3.0)
    assert _col(t, by["all", "constant"], "note")  # constant in both arms: said so
    # BH within each table (population): the three p-values of 'all', adjusted together
    ps = [_col(t, by["all", f], "p_value") for f in ("messages", "pushed", "constant")]
    expect = multipletests(ps, method="fdr_bh")[1]
    got = [_col(t, by["all", f], "p_bh") for f in ("messages", "pushed", "constant")]
    assert got == pytest.approx(list(expect))


def test_label_shift_by_hand():
    rows = label_shift_rows(_sessions(), ["messages", "constant"])
    t = tables.LABEL_SHIFT
    by = {_col(t, r, "feature"): r for r in rows}
    # rated [2, 4, 1, 3] vs unrated [6, 8, 5]: every rated value is smaller -> rbc = -1
    assert _col(t, by["messages"], "rank_biserial") == pytest.approx(-1.0)
    assert (_col(t, by["messages"], "n_rated"), _col(t, by["messages"], "n_unrated")) == (4, 3)
    assert math.isnan(_col(t, by["constant"], "rank_biserial")) and "constant" in _col(t, by["constant"], "note")


def test_label_shift_without_rated_sessions_says_so():
    unrated_only = _sessions().with_columns(pl.lit(False).alias("labeled"))
    (row,) = label_shift_rows(unrated_only, ["messages"])
    t = tables.LABEL_SHIFT
    assert (_col(t, row, "n_rated"), _col(t, row, "n_unrated")) == (0, 7)
    assert _col(t, row, "note") == "no rated sessions with a value: no shift measurable"


# ---------------------------------------------------------------- segments and power


def _segment_frame(n_rated_t: int, n_rated_c: int) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for arm, n_rated in (("t", n_rated_t), ("c", n_rated_c)):
        for i in range(60):
            rated = i < n_rated
            rows.append(
                {
                    "session_id": f"{arm}{i}",
                    "experiment": "e",
                    "variant": arm,
                    "labeled": rated,
                    "label": float(rng.integers(0, 5)) / 4 if rated else None,
                    "prediction": float(rng.uniform(0.4, 0.9)),
                    "task_type__fix_bugs": 1,
                    "task_type__write_documentation": int(i % 10 == 0),
                }
            )
    return pl.DataFrame(rows)


def test_segment_effects_estimate_big_segments_and_explain_small_ones():
    frame = _segment_frame(20, 15)
    rows = subgroup_effect_rows(frame, EXP, min_ratings=10)
    t = tables.SEGMENT_EFFECTS
    by = {(_col(t, r, "segment"), _col(t, r, "method")): r for r in rows}
    assert set(by) == {("fix_bugs", "naive_welch"), ("fix_bugs", "ppi"), ("write_documentation", "none")}
    small = by["write_documentation", "none"]
    assert _col(t, small, "effect") is None and "2 and 2 ratings (fewer than 10" in _col(t, small, "note")
    rated = frame.filter(pl.col("labeled"))
    y_t = rated.filter(pl.col("variant") == "t")["label"].to_numpy()
    y_c = rated.filter(pl.col("variant") == "c")["label"].to_numpy()
    naive = by["fix_bugs", "naive_welch"]
    assert _col(t, naive, "effect") == pytest.approx(y_t.mean() - y_c.mean())
    assert (_col(t, naive, "n_labeled_treatment"), _col(t, naive, "N_unlabeled_control")) == (20, 45)
    from ppi_py import ppi_mean_ci  # noqa: F401  (reference implementation present)
    from ppi_py.ppi import ppi_mean_pointestimate

    def ref(arm: str) -> float:
        a = frame.filter(pl.col("variant") == arm)
        lab, unl = a.filter(pl.col("labeled")), a.filter(~pl.col("labeled"))
        return float(
            ppi_mean_pointestimate(lab["label"].to_numpy(), lab["prediction"].to_numpy(), unl["prediction"].to_numpy())[
                0
            ]
        )

    assert _col(t, by["fix_bugs", "ppi"], "effect") == pytest.approx(ref("t") - ref("c"), abs=1e-9)


def test_power_row_by_hand():
    y_t = np.array([0.25, 0.5, 0.75, 1.0])
    y_c = np.array([0.0, 0.25, 0.5, 0.75])
    row = power_row("e", "t", "c", y_t, y_c, 100, 100, 0.6, target=0.1)
    t = tables.POWER
    sd = np.r_[y_t, y_c].std(ddof=1)
    assert _col(t, row, "sd") == pytest.approx(sd)
    assert _col(t, row, "mde_naive") == pytest.approx(Z80 * sd * math.sqrt(2 / 4))
    factor = 1 - 0.36 * 100 / 104  # PPI variance factor per arm: 1 - rho^2 N / (n + N)
    assert _col(t, row, "mde_ppi") == pytest.approx(Z80 * sd * math.sqrt(2 * factor / 4))
    # labels per arm at the current rated share r = 8 / 208: n = 2 z^2 sd^2 (1 - rho^2 (1 - r)) / effect^2
    need = 2 * Z80**2 * sd**2 / 0.1**2
    assert _col(t, row, "labels_per_arm_naive") == math.ceil(need)
    assert _col(t, row, "labels_per_arm_ppi") == math.ceil(need * (1 - 0.36 * (1 - 8 / 208)))


def test_power_row_bad_input():
    t = tables.POWER
    assert "fewer than 2" in _col(t, power_row("e", "t", "c", np.array([1.0]), np.ones(5), 9, 9, 0.3), "note")
    assert "all ratings equal" in _col(t, power_row("e", "t", "c", np.ones(3), np.ones(3), 9, 9, 0.3), "note")
    row = power_row("e", "t", "c", np.array([0.0, 1.0]), np.array([0.0, 1.0]), 9, 9, float("nan"))
    assert "rho = 0" in _col(t, row, "note") and _col(t, row, "mde_ppi") == _col(t, row, "mde_naive")


def test_undefined_statistics_are_stored_as_null():
    frame = pl.DataFrame({"a": ["a"], "b": [float("nan")], "c": [1.0], "d": [None], "e": ["why"]})
    row = nan_to_null(frame).row(0)
    assert row == ("a", None, 1.0, None, "why")
    con = duckdb.connect()  # why: DuckDB sorts NaN above every number, so a NaN would top any ranking
    assert con.execute("SELECT max(x) FROM (VALUES (1.0), ('nan'::DOUBLE)) t(x)").fetchone()[0] != 1.0


def test_holm_is_per_method_across_comparisons():
    p = [0.01, 0.04, 0.03, None]

    def row(method: str, pv):
        return EffectRow(experiment="e", treatment="t", control="c", method=method, p_value=pv, valid=True)

    rows = [row("ppi", v) for v in p] + [row("naive_welch", 0.01)]
    out = with_holm(rows)
    holm = [r.p_holm for r in out]
    assert holm[:3] == pytest.approx(list(multipletests([0.01, 0.04, 0.03], method="holm")[1]))
    assert holm[3] is None and holm[4] == pytest.approx(0.01)  # a lone naive row: nothing to adjust


# ---------------------------------------------------------------- through the pipeline


@pytest.mark.slow
def test_every_table_around_the_estimate_is_materialized(pulse_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PULSE_CV_SEEDS", "2")
    monkeypatch.setenv("PULSE_MODEL_FAMILIES", "lightgbm")
    monkeypatch.setenv("PULSE_SEGMENT_MIN_RATINGS", "5")
    monkeypatch.setenv("PULSE_BENCHMARK_MIN_RATINGS", "3")
    (pulse_home.root / "benchmarks.csv").write_text(
        "treatment,control,cluster,benchmark,delta_b,source\n"
        "gpt-5,claude-4-sonnet,Testing code,SWT,21.8,t\n"
        "gpt-5,claude-4-sonnet,Fix python issues,SWE,1.8,t\n"
        "gpt-5,claude-4-sonnet,Administrative tasks,TAC,n/a,t\n"
        "gpt-5,claude-3.7-sonnet,Testing code,SWT,3,t\n"
    )
    # a split the file gets wrong: refused before anything is registered (it used to be a note after the run)
    (pulse_home.root / "experiments.toml").write_text('[experiments.planning]\nsplit = { "no-plan" = "half" }\n')
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 1500, seed=12)
    with pytest.raises(SettingsFileError, match=r"experiments.toml, line 2: .*split.no-plan must be a positive"):
        ingest(pulse_home, corpus, say=lambda _: None)
    (pulse_home.root / "experiments.toml").write_text('[experiments.planning]\nsplit = { "no-plan" = 1 }\n')
    with pytest.raises(SettingsFileError, match=r"benchmarks.csv, line 4: delta_b 'n/a' is not a number"):
        ingest(pulse_home, corpus, say=lambda _: None)
    assert not any(pulse_home.drops.iterdir())  # nothing registered
    benchmarks = (pulse_home.root / "benchmarks.csv").read_text().replace("TAC,n/a,t\n", "TAC,2.5,t\n")
    (pulse_home.root / "benchmarks.csv").write_text(benchmarks)
    ingest(pulse_home, corpus, say=lambda _: None)
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:

        def q(sql):
            return con.execute(sql).fetchall()

        for t in (tables.SRM_CHECK, tables.FEATURE_COMPARISONS, tables.LABEL_SHIFT, tables.SEGMENT_EFFECTS):
            assert q(f"SELECT count(*) FROM {t.qualified}")[0][0] > 0, t.qualified
        notes = dict(q("SELECT arm, note FROM estimates.srm_check WHERE experiment = 'planning'"))
        assert len(notes) == 2 and "show-plan not in the configured split" in notes["show-plan"]
        assert q("SELECT count(*) FROM estimates.power")[0][0] == 4  # one per treatment-vs-control comparison
        # every experiment comparison, both populations; the agent's cost per session among the features
        assert (
            q("SELECT count(DISTINCT (experiment, treatment, population)) FROM estimates.feature_comparisons")[0][0]
            == 8
        )
        assert q("SELECT count(*) FROM estimates.feature_comparisons WHERE feature = 'llm_cost_usd'")[0][0] == 8
        # the synthetic users rate more when they write more: the label-shift table sees it
        [(rbc,)] = q("SELECT rank_biserial FROM estimates.label_shift WHERE feature = 'user_message_count'")
        assert 0.15 < rbc < 0.5
        assert q("SELECT count(*) FROM estimates.label_shift WHERE isnan(rank_biserial)")[0][0] == 0  # NULL, not NaN
        doubles = [c for c, t in tables.EXPERIMENT_EFFECTS.columns if t == "DOUBLE"]
        nan_sql = " OR ".join(f"isnan({c})" for c in doubles)
        assert q(f"SELECT count(*) FROM estimates.experiment_effects WHERE {nan_sql}")[0][0] == 0
        assert q("SELECT count(*) FROM estimates.experiment_effects WHERE p_holm < p_value")[0][0] == 0
        points = dict(q("SELECT coalesce(cluster, benchmark), status FROM estimates.benchmark_points"))
        assert points["Testing code"] in ("used", "skipped")
        statuses = [s for _, s in q("SELECT cluster, status FROM estimates.benchmark_points")]
        assert statuses.count("rejected") == 0  # a bad line stops the run before it starts, see above
        assert q("SELECT count(*) FROM estimates.benchmark_correlation")[0][0] == 4  # 2 comparisons x 2 measures
    # the checks ran: the split is fine (tested against equal shares), the benchmark file has a bad line
    keys = {
        name: dg.AssetCheckKey(dg.AssetKey(["estimates", table]), name)
        for table, name in (("srm_check", "split_matches_design"), ("benchmark_points", "benchmark_file_is_clean"))
    }
    latest = dg.DagsterInstance.get().event_log_storage.get_latest_asset_check_execution_by_key(list(keys.values()))
    passed = {k.name: r.event.dagster_event.asset_check_evaluation_data.passed for k, r in latest.items()}
    # planning's arm show-plan is outside the configured split: a mismatch whatever the counts
    assert passed == {"split_matches_design": False, "benchmark_file_is_clean": True}


def test_pulse_power_plans_a_test(capsys):
    from pulse_pipeline.cli import main

    assert main(["power", "--n", "100", "--N", "2000", "--rho", "0.5", "--sd", "0.25", "--effect", "0.05"]) == 0
    out = capsys.readouterr().out
    naive = Z80 * 0.25 * math.sqrt(2 / 100)  # 0.0991
    ppi = naive * math.sqrt(1 - 0.25 * 2000 / 2100)  # 0.0865
    assert f"{naive:.4f}" in out and f"{ppi:.4f}" in out
    need = 2 * Z80**2 * 0.25**2 / 0.05**2  # 392.4 -> 393; PPI at the same rated share: x (1 - 0.25 (1 - 100/2100))
    assert f"naive {math.ceil(need)}   PPI {math.ceil(need * (1 - 0.25 * 2000 / 2100))}" in out
    assert main(["power", "--n", "1", "--sd", "0.25"]) == 2  # a clear error, not a traceback


def test_split_check_names_a_mismatch_without_a_p_value(pulse_home):
    from pulse_pipeline.defs.estimates.diagnostics import split_matches_design
    from pulse_pipeline.defs.resources import warehouse_resource

    resource = warehouse_resource(pulse_home)
    with resource.warehouse() as wh:  # an arm the configured split does not have: mismatch, and no p-value
        rows = srm_rows({"exp": {"a": 10, "b": 10, "c": 3}}, {"exp": {"a": 1, "b": 1}})
        wh.replace(tables.SRM_CHECK, rows, nan_as_null=True)
    result = split_matches_design(resource)
    assert not result.passed and "exp (sessions in an arm outside the split)" in result.description


def _label_shift_check(home, rows: list[LabelShiftRow]) -> dg.AssetCheckResult:
    """The label-shift asset check, as the UI shows it, over ``estimates.label_shift`` holding ``rows``."""
    from pulse_pipeline.connections import connect
    from pulse_pipeline.defs.estimates.diagnostics import rated_sessions_are_representative
    from pulse_pipeline.defs.resources import warehouse_resource
    from pulse_pipeline.warehouse import Warehouse

    con = connect(home.work_db)
    try:
        Warehouse(con).replace(tables.LABEL_SHIFT, rows, nan_as_null=True)
    finally:
        con.close()
    return rated_sessions_are_representative(warehouse=warehouse_resource(home))


def _shift_row(feature: str, rbc: float, rated: float, unrated: float) -> LabelShiftRow:
    return LabelShiftRow(feature, 600, 3400, rated, unrated, rbc, 1e-20, 1e-19, None)


def test_the_label_shift_warning_says_what_shifts_by_how_much_and_what_follows(pulse_home):
    """Issue 33, item 9: the demo's check warned (0/1 passed) with no explanation in the UI. Its result now names
    each feature beyond the threshold, largest first, with its direction, rank-biserial and means; what that
    means for PPI++; and what the report does about it."""
    rows = [
        _shift_row("user_message_count", 0.321, 18.516, 12.515),
        _shift_row("files_edited", -0.45, 2.0, 5.0),
        _shift_row("n_segments", 0.294, 9.676, 6.784),  # within ±0.3: not named
        LabelShiftRow("constant", 600, 3400, 1.0, 1.0, float("nan"), float("nan"), None, "constant: no shift"),
    ]
    result = _label_shift_check(pulse_home, rows)
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert result.description == (
        "2 of 3 features differ between rated and unrated sessions beyond |rank-biserial| 0.3 (0: alike; ±1: every"
        " rated session above, or below, every unrated one): files_edited: lower in rated sessions (rank-biserial"
        " -0.45; mean 2 rated, 5 unrated); user_message_count: higher in rated sessions (rank-biserial +0.32; mean"
        " 18.5 rated, 12.5 unrated). Rated sessions are not a random sample of the sessions, so prefer AIPW to PPI++"
        " for these comparisons."
    )
    meta = result.metadata
    assert meta["shifted_features"].value == 2 and meta["finding"].value == result.description
    assert meta["largest_shift"].value.startswith("files_edited: lower in rated sessions")
    table = meta["shifts"].value
    assert "files_edited" in table and "user_message_count" in table and "n_segments" not in table
    assert "PPI++ corrects the model's predictions" in meta["what_it_means_for_ppi"].value
    assert "AIPW weights each rated session" in meta["what_it_means_for_ppi"].value
    report = meta["what_the_report_does"].value
    assert "Do rated sessions look like unrated ones?" in report and "read by AIPW instead of PPI++" in report


def test_the_label_shift_check_passing_names_the_largest_shift(pulse_home):
    result = _label_shift_check(pulse_home, [_shift_row("n_segments", -0.12, 6.0, 6.5), _shift_row("x", 0.05, 1, 1)])
    assert result.passed
    assert result.description == (
        "No feature separates rated from unrated sessions beyond |rank-biserial| 0.3; the largest shift is"
        " n_segments: lower in rated sessions (rank-biserial -0.12; mean 6 rated, 6.5 unrated). PPI++'s assumption"
        " that rated sessions are like the rest holds as far as the features show."
    )
    assert result.metadata["shifted_features"].value == 0 and "n_segments" in result.metadata["shifts"].value
