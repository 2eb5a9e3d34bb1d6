"""Synthetic OpenHands corpora with a known truth: the session-level model, the event renderer, the writer.

Why: PULSE's estimators can only be validated on data whose arm effects are known; see ``model`` for the
generator's formulas, ``render`` for the event streams and ``corpus`` for the folder layout.
"""

from .corpus import CorpusSummary, truth_document, write_corpus
from .model import (
    ALL_ARMS,
    CONTROLS,
    EXPERIMENTS,
    FEATURE_NAMES,
    FEEDBACK_REASONS,
    SCENARIOS,
    TASK_TYPES,
    ArmEffect,
    GeneratorParams,
    SessionTable,
    default_n_users,
    direct_share,
    feature_matrix,
    rating_probability,
    simulate_sessions,
    true_arm_means,
    true_effects,
)
from .render import RenderedSession, SessionSpec, render_session, session_specs

__all__ = [
    "ALL_ARMS",
    "CONTROLS",
    "EXPERIMENTS",
    "FEATURE_NAMES",
    "FEEDBACK_REASONS",
    "SCENARIOS",
    "TASK_TYPES",
    "ArmEffect",
    "CorpusSummary",
    "GeneratorParams",
    "RenderedSession",
    "SessionSpec",
    "SessionTable",
    "default_n_users",
    "direct_share",
    "feature_matrix",
    "rating_probability",
    "render_session",
    "session_specs",
    "simulate_sessions",
    "true_arm_means",
    "true_effects",
    "truth_document",
    "write_corpus",
]
