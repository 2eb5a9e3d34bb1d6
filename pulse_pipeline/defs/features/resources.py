"""Which annotator labels sessions, chosen by configuration: ``PULSE_ANNOTATOR=heuristic|llm`` (default heuristic),
the rubric by ``PULSE_RUBRIC`` (default: the paper's), the LLM by ``PULSE_LLM_MODEL`` and friends (features/llm.py)."""

import os
from pathlib import Path

import dagster as dg
import duckdb

from ...features.annotation import Annotator
from ...features.rubric import Rubric, load_rubric

ANNOTATORS = ("heuristic", "llm")


class AnnotatorResource(dg.ConfigurableResource):
    annotator: str = "heuristic"
    rubric_path: str | None = None
    human_labels_path: str | None = None

    def rubric(self) -> Rubric:
        return load_rubric(Path(self.rubric_path) if self.rubric_path else None)

    @property
    def llm_model(self) -> str | None:
        return os.environ.get("PULSE_LLM_MODEL") or None

    def build(self, con: duckdb.DuckDBPyConnection, progress, rubric: Rubric) -> Annotator:
        """The configured annotator for ``rubric`` (the caller's, read once); the LLM one caches its answers in the
        warehouse through ``con``."""
        if self.annotator not in ANNOTATORS:
            raise ValueError(f"PULSE_ANNOTATOR={self.annotator!r}: choose one of {', '.join(ANNOTATORS)}")
        if self.annotator == "heuristic":
            from ...features.heuristic import HeuristicAnnotator

            return HeuristicAnnotator(rubric)
        if not self.llm_model:
            raise ValueError("PULSE_ANNOTATOR=llm needs PULSE_LLM_MODEL (e.g. openai/gpt-5-mini or ollama_chat/qwen3)")
        from ...features.llm import LLMAnnotator, LLMCache, LLMSettings

        return LLMAnnotator(LLMSettings.from_env(), LLMCache(con), progress=progress)


def annotator_resource() -> AnnotatorResource:
    return AnnotatorResource(
        annotator=os.environ.get("PULSE_ANNOTATOR", "heuristic"),
        rubric_path=os.environ.get("PULSE_RUBRIC") or None,
        human_labels_path=os.environ.get("PULSE_HUMAN_LABELS") or None,
    )
