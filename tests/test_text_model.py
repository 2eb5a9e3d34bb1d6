"""The text model (modeling/text.py) and its nested cross-fitting through crossfit.py.

The corpus is made here: sessions whose user messages carry the rating ("thanks great" for 4-5 stars, "broken
useless" for 1-2) among neutral words, so the words predict the stars and the tabular features (pure noise) do not.
Expected values are recomputed with plain scikit-learn calls (TfidfVectorizer, Ridge, KFold, cross_val_predict).
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
from scipy.stats import pearsonr
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold, cross_val_predict

from pulse_pipeline.features.redact import redact
from pulse_pipeline.features.user_text import build_user_text, load_user_messages
from pulse_pipeline.modeling import cv
from pulse_pipeline.modeling.crossfit import cross_validate, crossfit_predict, insample_predict, oof_violations
from pulse_pipeline.modeling.data import ModelingData
from pulse_pipeline.modeling.predictions import audit_out_of_fold, crossfit_tables
from pulse_pipeline.modeling.text import (
    VOCAB_SESSIONS,
    FoldTextScores,
    TextFeature,
    nested_text_scores,
    session_texts,
    text_score_violations,
    top_terms,
    transform,
    vectorize,
    vocabulary_rows,
)

from .helpers import ingest_paths

GOOD = ("thanks great", "works perfectly now", "great job thank you", "awesome that fixed it")
BAD = ("broken useless", "still broken", "useless it does not work", "wrong again give up")
NEUTRAL = ("please fix the failing test", "can you add a flag", "run the build", "look at the parser")
SECRET = "ghp_" + "Zq9x" * 9


def corpus(n: int = 120, n_rated: int = 90, seed: int = 0):
    """Session ids, their messages, labels (NaN for the unrated tail) and 3 noise features."""
    rng = np.random.default_rng(seed)
    stars = rng.integers(1, 6, n).astype(float)
    messages = {}
    for i in range(n):
        words = GOOD if stars[i] >= 4 else BAD if stars[i] <= 2 else NEUTRAL
        messages[f"s{i:03d}"] = [NEUTRAL[rng.integers(4)], words[rng.integers(4)]]
    # as ``features.user_text`` holds it: redacted (``test_secrets_never_reach_the_text_model`` reads it there)
    messages["s000"].append(redact(f"my token is {SECRET} and mail me at jane.doe@example.com"))
    y = np.where(np.arange(n) < n_rated, stars, np.nan)
    return sorted(messages), messages, y, rng.normal(size=(n, 3))


@pytest.fixture(scope="module")
def texts():
    ids, messages, y, X = corpus()
    matrix = vectorize(ids, messages)
    rated = ~np.isnan(y)
    feature = TextFeature(matrix.Z[rated], matrix.Z[~rated])
    return ids, messages, y, X, matrix, feature


def hand_matrix(ids, messages) -> sp.csr_matrix:
    """The three TF-IDF blocks of text.py, with plain scikit-learn calls on the texts."""
    joined = ["\n".join(messages[s]) for s in ids]
    last = [messages[s][-1] for s in ids]
    opts = {"sublinear_tf": True, "min_df": 2}
    word = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), **opts).fit_transform(joined)
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), **opts).fit_transform([t[:1000] for t in joined])
    last_block = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), **opts).fit_transform(last) * 0.5
    return sp.hstack([word, char, last_block], format="csr")


def test_the_matrix_is_three_tfidf_blocks_of_redacted_text(texts):
    ids, messages, _, _, matrix, _ = texts
    expected = hand_matrix(ids, messages)
    assert matrix.Z.shape == expected.shape == (120, len(matrix.terms))
    assert np.allclose(matrix.Z.toarray(), expected.toarray(), atol=1e-6)  # float32 vs float64
    assert {b for b, _ in matrix.terms} == {"word", "char", "last"}


def test_secrets_never_reach_the_text_model(wh, tmp_path):
    """The text model reads users' messages from ``features.user_text`` (``load_user_messages``), where they are
    redacted: a token and an email address pasted by users never become terms. Each is in two sessions, so
    min_df=2 alone would keep its words: redaction, not pruning, keeps them out."""
    pasted = f"my token is {SECRET} and mail me at jane.doe@example.com"
    sessions = [("s1", ["please fix the parser", pasted]), ("s2", [pasted, "thanks great"]), ("s3", ["run it"])]
    events = [
        {
            "session_id": sid,
            "events": [{"id": str(i), "source": "user", "type": "message", "text": t} for i, t in enumerate(said)],
        }
        for sid, said in sessions
    ]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    ingest_paths(wh, tmp_path / "d.jsonl")
    build_user_text(wh)
    ids = [sid for sid, _ in sessions]
    m = vectorize(ids, load_user_messages(wh))
    assert not any("zq9" in t or "jane" in t or "example.com" in t for _, t in m.terms)
    assert ("word", "redacted") in m.terms
    terms = top_terms(m, m.Z, np.array([2.0, 4.0, 3.0]), n=500)
    assert terms and not any("zq9" in t.term or "jane" in t.term for t in terms)


def test_text_family_out_of_fold_r_matches_sklearn_by_hand(texts):
    ids, messages, y, X, _, feature = texts
    rated = ~np.isnan(y)
    result = cross_validate(X[rated], y[rated], "text", seeds=(42,), text=feature)
    Z = hand_matrix(ids, messages)[np.flatnonzero(rated)]
    by_hand = cross_val_predict(Ridge(alpha=1.0), Z, y[rated], cv=KFold(5, shuffle=True, random_state=42))
    assert np.allclose(result.oof, by_hand, atol=5e-4)  # float32 matrix, ridge solver tolerance 1e-4
    r = pearsonr(y[rated], by_hand).statistic
    assert result.per_seed[0].pearson == pytest.approx(r, abs=1e-4)
    assert r > 0.8  # the words carry the label
    noise_only = cross_validate(X[rated], y[rated], "ordinal_logit", seeds=(42,))
    with_text = cross_validate(X[rated], y[rated], "ordinal_logit", seeds=(42,), text=feature)
    # with few labels the tabular families ignore the text score (``cv.reads_text_score``) ...
    assert rated.sum() < cv.TEXT_COLUMN_MIN_LABELS
    assert np.allclose(with_text.oof, noise_only.oof, rtol=1e-12, atol=1e-12)
    # ... and read it from TEXT_COLUMN_MIN_LABELS labels on
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cv, "TEXT_COLUMN_MIN_LABELS", 10)
        with_text = cross_validate(X[rated], y[rated], "ordinal_logit", seeds=(42,), text=feature)
    assert abs(noise_only.metric("pearson").mean) < 0.3 < 0.7 < with_text.metric("pearson").mean


def test_nested_scores_are_exact_and_computed_by_hand(texts):
    _, _, y, X, _, feature = texts
    rated = ~np.isnan(y)
    Z, yl = feature.labeled, y[rated]
    folds = nested_text_scores(Z, yl, feature.unlabeled, k=5, seed=42)
    outer = list(KFold(5, shuffle=True, random_state=42).split(np.zeros(yl.size)))
    for fold, (train, test) in zip(folds, outer, strict=True):
        assert np.array_equal(fold.train_rows, train) and np.array_equal(fold.held_out_rows, test)
        ridge = Ridge(alpha=1.0).fit(Z[train], yl[train])
        assert np.allclose(fold.held_out_scores, ridge.predict(Z[test]), atol=1e-9)
        assert np.allclose(fold.unlabeled_scores, ridge.predict(feature.unlabeled))
        inner = cross_val_predict(Ridge(alpha=1.0), Z[train], yl[train], cv=KFold(5, shuffle=True, random_state=42))
        assert np.allclose(fold.train_scores, inner)
        assert not np.isin(test, fold.labels_used).any()
    assert text_score_violations(folds) == 0
    fit = crossfit_predict(X[rated], yl, X[~rated], "hist_gbm", seed=42, text=feature)
    assert oof_violations(fit.fold, fit.train_index_by_fold) == 0
    shared = feature.scores(yl, 5, 42)  # computed once per (labels, k, seed), shared by families: the same objects
    assert len(fit.text_folds) == len(shared) and all(a is b for a, b in zip(fit.text_folds, shared, strict=True))
    assert all(np.array_equal(a.held_out_scores, b.held_out_scores) for a, b in zip(fit.text_folds, folds, strict=True))
    assert fit.unlabeled.shape == (int((~rated).sum()),) and fit.text_score.shape == yl.shape


class LeakyText(TextFeature):
    """Text scores with a planted leak: ``how="outer"`` fits the held-out rows' ridge on every label;
    ``how="inner"`` lets each training row's inner ridge see the row itself."""

    how: str = "outer"

    def scores(self, y, k, seed):
        honest = super().scores(y, k, seed)
        leaky = []
        for f in honest:
            if self.how == "outer":
                all_rows = np.arange(np.asarray(y).size)
                ridge = Ridge(alpha=1.0).fit(self.labeled, y)
                leaky.append(
                    FoldTextScores(
                        f.train_rows,
                        f.held_out_rows,
                        f.train_scores,
                        ridge.predict(self.labeled[f.held_out_rows]),
                        ridge.predict(self.unlabeled),
                        all_rows,
                        f.inner_fold,
                        f.inner_train,
                    )
                )
            else:
                leaky.append(
                    FoldTextScores(
                        f.train_rows,
                        f.held_out_rows,
                        f.train_scores,
                        f.held_out_scores,
                        f.unlabeled_scores,
                        f.outer_train,
                        f.inner_fold,
                        tuple(f.train_rows for _ in f.inner_train),
                    )
                )
        return tuple(leaky)


