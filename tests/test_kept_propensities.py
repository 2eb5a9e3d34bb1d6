"""AIPW's propensity fits kept across runs: reused only where every session's propensity still comes from a model
that never saw it, fitted again by the rules of ``estimates.kept_propensities``."""

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pulse_pipeline.estimates.effects import Settings
from pulse_pipeline.estimates.experiment_effects import experiment_effect_rows
from pulse_pipeline.estimates.kept_propensities import PropensityStore
from pulse_pipeline.stats.aipw import crossfit_propensity, crossfit_propensity_fit

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
SEED = 42
COLUMNS = ("messages", "score", "fraction")


def _arm(n: int, seed: int, start: int = 0):
    """n sessions: a message count (count-like), a normal feature and a fraction in [0, 1] (not count-like);
    chattier sessions are rated more often."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.poisson(4, n), rng.normal(size=n), rng.random(n)]).astype(float)
    rated = rng.random(n) < 1 / (1 + np.exp(-(-3.0 + 0.35 * X[:, 0] + 0.3 * X[:, 1])))
    return [f"s{i:05d}" for i in range(start, start + n)], X, rated


def _store(tmp_path, share=0.1):
    heard: list[str] = []
    return PropensityStore(tmp_path / "kept", share, heard.append), heard


def _by_hand(X_fit, rated_fit, X_now, fold_of_now):
    """The expected reuse, from scikit-learn directly: seed 42's stratified folds of the fit's sessions, one
    penalized logistic regression per fold on [X, log1p(message count)] (column 0 is the only count-like one), each
    session of the fit predicted by its fold's model at its features now, a new session (fold -1) by the mean."""
    design = lambda X: np.column_stack([X, np.log1p(X[:, 0])])  # noqa: E731
    splits = StratifiedKFold(5, shuffle=True, random_state=SEED).split(np.zeros(len(rated_fit)), rated_fit)
    models = []
    for train, _ in splits:
        model = make_pipeline(
            StandardScaler(), LogisticRegression(C=0.1, solver="newton-cholesky", tol=1e-8, max_iter=100)
        )
        models.append(model.fit(design(X_fit)[train], rated_fit[train]))
    every = np.array([m.predict_proba(design(X_now))[:, 1] for m in models])
    return np.where(fold_of_now >= 0, every[np.maximum(fold_of_now, 0), np.arange(len(X_now))], every.mean(axis=0))


def _folds_of(ids_fit, rated_fit, ids_now):
    fold_of = {}
    splits = StratifiedKFold(5, shuffle=True, random_state=SEED).split(np.zeros(len(rated_fit)), rated_fit)
    for k, (_, test) in enumerate(splits):
        fold_of.update({ids_fit[i]: k for i in test})
    return np.array([fold_of.get(s, -1) for s in ids_now])


def test_a_first_fit_is_the_cross_fit_and_the_same_day_reuses_it(tmp_path):
    store, heard = _store(tmp_path)
    ids, X, rated = _arm(3000, 1)
    first = store.propensities("e/t", ids, X, rated, COLUMNS, seed=SEED, now=T0)[0]
    assert np.array_equal(first, crossfit_propensity(X, rated, seed=SEED))
    assert "no kept fit" in heard[-1] and len(list((tmp_path / "kept").glob("*.joblib"))) == 1
    again = store.propensities("e/t", ids, X, rated, COLUMNS, seed=SEED, now=T0 + timedelta(hours=3))[0]
    assert "reused" in heard[-1]
    assert np.array_equal(again, first)  # the same models on the same rows
    # another arm never reads this arm's fit
    store.propensities("e/c", ids, X, rated, COLUMNS, seed=SEED, now=T0)
    assert "no kept fit" in heard[-1]


def test_a_small_drop_keeps_each_sessions_fold_model_and_new_sessions_get_the_mean(tmp_path):
    store, heard = _store(tmp_path)
    ids, X, rated = _arm(3000, 2)
    store.propensities("e/t", ids, X, rated, COLUMNS, seed=SEED, now=T0)
    new_ids, new_X, new_rated = _arm(100, 3, start=3000)
    X_now, rated_now = X.copy(), rated.copy()
    X_now[:50, 1] += 1.0  # later drops changed 50 sessions' features ...
    rated_now[50:90] = ~rated_now[50:90]  # ... and 40 sessions' rated status
    ids_now = ids[1:] + new_ids  # one session is gone (history reads only sessions with a start day)
    X_now, rated_now = np.vstack([X_now[1:], new_X]), np.r_[rated_now[1:], new_rated]
    got = store.propensities("e/t", ids_now, X_now, rated_now, COLUMNS, seed=SEED, now=T0 + timedelta(hours=1))[0]
    assert "reused (140 sessions new or changed since)" in heard[-1]
    expected = _by_hand(X, rated, X_now, _folds_of(ids, rated, ids_now))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)
    # and it is not the cross-fit of today's sessions, which a rebuild would make
    assert np.abs(got - crossfit_propensity(X_now, rated_now, seed=SEED)).max() > 1e-3


