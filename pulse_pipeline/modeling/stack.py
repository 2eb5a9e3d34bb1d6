"""The stack: a non-negative blend of the families' out-of-fold predictions, cross-fit so that it stays exact.

Each family alone reaches a modest out-of-fold r; families that read different signals (counts, tone, the words)
err differently, and a blend of their predictions can beat every one of them. The blend is

    stack(x) = b + sum_f w_f f(x),   w_f >= 0,

with (b, w) fitted by non-negative least squares on predictions that did not see the labels they are fitted to,
the weights shrunk toward equal weights by a strength that inner folds choose (``blend_weights``: from none, plain
NNLS, to the equal blend b + c mean_f f; with the text and sentiment families, their plain average is one more
candidate). Why: with ~200 ratings NNLS's weights follow noise (a family's weight 0 to 0.59 from fold to fold on
real ratings, the stack then far below its best member); the equal blend is the classic robust combination of
forecasts, and the inner folds choose between the two on T_k's rows alone (``SHRINKAGE``).
Why an intercept and free non-negative weights rather than weights summing to one: the families' predictions are
shrunk towards the mean by different amounts (a forest's averages, the ordinal logit's expected rating), so a
convex combination cannot undo that shrinkage and cannot shrink a weak predictor further towards the mean; with an
intercept the weights may sum to anything, and w = 0 gives the training mean (the honest floor) when no family
helps. Non-negativity keeps the blend from exploiting the noise in correlated predictions with weights of opposite
signs (the classic stacking overfit, Breiman 1996). The intercept is not penalized: centre y and every column, solve
``scipy.optimize.nnls`` on the centred arrays, then b = mean(y) - sum_f w_f mean(f).

Exactness (research notes, section 5): a rated session's prediction must never depend on its own label. With the
outer folds F_1..F_K and T_k = the rows outside F_k, the stack's prediction for row i in F_k is

    b_k + sum_f w_{k,f} M_{k,f}(x_i),

where M_{k,f} is family f's outer fold model (trained on T_k: the usual cross-fit) and (b_k, w_k) are fitted on
rows of T_k only, using level-one predictions that never saw F_k's labels either: an inner cross-fit within T_k.
The inner cross-fit is as cheap as it can be while exact:

- a bagged forest needs no inner fit: its outer model's out-of-bag predictions for the rows of T_k come from trees
  that never saw F_k (the model was trained on T_k) nor the row itself (left out of those trees' bootstrap
  samples); ``cv.out_of_bag`` computes them. A forest of 400 trees costs ~1.5 s a fit at the paper's scale;
- the family ``text`` already has them: its nested scores (``text.py``) give every row of T_k an inner cross-fit
  score that never saw F_k;
- any other family: ``cv.INNER_FOLDS`` = 2 inner folds within T_k (``cv.inner_crossfit``: two fits on half of
  T_k each; a 5-fold inner cross-fit would cost 5 fits on 4/5 of T_k, and with a few families of weak signal the
  weights need no more).

With the sessions' text the tabular families' rows carry the text score column exactly as in ``crossfit``: fold k's
outer and inner models see [x, inner text score of T_k] and predict F_k from [x, outer text score]. (Those inner
text scores used labels from all of T_k, so a level-one prediction within T_k may lean, through other rows' text
scores, on its own row's label: a second-order effect that can favour a family in the weights, never a leak of
F_k's labels into F_k's predictions.) Nothing fitted
on F_k's labels reaches a prediction for F_k, and ``StackFit.train_index_by_fold[k]`` records the union of every row
whose label entered fold k's stack (the weights' rows, every base model's training rows, the text scores' labels),
so ``crossfit.oof_violations`` checks it like any family's.

Unrated sessions get the mean over the K outer stacks, like the other families.

Every fit here is the cross-validation engine's (``cv.py``: ``outer_folds``, ``fit_folds`` with the level-one
predictions), the very fits ``crossfit.cross_validate`` makes (same folds, features and model seeds), so
``cross_validate_all`` measures every family, the stack and the constant in one pass: the stack adds only the inner
fits. They are also exactly the cross-fit's of the same seed, so ``cross_validate_keeping`` keeps seed 42's
(``cv.SeedFits``) and ``crossfit_from_fits`` makes the cross-fit from them, predicting only the unrated sessions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import nnls
from sklearn.model_selection import KFold

from . import cv
from .cv import (
    TEXT_FAMILY,
    CrossFit,
    CVResult,
    Fold,
    FoldPredictions,
    SeedFits,
    SeedMetrics,
    checked_unlabeled,
    checked_xy,
    effective_k,
    longest_first,
    outer_folds,
)
from .families import FAMILIES, SENTIMENT
from .text import TextFeature
from .threads import native_threads
from .user_ratings import UserRatings, with_user_columns
from .workers import forest_threads, map_jobs, workers_for

STACK = "stack"
"""The stack's family name (in ``settings.MODEL_FAMILIES``, last: a tie goes to a single family)."""

