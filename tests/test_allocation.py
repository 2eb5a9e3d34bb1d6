"""Neyman allocation across strata (stats/allocation.py), worked by hand on two strata."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import polars as pl
import pytest

from pulse_pipeline import tables
from pulse_pipeline.cli import main
from pulse_pipeline.estimates.allocation import experiment_allocation
from pulse_pipeline.stats.allocation import (
    ask_shares,
    neyman_shares,
    rated_variance,
    ratings_for_width,
    ratings_saved,
    rectifier_sd,
)
from pulse_pipeline.warehouse import Warehouse

W = np.array([0.5, 0.5])
SD = np.array([0.1, 0.3])  # the second stratum's rectifier spreads three times as much


def test_neyman_shares_by_hand_and_against_a_brute_force_minimum():
    # n_h / n = W_h sigma_h / sum W sigma = 0.05 / 0.20 and 0.15 / 0.20
    assert neyman_shares(W, SD) == pytest.approx([0.25, 0.75])
    # brute force: 100 ratings split every way, the variance sum W^2 sigma^2 / n_h is least at 25 / 75
    splits = [rated_variance(W, SD, [k, 100 - k]) for k in range(1, 100)]
    assert 1 + int(np.argmin(splits)) == 25
    assert rated_variance(W, SD, [25, 75]) == pytest.approx(0.2**2 / 100)  # (sum W sigma)^2 / n
    assert rated_variance(W, SD, [50, 50]) == pytest.approx(0.05 / 100)  # sum W sigma^2 / n
    # strata alike: Neyman is proportional allocation; no spread anywhere: proportional too
    assert neyman_shares([0.2, 0.8], [0.3, 0.3]) == pytest.approx([0.2, 0.8])
    assert neyman_shares([0.2, 0.8], [0.0, 0.0]) == pytest.approx([0.2, 0.8])
    assert rated_variance(W, SD, [0, 100]) == math.inf


def test_ratings_for_a_width_and_the_saving_by_hand():
    z = 1.959963984540054
    room = (0.1 / (2 * z)) ** 2  # an interval 0.1 wide: V = (0.05 / z)^2
    # uniform: c = sum W sigma^2 = 0.05; Neyman: c = (sum W sigma)^2 = 0.04
    assert ratings_for_width(W, SD, 0.1, W) == pytest.approx(0.05 / room)
    assert ratings_for_width(W, SD, 0.1) == pytest.approx(0.04 / room)
    assert ratings_for_width(W, SD, 0.1) == pytest.approx(61.46, abs=0.01)
    assert ratings_saved(W, SD) == pytest.approx(1 - 0.04 / 0.05)  # 20 % fewer ratings at the same width
    assert ratings_saved(W, SD) == pytest.approx(1 - ratings_for_width(W, SD, 0.1) / ratings_for_width(W, SD, 0.1, W))
    # an unrated part U takes room: n = c / ((w / 2z)^2 - U); U alone wider than w: no n will do
    assert ratings_for_width(W, SD, 0.1, unrated_variance=room / 2) == pytest.approx(0.08 / room)
    assert ratings_for_width(W, SD, 0.1, unrated_variance=room) == math.inf
    assert ratings_saved([0.3, 0.7], [0.2, 0.2]) == pytest.approx(0.0)


def test_ask_shares_divide_by_the_root_of_the_answer_rate_and_cap_at_every_session():
    # a = (1, 0.25): t = sigma / sqrt(a) = (0.1, 0.6), asks shared 0.05 : 0.30
    assert ask_shares(W, SD, [1.0, 0.25]) == pytest.approx([1 / 7, 6 / 7])
    assert ask_shares(W, SD) == pytest.approx(neyman_shares(W, SD))
    # asks saved at equal width: 1 - (sum W t)^2 / sum W t^2 = 1 - 0.35^2 / 0.185
    assert ratings_saved(W, SD, [1.0, 0.25]) == pytest.approx(1 - 0.35**2 / 0.185)
    # a budget of 0.5 asks a session: q = m t, 0.5 m 0.7 = 0.5, q_2 = 0.857 < 1: the plain shares
    assert ask_shares(W, SD, [1.0, 0.25], asks_per_session=0.5) == pytest.approx([1 / 7, 6 / 7])
    # 0.6 asks a session: q_2 would be 1.03, capped at 1 (0.5 asks a session), the other 0.1 to stratum 1
    assert ask_shares(W, SD, [1.0, 0.25], asks_per_session=0.6) == pytest.approx([1 / 6, 5 / 6])
    with pytest.raises(ValueError, match="answer rates"):
        ask_shares(W, SD, [1.0, 0.0])


def test_rectifier_sd_is_the_spread_of_y_minus_lam_f():
    y, f = np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 2.0])
    assert rectifier_sd(y, f, 0.5) == pytest.approx(np.std([0.5, 1.5, 3.0]))
    assert math.isnan(rectifier_sd([], [], 0.5))


def _experiment_frame(asked: bool = False) -> pl.DataFrame:
    """Two identical arms of 300 sessions: stratum 'a' (100: 40 rated) where the prediction is constant, stratum
    'b' (200: 40 rated) where it equals the rating."""
    rows = []
    for arm in ("control", "treatment"):
        for h, n, n_rated in (("a", 100, 40), ("b", 200, 40)):
            for i in range(n):
                y = (0.2, 0.8)[i % 2] if h == "a" else (0.4, 0.6)[i % 2]
                rows.append(
                    {
                        "session_id": f"{arm}-{h}-{i}",
                        "experiment": "exp",
                        "variant": arm,
                        "labeled": i < n_rated,
                        "label": y if i < n_rated else None,
                        "prediction": 0.5 if h == "a" else y,
                        "ask_probability": (0.5 if i < 2 * n_rated else None) if asked else None,
                        "task_type": h,
                    }
                )
    return pl.DataFrame(rows)


def test_experiment_allocation_by_hand():
    """Stratum a: f constant, lambda 0, the rectifier is y: sd 0.3. Stratum b: f = y, PPI++'s lambda =
    Cov(Y, f) / ((1 + n/N) Var_pool(f)) = 0.01 / (1.25 x 0.01 x 200/199) = 0.796 (``ppi_mean``: the covariance with
    ddof 0, the pooled variance of all 200 predictions with ddof 1), the rectifier (1 - lam) y: sd 0.0204.
    W = (1/3, 2/3)."""
    sd_b = (1 - 0.8 * 199 / 200) * 0.1
    rows = experiment_allocation("exp", "task_type", _experiment_frame())
    assert [r.stratum for r in rows] == ["a", "b"] and [r.sessions for r in rows] == [200, 400]
    assert [r.rated for r in rows] == [80, 80] and [r.answer_rate for r in rows] == [None, None]
    assert [r.residual_sd for r in rows] == pytest.approx([0.3, sd_b])
    assert [r.share_uniform for r in rows] == pytest.approx([1 / 3, 2 / 3])
    neyman = np.array([0.3 / 3, sd_b * 2 / 3])
    assert [r.share_neyman for r in rows] == pytest.approx(neyman / neyman.sum())
    uniform = 0.09 / 3 + sd_b**2 * 2 / 3  # sum W sigma^2
    saved = 1 - neyman.sum() ** 2 / uniform
    assert rows[0].ratings_saved == pytest.approx(saved) and rows[0].asks_saved is None
    # ratings per arm for 0.05 at 80 % power: 2 (1.96 + 0.8416)^2 c / 0.05^2, c = sum W sigma^2 or (sum W sigma)^2
    z = 1.959963984540054 + 0.8416212335729143
    assert rows[0].ratings_per_arm_uniform == math.ceil(2 * z**2 * uniform / 0.05**2)
    assert rows[0].ratings_per_arm_neyman == math.ceil(2 * z**2 * neyman.sum() ** 2 / 0.05**2)
    # asks logged: a's 80 asks answered 40, b's 80 asks answered 40: a = 0.5 everywhere, the shares unchanged
    asked = experiment_allocation("exp", "task_type", _experiment_frame(asked=True))
    assert [r.answer_rate for r in asked] == pytest.approx([0.5, 0.5])
    assert asked[0].asks_saved == pytest.approx(saved)
    # no such column: one row saying so
    (row,) = experiment_allocation("exp", "segment", _experiment_frame())
    assert row.stratum is None and "no session column 'segment'" in row.note


def test_pulse_power_shows_each_experiments_allocation(pulse_home, capsys):
    rows = experiment_allocation("exp", "task_type", _experiment_frame())
    with duckdb.connect(str(pulse_home.warehouse)) as con:
        Warehouse(con).replace(tables.ASK_ALLOCATION, rows, nan_as_null=True)
    assert main(["power", "--experiments"]) == 0
    out = capsys.readouterr().out
    assert "task_type=a" in out and "task_type=b" in out
    share_a = 100 * rows[0].share_neyman
    assert f"{share_a:.1f}%" in out and f"{100 * rows[0].ratings_saved:.1f}%" in out
    # neither a plan nor --experiments: one line saying what to give
    assert main(["power"]) == 2
    assert "give --n and --sd (planning a test), or --experiments" in capsys.readouterr().err
