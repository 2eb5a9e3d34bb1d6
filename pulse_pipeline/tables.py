"""The warehouse contract: every table PULSE writes, with its columns and DuckDB types.

Analysts and later stages rely on these names. The DDL (``contract.py``) and the row builders of the ingest
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

    def type_of(self, column: str) -> str:
        return dict(self.columns)[column]


def _t(qualified: str, description: str, *columns: tuple[str, str]) -> Table:
    schema, name = qualified.split(".")
    return Table(schema, name, tuple(columns), description)


VARCHAR, INTEGER, BIGINT, DOUBLE, TIMESTAMP, BOOLEAN = "VARCHAR", "INTEGER", "BIGINT", "DOUBLE", "TIMESTAMP", "BOOLEAN"

DROPS = _t(
    "raw.drops",
    "One row per drop: where it came from, its fingerprint and how many records were read, accepted and"
    " quarantined (the reconciliation the asset check verifies).",
    ("drop_id", VARCHAR),
    ("path", VARCHAR),
    ("fingerprint", VARCHAR),
    ("n_files", INTEGER),
    ("bytes", BIGINT),
    ("mtime", TIMESTAMP),
    ("records_read", INTEGER),
    ("records_accepted", INTEGER),
    ("records_quarantined", INTEGER),
    ("events_read", INTEGER),
    ("events_accepted", INTEGER),
    ("events_quarantined", INTEGER),
)

SESSIONS = _t(
    "raw.sessions",
    "One row per session record read (duplicates across drops kept here; staging resolves them).",
    ("drop_id", VARCHAR),
    ("record_key", VARCHAR),
    ("source_file", VARCHAR),
    ("record_index", INTEGER),
    ("session_id", VARCHAR),
    ("source_format", VARCHAR),
    ("user_id", VARCHAR),
    ("experiment", VARCHAR),
    ("variant", VARCHAR),
    ("feedback", VARCHAR),
    ("started_at", TIMESTAMP),
    ("ended_at", TIMESTAMP),
    ("n_events", INTEGER),
    ("n_user_messages", INTEGER),
    ("n_segments", INTEGER),
    ("n_shell_commands", INTEGER),
    ("metadata_json", VARCHAR),
)

EVENTS = _t(
    "raw.events",
    "One row per event, in the canonical event model, with the original event JSON kept in raw_json.",
    ("drop_id", VARCHAR),
    ("record_key", VARCHAR),
    ("session_id", VARCHAR),
    ("seq", INTEGER),
    ("event_id", VARCHAR),
    ("timestamp", TIMESTAMP),
    ("source", VARCHAR),
    ("kind", VARCHAR),
    ("name", VARCHAR),
    ("original_name", VARCHAR),
    ("text", VARCHAR),
    ("command", VARCHAR),
    ("exit_code", INTEGER),
    ("agent_state", VARCHAR),
    ("cause", VARCHAR),
    ("wait_for_response", BOOLEAN),
    ("segment_index", INTEGER),
    ("segment_close", VARCHAR),
    ("raw_json", VARCHAR),
)

_RATING_COLUMNS = (
    ("drop_id", VARCHAR),
    ("source_file", VARCHAR),
    ("record_index", INTEGER),
    ("item_index", INTEGER),
    ("rating_id", VARCHAR),
    ("session_id", VARCHAR),
    ("event_id", VARCHAR),
    ("segment_index", INTEGER),
    ("rating", DOUBLE),
    ("reason", VARCHAR),
    ("created_at", TIMESTAMP),
    ("origin", VARCHAR),
)

RATINGS = _t(
    "raw.ratings",
    "One row per rating read, from feedback files, from inside canonical sessions, or from a trace tool's scores"
    " (ingest/scores.py): scale 'stars_1_5' (NULL in rows of an older PULSE, read as stars) or 'thumbs' (1 up,"
    " 0 down); score_json keeps a score's own name, value, data type, source and the range it was mapped from.",
    *_RATING_COLUMNS,
    ("scale", VARCHAR),
    ("score_json", VARCHAR),
)

ASKS = _t(
    "raw.asks",
    "One row per ask read: the rating widget shown to a session with a known probability (ask_probability), with"
    " the user's rating when they answered (NULL when they did not). Ratings logged without a probability stay in"
    " raw.ratings.",
    *_RATING_COLUMNS,
    ("ask_probability", DOUBLE),
)

EVAL_SCORES = _t(
    "raw.eval_scores",
    "One row per evaluator (judge) score read from a trace tool (a Langfuse score whose source is EVAL, an"
    " OpenTelemetry gen_ai.evaluation.result, an OpenInference LLM or CODE annotation): never a label, a feature"
    " (features.session_features eval_score_*). event_id is the trace (segment) or observation it scores; NULL"
    " session_id: the session is found through event_id.",
    ("drop_id", VARCHAR),
    ("source_file", VARCHAR),
    ("record_index", INTEGER),
    ("item_index", INTEGER),
    ("score_id", VARCHAR),
    ("session_id", VARCHAR),
    ("event_id", VARCHAR),
    ("name", VARCHAR),
    ("value", DOUBLE),
    ("string_value", VARCHAR),
    ("data_type", VARCHAR),
    ("source", VARCHAR),
    ("comment", VARCHAR),
    ("created_at", TIMESTAMP),
)

ASSIGNMENTS = _t(
    "raw.assignments",
    "One row per assignment read from an assignments file (session metadata assignments stay in raw.sessions).",
    ("drop_id", VARCHAR),
    ("source_file", VARCHAR),
    ("record_index", INTEGER),
    ("session_id", VARCHAR),
    ("experiment", VARCHAR),
    ("variant", VARCHAR),
    ("user_id", VARCHAR),
)

QUARANTINE = _t(
    "raw.quarantine",
    "Every record PULSE could not accept, with the stage, where it was, why, and its raw text.",
    ("drop_id", VARCHAR),
    ("stage", VARCHAR),
    ("source_file", VARCHAR),
    ("record_index", INTEGER),
    ("event_index", INTEGER),
    ("record_type", VARCHAR),
    ("reason", VARCHAR),
    ("raw_text", VARCHAR),
)

STAGING_SESSIONS = _t(
    "staging.sessions",
    "One row per session id: the record from the latest drop (later drops win; within a drop the later record).",
    *SESSIONS.columns,
)

REPLACED_SESSIONS = _t(
    "staging.replaced_sessions",
    "One row per session record a later drop replaced with different content: the session id, the drop and record"
    " that lost (drop_id, source_file, record_index, user_id, n_events) and the one staging.sessions kept"
    " (replaced_by_*). A drop that delivers the same content again replaces nothing. Not quarantine: both records"
    " were read and accepted, and the replaced one comes back if the later drop goes.",
    ("session_id", VARCHAR),
    ("drop_id", VARCHAR),
    ("source_file", VARCHAR),
    ("record_index", INTEGER),
    ("user_id", VARCHAR),
    ("n_events", INTEGER),
    ("replaced_by_drop_id", VARCHAR),
    ("replaced_by_source_file", VARCHAR),
    ("replaced_by_record_index", INTEGER),
    ("replaced_by_user_id", VARCHAR),
    ("replaced_by_n_events", INTEGER),
)

WORK_SEGMENTS = _t(
    "staging.work_segments",
    "One row per work segment: from the user message that opens it to the event that closes it.",
    ("session_id", VARCHAR),
    ("segment_index", INTEGER),
    ("open_event_id", VARCHAR),
    ("close_event_id", VARCHAR),
    ("rated_event_id", VARCHAR),
    ("started_at", TIMESTAMP),
    ("ended_at", TIMESTAMP),
    ("n_events", INTEGER),
    ("n_user_messages", INTEGER),
    ("close_reason", VARCHAR),
    ("closed", BOOLEAN),
)

SEGMENT_RATINGS = _t(
    "staging.segment_ratings",
    "One row per rated work segment and rating scale (the latest rating when a segment was rated more than once on"
    " a scale): scale 'stars_1_5' holds 1-5 stars; scale 'thumbs' holds a conversation's thumb, 1 up and 0 down,"
    " on its last segment.",
    ("session_id", VARCHAR),
    ("segment_index", INTEGER),
    ("rating", DOUBLE),
    ("reason", VARCHAR),
    ("created_at", TIMESTAMP),
    ("rating_id", VARCHAR),
    ("matched_by", VARCHAR),
    ("drop_id", VARCHAR),
    ("source_file", VARCHAR),
    ("record_index", INTEGER),
    ("scale", VARCHAR),
)

SESSION_LABELS = _t(
    "staging.session_labels",
    "One row per rated session, on one scale (its stars when it has any, else its thumb): with stars, the mean of"
    " its segment ratings (label_stars) and that mean normalized to [0, 1]; with a thumb, label 1 (up) or 0 (down)"
    " and label_stars NULL.",
    ("session_id", VARCHAR),
    ("n_rated_segments", INTEGER),
    ("label_stars", DOUBLE),
    ("label", DOUBLE),
    ("scale", VARCHAR),
)

SESSION_ASKS = _t(
    "staging.session_asks",
    "One row per session the rating widget was shown to with a known probability: its asks, how many were answered,"
    " and the probability of its first ask (the policy decides once per session); n_probabilities > 1 when its asks"
    " logged different ones.",
    ("session_id", VARCHAR),
    ("n_asks", INTEGER),
    ("n_answered", INTEGER),
    ("ask_probability", DOUBLE),
    ("n_probabilities", INTEGER),
    ("first_asked_at", TIMESTAMP),
)

STAGING_ASSIGNMENTS = _t(
    "staging.assignments",
    "One row per session with a known experiment arm.",
    ("session_id", VARCHAR),
    ("experiment", VARCHAR),
    ("variant", VARCHAR),
    ("user_id", VARCHAR),
    ("assigned_by", VARCHAR),
)

COMPUTED_VERSIONS = _t(
    "staging.computed_versions",
    "Bookkeeping of the per-session tables refreshed incrementally (incremental.py): per table (and annotator"
    " scope), the version of the inputs each session's rows were computed from; a session whose version changed is"
    " recomputed.",
    ("table_name", VARCHAR),
    ("session_id", VARCHAR),
    ("version", VARCHAR),
)

USER_TEXT = _t(
    "features.user_text",
    "One row per user message of a staged session, in stream order, redacted (features/redact.py): the one place"
    " users' words are read, for the text model, sentiment, the annotators' transcripts and discovery.",
    ("session_id", VARCHAR),
    ("position", INTEGER),
    ("text", VARCHAR),
)

EVENT_FEATURES = _t(
    "features.event_features",
    "One row per session: signals read off the event stream (the paper's six plus what a user would feel).",
    ("session_id", VARCHAR),
    ("user_message_count", INTEGER),
    ("n_segments", INTEGER),
    ("git_commit_count", INTEGER),
    ("git_commit", INTEGER),
    ("git_push_count", INTEGER),
    ("git_push", INTEGER),
    ("git_pull_count", INTEGER),
    ("git_pull", INTEGER),
    ("git_reset_count", INTEGER),
    ("git_reset", INTEGER),
    ("git_rebase_count", INTEGER),
    ("git_rebase", INTEGER),
    ("shell_commands", INTEGER),
    ("failed_commands", INTEGER),
    ("test_runs", INTEGER),
    ("test_failures", INTEGER),
    ("file_edits", INTEGER),
    ("error_observations", INTEGER),
    ("condensations", INTEGER),
    ("last_segment_finished", INTEGER),
    ("duration_seconds", DOUBLE),
    ("llm_cost_usd", DOUBLE),
    ("llm_prompt_tokens", BIGINT),
    ("llm_completion_tokens", BIGINT),
    ("critic_score_last", DOUBLE),
    ("critic_score_mean", DOUBLE),
    ("critic_score_min", DOUBLE),
    ("critic_scored_events", INTEGER),
    ("user_english_share", DOUBLE),
    ("user_sentiment_mean", DOUBLE),
    ("user_sentiment_min", DOUBLE),
    ("user_sentiment_max", DOUBLE),
    ("user_sentiment_first", DOUBLE),
    ("user_sentiment_last", DOUBLE),
    ("user_sentiment_slope", DOUBLE),
    ("user_negative_share", DOUBLE),
    ("last_user_message_chars", INTEGER),
    ("ends_on_thanks", INTEGER),
    ("ends_on_complaint", INTEGER),
    ("ends_on_agent_turn", INTEGER),
    ("user_stops", INTEGER),  # the user stopping or pausing the agent (a guardrail metric)
    ("llm_total_tokens", BIGINT),  # prompt + completion tokens, NULL unless both are known
)

ANNOTATIONS = _t(
    "features.annotations",
    "One row per session, annotator and prompt version: the summary answers, status and what it cost.",
    ("session_id", VARCHAR),
    ("annotator", VARCHAR),
    ("prompt_version", VARCHAR),
    ("task_description", VARCHAR),
    ("sentiment", VARCHAR),
    ("sentiment_explanation", VARCHAR),
    ("task_type", VARCHAR),
    ("development_clusters", VARCHAR),
    ("status", VARCHAR),
    ("model", VARCHAR),
    ("prompt_tokens", BIGINT),
    ("completion_tokens", BIGINT),
    ("cost_usd", DOUBLE),
    ("error", VARCHAR),
    ("notes_json", VARCHAR),
)

ANNOTATION_VALUES = _t(
    "features.annotation_values",
    "One row per session, annotator, prompt version and rubric feature: the answer and its explanation.",
    ("session_id", VARCHAR),
    ("annotator", VARCHAR),
    ("prompt_version", VARCHAR),
    ("feature", VARCHAR),
    ("value", VARCHAR),
    ("explanation", VARCHAR),
)

LLM_CACHE = _t(
    "features.llm_cache",
    "LLM answers by hash of (prompt version, model, rendered and redacted prompt): an unchanged session costs no call.",
    ("cache_key", VARCHAR),
    ("prompt_version", VARCHAR),
    ("model", VARCHAR),
    ("prompt", VARCHAR),
    ("response", VARCHAR),
    ("prompt_tokens", BIGINT),
    ("completion_tokens", BIGINT),
    ("cost_usd", DOUBLE),
)

JUDGE_SCORES = _t(
    "features.judge_scores",
    "One row per session: the paper's LLM-as-a-judge baseline (binary satisfaction, 1-5 Likert, explanation).",
    ("session_id", VARCHAR),
    ("model", VARCHAR),
    ("prompt_version", VARCHAR),
    ("binary_satisfied", BOOLEAN),
    ("likert_score", INTEGER),
    ("explanation", VARCHAR),
    ("status", VARCHAR),
    ("prompt_tokens", BIGINT),
    ("completion_tokens", BIGINT),
    ("cost_usd", DOUBLE),
    ("error", VARCHAR),
)

ANNOTATOR_AGREEMENT = _t(
    "features.annotator_agreement",
    "One row per rubric feature and pair of annotators that labelled the same sessions: Cohen's kappa, agreement.",
    ("feature", VARCHAR),
    ("annotator_a", VARCHAR),
    ("annotator_b", VARCHAR),
    ("n_sessions", INTEGER),
    ("raw_agreement", DOUBLE),
    ("cohen_kappa", DOUBLE),
    ("note", VARCHAR),
)

CV_METRICS = _t(
    "modeling.cv_metrics",
    "The paper's Table 2: out-of-fold MSE, MAE and Pearson r of each model family (mean and sd over CV seeds),"
    " and of the LLM judge when it ran.",
    ("model", VARCHAR),
    ("metric", VARCHAR),
    ("mean", DOUBLE),
    ("sd", DOUBLE),
    ("n_labeled", INTEGER),
    ("n_seeds", INTEGER),
    ("chosen", BOOLEAN),
    ("source", VARCHAR),
)

PREDICTIONS = _t(
    "modeling.predictions",
    "One row per session: a cross-fit prediction. Rated sessions: the out-of-fold prediction and its fold;"
    " unrated sessions: the mean of the fold models' predictions. prediction_calibrated: the same on the"
    " same scale, recalibrated by cross-fitted linear maps when the chosen model needs it (modeling.recalibration"
    " says whether and why), else equal to prediction; cross-PPI and AIPW's outcome model read it.",
    ("session_id", VARCHAR),
    ("labeled", BOOLEAN),
    ("label_stars", DOUBLE),
    ("label", DOUBLE),
    ("prediction_stars", DOUBLE),
    ("prediction", DOUBLE),
    ("fold", INTEGER),
    ("model", VARCHAR),
    ("method", VARCHAR),
    ("prediction_calibrated", DOUBLE),
)

INSAMPLE_PREDICTIONS = _t(
    "modeling.insample_predictions",
    "One row per session: the prediction of one model of the chosen family fit on every rating (the paper's"
    " in-sample way; invalid for PPI, read only for the ppi_insample comparison rows). Empty when the chosen family"
    " is the stack or no model was chosen.",
    ("session_id", VARCHAR),
    ("labeled", BOOLEAN),
    ("prediction_stars", DOUBLE),
    ("prediction", DOUBLE),
    ("model", VARCHAR),
)

FOLD_TRAINING = _t(
    "modeling.fold_training",
    "Which rated sessions each fold's model was trained on (what the out-of-fold check reads).",
    ("model", VARCHAR),
    ("fold", INTEGER),
    ("session_id", VARCHAR),
)

FEATURE_IMPORTANCE = _t(
    "modeling.feature_importance",
    "Permutation importance of the chosen model on out-of-fold data: rise in MSE when a feature is shuffled.",
    ("model", VARCHAR),
    ("feature", VARCHAR),
    ("importance_mean", DOUBLE),
    ("importance_sd", DOUBLE),
    ("rank", INTEGER),
)

EXPERIMENT_EFFECTS = _t(
    "estimates.experiment_effects",
    "One row per experiment, treatment-vs-control comparison and method: the effect on the normalized label"
    " (and in stars), its interval, p-value, the data behind it and the honesty diagnostics; the randomization"
    " unit (session or user: intervals clustered by user), where it came from, and the sessions it left out; the"
    " rating scale its labels are on (stars_1_5 or thumbs: the *_stars columns are NULL for thumbs); the design"
    " (randomized, or observational: arms from a session field, an association and not an effect).",
    ("experiment", VARCHAR),
    ("treatment", VARCHAR),
    ("control", VARCHAR),
    ("method", VARCHAR),
    ("effect", DOUBLE),
    ("se", DOUBLE),
    ("ci_low", DOUBLE),
    ("ci_high", DOUBLE),
    ("p_value", DOUBLE),
    ("p_holm", DOUBLE),
    ("effect_stars", DOUBLE),
    ("ci_low_stars", DOUBLE),
    ("ci_high_stars", DOUBLE),
    ("n_labeled_treatment", INTEGER),
    ("n_labeled_control", INTEGER),
    ("N_unlabeled_treatment", INTEGER),
    ("N_unlabeled_control", INTEGER),
    ("lambda_treatment", DOUBLE),
    ("lambda_control", DOUBLE),
    ("oof_rho", DOUBLE),
    ("rated_vs_unrated_auc", DOUBLE),
    ("width_vs_naive", DOUBLE),
    ("best_width_theory", DOUBLE),
    ("valid", BOOLEAN),
    ("flags", VARCHAR),
    ("note", VARCHAR),
    ("unit", VARCHAR),
    ("unit_source", VARCHAR),
    ("sessions_excluded", INTEGER),
    ("scale", VARCHAR),
    ("design", VARCHAR),
)

RAW_TABLES = (DROPS, SESSIONS, EVENTS, RATINGS, ASKS, ASSIGNMENTS, QUARANTINE, EVAL_SCORES)
STAGING_TABLES = (
    STAGING_SESSIONS,
    REPLACED_SESSIONS,
    WORK_SEGMENTS,
    SEGMENT_RATINGS,
    SESSION_LABELS,
    SESSION_ASKS,
    STAGING_ASSIGNMENTS,
    COMPUTED_VERSIONS,
)
FEATURE_TABLES = (
    USER_TEXT,
    EVENT_FEATURES,
    ANNOTATIONS,
    ANNOTATION_VALUES,
    LLM_CACHE,
    JUDGE_SCORES,
    ANNOTATOR_AGREEMENT,
)
TEXT_FOLD_TRAINING = _t(
    "modeling.text_fold_training",
    "The inner cross-fit of the text score (modeling/text.py): within each outer fold, which rated sessions each"
    " inner fold's ridge was trained on (held_out false) and which it scored (held_out true); the out-of-fold check"
    " reads it.",
    ("model", VARCHAR),
    ("fold", INTEGER),
    ("inner_fold", INTEGER),
    ("session_id", VARCHAR),
    ("held_out", BOOLEAN),
)

TEXT_TERMS = _t(
    "modeling.text_terms",
    "The text model's most predictive terms (users' redacted words and character n-grams): the largest positive and"
    " negative coefficients of a ridge fitted on every rating, for explanation only (never used for predictions).",
    ("term", VARCHAR),
    ("block", VARCHAR),
    ("coefficient", DOUBLE),
    ("direction", VARCHAR),
    ("rank", INTEGER),
)

TEXT_VOCABULARY = _t(
    "modeling.text_vocabulary",
    "The text model's columns (users' redacted words and character n-grams) and their idf, a row per column in"
    " order, of the fit the modeling step keeps (modeling/reuse.py): a later run transforms new sessions' text with"
    " them. The words stay in the warehouse; the kept fit on disk holds no term.",
    ("block", VARCHAR),
    ("position", INTEGER),
    ("term", VARCHAR),
    ("idf", DOUBLE),
)

RECALIBRATION = _t(
    "modeling.recalibration",
    "One row per fit: whether the chosen model's predictions are recalibrated for the methods that take them with"
    " lambda = 1 (cross-PPI, AIPW's outcome model: modeling.predictions.prediction_calibrated), why, and the"
    " out-of-fold MSE in stars (the cross-fit's seed) of the predictions as they are, recalibrated, and the"
    " constant's (modeling/recalibration.py).",
    ("model", VARCHAR),
    ("recalibrated", BOOLEAN),
    ("reason", VARCHAR),
    ("n_labeled", INTEGER),
    ("mse_prediction", DOUBLE),
    ("mse_calibrated", DOUBLE),
    ("mse_constant", DOUBLE),
    ("slope", DOUBLE),
    ("slope_se", DOUBLE),
)

AGREEMENT_HISTORY = _t(
    "modeling.agreement_history",
    "The agreement watch: one row per window (a calendar week by session start, or every N ratings) x arm"
    " (experiment x variant, and 'all' x 'all' pooled) x measure (oof_r, mse_vs_constant = the constant's MSE minus"
    " the model's, calibration_slope, and where the LLM judge ran judge_kappa and judge_r), over the window's rated"
    " sessions, with its 95 % interval; the long run over every earlier window with its interval, and"
    " below_long_run: the window's interval wholly below the long run's (modeling/agreement_history.py).",
    ("window_kind", VARCHAR),
    ("window_start", TIMESTAMP),
    ("window_end", TIMESTAMP),
    ("experiment", VARCHAR),
    ("variant", VARCHAR),
    ("measure", VARCHAR),
    ("value", DOUBLE),
    ("ci_low", DOUBLE),
    ("ci_high", DOUBLE),
    ("n_ratings", INTEGER),
    ("long_run_value", DOUBLE),
    ("long_run_ci_low", DOUBLE),
    ("long_run_ci_high", DOUBLE),
    ("below_long_run", BOOLEAN),
    ("note", VARCHAR),
    ("window_index", INTEGER),
    ("long_run_n_ratings", INTEGER),
)

MODELING_TABLES = (
    CV_METRICS,
    PREDICTIONS,
    RECALIBRATION,
    INSAMPLE_PREDICTIONS,
    FOLD_TRAINING,
    FEATURE_IMPORTANCE,
    TEXT_FOLD_TRAINING,
    TEXT_TERMS,
    TEXT_VOCABULARY,
    AGREEMENT_HISTORY,
)
EFFECT_HISTORY = _t(
    "estimates.effect_history",
    "One row per comparison, method and look day (each day with data, by session start): the estimate on the"
    " sessions started up to that day, its fixed-horizon 95 % interval (valid for one look) and the always-valid"
    " confidence sequence (valid at every look at once: stop the first day it excludes zero); the unit (session or"
    " user) whose count to date is the sequence's clock.",
    ("experiment", VARCHAR),
    ("treatment", VARCHAR),
    ("control", VARCHAR),
    ("method", VARCHAR),
    ("unit", VARCHAR),
    ("day", TIMESTAMP),  # the look's date at 00:00 (the contract has no DATE): sessions started on or before it
    ("n_rated", INTEGER),
    ("n_sessions", INTEGER),
    ("effect", DOUBLE),
    ("ci_low", DOUBLE),
    ("ci_high", DOUBLE),
    ("cs_low", DOUBLE),
    ("cs_high", DOUBLE),
    ("excludes_zero_fixed", BOOLEAN),
    ("excludes_zero_cs", BOOLEAN),
    ("note", VARCHAR),
)

COVERAGE_VALIDATION = _t(
    "estimates.coverage_validation",
    "Replications of the generator with a known effect: each method's empirical coverage of its 95 % interval,"
    " mean width and bias, by scenario (ratings at random, or self-selected by session features).",
    ("scenario", VARCHAR),
    ("method", VARCHAR),
    ("coverage", DOUBLE),
    ("mean_width", DOUBLE),
    ("bias", DOUBLE),
    ("replications", INTEGER),
    ("share_flagged", DOUBLE),
)

SRM_CHECK = _t(
    "estimates.srm_check",
    "One row per experiment and arm: assigned sessions and randomized units (users when the unit is user) against the"
    " intended split, and the experiment's chi-squared sample-ratio test on the units (a mismatch at p < 0.001 means"
    " the split itself is broken).",
    ("experiment", VARCHAR),
    ("arm", VARCHAR),
    ("sessions", INTEGER),
    ("intended_share", DOUBLE),
    ("expected_sessions", DOUBLE),
    ("observed_share", DOUBLE),
    ("chi2", DOUBLE),
    ("p_value", DOUBLE),
    ("mismatch", BOOLEAN),
    ("note", VARCHAR),
    ("unit", VARCHAR),
    ("unit_source", VARCHAR),
    ("units", INTEGER),
    ("expected_units", DOUBLE),
)

FEATURE_COMPARISONS = _t(
    "estimates.feature_comparisons",
    "The paper's Tables 6-10: per experiment comparison, population (rated sessions, as the paper, or all) and"
    " feature, each arm's mean, the difference, its test and p-value, Benjamini-Hochberg adjusted within the table;"
    " the standardized difference (the arms' balance in that feature).",
    ("experiment", VARCHAR),
    ("treatment", VARCHAR),
    ("control", VARCHAR),
    ("population", VARCHAR),
    ("feature", VARCHAR),
    ("kind", VARCHAR),
    ("n_treatment", INTEGER),
    ("n_control", INTEGER),
    ("mean_treatment", DOUBLE),
    ("mean_control", DOUBLE),
    ("sd_treatment", DOUBLE),
    ("sd_control", DOUBLE),
    ("difference", DOUBLE),
    ("relative_difference", DOUBLE),
    ("test", VARCHAR),
    ("p_value", DOUBLE),
    ("p_bh", DOUBLE),
    ("note", VARCHAR),
    ("standardized_difference", DOUBLE),
)

LABEL_SHIFT = _t(
    "estimates.label_shift",
    "One row per feature: how rated sessions differ from unrated ones (rank-biserial correlation; the paper found"
    " 0.32 for the user message count). PPI assumes none.",
    ("feature", VARCHAR),
    ("n_rated", INTEGER),
    ("n_unrated", INTEGER),
    ("mean_rated", DOUBLE),
    ("mean_unrated", DOUBLE),
    ("rank_biserial", DOUBLE),
    ("p_value", DOUBLE),
    ("p_bh", DOUBLE),
    ("note", VARCHAR),
)

SEGMENT_EFFECTS = _t(
    "estimates.segment_effects",
    "The naive and PPI effect within each task type and development cluster that has enough ratings per arm"
    " (segments with too few are listed with the reason).",
    ("experiment", VARCHAR),
    ("treatment", VARCHAR),
    ("control", VARCHAR),
    ("dimension", VARCHAR),
    ("segment", VARCHAR),
    ("method", VARCHAR),
    ("n_labeled_treatment", INTEGER),
    ("n_labeled_control", INTEGER),
    ("N_unlabeled_treatment", INTEGER),
    ("N_unlabeled_control", INTEGER),
    ("effect", DOUBLE),
    ("se", DOUBLE),
    ("ci_low", DOUBLE),
    ("ci_high", DOUBLE),
    ("p_value", DOUBLE),
    ("note", VARCHAR),
)

POWER = _t(
    "estimates.power",
    "Per experiment comparison: the smallest effect the current data detect with 80 % power (naive and PPI), and"
    " the ratings per arm needed for the target effect.",
    ("experiment", VARCHAR),
    ("treatment", VARCHAR),
    ("control", VARCHAR),
    ("n_labeled_treatment", INTEGER),
    ("n_labeled_control", INTEGER),
    ("N_unlabeled_treatment", INTEGER),
    ("N_unlabeled_control", INTEGER),
    ("sd", DOUBLE),
    ("oof_rho", DOUBLE),
    ("mde_naive", DOUBLE),
    ("mde_ppi", DOUBLE),
    ("target_effect", DOUBLE),
    ("labels_per_arm_naive", BIGINT),
    ("labels_per_arm_ppi", BIGINT),
    ("note", VARCHAR),
)

CONCLUSIONS = _t(
    "estimates.conclusions",
    "One row per experiment comparison (and per single-arm experiment, not compared): PULSE's own conclusion, the"
    " one the report and the UI show. The method it is read by (PPI++ when valid and unflagged, else AIPW, else"
    " naive Welch: estimates/conclusions.py) and why; that estimate's effect and 95 % interval on the 0-1 scale"
    " and its width against naive; the direction when the interval excludes zero, Holm's adjusted p when the"
    " correction does not keep it, the minimum detectable effect when it holds zero; the verdict in a few words"
    " and the plain sentence; the design (randomized, or observational: the sentence states an association);"
    " the decision (ship, hold, keep collecting, no decision: docs/decisions.md) and why, and the comparison's"
    " guardrails counted by verdict.",
    ("experiment", VARCHAR),
    ("treatment", VARCHAR),
    ("control", VARCHAR),
    ("method", VARCHAR),
    ("why", VARCHAR),
    ("effect", DOUBLE),
    ("ci_low", DOUBLE),
    ("ci_high", DOUBLE),
    ("width_vs_naive", DOUBLE),
    ("direction", VARCHAR),
    ("p_holm_caveat", DOUBLE),
    ("mde", DOUBLE),
    ("verdict", VARCHAR),
    ("sentence", VARCHAR),
    ("design", VARCHAR),
    ("decision", VARCHAR),  # ship | hold | keep collecting | no decision (docs/decisions.md)
    ("decision_why", VARCHAR),
    ("guardrails_passed", INTEGER),
    ("guardrails_failed", INTEGER),
    ("guardrails_inconclusive", INTEGER),  # inconclusive or not estimable
)

BENCHMARK_POINTS = _t(
    "estimates.benchmark_points",
    "One row per comparison and task cluster: the benchmark score difference (benchmarks.csv: PULSE_HOME's, else"
    " the shipped default) next to the rating difference, or why the pair was left out.",
    ("treatment", VARCHAR),
    ("control", VARCHAR),
    ("cluster", VARCHAR),
    ("benchmark", VARCHAR),
    ("delta_b", DOUBLE),
    ("delta_h", DOUBLE),
    ("n_treatment", INTEGER),
    ("n_control", INTEGER),
    ("status", VARCHAR),
    ("reason", VARCHAR),
)

BENCHMARK_CORRELATION = _t(
    "estimates.benchmark_correlation",
    "Per comparison: Pearson and Spearman correlation of rating and benchmark differences over task clusters,"
    " with Fisher-z intervals (wide with a handful of clusters).",
    ("treatment", VARCHAR),
    ("control", VARCHAR),
    ("measure", VARCHAR),
    ("n_clusters", INTEGER),
    ("coefficient", DOUBLE),
    ("ci_low", DOUBLE),
    ("ci_high", DOUBLE),
    ("note", VARCHAR),
)

ASK_POLICY = _t(
    "estimates.ask_policy",
    "The ask policy (estimates/ask_policy.py): one row per term of its error model (model 'error', e(x) ="
    " exp(intercept + sum coefficient * (t(x) - mean) / sd)) and of its answer model (model 'answer', a(x) ="
    " expit(intercept + sum coefficient * clip(z, -3, 3)); none when no asks were logged), q(x) = min(1, max(floor,"
    " multiplier * e(x) / sqrt(a(x)))), with the budget it was scaled to and its version; the same policy is"
    " exported as ask_policy.json and ask_policy.py in PULSE_HOME/ask_policy/. form: what it asks by (uniform,"
    " error or stratified: the one whose cross-fitted variance beats uniform's on held-out folds, else uniform;"
    " the stratified form's factors are rows of model 'stratum', e(x) then the factor of the session's stratum).",
    ("model", VARCHAR),
    ("term", VARCHAR),
    ("transform", VARCHAR),
    ("mean", DOUBLE),
    ("sd", DOUBLE),
    ("coefficient", DOUBLE),
    ("multiplier", DOUBLE),
    ("floor", DOUBLE),
    ("budget_per_day", DOUBLE),
    ("sessions_per_day", DOUBLE),
    ("expected_asks_per_day", DOUBLE),
    ("expected_ratings_per_day", DOUBLE),
    ("fitted_on_ratings", INTEGER),
    ("fitted_on_asks", INTEGER),
    ("policy_version", VARCHAR),
    ("note", VARCHAR),
    ("form", VARCHAR),
)

ASK_ALLOCATION = _t(
    "estimates.ask_allocation",
    "Per experiment and stratum (estimates/allocation.py): the share of asks that minimises the stratified"
    " estimate's width (Neyman: proportional to share_sessions x residual_sd / sqrt(answer_rate)) against asking"
    " everyone alike (share_uniform = the stratum's share of sessions), the ratings (and asks) it saves at the"
    " same width, and the ratings per arm the target effect needs either way. One row with a note when the"
    " experiment has no strata.",
    ("experiment", VARCHAR),
    ("strata_column", VARCHAR),
    ("stratum", VARCHAR),
    ("sessions", INTEGER),
    ("rated", INTEGER),
    ("share_sessions", DOUBLE),
    ("residual_sd", DOUBLE),
    ("answer_rate", DOUBLE),
    ("share_uniform", DOUBLE),
    ("share_neyman", DOUBLE),
    ("ratings_saved", DOUBLE),
    ("asks_saved", DOUBLE),
    ("ratings_per_arm_uniform", BIGINT),
    ("ratings_per_arm_neyman", BIGINT),
    ("note", VARCHAR),
)

GUARDRAILS = _t(
    "estimates.guardrails",
    "One row per experiment comparison and guardrail (experiments.toml [guardrails.<name>]: a numeric session"
    " metric that must not get worse beyond a margin): each arm's mean over its sessions with a value, the"
    " difference treatment - control (plain, or CUPED with each user's pre-experiment mean when that narrows it)"
    " with its two-sided 1 - alpha interval, the same relative to the control mean (delta method), the confidence"
    " sequence at the last look day, the margin, the one-sided non-inferiority p and the verdict (pass: harm"
    " inside the margin; fail: harm beyond it; inconclusive; null: not estimable). stats/guardrails.py.",
    ("experiment", VARCHAR),
    ("treatment", VARCHAR),
    ("control", VARCHAR),
    ("guardrail", VARCHAR),
    ("metric", VARCHAR),
    ("direction", VARCHAR),
    ("unit", VARCHAR),
    ("method", VARCHAR),
    ("n_treatment", INTEGER),
    ("n_control", INTEGER),
    ("treatment_mean", DOUBLE),
    ("control_mean", DOUBLE),
    ("effect", DOUBLE),
    ("ci_low", DOUBLE),
    ("ci_high", DOUBLE),
    ("relative_effect", DOUBLE),
    ("relative_ci_low", DOUBLE),
    ("relative_ci_high", DOUBLE),
    ("cs_low", DOUBLE),
    ("cs_high", DOUBLE),
    ("margin", DOUBLE),
    ("margin_type", VARCHAR),
    ("alpha", DOUBLE),
    ("p_noninferiority", DOUBLE),
    ("verdict", VARCHAR),
    ("variance_reduction", DOUBLE),
    ("design", VARCHAR),
    ("note", VARCHAR),
)

ESTIMATE_TABLES = (
    EXPERIMENT_EFFECTS,
    EFFECT_HISTORY,
    COVERAGE_VALIDATION,
    SRM_CHECK,
    FEATURE_COMPARISONS,
    LABEL_SHIFT,
    SEGMENT_EFFECTS,
    POWER,
    CONCLUSIONS,
    BENCHMARK_POINTS,
    BENCHMARK_CORRELATION,
    ASK_POLICY,
    GUARDRAILS,
    ASK_ALLOCATION,
)
ALL_TABLES = RAW_TABLES + STAGING_TABLES + FEATURE_TABLES + MODELING_TABLES + ESTIMATE_TABLES
# features.session_features is built from the rubric, so its columns are not listed here (see features/wide.py)
SESSION_FEATURES = _t(
    "features.session_features",
    "One row per session: event features, the chosen annotator's answers one-hot (columns follow the rubric,"
    " features/wide.py), judge_likert and score_<path>. Its name only: not in ALL_TABLES, created by wide.py.",
)
