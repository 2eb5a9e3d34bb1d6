"""The agreement watch (issue 40, item 3): its measures against reference libraries, its windows and verdict by
hand, a planted drift caught by the check in a small warehouse (and a stationary one not), the drift scenarios'
smoke run."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import dagster as dg
import numpy as np
import polars as pl
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

from pulse_pipeline import tables
from pulse_pipeline.modeling.agreement_history import (
    POOLED,
    RATINGS,
    WEEK,
    AgreementRow,
    agreement_rows,
    measure,
    newest_below,
    newest_falls,
    out_of_fold_constant,
    pearson,
    slope,
    windows,
)
from pulse_pipeline.stats.agreement import cohen_kappa, paired_mean
from pulse_pipeline.studies import drift


def _pairs(n: int, r: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return x, r * x + math.sqrt(1 - r * r) * rng.normal(size=n)


@pytest.mark.parametrize("n", [4, 30, 250])
def test_r_and_its_fisher_interval_are_scipys(n):
    x, y = _pairs(n, 0.4, n)
    ref = stats.pearsonr(x, y)
    low, high = ref.confidence_interval(0.95)  # scipy: Fisher's z with n - 3, as the watch says
    got = pearson(x, y)
    assert got.value == pytest.approx(ref.statistic, abs=1e-12)
    assert (got.ci_low, got.ci_high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert got.n == n and got.note is None


def test_r_of_too_few_or_constant_pairs_is_undefined_and_says_why():
    assert math.isnan(pearson(np.array([1.0, 2.0]), np.array([2.0, 1.0])).value)
    flat = pearson(np.ones(10), np.arange(10.0))
    assert math.isnan(flat.value) and "constant" in flat.note


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kappa_is_sklearns_and_its_se_statsmodels(seed):
    rng = np.random.default_rng(seed)
    a = rng.random(80) < 0.6
    b = np.where(rng.random(80) < 0.75, a, ~a)  # agrees three times in four
    got = cohen_kappa(a, b)
    assert got.value == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    table = np.array([[np.sum(~a & ~b), np.sum(~a & b)], [np.sum(a & ~b), np.sum(a & b)]])
    ref = cohens_kappa(table)  # Fleiss-Cohen-Everitt's large-sample variance
    half = 1.959963984540054 * math.sqrt(ref.var_kappa)
    assert got.ci_low == pytest.approx(max(-1, ref.kappa - half), abs=1e-10)
    assert got.ci_high == pytest.approx(min(1, ref.kappa + half), abs=1e-10)


def test_kappas_interval_is_about_the_bootstraps():
    """The docstring's claim: at a window's few dozen items the large-sample interval is about as wide as the
    percentile bootstrap's (4 000 resamples)."""
    rng = np.random.default_rng(7)
    a = rng.random(60) < 0.55
    b = np.where(rng.random(60) < 0.8, a, ~a)
    got = cohen_kappa(a, b)
    idx = rng.integers(0, 60, size=(4000, 60))
    ra, rb = a[idx], b[idx]  # kappa of each resample written out: (p_o - p_e) / (1 - p_e)
    p_o = (ra == rb).mean(axis=1)
    p_e = ra.mean(axis=1) * rb.mean(axis=1) + (1 - ra.mean(axis=1)) * (1 - rb.mean(axis=1))
    low, high = np.percentile((p_o - p_e) / (1 - p_e), [2.5, 97.5])
    assert (got.ci_high - got.ci_low) == pytest.approx(high - low, rel=0.15)


def test_kappa_by_hand_and_when_undefined():
    # 10 items: both yes 4, both no 3, a yes b no 2, a no b yes 1: p_o = 0.7; p_e = 0.6*0.5 + 0.4*0.5 = 0.5
    a = [1] * 4 + [0] * 3 + [1] * 2 + [0]
    b = [1] * 4 + [0] * 3 + [0] * 2 + [1]
    assert cohen_kappa(a, b).value == pytest.approx((0.7 - 0.5) / 0.5)
    same = cohen_kappa([1, 1, 1], [1, 1, 1])
    assert math.isnan(same.value) and "undefined" in same.note


