"""The ask policy: with what probability the agent platform should show the rating widget for a session.

Active statistical inference (Zrnic & Candès, 2024): a rating tells us most where the model is most wrong, so ask
more where the model's expected error is large, and correct with the known probability (``stats.asking``). A
session is rated when the widget is shown (probability q(x), chosen here) *and* the user answers it (probability
a(x), which differs between users and sessions), so the policy takes both into account::

    z_j     = (t_j(x_j) - mean_j) / sd_j            t_j = log1p for counts and durations; a missing value: z_j = 0
    e_hat   = exp(b_0 + sum_j b_j z_j)              E|Y - f_oof| for sessions like x (a Poisson GLM with log link,
                                                    fit on the rated sessions' |label - out-of-fold prediction|)
    a_hat   = 1 / (1 + exp(-(c_0 + sum_j c_j clip(z'_j, -3, 3))))
                                                    P(answer | asked, x): a logistic regression fit on the asked
                                                    sessions (answered or not), z' standardized over them
    q(x)    = min(1, max(floor, m * e_hat / sqrt(max(a_hat, ANSWER_FLOOR))))
                                                    m: the multiplier that meets the budget of asks

**Why e / sqrt(a).** The AIPW mean over N sessions is (1/N) sum_i [f_i + R_i (Y_i - f_i) / pi_i] with R_i the
rated indicator and pi_i = P(rated_i) = q_i a_i (``stats.asking.known_ask_propensity``). Given the sessions, its
variance is (1/N^2) sum_i e_i^2 (1 - pi_i) / pi_i, e_i = Y_i - f_i; the part the design controls is

    V(q) = sum_i s_i^2 / (q_i a_i),        s_i^2 = E[e_i^2 | x_i]

(the remaining -sum_i s_i^2 does not depend on q). Minimise V over 0 < q_i <= 1:

- *A budget of asks*, sum_i q_i = B: the Lagrangian sum_i s_i^2 / (q_i a_i) + lambda sum_i q_i has
  d/dq_i = -s_i^2 / (q_i^2 a_i) + lambda = 0, so q_i = s_i / sqrt(lambda a_i), **q proportional to s / sqrt(a)**,
  and V = (sum_i s_i / sqrt(a_i))^2 / B.
- *A budget of ratings*, sum_i q_i a_i = B: d/dq_i = -s_i^2 / (q_i^2 a_i) + lambda a_i = 0, so **q proportional to
  s / a** (then pi = q a is proportional to s: the ratings land where the error is, whoever answers), and
  V = (sum_i s_i)^2 / B.
- The box floor <= q_i <= 1: V is separable and convex in each q_i, so the KKT conditions give the clipped form
  q_i = min(1, max(floor, m r_i)) with one multiplier m for all (r_i = s_i / sqrt(a_i) or s_i / a_i), which is
  what ``multiplier_for_budget`` solves for.

PULSE budgets **asks** (``budget_per_day``, ``PULSE_ASK_BUDGET``, ``pulse ask --budget``): a widget shown
interrupts the user whether or not it is answered, and that interruption is what a team decides how much of to
spend, per day. (A ratings budget would show the widget to users who rarely answer up to 1 / a times as often:
seven times as often at a = 0.14 as at a = 1, where the asks budget's policy asks them sqrt(7) = 2.6 times as
often.) So the policy is q proportional to s / sqrt(a). Against the policy that ignores the answer rate (q
proportional to s, what PULSE exported before), at the same asks, the variance the design controls falls by

    (sum_i s_i / sqrt(a_i))^2 / ((sum_i s_i) (sum_i s_i / a_i))   <= 1 (Cauchy-Schwarz; = 1 iff a is constant)

e.g., with s constant, 0.97 for answer rates spread as in the ``active`` validation scenario (a from 0.22 to 0.73
between the 5th and 95th percentile) and 0.80 in ``active_answer`` (0.07 to 0.87; ``studies/active.py``).

s(x) is modelled through E|e| (the Poisson GLM is robust and takes zero errors): the two are proportional when the
error's shape is the same across x (s = sqrt(pi / 2) E|e| for a normal error), so the proportionality holds.

The answer model is fit on ``staging.session_asks`` (a session asked; answered = it has a star label or an answered
ask), with the penalty of AIPW's propensity model (``stats.aipw.PROPENSITY_C``) on the same kind of design as its
answer model (``stats.asking.answer_design``: log1p counts, standardized, clipped to 3 sds) but on
``POLICY_FEATURES``, so the platform can evaluate it. With fewer than ``MIN_ASKS`` asked sessions, or none answered
(or none unanswered), the answer rate is unknown or constant: it has no terms, a constant a cancels into m, and
the policy is the error model alone (what it was before the answer rate was modelled).

The multiplier m solves sum_i q(x_i) / days = budget over the sessions seen (``multiplier_for_budget``): the
expected number of asks per day equals the budget. The budget's default (``default_budget``) keeps today's volume:
the asked sessions per day when asks are logged; when only ratings are logged (the widget shown at every stop) it
is half the sessions per day (``DEFAULT_ASK_SHARE``), so users see half the prompts and the ratings go where they
help most. The floor (``DEFAULT_FLOOR`` = 0.01) keeps every session askable: AIPW needs P(rated) > 0 everywhere,
and the weights stay below 1 / (floor x answer rate).

Why log-linear and logistic models of a few counts and not the model itself: the platform must evaluate the policy
at every stop without PULSE, its features, or its annotator. The policy is exported (``write_policy``, atomically)
as ``ask_policy.json`` (both models' coefficients, feature means and sds, multiplier, floor, and
``policy_version``: a digest of the rest of the file, the same for the same policy however often it is exported)
and ``ask_policy.py`` (``REFERENCE_SOURCE``, standard library only) whose ``ask_probability(features)`` computes
q(x) exactly as ``probabilities`` does; the rating service evaluates that same code (``serve/policy.py``).

With fewer than ``MIN_RATINGS`` rated sessions with predictions, or no error to model, the error model is flat
(every coefficient 0, the note says why): asking at random, or by the answer rate alone, is always valid.

**Do no harm: three forms, chosen on held-out folds.** An error model that cannot predict the error asks more
where it guesses wrong, and the variance grows: on real human ratings (ConvAI2, 3 197 rated dialogues, out-of-fold
r 0.30-0.52: ``bench/ask_policy_real.py``, docs/asking.md) the error size is not predictable from the counts, and
error-proportional asking made the rectifier's variance larger than asking alike in half the splits (1.001 on
average, up to 1.008), where an oracle knowing each error would save 32-38 %; the issue measured 1-12 % worse with
ridge and gradient-boosted error models. So ``fit_policy`` considers three forms of s(x):

- ``uniform``: s constant (q proportional to 1 / sqrt(a_hat) where the answer rate is modelled, else q constant):
  every coefficient 0;
- ``error``: the log-linear error model above;
- ``stratified``: s = sigma_h, the root mean square of the error |Y - f_oof| over the rated sessions of the
  session's stratum h (task type: ``STRATA_COLUMN``), the per-ask Neyman allocation of ``stats/allocation.py``
  (q_h proportional to sigma_h / sqrt(a_h): the same derivation as above with s_i = sigma_h(i)); strata with fewer
  than ``MIN_STRATUM_RATINGS`` rated sessions share one pooled sigma (``OTHER``), as does a stratum the platform
  names that was never rated.

Each non-uniform form is scored by its **cross-fitted expected rectifier variance** (``choose_form``): the rated
sessions are split into ``CROSSFIT_FOLDS`` folds; on each, the form is fit on the other folds, its q(x) set over
every session to the same budget of asks as uniform's, and on the held-out rated sessions v_i = e_i^2 / (q_i a_i)
is summed (a_i the answer model's a_hat; 1 when the answer rate is unknown), and the same for uniform. The ratio
R = sum v_form / sum v_uniform over every held-out session estimates the variance the form gives against asking
alike (the rated sessions taken as representative of the sessions asked, PPI's own assumption). A form is used only
when it beats uniform beyond the folds' noise, by a margin fixed before any data was looked at: the one-sided 95 %
upper bound of R, from the paired per-session differences d_i = v_form,i - v_uniform,i,

    R_upper = R + MARGIN_Z sd(d) sqrt(n) / sum v_uniform,        MARGIN_Z = 1.645,

must be below 1; of the forms that pass, the smaller R wins. Otherwise the policy is uniform and its note gives
both forms' R and R_upper. The figures are in ``Policy.choice`` (and the exported file's ``choice``).

The stratified form is evaluated per session from a one-hot feature the platform sends with the others:
``<column>__<stratum>`` = 1 (``task_type__fix_bugs``: the column PULSE's annotator writes); q = min(1, max(floor,
m sigma_h / sqrt(a_hat))), sigma_h relative to the rated sessions' overall root mean square error. A session with no
such feature (or a stratum never rated) gets the pooled sigma. Files: format ``pulse-ask-policy/3`` when the policy
has strata (the reference function multiplies by the stratum's score); a policy without strata is still written as
``pulse-ask-policy/2`` (its probability is computed exactly as before, so a platform's older copy of
``ask_policy.py`` computes it right).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
from sklearn.linear_model import LogisticRegression, PoissonRegressor

from .. import tables
from ..atomic_write import write_whole
from ..label_scales import STARS
from ..stats.aipw import PROPENSITY_C, PROPENSITY_TOL
from ..stats.asking import ANSWER_FLOOR
from .experiments import experiments_config
from .strata import DEFAULT_STRATA, MIN_STRATUM_RATED, strata_problem, stratum_labels
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
DEFAULT_FLOOR = 0.01
DEFAULT_ASK_SHARE = 0.5
MIN_RATINGS = 30
MIN_ASKS = 30
"""Asked sessions the answer model needs; with fewer the answer rate is taken as constant."""
GLM_ALPHA = 0.01  # L2 penalty of the error model on standardized features: a few hundred ratings, a few columns
ANSWER_CLIP = 3.0
"""The answer model's standardized inputs are clipped to [-3, 3] (as ``stats.asking.answer_design``): a long tail
cannot give extreme answer probabilities, and the logistic's exponent stays bounded."""
FORMAT = "pulse-ask-policy/2"
STRATA_FORMAT = "pulse-ask-policy/3"
READABLE_FORMATS = ("pulse-ask-policy/1", FORMAT, STRATA_FORMAT)
"""/1: the error model alone (before the answer model); read as a policy with an unknown answer rate. /3: with
``strata`` (the stratified form); a policy without strata is written as /2."""
UNIFORM, ERROR, STRATIFIED = "uniform", "error", "stratified"
FORMS = (UNIFORM, ERROR, STRATIFIED)
STRATA_COLUMN = DEFAULT_STRATA
"""The session column whose values make the stratified form's strata by default (one-hot ``task_type__<stratum>``
columns of ``features.session_features``, the annotator's task type); ``experiments.toml``'s top-level ``strata``
names another."""
MIN_STRATUM_RATINGS = MIN_STRATUM_RATED
"""A stratum with fewer rated sessions gets the pooled sigma (``OTHER``): the estimator's own rule
(``estimates.strata``: 30), so the policy allocates across the strata the stratified estimate keeps, and a root
mean square of fewer errors would be mostly noise."""
OTHER = "(other)"
CROSSFIT_FOLDS = 5
MARGIN_Z = 1.645
"""The margin beyond fold noise a non-uniform form must clear (module docstring): its variance ratio's one-sided
95 % upper bound below 1. Fixed before any data was looked at."""
CROSSFIT_SEED = 40
JSON_NAME, REFERENCE_NAME = "ask_policy.json", "ask_policy.py"
POLICY_DIR = "ask_policy"
"""The folder under PULSE_HOME the asset and ``pulse ask`` export to, and the rating service loads from."""
TRANSFORMS = ("log1p", "identity")


