"""Guardrails: experiments.toml's ``guardrails`` keys (parsed, checked, resolved per experiment), the preflight's
check of a guardrail's metric, and the rows of ``estimates.guardrails`` on sessions made by hand (values worked out
independently in the test)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from pulse_pipeline.estimates.experiments import experiments_config
from pulse_pipeline.estimates.guardrail_settings import (
    Guardrail,
    check_guardrail_metrics,
    guardrail_metrics,
    guardrails_for,
)
from pulse_pipeline.estimates.guardrails import guardrail_rows, missing_rows, pre_experiment_means
from pulse_pipeline.settings_files import SettingsFileError

DEFAULTS = Path(__file__).parents[1] / "pulse_pipeline" / "defaults" / "experiments.toml"

FILE = """\
[guardrails.cost]
metric = "llm_cost_usd"
direction = "lower"
margin = 0.10

[guardrails.duration]
metric = "duration_seconds"
direction = "lower"
margin = 0.2
margin_type = "relative"
alpha = 0.1

[experiments.a]
control = "x"
[experiments.a.guardrails.cost]
margin = 0.25
[experiments.a.guardrails.duration]
enabled = false
[experiments.a.guardrails.errors]
metric = "error_observations"
direction = "lower"
margin = 0.5
margin_type = "absolute"
"""


def test_top_level_guardrails_apply_to_every_experiment_and_an_experiment_overrides_adds_or_drops(tmp_path):
    path = tmp_path / "experiments.toml"
    path.write_text(FILE)
    config = experiments_config(path)
    assert guardrails_for(config, "a") == (
        Guardrail("cost", "llm_cost_usd", "lower", 0.25, "relative", 0.05),
        Guardrail("errors", "error_observations", "lower", 0.5, "absolute", 0.05),
    )
    assert guardrails_for(config, "not-in-the-file") == (
        Guardrail("cost", "llm_cost_usd", "lower", 0.10, "relative", 0.05),
        Guardrail("duration", "duration_seconds", "lower", 0.2, "relative", 0.1),
    )
    assert guardrail_metrics(config) == ["duration_seconds", "error_observations", "llm_cost_usd"]
    assert config.controls == {"a": "x"}


def test_the_shipped_file_gives_every_experiment_a_cost_and_a_duration_guardrail():
    config = experiments_config(DEFAULTS)
    for name in ("llm-backbone", "planning", "condenser", "any-other"):
        got = {g.name: (g.metric, g.direction) for g in guardrails_for(config, name)}
        assert got == {"cost": ("llm_cost_usd", "lower"), "duration": ("duration_seconds", "lower")}


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ('[guardrails.cost]\nmetric = "llm_cost_usd"\ndirection = "lower"\n', 1, "guardrails.cost needs margin"),
        ('[guardrails.cost]\nmetric = "x"\ndirection = "down"\nmargin = 1\n', 3,
         "guardrails.cost.direction must be one of lower, higher"),
        ('[guardrails.cost]\nmetric = "x"\ndirection = "lower"\nmargin = -1\n', 4,
         "guardrails.cost.margin must be a number >= 0"),
        ('[guardrails.cost]\nmetric = "x"\ndirection = "lower"\nmargin = 1\nmargin_type = "percent"\n', 5,
         "guardrails.cost.margin_type must be one of relative, absolute"),
        ('[guardrails.cost]\nmetric = "x"\ndirection = "lower"\nmargin = 1\nalpha = 0.5\n', 5,
         "guardrails.cost.alpha must be a number in (0, 0.5)"),
        ('[guardrails.cost]\nmetric = "cost per session"\ndirection = "lower"\nmargin = 1\n', 2,
         "guardrails.cost.metric must name a numeric session column"),
        ('[guardrails.cost]\nmetrc = "x"\n', 2, "guardrails.cost: unknown key 'metrc'"),
        ('[experiments.a.guardrails.new]\nmargin = 1\n', 1, "experiments.a.guardrails.new needs metric, direction"),
        ('[guardrails.cost]\nmetric = "x"\ndirection = "lower"\nmargin = 1\n[experiments.a.guardrails.cost]\n'
         'direction = "sideways"\n', 6, "experiments.a.guardrails.cost.direction must be one of"),
        ('guardrails = 3\n', None, "guardrails must hold tables"),
    ],
)  # fmt: skip
def test_a_guardrail_the_stage_cannot_use_is_one_line_naming_the_file_the_line_and_the_key(tmp_path, text, line, what):
    path = tmp_path / "experiments.toml"
    path.write_text(text)
    with pytest.raises(SettingsFileError) as error:
        experiments_config(path)
    assert (error.value.path, error.value.line) == (path, line)
    assert error.value.what.startswith(what)
    assert "\n" not in str(error.value)


def test_a_metric_that_is_no_numeric_session_column_is_refused_with_its_key_and_a_suggestion(tmp_path):
    path = tmp_path / "experiments.toml"
    path.write_text(FILE.replace('metric = "error_observations"', 'metric = "error_observation"'))
    config = experiments_config(path)
    columns = ["llm_cost_usd", "duration_seconds", "error_observations"]
    with pytest.raises(SettingsFileError) as error:
        check_guardrail_metrics(path, config, columns)
    assert str(error.value) == (
        f"{path}, line 20: experiments.a.guardrails.errors.metric 'error_observation' is not a numeric session"
        " column; did you mean 'error_observations'?"
    )
    check_guardrail_metrics(path, experiments_config(DEFAULTS), columns)  # the shipped metrics are columns


def test_the_preflight_refuses_a_metric_that_is_no_session_column(pulse_home):
    from pulse_pipeline.preflight import check_settings

    (pulse_home.root / "experiments.toml").write_text(
        '[guardrails.cost]\nmetric = "cost_usd"\ndirection = "lower"\nmargin = 0.1\n'
    )
    with pytest.raises(SettingsFileError, match=r"experiments.toml, line 2: guardrails.cost.metric 'cost_usd' is not"):
        check_settings(pulse_home, {})
    # a column only data create (a PULSE_SCORE_FIELDS score) is left to the stage, which knows its frame
    (pulse_home.root / "experiments.toml").write_text(
        '[guardrails.q]\nmetric = "score_quality"\ndirection = "higher"\nmargin = 0.1\n'
    )
    check_settings(pulse_home, {})


T0 = datetime(2025, 3, 1, 9, 0)


def _sessions() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Experiment e (arms t, c) from day 10 on; users u1..u6 (u1-u3 in t, u4-u6 in c), two sessions each; users
    u1, u2, u4, u5 had sessions before (days 0-2), u3 and u6 did not. One control session has no cost."""
    rows = []
    cost = {"u1": [2.0, 2.4], "u2": [1.0, 1.3], "u3": [1.5, 1.9], "u4": [1.8, 1.6], "u5": [0.8, None], "u6": [1.2, 1.0]}
    for k, (user, values) in enumerate(cost.items()):
        for j, v in enumerate(values):
            rows.append(dict(session_id=f"s{k}{j}", experiment="e", variant="t" if k < 3 else "c", user_id=user,
                             llm_cost_usd=v, started_at=T0 + timedelta(days=10 + j, hours=k)))  # fmt: skip
    before = {"u1": [2.2, 1.8], "u2": [1.2], "u4": [1.5], "u5": [0.7, 0.9]}
    history = [dict(session_id=f"p{u}{j}", user_id=u, started_at=T0 + timedelta(days=j), llm_cost_usd=v)
               for u, vs in before.items() for j, v in enumerate(vs)]  # fmt: skip
    frame = pl.DataFrame(rows)
    history = pl.concat(
        [pl.DataFrame(history), frame.select("session_id", "user_id", "started_at", "llm_cost_usd")], how="vertical"
    )
    return frame.drop("started_at").with_columns(design=pl.lit("randomized")), history


