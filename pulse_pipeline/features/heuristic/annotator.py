"""``HeuristicAnnotator``: answers every rubric feature of every session with the rule its ``heuristic`` key names.

Per session it builds one ``SessionView`` and hands it to each rule; a malformed transcript or a broken rule fails
that session (status ``failed``, the error named), never the run.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..annotation import Annotation, SessionTranscript
from ..rubric import Rubric, RubricError, load_rubric
from .rules import HEURISTIC_VERSION, NO_USER, RULES, Rule
from .text import HEAD_CHARS, TAIL_CHARS, plural, task_description
from .view import SessionView


class UnknownRuleError(RubricError):
    """A rubric feature names a heuristic rule that ``RULES`` does not have."""


def check_rules(rubric: Rubric, rules: Mapping[str, Rule]) -> None:
    """Raise ``UnknownRuleError`` if a rubric feature names a rule ``rules`` lacks."""
    for i, f in enumerate(rubric.features):
        if not f.heuristic:
            raise UnknownRuleError(
                f"rubric {rubric.version!r} feature #{i + 1} {f.name!r} has no heuristic rule: only the LLM"
                " annotator answers it (PULSE_ANNOTATOR=llm), or give it a `heuristic` rule"
            )
        if f.heuristic not in rules:
            raise UnknownRuleError(
                f"rubric {rubric.version!r} feature #{i + 1} {f.name!r} names heuristic rule {f.heuristic!r}, "
                f"which the heuristic annotator does not have; known rules: {', '.join(sorted(rules))}"
            )


class HeuristicAnnotator:
    """Answers every rubric feature with the rule its ``heuristic`` key names (see the package docstring).

    ``rubric`` defaults to the paper's (``load_rubric()``); the pipeline passes the configured one. ``rules`` adds
    or replaces rules (name -> rule) on top of ``RULES``. Deterministic, offline, no state.
    """

    name = "heuristic"
    parallel = True  # plain rules over the transcript: worker processes may run them (``features/workers.py``)

    def __init__(self, rubric: Rubric | None = None, rules: Mapping[str, Rule] | None = None) -> None:
        self.rules: dict[str, Rule] = {**RULES, **(rules or {})}
        self.rubric = rubric or load_rubric()
        check_rules(self.rubric, self.rules)

    def prompt_version(self, rubric: Rubric) -> str:
        return f"heuristic-{HEURISTIC_VERSION}-{rubric.version}-{rubric.digest}"

    def depends_on(self) -> str:
        """Nothing beyond the prompt version: the rules are versioned by ``HEURISTIC_VERSION``."""
        return ""

    def annotate(self, transcripts: list[SessionTranscript], rubric: Rubric | None = None) -> list[Annotation]:
        rubric = rubric or self.rubric
        if rubric is not self.rubric:
            check_rules(rubric, self.rules)
        return [self._one(t, rubric, self.prompt_version(rubric)) for t in transcripts]

    def _one(self, t: SessionTranscript, rubric: Rubric, version: str) -> Annotation:
        sid = getattr(t, "session_id", None)
        sid = sid if isinstance(sid, str) else str(sid)
        try:
            v = SessionView(t)
        except Exception as exc:  # a malformed transcript: say so, never raise
            return Annotation(sid, self.name, version, "", {}, status="failed", error=f"transcript: {exc!r}")
        if not v.users:
            answers = {f.name: NO_USER for f in rubric.features}
            return Annotation(
                sid, self.name, version, "", answers, status="skipped", notes={"skipped": "no user message"}
            )
        answers, errors = {}, []
        for f in rubric.features:
            try:
                answers[f.name] = self.rules[f.heuristic](v, f)
            except Exception as exc:  # one broken rule fails the session, not the run
                errors.append(f"{f.name} ({f.heuristic}): {exc!r}")
        capped = v.n_capped + sum(s.capped for s in v.steps)
        notes = {}
        if capped:
            what = f"{plural(capped, 'text')} longer than {HEAD_CHARS + TAIL_CHARS}"
            notes["truncated"] = f"read the first {HEAD_CHARS} and last {TAIL_CHARS} characters of {what}"
        status = "failed" if errors else "truncated" if capped else "ok"
        error = "; ".join(errors) or None
        description = task_description(v.users[0])
        return Annotation(sid, self.name, version, description, answers, status=status, error=error, notes=notes)