def test_calibration_slope_is_polyfits_with_linregress_se():
    x, y = _pairs(120, 0.5, 3)
    y = 0.2 + 0.7 * y
    got = slope(y, x)
    b = np.polyfit(x, y, 1)[0]
    se = stats.linregress(x, y).stderr
    t = stats.t.ppf(0.975, 118)
    assert got.value == pytest.approx(b, abs=1e-12)
    assert (got.ci_low, got.ci_high) == (pytest.approx(b - t * se, abs=1e-12), pytest.approx(b + t * se, abs=1e-12))


def test_mse_gain_over_the_out_of_fold_constant_by_hand():
    label = np.array([1.0, 0.5, 0.0, 1.0, 0.5, 0.0])
    fold = np.array([0, 0, 1, 1, 2, 2])
    # fold 0's constant: mean of folds 1, 2 = (0 + 1 + 0.5 + 0) / 4 = 0.375; fold 1's (1 + 0.5 + 0.5 + 0) / 4 = 0.5;
    # fold 2's (1 + 0.5 + 0 + 1) / 4 = 0.625
    c = out_of_fold_constant(label, fold)
    assert c.tolist() == [0.375, 0.375, 0.5, 0.5, 0.625, 0.625]
    f = np.array([0.9, 0.6, 0.1, 0.8, 0.4, 0.2])
    d = (label - c) ** 2 - (label - f) ** 2
    rows = pl.DataFrame({"label": label, "prediction": f, "constant": c})
    got = measure("mse_vs_constant", rows)
    half = stats.t.ppf(0.975, 5) * d.std(ddof=1) / math.sqrt(6)
    assert got.value == pytest.approx(d.mean()) and got.ci_high == pytest.approx(d.mean() + half)
    assert paired_mean([0.5]).n == 1 and math.isnan(paired_mean([0.5]).ci_low)


def _at(day: datetime, n: int) -> list[datetime]:
    return [day + timedelta(hours=i % 100) for i in range(n)]


def test_windows_are_weeks_when_the_median_week_has_n_ratings_else_blocks_of_n_from_the_newest():
    monday = datetime(2025, 6, 2)
    weekly = _at(monday, 5) + _at(monday + timedelta(days=7), 6) + _at(monday + timedelta(days=21), 7)
    # weeks of 5, 6, 0 (empty), 7 ratings: median 5.5 >= 5: weeks, the empty one holding no window
    w = windows(weekly, n=5)
    assert w.kind == WEEK and w.index.tolist() == [0] * 5 + [1] * 6 + [2] * 7
    assert w.starts == [monday, monday + timedelta(days=7), monday + timedelta(days=21)]
    assert w.ends[2] == monday + timedelta(days=28)
    # median 5.5 < 6: every 6 ratings counted back from the newest; the oldest holds the 18 - 12 = 6 left... and
    # with 7 per block: 18 = 4 + 7 + 7, the oldest window the 4 left
    b = windows(weekly, n=7)
    assert b.kind == RATINGS and b.index.tolist() == [0] * 4 + [1] * 7 + [2] * 7
    assert b.starts[1] == weekly[4] and b.ends[2] == weekly[-1]


def _row(window: int, measure: str, low: float, high: float, below: bool | None, experiment: str = POOLED):
    return AgreementRow(WEEK, datetime(2025, 6, 2), datetime(2025, 6, 9), experiment, POOLED, measure, 0.3, low, high,
                        50, 0.5, 0.45, 0.55, below, None, window, 200)  # fmt: skip


def test_the_check_reads_the_newest_window_and_warns_on_r_and_kappa_only():
    rows = [
        _row(0, "oof_r", 0.1, 0.9, None),
        _row(1, "oof_r", 0.1, 0.3, True),  # an earlier fall: not the newest window
        _row(2, "oof_r", 0.3, 0.6, False),
        _row(2, "calibration_slope", 0.1, 0.3, True),  # below, but the check does not warn on it
    ]
    assert newest_falls(rows) == [] and [r.measure for r in newest_below(rows)] == ["calibration_slope"]
    kappa = _row(2, "judge_kappa", 0.0, 0.2, True, experiment="llm-backbone")
    assert newest_falls([*rows, kappa]) == [kappa]


