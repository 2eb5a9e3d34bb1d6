"""Annotator agreement: raw agreement and Cohen's kappa per rubric feature, and the human-labels CSV reader."""

from __future__ import annotations

import math
from dataclasses import astuple
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from pulse_pipeline import tables
from pulse_pipeline.features.agreement import (
    NOTE_NO_OVERLAP,
    NOTE_SINGLE_LABEL,
    AgreementRow,
    agreement,
    normalize_value,
    pairwise_agreement,
    read_human_labels,
)
from pulse_pipeline.features.rubric import DEFAULT_RUBRIC, load_rubric

RUBRIC = load_rubric(DEFAULT_RUBRIC)


def by_feature(rows: list[AgreementRow]) -> dict[str, AgreementRow]:
    return {r.feature: r for r in rows}


def test_rows_match_the_table_columns():
    assert list(AgreementRow.__dataclass_fields__) == list(tables.ANNOTATOR_AGREEMENT.column_names)
    rows = agreement({}, {}, RUBRIC, "heuristic", "llm")
    assert [r.feature for r in rows] == [f.name for f in RUBRIC.features]
    assert len(astuple(rows[0])) == len(tables.ANNOTATOR_AGREEMENT.column_names)


def test_kappa_by_hand_on_a_two_by_two_table():
    # 10 sessions:            b = YES   b = NO
    #             a = YES        2        1       -> a says YES 3 times
    #             a = NO         1        6       -> b says YES 3 times
    # observed agreement p_o = (2 + 6) / 10 = 0.8
    # chance agreement p_e = P(a YES) P(b YES) + P(a NO) P(b NO) = 0.3 * 0.3 + 0.7 * 0.7 = 0.09 + 0.49 = 0.58
    # kappa = (p_o - p_e) / (1 - p_e) = (0.8 - 0.58) / (1 - 0.58) = 0.22 / 0.42 = 0.5238095...
    a = ["YES", "YES", "YES", "NO", "NO", "NO", "NO", "NO", "NO", "NO"]
    b = ["YES", "YES", "NO", "NO", "NO", "NO", "NO", "NO", "NO", "YES"]
    labels_a = {f"s{i}": {"scope_creep": v} for i, v in enumerate(a)}
    labels_b = {f"s{i}": {"scope_creep": v.lower()} for i, v in enumerate(b)}  # yes/no in any case
    row = by_feature(agreement(labels_a, labels_b, RUBRIC, "heuristic", "human"))["scope_creep"]
    assert (row.annotator_a, row.annotator_b, row.n_sessions) == ("heuristic", "human", 10)
    assert row.raw_agreement == pytest.approx(0.8)
    assert row.cohen_kappa == pytest.approx(0.22 / 0.42)
    assert row.note == ""


def test_kappa_matches_sklearn_on_three_categories():
    a = ["Positive", "Negative", "Neutral", "Positive", "Neutral", "Negative", "Positive", "Neutral", "Neutral"]
    b = ["Positive", "Neutral", "Neutral", "Positive", "Negative", "Negative", "Neutral", "Neutral", "Positive"]
    labels_a = {f"s{i}": {"sentiment": v} for i, v in enumerate(a)}
    labels_b = {f"s{i}": {"sentiment": v} for i, v in enumerate(b)}
    labels_b["only-b"] = {"sentiment": "Positive"}  # not labelled by a: left out
    row = by_feature(agreement(labels_a, labels_b, RUBRIC))["sentiment"]
    assert row.n_sessions == 9
    assert row.raw_agreement == pytest.approx(5 / 9)
    assert row.cohen_kappa == pytest.approx(cohen_kappa_score(a, b))


def test_categories_compare_the_joined_value_in_rubric_order():
    labels_a = {
        "s1": {"development_cluster": "Testing code|Fix python issues"},
        "s2": {"development_cluster": "Fix Java issues"},
    }
    labels_b = {
        "s1": {"development_cluster": "fix python issues | testing code"},
        "s2": {"development_cluster": "Fix Java issues|Testing code"},
    }
    row = by_feature(agreement(labels_a, labels_b, RUBRIC))["development_cluster"]
    assert row.n_sessions == 2 and row.raw_agreement == 0.5  # s1 agrees once normalized; s2 is another pair


