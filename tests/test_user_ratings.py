"""The user columns (``modeling/user_ratings.py``): the shrunk mean by hand, no label reading itself (by perturbing
labels, not by trusting the records), a planted leak caught by the out-of-fold audit, absent without harm, and
the gain on the generator's per-user generosity."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pulse_pipeline.modeling import user_ratings as ur
from pulse_pipeline.modeling.crossfit import crossfit_predict, oof_violations, pearson
from pulse_pipeline.modeling.data import ModelingData
from pulse_pipeline.modeling.predictions import crossfit_tables
from pulse_pipeline.modeling.user_ratings import (
    USER_COLUMNS,
    UserRatings,
    fold_user_features,
    user_feature_violations,
    user_ratings,
    user_table,
)
from pulse_pipeline.stars import stars_to_label
from pulse_pipeline.synth.model import GeneratorParams, feature_matrix, simulate_sessions


def test_shrunk_deviation_and_count_worked_out_by_hand():
    # users 0 (2 ratings), 1 (3), 2 (1) and a session without a user; mu = 21 / 7 = 3
    codes = np.array([0, 0, 1, 1, 1, 2, -1])
    y = np.array([1.0, 2.0, 5.0, 4.0, 5.0, 3.0, 1.0])
    table = user_table(codes, y, np.arange(7), 3)
    # d = y - 3 = [-2, -1, 2, 1, 2, 0, -2]; pairs: user 0 (-3)^2 - 5 = 4, user 1 5^2 - 9 = 16, user 2 0; 2 + 6 pairs
    assert table.mu == pytest.approx(3.0)
    assert table.tau2 == pytest.approx(20 / 8)
    assert table.sigma2 == pytest.approx(18 / 7 - 20 / 8)  # mean d^2 = 18 / 7
    got = table.features(np.array([0, 1, 2, -1, 7]))  # 7: a user the table never saw
    # B_u (ybar_u - mu) = tau2 (S_u - n_u mu) / (tau2 n_u + sigma2), sigma2 = 1 / 14
    expected_dev = [2.5 * (3 - 6) / (5 + 1 / 14), 2.5 * (14 - 9) / (7.5 + 1 / 14), 0.0, 0.0, 0.0]
    np.testing.assert_allclose(got[:, 0], expected_dev)
    np.testing.assert_allclose(got[:, 1], [2, 3, 1, 0, 0])


def test_no_user_effect_seen_gives_a_constant_column():
    # two users whose ratings disagree within and agree across: the pair covariance is negative -> tau2 = 0
    codes = np.array([0, 0, 1, 1])
    y = np.array([1.0, 5.0, 1.0, 5.0])
    table = user_table(codes, y, np.arange(4), 2)
    assert table.tau2 == 0.0
    np.testing.assert_allclose(table.features(codes)[:, 0], 0.0)


def _random_users(n: int = 80, users: int = 12, seed: int = 3) -> tuple[UserRatings, np.ndarray]:
    rng = np.random.default_rng(seed)
    codes = rng.integers(-1, users, n)
    y = 0.5 * rng.integers(1, 6, n) + np.where(codes >= 0, codes % 4, 0)  # a strong user effect
    return UserRatings(codes, rng.integers(-1, users, 15), tuple(f"u{i}" for i in range(users))), y


def test_no_row_s_feature_moves_with_its_own_label_nor_a_held_out_row_s_with_its_fold_s():
    """Perturb one label at a time and recompute the fold: the records are not trusted, the values are read."""
    users, y = _random_users()
    n = y.size
    rng = np.random.default_rng(0)
    test = np.sort(rng.choice(n, n // 5, replace=False))
    train = np.setdiff1d(np.arange(n), test)
    base = users.fold(y, train, test, seed=7)
    assert base.outer.tau2 > 0 and all(t.tau2 > 0 for t in base.inner)  # the columns carry the users' labels
    for i in range(n):
        moved = y.copy()
        moved[i] += 3.0
        again = users.fold(moved, train, test, seed=7)
        np.testing.assert_array_equal(again.held_out_features, base.held_out_features) if i in test else None
        np.testing.assert_array_equal(again.unlabeled_features, base.unlabeled_features) if i in test else None
        if i in train:
            j = int(np.flatnonzero(train == i)[0])
            np.testing.assert_array_equal(again.train_features[j], base.train_features[j])
    # the check has teeth: some feature does move with some other label
    moved = y.copy()
    moved[train] += 2.0 * (users.labeled[train] % 2)  # half the users rate higher
    assert not np.array_equal(users.fold(moved, train, test, seed=7).held_out_features, base.held_out_features)
    assert user_feature_violations([base]) == 0


def _leaky_fold(self, y, train, test, seed):
    """A planted leak: held-out rows read a table of every label, their own fold's (their own) included."""
    honest = fold_user_features(self.labeled, y, self.unlabeled, train, test, len(self.user_ids), seed)
    everyone = user_table(self.labeled, y, np.arange(y.size), len(self.user_ids))
    return replace(honest, outer=everyone, held_out_features=everyone.features(self.labeled[test]))


