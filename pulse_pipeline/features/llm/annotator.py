"""The LLM annotator: the paper's two annotation prompts (analysis, issues), rendered from the rubric, per session."""

from __future__ import annotations

from ..annotation import Annotation, Answer, SessionTranscript
from ..prompts import PROMPT_VERSION, analysis_template, issues_template, render_transcript
from ..redact import redact
from ..rubric import Rubric
from .answers import ParsedAnnotation, analysis_check, issues_check
from .complete import describe_error
from .engine import LLMClient, has_user_message


def _joined_error(errors: list[str]) -> str | None:
    """The distinct errors of a session's prompts, in order, as one text."""
    unique = list(dict.fromkeys(errors))
    return "; ".join(unique) if unique else None


class LLMAnnotator(LLMClient):
    """The paper's two annotation prompts, rendered from the rubric, for every session (see the package docstring).

    ``Annotation.prompt_tokens``/``completion_tokens``/``cost_usd`` are what the answers cost, whether paid now or
    by an earlier run (a cached answer reports its original cost, so a re-run writes identical rows); ``totals``
    counts only what this instance paid. ``notes`` records ``truncated``, ``cached`` (which prompts came from the
    cache) and ``sentiment_examples`` (the example messages the analysis prompt asks for).
    """

    name = "llm"
    label = "llm annotator"
    parallel = False  # waits on a server and caches through the warehouse's connection: stays in this process

    def prompt_version(self, rubric: Rubric) -> str:
        return f"{PROMPT_VERSION}+{rubric.digest}"

    def depends_on(self) -> str:
        """What else the answers depend on: the model, and how much of a transcript it reads."""
        return f"{self.settings.model}/{self.settings.transcript_chars}"

    def annotate(self, transcripts: list[SessionTranscript], rubric: Rubric) -> list[Annotation]:
        prompts = [
            (kind, template, check, rubric.by_prompt(kind))
            for kind, template, check in (
                ("analysis", analysis_template(rubric), analysis_check(rubric)),
                ("issues", issues_template(rubric), issues_check(rubric)),
            )
            if rubric.by_prompt(kind)
        ]
        version = self.prompt_version(rubric)

        def base(t: SessionTranscript, status: str, explanation: str, error: str | None) -> Annotation:
            answers = {f.name: Answer("", explanation) for f in rubric.features}
            return Annotation(t.session_id, self.name, version, "", answers, status, self.settings.model, error=error)

        def one(t: SessionTranscript) -> Annotation:
            if not has_user_message(t):
                self.engine.tally("skipped")
                return base(t, "skipped", "no user message", None)
            text, truncated = render_transcript(t, self.settings.transcript_chars, redact=redact)
            answers: dict[str, Answer] = {}
            notes: dict[str, str] = {"truncated": truncated} if truncated else {}
            task, errors, cached = "", [], []
            p_tok = c_tok = 0
            cost = 0.0
            for kind, template, check, features in prompts:
                res = self.engine.ask(template.format(combined_messages=text), check)
                p_tok, c_tok, cost = p_tok + res.prompt_tokens, c_tok + res.completion_tokens, cost + res.cost_usd
                if res.status == "ok":
                    parsed: ParsedAnnotation = res.value
                    answers.update(parsed.answers)
                    notes.update(parsed.notes)
                    task = task or parsed.task_description
                    if res.cached:
                        cached.append(kind)
                else:
                    errors.append(res.error or "failed")
                    answers.update({f.name: Answer("", res.error or "failed") for f in features})
            if cached:
                notes["cached"] = ",".join(cached)
            status = "failed" if errors else "truncated" if truncated else "ok"
            self.engine.tally(status)
            return Annotation(
                t.session_id,
                self.name,
                version,
                task,
                answers,
                status,
                self.settings.model,
                prompt_tokens=p_tok,
                completion_tokens=c_tok,
                cost_usd=cost,
                error=_joined_error(errors),
                notes=notes,
            )

        def crashed(t: SessionTranscript, exc: BaseException) -> Annotation:
            self.engine.tally("failed")
            return base(t, "failed", describe_error(exc), describe_error(exc))

        return self.engine.run(list(transcripts), one, crashed)
