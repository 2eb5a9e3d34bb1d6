"""Writing annotations to features.annotations (one row per session) and features.annotation_values (one row per
session and rubric feature), replacing what the same annotator and prompt version wrote before."""

from __future__ import annotations

import orjson

from .. import tables
from ..warehouse import Warehouse
from .annotation import Annotation


def _summary(a: Annotation, name: str) -> tuple[str | None, str | None]:
    answer = a.answers.get(name)
    return (answer.value, answer.explanation) if answer else (None, None)


def write_annotations(wh: Warehouse, annotations: list[Annotation], *, first_batch: bool) -> None:
    """Append one batch; the first batch of a run first deletes the rows of the annotator and prompt versions
    it writes, so a re-run replaces them."""
    if not annotations:
        return
    if first_batch:
        for annotator, version in {(a.annotator, a.prompt_version) for a in annotations}:
            for t in (tables.ANNOTATIONS, tables.ANNOTATION_VALUES):
                wh.con.execute(
                    f"DELETE FROM {t.qualified} WHERE annotator = ? AND prompt_version = ?", [annotator, version]
                )
    rows = []
    values = []
    for a in annotations:
        sentiment, why = _summary(a, "sentiment")
        task_type, _ = _summary(a, "task_type")
        clusters, _ = _summary(a, "development_cluster")
        rows.append(
            (
                a.session_id,
                a.annotator,
                a.prompt_version,
                a.task_description,
                sentiment,
                why,
                task_type,
                clusters,
                a.status,
                a.model,
                a.prompt_tokens,
                a.completion_tokens,
                a.cost_usd,
                a.error,
                orjson.dumps(a.notes).decode() if a.notes else None,
            )
        )
        values.extend(
            (a.session_id, a.annotator, a.prompt_version, name, ans.value, ans.explanation)
            for name, ans in a.answers.items()
        )
    wh.insert_rows(tables.ANNOTATIONS, rows)
    wh.insert_rows(tables.ANNOTATION_VALUES, values)


def latest_prompt_version(wh: Warehouse, annotator: str) -> str | None:
    """The newest prompt version ``annotator`` has answers for, or None when it has none."""
    sql = "SELECT max(prompt_version) FROM features.annotations WHERE annotator = ?"
    return wh.con.execute(sql, [annotator]).fetchone()[0]


def read_labels(wh: Warehouse, annotator: str, prompt_version: str | None = None) -> dict[str, dict[str, str]]:
    """session -> feature -> value for one annotator (its latest prompt version unless one is named)."""
    if prompt_version is None:
        prompt_version = latest_prompt_version(wh, annotator)
    out: dict[str, dict[str, str]] = {}
    for session_id, feature, value in wh.con.execute(
        "SELECT session_id, feature, value FROM features.annotation_values WHERE annotator = ? AND prompt_version = ?"
        " AND value IS NOT NULL AND value <> ''",
        [annotator, prompt_version],
    ).fetchall():
        out.setdefault(session_id, {})[feature] = value
    return out
