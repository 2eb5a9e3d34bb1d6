"""estimates.effect_history (estimates/history.py): the estimate as of each look day, against hand computations;
and the peeking validation scenario (studies/peeking.py): its rows, targets and a smoke run."""

from __future__ import annotations

import math
from datetime import date, timedelta

import duckdb
import numpy as np
import polars as pl
import pytest
from scipy import stats

from pulse_pipeline import tables
from pulse_pipeline.estimates.history import (
    METHODS,
    expected_looks,
    history_rows,
    look_days,
    missing_looks,
    session_days,
    with_days,
)
from pulse_pipeline.studies.coverage import ReplicationRow, validate
from pulse_pipeline.studies.peeking import METHODS as PEEKING_METHODS
from pulse_pipeline.studies.peeking import NULL_PARAMS, check_peeking, replicate_peeking
from pulse_pipeline.synth.model import ArmEffect, simulate_sessions
from pulse_pipeline.warehouse import Warehouse

D1, D2, D3 = date(2025, 6, 1), date(2025, 6, 2), date(2025, 6, 3)
CONTROLS = {"e": "a", "thin": "a"}


def _sessions() -> pl.DataFrame:
    """Experiment e: per day and arm 40 sessions, 10 of them rated on D1 and D3, none on D2; one session of arm a
    without a start day. Experiment thin: arm b has one rating on D1, three by D2. Experiment solo: one arm."""
    rng = np.random.default_rng(11)
    rows = []

    def add(experiment, arm, day, n, n_rated, shift=0.0):
        for i in range(n):
            rated = i < n_rated
            label = float(np.clip(0.7 + shift + rng.normal(0, 0.2), 0, 1)) if rated else None
            prediction = (label if rated else 0.7 + shift) + float(rng.normal(0, 0.1))
            rows.append(
                dict(
                    session_id=f"{experiment}-{arm}-{day}-{i}",
                    user_id=f"u-{experiment}-{arm}-{day}-{i}",  # every session its own user
                    experiment=experiment,
                    variant=arm,
                    labeled=rated,
                    label=label,
                    prediction=prediction,
                    day=day,
                    user_messages=float(rng.integers(1, 20)),
                )
            )

    for day, n_rated in ((D1, 10), (D2, 0), (D3, 10)):
        add("e", "a", day, 40, n_rated)
        add("e", "b", day, 40, n_rated, shift=0.05)
    add("e", "a", None, 1, 1)
    add("thin", "a", D1, 20, 5)
    add("thin", "b", D1, 20, 1)
    add("thin", "b", D2, 20, 2)
    add("solo", "x", D1, 10, 3)
    return pl.DataFrame(rows)


@pytest.fixture(scope="module")
def history():
    frame = _sessions()
    return frame, history_rows(frame, CONTROLS)


def _by(rows, experiment, method, day):
    hits = [r for r in rows if r.experiment == experiment and r.method == method and r.day == day]
    assert len(hits) == 1
    return hits[0]


def test_one_row_per_method_and_day_with_cumulative_counts(history):
    _, rows = history
    e = [r for r in rows if r.experiment == "e"]
    assert sorted({(r.day, r.method) for r in e}) == sorted((d, m) for d in (D1, D2, D3) for m in METHODS)
    assert len(e) == 3 * len(METHODS) and {r.unit for r in e} == {"session"}  # each session its own user: detected
    counts = {r.day: (r.n_sessions, r.n_rated) for r in e}
    assert counts == {D1: (80, 20), D2: (160, 20), D3: (240, 40)}  # the undated session is left out
    assert all("sessions without a start time left out: 1" in r.note for r in e)
    assert all("no new rating since the previous look" in (r.note or "") for r in e if r.day == D2)
    assert not any("no new rating" in (r.note or "") for r in e if r.day != D2)


