"""The ask policy's models and its q(x): with what probability the agent platform should show the rating
widget for a session (the policy as a whole, fit and read from the warehouse: ``estimates/ask_policy.py``).

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
expected number of asks per day equals the budget.

With fewer than ``MIN_RATINGS`` rated sessions with predictions, or no error to model, the error model is flat
(every coefficient 0, the note says why): asking at random, or by the answer rate alone, is always valid.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from sklearn.linear_model import LogisticRegression, PoissonRegressor

from ..stats.aipw import PROPENSITY_C, PROPENSITY_TOL
from ..stats.asking import ANSWER_FLOOR

DEFAULT_FLOOR = 0.01
MIN_RATINGS = 30
MIN_ASKS = 30
"""Asked sessions the answer model needs; with fewer the answer rate is taken as constant."""
GLM_ALPHA = 0.01  # L2 penalty of the error model on standardized features: a few hundred ratings, a few columns
ANSWER_CLIP = 3.0
"""The answer model's standardized inputs are clipped to [-3, 3] (as ``stats.asking.answer_design``): a long tail
cannot give extreme answer probabilities, and the logistic's exponent stays bounded."""
FORMAT = "pulse-ask-policy/2"
STRATA_FORMAT = "pulse-ask-policy/3"
UNIFORM, ERROR, STRATIFIED = "uniform", "error", "stratified"
"""The policy's forms: what s(x) it asks by (``estimates/ask_forms.py`` chooses among them)."""
FORMS = (UNIFORM, ERROR, STRATIFIED)


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
    form: str = ERROR  # UNIFORM, ERROR or STRATIFIED (``estimates/ask_forms.py``)
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
