"""The paper's LLM-as-a-judge baseline: its prompt, verbatim, over the whole conversation of each session."""

from __future__ import annotations

from dataclasses import dataclass

from ..annotation import SessionTranscript
from ..prompts import JUDGE_TEMPLATE, PROMPT_VERSION, render_transcript
from ..redact import redact
from .answers import JudgeAnswer, judge_check
from .complete import describe_error
from .engine import LLMClient, has_user_message


@dataclass(frozen=True)
class JudgeScore:
    """One row of ``features.judge_scores`` (its columns, in its order)."""

    session_id: str
    model: str
    prompt_version: str
    binary_satisfied: bool | None
    likert_score: int | None
    explanation: str
    status: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None


class LLMJudge(LLMClient):
    """The paper's LLM-as-a-judge baseline: its prompt, verbatim, over the whole conversation of each session."""

    label = "llm judge"

    def judge(self, transcripts: list[SessionTranscript]) -> list[JudgeScore]:
        model = self.settings.model

        def unanswered(t: SessionTranscript, status: str, explanation: str, error: str | None) -> JudgeScore:
            return JudgeScore(
                t.session_id, model, PROMPT_VERSION, None, None, explanation=explanation, status=status, error=error
            )

        def one(t: SessionTranscript) -> JudgeScore:
            if not has_user_message(t):
                self.engine.tally("skipped")
                return unanswered(t, "skipped", "no user message", None)
            text, truncated = render_transcript(t, self.settings.transcript_chars, conversation=True, redact=redact)
            res = self.engine.ask(JUDGE_TEMPLATE.format(conversation=text), judge_check)
            ok = res.status == "ok"
            status = "failed" if not ok else "truncated" if truncated else "ok"
            self.engine.tally(status)
            answer: JudgeAnswer | None = res.value if ok else None
            return JudgeScore(
                session_id=t.session_id,
                model=model,
                prompt_version=PROMPT_VERSION,
                binary_satisfied=answer.binary_satisfied if answer else None,
                likert_score=answer.likert_score if answer else None,
                explanation=answer.explanation if answer else res.error or "failed",
                status=status,
                prompt_tokens=res.prompt_tokens,
                completion_tokens=res.completion_tokens,
                cost_usd=res.cost_usd,
                error=None if ok else res.error,
            )

        def crashed(t: SessionTranscript, exc: BaseException) -> JudgeScore:
            self.engine.tally("failed")
            return unanswered(t, "failed", describe_error(exc), describe_error(exc))

        return self.engine.run(list(transcripts), one, crashed)
