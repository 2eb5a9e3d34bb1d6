"""What an annotator reads (a session transcript) and what it answers (an annotation), whatever the annotator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .rubric import Rubric


@dataclass(frozen=True)
class AgentStep:
    """One agent action as an annotator sees it."""

    name: str  # canonical action name: run, run_ipython, edit, write, read, browse, message, finish, ...
    text: str | None  # command, code, path or message
    exit_code: int | None = None  # of the command's observation, when there is one
    written: str | None = None  # code the action wrote (edit/write contents, new_str), when the stream has it
    error: bool = False  # its observation was an error


@dataclass(frozen=True)
class SessionTranscript:
    session_id: str
    user_messages: tuple[str, ...]
    steps: tuple[AgentStep, ...] = ()
    agent_messages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answer:
    """One rubric feature's answer: ``value`` is a category, a list of categories joined by ``|``, or YES/NO."""

    value: str
    explanation: str


STATUSES = ("ok", "truncated", "failed", "skipped")


@dataclass(frozen=True)
class Annotation:
    session_id: str
    annotator: str  # heuristic | llm | human:<name>
    prompt_version: str  # rubric version + digest for the heuristic; prompt version + rubric digest for the LLM
    task_description: str
    answers: dict[str, Answer]  # rubric feature name -> answer
    status: str = "ok"  # one of STATUSES
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    notes: dict[str, str] = field(default_factory=dict)  # e.g. {"truncated": "kept 12000 of 50000 characters"}


class Annotator(Protocol):
    name: str
    parallel: bool
    """Whether ``annotate`` is pure Python work on the transcripts alone and the annotator pickles, so worker
    processes may run it (``workers.py``); an annotator without the attribute runs in the caller's process."""

    def prompt_version(self, rubric: Rubric) -> str:
        """The ``prompt_version`` its annotations of ``rubric`` carry: a new one means every session is annotated
        anew (rows of older versions are kept)."""
        ...

    def depends_on(self) -> str:
        """What else its answers depend on (an LLM's model, say): when it changes, every session is annotated anew,
        replacing the rows of the same prompt version."""
        ...

    def annotate(self, transcripts: list[SessionTranscript], rubric: Rubric) -> list[Annotation]:
        """One annotation per transcript, in order; never raises for one bad session (status says so)."""
        ...
