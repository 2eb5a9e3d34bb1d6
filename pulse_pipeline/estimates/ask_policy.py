"""The ask policy: with what probability the agent platform should show the rating widget for a session.

Active statistical inference (Zrnic & Candès, 2024): a rating tells us most where the model is most wrong, so ask
with probability proportional to the model's expected absolute error for sessions like this one, and correct with
the known probability (``stats.asking``). The policy is a log-linear model of the absolute out-of-fold error on a
few event counts the platform itself knows when a session stops (``POLICY_FEATURES``)::

    z_j     = (t_j(x_j) - mean_j) / sd_j            t_j = log1p for counts and durations; a missing value: z_j = 0
    e_hat   = exp(b_0 + sum_j b_j z_j)              E|Y - f_oof| for sessions like x (a Poisson GLM with log link,
                                                    fit on the rated sessions' |label - out-of-fold prediction|)
    q(x)    = min(1, max(floor, m * e_hat))         m: the multiplier that meets the budget

The multiplier m solves sum_i q(x_i) / days = budget over the sessions seen (``multiplier_for_budget``): the
expected number of asks per day equals the budget. The budget's default (``default_budget``) keeps today's volume:
the asked sessions per day when asks are logged; when only ratings are logged (the widget shown at every stop) it
is half the sessions per day (``DEFAULT_ASK_SHARE``), so users see half the prompts and the ratings go where they
help most. The floor (``DEFAULT_FLOOR`` = 0.01) keeps every session askable: AIPW needs P(rated) > 0 everywhere,
and the weights stay below 1 / (floor x answer rate).

Why a log-linear model of a few counts and not the model itself: the platform must evaluate it at every stop
without PULSE, its features, or its annotator. The policy is exported (``write_policy``) as ``ask_policy.json``
(coefficients, feature means and sds, multiplier, floor) and ``ask_policy.py`` (``REFERENCE_SOURCE``, standard
library only) whose ``ask_probability(features)`` computes q(x) exactly as ``probabilities`` does.

With fewer than ``MIN_RATINGS`` rated sessions with predictions, or no error to model, the policy is uniform (every
coefficient 0, the note says why): asking at random is always valid.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
from sklearn.linear_model import PoissonRegressor

from ..label_scales import STARS

POLICY_FEATURES: tuple[str, ...] = (
    "user_message_count",
    "n_segments",
    "file_edits",
    "failed_commands",
    "test_runs",
    "duration_seconds",
)
"""Columns of ``features.event_features`` the platform counts itself when a session stops."""
DEFAULT_FLOOR = 0.01
DEFAULT_ASK_SHARE = 0.5
MIN_RATINGS = 30
GLM_ALPHA = 0.01  # L2 penalty of the error model on standardized features: a few hundred ratings, a few columns
FORMAT = "pulse-ask-policy/1"
JSON_NAME, REFERENCE_NAME = "ask_policy.json", "ask_policy.py"


@dataclass(frozen=True)
class Term:
    """One feature of the error model: z = (t(x) - mean) / sd, t = log1p or identity."""

    feature: str
    transform: str  # "log1p" or "identity"
    mean: float
    sd: float
    coefficient: float


@dataclass(frozen=True)
class Policy:
    """The fitted policy: q(x) = min(1, max(floor, multiplier * exp(intercept + sum_j coefficient_j z_j)))."""

    intercept: float
    terms: tuple[Term, ...]
    multiplier: float
    floor: float
    budget_per_day: float
    sessions_per_day: float
    expected_asks_per_day: float
    fitted_on_ratings: int
    note: str | None = None
    format: str = field(default=FORMAT)

    def as_json(self) -> dict:
        return {
            "format": self.format,
            "intercept": self.intercept,
            "terms": [vars(t) for t in self.terms],
            "multiplier": self.multiplier,
            "floor": self.floor,
            "budget_per_day": self.budget_per_day,
            "sessions_per_day": self.sessions_per_day,
            "expected_asks_per_day": self.expected_asks_per_day,
            "fitted_on_ratings": self.fitted_on_ratings,
            "note": self.note,
        }


def _transform(x: np.ndarray, transform: str) -> np.ndarray:
    return np.log1p(np.maximum(x, 0.0)) if transform == "log1p" else x


def standardized(features: dict[str, np.ndarray], terms: tuple[Term, ...]) -> np.ndarray:
    """The error model's inputs z (n x p) for each term; NaN or an absent column becomes 0, the mean."""
    n = len(next(iter(features.values()))) if features else 0
    cols = []
    for t in terms:
        if t.feature not in features:
            cols.append(np.zeros(n))
            continue
        z = (_transform(np.asarray(features[t.feature], dtype=np.float64), t.transform) - t.mean) / t.sd
        cols.append(np.where(np.isfinite(z), z, 0.0))
    return np.column_stack(cols) if cols else np.zeros((n, 0))


