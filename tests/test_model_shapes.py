"""Small samples that hold up (issue 37, item 1): the shapes the models choose with a few hundred ratings.

- the text model's shape: the word block alone below ``text.WORDS_ALONE_BELOW`` ratings, every block from there;
- the text score as a tabular column: ignored below ``cv.TEXT_COLUMN_MIN_LABELS`` ratings;
- the stack's weights, shrunk toward an equal blend by a strength its inner folds choose;
- the obvious baselines reachable by the choice: the VADER ridge (family ``sentiment``) and the plain average of it
  and the word ridge (the stack's ``baseline`` candidate).

Values are worked out independently: a word-only ridge by plain scikit-learn calls, the sentiment family against a
scikit-learn pipeline written out here, weights of exchangeable members against the equal blend they should
approach, and the chosen model's r against a by-hand ridge on the signal columns.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler, normalize

from pulse_pipeline.modeling import text as text_model
from pulse_pipeline.modeling.comparison import compare_models
from pulse_pipeline.modeling.crossfit import choose_family, cross_validate, oof_violations
from pulse_pipeline.modeling.cv import FoldPredictions, outer_folds
from pulse_pipeline.modeling.data import ModelingData
from pulse_pipeline.modeling.families import SENTIMENT, SENTIMENT_COLUMNS, family_columns
from pulse_pipeline.modeling.stack import (
    BASELINE,
    STACK,
    blend,
    cross_validate_keeping,
    crossfit_from_fits,
    nnls_weights,
    stack_crossfit_predict,
)
from pulse_pipeline.modeling.text import TextFeature, nested_text_scores, text_score_violations

NO_JUDGE = pl.DataFrame(schema={"model": pl.String, "n": pl.Int64, "mse": float, "mae": float, "pearson": float})


def word_and_noise_blocks(n: int, seed: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """A text matrix of two blocks, each row of each block of norm 1 as in ``text.py``: 40 "word" columns, two of
    which follow the label, and 60 columns of pure noise at twice the weight (standing in for the char and
    last-message blocks, thousands of columns that a few hundred labels cannot sort out); the labels; the word
    columns."""
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 6, n).astype(float)
    words = (rng.random((n, 40)) < 0.1).astype(float)
    words[:, 0] = (y >= 4) & (rng.random(n) < 0.6)
    words[:, 1] = (y <= 2) & (rng.random(n) < 0.6)
    noise = (rng.random((n, 60)) < 0.2).astype(float)
    return sp.csr_matrix(np.hstack([normalize(words), 2.0 * normalize(noise)])), y, np.arange(40)


def test_the_text_model_keeps_the_word_block_alone_when_the_other_blocks_are_noise():
    Z, y, words = word_and_noise_blocks(200, seed=1)
    folds = nested_text_scores(Z, y, Z[:0], k=5, seed=42, word_columns=words)
    assert [f.shape for f in folds] == ["words"] * 5
    Zw = Z[:, words]
    for fold, (train, test) in zip(folds, KFold(5, shuffle=True, random_state=42).split(Z), strict=True):
        # the chosen ridge is the plain word ridge (scikit-learn on the word columns alone), inner and outer
        assert np.allclose(fold.held_out_scores, Ridge(alpha=1.0).fit(Zw[train], y[train]).predict(Zw[test]))
        inner_folds = KFold(5, shuffle=True, random_state=42)
        inner = cross_val_predict(Ridge(alpha=1.0), Zw[train], y[train], cv=inner_folds)
        assert np.allclose(fold.train_scores, inner)
        # the kept ridge predicts a full row (every block) as the word block alone
        assert np.allclose(fold.outer_ridge.predict(Z[test]), fold.held_out_scores)
    assert text_score_violations(folds) == 0
    # where the words are all there is, every fold keeps every block (the one shape)
    assert {f.shape for f in nested_text_scores(Z, y, Z[:0], k=5, seed=42)} == {"all"}


def test_the_text_model_reads_every_block_from_words_alone_below_labels_on(monkeypatch):
    Z, y, words = word_and_noise_blocks(200, seed=1)
    monkeypatch.setattr(text_model, "WORDS_ALONE_BELOW", 100)  # as if 200 labels were many
    folds = nested_text_scores(Z, y, Z[:0], k=5, seed=42, word_columns=words)
    assert {f.shape for f in folds} == {"all"}
    for fold, (train, test) in zip(folds, KFold(5, shuffle=True, random_state=42).split(Z), strict=True):
        assert np.allclose(fold.held_out_scores, Ridge(alpha=1.0).fit(Z[train], y[train]).predict(Z[test]))


def test_a_text_column_of_pure_noise_is_ignored_by_the_tabular_families_with_few_labels():
    rng = np.random.default_rng(3)
    n = 200
    X = rng.normal(size=(n, 6))
    y = np.clip(np.round(3 + X[:, 0] + 0.5 * rng.normal(size=n)), 1, 5)
    noise_text = TextFeature(sp.csr_matrix(rng.random((n, 50)) < 0.1, dtype=np.float32), sp.csr_matrix((0, 50)))
    for family in ("ordinal_logit", "random_forest"):
        without = cross_validate(X, y, family, seeds=(42,))
        with_text = cross_validate(X, y, family, seeds=(42,), text=noise_text)
        assert np.allclose(with_text.oof, without.oof, rtol=1e-12, atol=1e-12)


def exchangeable_fits(n: int, members: int, seed: int):
    """Level-one and out-of-fold predictions of ``members`` families that are each the label plus independent noise
    of sd 2 (equally good, equally wrong: the best blend is the equal one), on 5 folds."""
    rng = np.random.default_rng(seed)
    y = rng.normal(3.0, 1.0, size=n)
    folds = outer_folds(y, 5, 42, None)
    fits = []
    for m in range(members):
        inner = np.full((5, n), np.nan)
        for k, fold in enumerate(folds):
            inner[k, fold.train] = y[fold.train] + rng.normal(scale=2.0, size=fold.train.size)
        oof = y + rng.normal(scale=2.0, size=n)
        fits.append(FoldPredictions(f"f{m}", oof, inner, (), ()))
    return y, folds, fits


def test_the_stacks_weights_at_200_labels_are_shrunk_toward_equal_and_stable_across_folds():
    y, folds, fits = exchangeable_fits(200, 4, seed=4)
    stack = blend(fits, y, folds)
    # NNLS on the same rows, fold by fold: the weights that swing
    nnls = np.array(
        [
            nnls_weights(np.column_stack([f.inner[k, fold.train] for f in fits]), y[fold.train])[1]
            for k, fold in enumerate(folds)
        ]
    )
    assert nnls.std(axis=0).max() > 0.03  # NNLS's weights move by a few hundredths fold to fold
    assert stack.weights.std(axis=0).max() < 0.01  # the shrunk blend's hardly move
    # and each fold's weights are near-equal: within 10 % of their fold's mean weight
    share = stack.weights / stack.weights.mean(axis=1, keepdims=True)
    assert np.abs(share - 1.0).max() < 0.1
    assert all(how != "nnls" for how in stack.shrinkage)


def test_the_stack_still_drops_a_useless_member():
    """A member as loud as the others but with no signal: the equal blend would give it a third; the inner folds
    choose a mild shrinkage that keeps it small."""
    y, folds, fits = exchangeable_fits(400, 2, seed=5)
    rng = np.random.default_rng(6)
    noise = FoldPredictions("noise", rng.normal(3, 4, 400), rng.normal(3, 4, (5, 400)), (), ())
    stack = blend([*fits, noise], y, folds)
    assert np.all(stack.weights[:, 2] < 0.5 * stack.weights[:, :2].mean(axis=1))
    assert "equal" not in stack.shrinkage


def sentiment_data(n_all: int, n_rated: int, seed: int) -> tuple[ModelingData, np.ndarray]:
    """Sessions whose rating follows the VADER columns linearly (spread over five of them) and 30 noise columns;
    returns the data and the signal columns' indices."""
    rng = np.random.default_rng(seed)
    names = (*SENTIMENT_COLUMNS, *(f"noise_{i}" for i in range(30)))
    X = rng.normal(size=(n_all, len(names)))
    signal = np.arange(5)
    latent = X[:, signal].sum(axis=1) * 0.25 + rng.normal(scale=0.9, size=n_all)
    y = np.clip(np.round(3 + latent), 1, 5)
    y[n_rated:] = np.nan
    ids = np.array([f"s{i:04d}" for i in range(n_all)])
    return ModelingData(names, ids, X, y), signal


