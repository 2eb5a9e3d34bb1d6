"""The randomization unit: configured or detected, recorded in every row; switching users left out and counted;
the split check counts users."""

import numpy as np
import polars as pl
import pytest

from pulse_pipeline.estimates.effects import Settings
from pulse_pipeline.estimates.experiment_effects import experiment_effect_rows
from pulse_pipeline.estimates.experiments import detect_unit, read_units, resolve_unit
from pulse_pipeline.estimates.srm import srm_rows, unit_counts
from pulse_pipeline.stats.cluster import clustered_welch_difference

FAST = Settings(n_resamples=200, n_permutations=100)


def _assign(rows):
    return pl.DataFrame(rows, schema=["experiment", "variant", "user_id"], orient="row")


def test_detection_rule():
    sticky = _assign([("e", "a", "u1")] * 3 + [("e", "b", "u2")] * 2 + [("e", "a", "u3"), ("e", "b", None)])
    assert detect_unit(sticky) == ("user", "detected: each of 2 users with several sessions always got the same arm")
    mixed = sticky.vstack(_assign([("e", "b", "u1")]))
    assert detect_unit(mixed) == ("session", "detected: 1 of 2 users with several sessions saw several arms")
    once = _assign([("e", "a", "u1"), ("e", "b", "u2"), ("e", "b", None), ("e", "a", None)])
    assert detect_unit(once) == ("session", "detected: no user has several sessions in the experiment")


def test_configured_user_with_switchers_leaves_them_out_and_says_how_many():
    frame = _assign([("e", "a", "u1")] * 3 + [("e", "b", "u1")] * 2 + [("e", "b", "u2")] * 4 + [("e", "a", "u3")])
    unit = resolve_unit(frame, "user")
    assert (unit.unit, unit.source, unit.switchers, unit.excluded_sessions) == ("user", "configured", 1, 5)
    assert "5 session(s) of 1 user(s)" in unit.note
    odd = resolve_unit(frame, "cluster")
    assert odd.unit == "session" and "configured unit 'cluster' is not one of session, user" in odd.source
    assert odd.excluded_sessions == 0 and odd.note is None


def test_read_units(tmp_path):
    path = tmp_path / "experiments.toml"
    path.write_text('[experiments.x]\ncontrol = "a"\nunit = "user"\n[experiments.y]\ncontrol = "b"\n')
    assert read_units(path) == {"x": "user"}


def test_split_check_counts_users_under_unit_user():
    # arm a: u1 (5 sessions), u2 (1), one session without a user -> 3 units, 7 sessions; arm b: u3, u4, u5 -> 3
    rows = [("e", "a", "u1")] * 5 + [("e", "a", "u2"), ("e", "a", None)]
    rows += [("e", "b", u) for u in ("u3", "u4", "u5")]
    frame = _assign(rows)
    units = unit_counts(frame, {"e": "user"})
    assert units["e"].counts == {"a": 3, "b": 3}
    a, b = srm_rows({"e": {"a": 7, "b": 3}}, {}, units)
    assert (a.sessions, a.units, a.expected_units, a.expected_sessions) == (7, 3, 3.0, 5.0)
    assert a.chi2 == pytest.approx(0.0) and not a.mismatch and a.unit == "user" and a.unit_source == "configured"
    # counted in sessions the same split looks lopsided: (7 - 5)^2 / 5 * 2 = 1.6
    s_a, _ = srm_rows({"e": {"a": 7, "b": 3}}, {})
    assert s_a.chi2 == pytest.approx(1.6) and s_a.unit == "session" and s_a.units == 7


def _sessions(seed: int, users: int = 120, switch: int = 0) -> pl.DataFrame:
    """A user-randomized experiment with strong user effects; ``switch`` users also get sessions in the other arm."""
    rng = np.random.default_rng(seed)
    per_user = rng.integers(1, 9, users)
    user = np.repeat(np.arange(users), per_user)
    arm = np.where(rng.random(users) < 0.5, "t", "c")[user]
    n = user.size
    feature = rng.normal(size=n)
    label = np.clip(0.6 + 0.2 * rng.normal(size=users)[user] + 0.1 * feature + 0.05 * rng.normal(size=n), 0, 1)
    frame = pl.DataFrame(
        {
            "session_id": [f"s{i}" for i in range(n)],
            "experiment": "e",
            "variant": arm,
            "user_id": [f"u{u}" for u in user],
            "labeled": rng.random(n) < 0.5,
            "label": label,
            "prediction": np.clip(0.6 + 0.1 * feature, 0, 1),
            "feature": feature,
        }
    )
    frame = frame.with_columns(pl.when(pl.col("labeled")).then(pl.col("label")).alias("label"))
    if switch:
        switchers = [f"u{u}" for u in range(switch)]
        moved = frame.filter(pl.col("user_id").is_in(switchers)).unique("user_id", keep="first", maintain_order=True)
        moved = moved.with_columns(
            pl.when(pl.col("variant") == "t").then(pl.lit("c")).otherwise(pl.lit("t")).alias("variant"),
            (pl.col("session_id") + "x").alias("session_id"),
        )
        frame = frame.vstack(moved)
    return frame


