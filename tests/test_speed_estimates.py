"""The estimates stage's faster paths give the numbers the slower ones gave."""

from collections import OrderedDict

import numpy as np
from sklearn.metrics import roc_auc_score

from pulse_pipeline.estimates import effects
from pulse_pipeline.stats import cluster, naive
from pulse_pipeline.stats.aipw import crossfit_propensity, propensity_auc


def test_propensity_auc_is_the_mann_whitney_statistic():
    # by hand: rated 0.9 and 0.4, unrated 0.4 and 0.1; of the 4 (rated, unrated) pairs the rated one is higher in 3
    # and tied in 1 (counted one half): 3.5 / 4
    assert propensity_auc([True, True, False, False], [0.9, 0.4, 0.4, 0.1]) == 3.5 / 4
    assert np.isnan(propensity_auc([True, False, False], [0.5, 0.2, 0.1]))  # one rated session: no AUC


def test_propensity_auc_equals_scikit_learns():
    rng = np.random.default_rng(0)
    for size in (10, 1_000, 20_000):
        rated = rng.random(size) < 0.2
        continuous = rng.random(size)
        tied = np.round(continuous, 1)  # many ties
        for p in (continuous, tied):
            assert abs(propensity_auc(rated, p) - roc_auc_score(rated, p)) < 1e-12


def test_an_arm_is_cross_fit_once_per_process(monkeypatch):
    real = effects.crossfit_propensity_fit
    calls = []

    def counted(X, rated, seed, workers):
        calls.append(seed)
        return real(X, rated, seed=seed, workers=workers)

    monkeypatch.setattr(effects, "crossfit_propensity_fit", counted)
    monkeypatch.setattr(effects, "_FITTED", OrderedDict())
    rng = np.random.default_rng(1)
    X, rated = rng.normal(size=(300, 3)), rng.random(300) < 0.3
    first = effects._crossfit_once(X, rated, 42)
    first[0][:] = -1  # a caller changing its copy changes nothing kept
    first[1][:] = -1
    again = effects._crossfit_once(X.copy(), rated.copy(), 42)
    assert calls == [42]
    fit = real(X, rated, seed=42)
    assert np.array_equal(again[0], fit.propensity) and np.array_equal(again[1], fit.weighting())
    effects._crossfit_once(X, ~rated, 42)  # other labels, or another seed: fit again
    effects._crossfit_once(X, rated, 43)
    assert calls == [42, 42, 43]


def test_propensity_folds_fit_in_threads_give_the_propensities_fit_one_after_another():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2_000, 6))
    rated = rng.random(2_000) < 1 / (1 + np.exp(-(X[:, 0] - 2)))  # rating follows the first feature
    one = crossfit_propensity(X, rated, seed=7, workers=1)
    assert np.array_equal(crossfit_propensity(X, rated, seed=7, workers=2), one)
    assert propensity_auc(rated, one) > 0.7  # the folds were fit (not the rated share everywhere)


def test_permutation_chunks_counted_in_threads_give_the_p_value_counted_in_one():
    rng = np.random.default_rng(5)
    y_t, y_c = rng.normal(0.1, 1, 3_000), rng.normal(0, 1, 2_000)  # chunks of 256 rows of 5 000 keys: 40 chunks
    one = naive.permutation_pvalue(y_t, y_c, n_permutations=10_000, seed=3)
    assert naive.permutation_pvalue(y_t, y_c, n_permutations=10_000, seed=3, workers=2) == one
    assert 0.0001 < one < 0.05  # a shift of 0.1 sd on these sizes: rarely matched by a permutation (z ~ 3.5)
    g_t, g_c = np.arange(3_000) // 3, 5_000 + np.arange(2_000) // 2  # users of 3 and 2 ratings
    clustered = cluster.cluster_permutation_pvalue(y_t, g_t, y_c, g_c, n_permutations=2_000, seed=4)
    assert cluster.cluster_permutation_pvalue(y_t, g_t, y_c, g_c, n_permutations=2_000, seed=4, workers=3) == clustered