@dataclass(frozen=True)
class Term:
    """One feature of a model: z = (t(x) - mean) / sd, t = log1p or identity."""

    feature: str
    transform: str  # "log1p" or "identity"
    mean: float
    sd: float
    coefficient: float


@dataclass(frozen=True)
class AnswerModel:
    """P(answer | asked, x) = max(floor, 1 / (1 + exp(-(intercept + sum_j coefficient_j clip(z_j, -clip, clip))))).

    No terms: a constant answer rate (too few asks, or every ask answered, or none), which cancels into the
    policy's multiplier."""

    intercept: float
    terms: tuple[Term, ...]
    fitted_on_asks: int
    floor: float = ANSWER_FLOOR
    clip: float = ANSWER_CLIP

    def as_json(self) -> dict:
        return {
            "intercept": self.intercept,
            "terms": [vars(t) for t in self.terms],
            "floor": self.floor,
            "clip": self.clip,
            "fitted_on_asks": self.fitted_on_asks,
        }


@dataclass(frozen=True)
class Strata:
    """The stratified form's per-stratum factor: a session with the one-hot feature ``<column>__<stratum>`` = 1
    gets that stratum's ``score`` (sigma_h over the rated sessions' overall root mean square error); any other
    session ``other`` (the pooled sigma)."""

    column: str
    scores: tuple[tuple[str, float], ...]  # (stratum, score), sorted by stratum
    other: float

    def as_json(self) -> dict:
        return {"column": self.column, "scores": dict(self.scores), "other": self.other}

    def feature(self, stratum: str) -> str:
        return f"{self.column}__{stratum}"


