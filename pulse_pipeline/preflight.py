"""The preflight: every settings file a home selects, and the ``PULSE_*`` variables, read whole before any work
starts, with the very functions the stages use (``settings_files`` says why and lists the files). It sits with the
entry points (``cli.py``, ``definitions.py`` call it) because it calls into the stages' readers."""

from __future__ import annotations

from typing import Any

from . import tables
from .estimates.benchmarks import load_benchmarks
from .estimates.experiments import experiments_config
from .estimates.guardrail_settings import check_guardrail_metrics
from .features.agreement import read_human_labels
from .features.rubric import load_rubric
from .features.wide import SCORE_COLUMNS, feature_columns
from .settings import Env, feature_settings
from .settings_files import SettingsFileError, check_environment, human_labels_path

DYNAMIC_COLUMNS = ("score_", "eval__")
"""Prefixes of ``features.session_features`` columns that only data or settings create (``features/wide.py``)."""


def check_settings(home: Any, environ: Env | None = None) -> list[str]:
    """Read every settings file ``home`` (a ``paths.PulseHome``) and the environment select, with the very
    functions the stages use; raise the first problem (``SettingsFileError`` or ``settings.SettingsError``, one
    line each). Returns one line per file read, for a log."""
    check_environment(environ)
    features = feature_settings(environ)
    rubric = load_rubric(features.rubric_path)
    experiments = home.experiments_file
    config = experiments_config(experiments.path)
    # a guardrail's metric: a numeric column features.session_features will have (score_* and eval__* columns
    # exist only once data or settings name them: the estimates stage checks those against its frame)
    columns = [c for c in tables.EVENT_FEATURES.column_names if c != "session_id"] + feature_columns(rubric)
    check_guardrail_metrics(experiments.path, config, [*columns, *SCORE_COLUMNS], prefixes=DYNAMIC_COLUMNS)
    benchmarks = home.benchmarks_file
    load_benchmarks(benchmarks.path, rubric)
    read = [
        f"rubric: {features.rubric_path or 'the paper rubric (shipped)'}",
        f"experiments: {experiments.path}",
        f"benchmarks: {benchmarks.path}",
    ]
    labels = human_labels_path(features, home)
    if labels is not None:
        if not labels.is_file():
            raise SettingsFileError(labels, "PULSE_HUMAN_LABELS names no file")
        read_human_labels(labels, rubric)
        read.append(f"human labels: {labels}")
    return read
