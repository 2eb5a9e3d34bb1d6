"""The modeling step reuses cross-validation's seed-42 fits as its cross-fit (``stack.crossfit_from_fits``) and loads
the text once: both must change no number.

Checked against the fresh computation the step did before: every cross-fit table of the stack, of one tabular family
and of the text family built from the kept fits equals, cell for cell, the one ``crossfit_tables`` builds by fitting
again; and Table 2 computed with every session's text loaded equals Table 2 with the rated sessions' text alone (the
rows the old ``cv_metrics`` step vectorized). Permutation importance on folds larger than its cap is checked by hand,
the unrated sessions' text vectorized and predicted a chunk at a time against the whole matrix, and the number of
cross-validation seeds against ``seeds_for``'s rule worked out by hand.
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

from pulse_pipeline.features.user_text import load_user_messages
from pulse_pipeline.modeling.comparison import compare_models, seeds_for
from pulse_pipeline.modeling.data import ModelingData, unrated_chunks
from pulse_pipeline.modeling.importance import permutation_importance_oof
from pulse_pipeline.modeling.predictions import CROSSFIT_SEED, crossfit_tables
from pulse_pipeline.modeling.stack import crossfit_from_fits
from pulse_pipeline.modeling.text import vectorize
from pulse_pipeline.settings import SettingsError, modeling_settings
from pulse_pipeline.warehouse import Warehouse

GOOD = ("thanks great", "works perfectly now", "great job thank you", "that fixed it")
BAD = ("broken useless", "still broken", "it does not work", "wrong again")
NEUTRAL = ("please fix the test", "add a flag", "run the build", "look at the parser")
FAMILIES = ["ordinal_logit", "random_forest", "text", "stack"]
CHEAP = ["ordinal_logit", "text", "stack"]  # for what does not need the forest (a few seconds a fit under load)


def small_corpus(n: int = 130, n_rated: int = 90):
    """Session ids, their messages, stars (NaN for the unrated tail) and 3 features, one of them informative."""
    rng = np.random.default_rng(5)
    stars = rng.integers(1, 6, n).astype(float)
    messages = {}
    for i in range(n):
        words = GOOD if stars[i] >= 4 else BAD if stars[i] <= 2 else NEUTRAL
        messages[f"s{i:03d}"] = [NEUTRAL[rng.integers(4)], words[rng.integers(4)]]
    X = np.column_stack([stars + rng.normal(scale=1.5, size=n), rng.normal(size=(n, 2))])
    y = np.where(np.arange(n) < n_rated, stars, np.nan)
    return sorted(messages), messages, y, X


@pytest.fixture(scope="module")
def step():
    """The data as the modeling step loads it, and its cross-validation keeping seed 42's fits."""
    ids, messages, y, X = small_corpus()
    data = ModelingData(("a", "b", "c"), np.array(ids), X, y, vectorize(ids, messages, ~np.isnan(y)))
    comparison = compare_models(data, pl.DataFrame(), FAMILIES, (42,), 5, "pearson", keep_seed=CROSSFIT_SEED)
    return ids, messages, data, comparison


@pytest.mark.parametrize("family", ["stack", "ordinal_logit", "text"])
def test_the_cross_fit_from_kept_fits_equals_fitting_again(step, family):
    _, _, data, comparison = step
    assert comparison.kept is not None and comparison.kept.seed == CROSSFIT_SEED
    reused = crossfit_tables(data, family, 5, families=FAMILIES, kept=comparison.kept)
    fresh = crossfit_tables(data, family, 5, families=FAMILIES)
    for name in ("predictions", "fold_training", "importance", "text_fold_training", "text_terms"):
        assert getattr(reused, name).equals(getattr(fresh, name)), name
    assert reused.oof_pearson == fresh.oof_pearson and reused.note == fresh.note
    # and the unrated sessions got predictions at all: 40 of them, not the empty arrays cross-validation kept
    assert reused.predictions.filter(~pl.col("labeled"))["prediction_stars"].is_not_null().sum() == 40


def message_warehouse(messages: dict[str, list[str]]) -> Warehouse:
    """An in-memory warehouse holding just what ``user_text.load_user_messages`` reads: a session per id and its
    user messages as ``features.user_text`` rows, in order."""
    wh = Warehouse(duckdb.connect())
    for sid, texts in messages.items():
        wh.con.execute("INSERT INTO staging.sessions (record_key, session_id) VALUES (?, ?)", [f"k-{sid}", sid])
        for position, text in enumerate(texts):
            wh.con.execute("INSERT INTO features.user_text VALUES (?, ?, ?)", [sid, position, text])
    return wh


