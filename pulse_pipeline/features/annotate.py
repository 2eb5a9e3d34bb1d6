"""Staged sessions through an annotator (or the LLM judge), batch by batch: read transcripts, ask, write.

Only the sessions whose record changed since the annotator last wrote them are read and annotated
(``incremental.py``): a session's version is its record's, plus what else the answers depend on (the annotator's
prompt version, which scopes its rows, and ``Annotator.depends_on``: an LLM's model). A new prompt version, or a
new model, annotates every session again; the LLM cache (``llm/cache.py``) answers what was asked before.

Batches (``transcripts.iter_transcripts``) keep memory to one batch's events whatever the size of the warehouse;
each batch is written as soon as it is answered. The asset's writes are one transaction, so a run that stops
writes nothing, but every LLM answer is committed to the cache at once (``llm/cache.py``, its own cursor): the
re-run pays for nothing already answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import tables
from ..incremental import Refreshed, recompute_later, refreshing
from ..staging import SESSION_VERSIONS_SQL
from ..warehouse import Warehouse
from . import store
from .annotation import Annotator
from .llm.judge import LLMJudge
from .prompts import PROMPT_VERSION
from .rubric import Rubric
from .transcripts import iter_transcripts


@dataclass
class AnnotationRun:
    """What ``annotate_sessions`` left: the annotator's sessions (this prompt version) and how many per status, the
    sessions it annotated now, and the prompt version."""

    sessions: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    prompt_version: str = ""
    sessions_touched: int = 0


def annotate_sessions(
    wh: Warehouse, annotator: Annotator, rubric: Rubric, say: Callable[[str], None] = print
) -> AnnotationRun:
    """Annotate the staged sessions whose record changed (every one, for a new prompt version or model) and write
    the answers, replacing the rows of the same annotator and prompt version; rows of sessions no longer staged go.
    A session whose annotation failed is annotated again next time, as a rebuild would. ``say`` gets a line per
    batch."""
    version = annotator.prompt_version(rubric)
    key = f"{tables.ANNOTATIONS.qualified}/{annotator.name}/{version}"
    scope, params = "annotator = ? AND prompt_version = ?", [annotator.name, version]
    with refreshing(wh, key, SESSION_VERSIONS_SQL, annotator.depends_on()) as refresh:
        for t in (tables.ANNOTATIONS, tables.ANNOTATION_VALUES):
            refresh.delete(wh, t, scope, params)
        done = 0
        for batch in iter_transcripts(wh, session_ids=refresh.session_ids(wh)):
            annotations = annotator.annotate(batch, rubric)
            store.append_annotations(wh, annotations)
            done += len(annotations)
            say(f"annotated {done} of {refresh.touched} changed sessions with {annotator.name}")
    failed = f"SELECT session_id FROM {tables.ANNOTATIONS.qualified} WHERE {scope} AND status = 'failed'"
    recompute_later(wh, key, failed, params)
    statuses = wh.con.execute(
        f"SELECT status, count(*) FROM {tables.ANNOTATIONS.qualified} WHERE {scope} GROUP BY 1 ORDER BY 1", params
    ).fetchall()
    return AnnotationRun(
        sessions=sum(n for _, n in statuses),
        statuses=dict(statuses),
        prompt_version=version,
        sessions_touched=refresh.touched,
    )


def judge_sessions(wh: Warehouse, judge: LLMJudge) -> Refreshed:
    """Score the staged sessions whose record changed with the LLM judge (every one, for a new prompt version or
    transcript budget), replacing what it wrote for them with the same model; failed ones are scored again next
    time."""
    model = judge.settings.model
    t = tables.JUDGE_SCORES
    depends_on = f"{PROMPT_VERSION}/{judge.settings.transcript_chars}"
    key = f"{t.qualified}/{model}"
    with refreshing(wh, key, SESSION_VERSIONS_SQL, depends_on) as refresh:
        refresh.delete(wh, t, "model = ?", [model])
        for batch in iter_transcripts(wh, session_ids=refresh.session_ids(wh)):
            store.append_judge_scores(wh, judge.judge(batch))
    recompute_later(wh, key, f"SELECT session_id FROM {t.qualified} WHERE model = ? AND status = 'failed'", [model])
    return Refreshed(wh.count(t, "model = ?", [model]), refresh.touched)