@pytest.mark.parametrize("family", ["text", "ordinal_logit"])
def test_a_text_score_fitted_on_all_labels_is_caught(texts, family):
    _, _, y, X, _, feature = texts
    rated = ~np.isnan(y)
    leaky = LeakyText(feature.labeled, feature.unlabeled)
    fit = crossfit_predict(X[rated], y[rated], X[~rated], family, seed=42, text=leaky)
    assert oof_violations(fit.fold, fit.train_index_by_fold) == int(rated.sum())  # every rated row


def test_an_inner_fold_that_includes_the_row_is_caught(texts):
    _, _, y, X, _, feature = texts
    rated = ~np.isnan(y)
    leaky = LeakyText(feature.labeled, feature.unlabeled)
    leaky.how = "inner"
    fit = crossfit_predict(X[rated], y[rated], X[~rated], "ordinal_logit", seed=42, text=leaky)
    # every training row of every outer fold (4/5 of the rows, 5 times) saw its own label
    assert text_score_violations(fit.text_folds) == sum(f.train_rows.size for f in fit.text_folds) == 4 * 90
    assert oof_violations(fit.fold, fit.train_index_by_fold) == 0  # the held-out rows are still clean


def test_deterministic_and_needs_text(texts):
    _, _, y, X, _, feature = texts
    rated = ~np.isnan(y)
    a = crossfit_predict(X[rated], y[rated], X[~rated], "text", seed=7, text=feature)
    b = crossfit_predict(
        X[rated], y[rated], X[~rated], "text", seed=7, text=TextFeature(feature.labeled, feature.unlabeled)
    )
    assert np.array_equal(a.oof, b.oof) and np.array_equal(a.unlabeled, b.unlabeled)
    assert np.array_equal(a.oof, a.text_score) and a.models == ()
    with pytest.raises(ValueError, match="needs the sessions' text"):
        cross_validate(X[rated], y[rated], "text")
    assert pl.Series(a.unlabeled).is_finite().all()


