"""The strata of ppi_stratified (estimates/strata.py): the configured column, each session's stratum, and the
pooling of small strata, each checked against labels and counts worked out by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pulse_pipeline.estimates.strata import (
    DEFAULT_STRATA,
    MIN_STRATUM_RATED,
    POOLED,
    UNKNOWN,
    pooled,
    strata_column,
    strata_columns,
    strata_problem,
    stratum_labels,
)
from pulse_pipeline.settings_files import SettingsFileError


def test_strata_column_default_top_level_and_per_experiment(tmp_path):
    assert strata_column(tmp_path / "absent.toml", "x") == DEFAULT_STRATA == "task_type"
    path = tmp_path / "experiments.toml"
    path.write_text('[experiments.a]\ncontrol = "c"\n')
    assert strata_column(path, "a") == "task_type"
    path.write_text('strata = "sentiment"\n\n[experiments.a]\ncontrol = "c"\n\n[experiments.b]\nstrata = "none"\n')
    assert strata_columns(path, ["a", "b", "zzz"]) == {"a": "sentiment", "b": "none", "zzz": "sentiment"}
    assert strata_column(path, "b") == "none"


def test_shipped_default_names_task_type():
    from pulse_pipeline.paths import DEFAULTS

    text = (DEFAULTS / "experiments.toml").read_text()
    assert '\nstrata = "task_type"\n' in text  # set, not only defaulted: the file shows people the key
    assert strata_column(DEFAULTS / "experiments.toml", "llm-backbone") == "task_type"


@pytest.mark.parametrize(
    ("text", "line"),
    [('strata = "task type"\n', 1), ('# a comment\n[experiments.a]\ncontrol = "c"\nstrata = 3\n', 4)],
)
def test_bad_strata_is_one_line_naming_file_and_line(tmp_path, text, line):
    path = tmp_path / "experiments.toml"
    path.write_text(text)
    with pytest.raises(SettingsFileError) as caught:
        strata_column(path, "a")
    message = str(caught.value)
    assert "experiments.toml" in message and f"line {line}" in message and "strata" in message
    assert "\n" not in message


def test_labels_from_one_hot_options_unknown_when_none_set_or_not_annotated():
    frame = pl.DataFrame(
        {
            "session_id": ["s1", "s2", "s3", "s4", "s5"],
            "task_type__fix_bugs": [1, 0, 0, None, 0],
            "task_type__write_documentation": [0, 1, 0, None, 1],
            "task_typed": [1, 1, 1, 1, 1],  # not an option column of task_type (no "__")
            "development_cluster__testing_code": [0, 1, 0, 0, 1],
            "development_cluster__administrative_tasks": [1, 1, 0, 0, 0],
        }
    )
    labels = stratum_labels(frame, "task_type")
    assert labels.tolist() == ["fix_bugs", "write_documentation", UNKNOWN, UNKNOWN, "write_documentation"]
    # a feature of several options per session: the options set, joined in column order
    both = stratum_labels(frame, "development_cluster")
    assert both.tolist() == ["administrative_tasks", "testing_code+administrative_tasks", UNKNOWN, UNKNOWN,
                             "testing_code"]  # fmt: skip


def test_labels_from_a_plain_column_and_quartiles_of_a_continuous_one():
    frame = pl.DataFrame({"agent": ["a", None, "b", "a"], "turns": [1.0, 2.0, None, 4.0]})
    assert stratum_labels(frame, "agent").tolist() == ["a", UNKNOWN, "b", "a"]
    assert stratum_labels(frame, "turns").tolist() == ["1.0", "2.0", UNKNOWN, "4.0"]  # few values: one each
    x = np.arange(1.0, 101.0)  # quartiles 25.75, 50.5, 75.25: 25 values in each quarter
    labels = stratum_labels(pl.DataFrame({"x": x}), "x")
    assert [int((labels == f"q{k}").sum()) for k in (1, 2, 3, 4)] == [25, 25, 25, 25]
    assert labels[0] == "q1" and labels[25] == "q2" and labels[-1] == "q4"


def test_missing_column_is_a_problem_not_a_crash():
    frame = pl.DataFrame({"a": [1]})
    assert "task_type" in strata_problem(frame, "task_type")
    assert strata_problem(frame, "none") is not None and strata_problem(frame, "a") is None
    with pytest.raises(ValueError, match="task_type"):
        stratum_labels(frame, "task_type")


def _sessions(counts: dict[str, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """labels and rated flags: stratum -> (rated, unrated)."""
    labels, rated = [], []
    for stratum, (r, u) in counts.items():
        labels += [stratum] * (r + u)
        rated += [True] * r + [False] * u
    return np.array(labels, dtype=object), np.array(rated)


def test_pooling_rule_by_hand():
    assert MIN_STRATUM_RATED == 30
    # big strata kept; the two small ones (10 and 25 ratings) pooled: 35 >= 30, so the pool stands alone
    labels, rated = _sessions({"a": (40, 100), "b": (30, 50), "c": (10, 90), "d": (25, 5)})
    out = pooled(labels, rated)
    assert sorted(set(out)) == ["a", "b", POOLED]
    assert (out[labels == "c"] == POOLED).all() and (out[labels == "d"] == POOLED).all()
    assert (out[labels == "a"] == "a").all() and (out[labels == "b"] == "b").all()
    # the pool short of 30 (10 + 5): merged with the kept stratum with the fewest ratings (b, 31), not a (40)
    labels, rated = _sessions({"a": (40, 100), "b": (31, 50), "c": (10, 90), "d": (5, 5)})
    out = pooled(labels, rated)
    assert (out[labels == "a"] == "a").all() and set(out[labels != "a"]) == {POOLED}
    # every stratum small: one stratum (the estimate is then PPI++)
    labels, rated = _sessions({"a": (5, 10), "b": (6, 10)})
    assert set(pooled(labels, rated)) == {POOLED}
    # nothing small: unchanged
    labels, rated = _sessions({"a": (30, 0), "b": (31, 3)})
    assert pooled(labels, rated).tolist() == labels.tolist()


def test_pooling_counts_each_arm():
    # stratum b has 40 ratings in arm 0 but 12 in arm 1: small in one arm is small; c is only in arm 0
    t_labels, t_rated = _sessions({"a": (50, 10), "b": (40, 10), "c": (35, 0)})
    c_labels, c_rated = _sessions({"a": (45, 10), "b": (12, 10), "c": (0, 0)})
    labels, rated = np.r_[t_labels, c_labels], np.r_[t_rated, c_rated]
    arm = np.r_[np.zeros(t_labels.size, int), np.ones(c_labels.size, int)]
    out = pooled(labels, rated, groups=arm)
    # b pooled (12 < 30 in arm 1); the pool (40 in arm 0, 12 in arm 1) still short: merged with c (35, absent in
    # arm 1, so its fewest is 35) rather than a (45): the pool then has 75 and 12, still short, so a joins too
    assert set(out) == {POOLED}
    out = pooled(labels, rated, min_rated=10, groups=arm)
    assert out.tolist() == labels.tolist()
    # at 13, b (12 in arm 1) is pooled, and merging c (35 ratings, none in arm 1) and then a leaves one stratum
    assert set(pooled(labels, rated, min_rated=13, groups=arm)) == {POOLED}
