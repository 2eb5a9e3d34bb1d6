"""The ask policy: with what probability the agent platform should show the rating widget for a session, fit on
the warehouse (``fit_policy``, ``policy_from_warehouse``) and written as ``estimates.ask_policy``
(``policy_frame``).

Its rooms: the models and q(x), with why q is proportional to e / sqrt(a) (``estimates/ask_models.py``); the
choice among its forms (uniform, error model, per stratum) by cross-fitted variance on held-out folds, "do no
harm" (``estimates/ask_forms.py``); the exported ``ask_policy.json`` and reference ``ask_policy.py``
(``estimates/ask_policy_file.py``). Their public names are importable from here too.

The budget of asks (``multiplier_for_budget`` meets it) has a default (``default_budget``) that keeps today's volume:
the asked sessions per day when asks are logged; when only ratings are logged (the widget shown at every stop) it
is half the sessions per day (``DEFAULT_ASK_SHARE``), so users see half the prompts and the ratings go where they
help most. The floor (``DEFAULT_FLOOR`` = 0.01) keeps every session askable: AIPW needs P(rated) > 0 everywhere,
and the weights stay below 1 / (floor x answer rate).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from .. import tables
from ..label_scales import STARS
from .ask_forms import (
    CROSSFIT_FOLDS,
    CROSSFIT_SEED,
    MARGIN_Z,
    MIN_STRATUM_RATINGS,
    OTHER,
    STRATA_COLUMN,
    choice_note,
    choose_form,
    fit_strata,
    stratum_features,
)
from .ask_models import (
    ANSWER_CLIP,
    DEFAULT_FLOOR,
    ERROR,
    FORMAT,
    FORMS,
    GLM_ALPHA,
    MIN_ASKS,
    MIN_RATINGS,
    STRATA_FORMAT,
    STRATIFIED,
    UNIFORM,
    AnswerModel,
    Policy,
    Strata,
    Term,
    answer_probability,
    ask_probabilities,
    ask_scores,
    expected_error,
    fit_answer_model,
    fit_error_model,
    multiplier_for_budget,
    policy_digest,
    probabilities,
    standardized,
    stratum_scores,
)
from .ask_policy_file import (
    JSON_NAME,
    POLICY_DIR,
    READABLE_FORMATS,
    REFERENCE_NAME,
    REFERENCE_SOURCE,
    TRANSFORMS,
    policy_from_json,
    reference_module,
    write_policy,
)
from .experiments import experiments_config
from .strata import DEFAULT_STRATA, strata_problem, stratum_labels
from .strata import UNKNOWN as UNKNOWN_STRATUM

POLICY_FEATURES: tuple[str, ...] = (
    "user_message_count",
    "n_segments",
    "file_edits",
    "failed_commands",
    "test_runs",
    "duration_seconds",
)
"""Columns of ``features.event_features`` the platform counts itself when a session stops."""
DEFAULT_ASK_SHARE = 0.5


def fit_policy(
    features: dict[str, np.ndarray],
    rated: np.ndarray,
    abs_error: np.ndarray,
    days: float,
    budget_per_day: float,
    floor: float = DEFAULT_FLOOR,
    names: tuple[str, ...] | None = None,
    asked: np.ndarray | None = None,
    answered: np.ndarray | None = None,
    strata: np.ndarray | None = None,
    strata_column: str = STRATA_COLUMN,
) -> Policy:
    """The policy from every session seen (``features``, one array per column) over ``days`` days.

    The error model is fit on the rated sessions (``rated``; ``abs_error`` = |label - out-of-fold prediction| for
    them, shape (n_rated,)); the answer model on the asked sessions (``asked``, with ``answered``, both over every
    session; None: no asks logged); ``strata``: every session's stratum (None, or None entries: unknown). The form
    (uniform, error, stratified) is chosen by ``choose_form`` on held-out folds; the multiplier is set over all
    sessions so the expected asks per day equal the budget. The error form's note is None when nothing else needs
    saying (its figures are in ``choice``); the uniform and stratified forms' notes say why, with the figures.
    """
    r = np.asarray(rated, dtype=bool)
    if not 0.0 < floor <= 1.0:
        raise ValueError(f"the floor must be in (0, 1], got {floor}")
    if not days > 0 or r.size == 0:
        raise ValueError("no sessions to fit an ask policy on")
    labels = None if strata is None else np.asarray(strata, dtype=object).reshape(-1)
    if labels is not None and labels.size != r.size:
        raise ValueError(f"strata has {labels.size} entries for {r.size} sessions")
    names = tuple(features) if names is None else names  # the models read these; never the one-hot strata
    if labels is not None:
        features = features | stratum_features(labels, strata_column)
    intercept, terms, note = fit_error_model({k: np.asarray(v)[r] for k, v in features.items()}, abs_error, names)
    answer, answer_note = None, None
    if asked is not None:
        k = np.asarray(asked, dtype=bool)
        answer, answer_note = fit_answer_model(
            {c: np.asarray(v)[k] for c, v in features.items()}, np.asarray(answered, dtype=bool)[k], names
        )
    form, fitted_strata, choice = (UNIFORM if note is not None else ERROR), None, None
    if note is None:  # an error model was fit: does it, or the strata, beat asking alike on held-out folds?
        choice = choose_form(features, r, abs_error, days, budget_per_day, floor, answer, labels, names, strata_column)
        form = choice["chosen"]
        if form != ERROR:
            intercept, terms = 0.0, tuple(replace(t, coefficient=0.0) for t in terms)
            note = choice_note(choice, strata_column)
        if form == STRATIFIED:
            fitted_strata = fit_strata(labels[r], abs_error, strata_column)
    if answer is None:
        answer_note = "no asks logged: the answer rate is unknown, taken as constant"
    if answer_note is not None:
        note = _join(note, answer_note)
    scores = ask_scores(features, intercept, terms, answer, fitted_strata)
    m = multiplier_for_budget(scores, budget_per_day, floor, np.full(r.size, 1.0 / days))
    q = ask_probabilities(scores, m, floor)
    expected = float(q.sum() / days)
    ratings = None if answer is None else float(np.dot(q, answer_probability(features, answer)) / days)
    if m == 0.0:
        note = _join(note, f"the floor {floor} alone asks {expected:.1f} sessions a day, above the budget")
    elif abs(expected - budget_per_day) > 1e-6 * max(1.0, budget_per_day):
        note = _join(note, f"the budget exceeds the sessions a day ({r.size / days:.1f}): every session is asked")
    return Policy(
        intercept=intercept,
        terms=terms,
        answer=answer,
        multiplier=m,
        floor=floor,
        budget_per_day=budget_per_day,
        sessions_per_day=r.size / days,
        expected_asks_per_day=expected,
        expected_ratings_per_day=ratings,
        fitted_on_ratings=int(r.sum()),
        note=note,
        format=FORMAT if fitted_strata is None else STRATA_FORMAT,
        form=form,
        strata=fitted_strata,
        choice=choice,
    )


def _join(a: str | None, b: str) -> str:
    return b if a is None else f"{a}; {b}"


# --------------------------------------------------------------------------------------------------------
# the warehouse side


@dataclass(frozen=True)
class PolicyInputs:
    """What the policy is fit on, one entry per session with event features."""

    features: dict[str, np.ndarray]  # POLICY_FEATURES, NaN where missing
    rated: np.ndarray  # a star label and an out-of-fold prediction
    abs_error: np.ndarray  # |label - prediction| of the rated sessions, shape (n_rated,)
    days: float  # distinct calendar days of session starts, at least 1
    asked: np.ndarray  # the widget was shown (a row of staging.session_asks)
    answered: np.ndarray  # asked, and it has a star label or an answered ask
    strata: np.ndarray | None = None  # each session's stratum (None: unknown); None when no session has one
    strata_column: str = STRATA_COLUMN

    @property
    def asks_per_day(self) -> float | None:
        """Asked sessions per day when asks are logged, else None."""
        return float(self.asked.sum()) / self.days if self.asked.any() else None


def _strata_columns(con: duckdb.DuckDBPyConnection, column: str) -> list[str]:
    """The columns of ``features.session_features`` that make ``column``'s strata: itself, or its one-hot
    options ``<column>__*`` (``estimates.strata.stratum_labels`` reads either); [] without the table."""
    schema, name = tables.SESSION_FEATURES.qualified.split(".")
    found = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ?"
        " ORDER BY ordinal_position",
        [schema, name],
    ).fetchall()
    return [c for (c,) in found if c == column or c.startswith(f"{column}__")]


def policy_strata(frame: pl.DataFrame, column: str) -> np.ndarray | None:
    """Each session's stratum for the stratified form, by ``estimates.strata.stratum_labels``; a session with
    no value (``strata.UNKNOWN``) or several options at once (``a+b``) has none (None: the platform names one
    stratum per session, by its one-hot feature, or none). None when ``frame`` holds no such column or no
    session has a stratum."""
    if strata_problem(frame, column) is not None:
        return None
    labels = stratum_labels(frame, column)
    out = np.array([None if v == UNKNOWN_STRATUM or "+" in str(v) else str(v) for v in labels], dtype=object)
    return out if any(v is not None for v in out) else None


def policy_inputs(con: duckdb.DuckDBPyConnection, strata_column: str = STRATA_COLUMN) -> PolicyInputs:
    """The policy's inputs from a warehouse connection (read-only will do).

    Every session with event features; rated = it has a label on stars (the widget the policy asks with; the
    model predicts stars, so a thumb's error would be another quantity) and an out-of-fold prediction; asked = it
    has a row in ``staging.session_asks`` (when the table exists); answered = asked and it has a star label or an
    ask answered with a rating; its stratum from ``features.session_features``' ``strata_column`` (or its one-hot
    options), by ``policy_strata``.
    """
    strata_cols = _strata_columns(con, strata_column)
    cols = ", ".join([f"e.{c}" for c in POLICY_FEATURES] + [f'sf."{c}"' for c in strata_cols])
    join_strata = f"LEFT JOIN {tables.SESSION_FEATURES.qualified} sf USING (session_id)" if strata_cols else ""
    has_asks = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'staging' AND table_name = 'session_asks'"
    ).fetchone()[0]
    asks = (
        "k.session_id IS NOT NULL AS asked, coalesce(k.n_answered, 0) > 0 AS answered_ask"
        if has_asks
        else "false AS asked, false AS answered_ask"
    )
    join_asks = f"LEFT JOIN {tables.SESSION_ASKS.qualified} k USING (session_id)" if has_asks else ""
    frame = con.execute(f"""
        SELECT {cols}, s.started_at, l.label, p.prediction, {asks}
        FROM {tables.EVENT_FEATURES.qualified} e JOIN {tables.STAGING_SESSIONS.qualified} s USING (session_id)
        LEFT JOIN (SELECT * FROM {tables.SESSION_LABELS.qualified} WHERE scale = '{STARS}') l USING (session_id)
        LEFT JOIN {tables.PREDICTIONS.qualified} p USING (session_id)
        {join_asks}
        {join_strata}
        ORDER BY e.session_id""").pl()
    features = {c: frame[c].cast(float).fill_null(float("nan")).to_numpy() for c in POLICY_FEATURES}
    rated = (frame["label"].is_not_null() & frame["prediction"].is_not_null()).to_numpy()
    asked = frame["asked"].to_numpy().astype(bool)
    answered = asked & (frame["label"].is_not_null().to_numpy() | frame["answered_ask"].to_numpy().astype(bool))
    return PolicyInputs(
        features=features,
        rated=rated,
        abs_error=(frame["label"] - frame["prediction"]).abs().to_numpy()[rated],
        days=float(max(1, frame["started_at"].dt.date().drop_nulls().n_unique())),
        asked=asked,
        answered=answered,
        strata=policy_strata(frame.select(strata_cols), strata_column) if strata_cols else None,
        strata_column=strata_column,
    )


def default_budget(n_sessions: int, days: float, asks_per_day: float | None) -> float:
    """Asked sessions per day when asks are logged, else ``DEFAULT_ASK_SHARE`` of the sessions per day."""
    return asks_per_day if asks_per_day is not None else DEFAULT_ASK_SHARE * n_sessions / days


def policy_strata_column(config_path: Path) -> str:
    """The stratified form's column: ``experiments.toml``'s top-level ``strata`` (the policy serves every
    experiment), else the task type; "none" turns the form off (no column of that name)."""
    return experiments_config(Path(config_path)).default_strata or DEFAULT_STRATA


def policy_from_warehouse(
    con: duckdb.DuckDBPyConnection,
    budget_per_day: float | None = None,
    floor: float = DEFAULT_FLOOR,
    strata_column: str = STRATA_COLUMN,
) -> tuple[Policy | None, str | None]:
    """(policy, None), or (None, why) when there is nothing to fit on. ``budget_per_day`` None: ``default_budget``
    (``pulse ask --budget`` and ``PULSE_ASK_BUDGET`` pass theirs); ``strata_column``: the stratified form's column
    (``experiments.toml``'s top-level ``strata``, else the task type)."""
    inputs = policy_inputs(con, strata_column)
    n = inputs.rated.size
    if n == 0:
        return None, "no session has event features yet: nothing to fit an ask policy on"
    if budget_per_day is None:
        budget_per_day = default_budget(n, inputs.days, inputs.asks_per_day)
    if not budget_per_day > 0:
        return None, f"the budget must be a positive number of asks per day, got {budget_per_day}"
    asked = inputs.asked if inputs.asked.any() else None
    policy = fit_policy(
        inputs.features,
        inputs.rated,
        inputs.abs_error,
        inputs.days,
        budget_per_day,
        floor,
        POLICY_FEATURES,
        asked=asked,
        answered=inputs.answered,
        strata=inputs.strata,
        strata_column=inputs.strata_column,
    )
    return policy, None


def policy_frame(policy: Policy) -> pl.DataFrame:
    """The rows of ``estimates.ask_policy``: the error model's intercept and terms (``model`` = 'error'; every
    coefficient 0 unless the policy asks by it), the strata's factors (``model`` = 'stratum', term
    '<column>=<stratum>', coefficient the factor; only for the stratified form), then the answer model's
    (``model`` = 'answer'; none when the answer rate is unknown), each with the policy's scalars and ``form``."""
    rows = [("error", "(intercept)", None, None, None, policy.intercept)]
    rows += [("error", t.feature, t.transform, t.mean, t.sd, t.coefficient) for t in policy.terms]
    if policy.strata is not None:
        rows += [
            ("stratum", f"{policy.strata.column}={h}", None, None, None, score) for h, score in policy.strata.scores
        ]
        rows += [("stratum", f"{policy.strata.column}={OTHER}", None, None, None, policy.strata.other)]
    if policy.answer is not None:
        rows += [("answer", "(intercept)", None, None, None, policy.answer.intercept)]
        rows += [("answer", t.feature, t.transform, t.mean, t.sd, t.coefficient) for t in policy.answer.terms]
    return pl.DataFrame(
        {
            "model": [r[0] for r in rows],
            "term": [r[1] for r in rows],
            "transform": [r[2] for r in rows],
            "mean": [r[3] for r in rows],
            "sd": [r[4] for r in rows],
            "coefficient": [r[5] for r in rows],
        },
        schema_overrides={"transform": pl.String, "mean": pl.Float64, "sd": pl.Float64},
    ).with_columns(
        multiplier=pl.lit(policy.multiplier),
        floor=pl.lit(policy.floor),
        budget_per_day=pl.lit(policy.budget_per_day),
        sessions_per_day=pl.lit(policy.sessions_per_day),
        expected_asks_per_day=pl.lit(policy.expected_asks_per_day),
        expected_ratings_per_day=pl.lit(policy.expected_ratings_per_day, dtype=pl.Float64),
        fitted_on_ratings=pl.lit(policy.fitted_on_ratings, dtype=pl.Int32),
        fitted_on_asks=pl.lit(0 if policy.answer is None else policy.answer.fitted_on_asks, dtype=pl.Int32),
        policy_version=pl.lit(policy.version),
        note=pl.lit(policy.note, dtype=pl.String),
        form=pl.lit(policy.form),
    )


__all__ = [  # this module's names, and its rooms' (importable from here as before they moved)
    "POLICY_FEATURES",
    "DEFAULT_ASK_SHARE",
    "fit_policy",
    "PolicyInputs",
    "policy_strata",
    "policy_inputs",
    "default_budget",
    "policy_strata_column",
    "policy_from_warehouse",
    "policy_frame",
    "CROSSFIT_FOLDS",
    "CROSSFIT_SEED",
    "MARGIN_Z",
    "MIN_STRATUM_RATINGS",
    "OTHER",
    "STRATA_COLUMN",
    "choice_note",
    "choose_form",
    "fit_strata",
    "stratum_features",
    "ANSWER_CLIP",
    "DEFAULT_FLOOR",
    "ERROR",
    "FORMAT",
    "FORMS",
    "GLM_ALPHA",
    "MIN_ASKS",
    "MIN_RATINGS",
    "STRATA_FORMAT",
    "STRATIFIED",
    "UNIFORM",
    "AnswerModel",
    "Policy",
    "Strata",
    "Term",
    "answer_probability",
    "ask_probabilities",
    "ask_scores",
    "expected_error",
    "fit_answer_model",
    "fit_error_model",
    "multiplier_for_budget",
    "policy_digest",
    "probabilities",
    "standardized",
    "stratum_scores",
    "JSON_NAME",
    "POLICY_DIR",
    "READABLE_FORMATS",
    "REFERENCE_NAME",
    "REFERENCE_SOURCE",
    "TRANSFORMS",
    "policy_from_json",
    "reference_module",
    "write_policy",
]