def test_effect_rows_record_the_unit_and_cluster_by_user():
    frame = _sessions(7)
    rows = {r.method: r for r in experiment_effect_rows(frame, {"e": "c"}, FAST)}
    welch = rows["naive_welch"]
    assert welch.unit == "user" and welch.unit_source.startswith("detected: each of")
    assert welch.sessions_excluded == 0
    # the row's Welch is the delta-method interval on per-user totals, computed here from the frame directly
    rated = frame.filter(pl.col("labeled"))
    t, c = rated.filter(pl.col("variant") == "t"), rated.filter(pl.col("variant") == "c")
    ref = clustered_welch_difference(t["label"], t["user_id"], c["label"], c["user_id"])
    assert (welch.effect, welch.se) == pytest.approx((ref.estimate, ref.se))
    # configured as sessions, the same data give narrower, wrong intervals for every method
    session = {r.method: r for r in experiment_effect_rows(frame, {"e": "c"}, FAST, units={"e": "session"})}
    assert session["naive_welch"].unit_source == "configured"
    for method in ("naive_welch", "ppi", "crossppi", "aipw"):
        assert rows[method].effect == pytest.approx(session[method].effect)
        assert rows[method].se > 1.3 * session[method].se


def test_switching_users_under_unit_user_are_left_out_never_a_crash():
    frame = _sessions(8, switch=3)
    rows = experiment_effect_rows(frame, {"e": "c"}, FAST, units={"e": "user"})
    switched = frame.filter(pl.col("user_id").is_in(["u0", "u1", "u2"])).height
    assert {r.sessions_excluded for r in rows} == {switched}
    assert all(r.unit == "user" and f"{switched} session(s) of 3 user(s)" in r.note for r in rows)
    assert rows[0].n_labeled_treatment + rows[0].n_labeled_control == (
        frame.filter(pl.col("labeled") & ~pl.col("user_id").is_in(["u0", "u1", "u2"])).height
    )
    # detection sees the switchers and falls back to sessions, excluding nothing
    detected = experiment_effect_rows(frame, {"e": "c"}, FAST)
    assert {r.unit for r in detected} == {"session"} and {r.sessions_excluded for r in detected} == {0}


def test_generator_user_options():
    from pulse_pipeline.synth.model import GeneratorParams, simulate_sessions

    base = simulate_sessions(4000, seed=2, scenario="random")
    sticky = simulate_sessions(4000, seed=2, scenario="random", params=GeneratorParams(user_assignment=True))
    # sticky assignment: one arm per (user, experiment); users, experiments and tasks drawn exactly as before
    arms = pl.DataFrame({"u": sticky.user_id, "e": sticky.experiment, "v": sticky.variant})
    assert arms.group_by("u", "e").agg(pl.col("v").n_unique())["v"].max() == 1
    assert (sticky.user_id == base.user_id).all() and (sticky.experiment == base.experiment).all()
    assert (sticky.task_type == base.task_type).all()
    assert (base.variant != sticky.variant).any()
    share = (sticky.variant[sticky.experiment == "planning"] == "show-plan").mean()
    assert 0.4 < share < 0.6
    # the user intercept: q moves by one constant per user, with the configured sd
    shifted = simulate_sessions(4000, seed=2, scenario="random", params=GeneratorParams(user_effect_sd=0.8))
    diff = pl.DataFrame({"u": base.user_id, "d": shifted.quality - base.quality})
    per_user = diff.group_by("u").agg(pl.col("d").min().alias("lo"), pl.col("d").max().alias("hi"))
    assert (per_user["hi"] - per_user["lo"]).abs().max() < 1e-9
    assert per_user["lo"].std() == pytest.approx(0.8, rel=0.1)
    assert (shifted.task_type == base.task_type).all() and (shifted.variant == base.variant).all()


def test_a_frame_without_user_ids_and_a_user_with_hundreds_of_sessions():
    frame = _sessions(9)
    plain = {r.method: r for r in experiment_effect_rows(frame.drop("user_id"), {"e": "c"}, FAST)}
    assert plain["ppi"].unit == "session"
    assert plain["ppi"].unit_source == "detected: no user has several sessions in the experiment"
    # one user with 300 sessions in treatment: one cluster among ~60, its weight shows in the interval, no crash
    rng = np.random.default_rng(0)
    whale = frame.filter(pl.col("variant") == "t").sample(300, with_replacement=True, seed=1)
    whale = whale.with_columns(
        pl.lit("whale").alias("user_id"),
        (pl.col("session_id") + "w" + pl.int_range(300).cast(pl.Utf8)).alias("session_id"),
        pl.when(pl.col("labeled")).then(pl.Series(0.2 + 0.01 * rng.random(300))).alias("label"),
    )
    rows = {r.method: r for r in experiment_effect_rows(frame.vstack(whale), {"e": "c"}, FAST)}
    assert rows["naive_welch"].unit == "user"
    for method in ("naive_welch", "naive_bootstrap", "ppi", "crossppi", "aipw"):
        r = rows[method]
        assert np.isfinite([r.effect, r.se, r.ci_low, r.ci_high]).all() and r.se > 0, method
    # the whale's low ratings are one user's: the clustered se grows far beyond the session formula's
    session = {
        r.method: r for r in experiment_effect_rows(frame.vstack(whale), {"e": "c"}, FAST, units={"e": "session"})
    }
    assert rows["naive_welch"].se > 2 * session["naive_welch"].se