@dataclass(frozen=True)
class Policy:
    """The fitted policy: q(x) = min(1, max(floor, multiplier * e_hat(x) / sqrt(a_hat(x)))), e_hat =
    exp(intercept + sum_j coefficient_j z_j), a_hat the ``answer`` model (None: no asks logged, the answer rate
    unknown and taken as constant: q = min(1, max(floor, multiplier * e_hat(x))))."""

    intercept: float
    terms: tuple[Term, ...]
    answer: AnswerModel | None
    multiplier: float
    floor: float
    budget_per_day: float
    sessions_per_day: float
    expected_asks_per_day: float
    expected_ratings_per_day: float | None  # sum_i q_i a_hat_i / days; None when the answer rate is unknown
    fitted_on_ratings: int
    note: str | None = None
    format: str = field(default=FORMAT)
    form: str = ERROR  # UNIFORM, ERROR or STRATIFIED (module docstring)
    strata: Strata | None = None  # the stratified form's factors; None for the others
    choice: Mapping | None = None  # choose_form's figures: each form's cross-fitted variance ratio and bound

    def content(self) -> dict:
        """Everything the exported file holds but its ``policy_version``."""
        return {
            "format": self.format,
            "form": self.form,
            "strata": None if self.strata is None else self.strata.as_json(),
            "choice": None if self.choice is None else dict(self.choice),
            "intercept": self.intercept,
            "terms": [vars(t) for t in self.terms],
            "answer_model": None if self.answer is None else self.answer.as_json(),
            "multiplier": self.multiplier,
            "floor": self.floor,
            "budget_per_day": self.budget_per_day,
            "sessions_per_day": self.sessions_per_day,
            "expected_asks_per_day": self.expected_asks_per_day,
            "expected_ratings_per_day": self.expected_ratings_per_day,
            "fitted_on_ratings": self.fitted_on_ratings,
            "note": self.note,
        }

    @property
    def version(self) -> str:
        return policy_digest(self.content())

    def as_json(self) -> dict:
        """The exported file: ``content()`` with its digest, ``policy_version``, second."""
        content = self.content()
        return {"format": self.format, "policy_version": policy_digest(content)} | content