def test_undefined_kappa_and_no_overlap_do_not_crash():
    same = {f"s{i}": {"insufficient_testing": "NO", "sentiment": "", "task_type": "Fix Bugs"} for i in range(5)}
    rows = by_feature(agreement(same, same, RUBRIC, "x", "y"))
    row = rows["insufficient_testing"]
    assert row.n_sessions == 5 and row.raw_agreement == 1.0 and math.isnan(row.cohen_kappa)
    assert row.note.startswith(NOTE_SINGLE_LABEL)
    empty = rows["sentiment"]  # "" is "not labelled" (a skipped session), not a label
    assert empty.n_sessions == 0 and math.isnan(empty.raw_agreement) and math.isnan(empty.cohen_kappa)
    assert empty.note == NOTE_NO_OVERLAP
    rows = agreement({"a": {"sentiment": "Positive"}}, {"b": {"sentiment": "Positive"}}, RUBRIC)
    assert all(r.n_sessions == 0 and r.note == NOTE_NO_OVERLAP for r in rows)
    # both sides constant but different: kappa is defined (0) and raw agreement is 0
    row = by_feature(agreement({"s": {"scope_creep": "YES"}}, {"s": {"scope_creep": "NO"}}, RUBRIC))["scope_creep"]
    assert row.raw_agreement == 0 and row.cohen_kappa == 0 and row.note == ""


def test_every_pair_of_annotators_in_name_order():
    labels = {
        "llm": {"s1": {"scope_creep": "NO"}},
        "heuristic": {"s1": {"scope_creep": "NO"}},
        "human": {"s1": {"scope_creep": "YES"}},
    }
    rows = pairwise_agreement(labels, RUBRIC)
    pairs = list(dict.fromkeys((r.annotator_a, r.annotator_b) for r in rows))
    assert pairs == [("heuristic", "human"), ("heuristic", "llm"), ("human", "llm")]
    assert len(rows) == 3 * len(RUBRIC.features)
    assert by_feature(rows[: len(RUBRIC.features)])["scope_creep"].raw_agreement == 0.0
    assert pairwise_agreement({"heuristic": labels["heuristic"]}, RUBRIC) == []


def test_normalize_value():
    f = RUBRIC.get
    assert normalize_value(f("scope_creep"), " yes ") == "YES"
    assert normalize_value(f("scope_creep"), "maybe") == "maybe"
    assert normalize_value(f("sentiment"), "positive") == "Positive"
    assert normalize_value(f("task_type"), "fix bugs") == "Fix Bugs"
    assert (
        normalize_value(f("development_cluster"), "Testing code; Fix python issues") == "Fix python issues|Testing code"
    )
    assert normalize_value(f("sentiment"), None) == normalize_value(f("sentiment"), "  ") == ""


def test_read_human_labels(tmp_path: Path):
    path = tmp_path / "labels.csv"
    path.write_text(
        "\ufeffsession_id,Sentiment,scope_creep,development_cluster,annotator,comment\n"
        's1,positive,yes,"Testing code|Fix python issues",ana,looks fine\n'
        "s2,Negative,No,,ana,\n"
        "s3,,,,bo,nothing labelled\n"
        ",Neutral,NO,,bo,no session id: skipped\n",
        encoding="utf-8",
    )
    labels, ignored = read_human_labels(path, RUBRIC)
    assert ignored == ["annotator", "comment"]
    assert labels == {
        "s1": {"sentiment": "Positive", "scope_creep": "YES", "development_cluster": "Fix python issues|Testing code"},
        "s2": {"sentiment": "Negative", "scope_creep": "NO"},
    }
    heuristic = {
        "s1": {"sentiment": "Positive", "scope_creep": "NO"},
        "s2": {"sentiment": "Negative", "scope_creep": "NO"},
    }
    rows = by_feature(agreement(heuristic, labels, RUBRIC, "heuristic", "human"))
    assert rows["sentiment"].raw_agreement == 1.0 and rows["scope_creep"].raw_agreement == 0.5


def test_read_human_labels_needs_a_session_id(tmp_path: Path):
    path = tmp_path / "labels.csv"
    path.write_text("id,sentiment\ns1,Positive\n", encoding="utf-8")
    with pytest.raises(ValueError, match="session_id"):
        read_human_labels(path, RUBRIC)
