"""Arms without an assignment file (issue 39, item 4): an experiment whose arms are a session field
(``arms_from`` in experiments.toml) is estimated, marked ``observational`` in the effects table and the conclusions,
worded as an association, and shown in the report with its arms' balance. Every number below is worked out by hand
from the rows the test writes."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from pulse_pipeline import tables
from pulse_pipeline.estimates.conclusions import conclusion_row, conclusion_rows
from pulse_pipeline.estimates.effects import Settings
from pulse_pipeline.estimates.experiment_effects import experiment_effect_rows
from pulse_pipeline.estimates.experiments import (
    OBSERVATIONAL,
    RANDOMIZED,
    ArmsFrom,
    experiments_config,
    experiments_of,
)
from pulse_pipeline.estimates.feature_comparisons import feature_comparison_rows
from pulse_pipeline.estimates.sessions import assigned_sessions
from pulse_pipeline.report.page import build_page
from pulse_pipeline.settings_files import SettingsFileError

FAST = Settings(n_resamples=500, n_permutations=500)

# session id -> (metadata_json, label or None, n_turns); the model experiment's arms come from metadata.model. n_turns
# does not separate the rated sessions from the unrated ones in either arm, so AIPW's propensity fit has something
# to fit
SESSIONS = {
    "c1": ({"model": "claude"}, 1.0, 2.0),
    "c2": ({"model": "claude"}, 0.75, 8.0),
    "c3": ({"model": "claude"}, 0.5, 6.0),
    "c4": ({"model": "claude"}, None, 4.0),
    "g1": ({"model": "gpt"}, 0.5, 1.0),
    "g2": ({"model": "gpt"}, 0.25, 5.0),
    "g3": ({"model": "gpt"}, 0.0, 3.0),
    "g4": ({"model": "gpt"}, None, 2.0),
    "g5": ({"model": "gpt"}, None, 4.0),
    "n1": ({"other": 1}, 1.0, 1.0),  # no model: in no arm
    "n2": ({"model": None}, 1.0, 1.0),  # a JSON null: in no arm
    "n3": ({"model": {"id": "x"}}, 1.0, 1.0),  # an object is no arm's name: in no arm
    "o1": ({"model": "llama"}, 0.0, 1.0),  # a value outside `arms`: in no arm
}
MODEL = ArmsFrom("metadata.model", ("claude", "gpt"))
# a randomized experiment over the same sessions, from staging.assignments
PLANNING = {"c1": "plan", "c2": "plan", "g1": "plan", "g2": "plan", "c3": "none", "c4": "none", "g3": "none"}


def _write_rows(wh) -> None:
    staged = [
        {c: None for c in tables.STAGING_SESSIONS.column_names}
        | {"session_id": s, "user_id": f"u-{s}", "source_format": "claude_code", "metadata_json": json.dumps(m)}
        for s, (m, _, _) in SESSIONS.items()
    ]
    wh.append(tables.STAGING_SESSIONS, pl.DataFrame(staged, schema=tables.STAGING_SESSIONS.column_names))
    wh.append(
        tables.STAGING_ASSIGNMENTS,
        pl.DataFrame(
            [(s, "planning", v, f"u-{s}", "assignments_file") for s, v in PLANNING.items()],
            schema=tables.STAGING_ASSIGNMENTS.column_names,
            orient="row",
        ),
    )
    labels = [(s, 1, 1 + 4 * y, y, "stars_1_5") for s, (_, y, _) in SESSIONS.items() if y is not None]
    wh.append(tables.SESSION_LABELS, pl.DataFrame(labels, schema=tables.SESSION_LABELS.column_names, orient="row"))
    # every session predicted: a prediction near its label (0.5 when unrated), so the model-assisted methods run
    predictions = pl.DataFrame(
        {
            "session_id": list(SESSIONS),
            "prediction": [0.5 if y is None else 0.8 * y + 0.1 for _, y, _ in SESSIONS.values()],
        }
    )
    wh.con.register("_test_predictions", predictions)
    columns = ", ".join(
        {"session_id": "session_id", "prediction": "prediction", "prediction_calibrated": "prediction"}.get(
            c, f"NULL AS {c}"
        )
        for c in tables.PREDICTIONS.column_names
    )
    wh.con.execute(f"INSERT INTO {tables.PREDICTIONS.qualified} SELECT {columns} FROM _test_predictions")
    wh.con.execute("CREATE SCHEMA IF NOT EXISTS features")
    wh.con.execute(
        "CREATE TABLE features.session_features (session_id VARCHAR, annotation_status VARCHAR, n_turns DOUBLE)"
    )
    wh.con.executemany(
        "INSERT INTO features.session_features VALUES (?, 'done', ?)", [(s, t) for s, (_, _, t) in SESSIONS.items()]
    )


@pytest.fixture
def frame(wh):
    _write_rows(wh)
    return assigned_sessions(wh, arms_from={"model": MODEL})


def test_sessions_get_their_arm_from_the_field_and_those_without_it_are_counted(frame):
    model = frame.filter(pl.col("experiment") == "model")
    arms = dict(model.group_by("variant").len().iter_rows())
    assert arms == {"claude": 4, "gpt": 5}  # n1, n2, n3 have no usable model; o1's llama is not among `arms`
    assert set(model["design"]) == {OBSERVATIONAL}
    [note] = set(model["design_note"])
    assert "3 session(s) without metadata.model" in note and "1 with a value outside its arms" in note
    planning = frame.filter(pl.col("experiment") == "planning")
    assert planning.height == len(PLANNING) and set(planning["design"]) == {RANDOMIZED}
    assert planning["design_note"].is_null().all()
    # a session is in both experiments: one row each
    assert frame.filter(pl.col("session_id") == "c1")["experiment"].sort().to_list() == ["model", "planning"]


def test_assignments_win_over_arms_from_for_the_same_experiment(wh):
    _write_rows(wh)
    frame = assigned_sessions(wh, arms_from={"model": MODEL, "planning": ArmsFrom("source_format")})
    planning = frame.filter(pl.col("experiment") == "planning")
    assert dict(planning.group_by("variant").len().iter_rows()) == {"plan": 4, "none": 3}  # the file's arms
    assert set(planning["design"]) == {RANDOMIZED}
    assert set(planning["design_note"]) == {
        "arms from its assignments, which win over arms_from = 'source_format' in experiments.toml"
    }


def test_a_column_of_staging_sessions_is_a_field_too(wh):
    _write_rows(wh)
    frame = assigned_sessions(wh, arms_from={"tool": ArmsFrom("source_format")})
    tool = frame.filter(pl.col("experiment") == "tool")
    assert tool.height == len(SESSIONS) and set(tool["variant"]) == {"claude_code"}


def test_the_effects_table_marks_the_comparison_observational_with_the_hand_worked_difference(frame):
    rows = experiment_effect_rows(frame, {"model": "claude", "planning": "none"}, FAST)
    model = {r.method: r for r in rows if r.experiment == "model"}
    naive = model["naive_welch"]
    assert (naive.treatment, naive.control) == ("gpt", "claude")
    # rated means: gpt (0.5 + 0.25 + 0) / 3 = 0.25, claude (1 + 0.75 + 0.5) / 3 = 0.75
    assert naive.effect == pytest.approx(0.25 - 0.75)
    # each arm's variance (ddof 1) is 0.0625: se = sqrt(0.0625 / 3 + 0.0625 / 3)
    assert naive.se == pytest.approx(math.sqrt(2 * 0.0625 / 3))
    assert (naive.n_labeled_treatment, naive.n_labeled_control) == (3, 3)
    assert (naive.N_unlabeled_treatment, naive.N_unlabeled_control) == (2, 1)
    assert all(r.design == OBSERVATIONAL for r in model.values())
    assert all("observational: arms from the session field metadata.model" in r.note for r in model.values())
    assert all("3 session(s) without metadata.model" in r.note for r in model.values())
    planning = [r for r in rows if r.experiment == "planning"]
    assert planning and all(r.design == RANDOMIZED for r in planning)


def test_the_conclusion_states_an_association_never_an_effect(frame):
    rows = [vars(r) for r in experiment_effect_rows(frame, {}, FAST)]
    by = {(c.experiment, c.treatment): c for c in conclusion_rows(rows)}
    model = by[("model", "gpt")]
    assert model.design == OBSERVATIONAL and by[("planning", "plan")].design == RANDOMIZED
    # PPI++ (n_turns tracks nothing; the predictions track the labels) excludes zero: rated lower
    assert model.sentence.startswith("Sessions with gpt are rated lower than sessions with claude: ")
    assert "an association, not the effect of gpt" in model.sentence
    assert model.verdict == "gpt rated lower (associational)"
    for word in ("caused", "happier", "made users"):
        assert word not in model.sentence.lower()
    # an interval that excludes zero: who is rated higher, said of sessions, and the verdict says associational
    row = dict(rows[0]) | {
        "experiment": "model",
        "treatment": "gpt",
        "control": "claude",
        "method": "naive_welch",
        "valid": True,
        "flags": None,
        "effect": -0.5,
        "ci_low": -0.7,
        "ci_high": -0.3,
        "p_holm": 0.001,
        "width_vs_naive": 1.0,
        "design": OBSERVATIONAL,
    }
    found = conclusion_row([row], None, 1)
    assert found.sentence.startswith("Sessions with gpt are rated lower than sessions with claude: ")
    assert found.verdict == "gpt rated lower (associational)"
    assert "caused" not in found.sentence and "happier" not in found.sentence
    unsure = conclusion_row([row | {"ci_high": 0.1}], None, 1)
    assert unsure.sentence.startswith("No detectable difference between sessions with gpt and sessions with claude")
    assert "an association, not the effect of gpt" in unsure.sentence
    randomized = conclusion_row([row | {"design": RANDOMIZED}], None, 1)
    assert randomized.sentence.startswith("gpt is rated lower than claude: ")
    assert "association" not in randomized.sentence and randomized.verdict == "gpt rated lower"


def test_the_report_names_it_associational_and_shows_the_balance(wh, frame):
    effects = experiment_effect_rows(frame, {"model": "claude", "planning": "none"}, FAST)
    wh.replace(tables.EXPERIMENT_EFFECTS, effects, nan_as_null=True)
    wh.replace(tables.CONCLUSIONS, conclusion_rows([vars(r) for r in effects]))
    exps = experiments_of(frame, {"model": "claude", "planning": "none"})
    wh.replace(tables.FEATURE_COMPARISONS, feature_comparison_rows(frame, ["n_turns"], exps), nan_as_null=True)
    html = build_page(wh.con, "test", datetime(2026, 1, 1, tzinfo=UTC)).html
    summary = html[: html.index("<h3>Experiment model</h3>")]
    assert "Associational, not effects: the arms of model come from a session field" in summary
    assert "gpt rated lower (associational)" in summary
    model = html[html.index("<h3>Experiment model</h3>") : html.index("<h3>Experiment planning</h3>")]
    assert "Associational, not an effect." in model
    assert "not what switching to gpt would do" in model
    # rated share: gpt 3 of 5, claude 3 of 4
    assert '<td>gpt</td><td class="num">5</td><td class="num">3</td><td class="num">0.600</td>' in model
    assert '<td>claude</td><td class="num">4</td><td class="num">3</td><td class="num">0.750</td>' in model
    # n_turns: gpt 1..5 (mean 3, var 2.5), claude 2, 4, 6, 8 (mean 5, var 20/3): d = -2 / sqrt((2.5 + 20/3) / 2)
    d = -2 / math.sqrt((2.5 + 20 / 3) / 2)
    assert f"{d:+.2f}" == "-0.93"
    assert '<td>n_turns</td><td class="num">3.000</td><td class="num">5.000</td><td class="num">-0.93</td>' in model
    assert "1 of 1 features differ between the arms by more than 0.1 standard deviations" in model
    design = html[html.index('id="design"') :]
    assert "<td>model</td><td>observational</td>" in design and "<td>planning</td><td>randomized</td>" in design
    planning = html[html.index("<h3>Experiment planning</h3>") :]
    assert "Associational" not in planning.split("<h2")[0]  # the randomized experiment: no such paragraph


def test_a_field_that_is_no_session_field_is_one_line_naming_the_file_and_the_key(tmp_path):
    path = tmp_path / "experiments.toml"
    path.write_text('[experiments.model]\ncontrol = "claude"\narms_from = "modle"\n')
    with pytest.raises(SettingsFileError) as error:
        experiments_config(path)
    message = str(error.value)
    assert message.startswith(f"{path}, line 3: experiments.model.arms_from 'modle' is no session field")
    assert "metadata.<key>" in message and "\n" not in message
    for bad, what in (
        ('"metadata."', "is no metadata path"),
        ('"metadata_json"', "is no session field"),
        ('"session_id"', "names each session alone"),
        ("3", "must name a session field"),
    ):
        path.write_text(f"[experiments.model]\narms_from = {bad}\n")
        with pytest.raises(SettingsFileError, match=what):
            experiments_config(path)
    path.write_text('[experiments.model]\narms_from = "metadata.model"\ncontrol = "x"\narms = ["a", "b"]\n')
    with pytest.raises(SettingsFileError, match=r"line 3: experiments.model: control 'x' is not one of its arms"):
        experiments_config(path)
    path.write_text('[experiments.model]\narms_from = "metadata.model"\nsplit = { a = 1, b = 1 }\n')
    with pytest.raises(SettingsFileError, match=r"line 3: experiments.model.split: arms from a session field"):
        experiments_config(path)
    path.write_text('[experiments.model]\narms = ["a"]\n')
    with pytest.raises(SettingsFileError, match=r"line 2: .*give arms_from too"):
        experiments_config(path)
    path.write_text('[experiments.model]\narms_from = "metadata.metadata.team"\narms = ["a", "b"]\ncontrol = "a"\n')
    config = experiments_config(path)
    assert config.arms_from == {"model": ArmsFrom("metadata.metadata.team", ("a", "b"))}
    assert config.controls == {"model": "a"}


def test_the_preflight_refuses_the_bad_key_before_any_work(pulse_home):
    from pulse_pipeline.preflight import check_settings

    (pulse_home.root / "experiments.toml").write_text('[experiments.model]\narms_from = "metadata..model"\n')
    with pytest.raises(SettingsFileError, match=r"experiments.toml, line 2: experiments.model.arms_from"):
        check_settings(pulse_home, {})


@pytest.mark.slow
def test_a_synthetic_corpus_with_models_and_no_assignments_file_runs_end_to_end(pulse_home, tmp_path, monkeypatch):
    """The generator's sessions, each record given a ``model`` (every third session none), no assignments file:
    the experiment declared with ``arms_from`` is estimated, marked observational, and the report says so."""
    import duckdb

    from pulse_pipeline.runs import ingest
    from pulse_pipeline.synth import write_corpus

    monkeypatch.setenv("PULSE_CV_SEEDS", "2")
    monkeypatch.setenv("PULSE_MODEL_FAMILIES", "lightgbm")
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 900, seed=5)
    (corpus / "assignments.csv").unlink()
    models = {}
    for path in sorted(corpus.glob("sessions-*.jsonl")):
        lines = []
        for line in path.read_text().splitlines():
            record = json.loads(line)
            number = int(record["session_id"].rsplit("-s", 1)[1])
            if number % 3:  # every third session has no model: in no arm
                record["model"] = models[record["session_id"]] = "gpt-5" if number % 3 == 1 else "claude-4-sonnet"
            lines.append(json.dumps(record))
        path.write_text("\n".join(lines) + "\n")
    (pulse_home.root / "experiments.toml").write_text(
        '[experiments.model]\narms_from = "metadata.model"\ncontrol = "claude-4-sonnet"\n'
    )
    ingest(pulse_home, corpus, say=lambda _: None)
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        rows = con.execute(
            "SELECT treatment, control, method, design, note, effect, n_labeled_treatment, n_labeled_control,"
            " N_unlabeled_treatment, N_unlabeled_control FROM estimates.experiment_effects"
        ).fetchall()
        labels = dict(con.execute("SELECT session_id, label FROM staging.session_labels").fetchall())
        staged = {s for (s,) in con.execute("SELECT session_id FROM staging.sessions").fetchall()}
        conclusion = con.execute("SELECT design, sentence FROM estimates.conclusions").fetchall()
    # the arms and the difference of rated means, from what the test wrote and the labels staging kept
    arms = {arm: [s for s, m in models.items() if m == arm and s in staged] for arm in ("gpt-5", "claude-4-sonnet")}
    rated = {arm: [labels[s] for s in ids if s in labels] for arm, ids in arms.items()}
    without = len(staged) - sum(len(ids) for ids in arms.values())
    assert without > 0
    naive = next(r for r in rows if r[2] == "naive_welch")
    treatment, control, _, design, note, effect, n_t, n_c, big_n_t, big_n_c = naive
    assert (treatment, control, design) == ("gpt-5", "claude-4-sonnet", OBSERVATIONAL)
    assert (n_t, n_c) == (len(rated["gpt-5"]), len(rated["claude-4-sonnet"]))
    assert (n_t + big_n_t, n_c + big_n_c) == (len(arms["gpt-5"]), len(arms["claude-4-sonnet"]))
    mean = {arm: sum(v) / len(v) for arm, v in rated.items()}
    assert effect == pytest.approx(mean["gpt-5"] - mean["claude-4-sonnet"])
    assert f"{without} session(s) without metadata.model" in note
    assert {r[3] for r in rows} == {OBSERVATIONAL}
    [(design, sentence)] = conclusion
    assert design == OBSERVATIONAL and "an association, not the effect of gpt-5" in sentence
    report = (pulse_home.root / "report" / "index.html").read_text()
    assert "Associational, not an effect." in report and "Feature balance" in report


def test_the_cli_says_the_bad_key_in_one_line(pulse_home, tmp_path, capsys):
    from pulse_pipeline import cli

    path = pulse_home.root / "experiments.toml"
    path.write_text('[experiments.model]\narms_from = "metadata.model"\n\n[experiments.v]\narms_from = "version"\n')
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "ratings.csv").write_text("session_id,rating\ns1,5\n")
    code = cli.main(["ingest", str(drop)])
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and "Traceback" not in err
    assert line.startswith(f"pulse ingest: {path}, line 5: experiments.v.arms_from 'version' is no session field: ")
    assert "source_format, user_id, experiment, variant" in line and line.endswith(") or metadata.<key>")


def test_a_session_in_two_experiments_counts_once_where_sessions_are_pooled(frame):
    from pulse_pipeline.estimates.benchmarks import CLUSTER_FEATURE, cluster_ratings
    from pulse_pipeline.estimates.label_shift import label_shift_rows
    from pulse_pipeline.features.wide import option_column

    # the frame holds c1..c4 and g1..g5 in the model experiment, and seven of them again in planning
    assert frame.height == 9 + 7
    [row] = label_shift_rows(frame, ["n_turns"])
    assert (row.n_rated, row.n_unrated) == (6, 3)  # c1-c3 and g1-g3 rated; c4, g4, g5 not
    column = option_column(CLUSTER_FEATURE, "fix_bugs")
    both = pl.concat(
        [
            frame.select("session_id", "variant", "labeled", "label"),
            frame.filter(pl.col("experiment") == "model").select("session_id", "variant", "labeled", "label"),
        ]  # the same arm names in a second experiment
    ).with_columns(pl.lit(1).alias(column))
    ratings = cluster_ratings(both, ["fix_bugs"])
    assert sorted(ratings.filter(pl.col("variant") == "gpt")["session_id"].to_list()) == ["g1", "g2", "g3"]


SAMPLES = Path("/work/shared/samples")


class _Reader:
    """What ``assigned_sessions`` asks of a warehouse, over a read-only connection to a published file."""

    def __init__(self, con) -> None:
        self.con = con

    def frame(self, sql: str, params: list | None = None) -> pl.DataFrame:
        return self.con.execute(sql, params or []).pl()


@pytest.mark.slow
@pytest.mark.skipif(
    not (SAMPLES / "claude_code").is_dir() or not (SAMPLES / "codex").is_dir(),
    reason="the real Claude Code and Codex samples (../shared/samples) are not on this machine",
)
def test_real_claude_code_and_codex_sessions_get_their_model_as_arm(pulse_home, tmp_path):
    """The real samples: each Claude Code session's main model (the one most of its usage names) and the Codex
    rollout's ``gpt-5.5``; simonw's Codex sample names no model, so it is in no arm (read from the files)."""
    import shutil

    import duckdb

    from pulse_pipeline.runs import ingest

    drop = tmp_path / "real"
    drop.mkdir()
    for path in [*(SAMPLES / "claude_code").glob("*.jsonl"), *(SAMPLES / "codex").glob("*.jsonl")]:
        shutil.copy(path, drop / path.name)
    ingest(pulse_home, drop, say=lambda _: None)
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        frame = assigned_sessions(_Reader(con), with_features=False, arms_from={"model": ArmsFrom("metadata.model")})
    arms = dict(frame.group_by("variant").agg(pl.col("session_id").sort()).iter_rows())
    assert arms == {
        "claude-3-sonnet-20240229": ["edge_cases", "session_b", "test_session"],
        "gpt-5.5": ["019e9625-802f-7e91-840a-cfe88d14117a"],
    }
    assert set(frame["design"]) == {OBSERVATIONAL}
    assert "1 session(s) without metadata.model" in frame["design_note"][0]