BASELINE = "baseline"
"""The plain average of the text and sentiment families, (f_text + f_sentiment) / 2 (in ``settings.MODEL_FAMILIES``):
the obvious baseline on real rated conversations (a TF-IDF word ridge and a VADER ridge, averaged), a candidate of
the choice of its own so that the chosen model is never below it by more than selection noise. No weight is fitted;
it is cross-fitted as the stack is (``FoldBlend`` with weights 1/2, 1/2 and no intercept)."""

BASELINE_MEMBERS = (TEXT_FAMILY, SENTIMENT)
"""The families ``BASELINE`` averages, in order."""

CONSTANT = "constant"
"""The honest floor's name in Table 2: predict the training folds' mean rating."""


def nnls_weights(P: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """(b, w): the least-squares fit y ~ b + P w with w >= 0 and b free (see the module docstring).

    ``P`` has a column per family (its predictions), a row per labeled row."""
    return shrunk_weights(P, y, 0.0)


SHRINKAGE = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, math.inf)
"""The strengths s the blend's inner folds choose among (``blend_weights``): 0 is plain NNLS, inf the equal blend."""

BLEND_FOLDS = 5
"""Inner folds over T_k's level-one rows that choose the shrinkage (``blend_weights``): no model is refitted, only
the blend's few weights, so they cost a few small NNLS solves."""