def test_naive_row_and_its_sequence_match_a_hand_computation(history):
    frame, rows = history
    for day in (D1, D3):
        upto = frame.filter((pl.col("experiment") == "e") & pl.col("day").is_not_null() & (pl.col("day") <= day))
        yb = upto.filter(pl.col("labeled") & (pl.col("variant") == "b"))["label"].to_numpy()
        ya = upto.filter(pl.col("labeled") & (pl.col("variant") == "a"))["label"].to_numpy()
        va, vb = ya.var(ddof=1) / ya.size, yb.var(ddof=1) / yb.size
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va**2 / (ya.size - 1) + vb**2 / (yb.size - 1))  # Welch-Satterthwaite
        effect = yb.mean() - ya.mean()
        half = stats.t.ppf(0.975, df) * se
        # the sequence, by hand: x = n rho^2, rho^2 = (-2 ln .05 + ln(1 - 2 ln .05)) / 5000, n = sessions to date
        x = upto.height * (-2 * math.log(0.05) + math.log(1 - 2 * math.log(0.05))) / 5000
        radius = se * math.sqrt((x + 1) / x * math.log((x + 1) / 0.05**2))
        row = _by(rows, "e", "naive_welch", day)
        assert row.effect == pytest.approx(effect, abs=1e-12)
        assert (row.ci_low, row.ci_high) == pytest.approx((effect - half, effect + half), abs=1e-10)
        assert (row.cs_low, row.cs_high) == pytest.approx((effect - radius, effect + radius), abs=1e-12)
        assert row.cs_high - row.cs_low > row.ci_high - row.ci_low
        assert row.excludes_zero_fixed == (row.ci_low > 0 or row.ci_high < 0)
        assert row.excludes_zero_cs == (row.cs_low > 0 or row.cs_high < 0)


def test_crossppi_row_uses_only_sessions_started_by_the_look(history):
    frame, rows = history

    def crossppi(arm, day):
        s = frame.filter(
            (pl.col("experiment") == "e") & (pl.col("variant") == arm) & pl.col("day").is_not_null()
            & (pl.col("day") <= day)
        )  # fmt: skip
        rated, unrated = s.filter(pl.col("labeled")), s.filter(~pl.col("labeled"))
        y, f, fu = rated["label"].to_numpy(), rated["prediction"].to_numpy(), unrated["prediction"].to_numpy()
        # lambda tuned per arm: Cov(Y, f) / (Var(f) + (n/N) Var(f~)), ddof 0, clipped to [0, 1]
        lam = np.clip(np.cov(y, f, ddof=0)[0, 1] / (f.var() + y.size / fu.size * fu.var()), 0, 1)
        return y.mean() + lam * (fu.mean() - f.mean())

    for day in (D1, D2, D3):
        expected = crossppi("b", day) - crossppi("a", day)
        assert _by(rows, "e", "crossppi", day).effect == pytest.approx(expected, abs=1e-12)


def test_too_few_ratings_and_a_single_arm_give_rows_that_say_why(history):
    _, rows = history
    first = _by(rows, "thin", "ppi", D1)
    assert math.isnan(first.effect) and first.excludes_zero_fixed is None and first.excludes_zero_cs is None
    assert "fewer than 2 ratings" in first.note
    assert not math.isnan(_by(rows, "thin", "ppi", D2).effect)
    (solo,) = [r for r in rows if r.experiment == "solo"]
    assert (solo.method, solo.day) == ("none", None) and "nothing to compare" in solo.note


def test_rows_reconcile_with_the_expected_looks_and_a_missing_one_is_named(history):
    frame, rows = history
    expected = expected_looks(frame, CONTROLS)
    assert expected == {("e", "b"): [D1, D2, D3], ("thin", "b"): [D1, D2]}
    table = pl.DataFrame(rows)
    assert missing_looks(table, expected) == []
    lacking = table.filter(~((pl.col("experiment") == "e") & (pl.col("day") == D2) & (pl.col("method") == "aipw")))
    assert missing_looks(lacking, expected) == ["e/b on 2025-06-02: no aipw row"]


def test_many_days_are_looked_at_once_per_period():
    days = [date(2025, 1, 1) + timedelta(days=k) for k in range(365)]
    july = [d for d in days if d.month == 7]
    looks, period = look_days([d for d in days if d.month != 7], max_looks=100)
    # period ceil(365 / 100) = 4 days; 92 periods, 7 of them (Jul 4-7 .. Jul 28-31) inside July: 85 looks
    assert period == 4 and len(looks) == 85
    assert looks[0] == date(2025, 1, 4) and looks[45] == date(2025, 6, 30) and looks[-1] == date(2025, 12, 31)
    assert not set(looks) & set(july)
    assert look_days([D3, D1, D1], max_looks=100) == ([D1, D3], 1)