def test_the_sentiment_family_is_a_ridge_on_the_sentiment_columns_alone():
    data, _ = sentiment_data(300, 200, seed=7)
    columns = family_columns(data.feature_names)
    assert list(columns) == [SENTIMENT] and np.array_equal(columns[SENTIMENT], np.arange(len(SENTIMENT_COLUMNS)))
    X, y = data.X[data.labeled], data.y[data.labeled]
    result = cross_validate(X, y, SENTIMENT, seeds=(42,), columns=columns)
    by_hand = cross_val_predict(
        make_pipeline(StandardScaler(), Ridge(alpha=1.0)),
        X[:, : len(SENTIMENT_COLUMNS)],
        y,
        cv=KFold(5, shuffle=True, random_state=42),
    )
    assert np.allclose(result.oof, by_hand)
    with pytest.raises(ValueError, match="needs its columns"):
        cross_validate(X, y, SENTIMENT, seeds=(42,))


def test_the_chosen_model_is_not_below_the_best_baseline_where_a_baseline_is_best():
    """At ~230 ratings where a ridge on the VADER columns is the right model, the pipeline's choice reaches its r
    (computed by hand here with the same folds) within 0.02."""
    data, _ = sentiment_data(400, 230, seed=8)
    families = ["ordinal_logit", "random_forest", "lightgbm", SENTIMENT, STACK]
    comparison = compare_models(data, NO_JUDGE, families, (42, 43, 44), 5, "pearson")
    chosen = {r.model: r.mean for r in comparison.rows if r.chosen and r.metric == "pearson"}
    (chosen_r,) = chosen.values()
    X, y = data.X[data.labeled], data.y[data.labeled]
    baseline = []
    for seed in (42, 43, 44):
        f = cross_val_predict(
            make_pipeline(StandardScaler(), Ridge(alpha=1.0)),
            X[:, : len(SENTIMENT_COLUMNS)],
            y,
            cv=KFold(5, shuffle=True, random_state=seed),
        )
        baseline.append(np.corrcoef(y, f)[0, 1])
    assert chosen_r >= float(np.mean(baseline)) - 0.02