def policy_digest(content: Mapping) -> str:
    """The policy's version: the first 16 hex digits of the SHA-256 of its content (every field but
    ``policy_version``) as canonical JSON (keys sorted, no spaces). The same policy exported again has the same
    version; any change to a coefficient, the multiplier, the floor, the budget or the note gives a new one."""
    rest = {k: v for k, v in content.items() if k != "policy_version"}
    canonical = json.dumps(rest, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _transform(x: np.ndarray, transform: str) -> np.ndarray:
    return np.log1p(np.maximum(x, 0.0)) if transform == "log1p" else x


def standardized(features: dict[str, np.ndarray], terms: tuple[Term, ...], clip: float | None = None) -> np.ndarray:
    """A model's inputs z (n x p) for each term; NaN or an absent column becomes 0, the mean; ``clip``: z clipped
    to [-clip, clip]."""
    n = len(next(iter(features.values()))) if features else 0
    cols = []
    for t in terms:
        if t.feature not in features:
            cols.append(np.zeros(n))
            continue
        with np.errstate(over="ignore", invalid="ignore"):
            z = (_transform(np.asarray(features[t.feature], dtype=np.float64), t.transform) - t.mean) / t.sd
        z = np.where(np.isfinite(z), z, 0.0)
        cols.append(z if clip is None else np.clip(z, -clip, clip))
    return np.column_stack(cols) if cols else np.zeros((n, 0))


def expected_error(features: dict[str, np.ndarray], intercept: float, terms: tuple[Term, ...]) -> np.ndarray:
    """e_hat = exp(intercept + z @ b), the linear part capped at 700 (as the reference function caps it)."""
    eta = intercept + standardized(features, terms) @ np.array([t.coefficient for t in terms])
    return np.exp(np.minimum(eta, 700.0))


def answer_probability(features: dict[str, np.ndarray], answer: AnswerModel) -> np.ndarray:
    """a_hat = max(floor, 1 / (1 + exp(-eta))), eta = intercept + clip(z) @ c (exp's argument capped at 700, as the
    reference function caps it)."""
    eta = answer.intercept + standardized(features, answer.terms, answer.clip) @ np.array(
        [t.coefficient for t in answer.terms]
    )
    return np.maximum(answer.floor, 1.0 / (1.0 + np.exp(np.minimum(-eta, 700.0))))


def stratum_scores(features: dict[str, np.ndarray], strata: Strata) -> np.ndarray:
    """Each session's stratum factor: the score of the first stratum (in ``strata.scores``' order) whose one-hot
    feature is above 0.5, else ``strata.other`` (as the reference function reads it)."""
    n = len(next(iter(features.values()))) if features else 0
    out = np.full(n, strata.other)
    found = np.zeros(n, dtype=bool)
    for stratum, score in strata.scores:
        x = np.asarray(features.get(strata.feature(stratum), np.zeros(n)), dtype=np.float64)
        hit = ~found & (np.nan_to_num(x, nan=0.0) > 0.5)
        out[hit], found = score, found | hit
    return out


def ask_scores(
    features: dict[str, np.ndarray],
    intercept: float,
    terms: tuple[Term, ...],
    answer: AnswerModel | None,
    strata: Strata | None = None,
) -> np.ndarray:
    """The policy's score before the multiplier: e_hat / sqrt(a_hat) (module docstring), e_hat alone when the
    answer rate is unknown; times the stratum's factor when the policy has ``strata``."""
    e = expected_error(features, intercept, terms)
    if strata is not None:
        e = e * stratum_scores(features, strata)
    return e if answer is None else e / np.sqrt(answer_probability(features, answer))


def _terms(features: dict[str, np.ndarray], names: tuple[str, ...]) -> list[Term]:
    """One term per feature with a value somewhere, standardized over the given sessions, coefficient 0; log1p
    when the feature is never negative (counts, durations)."""
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
    return terms


def fit_error_model(
    features: dict[str, np.ndarray], abs_error: np.ndarray, names: tuple[str, ...] | None = None
) -> tuple[float, tuple[Term, ...], str | None]:
    """(intercept, terms, note): the Poisson GLM (log link) of |Y - f_oof| on the standardized features.

    The Poisson quasi-likelihood fits E|e| = exp(b_0 + z b) consistently whatever the error's distribution, and
    takes zero errors. A feature is log1p-transformed when it is never negative (counts, durations). Features that
    are missing for every session are left out. Fewer than ``MIN_RATINGS`` errors, or all zero: uniform policy.
    """
    e = np.abs(np.asarray(abs_error, dtype=np.float64))
    terms = _terms(features, tuple(features) if names is None else names)
    if e.size < MIN_RATINGS:
        return 0.0, tuple(terms), f"{e.size} rated sessions with predictions (< {MIN_RATINGS}): asking uniformly"
    if not e.sum() > 0:
        return 0.0, tuple(terms), "the model's error is 0 on every rated session: asking uniformly"
    Z = standardized(features, tuple(terms))
    scale = float(e.mean())  # fit e / mean(e): the penalty then shrinks alike whatever the error's units
    glm = PoissonRegressor(alpha=GLM_ALPHA, max_iter=1000).fit(Z, e / scale)
    fitted = tuple(Term(t.feature, t.transform, t.mean, t.sd, float(b)) for t, b in zip(terms, glm.coef_, strict=True))
    return float(glm.intercept_) + math.log(scale), fitted, None


def fit_answer_model(
    features: dict[str, np.ndarray], answered: np.ndarray, names: tuple[str, ...] | None = None
) -> tuple[AnswerModel | None, str | None]:
    """(answer model, note) from the asked sessions (``features`` and ``answered``, one entry per asked session).

    A logistic regression of answered on the clipped standardized features (L2, ``PROPENSITY_C``, Newton to
    ``PROPENSITY_TOL``: AIPW's propensity model). No asked session: (None, why): the answer rate is unknown. Fewer
    than ``MIN_ASKS``, or every one answered, or none: a constant rate (no terms), with a note."""
    r = np.asarray(answered, dtype=bool).reshape(-1)
    if r.size == 0:
        return None, None
    rate = float(r.mean())
    clipped = min(max(rate, ANSWER_FLOOR), 1.0 - ANSWER_FLOOR)
    constant = math.log(clipped / (1.0 - clipped))  # the logit of the rate (kept off 0 and 1)
    if r.size < MIN_ASKS or r.all() or not r.any():
        why = (
            f"{r.size} asked sessions (< {MIN_ASKS})"
            if r.size < MIN_ASKS
            else ("every asked session answered" if r.all() else "no asked session answered")
        )
        return AnswerModel(constant, (), int(r.size)), f"{why}: the answer rate taken as constant ({rate:.2f})"
    terms = tuple(_terms(features, tuple(features) if names is None else names))
    Z = standardized(features, terms, ANSWER_CLIP)
    model = LogisticRegression(C=PROPENSITY_C, solver="newton-cholesky", tol=PROPENSITY_TOL, max_iter=100).fit(Z, r)
    fitted = tuple(
        Term(t.feature, t.transform, t.mean, t.sd, float(c)) for t, c in zip(terms, model.coef_[0], strict=True)
    )
    return AnswerModel(float(model.intercept_[0]), fitted, int(r.size)), None


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
    scores = ask_scores(features, policy.intercept, policy.terms, policy.answer, policy.strata)
    return ask_probabilities(scores, policy.multiplier, policy.floor)


def stratum_features(labels: np.ndarray, column: str = STRATA_COLUMN) -> dict[str, np.ndarray]:
    """The one-hot features ``<column>__<stratum>`` (1.0 / 0.0) of per-session stratum labels, as the platform
    sends them for the stratified form; a session with no label (None, NaN, "") has none set."""
    text = np.array([_label(v) for v in np.asarray(labels, dtype=object).reshape(-1)], dtype=object)
    return {f"{column}__{v}": (text == v).astype(np.float64) for v in sorted({v for v in text if v is not None})}


def _label(value: object) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or str(value) == "":
        return None
    return str(value)


def fit_strata(labels: np.ndarray, abs_error: np.ndarray, column: str = STRATA_COLUMN) -> Strata | None:
    """The stratified form from the rated sessions' stratum ``labels`` and |error| (both shape (n_rated,)).

    score_h = rms(e over stratum h) / rms(e over all), for strata with at least ``MIN_STRATUM_RATINGS`` rated
    sessions; the others, the unlabelled and any stratum never rated share ``other`` = rms(e over them) / rms(all)
    (1 when they are fewer than ``MIN_STRATUM_RATINGS``). A score is kept above 1e-6 (q needs a positive score; the
    floor then asks such a stratum). None when no stratum has enough ratings or every error is 0."""
    e = np.abs(np.asarray(abs_error, dtype=np.float64)).reshape(-1)
    text = np.array([_label(v) for v in np.asarray(labels, dtype=object).reshape(-1)], dtype=object)
    overall = math.sqrt(float(np.mean(e * e))) if e.size else 0.0
    if not overall > 0:
        return None
    kept = []
    rest = np.ones(e.size, dtype=bool)
    for value in sorted({v for v in text if v is not None}):
        in_h = text == value
        if in_h.sum() >= MIN_STRATUM_RATINGS:
            kept.append((value, max(1e-6, math.sqrt(float(np.mean(e[in_h] ** 2))) / overall)))
            rest &= ~in_h
    if not kept:
        return None
    other = max(1e-6, math.sqrt(float(np.mean(e[rest] ** 2))) / overall) if rest.sum() >= MIN_STRATUM_RATINGS else 1.0
    return Strata(column, tuple(kept), other)


def _form_scores(
    form: str,
    features: dict[str, np.ndarray],
    fit_on: np.ndarray,
    abs_error: np.ndarray,
    labels: np.ndarray | None,
    answer: AnswerModel | None,
    names: tuple[str, ...] | None,
    column: str,
) -> np.ndarray:
    """Every session's score under ``form`` fit on the rated sessions ``fit_on`` (``abs_error`` theirs)."""
    if form == ERROR:
        intercept, terms, _ = fit_error_model({k: np.asarray(v)[fit_on] for k, v in features.items()}, abs_error, names)
        return ask_scores(features, intercept, terms, answer)
    strata = None if form == UNIFORM or labels is None else fit_strata(labels[fit_on], abs_error, column)
    return ask_scores(features, 0.0, (), answer, strata)


def choose_form(
    features: dict[str, np.ndarray],
    rated: np.ndarray,
    abs_error: np.ndarray,
    days: float,
    budget_per_day: float,
    floor: float,
    answer: AnswerModel | None,
    labels: np.ndarray | None = None,
    names: tuple[str, ...] | None = None,
    column: str = STRATA_COLUMN,
    folds: int = CROSSFIT_FOLDS,
    seed: int = CROSSFIT_SEED,
) -> dict:
    """Which form to ask by (module docstring: "Do no harm"): each form's cross-fitted expected rectifier variance
    against uniform's on held-out folds of the rated sessions, at the same expected asks.

    ``features`` over every session (with the one-hot strata features when ``labels`` is given, ``labels`` the
    stratum of every session); ``rated`` over every session; ``abs_error`` the rated sessions' |error|. Returns
    ``{"chosen", "folds", "ratings", "error", "error_upper", "stratified", "stratified_upper"}``: R (sum of
    e^2 / (q a) over held-out sessions, over uniform's) and its one-sided 95 % upper bound per form (None for the
    stratified form without labels). Deterministic in ``seed``."""
    r = np.asarray(rated, dtype=bool)
    e = np.abs(np.asarray(abs_error, dtype=np.float64)).reshape(-1)
    idx = np.flatnonzero(r)
    k = max(2, min(folds, idx.size))
    fold = np.empty(r.size, dtype=np.int64)
    fold[idx] = np.random.default_rng(seed).permutation(idx.size) % k
    error_of = np.zeros(r.size)
    error_of[idx] = e
    weights = np.full(r.size, 1.0 / days)
    a = np.ones(r.size) if answer is None else answer_probability(features, answer)
    forms = [UNIFORM, ERROR] + ([STRATIFIED] if labels is not None else [])
    v = {form: np.zeros(idx.size) for form in forms}
    for j in range(k):
        fit_on = r & (fold != j)
        held = fold[idx] == j
        for form in forms:
            scores = _form_scores(form, features, fit_on, error_of[fit_on], labels, answer, names, column)
            q = ask_probabilities(scores, multiplier_for_budget(scores, budget_per_day, floor, weights), floor)
            v[form][held] = e[held] ** 2 / (q[idx[held]] * a[idx[held]])
    total = float(v[UNIFORM].sum())
    choice: dict = {"chosen": UNIFORM, "folds": k, "ratings": int(idx.size)}
    best = 1.0
    for form in (ERROR, STRATIFIED):
        if form not in v or not total > 0:
            choice[form], choice[f"{form}_upper"] = None, None
            continue
        d = v[form] - v[UNIFORM]
        ratio = float(v[form].sum()) / total
        upper = ratio + MARGIN_Z * float(d.std(ddof=1)) * math.sqrt(d.size) / total
        choice[form], choice[f"{form}_upper"] = round(ratio, 6), round(upper, 6)
        if upper < 1.0 and ratio < best:
            choice["chosen"], best = form, ratio
    return choice


def _choice_note(choice: Mapping, column: str) -> str:
    """The note saying which form the policy asks by and why, with the figures."""

    def figure(form: str) -> str:
        name = "the error model's" if form == ERROR else f"the strata's ({column})"
        if choice.get(form) is None:
            return f"{name}: not measured (no strata, or no error on the held-out folds)"
        return f"{name} {choice[form]:.3f} x (upper {choice[f'{form}_upper']:.3f})"

    where = f"cross-fitted variance against uniform on {choice['folds']} held-out folds of {choice['ratings']} ratings"
    if choice["chosen"] == UNIFORM:
        return (
            f"asking uniformly: no form beats uniform beyond fold noise ({where}: {figure(ERROR)}, "
            f"{figure(STRATIFIED)}; a form needs its one-sided 95 % upper bound below 1)"
        )
    by = "stratum" if choice["chosen"] == STRATIFIED else "the error model"
    return f"asking by {by} ({where}: {figure(ERROR)}, {figure(STRATIFIED)})"


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
            note = _choice_note(choice, strata_column)
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
# the exported file, read back


def _number(content: Mapping, key: str, where: str) -> float:
    value = content.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where}{key} is {value!r}, not a finite number")
    return float(value)