def test_pre_experiment_means_read_only_sessions_that_started_before_the_experiment():
    _, history = _sessions()
    means = pre_experiment_means(history, "llm_cost_usd", T0 + timedelta(days=10))
    assert means == pytest.approx({"u1": 2.0, "u2": 1.2, "u4": 1.5, "u5": 0.8})


def test_rows_of_a_user_randomized_comparison_worked_out_by_hand(tmp_path):
    sessions, history = _sessions()
    cost = Guardrail("cost", "llm_cost_usd", "lower", 0.10)
    rows = guardrail_rows(sessions, history, lambda _: (cost,), {"e": "c"}, units={"e": "user"}, min_history=3)
    assert len(rows) == 1
    r = rows[0]
    assert (r.experiment, r.treatment, r.control, r.guardrail, r.unit, r.design) == ("e", "t", "c", "cost", "user",
                                                                                     "randomized")  # fmt: skip
    assert (r.n_treatment, r.n_control) == (6, 5)
    assert "1 sessions without a value left out (0 treatment, 1 control)" in r.note
    yt = np.array([2.0, 2.4, 1.0, 1.3, 1.5, 1.9])
    yc = np.array([1.8, 1.6, 0.8, 1.2, 1.0])
    assert r.treatment_mean == pytest.approx(yt.mean()) and r.control_mean == pytest.approx(yc.mean())
    # CUPED by hand: covariates (h (x - xbar_h), h), theta by least squares on the 11 pooled sessions
    xt = np.array([2.0, 2.0, 1.2, 1.2, np.nan, np.nan])
    xc = np.array([1.5, 1.5, 0.8, np.nan, np.nan])
    x = np.concatenate([xt, xc])
    h = np.isfinite(x).astype(float)
    Z = np.column_stack([np.ones(11), np.where(h > 0, x - np.nanmean(x), 0), h])
    y = np.concatenate([yt, yc])
    theta = np.linalg.lstsq(Z, y, rcond=None)[0][1:]
    e = y - Z[:, 1:] @ theta
    effect_cuped = (yt.mean() - yc.mean()) - theta @ (Z[:6, 1:].mean(0) - Z[6:, 1:].mean(0))
    # users' sums of the centred residuals over n: the CR1 variance of each arm
    gt, gc = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 0, 1, 2, 2])

    def cr1(r, g):
        s = np.bincount(g, weights=(r - r.mean()) / r.size)
        return len(s) / (len(s) - 1) * np.sum(s**2)

    v_cuped = cr1(e[:6], gt) + cr1(e[6:], gc)
    v_plain = cr1(yt, gt) + cr1(yc, gc)
    assert v_cuped < 0.5 * v_plain  # the users' history explains much of their cost: CUPED is used
    assert r.method == "cuped" and r.effect == pytest.approx(effect_cuped)
    assert r.variance_reduction == pytest.approx(1 - v_cuped / v_plain)
    v, vt, vc = v_cuped, cr1(e[:6], gt), cr1(e[6:], gc)
    df = v**2 / (vt**2 / 2 + vc**2 / 2)
    q = stats.t.ppf(0.975, df)
    assert (r.ci_low, r.ci_high) == pytest.approx((r.effect - q * math.sqrt(v), r.effect + q * math.sqrt(v)))
    # the confidence sequence at the last look: the same estimate, 6 users, GrowthBook's radius
    from pulse_pipeline.stats.sequential import cs_radius

    radius = cs_radius(math.sqrt(v), 6, alpha=0.05)
    assert (r.cs_low, r.cs_high) == pytest.approx((r.effect - radius, r.effect + radius))
    assert r.cs_low < r.ci_low  # always valid: wider than the fixed interval
    # relative effect and verdict: treatment ~37 % dearer with six users: not inside a 10 % margin
    x_all = np.nanmean(Z[:, 1:], axis=0)  # the pooled means of the covariates (adjusted means centre at them)
    a_t = yt.mean() - theta @ (Z[:6, 1:].mean(0) - x_all)
    a_c = yc.mean() - theta @ (Z[6:, 1:].mean(0) - x_all)
    assert r.relative_effect == pytest.approx(a_t / a_c - 1)
    assert r.verdict in ("fail", "inconclusive") and r.margin == 0.10 and r.alpha == 0.05