def expected_error(features: dict[str, np.ndarray], intercept: float, terms: tuple[Term, ...]) -> np.ndarray:
    """e_hat = exp(intercept + z @ b), the linear part capped at 700 (as the reference function caps it)."""
    eta = intercept + standardized(features, terms) @ np.array([t.coefficient for t in terms])
    return np.exp(np.minimum(eta, 700.0))


def fit_error_model(
    features: dict[str, np.ndarray], abs_error: np.ndarray, names: tuple[str, ...] | None = None
) -> tuple[float, tuple[Term, ...], str | None]:
    """(intercept, terms, note): the Poisson GLM (log link) of |Y - f_oof| on the standardized features.

    The Poisson quasi-likelihood fits E|e| = exp(b_0 + z b) consistently whatever the error's distribution, and
    takes zero errors. A feature is log1p-transformed when it is never negative (counts, durations). Features that
    are missing for every session are left out. Fewer than ``MIN_RATINGS`` errors, or all zero: uniform policy.
    """
    e = np.abs(np.asarray(abs_error, dtype=np.float64))
    names = tuple(features) if names is None else names
    terms = []
    for name in names:
        x = np.asarray(features[name], dtype=np.float64)
        ok = np.isfinite(x)
        if not ok.any():
            continue
        transform = "log1p" if x[ok].min() >= 0 else "identity"
        t = _transform(x[ok], transform)
        sd = float(t.std())
        terms.append(Term(name, transform, float(t.mean()), sd if sd > 0 else 1.0, 0.0))
    if e.size < MIN_RATINGS:
        return 0.0, tuple(terms), f"{e.size} rated sessions with predictions (< {MIN_RATINGS}): asking uniformly"
    if not e.sum() > 0:
        return 0.0, tuple(terms), "the model's error is 0 on every rated session: asking uniformly"
    Z = standardized(features, tuple(terms))
    scale = float(e.mean())  # fit e / mean(e): the penalty then shrinks alike whatever the error's units
    glm = PoissonRegressor(alpha=GLM_ALPHA, max_iter=1000).fit(Z, e / scale)
    fitted = tuple(Term(t.feature, t.transform, t.mean, t.sd, float(b)) for t, b in zip(terms, glm.coef_, strict=True))
    return float(glm.intercept_) + math.log(scale), fitted, None


def multiplier_for_budget(scores: np.ndarray, budget: float, floor: float, weights: np.ndarray | None = None) -> float:
    """m such that sum_i w_i * min(1, max(floor, m * s_i)) = budget (bisection on log m; the sum is monotone in m).

    ``weights`` default to 1: the budget is then the expected number of asks over these sessions. With
    w_i = 1 / days it is the asks per day; with w_i = P(answer | asked, x_i) it is the expected number of ratings.
    A budget at or below the floor's sum gives m = 0 (everyone at the floor); at or above sum w_i, the m that
    asks everyone.
    """
    s = np.asarray(scores, dtype=np.float64)
    w = np.ones_like(s) if weights is None else np.asarray(weights, dtype=np.float64)
    if s.size == 0 or not (s > 0).all():
        raise ValueError("scores must be positive and non-empty")

    def total(m: float) -> float:
        return float(np.dot(w, np.clip(m * s, floor, 1.0)))

    if budget <= total(0.0):
        return 0.0
    hi = 1.0 / float(s.min())
    if budget >= total(hi):
        return hi
    lo = floor / float(s.max())
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if total(mid) < budget else (lo, mid)
        if hi / lo - 1.0 < 1e-12:
            break
    return math.sqrt(lo * hi)