def _read_terms(items: object, where: str) -> tuple[Term, ...]:
    if not isinstance(items, list):
        raise ValueError(f"{where}terms is not a list")
    terms = []
    for i, item in enumerate(items):
        at = f"{where}terms[{i}]."
        if not isinstance(item, dict) or not isinstance(item.get("feature"), str):
            raise ValueError(f"{at}feature is missing")
        if item.get("transform") not in TRANSFORMS:
            raise ValueError(f"{at}transform is {item.get('transform')!r}, not one of {', '.join(TRANSFORMS)}")
        sd = _number(item, "sd", at)
        if not sd > 0:
            raise ValueError(f"{at}sd is {sd}, not positive")
        terms.append(
            Term(item["feature"], item["transform"], _number(item, "mean", at), sd, _number(item, "coefficient", at))
        )
    return tuple(terms)


def policy_from_json(content: object) -> Policy:
    """The policy an exported ``ask_policy.json`` holds (format /1 or /2), checked: ValueError, one line naming
    the field, when a field the probability reads is missing or out of range. The budget figures are read as
    given (NaN when absent); ``version`` is recomputed from the content."""
    if not isinstance(content, dict):
        raise ValueError("the policy is not a JSON object")
    if content.get("format") not in READABLE_FORMATS:
        raise ValueError(f"format is {content.get('format')!r}, not one of {', '.join(READABLE_FORMATS)}")
    floor, multiplier = _number(content, "floor", ""), _number(content, "multiplier", "")
    if not 0 < floor <= 1 or multiplier < 0:
        raise ValueError(f"floor {floor} must be in (0, 1] and multiplier {multiplier} at least 0")
    answer = None
    raw = content.get("answer_model")
    if raw is not None:
        if not isinstance(raw, dict):
            raise ValueError("answer_model is not an object")
        answer_floor, clip = _number(raw, "floor", "answer_model."), _number(raw, "clip", "answer_model.")
        if not 0 < answer_floor <= 1 or not clip > 0:
            raise ValueError(f"answer_model.floor {answer_floor} must be in (0, 1] and its clip {clip} positive")
        answer = AnswerModel(
            _number(raw, "intercept", "answer_model."),
            _read_terms(raw.get("terms"), "answer_model."),
            int(raw.get("fitted_on_asks") or 0),
            answer_floor,
            clip,
        )

    def figure(key: str) -> float:
        value = content.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan

    strata = _read_strata(content.get("strata"))
    if (strata is not None) != (content["format"] == STRATA_FORMAT):
        raise ValueError(f"strata must be given exactly when format is {STRATA_FORMAT}")
    form = content.get("form", STRATIFIED if strata is not None else ERROR)
    if form not in FORMS or (form == STRATIFIED) != (strata is not None):
        raise ValueError(f"form is {form!r}, not one of {', '.join(FORMS)} (stratified exactly when strata are given)")
    choice = content.get("choice")

    return Policy(
        intercept=_number(content, "intercept", ""),
        terms=_read_terms(content.get("terms"), ""),
        answer=answer,
        multiplier=multiplier,
        floor=floor,
        budget_per_day=figure("budget_per_day"),
        sessions_per_day=figure("sessions_per_day"),
        expected_asks_per_day=figure("expected_asks_per_day"),
        expected_ratings_per_day=None
        if content.get("expected_ratings_per_day") is None
        else figure("expected_ratings_per_day"),
        fitted_on_ratings=int(figure("fitted_on_ratings")) if math.isfinite(figure("fitted_on_ratings")) else 0,
        note=content.get("note") if isinstance(content.get("note"), str) else None,
        format=content["format"],
        form=form,
        strata=strata,
        choice=choice if isinstance(choice, dict) else None,
    )


