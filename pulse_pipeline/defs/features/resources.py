"""Which annotator labels sessions, chosen by configuration (``settings.feature_settings()``): ``PULSE_ANNOTATOR``
heuristic | llm (default heuristic), the rubric by ``PULSE_RUBRIC`` (default: the paper's), human labels by
``PULSE_HUMAN_LABELS`` (default: ``PULSE_HOME/human_labels.csv`` when there is one), the LLM by ``PULSE_LLM_MODEL``
and friends (``settings.llm_settings()``)."""

from pathlib import Path

import dagster as dg
import duckdb

from ...features.annotation import Annotator
from ...features.rubric import Rubric, load_rubric
from ...paths import PulseHome
from ...settings import ANNOTATORS, FeatureSettings, feature_settings, llm_settings
from ...settings_files import human_labels_path


class AnnotatorResource(dg.ConfigurableResource):
    annotator: str = "heuristic"
    rubric_path: str | None = None  # None: the paper's rubric shipped with PULSE
    human_labels_path: str | None = None
    llm_model: str | None = None  # set: the LLM judge runs, and the LLM annotator may be chosen

    def rubric(self) -> Rubric:
        return load_rubric(Path(self.rubric_path) if self.rubric_path else None)

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
        from ...features.llm import LLMAnnotator, LLMCache

        return LLMAnnotator(llm_settings(), LLMCache(con), progress=progress)


def annotator_resource(settings: FeatureSettings | None = None, home: PulseHome | None = None) -> AnnotatorResource:
    """The resource for ``settings`` (default: read from the environment now); human labels from
    ``PULSE_HUMAN_LABELS``, else ``home``'s ``human_labels.csv`` if it has one."""
    settings = settings or feature_settings()
    human_labels = human_labels_path(settings, home)
    return AnnotatorResource(
        annotator=settings.annotator,
        rubric_path=str(settings.rubric_path) if settings.rubric_path else None,
        human_labels_path=str(human_labels) if human_labels else None,
        llm_model=settings.llm_model,
    )
