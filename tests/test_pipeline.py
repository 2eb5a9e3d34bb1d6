"""End to end on a synthetic corpus: what the pipeline reads back must equal the generator's known truth."""

from __future__ import annotations

import duckdb
import polars as pl

from pulse_pipeline.cli import main
from pulse_pipeline.runs import ingest
from pulse_pipeline.synth import write_corpus


def test_synthetic_corpus_round_trips_through_the_pipeline(pulse_home, tmp_path):
    corpus = tmp_path / "corpus"
    written = write_corpus(corpus, 400, seed=3)
    truth = pl.read_csv(corpus / "_sessions_truth.csv")

    summary = ingest(pulse_home, corpus, say=lambda _: None)
    assert (summary.sessions, summary.quarantined, summary.reconciled) == (400, 0, True)
    assert summary.events == written.n_events
    assert summary.segments == truth["n_segments"].sum()
    assert summary.ratings == written.n_ratings

    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        labels = con.sql("SELECT session_id, label_stars, label, n_rated_segments FROM staging.session_labels").pl()
        arms = con.sql("SELECT session_id, experiment, variant FROM staging.assignments").pl()
    rated = truth.filter(pl.col("rated")).select("session_id", "label", "n_rated_segments")
    joined = rated.join(labels, on="session_id", how="full", coalesce=True)
    assert joined.height == rated.height == labels.height
    assert (joined["label_stars"] - joined["label"]).abs().max() < 1e-9
    assert (joined["n_rated_segments"] == joined["n_rated_segments_right"]).all()
    assert ((labels["label"] - (labels["label_stars"] - 1) / 4).abs() < 1e-12).all()
    expected_arms = truth.select("session_id", "experiment", "variant").sort("session_id")
    assert arms.sort("session_id").equals(expected_arms)


def test_demo_materializes_everything_and_says_where(pulse_home, capsys):
    assert main(["demo", "--sessions", "150", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert str(pulse_home.warehouse) in out and "_truth.json" in out
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM staging.sessions").fetchone()[0] == 150
        assert con.execute("SELECT count(*) FROM raw.quarantine").fetchone()[0] == 0