def test_days_come_from_staging_and_rows_round_trip_through_the_warehouse(history):
    _, rows = history
    wh = Warehouse(duckdb.connect())
    wh.con.execute(
        "INSERT INTO staging.sessions (session_id, started_at) VALUES"
        " ('s1', TIMESTAMP '2025-06-01 23:59:59'), ('s2', TIMESTAMP '2025-06-02 00:00:00'), ('s3', NULL)"
    )
    days = session_days(wh)
    assert dict(days.iter_rows()) == {"s1": D1, "s2": D2, "s3": None}
    assigned = pl.DataFrame({"session_id": ["s1", "s9"], "experiment": ["e", "e"], "variant": ["a", "b"],
                             "labeled": [True, False], "label": [0.5, None], "prediction": [0.4, 0.6],
                             "n": [1.0, 2.0]})  # fmt: skip
    joined = with_days(assigned, days)
    assert joined.columns == [*assigned.columns, "day"] and joined["day"].to_list() == [D1, None]
    assert wh.replace(tables.EFFECT_HISTORY, rows, nan_as_null=True) == len(rows)
    first = wh.con.execute(
        "SELECT CAST(day AS DATE), n_sessions FROM estimates.effect_history"
        " WHERE experiment = 'e' AND method = 'ppi' ORDER BY day LIMIT 1"
    ).fetchone()
    assert first == (D1, 80)


def test_peeking_replication_has_replication_rows_and_the_sequence_is_wider_by_the_hand_ratio():
    n_per_arm, looks = 400, 5
    rows = replicate_peeking(3, n_per_arm=n_per_arm, looks=looks)
    assert [r["method"] for r in rows] == list(PEEKING_METHODS) == [
        "naive_welch", "naive_welch_cs", "naive_welch_last_look", "ppi", "ppi_cs", "ppi_last_look"
    ]  # fmt: skip
    assert all(set(r) == set(ReplicationRow.__dataclass_fields__) for r in rows)  # coverage.summarize takes them
    by = {r["method"]: r for r in rows}
    for est in ("naive_welch", "ppi"):
        assert by[est + "_last_look"]["covered"] or not by[est]["covered"]  # the last look is one of the looks
        assert by[est]["error"] == by[est + "_cs"]["error"]  # the last look's estimate, truth 0
    # PPI's fixed interval is z * se: at the last look the widths' ratio is the CS's radius factor over z, by hand,
    # with n = every llm-backbone session of the draw (all have started by the last day)
    table = simulate_sessions(6 * n_per_arm, seed=3, scenario="random", params=NULL_PARAMS)
    n = int((np.asarray(table.experiment) == "llm-backbone").sum())
    x = n * (-2 * math.log(0.05) + math.log(1 - 2 * math.log(0.05))) / 5000
    factor = math.sqrt((x + 1) / x * math.log((x + 1) / 0.05**2)) / stats.norm.ppf(0.975)
    assert by["ppi_cs"]["width"] / by["ppi"]["width"] == pytest.approx(factor, rel=1e-9)
    assert all(e == ArmEffect() for _, e in NULL_PARAMS.arm_effects)  # no arm differs: the truth is exactly 0


def test_peeking_targets_and_a_smoke_run():
    def row(method, coverage):
        return dict(scenario="peeking", method=method, coverage=coverage)

    frame = pl.DataFrame(
        [row("naive_welch", 0.72), row("naive_welch_cs", 0.976), row("ppi", 0.95), row("ppi_last_look", 0.96)]
    )
    assert check_peeking(frame) == [
        "peeking ppi coverage at every look <= 90% (peeking's harm shows): got 95.0%",
        "peeking ppi_cs coverage at every look >= 95%: no row",
    ]
    smoke = validate(2, ("peeking",), seed=1, workers=1, n_per_arm=300)  # the registry runs the scenario
    assert sorted(smoke["method"]) == sorted(PEEKING_METHODS)
    assert smoke["replications"].to_list() == [2] * 6 and smoke["share_flagged"].to_list() == [0.0] * 6


def _user_sessions() -> pl.DataFrame:
    """Experiment u: 60 users per arm, each with 3 sessions on days D1..D3 in their one arm, half of them rated;
    user "both" has a session in each arm on D1 (a switcher)."""
    rng = np.random.default_rng(5)
    rows = []
    for arm, shift in (("a", 0.0), ("b", 0.05)):
        for k in range(60):
            taste = float(rng.normal(0, 0.1))
            for j, day in enumerate((D1, D2, D3)):
                rated = (k + j) % 2 == 0
                label = float(np.clip(0.7 + shift + taste + rng.normal(0, 0.15), 0, 1)) if rated else None
                rows.append(dict(session_id=f"{arm}{k}-{j}", experiment="u", variant=arm, user_id=f"{arm}{k}",
                                 labeled=rated, label=label, prediction=0.7 + shift + taste + float(rng.normal(0, 0.1)),
                                 day=day, user_messages=float(rng.integers(1, 20))))  # fmt: skip
    for arm in ("a", "b"):
        rows.append(dict(session_id=f"both-{arm}", experiment="u", variant=arm, user_id="both", labeled=True,
                         label=0.5, prediction=0.6, day=D1, user_messages=3.0))  # fmt: skip
    return pl.DataFrame(rows)


