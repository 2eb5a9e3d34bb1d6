"""Staged sessions through an annotator (or the LLM judge), batch by batch: read transcripts, ask, write.

Only the sessions whose record changed since the annotator last wrote them are read and annotated
(``incremental.py``): a session's version is its record's and its user text's (``TRANSCRIPT_VERSIONS_SQL``), plus
what else the answers depend on (the annotator's prompt version, which scopes its rows, and
``Annotator.depends_on``: an LLM's model). A new prompt version, or a new model, annotates every session again; the
LLM cache (``llm/cache.py``) answers what was asked before.

Batches (``transcripts.transcript_tables``) keep memory to a few batches' events whatever the size of the
warehouse; each batch is written as soon as it is answered. An annotator that is pure Python work
(``Annotator.parallel``: the heuristic one) answers the batches in worker processes, one per core, when there are
enough sessions to pay for starting them (``workers.py``); the rows, and their order, are the same. The asset's
writes are one transaction, so a run that stops writes nothing, but every LLM answer is committed to the cache at
once (``llm/cache.py``, its own cursor): the re-run pays for nothing already answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import pyarrow as pa

from .. import tables
from ..incremental import Refreshed, recompute_later, refreshing
from ..processes import ordered_map
from ..staging import SESSION_VERSIONS_SQL
from ..warehouse import Warehouse
from . import store
from .annotation import Annotator
from .llm.judge import LLMJudge
from .prompts import PROMPT_VERSION
from .rubric import Rubric
from .transcripts import iter_transcripts, transcript_tables, transcripts_of
from .user_text import with_user_text_version
from .workers import TASK_SESSIONS, worker_count

TRANSCRIPT_VERSIONS_SQL = with_user_text_version(SESSION_VERSIONS_SQL)
"""A session's version for what is read off its transcript: its record's, and the one its user text (the redacted
messages the transcript shows) was computed from."""


@dataclass
class AnnotationRun:
    """What ``annotate_sessions`` left: the annotator's sessions (this prompt version) and how many per status, the
    sessions it annotated now, and the prompt version."""

    sessions: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    prompt_version: str = ""
    sessions_touched: int = 0


def annotation_batch(annotator: Annotator, rubric: Rubric, rows: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The annotation rows (``store.annotation_tables``) of one batch of ``transcripts.transcript_tables``: the
    work a worker process does."""
    return store.annotation_tables(annotator.annotate(transcripts_of(rows), rubric))


def annotate_sessions(
    wh: Warehouse,
    annotator: Annotator,
    rubric: Rubric,
    say: Callable[[str], None] = print,
    workers: int | None = None,
) -> AnnotationRun:
    """Annotate the staged sessions whose record changed (every one, for a new prompt version or model) and write
    the answers, replacing the rows of the same annotator and prompt version; rows of sessions no longer staged go.
    A session whose annotation failed is annotated again next time, as a rebuild would. ``say`` gets a line per
    batch. ``workers``: processes answering the batches (``processes.ordered_map``); by default one per core for an
    ``Annotator.parallel`` annotator and at least ``workers.PARALLEL_SESSIONS`` sessions, else 1."""
    version = annotator.prompt_version(rubric)
    key = f"{tables.ANNOTATIONS.qualified}/{annotator.name}/{version}"
    scope, params = "annotator = ? AND prompt_version = ?", [annotator.name, version]
    with refreshing(wh, key, TRANSCRIPT_VERSIONS_SQL, annotator.depends_on()) as refresh:
        for t in (tables.ANNOTATIONS, tables.ANNOTATION_VALUES):
            refresh.delete(wh, t, scope, params)
        if workers is None:
            workers = worker_count(refresh.touched) if getattr(annotator, "parallel", False) else 1
        batches = transcript_tables(wh, TASK_SESSIONS, session_ids=refresh.session_ids(wh))
        done = 0
        for rows in ordered_map(partial(annotation_batch, annotator, rubric), batches, workers):
            store.append_annotation_tables(wh, rows)
            done += rows[0].num_rows
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
    with refreshing(wh, key, TRANSCRIPT_VERSIONS_SQL, depends_on) as refresh:
        refresh.delete(wh, t, "model = ?", [model])
        for batch in iter_transcripts(wh, session_ids=refresh.session_ids(wh)):
            store.append_judge_scores(wh, judge.judge(batch))
    recompute_later(wh, key, f"SELECT session_id FROM {t.qualified} WHERE model = ? AND status = 'failed'", [model])
    return Refreshed(wh.count(t, "model = ?", [model]), refresh.touched)