def _read_strata(raw: object) -> Strata | None:
    """The ``strata`` object of an exported file, checked (ValueError naming the field); None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("column"), str) or not raw["column"]:
        raise ValueError("strata.column is missing")
    scores = raw.get("scores")
    if not isinstance(scores, dict) or not scores:
        raise ValueError("strata.scores is not an object of strata and numbers")
    for stratum in scores:
        value = _number(scores, stratum, "strata.scores.")
        if not value > 0:
            raise ValueError(f"strata.scores.{stratum} is {value}, not positive")
    other = _number(raw, "other", "strata.")
    if not other > 0:
        raise ValueError(f"strata.other is {other}, not positive")
    return Strata(raw["column"], tuple((str(k), float(v)) for k, v in scores.items()), other)


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


def write_policy(policy: Policy, directory: Path) -> tuple[Path, Path]:
    """Write the standalone ``ask_policy.py``, then ``ask_policy.json`` next to it, each atomically; return both
    paths (the JSON first). The code goes first, so the file a reader watches changes last."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, py_path = directory / JSON_NAME, directory / REFERENCE_NAME
    write_whole(py_path, REFERENCE_SOURCE.encode())  # atomic: the rating service reloads while it runs
    write_whole(json_path, (json.dumps(policy.as_json(), indent=2) + "\n").encode())
    return json_path, py_path


