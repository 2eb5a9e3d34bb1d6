"""The modeling stage through the Dagster assets, and the check that predictions never saw their own labels."""

from __future__ import annotations

import dagster as dg
import duckdb
import numpy as np
import polars as pl
import pytest

from pulse_pipeline import tables
from pulse_pipeline.modeling.comparison import compare_models, judge_metric_rows, load_judge_agreement, table_2
from pulse_pipeline.modeling.data import ModelingData
from pulse_pipeline.modeling.predictions import audit_stored_predictions, crossfit_tables
from pulse_pipeline.runs import ingest
from pulse_pipeline.synth import FEATURE_NAMES, feature_matrix, simulate_sessions, write_corpus
from pulse_pipeline.warehouse import Warehouse


def test_the_out_of_fold_check_fails_on_in_sample_predictions():
    wh = Warehouse(duckdb.connect())
    labeled = [f"s{i}" for i in range(6)]
    fold = {sid: i % 3 for i, sid in enumerate(labeled)}
    predictions = pl.DataFrame(
        {
            "session_id": [*labeled, "u1"],
            "labeled": [True] * len(labeled) + [False],
            "label_stars": [4.0] * len(labeled) + [None],
            "label": [0.75] * len(labeled) + [None],
            "prediction_stars": [4.1] * len(labeled) + [4.0],
            "prediction": [0.775] * len(labeled) + [0.75],
            "fold": [fold[s] for s in labeled] + [None],
            "model": "m",
            "method": ["out_of_fold"] * len(labeled) + ["fold_mean"],
            "prediction_calibrated": [0.775] * len(labeled) + [0.75],
        }
    )

    def write(training: list[dict]) -> int:
        wh.replace(tables.PREDICTIONS, predictions)
        wh.replace(tables.FOLD_TRAINING, pl.DataFrame(training))
        return audit_stored_predictions(wh).in_sample_predictions

    cross_fit = [{"model": "m", "fold": k, "session_id": s} for k in range(3) for s in labeled if fold[s] != k]
    # every fold model saw every label
    in_sample = [{"model": "m", "fold": k, "session_id": s} for k in range(3) for s in labeled]
    assert write(cross_fit) == 0
    assert write(in_sample) == len(labeled)


@pytest.mark.slow
def test_modeling_stage_on_a_synthetic_corpus(pulse_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PULSE_CV_SEEDS", "2")  # all four families, two CV seeds: enough to test, quick to run
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 1200, seed=9)
    ingest(pulse_home, corpus, say=lambda _: None)
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        n_rated = con.execute("SELECT count(*) FROM staging.session_labels").fetchone()[0]
        metrics = con.execute("SELECT model, metric, n_labeled, n_seeds, chosen FROM modeling.cv_metrics").fetchall()
        assert {(m, k) for m, k, *_ in metrics} == {
            (m, k)
            for m in ("ordinal_logit", "random_forest", "hist_gbm", "lightgbm", "text", "sentiment", "baseline")
            + ("stack", "constant")
            for k in ("mse", "mae", "pearson")
        }
        assert {(n, s) for _, _, n, s, _ in metrics} == {(n_rated, 2)}
        chosen = {m for m, _, _, _, c in metrics if c}
        assert len(chosen) == 1
        best = con.execute(
            "SELECT model FROM modeling.cv_metrics WHERE metric = 'pearson' AND model != 'constant'"
            " ORDER BY mean DESC LIMIT 1"
        ).fetchone()[0]
        assert chosen == {best}
        preds = con.execute("""
            SELECT count(*), count(*) FILTER (WHERE labeled), count(*) FILTER (WHERE labeled AND fold IS NOT NULL),
                   count(*) FILTER (WHERE NOT labeled AND fold IS NULL AND method = 'fold_mean'),
                   count(DISTINCT model)
            FROM modeling.predictions""").fetchone()
        assert preds == (1200, n_rated, n_rated, 1200 - n_rated, 1)
        n_features = len(con.execute("DESCRIBE features.session_features").fetchall()) - 2
        n_importance = con.execute(  # the text score, when there is text, is one more column than the table's
            "SELECT count(*) FROM modeling.feature_importance WHERE feature != 'text_score'"
        ).fetchone()[0]
        repeat_raters = con.execute(  # a user with two rated sessions gives the models the two user columns
            "SELECT count(*) FROM (SELECT s.user_id FROM staging.session_labels JOIN staging.sessions s"
            " USING (session_id) WHERE s.user_id IS NOT NULL GROUP BY s.user_id HAVING count(*) >= 2)"
        ).fetchone()[0]
        n_columns = n_features + (2 if repeat_raters else 0)
        assert n_importance == (0 if chosen == {"text"} else n_columns)  # the text model reads no column
    latest = dg.DagsterInstance.get().event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey(["modeling", "predictions"]), "predictions_are_out_of_fold")]
    )
    assert [r.status.value for r in latest.values()] == ["SUCCEEDED"]


