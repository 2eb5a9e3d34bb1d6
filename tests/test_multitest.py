"""Holm and Benjamini-Hochberg adjusted p-values against statsmodels and a case worked by hand."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from pulse_pipeline.stats.multitest import benjamini_hochberg, holm

VECTORS = [
    [0.01, 0.04, 0.03, 0.005],
    [0.2, 0.2, 0.01, 0.01, 0.5, 1.0, 0.0],  # ties, an exact 0 and an exact 1
    [0.04, 0.04, 0.04, 0.04],  # all tied
    [0.9],
    list(np.random.default_rng(0).uniform(size=50)),
    list(np.random.default_rng(1).uniform(size=200) ** 3),  # many small p-values: adjustments clip and cross
]


def _statsmodels(p, method: str) -> np.ndarray:
    """statsmodels on the non-NaN entries, NaN kept in place."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    keep = ~np.isnan(p)
    if keep.any():
        out[keep] = multipletests(p[keep], method=method)[1]
    return out


@pytest.mark.parametrize("p", VECTORS)
@pytest.mark.parametrize(("ours", "method"), [(holm, "holm"), (benjamini_hochberg, "fdr_bh")])
def test_matches_statsmodels(p, ours, method):
    np.testing.assert_allclose(ours(p), _statsmodels(p, method), rtol=0, atol=1e-15)


@pytest.mark.parametrize(("ours", "method"), [(holm, "holm"), (benjamini_hochberg, "fdr_bh")])
def test_nan_stays_nan_and_is_not_counted(ours, method):
    p = [0.01, np.nan, 0.03, 0.02, np.nan]
    adj = ours(p)
    assert np.isnan(adj[[1, 4]]).all()
    np.testing.assert_allclose(adj, _statsmodels(p, method), rtol=0, atol=1e-15)
    # m = 3, not 5: the same as adjusting the three numbers alone
    np.testing.assert_allclose(adj[[0, 2, 3]], ours([0.01, 0.03, 0.02]), rtol=0, atol=0)


def test_worked_by_hand():
    # p = [0.01, 0.04, 0.03, 0.005], m = 4; sorted: 0.005 (#3), 0.01 (#0), 0.03 (#2), 0.04 (#1).
    # Holm: 4*0.005 = 0.02, 3*0.01 = 0.03, 2*0.03 = 0.06, 1*0.04 = 0.04 -> running max 0.02, 0.03, 0.06, 0.06.
    # BH:   4/1*0.005 = 0.02, 4/2*0.01 = 0.02, 4/3*0.03 = 0.04, 4/4*0.04 = 0.04 -> running min from the top: same.
    p = [0.01, 0.04, 0.03, 0.005]
    np.testing.assert_allclose(holm(p), [0.03, 0.06, 0.06, 0.02], rtol=0, atol=1e-15)
    np.testing.assert_allclose(benjamini_hochberg(p), [0.02, 0.04, 0.04, 0.02], rtol=0, atol=1e-15)
    # clipping at 1: Holm 3*0.5 = 1.5 -> 1
    assert holm([0.5, 0.6, 0.7]).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("ours", [holm, benjamini_hochberg])
def test_monotone_and_at_least_raw(ours):
    p = np.random.default_rng(2).uniform(size=100) ** 2
    adj = ours(p)
    order = np.argsort(p)
    assert (np.diff(adj[order]) >= 0).all()
    assert (adj >= p).all() and (adj <= 1).all()


@pytest.mark.parametrize("ours", [holm, benjamini_hochberg])
def test_edge_inputs(ours):
    assert ours([]).shape == (0,)
    assert np.isnan(ours([np.nan, np.nan])).all()
    for bad in ([0.5, 1.2], [-0.01], [np.inf]):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            ours(bad)
