"""Every staged session through an annotator (or the LLM judge), batch by batch: read transcripts, ask, write.

Batches (``transcripts.iter_transcripts``) keep memory to one batch's events whatever the size of the warehouse;
each batch is written as soon as it is answered. The asset's writes are one transaction, so a run that stops
writes nothing, but every LLM answer is committed to the cache at once (``llm/cache.py``, its own cursor): the
re-run pays for nothing already answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ..warehouse import Warehouse
from . import store
from .annotation import Annotator
from .llm.judge import LLMJudge
from .rubric import Rubric
from .transcripts import iter_transcripts


@dataclass
class AnnotationRun:
    """What ``annotate_sessions`` wrote: sessions annotated, how many per status, the prompt version written."""

    sessions: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    prompt_version: str = ""


def annotate_sessions(
    wh: Warehouse, annotator: Annotator, rubric: Rubric, say: Callable[[str], None] = print
) -> AnnotationRun:
    """Annotate every staged session with ``annotator`` and write the answers (``store.write_annotations``; the
    first batch replaces what the same annotator and prompt version wrote before). ``say`` gets a line per batch."""
    run = AnnotationRun()
    statuses: Counter[str] = Counter()
    for i, batch in enumerate(iter_transcripts(wh)):
        annotations = annotator.annotate(batch, rubric)
        store.write_annotations(wh, annotations, first_batch=i == 0)
        statuses.update(a.status for a in annotations)
        run.sessions += len(annotations)
        run.prompt_version = run.prompt_version or (annotations[0].prompt_version if annotations else "")
        run.statuses = dict(statuses)
        say(f"annotated {run.sessions} sessions with {annotator.name} ({run.statuses})")
    return run


def judge_sessions(wh: Warehouse, judge: LLMJudge) -> int:
    """Score every staged session with the LLM judge, replacing what it wrote before with the same model; returns
    how many sessions were scored."""
    store.clear_judge_scores(wh, judge.settings.model)
    n = 0
    for batch in iter_transcripts(wh):
        scores = judge.judge(batch)
        store.append_judge_scores(wh, scores)
        n += len(scores)
    return n