def shrunk_weights(
    P: np.ndarray, y: np.ndarray, strength: float, members: Sequence[int] | None = None
) -> tuple[float, np.ndarray]:
    """(b, w): the blend y ~ b + P w, w >= 0, b free, with the weights shrunk toward equal weights:

        min_w |y_c - P_c w|^2 + s * t * |D w|^2,   D = I - 11'/M,   t = trace(P_c' P_c) / M,

    y_c, P_c centred (the intercept is not penalized: b = mean(y) - mean(P) w). D w is w minus its mean, so the
    penalty pulls the weights toward each other, not toward zero: their common level c (the equal blend
    b + c * mean_f f) stays free. t is a column's mean sum of squares, so s is free of the predictions' scale and
    of n. s = 0: plain NNLS; s = inf: the equal blend, c = max(0, least squares of y_c on mean_f P_c). With
    ``members`` (s = inf only): the equal blend of those columns alone, the others' weights 0."""
    P = np.asarray(P, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    p_mean = P.mean(axis=0)
    Pc, yc = P - p_mean, y - y.mean()
    M = P.shape[1]
    if math.isinf(strength):
        chosen = np.arange(M) if members is None else np.asarray(members, dtype=np.int64)
        m = Pc[:, chosen].mean(axis=1)
        c = max(0.0, float(m @ yc) / float(m @ m)) if float(m @ m) > 0 else 0.0
        w = np.zeros(M)
        w[chosen] = c / chosen.size
    elif strength > 0.0:
        t = float(np.sum(Pc**2)) / M
        D = np.eye(M) - np.full((M, M), 1.0 / M)
        w, _ = nnls(np.vstack([Pc, math.sqrt(strength * t) * D]), np.concatenate([yc, np.zeros(M)]))
    else:
        w, _ = nnls(Pc, yc)
    return float(y.mean() - p_mean @ w), w


def blend_weights(
    P: np.ndarray, y: np.ndarray, seed: int = 0, baseline: Sequence[int] = ()
) -> tuple[float, np.ndarray, str]:
    """(b, w, how): the blend of ``P`` fitted with the shrinkage s of ``SHRINKAGE`` whose blends, fitted on
    ``BLEND_FOLDS`` - 1 inner folds of these rows and applied to the last, have the least squared error (ties go to
    the stronger shrinkage: the simpler blend); then fitted on every row with that s. ``baseline`` (the columns of
    the text and sentiment families): one more candidate, their equal blend alone (the issue's obvious baseline, a
    plain average of a word ridge and a VADER ridge), chosen the same way (it wins ties). ``how`` says which:
    ``nnls``, ``shrunk <s>``, ``equal`` or ``baseline``.

    Why: with ~200 labels NNLS's weights follow noise (per-fold weights of one family 0 to 0.6 on real ratings),
    and the blend then falls below its best member; the equal blend is the classic robust combination of
    forecasts. The inner folds choose between them (and in between) on the rows of T_k alone, so fold k's blend
    still sees no label of F_k: ``P`` holds level-one predictions, no model is refitted."""
    P = np.asarray(P, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[0]
    if n < 2 * BLEND_FOLDS:
        b, w = nnls_weights(P, y)
        return b, w, "nnls"
    candidates = [(s, None) for s in SHRINKAGE] + ([(math.inf, list(baseline))] if len(baseline) else [])
    errors = np.zeros(len(candidates))
    for train, test in KFold(n_splits=BLEND_FOLDS, shuffle=True, random_state=seed).split(P):
        for i, (strength, members) in enumerate(candidates):
            b, w = shrunk_weights(P[train], y[train], strength, members)
            errors[i] += float(np.sum((y[test] - b - P[test] @ w) ** 2))
    best = max(i for i in range(len(candidates)) if errors[i] <= errors.min() * (1 + 1e-12))
    strength, members = candidates[best]
    b, w = shrunk_weights(P, y, strength, members)
    how = "baseline" if members else "equal" if math.isinf(strength) else f"shrunk {strength:g}" if strength else "nnls"
    return b, w, how


@dataclass(frozen=True, eq=False)
class StackFit:
    """The stack's out-of-fold predictions for one seed and the evidence of how they were made.

    ``intercepts[k]``, ``weights[k]`` (one per family): fold k's blend; ``weight_train_index[k]``: the labeled
    rows whose labels fitted it; ``train_index_by_fold[k]``: every labeled row whose label entered fold k's
    prediction (weights and base models), the set ``oof_violations`` checks."""

    families: tuple[str, ...]
    oof: np.ndarray
    fold: np.ndarray
    intercepts: np.ndarray
    weights: np.ndarray
    weight_train_index: tuple[np.ndarray, ...]
    train_index_by_fold: tuple[np.ndarray, ...]
    shrinkage: tuple[str, ...] = ()  # how fold k's blend was chosen (``blend_weights``)


@dataclass(frozen=True, eq=False)
class FoldBlend:
    """Fold k's stack as one model of a row's feature columns (with the text, its text score last):
    b_k + sum_f w_{k,f} M_{k,f}(x), where the text family's M is the text-score column itself. It is what the
    chosen stack's permutation importance (``importance.py``) predicts with; ``models[f]`` is None for "text"."""

    intercept: float
    weights: np.ndarray
    families: tuple[str, ...]
    models: tuple

    def predict(self, A: np.ndarray) -> np.ndarray:
        out = np.full(A.shape[0], self.intercept)
        for w, family, model in zip(self.weights, self.families, self.models, strict=True):
            if w != 0.0:
                out += w * (A[:, -1] if family == TEXT_FAMILY else model.predict(A))
        return out


def blend(
    fits: Sequence[FoldPredictions], y: np.ndarray, folds: Sequence[Fold], fixed: np.ndarray | None = None
) -> StackFit:
    """Fit each outer fold's weights on the level-one predictions of T_k and apply them to the outer predictions
    of F_k (the module docstring's formula); record every label each fold's stack used. ``fixed``: weights given
    (no intercept, nothing fitted: ``BASELINE``'s average)."""
    n, K = y.shape[0], len(folds)
    fold_of = np.empty(n, dtype=np.int64)
    oof = np.empty(n)
    intercepts, weights, weight_rows, train_rows = np.empty(K), np.empty((K, len(fits))), [], []
    shrinkage = []
    names = [f.family for f in fits]
    baseline = [names.index(f) for f in (TEXT_FAMILY, SENTIMENT)] if {TEXT_FAMILY, SENTIMENT} <= set(names) else []
    for k, fold in enumerate(folds):
        fold_of[fold.test] = k
        rows = fold.train
        P = np.column_stack([f.inner[k, rows] for f in fits])
        if fixed is not None:
            intercepts[k], weights[k], how = 0.0, fixed, "fixed"
        else:
            intercepts[k], weights[k], how = blend_weights(P, y[rows], baseline=baseline)
        shrinkage.append(how)
        oof[fold.test] = intercepts[k] + np.column_stack([f.oof[fold.test] for f in fits]) @ weights[k]
        weight_rows.append(rows)
        # the base models of fold k (outer and inner) all train on rows of T_k; the text scores and the user
        # columns list their own
        train_rows.append(cv.labels_used(fold))
    families = tuple(f.family for f in fits)
    return StackFit(
        families, oof, fold_of, intercepts, weights, tuple(weight_rows), tuple(train_rows), tuple(shrinkage)
    )


def _check_families(families: Sequence[str], text: TextFeature | None) -> None:
    for family in families:
        if family in (STACK, BASELINE) or family not in FAMILIES:
            raise ValueError(f"cannot stack {family!r}; families to stack: {', '.join(FAMILIES[:-1])}")
        if family == TEXT_FAMILY and text is None:
            raise ValueError(f"the {TEXT_FAMILY!r} family needs the sessions' text: pass text=TextFeature(...)")


def cross_validate_all(
    X: np.ndarray,
    y: np.ndarray,
    families: Sequence[str],
    k: int = 5,
    seeds: Sequence[int] = (42, 43, 44, 45, 46),
    stack: bool = True,
    threads: int | None = None,
    text: TextFeature | None = None,
    users: UserRatings | None = None,
    columns: dict[str, np.ndarray] | None = None,
) -> list[CVResult]:
    """``crossfit.cross_validate`` of every family (same numbers), then of the stack of them (``stack``) and of the
    constant (the training folds' mean), from one set of outer fits per seed.

    The stack needs at least two families (otherwise it is left out); the constant
    is always there. Results come in the order families, stack, constant. ``text``: as in ``cross_validate``.
    The text scores of each seed, then each (family, seed)'s fits, run in worker processes (``workers.py``).
    """
    return cross_validate_keeping(X, y, families, k, seeds, stack, threads, text, users=users, columns=columns)[0]


def cross_validate_keeping(
    X: np.ndarray,
    y: np.ndarray,
    families: Sequence[str],
    k: int = 5,
    seeds: Sequence[int] = (42, 43, 44, 45, 46),
    stack: bool = True,
    threads: int | None = None,
    text: TextFeature | None = None,
    keep_seed: int | None = None,
    users: UserRatings | None = None,
    columns: dict[str, np.ndarray] | None = None,
    baseline: bool = False,
) -> tuple[list[CVResult], SeedFits | None]:
    """``cross_validate_all``, and the fits of seed ``keep_seed`` (when it is one of ``seeds``) as ``SeedFits``
    for ``crossfit_from_fits``: the cross-fit of that seed then costs no fit at all. ``text`` may hold the
    labeled rows alone (cross-validation scores no unlabeled row; ``crossfit_from_fits`` scores them later).
    ``baseline``: also ``BASELINE``'s row (when both its members are among ``families``), after the stack's."""
    X, y = checked_xy(X, y)
    _check_families(families, text)
    with_stack = stack and len(families) >= 2
    run = cv.cross_validate_families(
        X,
        y,
        families,
        k,
        seeds,
        threads,
        text,
        level_one=with_stack,
        keep_seed=keep_seed,
        users=users,
        columns=columns,
    )
    results = [run.result(f, y) for f in families]
    constant: list[SeedMetrics] = []
    stacked: list[SeedMetrics] = []
    averaged: list[SeedMetrics] = []
    with_baseline = baseline and set(BASELINE_MEMBERS) <= set(families)
    first: dict[str, np.ndarray] = {}
    for seed in run.seeds:
        folds = run.folds[seed]
        named = [(CONSTANT, constant, cv.constant_oof(y, folds))]
        if with_stack:
            named.append((STACK, stacked, blend([run.fits[f, seed] for f in families], y, folds).oof))
        if with_baseline:
            named.append((BASELINE, averaged, np.mean([run.fits[f, seed].oof for f in BASELINE_MEMBERS], axis=0)))
        for name, per_seed, oof in named:
            per_seed.append(cv.seed_metrics(seed, y, oof))
            first.setdefault(name, oof)
    if with_stack:
        results.append(cv.cv_result(STACK, y, stacked, first[STACK], run.k, run.note))
    if with_baseline:
        results.append(cv.cv_result(BASELINE, y, averaged, first[BASELINE], run.k, run.note))
    results.append(cv.cv_result(CONSTANT, y, constant, first[CONSTANT], run.k, run.note))
    return results, run.kept()


def stack_crossfit_predict(
    X_labeled: np.ndarray,
    y: np.ndarray,
    X_unlabeled: np.ndarray | None,
    families: Sequence[str],
    k: int = 5,
    seed: int = 42,
    threads: int | None = None,
    text: TextFeature | None = None,
    users: UserRatings | None = None,
    columns: dict[str, np.ndarray] | None = None,
    family: str = STACK,
) -> tuple[CrossFit, StackFit]:
    """The stack's cross-fit predictions for every session (what ``crossfit.crossfit_predict`` gives a family):
    the rated rows' out-of-fold stack and the unrated rows' mean over the K outer stacks,
    (1/K) sum_k (b_k + sum_f w_{k,f} M_{k,f}(x)). The ``CrossFit``'s ``train_index_by_fold`` is the stack's
    recorded training rows; its ``models`` are the folds' ``FoldBlend``s (each several models, some fed text
    scores), and with the text its ``text_score`` is each rated row's held-out text score. ``family``
    ``BASELINE``: its members' average instead (``families`` is then ``BASELINE_MEMBERS``)."""
    families = list(BASELINE_MEMBERS) if family == BASELINE else families
    X, y = checked_xy(X_labeled, y)
    Xu = checked_unlabeled(X_unlabeled, X.shape[1])
    _check_families(families, text)
    k_used, note = effective_k(y.shape[0], k)
    if len(families) < 2:
        raise ValueError(f"the stack blends at least 2 families; got {', '.join(families) or 'none'}")
    if text is not None and text.unlabeled.shape[0] != Xu.shape[0]:
        raise ValueError(f"the text has {text.unlabeled.shape[0]} unlabeled rows but X_unlabeled has {Xu.shape[0]}")
    folds = outer_folds(y, k_used, seed, text, users)
    workers = workers_for(len(families), y.shape[0])
    with native_threads(threads) as n_threads:
        order = longest_first(families)
        forest_jobs = forest_threads(y.shape[0], workers)
        jobs = [(X, y, Xu, f, folds, seed, n_threads, True, True, forest_jobs, (columns or {}).get(f)) for f in order]
        by_family = dict(zip(order, map_jobs(cv.fit_folds, jobs, workers), strict=True))
        fits = [by_family[f] for f in families]
    return stack_crossfit(fits, y, folds, Xu.shape[0], seed, note, family)


def stack_crossfit(
    fits: Sequence[FoldPredictions],
    y: np.ndarray,
    folds: Sequence[Fold],
    n_unlabeled: int,
    seed: int,
    note,
    family: str = STACK,
) -> tuple[CrossFit, StackFit]:
    """``stack_crossfit_predict``'s result from the families' fold loops (``cv.fit_folds`` with their unlabeled
    predictions, ``fits``) on ``folds``: the blend of each fold, its rated rows' predictions and the unrated rows'
    mean over the folds' blends. ``family`` ``BASELINE``: ``fits`` are its members', averaged (weights 1/2)."""
    k_used = len(folds)
    stack = blend(fits, y, folds, np.full(len(fits), 1.0 / len(fits)) if family == BASELINE else None)
    unlabeled = np.zeros(n_unlabeled)
    by_fold = []
    for k in range(k_used):
        by_fold.append(stack.intercepts[k] + np.column_stack([f.unlabeled[k] for f in fits]) @ stack.weights[k])
        unlabeled += by_fold[-1]
    text_folds = tuple(f.text for f in folds if f.text is not None)  # the text scores' own record, for the audit
    models = tuple(
        FoldBlend(
            float(stack.intercepts[k]),
            stack.weights[k],
            stack.families,
            tuple(None if f.family == TEXT_FAMILY else f.models[k] for f in fits),
        )
        for k in range(k_used)
    )
    fit = CrossFit(family, k_used, seed, stack.oof, stack.fold, unlabeled / k_used, stack.train_index_by_fold, models)
    fit = replace(fit, note=note, text_folds=text_folds, text_score=cv.held_out_text_scores(folds, y.shape[0]))
    user_folds = tuple(f.users for f in folds if f.users is not None)
    fit = replace(fit, user_features=cv.held_out_user_features(folds, y.shape[0]), user_folds=user_folds)
    return replace(fit, unlabeled_folds=tuple(by_fold)), stack


def crossfit_from_fits(
    kept: SeedFits,
    X_labeled: np.ndarray,
    y: np.ndarray,
    X_unlabeled: np.ndarray | None,
    family: str,
    families: Sequence[str] = (),
    threads: int | None = None,
    text: TextFeature | None = None,
    users: UserRatings | None = None,
) -> CrossFit:
    """The cross-fit of ``family`` (``STACK``: the stack of ``families``) from the fits cross-validation kept:
    what ``crossfit.crossfit_predict`` / ``stack_crossfit_predict`` return with ``kept.seed``, without fitting.

    Only the unlabeled rows are new: their text scores come from each fold's outer ridge (``with_unlabeled``) and
    their predictions from the kept fold models, (family, fold) pairs in worker processes. ``X_labeled``, ``y``
    and ``text.labeled`` must be the rows cross-validation saw, in the same order (their number is checked)."""
    X, y = checked_xy(X_labeled, y)
    Xu = checked_unlabeled(X_unlabeled, X.shape[1])
    members = list(families) if family == STACK else list(BASELINE_MEMBERS) if family == BASELINE else [family]
    missing = [f for f in members if f not in kept.fits]
    if missing:
        raise ValueError(f"cross-validation kept no fits of {', '.join(missing)} (seed {kept.seed})")
    if (text is None) != (kept.folds[0].text is None):
        raise ValueError("the text must be given exactly when cross-validation had it")
    if kept.fits[members[0]].oof.shape[0] != y.shape[0]:
        raise ValueError(f"cross-validation kept fits of {kept.fits[members[0]].oof.shape[0]} rows, not {len(y)}")
    folds = [
        Fold(f.train, f.test, None if f.text is None else f.text.with_unlabeled(text.unlabeled)) for f in kept.folds
    ]
    if (users is None) != (kept.folds[0].users is None):
        raise ValueError("pass users=UserRatings(...) exactly when cross-validation read the user columns")
    if users is not None:  # the unlabeled rows' user columns, from each fold's T_k (``user_ratings.py``)
        folds = [
            replace(fold, users=kept_fold.users.with_unlabeled(users.unlabeled))
            for fold, kept_fold in zip(folds, kept.folds, strict=True)
        ]
    jobs = [
        (
            kept.fits[f].models[k],
            Xu if fold.users is None else with_user_columns(Xu, fold.users.unlabeled_features),
            None if fold.text is None else fold.text.unlabeled_scores,
        )
        for f in longest_first(members)
        if f != TEXT_FAMILY
        for k, fold in enumerate(folds)
    ]
    with native_threads(threads):
        predicted = iter(map_jobs(cv.predict_unlabeled, jobs, workers_for(len(jobs), y.shape[0])))
    unlabeled = {
        f: tuple(fold.text.unlabeled_scores if f == TEXT_FAMILY else next(predicted) for fold in folds)
        for f in longest_first(members)
    }
    fits = [replace(kept.fits[f], unlabeled=unlabeled[f]) for f in members]
    if family in (STACK, BASELINE):
        return stack_crossfit(fits, y, folds, Xu.shape[0], kept.seed, kept.note, family)[0]
    return cv.crossfit_from_folds(fits[0], folds, y, Xu.shape[0], kept.seed, kept.note)
