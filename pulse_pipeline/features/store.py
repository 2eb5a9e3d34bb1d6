"""The annotators' tables: features.annotations (one row per session), features.annotation_values (one row per
session and rubric feature) and features.judge_scores, written by column name; and the labels read back from them.

``features/annotate.py`` replaces what the same annotator and prompt version (or, for the judge, the same model)
wrote before for the sessions it annotates again."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
import pyarrow as pa

from .. import tables
from ..contract import to_frame
from ..warehouse import Warehouse
from .annotation import Annotation
from .llm.judge import JudgeScore


@dataclass(slots=True)  # slots, not frozen: a paper-scale run builds 400 000 of these rows, and this is faster
class AnnotationRow:
    """One row of ``features.annotations``: the summary answers the paper reports, status and cost."""

    session_id: str
    annotator: str
    prompt_version: str
    task_description: str
    sentiment: str | None
    sentiment_explanation: str | None
    task_type: str | None
    development_clusters: str | None
    status: str
    model: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    error: str | None
    notes_json: str | None


@dataclass(slots=True)
class AnnotationValueRow:
    """One row of ``features.annotation_values``: one rubric feature's answer for one session."""

    session_id: str
    annotator: str
    prompt_version: str
    feature: str
    value: str
    explanation: str


def annotation_row(a: Annotation) -> AnnotationRow:
    """The summary row of an annotation; a feature the rubric does not have is NULL."""

    def answer(feature: str) -> tuple[str | None, str | None]:
        found = a.answers.get(feature)
        return (found.value, found.explanation) if found else (None, None)

    sentiment, sentiment_explanation = answer("sentiment")
    return AnnotationRow(
        session_id=a.session_id,
        annotator=a.annotator,
        prompt_version=a.prompt_version,
        task_description=a.task_description,
        sentiment=sentiment,
        sentiment_explanation=sentiment_explanation,
        task_type=answer("task_type")[0],
        development_clusters=answer("development_cluster")[0],
        status=a.status,
        model=a.model,
        prompt_tokens=a.prompt_tokens,
        completion_tokens=a.completion_tokens,
        cost_usd=a.cost_usd,
        error=a.error,
        notes_json=orjson.dumps(a.notes).decode() if a.notes else None,
    )


def annotation_value_rows(a: Annotation) -> list[AnnotationValueRow]:
    """One row per rubric feature the annotation answers."""
    return [
        AnnotationValueRow(
            session_id=a.session_id,
            annotator=a.annotator,
            prompt_version=a.prompt_version,
            feature=feature,
            value=answer.value,
            explanation=answer.explanation,
        )
        for feature, answer in a.answers.items()
    ]


def annotation_tables(annotations: list[Annotation]) -> tuple[pa.Table, pa.Table]:
    """The rows of one batch of annotations, checked against the contract: ``features.annotations`` (a summary row
    each) and ``features.annotation_values`` (a row per rubric feature answered). Plain Arrow, so a worker process
    can build them (``workers.py``)."""
    summary = to_frame(tables.ANNOTATIONS, [annotation_row(a) for a in annotations])
    values = to_frame(tables.ANNOTATION_VALUES, [row for a in annotations for row in annotation_value_rows(a)])
    return summary.to_arrow(), values.to_arrow()


def append_annotation_tables(wh: Warehouse, rows: tuple[pa.Table, pa.Table]) -> None:
    """Append what ``annotation_tables`` made."""
    summary, values = rows
    wh.insert(tables.ANNOTATIONS, summary)
    wh.insert(tables.ANNOTATION_VALUES, values)


def append_annotations(wh: Warehouse, annotations: list[Annotation]) -> None:
    """Append one batch of annotations: a summary row each, and a row per rubric feature answered."""
    append_annotation_tables(wh, annotation_tables(annotations))


def append_judge_scores(wh: Warehouse, scores: list[JudgeScore]) -> None:
    """Append one batch of judge scores (``JudgeScore`` is the table's row)."""
    wh.append(tables.JUDGE_SCORES, scores)


def latest_prompt_version(wh: Warehouse, annotator: str) -> str | None:
    """The newest prompt version ``annotator`` has answers for, or None when it has none."""
    sql = f"SELECT max(prompt_version) FROM {tables.ANNOTATIONS.qualified} WHERE annotator = ?"
    return wh.con.execute(sql, [annotator]).fetchone()[0]


def annotator_names(wh: Warehouse) -> list[str]:
    """Every annotator with rows in features.annotations, in name order."""
    sql = f"SELECT DISTINCT annotator FROM {tables.ANNOTATIONS.qualified} ORDER BY 1"
    return [r[0] for r in wh.con.execute(sql).fetchall()]


def read_labels(wh: Warehouse, annotator: str, prompt_version: str | None = None) -> dict[str, dict[str, str]]:
    """session -> feature -> value for one annotator (its latest prompt version unless one is named)."""
    if prompt_version is None:
        prompt_version = latest_prompt_version(wh, annotator)
    out: dict[str, dict[str, str]] = {}
    for session_id, feature, value in wh.con.execute(
        f"SELECT session_id, feature, value FROM {tables.ANNOTATION_VALUES.qualified}"
        " WHERE annotator = ? AND prompt_version = ? AND value IS NOT NULL AND value <> ''",
        [annotator, prompt_version],
    ).fetchall():
        out.setdefault(session_id, {})[feature] = value
    return out


def labels_by_annotator(wh: Warehouse) -> dict[str, dict[str, dict[str, str]]]:
    """annotator -> session -> feature -> value, for every annotator (its latest prompt version)."""
    return {name: read_labels(wh, name) for name in annotator_names(wh)}
