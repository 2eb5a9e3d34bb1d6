"""The preflight: every settings file a ``pulse`` command or the code location would read, read whole first by the
very functions the stages use, so a bad one stops the work at once in one line (``settings_files.py`` says why).

A module of its own, above the stages, because it calls each stage's reader (``estimates.experiments``,
``estimates.benchmarks``, ``features.agreement``, ``features.rubric``), while those readers raise
``settings_files.SettingsFileError``: kept in ``settings_files.py``, the two imported each other.
"""

from __future__ import annotations

from typing import Any

from .estimates.benchmarks import load_benchmarks
from .estimates.experiments import experiments_config
from .features.agreement import read_human_labels
from .features.rubric import load_rubric
from .settings import Env, feature_settings
from .settings_files import SettingsFileError, check_environment, human_labels_path


def check_settings(home: Any, environ: Env | None = None) -> list[str]:
    """Read every settings file ``home`` (a ``paths.PulseHome``) and the environment select, with the very
    functions the stages use; raise the first problem (``SettingsFileError`` or ``settings.SettingsError``, one
    line each). Returns one line per file read, for a log."""
    check_environment(environ)
    features = feature_settings(environ)
    rubric = load_rubric(features.rubric_path)
    experiments = home.experiments_file
    experiments_config(experiments.path)
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