@functools.cache
def reference_module() -> types.ModuleType:
    """``REFERENCE_SOURCE`` as a module: the very code the platform runs, so the rating service
    (``serve/policy.py``) computes q(x) with it and the two cannot drift apart."""
    module = types.ModuleType("pulse_ask_policy_reference")
    exec(compile(REFERENCE_SOURCE, REFERENCE_NAME, "exec"), module.__dict__)
    return module


REFERENCE_SOURCE = '''"""PULSE ask policy: the probability of showing the rating widget (standard library only).

    from ask_policy import ask_probability
    q = ask_probability({"user_message_count": 4, "n_segments": 2, "file_edits": 7, ...})
    show_widget = random.random() < q      # and log q with the ask as ask_probability

Reads ask_policy.json next to this file (or pass policy=load(path)):
    z_j = (t_j(x_j) - mean_j) / sd_j     t_j = log(1 + max(x, 0)) when transform is "log1p"; missing x: z_j = 0
    e   = exp(intercept + sum_j coefficient_j * z_j)                       the model's expected error
    a   = max(floor', 1 / (1 + exp(-(intercept' + sum_j coefficient'_j * clip(z'_j, -clip', clip')))))
                                         the chance the user answers (answer_model: the primed values; null: a = 1)
    s   = strata.scores[h] for the first stratum h whose feature "<strata.column>__<h>" is above 0.5, else
          strata.other                   (strata null: s = 1; e.g. send "task_type__fix_bugs": 1)
    q   = min(1, max(floor, multiplier * e * s / sqrt(a)))
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


def _linear(features, intercept, terms, clip=None):
    """intercept + sum_j coefficient_j z_j; a missing or non-numeric value counts as the mean (z = 0)."""
    eta = intercept
    for term in terms:
        try:
            x = float(features.get(term["feature"]))
        except (TypeError, ValueError, OverflowError):
            continue
        if not math.isfinite(x):
            continue
        if term["transform"] == "log1p":
            x = math.log1p(max(x, 0.0))
        z = (x - term["mean"]) / term["sd"]
        if not math.isfinite(z):
            continue
        if clip is not None:
            z = max(-clip, min(clip, z))
        eta += term["coefficient"] * z
    return eta


def _stratum_score(features, strata):
    """The score of the session's stratum: the first whose one-hot feature is above 0.5, else strata["other"]."""
    for stratum, score in strata["scores"].items():
        try:
            x = float(features.get(strata["column"] + "__" + stratum))
        except (TypeError, ValueError, OverflowError):
            continue
        if x > 0.5:
            return score
    return strata["other"]


def ask_probability(features, policy=None):
    """P(show the widget) for one session, from a dict of its feature values (missing ones count as average)."""
    global _POLICY
    if policy is None:
        if _POLICY is None:
            _POLICY = load()
        policy = _POLICY
    score = math.exp(min(_linear(features, policy["intercept"], policy["terms"]), 700.0))
    strata = policy.get("strata")
    if strata is not None:
        score *= _stratum_score(features, strata)
    answer = policy.get("answer_model")
    if answer is not None:
        eta = _linear(features, answer["intercept"], answer["terms"], answer["clip"])
        score /= math.sqrt(max(answer["floor"], 1.0 / (1.0 + math.exp(min(-eta, 700.0)))))
    return min(1.0, max(policy["floor"], policy["multiplier"] * score))
'''
