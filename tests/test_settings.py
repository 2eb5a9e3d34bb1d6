"""settings.py: the one reader of PULSE_* variables; defaults, parsing, and errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulse_pipeline import settings
from pulse_pipeline.settings import SettingsError


def test_defaults_when_nothing_is_set():
    assert settings.ingest_settings({}) == settings.IngestSettings(duckdb_memory="1GB", workers=None)
    assert settings.feature_settings({}) == settings.FeatureSettings("heuristic", None, None, None)
    assert settings.modeling_settings({}).families == (
        "ordinal_logit",
        "random_forest",
        "hist_gbm",
        "lightgbm",
        "text",
        "sentiment",
        "baseline",
        "stack",
    )
    assert settings.modeling_settings({}).choose_by == "pearson"
    assert settings.estimate_settings({}) == settings.EstimateSettings(0.6, 0.02, 10, 0.05, 35)


def test_values_are_parsed_and_blank_means_unset():
    env = {
        "PULSE_INGEST_WORKERS": "0",  # at least one worker
        "PULSE_ANNOTATOR": " LLM ",
        "PULSE_RUBRIC": "~/r.toml",
        "PULSE_LLM_MODEL": "",
        "PULSE_MODEL_FAMILIES": "hist_gbm, lightgbm",
        "PULSE_CV_SEEDS": "2",
        "PULSE_TARGET_EFFECT": "0.1",
    }
    assert settings.ingest_settings(env).workers == 1
    limits = settings.ingest_settings({"PULSE_MAX_RECORD_MB": "0.5", "PULSE_MAX_RECORD_VALUES": "1000"})
    assert (limits.max_record_bytes, limits.max_record_values) == (524_288, 1000)
    assert settings.ingest_settings({}).max_record_bytes == 64 * 1024 * 1024
    f = settings.feature_settings(env)
    assert (f.annotator, f.rubric_path, f.llm_model) == ("llm", Path("~/r.toml").expanduser(), None)
    m = settings.modeling_settings(env)
    assert (m.families, m.cv_seeds) == (("hist_gbm", "lightgbm"), 2)
    assert settings.estimate_settings(env).target_effect == 0.1


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"PULSE_ANNOTATOR": "oracle"}, "PULSE_ANNOTATOR"),
        ({"PULSE_MODEL_FAMILIES": "xgboost"}, "PULSE_MODEL_FAMILIES"),
        ({"PULSE_MODEL_CHOICE": "r2"}, "PULSE_MODEL_CHOICE"),
        ({"PULSE_CV_SEEDS": "many"}, "PULSE_CV_SEEDS"),
        ({"PULSE_SHIFT_AUC": "high"}, "PULSE_SHIFT_AUC"),
        ({"PULSE_TARGET_EFFECT": "0"}, "PULSE_TARGET_EFFECT"),
        ({"PULSE_SEGMENT_MIN_RATINGS": "1"}, "PULSE_SEGMENT_MIN_RATINGS"),
        ({"PULSE_INGEST_WORKERS": "two"}, "PULSE_INGEST_WORKERS"),
        ({"PULSE_MAX_RECORD_MB": "0"}, "PULSE_MAX_RECORD_MB"),
        ({"PULSE_MAX_RECORD_MB": "inf"}, "PULSE_MAX_RECORD_MB"),
        ({"PULSE_MAX_RECORD_VALUES": "0"}, "PULSE_MAX_RECORD_VALUES"),
    ],
)
def test_a_bad_value_names_its_variable(env, named):
    readers = [settings.ingest_settings, settings.feature_settings, settings.modeling_settings]
    with pytest.raises(SettingsError, match=named):
        for read in [*readers, settings.estimate_settings]:
            read(env)


def test_home_is_absolute(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert settings.home_root({}) == tmp_path / "data"
    assert settings.home_root({"PULSE_HOME": "elsewhere"}) == tmp_path / "elsewhere"