def test_below_long_run_means_the_windows_interval_lies_wholly_below_the_earlier_windows():
    """r 0.5 for 4 weeks of 200 ratings, then a week at r 0.0: the last window's r interval lies below the long
    run's (worked out: atanh(0.5) = 0.549 -+ 1.96 / sqrt(797) against 0 -+ 1.96 / sqrt(197)); the earlier weeks
    are not below."""
    rng = np.random.default_rng(11)
    n, weeks = 200, 5
    u = rng.normal(size=n * weeks)
    r = np.where(np.arange(n * weeks) >= n * (weeks - 1), 0.0, 0.5)
    f = r * u + np.sqrt(1 - r**2) * rng.normal(size=n * weeks)
    start = [datetime(2025, 6, 2) + timedelta(days=7 * (i // n), minutes=i % n) for i in range(n * weeks)]
    rated = pl.DataFrame({"session_id": [f"s{i:04d}" for i in range(n * weeks)], "started_at": start, "label": u,
                          "prediction": f, "fold": np.arange(n * weeks) % 5, "judge_satisfied": None,
                          "judge_likert": None},
                         schema_overrides={"judge_satisfied": pl.Boolean, "judge_likert": pl.Float64})  # fmt: skip
    rows = agreement_rows(rated)
    r_rows = sorted((x for x in rows if x.measure == "oof_r"), key=lambda x: x.window_index)
    assert [x.window_kind for x in r_rows] == [WEEK] * 5 and {x.measure for x in rows} == {
        "oof_r",
        "mse_vs_constant",
        "calibration_slope",
    }  # no judge ran: no judge rows
    assert [x.below_long_run for x in r_rows] == [None, False, False, False, True]
    last = r_rows[-1]
    pooled = stats.pearsonr(u[: n * 4], f[: n * 4])
    assert last.long_run_value == pytest.approx(pooled.statistic) and last.long_run_n_ratings == 800
    assert last.ci_high < last.long_run_ci_low
    assert [x.measure for x in newest_falls(rows)] == ["oof_r"]


def _write_home(home, rated: pl.DataFrame, arms: pl.DataFrame) -> None:
    """A small warehouse holding what the watch reads: predictions, session starts, assignments, judge scores."""
    from pulse_pipeline.connections import connect
    from pulse_pipeline.contract import ensure_tables

    con = connect(home.work_db)
    try:
        ensure_tables(con)
        for t in (tables.PREDICTIONS, tables.STAGING_SESSIONS, tables.STAGING_ASSIGNMENTS, tables.JUDGE_SCORES):
            con.execute(f"DELETE FROM {t.qualified}")
        con.register("rated", rated.to_arrow())
        con.register("arms", arms.to_arrow())
        con.execute(f"""INSERT INTO {tables.PREDICTIONS.qualified}
            (session_id, labeled, label_stars, label, prediction_stars, prediction, fold, model, method,
             prediction_calibrated)
            SELECT session_id, true, 1 + 4 * label, label, 1 + 4 * prediction, prediction, fold, 'drawn', 'crossfit',
                   prediction FROM rated""")
        con.execute(f"INSERT INTO {tables.STAGING_SESSIONS.qualified} (session_id, started_at) "
                    "SELECT session_id, started_at FROM rated")  # fmt: skip
        con.execute(f"INSERT INTO {tables.STAGING_ASSIGNMENTS.qualified} (session_id, experiment, variant) "
                    "SELECT session_id, experiment, variant FROM arms")  # fmt: skip
        con.execute(f"""INSERT INTO {tables.JUDGE_SCORES.qualified}
            (session_id, model, binary_satisfied, likert_score, status)
            SELECT session_id, 'judge', judge_satisfied, CAST(judge_likert AS INTEGER), 'ok' FROM rated""")
    finally:
        con.close()


def _watch(home) -> tuple[list, dg.AssetCheckResult]:
    from pulse_pipeline.defs.modeling.agreement import agreement_history, model_still_agrees_with_people
    from pulse_pipeline.defs.resources import warehouse_resource
    from pulse_pipeline.modeling.agreement_history import load_history

    resource = warehouse_resource(home)
    agreement_history(context=dg.build_asset_context(), warehouse=resource)
    with resource.warehouse() as wh:
        rows = load_history(wh)
    return rows, model_still_agrees_with_people(warehouse=resource)


def test_a_planted_drift_is_caught_by_the_check_and_a_stationary_one_is_not(pulse_home):
    """The generator of the drift scenarios (r 0.5 for 11 weeks, then 0.1 in the 12th) written into a warehouse:
    the asset's rows and its check warn at the newest window; the same warehouse holding a draw with r 0.5
    throughout does not. Seed 3 is one of the ~95 % of draws the watch catches and of the ~98 % it leaves alone
    (studies/drift.py)."""
    for planted in (True, False):
        rated, arms, change = drift.draw(3, drift=planted, change_weeks=1)
        _write_home(pulse_home, rated, arms)
        rows, result = _watch(pulse_home)
        assert {r.window_kind for r in rows} == {WEEK} and max(r.window_index for r in rows) == drift.WEEKS - 1
        assert {r.experiment for r in rows} == {POOLED, drift.EXPERIMENT}
        assert {r.measure for r in rows} == {"oof_r", "mse_vs_constant", "calibration_slope", "judge_kappa", "judge_r"}
        assert result.severity == dg.AssetCheckSeverity.WARN
        assert result.passed is not planted
        if planted:
            assert "oof_r of every rated session in the window from 2025-08-18" in result.description
            assert "wider" in result.description  # what it means: the gain falls, not validity
        newest = [
            r for r in rows if r.window_index == drift.WEEKS - 1 and r.experiment == POOLED and r.measure == "oof_r"
        ]
        assert newest[0].window_start == change and newest[0].n_ratings == 2 * drift.N_PER_ARM


def test_the_drift_scenarios_run_and_score_the_watch():
    """Smoke: two replications of each scenario through pulse validate's runner, and their targets read."""
    from pulse_pipeline.studies.coverage import check_targets, validate

    frame = validate(2, ["drift", "drift_stationary"], workers=1)
    watch = frame.filter(pl.col("method") == drift.WATCH)
    assert watch["scenario"].to_list() == ["drift", "drift_stationary"]
    assert set(frame["method"]) == {drift.WATCH, "oof_r", "mse_vs_constant", "calibration_slope", "judge_kappa",
                                    "judge_r"}  # fmt: skip
    assert watch["replications"].to_list() == [2, 2]
    for scenario in ("drift", "drift_stationary"):  # the check warns on oof_r (and judge_kappa): never less often
        rows = frame.filter(pl.col("scenario") == scenario)
        r = rows.filter(pl.col("method") == "oof_r")
        w = rows.filter(pl.col("method") == drift.WATCH)
        assert w["coverage"][0] >= r["coverage"][0] and w["bias"][0] >= r["bias"][0]
    summary = pl.DataFrame({"scenario": ["drift", "drift_stationary"], "method": [drift.WATCH] * 2,
                            "coverage": [0.85, 0.5], "bias": [0.2, 0.04]})  # fmt: skip
    assert check_targets(summary, ["drift", "drift_stationary"]) == []  # 85 % caught; 4 % of windows false
    missed = summary.with_columns(pl.Series("coverage", [0.5, 0.5]), pl.Series("bias", [0.2, 0.06]))
    assert check_targets(missed, ["drift", "drift_stationary"]) == [
        "drift watch fires at the first window after the change >= 80%: got 50.0%",
        "drift_stationary watch fires in <= 5% of windows: got 6.0%",
    ]


def test_the_generators_correlation_is_the_one_it_states():
    mean, sd, latent = drift.label_moments()
    u = np.random.default_rng(0).normal(size=400_000)
    g = (drift.stars_of_latent(u) - 1) / 4
    assert (g.mean(), g.std(), np.corrcoef(g, u)[0, 1]) == (
        pytest.approx(mean, abs=2e-3),
        pytest.approx(sd, abs=2e-3),
        pytest.approx(latent, abs=2e-3),
    )
    rated, _, _ = drift.draw(0, drift=True, n_per_arm=500)
    before = rated.filter(pl.col("started_at") < datetime(2025, 8, 11))
    after = rated.filter(pl.col("started_at") >= datetime(2025, 8, 11))
    assert np.corrcoef(before["label"], before["prediction"])[0, 1] == pytest.approx(drift.R_BEFORE, abs=0.02)
    assert np.corrcoef(after["label"], after["prediction"])[0, 1] == pytest.approx(drift.R_AFTER, abs=0.05)


def _report_rows() -> list[AgreementRow]:
    """Three weekly windows of the pooled arm and one arm: r 0.5, 0.5, then 0.1 whose interval lies below."""
    out = []
    for w, (value, low, high, below) in enumerate([(0.5, 0.3, 0.65, None), (0.5, 0.35, 0.62, False),
                                                     (0.1, -0.1, 0.28, True)]):  # fmt: skip
        start = datetime(2025, 6, 2) + timedelta(days=7 * w)
        long_run = (None, None, None) if w == 0 else (0.5, 0.38, 0.6)
        for experiment, variant, n in ((POOLED, POOLED, 100), ("llm-backbone", "gpt-5", 50)):
            out.append(AgreementRow(WEEK, start, start + timedelta(days=7), experiment, variant, "oof_r", value, low,
                                    high, n, *long_run, below, None, w, 100 * w))  # fmt: skip
    return out


def _section(con):
    from pulse_pipeline.report import data
    from pulse_pipeline.report.sections.agreement import agreement_section

    return agreement_section(data.agreement_history(con))


def test_the_report_plots_the_watch_and_says_what_the_newest_window_shows():
    import duckdb

    from pulse_pipeline.contract import ensure_tables
    from pulse_pipeline.warehouse import Warehouse

    con = duckdb.connect()
    ensure_tables(con, [tables.AGREEMENT_HISTORY])
    Warehouse(con).replace(tables.AGREEMENT_HISTORY, _report_rows(), nan_as_null=True)
    s = _section(con)
    html = s.render(2)
    assert s.figures == 1 and 'id="fig-agreement-watch"' in html and "<desc" in html
    assert "3 windows of calendar weeks by the session" in html
    assert (
        "The check warns: model: out-of-fold r of every rated session: 0.100 [-0.100, 0.280] against [0.380, 0.600]"
        in html
    )
    assert "llm-backbone / gpt-5: 0.100" in html  # the arm fell too
    # the arm's newest value is a headline mark the warehouse holds
    assert 'data-table="modeling.agreement_history"' in html and 'data-value="0.1"' in html
    con.execute(f"DELETE FROM {tables.AGREEMENT_HISTORY.qualified}")
    empty = _section(con).render(2)
    assert "Nothing to show: modeling.agreement_history has no rows: no rated session has both" in empty
    missing_table = _section(duckdb.connect()).render(2)  # a warehouse from before the watch
    assert "modeling.agreement_history does not exist in this warehouse" in missing_table


def test_a_window_of_a_few_ratings_gets_no_verdict_and_equal_ratings_no_slope_interval():
    """The demo's small arms had windows of 3 equal ratings: slope 0 with a zero-width interval, 'below' the long
    run. Under 10 ratings a window gets no verdict; equal ratings give the slope no interval."""
    assert math.isnan(slope(np.array([0.5, 0.5, 0.5]), np.array([0.2, 0.4, 0.9])).ci_high)
    monday = datetime(2025, 6, 2)
    rng = np.random.default_rng(5)
    n_old, n_new = 200, 6
    u = rng.normal(size=n_old + n_new)
    f = np.r_[0.6 * u[:n_old] + 0.8 * rng.normal(size=n_old), -u[n_old:] + 0.3 * rng.normal(size=n_new)]  # r ~ -0.95
    start = [monday + timedelta(minutes=i) for i in range(n_old)] + [
        monday + timedelta(days=7, hours=i) for i in range(n_new)
    ]
    rated = pl.DataFrame({"session_id": [f"s{i:04d}" for i in range(n_old + n_new)], "started_at": start, "label": u,
                          "prediction": f, "fold": np.arange(n_old + n_new) % 5, "judge_satisfied": None,
                          "judge_likert": None},
                         schema_overrides={"judge_satisfied": pl.Boolean, "judge_likert": pl.Float64})  # fmt: skip
    rows = agreement_rows(rated, window_ratings=6)
    newest = [r for r in rows if r.window_index == 1]
    assert newest and all(r.below_long_run is None for r in newest)
    assert all("6 ratings, fewer than 10: no verdict" in r.note for r in newest)