def test_judge_rows_compare_likert_scores_with_ratings():
    wh = Warehouse(duckdb.connect())
    # three rated sessions: ratings 5, 3, 1 stars; the judge says 4, 3, 3 (and one failed answer, ignored)
    wh.append(
        tables.SESSION_LABELS,
        pl.DataFrame(
            {
                "session_id": ["a", "b", "c"],
                "n_rated_segments": 1,
                "label_stars": [5.0, 3.0, 1.0],
                "label": [1.0, 0.5, 0.0],
                "scale": "stars_1_5",
            }
        ),
    )
    wh.append(
        tables.JUDGE_SCORES,
        pl.DataFrame(
            {
                "session_id": ["a", "b", "c", "d"],
                "model": "m",
                "prompt_version": "v",
                "binary_satisfied": [True, True, False, None],
                "likert_score": [4, 3, 3, None],
                "explanation": "",
                "status": ["ok", "ok", "ok", "failed"],
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cost_usd": 0.0,
                "error": [None, None, None, "bad"],
            }
        ),
    )
    rows = {r.metric: (r.mean, r.sd, r.n_labeled, r.source) for r in judge_metric_rows(load_judge_agreement(wh))}
    # by hand: errors -1, 0, +2 -> MSE (1 + 0 + 4) / 3 = 5/3, MAE 3/3 = 1;
    # Pearson of (4, 3, 3) with (5, 3, 1): deviations (2/3, -1/3, -1/3) and (2, 0, -2) -> 2 / sqrt(2/3 * 8) = 0.866
    assert rows["mse"][0] == pytest.approx(5 / 3) and rows["mae"][0] == pytest.approx(1.0)
    assert rows["pearson"][0] == pytest.approx(3**0.5 / 2)
    assert {(sd, n, source) for _, sd, n, source in rows.values()} == {(None, 3, "llm_judge")}


@pytest.mark.slow
def test_one_cv_seed_stores_its_undefined_sd_as_null(pulse_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PULSE_CV_SEEDS", "1")  # an sd over one seed is undefined
    monkeypatch.setenv("PULSE_MODEL_FAMILIES", "hist_gbm")
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 600, seed=3)
    ingest(pulse_home, corpus, say=lambda _: None)
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        sds = con.execute("SELECT sd FROM modeling.cv_metrics WHERE source = 'cross_validation'").fetchall()
    # hist_gbm's rows and the constant's; NULL, not NaN (DuckDB sorts NaN above all)
    assert len(sds) == 6 and all(sd is None for (sd,) in sds)


def synthetic_modeling_data(n_sessions: int, rated_fraction: float) -> ModelingData:
    """The generator's sessions as the modeling stage loads them: features, and stars for rated sessions only."""
    table = simulate_sessions(n_sessions, seed=2, rated_fraction=rated_fraction)
    stars = np.where(table.rated, table.label, np.nan)
    return ModelingData(tuple(FEATURE_NAMES), table.session_id, feature_matrix(table), stars)


def test_compare_models_marks_one_family_chosen_and_skips_with_too_few_ratings():
    data = synthetic_modeling_data(800, rated_fraction=0.1)
    judge = pl.DataFrame({"model": ["m"], "n": [5], "mse": [1.5], "mae": [1.0], "pearson": [0.2]})
    comparison = compare_models(data, judge, ["hist_gbm", "lightgbm"], seeds=(42,), folds=5, choose_by="mse")
    assert comparison.skipped is None and comparison.chosen is not None
    assert {(r.model, r.metric) for r in comparison.rows} == {
        (m, k) for m in ("hist_gbm", "lightgbm", "constant", "llm_judge:m") for k in ("mse", "mae", "pearson")
    }  # the constant (training folds' mean) is Table 2's floor row, never chosen
    assert {r.model for r in comparison.rows if r.chosen} == {comparison.chosen.family}
    wh = Warehouse(duckdb.connect())
    wh.replace(tables.CV_METRICS, comparison.rows, nan_as_null=True)  # one seed: every CV sd is NaN, stored NULL
    assert wh.count(tables.CV_METRICS, "sd IS NULL") == 12
    assert table_2(comparison.rows).columns == ["metric", "hist_gbm", "lightgbm", "constant", "llm_judge:m"]

    too_few = synthetic_modeling_data(100, rated_fraction=0.05)
    skipped = compare_models(too_few, judge, ["hist_gbm"], seeds=(42,), folds=5, choose_by="pearson")
    assert skipped.rows == [] and skipped.chosen is None and "at least 10" in skipped.skipped


def test_crossfit_tables_predict_every_session_out_of_fold():
    data = synthetic_modeling_data(800, rated_fraction=0.1)
    n_rated = int(data.labeled.sum())
    result = crossfit_tables(data, "hist_gbm", folds=5)
    wh = Warehouse(duckdb.connect())
    wh.replace(tables.PREDICTIONS, result.predictions)
    wh.replace(tables.FOLD_TRAINING, result.fold_training)
    wh.replace(tables.FEATURE_IMPORTANCE, result.importance)
    assert wh.count(tables.PREDICTIONS) == 800
    assert wh.count(tables.PREDICTIONS, "labeled AND fold IS NOT NULL AND method = 'out_of_fold'") == n_rated
    assert wh.count(tables.PREDICTIONS, "abs(prediction - (prediction_stars - 1) / 4) > 1e-12") == 0
    assert wh.count(tables.FOLD_TRAINING) == 4 * n_rated  # each rated session trains the other four fold models
    assert wh.count(tables.FEATURE_IMPORTANCE) == len(FEATURE_NAMES)
    assert audit_stored_predictions(wh).passed
