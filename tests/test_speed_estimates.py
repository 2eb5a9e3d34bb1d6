"""The estimates stage's faster paths give the numbers the slower ones gave."""

import numpy as np
from sklearn.metrics import roc_auc_score

from pulse_pipeline.stats.aipw import propensity_auc


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