def test_the_stack_with_the_baselines_stays_exact():
    data, _ = sentiment_data(260, 200, seed=9)
    rng = np.random.default_rng(9)
    words = sp.csr_matrix((rng.random((260, 60)) < 0.1).astype(np.float32))
    text = TextFeature(words[:200], words[200:], word_columns=np.arange(30))
    X = data.X
    fit, stack = stack_crossfit_predict(
        X[:200],
        data.y[:200],
        X[200:],
        ["random_forest", "text", SENTIMENT],
        text=text,
        columns=family_columns(data.feature_names),
    )
    assert oof_violations(fit.fold, fit.train_index_by_fold) == 0
    assert text_score_violations(fit.text_folds) == 0
    assert len(stack.shrinkage) == 5 and np.all(stack.weights >= 0)
    for k, fold in enumerate(outer_folds(data.y[:200], 5, 42, text)):
        A = np.column_stack([X[:200][fold.test], fold.text.held_out_scores])
        assert np.allclose(fit.models[k].predict(A), fit.oof[fold.test])


def test_the_baseline_is_the_plain_average_of_the_text_and_sentiment_families_and_stays_exact():
    """Where the words and the VADER columns each carry half of the signal, their plain average is a candidate of
    its own: its out-of-fold predictions are the two families' averaged (by hand), the chosen model is not below
    it, and its cross-fit (from the kept fits, or fitted anew) passes the out-of-fold audit."""
    rng = np.random.default_rng(10)
    n_all, n_rated = 400, 230
    data, _ = sentiment_data(n_all, n_rated, seed=10)
    y = data.y.copy()
    words = (rng.random((n_all, 40)) < 0.1).astype(np.float32)
    stars = np.nan_to_num(y, nan=3.0)
    words[:, 0] = (stars >= 4) & (rng.random(n_all) < 0.5)
    words[:, 1] = (stars <= 2) & (rng.random(n_all) < 0.5)
    Z = sp.csr_matrix(words)
    rated = ~np.isnan(y)
    text = TextFeature(Z[rated], Z[~rated])
    columns = family_columns(data.feature_names)
    X = data.X
    results, kept = cross_validate_keeping(
        X[rated],
        y[rated],
        ["random_forest", "text", SENTIMENT],
        seeds=(42, 43),
        text=text,
        columns=columns,
        keep_seed=42,
        baseline=True,
    )
    by = {r.family: r for r in results}
    assert list(by) == ["random_forest", "text", SENTIMENT, STACK, BASELINE, "constant"]
    assert np.allclose(by[BASELINE].oof, (by["text"].oof + by[SENTIMENT].oof) / 2)
    chosen = choose_family([r for r in results if r.family != "constant"])
    assert chosen.metric("pearson").mean >= by[BASELINE].metric("pearson").mean
    kept_fit = crossfit_from_fits(kept, X[rated], y[rated], X[~rated], BASELINE, text=text)
    fresh, _ = stack_crossfit_predict(X[rated], y[rated], X[~rated], [], text=text, columns=columns, family=BASELINE)
    for fit in (kept_fit, fresh):
        assert fit.family == BASELINE
        assert oof_violations(fit.fold, fit.train_index_by_fold) == 0
        assert np.allclose(fit.oof, by[BASELINE].oof)
    assert np.allclose(kept_fit.unlabeled, fresh.unlabeled)