def test_under_the_user_unit_the_clock_counts_users_and_switchers_are_left_out():
    frame = _user_sessions()
    z = stats.norm.ppf(0.975)

    def factor(n):  # the sequence's radius over se, by hand
        x = n * (-2 * math.log(0.05) + math.log(1 - 2 * math.log(0.05))) / 5000
        return math.sqrt((x + 1) / x * math.log((x + 1) / 0.05**2))

    rows = history_rows(frame, {"u": "a"}, units={"u": "user"})
    assert {r.unit for r in rows} == {"user"}
    for day, sessions in ((D1, 120), (D3, 360)):  # the switcher's two sessions are left out
        ppi = _by(rows, "u", "ppi", day)
        assert ppi.n_sessions == sessions
        assert "2 session(s) of 1 user(s) seen in several arms left out" in ppi.note
        # 120 users (not sessions) on every day: PPI's interval is z * se, so the width ratio is factor(120) / z
        ratio = (ppi.cs_high - ppi.cs_low) / (ppi.ci_high - ppi.ci_low)
        assert ratio == pytest.approx(factor(120) / z, rel=1e-9)
    assert expected_looks(frame, {"u": "a"}, units={"u": "user"}) == {("u", "b"): [D1, D2, D3]}
    by_session = history_rows(frame, {"u": "a"}, units={"u": "session"})
    last = _by(by_session, "u", "ppi", D3)
    assert last.unit == "session" and last.n_sessions == 362
    assert (last.cs_high - last.cs_low) / (last.ci_high - last.ci_low) == pytest.approx(factor(362) / z, rel=1e-9)


def test_a_frame_without_user_ids_counts_sessions(history):
    frame, rows = history
    thin = frame.filter(pl.col("experiment") == "thin").drop("user_id")
    # repr: NaN != NaN, but the rows' reprs are equal when every field is
    assert [repr(r) for r in rows if r.experiment == "thin"] == [repr(r) for r in history_rows(thin, CONTROLS)]
    assert expected_looks(thin, CONTROLS) == {("thin", "b"): [D1, D2]}


def test_every_look_reads_the_whole_periods_propensities(history):
    """Every look reads each arm's propensity cross-fit once on the whole period, so at the last look (every dated
    session) the aipw row is exactly what ``compare`` gives on those sessions, propensities fitted there."""
    from pulse_pipeline.estimates.effects import Settings, arm_data, compare

    frame, rows = history
    dated = frame.filter((pl.col("experiment") == "e") & pl.col("day").is_not_null())
    features = ["user_messages"]
    s = Settings(n_resamples=100, n_permutations=100)
    whole = {
        r.method: r
        for r in compare(*(arm_data(v, dated.filter(pl.col("variant") == v), features) for v in ("b", "a")), s)[0]
    }
    last = next(r for r in rows if r.experiment == "e" and r.method == "aipw" and r.day == D3)
    assert last.effect == pytest.approx(whole["aipw"].effect, rel=1e-12)
    assert last.ci_low == pytest.approx(whole["aipw"].ci_low, rel=1e-12)
    # an earlier look: the same whole-period propensities, restricted to the sessions started by D1
    from dataclasses import replace as replace_arm

    from pulse_pipeline.estimates.effects import propensities

    def arm_at_d1(v: str):
        arm = dated.filter(pl.col("variant") == v)
        p = propensities(arm_data(v, arm, features), s)  # rated first, then unrated
        ids = pl.concat([arm.filter(pl.col("labeled"))["session_id"], arm.filter(~pl.col("labeled"))["session_id"]])
        on_d1 = set(arm.filter(pl.col("day") <= D1)["session_id"])
        keep = np.array([i in on_d1 for i in ids])
        rated = np.r_[np.ones(int(arm["labeled"].sum()), bool), np.zeros(int((~arm["labeled"]).sum()), bool)]
        a = arm_data(v, arm.filter(pl.col("day") <= D1), features)
        return replace_arm(a, propensity_labeled=p[keep & rated], propensity_unlabeled=p[keep & ~rated])

    at_d1 = {r.method: r for r in compare(arm_at_d1("b"), arm_at_d1("a"), s)[0]}
    first = next(r for r in rows if r.experiment == "e" and r.method == "aipw" and r.day == D1)
    assert first.effect == pytest.approx(at_d1["aipw"].effect, rel=1e-12)