def test_crossfit_tables_record_the_text_path_and_the_audit_reads_it(texts):
    ids, _, y, X, matrix, _ = texts
    data = ModelingData(("a", "b", "c"), np.array(ids), X, y, matrix)
    result = crossfit_tables(data, "ordinal_logit", folds=5)
    audit = audit_out_of_fold(result.predictions, result.fold_training, result.text_fold_training)
    assert audit.passed and audit.in_sample_text_scores == 0
    # 5 outer folds x 5 inner folds; each inner fold lists its 72/5 scored rows and the others as trained
    assert result.text_fold_training.height == 5 * 5 * 72
    assert result.text_fold_training.filter(pl.col("held_out")).height == 5 * 72
    assert "text_score" in result.importance["feature"].to_list()
    assert result.text_terms.height > 0 and not result.text_terms["term"].str.contains("zq9").any()
    best_good = result.text_terms.filter(pl.col("direction") == "positive")["term"].to_list()[:20]
    assert {"great", "thanks", "perfectly", "awesome"} & set(best_good)
    # plant an inner leak: inner ridge (fold 0, inner fold 0) also trained on a row it scored
    leak = result.text_fold_training.filter(pl.col("held_out")).head(1).with_columns(held_out=pl.lit(False))
    audit = audit_out_of_fold(result.predictions, result.fold_training, pl.concat([result.text_fold_training, leak]))
    assert audit.in_sample_text_scores == 1 and not audit.passed
    # plant an outer leak: the text ridge of fold 0 saw a held-out row of fold 0
    held = result.predictions.filter(pl.col("labeled") & (pl.col("fold") == 0)).head(3)
    outer = held.select("model", pl.lit(0).alias("fold"), "session_id").cast(result.fold_training.schema)
    audit = audit_out_of_fold(result.predictions, pl.concat([result.fold_training, outer]), result.text_fold_training)
    assert audit.in_sample_predictions == 3


def test_the_text_family_has_no_feature_importance(texts):
    ids, _, y, X, matrix, _ = texts
    result = crossfit_tables(ModelingData(("a", "b", "c"), np.array(ids), X, y, matrix), "text", folds=5)
    assert result.importance.height == 0 and result.predictions.height == 120
    assert audit_out_of_fold(result.predictions, result.fold_training, result.text_fold_training).passed
    assert result.oof_pearson > 0.8


