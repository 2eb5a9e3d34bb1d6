"""Neyman allocation across strata (stats/allocation.py), worked by hand on two strata."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pulse_pipeline.stats.allocation import (
    ask_shares,
    neyman_shares,
    rated_variance,
    ratings_for_width,
    ratings_saved,
    rectifier_sd,
)

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