def test_a_cheaper_treatment_passes_and_a_much_dearer_one_fails():
    rng = np.random.default_rng(3)
    n = 400
    frame = pl.DataFrame(
        {
            "session_id": [f"s{i}" for i in range(3 * n)],
            "experiment": "e",
            "variant": ["c"] * n + ["cheap"] * n + ["dear"] * n,
            "user_id": None,
            "llm_cost_usd": np.concatenate(
                [rng.gamma(4, 0.25, n), 0.95 * rng.gamma(4, 0.25, n), 1.5 * rng.gamma(4, 0.25, n)]
            ),
            "design": "randomized",
        }
    )
    history = frame.select("session_id", "user_id").with_columns(
        started_at=pl.lit(T0), llm_cost_usd=pl.lit(None, pl.Float64)
    )
    cost = Guardrail("cost", "llm_cost_usd", "lower", 0.10)
    rows = {r.treatment: r for r in guardrail_rows(frame, history, lambda _: (cost,), {"e": "c"})}
    assert rows["cheap"].verdict == "pass" and rows["dear"].verdict == "fail"
    assert rows["cheap"].unit == "session" and rows["cheap"].method == "plain"
    assert "no user was seen before" in rows["cheap"].note


def test_the_check_finds_a_missing_row_and_a_row_no_guardrail_asks_for():
    sessions, history = _sessions()
    cost = Guardrail("cost", "llm_cost_usd", "lower", 0.10)
    rows = guardrail_rows(sessions, history, lambda _: (cost,), {"e": "c"})
    table = pl.DataFrame([r.__dict__ for r in rows]).select(
        "experiment", "treatment", "guardrail", "n_treatment", "n_control"
    )
    assert missing_rows(table, sessions, lambda _: (cost,), {"e": "c"}) == []
    duration = Guardrail("duration", "duration_seconds", "lower", 0.2)
    assert missing_rows(table, sessions, lambda _: (cost, duration), {"e": "c"}) == [
        "e/t: no row for guardrail 'duration'"
    ]
    assert missing_rows(table, sessions, lambda _: (), {"e": "c"}) == [
        "e/t: a row for guardrail 'cost', which is not configured"
    ]


def test_config_and_rows_together(tmp_path):
    """The file's resolution feeds the rows: experiment a gets its own margin."""
    path = tmp_path / "experiments.toml"
    path.write_text(FILE.replace('[experiments.a]\ncontrol = "x"', '[experiments.e]\ncontrol = "c"').replace(
        "experiments.a.", "experiments.e."))  # fmt: skip
    config = experiments_config(path)
    sessions, history = _sessions()
    sessions = sessions.with_columns(error_observations=pl.lit(1))
    history = history.with_columns(error_observations=pl.lit(1))
    rows = guardrail_rows(sessions, history, partial(guardrails_for, config), config.controls)
    assert [(r.guardrail, r.margin, r.margin_type) for r in rows] == [("cost", 0.25, "relative"),
                                                                       ("errors", 0.5, "absolute")]  # fmt: skip
    errors = rows[1]
    assert errors.effect == 0.0 and errors.verdict == "pass"  # no spread: zero-width, inside the margin