def test_the_unrated_sessions_a_chunk_at_a_time_give_the_same_tables(step):
    """What the asset runs: the rated sessions' text loaded, the unrated ones' vectorized and predicted in chunks
    (of 7 sessions here: 40 unrated, so 6 chunks) equals the cross-fit of the whole matrix."""
    ids, messages, data, comparison = step
    wh = message_warehouse(messages)
    rated_text = vectorize(ids, load_user_messages(wh), data.labeled, rated_only=True)  # load_modeling_data's "rated"
    rated = ModelingData(data.feature_names, data.session_ids, data.X, data.y, rated_text)
    assert rated.text.Z.shape[0] == 90
    chunks = list(unrated_chunks(wh, rated, chunk=7))
    assert [len(x) for x, _ in chunks] == [7, 7, 7, 7, 7, 5]
    chunked = crossfit_tables(rated, "stack", 5, families=FAMILIES, kept=comparison.kept, unrated=iter(chunks))
    whole = crossfit_tables(data, "stack", 5, families=FAMILIES, kept=comparison.kept)
    for name in ("predictions", "fold_training", "importance", "text_fold_training", "text_terms"):
        assert getattr(chunked, name).equals(getattr(whole, name)), name


def test_table_2_is_the_same_with_every_sessions_text_loaded(step):
    ids, messages, data, _ = step
    rated_text = ModelingData(
        data.feature_names, data.session_ids, data.X, data.y, vectorize(ids, messages, data.labeled, rated_only=True)
    )
    every = compare_models(data, pl.DataFrame(), CHEAP, (43, 42), 5, "pearson", keep_seed=CROSSFIT_SEED)
    alone = compare_models(rated_text, pl.DataFrame(), CHEAP, (43, 42), 5, "pearson")
    assert alone.rows == every.rows and alone.kept is None
    assert every.kept.seed == 42 and sorted(every.kept.fits) == ["ordinal_logit", "text"]


def test_kept_fits_of_other_rows_are_refused(step):
    _, _, data, comparison = step
    rated, text = data.labeled, data.text_feature()
    X, y, Xu = data.X[rated][1:], data.y[rated][1:], data.X[~rated]
    with pytest.raises(ValueError, match="kept fits of 90 rows, not 89"):
        crossfit_from_fits(comparison.kept, X, y, Xu, "ordinal_logit", text=text)
    with pytest.raises(ValueError, match="exactly when cross-validation had it"):
        crossfit_from_fits(comparison.kept, X, y, Xu, "ordinal_logit")


def test_importance_on_large_folds_uses_a_random_subset_of_each_fold(step):
    """Above ``max_fold_rows`` held-out rows a fold is measured on a subset; by hand: the same draws, one plain
    ``predict`` per (repeat, feature), the rise in MSE averaged over folds and repeats."""
    _, _, data, comparison = step
    rated = data.labeled
    X, y = data.X[rated], data.y[rated]
    fit = crossfit_from_fits(comparison.kept, X, y, data.X[~rated], "ordinal_logit", text=data.text_feature())
    A = np.column_stack([X, fit.text_score])
    names = ["a", "b", "c", "text_score"]
    ranked = permutation_importance_oof(fit, A, y, names, n_repeats=2, seed=3, max_fold_rows=10)
    rng, rises = np.random.default_rng(3), []
    for f, model in enumerate(fit.models):
        held = np.sort(rng.choice(np.flatnonzero(fit.fold == f), 10, replace=False))  # 18 held-out rows a fold
        perms = rng.permuted(np.broadcast_to(np.arange(10), (2, 4, 10)), axis=-1)
        base = np.mean((y[held] - model.predict(A[held])) ** 2)
        for r in range(2):
            row = []
            for j in range(4):
                permuted = A[held].copy()
                permuted[:, j] = A[held][perms[r, j], j]
                row.append(np.mean((y[held] - model.predict(permuted)) ** 2) - base)
            rises.append(row)
    by_hand = np.mean(rises, axis=0)
    assert {i.feature: i.mean for i in ranked} == pytest.approx(dict(zip(names, by_hand, strict=True)), rel=1e-9)
    uncapped = permutation_importance_oof(fit, A, y, names, n_repeats=2, seed=3)
    assert [i.mean for i in uncapped] != [i.mean for i in ranked]  # 18 rows a fold: all of them without the cap


@pytest.mark.parametrize(
    "n_rated, seed_rows, expected",
    [
        (1_837, 10_000, 5),  # the paper's scale: its 5 seeds (10 000 // 1 837 = 5)
        (2_000, 10_000, 5),
        (2_001, 10_000, 4),
        (3_334, 10_000, 2),  # 10 000 // 3 334 = 2
        (18_000, 10_000, 2),  # never below two: an sd over seeds needs two
        (18_000, 0, 5),  # 0: always every configured seed (the paper's protocol)
        (10, 10_000, 5),
    ],
)
def test_seeds_shrink_with_many_ratings(n_rated, seed_rows, expected):
    assert seeds_for(n_rated, (42, 43, 44, 45, 46), seed_rows) == (42, 43, 44, 45, 46)[:expected]
    assert seeds_for(n_rated, (42,), seed_rows) == (42,)  # one configured seed stays one


def test_the_seed_rows_setting():
    assert modeling_settings({}).cv_seed_rows == 10_000
    assert modeling_settings({"PULSE_CV_SEED_ROWS": "0"}).cv_seed_rows == 0
    with pytest.raises(SettingsError, match="PULSE_CV_SEED_ROWS=-1"):
        modeling_settings({"PULSE_CV_SEED_ROWS": "-1"})