def _inner_leaky_fold(self, y, train, test, seed):
    """A planted leak: training rows read a table of all of T_k, their own label included."""
    honest = fold_user_features(self.labeled, y, self.unlabeled, train, test, len(self.user_ids), seed)
    whole = user_table(self.labeled, y, train, len(self.user_ids))
    return replace(honest, inner=(whole,), inner_fold=np.zeros(train.size, dtype=np.int64))


def test_a_planted_leak_of_a_label_into_its_own_user_feature_is_caught(monkeypatch):
    users, y = _random_users()
    X = np.random.default_rng(1).normal(size=(y.size, 3))
    honest = crossfit_predict(X, y, None, "ordinal_logit", k=5, users=replace(users, unlabeled=users.unlabeled[:0]))
    assert oof_violations(honest.fold, honest.train_index_by_fold) == 0
    assert user_feature_violations(honest.user_folds) == 0
    assert honest.user_features is not None and honest.user_features.shape == (y.size, len(USER_COLUMNS))

    monkeypatch.setattr(UserRatings, "fold", _leaky_fold)
    leaky = crossfit_predict(X, y, None, "ordinal_logit", k=5, users=replace(users, unlabeled=users.unlabeled[:0]))
    # every rated row's feature read its own fold's labels: each one counts
    assert oof_violations(leaky.fold, leaky.train_index_by_fold) == y.size

    monkeypatch.setattr(UserRatings, "fold", _inner_leaky_fold)
    inner = crossfit_predict(X, y, None, "ordinal_logit", k=5, users=replace(users, unlabeled=users.unlabeled[:0]))
    assert oof_violations(inner.fold, inner.train_index_by_fold) == 0  # held-out rows are still clean ...
    assert user_feature_violations(inner.user_folds) == sum(f.train_rows.size for f in inner.user_folds)  # ... not T_k


def test_user_columns_absent_when_no_user_has_two_ratings():
    labeled = np.array([True, True, False, True])
    assert user_ratings([None, None, None, None], labeled) is None
    assert user_ratings(["a", "b", "a", "c"], labeled) is None  # a's second session is unrated: no other rating
    got = user_ratings(["a", "b", "c", "a"], labeled)
    assert got is not None and got.labeled.tolist() == [0, 1, 0] and got.unlabeled.tolist() == [2]


def test_without_users_the_predictions_are_those_of_today():
    """No user known, or none with two ratings: no column at all, the same predictions to the bit."""
    rng = np.random.default_rng(5)
    n = 60
    X = rng.normal(size=(n, 4))
    y = np.where(rng.random(n) < 0.6, np.clip(np.round(3 + X[:, 0] + rng.normal(size=n)), 1, 5), np.nan)
    ids = np.array([f"s{i:03d}" for i in range(n)])
    names = ("a", "b", "c", "d")
    today = crossfit_tables(ModelingData(names, ids, X, y), "ordinal_logit", 5)
    for users in ([None] * n, [f"u{i}" for i in range(n)]):
        data = ModelingData(names, ids, X, y, user_ids=tuple(users))
        assert data.user_feature() is None
        got = crossfit_tables(data, "ordinal_logit", 5)
        assert got.predictions.equals(today.predictions)
        assert not set(USER_COLUMNS) & set(got.importance["feature"].to_list())
    # with a user rating twice, the columns are there (and named in the importance rows)
    shared = [f"u{i // 2}" for i in range(n)]
    got = crossfit_tables(ModelingData(names, ids, X, y, user_ids=tuple(shared)), "ordinal_logit", 5)
    assert set(USER_COLUMNS) <= set(got.importance["feature"].to_list())


