"""A small drop keeps the fold models of the last fit (``modeling/reuse.py``): the old sessions keep their rows
exactly, the new ones get the kept models' predictions, the predictions stay out of fold, and crossing the
threshold (or a new day, a rating gone, another fit's tables) fits again, as a run from scratch would.

The warehouse is built by hand, in memory, with just what the modeling step reads: 200 sessions (120 rated), three
feature columns (one informative) and users' messages whose words follow the stars. The drop adds sessions that
copy old ones (same features, same messages) under new ids, so what the kept models must predict for them is known
from the fit's own rows: an unrated copy gets its original's fold mean; a rated copy whose id hashes to its
original's fold gets its original's out-of-fold prediction. And, family by family (the stack, a tabular family with
the text score, the text alone), the kept fit predicts every session as the fit did, its text transformed with
vectorizers rebuilt from ``modeling.text_vocabulary`` (the words are not in the file: checked).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import duckdb
import numpy as np
import polars as pl
import pytest

from pulse_pipeline import tables
from pulse_pipeline.modeling.comparison import compare_models
from pulse_pipeline.modeling.data import ModelingData
from pulse_pipeline.modeling.predictions import CROSSFIT_SEED, audit_stored_predictions, crossfit_tables
from pulse_pipeline.modeling.reuse import (
    KEPT_FILE,
    feature_names,
    fit_key,
    hash_fold,
    keep_fit,
    load_kept,
    refit_reason,
    refresh_models,
    save_kept,
)
from pulse_pipeline.modeling.text import transform_messages, vectorize, vectorizers_from, vocabulary_table
from pulse_pipeline.warehouse import Warehouse

GOOD = ("thanks great", "works perfectly now", "great job thank you", "that fixed it")
BAD = ("broken useless", "still broken", "it does not work", "wrong again")
NEUTRAL = ("please fix the test", "add a flag", "run the build", "look at the parser")
SETTINGS = {
    "families": ["ordinal_logit", "text", "stack"],
    "seeds": (42,),
    "folds": 5,
    "choose_by": "pearson",
    "seed_rows": 0,
}
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
MODEL_TABLES = (
    tables.CV_METRICS,
    tables.FOLD_TRAINING,
    tables.FEATURE_IMPORTANCE,
    tables.TEXT_FOLD_TRAINING,
    tables.TEXT_TERMS,
    tables.TEXT_VOCABULARY,
    tables.RECALIBRATION,
)


def add_session(wh: Warehouse, sid: str, features: tuple[float, ...], messages: list[str], stars: float | None):
    """One staged session with its features row, its user messages and (when ``stars``) its rating."""
    wh.con.execute(
        "INSERT INTO staging.sessions (record_key, session_id, drop_id) VALUES (?, ?, 'd')", [f"k-{sid}", sid]
    )
    for position, text in enumerate(messages):
        wh.con.execute("INSERT INTO features.user_text VALUES (?, ?, ?)", [sid, position, text])
    wh.con.execute("INSERT INTO features.session_features VALUES (?, 'ok', ?, ?, ?)", [sid, *features])
    if stars is not None:
        rate(wh, sid, stars)


def rate(wh: Warehouse, sid: str, stars: float) -> None:
    wh.con.execute("DELETE FROM staging.session_labels WHERE session_id = ?", [sid])
    wh.con.execute("INSERT INTO staging.session_labels VALUES (?, 1, ?, ?, 'stars_1_5')", [sid, stars, (stars - 1) / 4])


def corpus(n: int = 200, n_rated: int = 120) -> dict[str, tuple]:
    """Session id -> (features, messages, stars or None)."""
    rng = np.random.default_rng(3)
    sessions = {}
    for i in range(n):
        stars = float(rng.integers(1, 6))
        words = GOOD if stars >= 4 else BAD if stars <= 2 else NEUTRAL
        features = (stars + rng.normal(scale=1.5), rng.normal(), rng.normal())
        messages = [NEUTRAL[rng.integers(4)], words[rng.integers(4)]]
        sessions[f"s{i:03d}"] = (features, messages, stars if i < n_rated else None)
    return sessions


def predictions(wh: Warehouse) -> pl.DataFrame:
    return wh.frame(f"SELECT * FROM {tables.PREDICTIONS.qualified} ORDER BY session_id")


def table(wh: Warehouse, t: tables.Table) -> pl.DataFrame:
    return wh.frame(f"SELECT * FROM {t.qualified} ORDER BY ALL")


def copy_id(original: str, fold: int, k: int = 5) -> str:
    """A new id for a copy of ``original`` whose ``hash_fold`` is ``fold``."""
    return next(f"{original}-copy{j}" for j in range(1000) if hash_fold([f"{original}-copy{j}"], k)[0] == fold)


def corpus_warehouse() -> tuple[Warehouse, dict]:
    """An in-memory warehouse holding ``corpus()`` (one drop, the three-column feature table), and the corpus."""
    wh = Warehouse(duckdb.connect())
    wh.con.execute("INSERT INTO raw.drops (drop_id, fingerprint) VALUES ('d', 'f1')")
    wh.con.execute(
        "CREATE TABLE features.session_features (session_id VARCHAR, annotation_status VARCHAR,"
        " a DOUBLE, b DOUBLE, c DOUBLE)"
    )
    sessions = corpus()
    for sid, (features, messages, stars) in sessions.items():
        add_session(wh, sid, features, messages, stars)
    return wh, sessions


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """The fit, then a small drop (reused), then a drop that crosses the threshold (refit), and a fit from scratch
    of the same final warehouse; the tables after each."""
    folder = tmp_path_factory.mktemp("models")
    wh, sessions = corpus_warehouse()
    first = refresh_models(wh, folder, **SETTINGS, refit_share=0.1, now=T0)
    before = {t.qualified: table(wh, t) for t in MODEL_TABLES} | {"predictions": predictions(wh)}
    first_kept = load_kept(folder, print)
    first_file = (folder / KEPT_FILE).read_bytes()
    first_vocabulary = table(wh, tables.TEXT_VOCABULARY)

    # the small drop: 3 unrated copies, 3 rated copies (ids hashing to their originals' folds), one rating changed
    old = before["predictions"]
    unrated = old.filter(~pl.col("labeled")).head(3)
    rated = old.filter(pl.col("labeled")).head(3)
    copies = {}
    for row in unrated.iter_rows(named=True):
        copies[f"{row['session_id']}-copy"] = row
        add_session(wh, f"{row['session_id']}-copy", *sessions[row["session_id"]][:2], None)
    for row in rated.iter_rows(named=True):
        new = copy_id(row["session_id"], row["fold"])
        copies[new] = row
        add_session(wh, new, *sessions[row["session_id"]][:2], 5.0)
    changed = old.filter(pl.col("labeled")).row(10, named=True)
    rate(wh, changed["session_id"], 6 - changed["label_stars"])
    second = refresh_models(wh, folder, **SETTINGS, refit_share=0.1, now=T0 + timedelta(hours=2))
    after = {t.qualified: table(wh, t) for t in MODEL_TABLES} | {"predictions": predictions(wh)}
    audit = audit_stored_predictions(wh)

    # crossing the threshold: 10 more rated sessions, 4 + 10 = 14 > 0.1 x 120
    for i, row in enumerate(old.filter(pl.col("labeled")).slice(20, 10).iter_rows(named=True)):
        add_session(wh, f"n{i:02d}", *sessions[row["session_id"]][:2], 4.0)
    third = refresh_models(wh, folder, **SETTINGS, refit_share=0.1, now=T0 + timedelta(hours=3))
    refit = {t.qualified: table(wh, t) for t in MODEL_TABLES} | {"predictions": predictions(wh)}
    scratch_folder = tmp_path_factory.mktemp("scratch")
    scratch = refresh_models(wh, scratch_folder, **SETTINGS, refit_share=0.1, now=T0 + timedelta(hours=3))
    fresh = {t.qualified: table(wh, t) for t in MODEL_TABLES} | {"predictions": predictions(wh)}
    return {
        "wh": wh,
        "folder": folder,
        "runs": (first, second, third, scratch),
        "first_kept": first_kept,
        "first_file": first_file,
        "first_vocabulary": first_vocabulary,
        "before": before,
        "after": after,
        "audit": audit,
        "copies": copies,
        "changed": changed,
        "refit": refit,
        "fresh": fresh,
    }


def test_the_first_run_fits_and_keeps_the_fit(history):
    first = history["runs"][0]
    assert first.reused is None and first.result is not None and first.reason == "fitted: no kept fit"
    kept = history["first_kept"]
    assert kept is not None and kept.fitted_at == T0 and kept.family == first.comparison.chosen.family
    print(f"chosen: {kept.family}")
    assert kept.rated.height == 120 and kept.k == 5
    # users' words stay in the warehouse: the vocabulary is a table, the file on disk holds none of them
    vocabulary = history["first_vocabulary"]
    assert vocabulary.height > 0 and {"thanks", "broken", "parser"} <= set(vocabulary["term"].to_list())
    assert not any(word.encode() in history["first_file"] for word in ("thanks", "broken", "parser", "great job"))
    # the kept folds are the ones the fit's rows show
    rows = history["before"]["predictions"].filter(pl.col("labeled")).select("session_id", "fold")
    assert rows.sort("session_id").equals(kept.rated.select("session_id", "fold").sort("session_id"))


def test_a_small_drop_keeps_the_fit_and_every_old_row(history):
    second, before, after = history["runs"][1], history["before"], history["after"]
    assert second.reused is not None, second.reason
    since = second.reused.since
    assert (since.fitted, since.added, since.changed, since.removed) == (120, 3, 1, 0)
    assert second.reused.touched == 7  # the 6 copies and the changed rating
    # the fit's own tables are untouched
    for t in MODEL_TABLES:
        assert after[t.qualified].equals(before[t.qualified]), t.qualified
    # every old session but the re-rated one keeps its row exactly
    changed = history["changed"]["session_id"]
    old_ids = before["predictions"]["session_id"]
    kept_rows = after["predictions"].filter(
        pl.col("session_id").is_in(old_ids.to_list()) & (pl.col("session_id") != changed)
    )
    assert kept_rows.equals(before["predictions"].filter(pl.col("session_id") != changed))
    assert after["predictions"].height == 206


def test_the_new_sessions_get_the_kept_models_predictions(history):
    after, copies = history["after"], history["copies"]
    new = after["predictions"].filter(pl.col("session_id").is_in(list(copies)))
    assert new.height == 6
    for row in new.iter_rows(named=True):
        original = copies[row["session_id"]]
        # same features and text: an unrated copy gets the same fold mean; a rated copy, in its original's fold,
        # that fold model's prediction, which its original got out of fold
        assert row["prediction_stars"] == pytest.approx(original["prediction_stars"], abs=1e-9)
        assert row["labeled"] == original["labeled"] and row["fold"] == original["fold"]
        assert row["method"] == original["method"] and row["model"] == original["model"]
        if row["labeled"]:
            assert row["label_stars"] == 5.0 and row["label"] == 1.0
        else:
            assert row["label_stars"] is None and row["fold"] is None


def test_the_new_sessions_get_the_kept_recalibration(history):
    """prediction_calibrated of a copy is its original's: the kept fit's fold map (rated, in the original's fold)
    or the mean over the folds' maps (unrated), as the fit made them (``recalibration.apply_maps``)."""
    after, copies = history["after"], history["copies"]
    assert history["before"][tables.RECALIBRATION.qualified].height == 1
    new = after["predictions"].filter(pl.col("session_id").is_in(list(copies)))
    for row in new.iter_rows(named=True):
        original = copies[row["session_id"]]
        assert row["prediction_calibrated"] == pytest.approx(original["prediction_calibrated"], abs=1e-9)
    recalibrated = history["before"][tables.RECALIBRATION.qualified]["recalibrated"][0]
    fit_rows = history["before"]["predictions"]
    assert fit_rows["prediction_calibrated"].equals(fit_rows["prediction"]) != recalibrated


def test_a_changed_rating_keeps_its_fold_and_prediction(history):
    changed = history["changed"]
    row = history["after"]["predictions"].filter(pl.col("session_id") == changed["session_id"]).row(0, named=True)
    assert row["label_stars"] == 6 - changed["label_stars"]
    assert row["fold"] == changed["fold"]
    # to float32 precision: below 1 000 ratings the fit scored a held-out row's text on the word-only float32 copy of
    # the matrix (``text.word_only``), the kept ridge scores the whole matrix (its other coefficients are 0)
    assert row["prediction_stars"] == pytest.approx(changed["prediction_stars"], abs=1e-6)


def test_the_kept_predictions_pass_the_out_of_fold_audit(history):
    assert history["audit"].passed, history["audit"]


def test_crossing_the_threshold_fits_again_as_from_scratch(history):
    third, scratch = history["runs"][2], history["runs"][3]
    assert third.reused is None and third.reason.startswith("fitted: 14 ratings added or changed since the kept fit")
    assert scratch.reason == "fitted: no kept fit"
    refit, fresh = history["refit"], history["fresh"]
    for name in refit:
        a, b = refit[name], fresh[name]
        assert a.columns == b.columns and a.height == b.height, name
        for column in a.columns:
            if a[column].dtype == pl.Float64:
                assert np.allclose(a[column].to_numpy(), b[column].to_numpy(), atol=1e-9, equal_nan=True), column
            else:
                assert a[column].equals(b[column]), (name, column)
    assert fresh["predictions"].height == 216 and fresh["predictions"]["labeled"].sum() == 133


def test_when_the_kept_fit_is_not_used(history, tmp_path):
    """Each rule of ``refit_reason`` on the final warehouse and its fit (nothing changed since: reused)."""
    wh, folder = history["wh"], history["folder"]
    kept = load_kept(folder, print)
    key = fit_key(**SETTINGS, feature_names=feature_names(wh))
    later = T0 + timedelta(hours=4)
    reason, since = refit_reason(wh, kept, key, 0.1, later)
    assert reason is None and (since.fitted, since.since, since.removed) == (133, 0, 0)
    assert refit_reason(wh, kept, key, 0.0, later)[0].startswith("PULSE_MODEL_REFIT_SHARE is 0")
    assert refit_reason(wh, None, key, 0.1, later)[0] == "no kept fit"
    assert refit_reason(wh, kept, key + "x", 0.1, later)[0].startswith("the modeling code, settings")
    tomorrow = datetime(2026, 12, 2, 0, 5, tzinfo=UTC)
    assert refit_reason(wh, kept, key, 0.1, tomorrow)[0].endswith("the first run of a day fits again")
    other = replace(kept, fit_id="0123456789abcdef")  # a fit whose tables never committed
    assert refit_reason(wh, other, key, 0.1, later)[0] == "the warehouse's predictions are not the kept fit's"
    wh.con.begin()
    wh.con.execute("DELETE FROM staging.session_labels WHERE session_id = 's000'")
    assert refit_reason(wh, kept, key, 0.1, later)[0] == "1 of the 133 ratings the kept fit used are gone"
    wh.con.rollback()
    # a file that cannot be read is no kept fit
    (tmp_path / KEPT_FILE).write_bytes(b"not a pickle")
    assert load_kept(tmp_path, lambda _: None) is None
    save_kept(tmp_path, kept)
    assert load_kept(tmp_path, print).fit_id == kept.fit_id


@pytest.fixture(scope="module")
def compared():
    """A cross-validation of every cheap family and their stack on 130 sessions (90 rated), keeping seed 42's fits."""
    rng = np.random.default_rng(5)
    stars = rng.integers(1, 6, 130).astype(float)
    messages = {}
    for i in range(130):
        words = GOOD if stars[i] >= 4 else BAD if stars[i] <= 2 else NEUTRAL
        messages[f"s{i:03d}"] = [NEUTRAL[rng.integers(4)], words[rng.integers(4)]]
    X = np.column_stack([stars + rng.normal(scale=1.5, size=130), rng.normal(size=(130, 2))])
    y = np.where(np.arange(130) < 90, stars, np.nan)
    ids = sorted(messages)
    data = ModelingData(("a", "b", "c"), np.array(ids), X, y, vectorize(ids, messages, ~np.isnan(y)))
    families = ["ordinal_logit", "text", "stack"]
    comparison = compare_models(data, pl.DataFrame(), families, (42,), 5, "pearson", keep_seed=CROSSFIT_SEED)
    return data, messages, comparison, families


@pytest.mark.parametrize("family", ["stack", "ordinal_logit", "text"])
def test_the_kept_fit_predicts_as_the_fit_did(compared, family):
    """``KeptFit.predict_folds`` (the models on disk, the text through vectorizers rebuilt from the vocabulary
    table) gives every rated session its out-of-fold prediction back from its own fold, and every unrated session
    its fold mean: what a reused run gives a new session with the same features and text."""
    data, messages, comparison, families = compared
    result = crossfit_tables(data, family, 5, families=families, kept=comparison.kept)
    rated = result.predictions.filter(pl.col("labeled"))
    kept = keep_fit("id", T0, "key", result.fit, data, rated.with_columns(input=pl.lit("")))
    assert kept.family == family and kept.k == 5
    rebuilt = vectorizers_from(vocabulary_table(data.text.vectorizers))
    Z = transform_messages(rebuilt, list(data.session_ids), messages)
    assert (Z != data.text.Z).nnz == 0  # the same columns and idf: the very matrix the fit read
    P = kept.predict_folds(data.X, Z)
    labeled = data.labeled
    folds = rated["fold"].to_numpy()
    assert np.allclose(P[:, labeled][folds, np.arange(folds.size)], rated["prediction_stars"].to_numpy(), atol=1e-9)
    unrated = result.predictions.filter(~pl.col("labeled"))["prediction_stars"].to_numpy()
    assert np.allclose(P[:, ~labeled].mean(axis=0), unrated, atol=1e-9)


def test_a_run_with_nothing_new_changes_nothing(history):
    """After the refit (and the same fit from scratch: the same id, as the fit's id is a digest of its inputs), a
    run with no new session or rating keeps the fit and touches no row."""
    wh = history["wh"]
    run = refresh_models(wh, history["folder"], **SETTINGS, refit_share=0.1, now=T0 + timedelta(hours=5))
    assert run.reused is not None and run.reused.touched == 0 and run.reused.since.since == 0
    assert predictions(wh).equals(history["fresh"]["predictions"])