@pytest.mark.parametrize(
    "change", ["next day", "too many new", "count-like column", "renamed column", "share 0", "unreadable"]
)
def test_the_arm_is_fitted_again_when_the_rules_say(tmp_path, change):
    store, heard = _store(tmp_path, share=0.0 if change == "share 0" else 0.1)
    ids, X, rated = _arm(2000, 4)
    store.propensities("e/t", ids, X, rated, COLUMNS, seed=SEED, now=T0)
    new_ids, new_X, new_rated = _arm(300 if change == "too many new" else 20, 5, start=2000)
    if change == "count-like column":
        new_X[0, 2] = 3.0  # the fraction column now exceeds 1: it becomes count-like, the design changes
    if change == "unreadable":
        next((tmp_path / "kept").glob("*.joblib")).write_bytes(b"cut short")
    later = T0 + timedelta(days=1 if change == "next day" else 0, hours=1)
    ids_now, X_now, rated_now = ids + new_ids, np.vstack([X, new_X]), np.r_[rated, new_rated]
    columns = ("messages", "score", "share") if change == "renamed column" else COLUMNS
    got = store.propensities("e/t", ids_now, X_now, rated_now, columns, seed=SEED, now=later)[0]
    np.testing.assert_array_equal(got, crossfit_propensity(X_now, rated_now, seed=SEED))
    reason = {
        "next day": "the first run of a day fits again",
        "too many new": "300 sessions added or changed their rated status since the kept fit of 2000",
        "count-like column": "feature columns or library version changed",
        "renamed column": "feature columns or library version changed",
        "share 0": "PULSE_MODEL_REFIT_SHARE is 0",
        "unreadable": "no kept fit",
    }[change]
    if change == "share 0":
        assert heard == [] and not (tmp_path / "kept").exists()  # nothing kept, nothing said: as before
    else:
        assert reason in heard[-1]
    if change == "unreadable":
        assert "could not be read" in heard[-2]


def test_effect_rows_with_kept_fits_are_todays_rows_on_the_first_run(tmp_path):
    rng = np.random.default_rng(6)
    n = 2400
    feature = rng.poisson(3, n).astype(float)
    labeled = rng.random(n) < 0.1 + 0.03 * feature
    label = np.clip(0.6 + 0.05 * feature + 0.2 * rng.normal(size=n), 0, 1)
    frame = pl.DataFrame(
        {
            "session_id": [f"s{i}" for i in range(n)],
            "experiment": "e",
            "variant": np.where(rng.random(n) < 0.5, "t", "c"),
            "labeled": labeled,
            "label": np.where(labeled, label, None),
            "prediction": np.clip(0.6 + 0.05 * feature, 0, 1),
            "feature": feature,
        }
    )
    fast = Settings(n_resamples=200, n_permutations=200)
    store, heard = _store(tmp_path)
    plain = experiment_effect_rows(frame, {"e": "c"}, fast)
    kept = experiment_effect_rows(frame, {"e": "c"}, Settings(n_resamples=200, n_permutations=200, kept=store))
    assert kept == plain
    assert len(list((tmp_path / "kept").glob("*.joblib"))) == 2  # one per arm
    assert sorted(h.split(":")[0] for h in heard) == ["e/c", "e/t"]


def test_a_kept_fit_keeps_its_choice_of_weights(tmp_path):
    # chattier sessions rated more: the model's ranking is kept (recalibrated: expit(a + s logit p), s > 0)
    store, heard = _store(tmp_path)
    ids, X, rated = _arm(3000, 1)
    model, weighting = store.propensities("e/t", ids, X, rated, COLUMNS, seed=SEED, now=T0)
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    assert np.ptp(weighting) > 0 and np.corrcoef(logit(weighting), logit(model))[0, 1] > 1 - 1e-9
    # an arm rated at random: the model loses to the rated fraction out of fold, every session weighs the same, and
    # the reused fit (new sessions too) says the same
    rated_at_random = np.random.default_rng(10).random(3000) < 0.06
    assert not crossfit_propensity_fit(X, rated_at_random, seed=SEED).model_helps  # this draw: as the rule says
    model, weighting = store.propensities("e/r", ids, X, rated_at_random, COLUMNS, seed=SEED, now=T0)
    assert np.all(weighting == rated_at_random.mean()) and np.ptp(model) > 0
    new_ids, new_X, _ = _arm(20, 3, start=3000)
    later = T0 + timedelta(hours=1)
    X_now, rated_now = np.vstack([X, new_X]), np.r_[rated_at_random, np.zeros(20, bool)]
    _, weighting = store.propensities("e/r", ids + new_ids, X_now, rated_now, COLUMNS, seed=SEED, now=later)
    assert "reused" in heard[-1] and np.all(weighting == rated_at_random.mean())