def _r_gain(generosity_sd: float, seed: int) -> float:
    """Out-of-fold r with the user columns minus without, on a heavy-use corpus (20 sessions a user, 30 % rated)."""
    params = replace(GeneratorParams(), users_per_session=1 / 20, generosity_sd=generosity_sd)
    table = simulate_sessions(10_000, seed=seed, scenario="random", rated_fraction=0.3, params=params)
    lab = np.asarray(table.rated, dtype=bool)
    y = stars_to_label(np.asarray(table.label, dtype=np.float64))[lab]
    X, Xu = feature_matrix(table, lab), feature_matrix(table, ~lab)
    users = ur.user_ratings(np.asarray(table.user_id).tolist(), lab)
    without = crossfit_predict(X, y, Xu, "ordinal_logit", threads=1)
    with_users = crossfit_predict(X, y, Xu, "ordinal_logit", threads=1, users=users)
    return pearson(y, with_users.oof)[0] - pearson(y, without.oof)[0]


def test_user_columns_raise_the_out_of_fold_r_where_the_generator_draws_generosity():
    """With generosity (sd 0.35 stars) a user's other ratings predict the next one; without it they barely do."""
    with_generosity = np.mean([_r_gain(0.35, seed) for seed in (0, 1)])
    without_generosity = np.mean([_r_gain(0.0, seed) for seed in (0, 1)])
    assert with_generosity > 0.015
    assert abs(without_generosity) < 0.01
    assert with_generosity > without_generosity + 0.01


def test_the_user_features_scenario_scores_every_method_clustered_with_the_user_columns_on():
    from pulse_pipeline.estimates.methods import Method
    from pulse_pipeline.studies.coverage import SCENARIOS, TARGETS, replicate_user_features

    rows = replicate_user_features(5)
    assert [r.method for r in rows] == list(Method) and {r.scenario for r in rows} == {"user_features"}
    assert SCENARIOS["user_features"] is replicate_user_features and "user_features" in TARGETS


def test_a_kept_fit_predicts_unrated_sessions_with_the_user_columns_as_the_cross_fit_did():
    """``reuse.KeptFit`` keeps each fold's user table, so a later run predicts a session as the fit did."""
    from datetime import UTC, datetime

    import polars as pl

    from pulse_pipeline.modeling.reuse import keep_fit

    rng = np.random.default_rng(8)
    n = 80
    X = rng.normal(size=(n, 3))
    users = [f"u{i % 10}" for i in range(n)]
    taste = np.array([i % 10 for i in range(n)]) / 5
    y = np.where(rng.random(n) < 0.7, np.clip(np.round(2 + X[:, 0] + taste + rng.normal(size=n)), 1, 5), np.nan)
    data = ModelingData(("a", "b", "c"), np.array([f"s{i:03d}" for i in range(n)]), X, y, user_ids=tuple(users))
    fitted = crossfit_tables(data, "ordinal_logit", 5)
    assert fitted.fit.user_folds  # the fit read the user columns
    rated = fitted.predictions.filter(pl.col("labeled")).select("session_id", "label_stars", "fold")
    kept = keep_fit("f", datetime.now(UTC), "k", fitted.fit, data, rated.with_columns(input=pl.lit("x")))
    unrated = np.flatnonzero(~data.labeled)
    P = kept.predict_folds(X[unrated], None, [users[i] for i in unrated])
    np.testing.assert_allclose(P.mean(axis=0), fitted.fit.unlabeled, rtol=1e-12)
    # a rated session's kept fold reproduces its out-of-fold prediction too
    rated_rows = np.flatnonzero(data.labeled)
    P_rated = kept.predict_folds(X[rated_rows], None, [users[i] for i in rated_rows])
    np.testing.assert_allclose(P_rated[fitted.fit.fold, np.arange(rated_rows.size)], fitted.fit.oof, rtol=1e-12)
