"""The choice among the ask policy's forms, and the stratified form's shares (the policy itself:
``estimates/ask_policy.py``; its models: ``estimates/ask_models.py``).

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
such feature (or a stratum never rated) gets the pooled sigma.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .ask_models import (
    ERROR,
    STRATIFIED,
    UNIFORM,
    AnswerModel,
    Strata,
    answer_probability,
    ask_probabilities,
    ask_scores,
    fit_error_model,
    multiplier_for_budget,
)
from .strata import DEFAULT_STRATA, MIN_STRATUM_RATED

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


def choice_note(choice: Mapping, column: str) -> str:
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
