"""The warehouse contract: every table PULSE writes, with its columns and DuckDB types.

Analysts and later stages rely on these names. The DDL (``warehouse.py``) and the row builders of the ingest
stage are both generated from this one list, so a column is added in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    schema: str
    name: str
    columns: tuple[tuple[str, str], ...]
    description: str

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def column_names(self) -> list[str]:
        return [c for c, _ in self.columns]


def _t(qualified: str, description: str, *columns: tuple[str, str]) -> Table:
    schema, name = qualified.split(".")
    return Table(schema, name, tuple(columns), description)


V, INT, B, D, T, BOOL = "VARCHAR", "INTEGER", "BIGINT", "DOUBLE", "TIMESTAMP", "BOOLEAN"

DROPS = _t(
    "raw.drops",
    "One row per drop: where it came from, its fingerprint and how many records were read, accepted and"
    " quarantined (the reconciliation the asset check verifies).",
    ("drop_id", V),
    ("path", V),
    ("fingerprint", V),
    ("n_files", INT),
    ("bytes", B),
    ("mtime", T),
    ("records_read", INT),
    ("records_accepted", INT),
    ("records_quarantined", INT),
    ("events_read", INT),
    ("events_accepted", INT),
    ("events_quarantined", INT),
)

SESSIONS = _t(
    "raw.sessions",
    "One row per session record read (duplicates across drops kept here; staging resolves them).",
    ("drop_id", V),
    ("record_key", V),
    ("source_file", V),
    ("record_index", INT),
    ("session_id", V),
    ("source_format", V),
    ("user_id", V),
    ("experiment", V),
    ("variant", V),
    ("feedback", V),
    ("started_at", T),
    ("ended_at", T),
    ("n_events", INT),
    ("n_user_messages", INT),
    ("n_segments", INT),
    ("n_shell_commands", INT),
    ("metadata_json", V),
)

EVENTS = _t(
    "raw.events",
    "One row per event, in the canonical event model, with the original event JSON kept in raw_json.",
    ("drop_id", V),
    ("record_key", V),
    ("session_id", V),
    ("seq", INT),
    ("event_id", V),
    ("timestamp", T),
    ("source", V),
    ("kind", V),
    ("name", V),
    ("original_name", V),
    ("text", V),
    ("command", V),
    ("exit_code", INT),
    ("agent_state", V),
    ("cause", V),
    ("wait_for_response", BOOL),
    ("segment_index", INT),
    ("segment_close", V),
    ("raw_json", V),
)

RATINGS = _t(
    "raw.ratings",
    "One row per star rating read, from feedback files or from inside canonical sessions.",
    ("drop_id", V),
    ("source_file", V),
    ("record_index", INT),
    ("item_index", INT),
    ("rating_id", V),
    ("session_id", V),
    ("event_id", V),
    ("segment_index", INT),
    ("rating", D),
    ("reason", V),
    ("created_at", T),
    ("origin", V),
)

ASSIGNMENTS = _t(
    "raw.assignments",
    "One row per assignment read from an assignments file (session metadata assignments stay in raw.sessions).",
    ("drop_id", V),
    ("source_file", V),
    ("record_index", INT),
    ("session_id", V),
    ("experiment", V),
    ("variant", V),
    ("user_id", V),
)

QUARANTINE = _t(
    "raw.quarantine",
    "Every record PULSE could not accept, with the stage, where it was, why, and its raw text.",
    ("drop_id", V),
    ("stage", V),
    ("source_file", V),
    ("record_index", INT),
    ("event_index", INT),
    ("record_type", V),
    ("reason", V),
    ("raw_text", V),
)

STAGING_SESSIONS = _t(
    "staging.sessions",
    "One row per session id: the record from the latest drop (later drops win; within a drop the later record).",
    *SESSIONS.columns,
)

WORK_SEGMENTS = _t(
    "staging.work_segments",
    "One row per work segment: from the user message that opens it to the event that closes it.",
    ("session_id", V),
    ("segment_index", INT),
    ("open_event_id", V),
    ("close_event_id", V),
    ("rated_event_id", V),
    ("started_at", T),
    ("ended_at", T),
    ("n_events", INT),
    ("n_user_messages", INT),
    ("close_reason", V),
    ("closed", BOOL),
)

SEGMENT_RATINGS = _t(
    "staging.segment_ratings",
    "One row per rated work segment (the latest rating when a segment was rated more than once).",
    ("session_id", V),
    ("segment_index", INT),
    ("rating", D),
    ("reason", V),
    ("created_at", T),
    ("rating_id", V),
    ("matched_by", V),
    ("drop_id", V),
    ("source_file", V),
    ("record_index", INT),
)

SESSION_LABELS = _t(
    "staging.session_labels",
    "One row per rated session: the mean of its segment ratings, and that mean normalized to [0, 1].",
    ("session_id", V),
    ("n_rated_segments", INT),
    ("label_stars", D),
    ("label", D),
)

STAGING_ASSIGNMENTS = _t(
    "staging.assignments",
    "One row per session with a known experiment arm.",
    ("session_id", V),
    ("experiment", V),
    ("variant", V),
    ("user_id", V),
    ("assigned_by", V),
)

EVENT_FEATURES = _t(
    "features.event_features",
    "One row per session: signals read off the event stream (the paper's six plus what a user would feel).",
    ("session_id", V),
    ("user_message_count", INT),
    ("n_segments", INT),
    ("git_commit_count", INT),
    ("git_commit", INT),
    ("git_push_count", INT),
    ("git_push", INT),
    ("git_pull_count", INT),
    ("git_pull", INT),
    ("git_reset_count", INT),
    ("git_reset", INT),
    ("git_rebase_count", INT),
    ("git_rebase", INT),
    ("shell_commands", INT),
    ("failed_commands", INT),
    ("test_runs", INT),
    ("test_failures", INT),
    ("file_edits", INT),
    ("error_observations", INT),
    ("condensations", INT),
    ("last_segment_finished", INT),
    ("duration_seconds", D),
    ("llm_cost_usd", D),
    ("llm_prompt_tokens", B),
    ("llm_completion_tokens", B),
)

ANNOTATIONS = _t(
    "features.annotations",
    "One row per session, annotator and prompt version: the summary answers, status and what it cost.",
    ("session_id", V),
    ("annotator", V),
    ("prompt_version", V),
    ("task_description", V),
    ("sentiment", V),
    ("sentiment_explanation", V),
    ("task_type", V),
    ("development_clusters", V),
    ("status", V),
    ("model", V),
    ("prompt_tokens", B),
    ("completion_tokens", B),
    ("cost_usd", D),
    ("error", V),
    ("notes_json", V),
)

ANNOTATION_VALUES = _t(
    "features.annotation_values",
    "One row per session, annotator, prompt version and rubric feature: the answer and its explanation.",
    ("session_id", V),
    ("annotator", V),
    ("prompt_version", V),
    ("feature", V),
    ("value", V),
    ("explanation", V),
)

LLM_CACHE = _t(
    "features.llm_cache",
    "LLM answers by hash of (prompt version, model, rendered and redacted prompt): an unchanged session costs no call.",
    ("cache_key", V),
    ("prompt_version", V),
    ("model", V),
    ("prompt", V),
    ("response", V),
    ("prompt_tokens", B),
    ("completion_tokens", B),
    ("cost_usd", D),
)

JUDGE_SCORES = _t(
    "features.judge_scores",
    "One row per session: the paper's LLM-as-a-judge baseline (binary satisfaction, 1-5 Likert, explanation).",
    ("session_id", V),
    ("model", V),
    ("prompt_version", V),
    ("binary_satisfied", BOOL),
    ("likert_score", INT),
    ("explanation", V),
    ("status", V),
    ("prompt_tokens", B),
    ("completion_tokens", B),
    ("cost_usd", D),
    ("error", V),
)

ANNOTATOR_AGREEMENT = _t(
    "features.annotator_agreement",
    "One row per rubric feature and pair of annotators that labelled the same sessions: Cohen's kappa, agreement.",
    ("feature", V),
    ("annotator_a", V),
    ("annotator_b", V),
    ("n_sessions", INT),
    ("raw_agreement", D),
    ("cohen_kappa", D),
    ("note", V),
)

CV_METRICS = _t(
    "modeling.cv_metrics",
    "The paper's Table 2: out-of-fold MSE, MAE and Pearson r of each model family (mean and sd over CV seeds),"
    " and of the LLM judge when it ran.",
    ("model", V),
    ("metric", V),
    ("mean", D),
    ("sd", D),
    ("n_labeled", INT),
    ("n_seeds", INT),
    ("chosen", BOOL),
    ("source", V),
)

PREDICTIONS = _t(
    "modeling.predictions",
    "One row per session: a cross-fit prediction. Rated sessions: the out-of-fold prediction and its fold;"
    " unrated sessions: the mean of the fold models' predictions.",
    ("session_id", V),
    ("labeled", BOOL),
    ("label_stars", D),
    ("label", D),
    ("prediction_stars", D),
    ("prediction", D),
    ("fold", INT),
    ("model", V),
    ("method", V),
)

FOLD_TRAINING = _t(
    "modeling.fold_training",
    "Which rated sessions each fold's model was trained on (what the out-of-fold check reads).",
    ("model", V),
    ("fold", INT),
    ("session_id", V),
)

FEATURE_IMPORTANCE = _t(
    "modeling.feature_importance",
    "Permutation importance of the chosen model on out-of-fold data: rise in MSE when a feature is shuffled.",
    ("model", V),
    ("feature", V),
    ("importance_mean", D),
    ("importance_sd", D),
    ("rank", INT),
)

EXPERIMENT_EFFECTS = _t(
    "estimates.experiment_effects",
    "One row per experiment, treatment-vs-control comparison and method: the effect on the normalized label"
    " (and in stars), its interval, p-value, the data behind it and the honesty diagnostics.",
    ("experiment", V),
    ("treatment", V),
    ("control", V),
    ("method", V),
    ("effect", D),
    ("se", D),
    ("ci_low", D),
    ("ci_high", D),
    ("p_value", D),
    ("p_holm", D),
    ("effect_stars", D),
    ("ci_low_stars", D),
    ("ci_high_stars", D),
    ("n_labeled_treatment", INT),
    ("n_labeled_control", INT),
    ("N_unlabeled_treatment", INT),
    ("N_unlabeled_control", INT),
    ("lambda_treatment", D),
    ("lambda_control", D),
    ("oof_rho", D),
    ("rated_vs_unrated_auc", D),
    ("width_vs_naive", D),
    ("best_width_theory", D),
    ("valid", BOOL),
    ("flags", V),
    ("note", V),
)

RAW_TABLES = (DROPS, SESSIONS, EVENTS, RATINGS, ASSIGNMENTS, QUARANTINE)
STAGING_TABLES = (STAGING_SESSIONS, WORK_SEGMENTS, SEGMENT_RATINGS, SESSION_LABELS, STAGING_ASSIGNMENTS)
FEATURE_TABLES = (EVENT_FEATURES, ANNOTATIONS, ANNOTATION_VALUES, LLM_CACHE, JUDGE_SCORES, ANNOTATOR_AGREEMENT)
MODELING_TABLES = (CV_METRICS, PREDICTIONS, FOLD_TRAINING, FEATURE_IMPORTANCE)
COVERAGE_VALIDATION = _t(
    "estimates.coverage_validation",
    "Replications of the generator with a known effect: each method's empirical coverage of its 95 % interval,"
    " mean width and bias, by scenario (ratings at random, or self-selected by session features).",
    ("scenario", V),
    ("method", V),
    ("coverage", D),
    ("mean_width", D),
    ("bias", D),
    ("replications", INT),
    ("share_flagged", D),
)

SRM_CHECK = _t(
    "estimates.srm_check",
    "One row per experiment and arm: assigned sessions against the intended split, and the experiment's chi-squared"
    " sample-ratio test (a mismatch at p < 0.001 means the split itself is broken).",
    ("experiment", V),
    ("arm", V),
    ("sessions", INT),
    ("intended_share", D),
    ("expected_sessions", D),
    ("observed_share", D),
    ("chi2", D),
    ("p_value", D),
    ("mismatch", BOOL),
    ("note", V),
)

FEATURE_COMPARISONS = _t(
    "estimates.feature_comparisons",
    "The paper's Tables 6-10: per experiment comparison, population (rated sessions, as the paper, or all) and"
    " feature, each arm's mean, the difference, its test and p-value, Benjamini-Hochberg adjusted within the table.",
    ("experiment", V),
    ("treatment", V),
    ("control", V),
    ("population", V),
    ("feature", V),
    ("kind", V),
    ("n_treatment", INT),
    ("n_control", INT),
    ("mean_treatment", D),
    ("mean_control", D),
    ("sd_treatment", D),
    ("sd_control", D),
    ("difference", D),
    ("relative_difference", D),
    ("test", V),
    ("p_value", D),
    ("p_bh", D),
    ("note", V),
)

LABEL_SHIFT = _t(
    "estimates.label_shift",
    "One row per feature: how rated sessions differ from unrated ones (rank-biserial correlation; the paper found"
    " 0.32 for the user message count). PPI assumes none.",
    ("feature", V),
    ("n_rated", INT),
    ("n_unrated", INT),
    ("mean_rated", D),
    ("mean_unrated", D),
    ("rank_biserial", D),
    ("p_value", D),
    ("p_bh", D),
    ("note", V),
)

SEGMENT_EFFECTS = _t(
    "estimates.segment_effects",
    "The naive and PPI effect within each task type and development cluster that has enough ratings per arm"
    " (segments with too few are listed with the reason).",
    ("experiment", V),
    ("treatment", V),
    ("control", V),
    ("dimension", V),
    ("segment", V),
    ("method", V),
    ("n_labeled_treatment", INT),
    ("n_labeled_control", INT),
    ("N_unlabeled_treatment", INT),
    ("N_unlabeled_control", INT),
    ("effect", D),
    ("se", D),
    ("ci_low", D),
    ("ci_high", D),
    ("p_value", D),
    ("note", V),
)

POWER = _t(
    "estimates.power",
    "Per experiment comparison: the smallest effect the current data detect with 80 % power (naive and PPI), and"
    " the ratings per arm needed for the target effect.",
    ("experiment", V),
    ("treatment", V),
    ("control", V),
    ("n_labeled_treatment", INT),
    ("n_labeled_control", INT),
    ("N_unlabeled_treatment", INT),
    ("N_unlabeled_control", INT),
    ("sd", D),
    ("oof_rho", D),
    ("mde_naive", D),
    ("mde_ppi", D),
    ("target_effect", D),
    ("labels_per_arm_naive", B),
    ("labels_per_arm_ppi", B),
    ("note", V),
)

BENCHMARK_POINTS = _t(
    "estimates.benchmark_points",
    "One row per comparison and task cluster: the benchmark score difference (data/benchmarks.csv) next to the"
    " rating difference, or why the pair was left out.",
    ("treatment", V),
    ("control", V),
    ("cluster", V),
    ("benchmark", V),
    ("delta_b", D),
    ("delta_h", D),
    ("n_treatment", INT),
    ("n_control", INT),
    ("status", V),
    ("reason", V),
)

BENCHMARK_CORRELATION = _t(
    "estimates.benchmark_correlation",
    "Per comparison: Pearson and Spearman correlation of rating and benchmark differences over task clusters,"
    " with bootstrap intervals (wide with a handful of clusters).",
    ("treatment", V),
    ("control", V),
    ("measure", V),
    ("n_clusters", INT),
    ("coefficient", D),
    ("ci_low", D),
    ("ci_high", D),
    ("note", V),
)

ESTIMATE_TABLES = (
    EXPERIMENT_EFFECTS,
    COVERAGE_VALIDATION,
    SRM_CHECK,
    FEATURE_COMPARISONS,
    LABEL_SHIFT,
    SEGMENT_EFFECTS,
    POWER,
    BENCHMARK_POINTS,
    BENCHMARK_CORRELATION,
)
ALL_TABLES = RAW_TABLES + STAGING_TABLES + FEATURE_TABLES + MODELING_TABLES + ESTIMATE_TABLES
# features.session_features is built from the rubric, so its columns are not listed here (see features/wide.py)