def ask_probabilities(scores: np.ndarray, multiplier: float, floor: float) -> np.ndarray:
    """q = min(1, max(floor, multiplier * score))."""
    return np.minimum(1.0, np.maximum(floor, multiplier * np.asarray(scores, dtype=np.float64)))


def probabilities(policy: Policy, features: dict[str, np.ndarray]) -> np.ndarray:
    """q(x) for every session of ``features`` (what the exported reference function computes one at a time)."""
    return ask_probabilities(expected_error(features, policy.intercept, policy.terms), policy.multiplier, policy.floor)


def fit_policy(
    features: dict[str, np.ndarray],
    rated: np.ndarray,
    abs_error: np.ndarray,
    days: float,
    budget_per_day: float,
    floor: float = DEFAULT_FLOOR,
    names: tuple[str, ...] | None = None,
) -> Policy:
    """The policy from every session seen (``features``, one array per column) over ``days`` days.

    The error model is fit on the rated sessions (``rated``; ``abs_error`` = |label - out-of-fold prediction| for
    them, shape (n_rated,)); the multiplier is set over all sessions so the expected asks per day equal the budget.
    """
    r = np.asarray(rated, dtype=bool)
    if not 0.0 < floor <= 1.0:
        raise ValueError(f"the floor must be in (0, 1], got {floor}")
    if not days > 0 or r.size == 0:
        raise ValueError("no sessions to fit an ask policy on")
    intercept, terms, note = fit_error_model({k: np.asarray(v)[r] for k, v in features.items()}, abs_error, names)
    scores = expected_error(features, intercept, terms)
    m = multiplier_for_budget(scores, budget_per_day, floor, np.full(r.size, 1.0 / days))
    q = ask_probabilities(scores, m, floor)
    expected = float(q.sum() / days)
    if m == 0.0:
        note = _join(note, f"the floor {floor} alone asks {expected:.1f} sessions a day, above the budget")
    elif abs(expected - budget_per_day) > 1e-6 * max(1.0, budget_per_day):
        note = _join(note, f"the budget exceeds the sessions a day ({r.size / days:.1f}): every session is asked")
    return Policy(intercept, terms, m, floor, budget_per_day, r.size / days, expected, int(r.sum()), note)


def _join(a: str | None, b: str) -> str:
    return b if a is None else f"{a}; {b}"


# --------------------------------------------------------------------------------------------------------
# the warehouse side


def policy_inputs(
    con: duckdb.DuckDBPyConnection,
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, float, float | None]:
    """(features, rated, abs_error, days, asks_per_day) from a warehouse connection (read-only will do).

    Every session with event features; rated = it has a label on stars (the widget the policy asks with; the
    model predicts stars, so a thumb's error would be another quantity) and an out-of-fold prediction; days = distinct
    calendar days of session starts (at least 1); asks_per_day = asked sessions per day when asks are logged
    (``staging.session_asks``), else None.
    """
    cols = ", ".join(f"e.{c}" for c in POLICY_FEATURES)
    frame = con.execute(f"""
        SELECT {cols}, s.started_at, l.label, p.prediction
        FROM features.event_features e JOIN staging.sessions s USING (session_id)
        LEFT JOIN (SELECT * FROM staging.session_labels WHERE scale = '{STARS}') l USING (session_id)
        LEFT JOIN modeling.predictions p USING (session_id)
        ORDER BY e.session_id""").pl()
    features = {c: frame[c].cast(float).fill_null(float("nan")).to_numpy() for c in POLICY_FEATURES}
    rated = (frame["label"].is_not_null() & frame["prediction"].is_not_null()).to_numpy()
    abs_error = (frame["label"] - frame["prediction"]).abs().to_numpy()[rated]
    days = max(1, frame["started_at"].dt.date().drop_nulls().n_unique())
    has_asks = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'staging' AND table_name = 'session_asks'"
    ).fetchone()[0]
    n_asked = con.execute("SELECT count(*) FROM staging.session_asks").fetchone()[0] if has_asks else 0
    return features, rated, abs_error, float(days), (n_asked / days if n_asked else None)


