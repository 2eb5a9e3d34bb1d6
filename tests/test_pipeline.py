"""End to end on a synthetic corpus: what the pipeline reads back must equal the generator's known truth."""

from __future__ import annotations

import re

import duckdb
import polars as pl
import pytest

from pulse_pipeline.cli import main
from pulse_pipeline.connections import connect
from pulse_pipeline.runs import ingest
from pulse_pipeline.synth import write_corpus
from pulse_pipeline.synth.corpus import MALFORMED

# The round trip checks what the pipeline reads back (the raw and staging tables, the drop's summary), not the
# models: one cheap family and one CV seed (tests/helpers.py SMALL_HOME_SETTINGS's) fit them. The models stage with
# every default family and seed runs end to end in test_demo_materializes_everything_and_says_where (`pulse demo`).
QUICK_MODELS = {"PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_CV_SEEDS": "1"}


@pytest.mark.slow
def test_synthetic_corpus_round_trips_through_the_pipeline(pulse_home, tmp_path, monkeypatch):
    for name, value in QUICK_MODELS.items():
        monkeypatch.setenv(name, value)
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
    assert "experiments: " in out and "(shipped default; put your own at" in out  # an empty home: the defaults
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM staging.sessions").fetchone()[0] == 150
        # the demo's deliberately broken records (synth/corpus.py MALFORMED), one quarantine row each
        assert con.execute("SELECT count(*) FROM raw.quarantine").fetchone()[0] == len(MALFORMED)
        assert con.execute("SELECT count(*) FROM raw.asks").fetchone()[0] > 0
        # the shipped benchmarks.csv was found: its 14 rows are points, none rejected for want of a file
        points = "SELECT count(*) FILTER (WHERE benchmark IS NOT NULL), count(*) FILTER (WHERE status = 'rejected')"
        assert con.execute(points + " FROM estimates.benchmark_points").fetchone() == (14, 0)
        assert con.execute("SELECT count(*) FROM estimates.coverage_validation").fetchone()[0] > 0
        # the agreement watch ran after the models (its pooled r over at least one window) and the demo prints it
        watch = "SELECT count(*) FROM modeling.agreement_history WHERE experiment = 'all' AND measure = 'oof_r'"
        assert con.execute(watch).fetchone()[0] >= 1
        kappa = (
            "SELECT n_sessions FROM features.annotator_agreement WHERE annotator_b = 'human' AND feature = 'task_type'"
        )
        assert con.execute(kappa).fetchone()[0] == 150  # every session of the 150 has a stand-in human label
        # the summary counts answered asks as ratings: a rating row or an ask row with its rating
        ratings, asks = con.execute(
            "SELECT (SELECT count(*) FROM raw.ratings) + (SELECT count(*) FROM raw.asks WHERE rating IS NOT NULL),"
            " (SELECT count(*) FROM raw.asks)"
        ).fetchone()
    assert f" {ratings} ratings, {asks} asks (" in out
    assert f"report: {pulse_home.report / 'index.html'}" in out and (pulse_home.report / "index.html").stat().st_size
    assert "Does the model still agree with people?" in out


def test_synth_cli_writes_a_corpus_with_its_truth(tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["synth", "--sessions", "60", "--out", str(out), "--seed", "4"]) == 0
    assert "wrote 60 sessions" in capsys.readouterr().out
    truth = pl.read_csv(out / "_sessions_truth.csv")
    assert truth.height == 60 and (out / "_truth.json").exists() and (out / "assignments.csv").exists()


def test_materialize_a_selection_only_touches_it_and_publishes_only_a_whole_state(pulse_home, tmp_path, capsys):
    write_corpus(pulse_home.drops / "c", 30, seed=8)
    assert main(["materialize", "--select", "key:raw/sessions"]) == 0  # the raw multi-asset, every drop
    with connect(pulse_home.work_db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM raw.sessions").fetchone()[0] == 30
        assert con.execute("SELECT count(*) FROM staging.sessions").fetchone()[0] == 0
    # staging is older than the raw tables it reads: not a whole state, so the analysts' copy is not made
    assert not pulse_home.warehouse.exists()
    err = capsys.readouterr().err
    assert "not replaced: tables are older than what they read:" in err and "staging/sessions" in err, err
    assert main(["materialize", "--select", "group:staging"]) == 0
    with connect(pulse_home.work_db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM staging.sessions").fetchone()[0] == 30
    assert not pulse_home.warehouse.exists()  # the features are now older than staging
    err = capsys.readouterr().err
    assert "not replaced: tables are older than what they read:" in err, err
    stale = re.findall(r"(\w+/\w+) \(older than", err)  # "features/user_text (older than raw/events), ..."
    assert stale and not [a for a in stale if a.startswith("staging/")], err
    assert main(["materialize", "--select", "key:nothing/here"]) == 2
    assert "matches no asset" in capsys.readouterr().err
    assert main(["materialize", "--select", "key:raw/sessions key:raw/events"]) == 2  # "or" missing
    assert "Invalid selection string" in capsys.readouterr().err