def test_the_vocabulary_sample_and_rated_only_text_give_the_same_columns(texts):
    ids, messages, y, _, matrix, _ = texts
    labeled = ~np.isnan(y)
    assert vocabulary_rows(labeled, max_sessions=1000).tolist() == list(range(120))
    # 90 rated + 10 of the 30 unrated, evenly spaced: 90, 93, ..., 119 (np.linspace(0, 29, 10) -> 0, 3, ..., 29)
    rows = vocabulary_rows(labeled, max_sessions=100)
    assert rows.tolist() == list(range(90)) + [90 + int(i) for i in np.linspace(0, 29, 10)]
    assert vocabulary_rows(labeled, max_sessions=50).tolist() == list(range(90))
    full = vectorize(ids, messages, labeled)
    rated = vectorize(ids, messages, labeled, rated_only=True)
    assert full.terms == rated.terms and rated.rows.tolist() == list(range(90))
    assert (full.Z[:90] != rated.Z).nnz == 0
    data = ModelingData(("a", "b", "c"), np.array(ids), np.zeros((120, 3)), y, rated)
    feature = data.text_feature()
    assert feature.labeled.shape[0] == 90 and feature.unlabeled.shape[0] == 0


def test_the_vocabularys_own_rows_equal_what_transform_gives_them_bit_for_bit():
    """``vectorize`` keeps the rows its fit made for the sessions the vocabulary was fitted on (every rated one) and
    transforms only the others; a kept fit transforms any session later (``reuse.py``). A session's row must be the
    same either way, bit for bit: a copied session then gets exactly its original's prediction. Here the vocabulary
    is a sample (``VOCAB_SESSIONS`` of 6 100 sessions), so the matrix holds rows of both kinds."""
    ids, messages, y, _ = corpus(n=VOCAB_SESSIONS + 100, n_rated=50, seed=3)
    labeled = ~np.isnan(y)
    matrix = vectorize(ids, messages, labeled)
    fitted_on = vocabulary_rows(labeled)
    assert fitted_on.size == VOCAB_SESSIONS and matrix.rows.tolist() == list(range(len(ids)))
    every = np.arange(len(ids))
    again = transform(matrix.vectorizers, session_texts(ids, messages), every).Z
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(matrix.Z, name), getattr(again, name)), name
    assert matrix.Z.nnz > 0


def test_in_sample_text_predictions_are_flagged_as_such(texts):
    _, _, y, X, _, feature = texts
    rated = ~np.isnan(y)
    ridge = Ridge(alpha=1.0).fit(feature.labeled, y[rated])
    fit = insample_predict(X[rated], y[rated], X[~rated], "text", text=feature)
    assert np.allclose(fit.oof, ridge.predict(feature.labeled)) and np.allclose(
        fit.unlabeled, ridge.predict(feature.unlabeled)
    )
    tabular = insample_predict(X[rated], y[rated], X[~rated], "hist_gbm", text=feature)
    assert oof_violations(tabular.fold, tabular.train_index_by_fold) == 90 and tabular.unlabeled.shape == (30,)


def test_the_estimates_in_sample_rows_use_the_text_when_text_is_the_family(texts):
    """The ``ppi_insample`` rows of the estimates stage fit the chosen family on every label with the same text the
    model stage used: with family ``text`` they are one ridge's predictions on the 0-1 scale, (stars - 1) / 4."""
    from pulse_pipeline.modeling.insample import insample_predictions

    ids, _, y, X, matrix, feature = texts
    data = ModelingData(("a", "b", "c"), np.array(ids), X, y, matrix)
    rated = ~np.isnan(y)
    ridge = Ridge(alpha=1.0).fit(feature.labeled, y[rated])
    got = insample_predictions(data, "text")
    assert len(got) == len(ids)
    assert np.allclose([got[s] for s in np.array(ids)[rated]], (ridge.predict(feature.labeled) - 1) / 4)
    assert np.allclose([got[s] for s in np.array(ids)[~rated]], (ridge.predict(feature.unlabeled) - 1) / 4)


def test_no_rated_session_gives_an_empty_rated_matrix_not_an_error(texts):
    """A warehouse with user text but no rating yet (a first drop without ratings): the rated-only matrix has no
    row and every column (scikit-learn refuses to transform zero documents, which failed the cv_metrics asset)."""
    ids, messages, *_ = texts
    full = vectorize(ids, messages)
    none_rated = vectorize(ids, messages, np.zeros(len(ids), dtype=bool), rated_only=True)
    assert none_rated.Z.shape == (0, full.Z.shape[1]) and none_rated.rows.size == 0