def default_budget(n_sessions: int, days: float, asks_per_day: float | None) -> float:
    """Asked sessions per day when asks are logged, else ``DEFAULT_ASK_SHARE`` of the sessions per day."""
    return asks_per_day if asks_per_day is not None else DEFAULT_ASK_SHARE * n_sessions / days


def policy_from_warehouse(
    con: duckdb.DuckDBPyConnection, budget_per_day: float | None = None, floor: float = DEFAULT_FLOOR
) -> tuple[Policy | None, str | None]:
    """(policy, None), or (None, why) when there is nothing to fit on. ``budget_per_day`` None: ``default_budget``."""
    features, rated, abs_error, days, asks_per_day = policy_inputs(con)
    if rated.size == 0:
        return None, "no session has event features yet: nothing to fit an ask policy on"
    if budget_per_day is None:
        budget_per_day = default_budget(rated.size, days, asks_per_day)
    if not budget_per_day > 0:
        return None, f"the budget must be a positive number of asks per day, got {budget_per_day}"
    return fit_policy(features, rated, abs_error, days, budget_per_day, floor, POLICY_FEATURES), None


def policy_frame(policy: Policy) -> pl.DataFrame:
    """The rows of ``estimates.ask_policy``: the intercept, then one row per term, each with the policy's scalars."""
    rows = [("(intercept)", None, None, None, policy.intercept)]
    rows += [(t.feature, t.transform, t.mean, t.sd, t.coefficient) for t in policy.terms]
    return pl.DataFrame(
        {
            "term": [r[0] for r in rows],
            "transform": [r[1] for r in rows],
            "mean": [r[2] for r in rows],
            "sd": [r[3] for r in rows],
            "coefficient": [r[4] for r in rows],
        },
        schema_overrides={"transform": pl.String, "mean": pl.Float64, "sd": pl.Float64},
    ).with_columns(
        multiplier=pl.lit(policy.multiplier),
        floor=pl.lit(policy.floor),
        budget_per_day=pl.lit(policy.budget_per_day),
        sessions_per_day=pl.lit(policy.sessions_per_day),
        expected_asks_per_day=pl.lit(policy.expected_asks_per_day),
        fitted_on_ratings=pl.lit(policy.fitted_on_ratings, dtype=pl.Int32),
        note=pl.lit(policy.note, dtype=pl.String),
    )


def write_policy(policy: Policy, directory: Path) -> tuple[Path, Path]:
    """Write ``ask_policy.json`` and the standalone ``ask_policy.py`` next to it; return both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, py_path = directory / JSON_NAME, directory / REFERENCE_NAME
    json_path.write_text(json.dumps(policy.as_json(), indent=2) + "\n")
    py_path.write_text(REFERENCE_SOURCE)
    return json_path, py_path


REFERENCE_SOURCE = '''"""PULSE ask policy: the probability of showing the rating widget (standard library only).

    from ask_policy import ask_probability
    q = ask_probability({"user_message_count": 4, "n_segments": 2, "file_edits": 7, ...})
    show_widget = random.random() < q      # and log q with the ask as ask_probability

Reads ask_policy.json next to this file (or pass policy=load(path)):
    z_j = (t_j(x_j) - mean_j) / sd_j     t_j = log(1 + max(x, 0)) when transform is "log1p"; missing x: z_j = 0
    q   = min(1, max(floor, multiplier * exp(intercept + sum_j coefficient_j * z_j)))
"""

import json
import math
import os

_POLICY = None


def load(path=None):
    """The policy as a dict (default: ask_policy.json in this file's folder)."""
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "ask_policy.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def ask_probability(features, policy=None):
    """P(show the widget) for one session, from a dict of its feature values (missing ones count as average)."""
    global _POLICY
    if policy is None:
        if _POLICY is None:
            _POLICY = load()
        policy = _POLICY
    eta = policy["intercept"]
    for term in policy["terms"]:
        try:
            x = float(features.get(term["feature"]))
        except (TypeError, ValueError):
            continue
        if not math.isfinite(x):
            continue
        if term["transform"] == "log1p":
            x = math.log1p(max(x, 0.0))
        eta += term["coefficient"] * ((x - term["mean"]) / term["sd"])
    return min(1.0, max(policy["floor"], policy["multiplier"] * math.exp(min(eta, 700.0))))
'''
