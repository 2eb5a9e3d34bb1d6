"""The one cross-validation engine: folds, the fold loop, the metrics, and fits kept for the cross-fit.

Table 2 (``comparison.py``, through ``stack.cross_validate_keeping``), the stack (``stack.py``) and the single-family
cross-validation and cross-fit (``crossfit.py``) all fit through ``fit_folds`` on folds from ``outer_folds``; no
other module has a fold loop. So a family's numbers are the same whichever path measured them, and the cross-fit of
seed 42 is exactly cross-validation's seed-42 fits (``crossfit_from_folds``).

- The folds of seed s: ``KFold(k, shuffle=True, random_state=s)`` over the labeled rows (with the sessions' text, the
  folds of its nested scores, ``text.TextFeature.scores``, made by the same KFold). With fewer than 2k labeled rows
  k drops to max(2, n // 2) (``effective_k``).
- Fold f's model is ``make_model(family, random_state=s)`` fitted on the training rows T_f and predicting the
  held-out rows F_f (its out-of-fold predictions) and, when asked, the unlabeled rows. With the text the tabular
  model is given one more column, the text score: a training row's inner cross-fit score, a held-out or unlabeled
  row's outer score; the family "text" is the ridge's score alone. Below ``TEXT_COLUMN_MIN_LABELS`` labeled rows
  the tabular models ignore that column (``reads_text_score`` says why). With who rated (``user_ratings.UserRatings``)
  it reads two more columns before the text score, ``user_ratings.USER_COLUMNS``: a held-out or unlabeled row's
  from T_f's ratings, a training row's from T_f's other inner folds (``Fold.users``); ``labels_used`` lists every
  label a fold's prediction read, theirs included.
- Level-one predictions (what a blend is fitted on, ``stack.py``): for each row of T_f a prediction that saw
  neither F_f's labels nor its own: a bagged forest's out-of-bag prediction (``out_of_bag``), the text's inner
  score, or an ``INNER_FOLDS``-fold cross-fit within T_f (``inner_crossfit``).
- Metrics of seed s on the pooled out-of-fold predictions f_i (every labeled row once), as the paper computes them:

      MSE = mean_i (y_i - f_i)^2,   MAE = mean_i |y_i - f_i|,   r = cov(y, f) / (sd(y) sd(f))   (Pearson),

  summarized over seeds as mean and sample sd (ddof=1): the paper's "0.29 +- 0.01" (``cv_result``).

``cross_validate_families`` runs every (family, seed)'s fold loop, in worker processes when there are enough rows
(``workers.py``), and keeps one seed's fold models (``CVRun.kept``) so the cross-fit of that seed costs no fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from sklearn.model_selection import KFold
from sklearn.pipeline import Pipeline

from .families import FAMILIES, make_model
from .text import FoldTextScores, TextFeature
from .threads import native_threads
from .user_ratings import FoldUserFeatures, UserRatings, with_user_columns
from .workers import forest_threads, map_jobs, workers_for

METRICS: tuple[str, ...] = ("mse", "mae", "pearson")
"""The metrics of ``CVResult.metrics``, in order (the paper's Table 2 rows)."""

TEXT_FAMILY = "text"
"""The family whose prediction is the text ridge's out-of-fold score alone (``text.py``)."""

TEXT_SCORE = "text_score"
"""The name of the extra column the tabular families get when the text is given."""

MIN_LABELED = 4
"""Fewest labeled rows cross-fitting accepts: two folds of two rows each."""

TEXT_COLUMN_MIN_LABELS = 1_000
"""Fewest labeled rows from which the tabular families read the text score as a column (``reads_text_score``)."""


def reads_text_score(n_labeled: int) -> bool:
    """Whether the tabular families read the text score as a column: from ``TEXT_COLUMN_MIN_LABELS`` labeled rows.
    Below, they are given it (every caller passes the same rows) and ignore it (``families.make_model``'s
    ``ignore_column``); the text then reaches the prediction through its own family and the stack's blend.

    Why: a model trains on the training rows' text scores, which come from inner ridges fitted on
    (K-1)/K x (J-1)/J = 64 % of the labels, and predicts from held-out scores, made by a ridge fitted on 80 %. A
    ridge's scores spread more the more rows it saw, so the column the model predicts from is scaled unlike the one
    it learned, and the gap closes only as both ridges approach their limit (many labels). With a few hundred
    labels the column also costs each family a column's worth of fitting noise, while the stack adds the same
    score linearly for one weight. On real ratings (~230) the ordinal logit reached r 0.258 without the column and
    0.208 with it; on the synthetic corpora the column's gain at ~200-600 labels is within noise (docs/models.md)."""
    return n_labeled >= TEXT_COLUMN_MIN_LABELS


INNER_FOLDS = 2
"""Inner folds within T_k for the level-one predictions of the families that have none for free (not bagged, not
the text): two fits on half of T_k each; a 5-fold inner cross-fit would cost 5 fits on 4/5 of T_k, and with a few
families of weak signal a blend's weights need no more."""


@dataclass(frozen=True)
class Metric:
    """One metric over the CV seeds: ``mean`` and the sample sd (ddof=1; NaN with a single seed)."""

    name: str
    mean: float
    sd: float


@dataclass(frozen=True)
class SeedMetrics:
    """The pooled out-of-fold metrics of one seed; ``note`` says why ``pearson`` is NaN when it is."""

    seed: int
    mse: float
    mae: float
    pearson: float
    note: str | None = None


@dataclass(frozen=True, eq=False)
class CVResult:
    """What cross-validation measured for one family (``eq=False``: it holds an array).

    ``metrics`` follow ``METRICS``; ``per_seed`` follows the seeds given; ``oof`` holds the pooled out-of-fold
    predictions of the first seed (row order of ``y``); ``k`` is the number of folds actually used and
    ``notes`` say when it was reduced or a metric is undefined.
    """

    family: str
    n_labeled: int
    metrics: tuple[Metric, ...]
    per_seed: tuple[SeedMetrics, ...]
    oof: np.ndarray
    k: int = 5
    notes: tuple[str, ...] = ()

    def metric(self, name: str) -> Metric:
        """The summary of metric ``name`` (one of ``METRICS``)."""
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"no metric {name!r}; known: {', '.join(METRICS)}")


@dataclass(frozen=True, eq=False)
class CrossFit:
    """Predictions for every session plus the evidence of how they were made (``eq=False``: it holds arrays).

    ``oof[i]``, the prediction for labeled row i, is that of ``models[fold[i]]``, whose training rows (indices
    into the labeled rows) are ``train_index_by_fold[fold[i]]``; ``unlabeled[j]``, the prediction for unlabeled
    row j, is the mean over ``models``. With the text, ``text_score[i]`` is the text score labeled row i carried
    when it was predicted (the column ``TEXT_SCORE`` appended to its features; the family "text" predicts it
    itself) and ``text_folds`` are the nested scores with their training rows; ``models`` is empty for "text".
    ``method`` is "crossfit" (valid for PPI) or "insample" (``crossfit.insample_predict``: invalid, for comparison
    only).
    """

    family: str
    k: int
    seed: int
    oof: np.ndarray
    fold: np.ndarray
    unlabeled: np.ndarray
    train_index_by_fold: tuple[np.ndarray, ...]
    models: tuple[Pipeline, ...]
    method: str = "crossfit"
    note: str | None = None
    text_score: np.ndarray | None = None
    text_folds: tuple[FoldTextScores, ...] = ()
    user_features: np.ndarray | None = None  # each rated row's held-out user columns (user_ratings.py), or None
    user_folds: tuple[FoldUserFeatures, ...] = ()  # each fold's user columns and the labels they read
    # each fold model's predictions of the unlabeled rows (``unlabeled`` is their mean), for the recalibration
    # maps of ``recalibration.py``; empty when not kept (``insample_predict``)
    unlabeled_folds: tuple[np.ndarray, ...] = ()


# --------------------------------------------------------------------------------------------------------
# input checks


def check_family(family: str) -> None:
    """Refuse a family that is not one of ``FAMILIES``, naming the known ones."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; known families: {', '.join(FAMILIES)}")


def check_text(family: str, text: TextFeature | None) -> None:
    """Refuse the family "text" without the sessions' text."""
    if family == TEXT_FAMILY and text is None:
        raise ValueError(f"the {TEXT_FAMILY!r} family needs the sessions' text: pass text=TextFeature(...)")


def checked_xy(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The labeled rows and their labels as float arrays, after checking their shapes and values (NaN features are
    imputed by the pipelines; NaN labels, or infinite values anywhere, are refused with what to pass instead)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (rows x features); got shape {X.shape}")
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D array of labels; got shape {y.shape}")
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]} labels; pass the labeled rows of X only")
    if not np.all(np.isfinite(y)):
        bad = int(np.count_nonzero(~np.isfinite(y)))
        raise ValueError(f"y has {bad} NaN/inf labels; pass only rated sessions (NaN marks an unrated session)")
    if np.any(np.isinf(X)):
        raise ValueError("X has infinite values; only NaN (missing, imputed as 0) is accepted")
    return X, y


def checked_unlabeled(X_unlabeled: np.ndarray | None, n_features: int) -> np.ndarray:
    """The unlabeled rows as a float array with ``n_features`` columns (None: no rows)."""
    if X_unlabeled is None:
        return np.empty((0, n_features))
    Xu = np.asarray(X_unlabeled, dtype=np.float64)
    if Xu.ndim != 2 or Xu.shape[1] != n_features:
        raise ValueError(f"X_unlabeled must have {n_features} columns like X_labeled; got shape {Xu.shape}")
    return Xu


def effective_k(n: int, k: int) -> tuple[int, str | None]:
    """The folds to use for ``n`` labeled rows: ``k``, or ``max(2, n // 2)`` when n < 2k (so each held-out fold
    has at least two rows), with a note saying so. Fewer than ``MIN_LABELED`` rows cannot be cross-fit."""
    if k < 2:
        raise ValueError(f"k must be >= 2 folds; got {k}")
    if n < MIN_LABELED:
        raise ValueError(
            f"only {n} labeled sessions: cross-fitting needs at least {MIN_LABELED} (two folds of two), "
            "so no prediction could come from a model that did not see its rating; collect more ratings"
        )
    if n < 2 * k:
        k_used = max(2, n // 2)
        return k_used, f"only {n} labeled sessions (< 2*k = {2 * k}): using k = {k_used} folds instead of {k}"
    return k, None


# --------------------------------------------------------------------------------------------------------
# metrics


def pearson(y: np.ndarray, f: np.ndarray) -> tuple[float, str | None]:
    """Pearson r of labels and predictions, or (NaN, why) when either is constant (r is then undefined)."""
    y = np.asarray(y, dtype=np.float64)
    f = np.asarray(f, dtype=np.float64)
    if f.size < 2:
        return math.nan, "Pearson r undefined: fewer than two predictions"
    for values, what in ((f, "the out-of-fold predictions are"), (y, "the labels are")):
        spread = float(np.ptp(values))
        if spread <= 1e-12 * max(1.0, float(np.max(np.abs(values)))):
            return math.nan, f"Pearson r undefined: {what} constant ({float(values[0]):.6g})"
    dy, df = y - y.mean(), f - f.mean()
    return float(np.dot(dy, df) / math.sqrt(float(np.dot(dy, dy)) * float(np.dot(df, df)))), None


def seed_metrics(seed: int, y: np.ndarray, oof: np.ndarray) -> SeedMetrics:
    """MSE, MAE and Pearson r of one seed's pooled out-of-fold predictions ``oof`` against the labels ``y``."""
    err = y - oof
    r, why = pearson(y, oof)
    return SeedMetrics(seed, float(np.mean(err**2)), float(np.mean(np.abs(err))), r, why)


def summary(name: str, values: Sequence[float]) -> Metric:
    """Metric ``name`` over the seeds: mean and sample sd (ddof=1; NaN with one seed); NaN when any seed's is."""
    v = np.asarray(values, dtype=np.float64)
    if np.any(np.isnan(v)):
        return Metric(name, math.nan, math.nan)
    mean = float(v.mean())
    sd = float(v.std(ddof=1)) if v.size >= 2 else math.nan
    return Metric(name, mean, sd)


def cv_result(
    name: str, y: np.ndarray, per_seed: Sequence[SeedMetrics], oof: np.ndarray, k: int, note: str | None
) -> CVResult:
    """The ``CVResult`` of ``name`` from its seeds' metrics (``oof``: the first seed's predictions); the notes are
    ``note`` (k reduced) and each seed's undefined metric."""
    notes = ([note] if note else []) + [f"seed {s.seed}: {s.note}" for s in per_seed if s.note]
    metrics = tuple(summary(m, [getattr(s, m) for s in per_seed]) for m in METRICS)
    return CVResult(name, int(y.shape[0]), metrics, tuple(per_seed), oof, k, tuple(notes))


# --------------------------------------------------------------------------------------------------------
# folds and the fold loop


@dataclass(frozen=True, eq=False)
class Fold:
    """One outer fold: its training rows T_k, held-out rows F_k and, with the text, its nested text scores."""

    train: np.ndarray
    test: np.ndarray
    text: FoldTextScores | None
    users: FoldUserFeatures | None = None  # the user columns of its rows (user_ratings.py), or None


def outer_folds(
    y: np.ndarray, k: int, seed: int, text: TextFeature | None, users: UserRatings | None = None
) -> list[Fold]:
    """``KFold(k, shuffle=True, random_state=seed)``'s folds of the labeled rows (the text's when given: its nested
    scores are made on the same KFold, ``text.nested_text_scores``); with ``users``, each fold's user columns
    (``user_ratings.fold_user_features``)."""
    if text is not None:
        folds = [Fold(t.train_rows, t.held_out_rows, t) for t in text.scores(y, k, seed)]
    else:
        split = KFold(n_splits=k, shuffle=True, random_state=seed).split(np.empty((y.shape[0], 1)))
        folds = [Fold(train, test, None) for train, test in split]
    if users is None:
        return folds
    return [replace(f, users=users.fold(y, f.train, f.test, seed)) for f in folds]


@dataclass(frozen=True, eq=False)
class FoldPredictions:
    """One family's fits for one seed (``eq=False``: it holds arrays).

    ``oof[i]``: the outer fold model's prediction for labeled row i; ``inner[k, i]`` for i in T_k: the level-one
    prediction of row i inside T_k (NaN on F_k, and everywhere when none was asked for); ``unlabeled[k]``: fold
    k's predictions for the unlabeled rows; ``models``: the outer fold models (when kept; none for ``text``)."""

    family: str
    oof: np.ndarray
    inner: np.ndarray
    unlabeled: tuple[np.ndarray, ...]
    models: tuple


def out_of_bag(model: Pipeline, X_train: np.ndarray) -> np.ndarray | None:
    """The out-of-bag predictions of a fitted bagged forest for its own training rows: row i's prediction is the
    mean over the trees whose bootstrap sample left i out, so it never saw i's label. None when the pipeline's
    model is not bagged (no ``estimators_samples_``); a row every tree drew (chance 0.63^400 with 400 trees) gets
    the mean of the other rows' out-of-bag predictions."""
    forest = model[-1]
    if not hasattr(forest, "estimators_samples_"):
        return None
    # the trees split on float32 (as the forest's own predict converts); check_input=False skips 400 validations
    Xt = np.ascontiguousarray(model[:-1].transform(X_train), dtype=np.float32)
    total, count = np.zeros(Xt.shape[0]), np.zeros(Xt.shape[0])
    for tree, drawn in zip(forest.estimators_, forest.estimators_samples_, strict=True):
        left_out = np.ones(Xt.shape[0], dtype=bool)
        left_out[drawn] = False
        total[left_out] += tree.predict(Xt[left_out], check_input=False)
        count[left_out] += 1
    oob = np.divide(total, count, out=np.full_like(total, np.nan), where=count > 0)
    return np.where(count > 0, oob, np.nanmean(oob))


def inner_crossfit(
    A: np.ndarray,
    y: np.ndarray,
    family: str,
    seed: int,
    threads: int,
    ignore_column: int | None = None,
    columns: np.ndarray | None = None,
) -> np.ndarray:
    """Level-one predictions for the rows of T_k (features ``A``, labels ``y``): an ``INNER_FOLDS``-fold cross-fit
    (``KFold(INNER_FOLDS, shuffle=True, random_state=seed)``, models ``make_model(family, random_state=seed)``,
    not reading ``ignore_column``; ``columns``: as ``families.make_model``'s)."""
    inner = np.empty(y.shape[0])
    for train, test in KFold(n_splits=INNER_FOLDS, shuffle=True, random_state=seed).split(A):
        model = make_model(family, random_state=seed, threads=threads, ignore_column=ignore_column, columns=columns)
        inner[test] = model.fit(A[train], y[train]).predict(A[test])
    return inner


def ignored_text_column(width: int, has_text: bool, n_labeled: int) -> int | None:
    """The column a tabular model of ``width`` columns is given but does not read: the text score (always last)
    below ``TEXT_COLUMN_MIN_LABELS`` labeled rows (``reads_text_score``); None when it reads every column."""
    return None if not has_text or reads_text_score(n_labeled) else width - 1


def training_design(X: np.ndarray, fold: Fold) -> np.ndarray:
    """The columns fold ``fold``'s tabular models are trained on, for its training rows: the features, the user
    columns (``user_ratings.py``) and, last, the text score (``text.py``), each as the fold's training rows see it."""
    A = X[fold.train]
    if fold.users is not None:
        A = with_user_columns(A, fold.users.train_features)
    if fold.text is not None:
        A = np.column_stack([A, fold.text.train_scores])
    return A


def fit_folds(
    X: np.ndarray,
    y: np.ndarray,
    Xu: np.ndarray,
    family: str,
    folds: Sequence[Fold],
    seed: int,
    threads: int,
    inner: bool,
    keep: bool,
    forest_jobs: int | None = None,
    columns: np.ndarray | None = None,
) -> FoldPredictions:
    """THE fold loop: ``family``'s K outer fits on ``folds`` (model seed ``seed``), their out-of-fold predictions
    and, with ``keep``, the fold models and their predictions of the unlabeled rows ``Xu``; with ``inner``, the
    level-one predictions inside each T_k (the module docstring says which). ``threads``: native threads per fit
    (call it inside ``native_threads(threads)``); ``forest_jobs``: the random forest's threads, ``columns``: the
    columns of X the family reads (``families.make_model``)."""
    n, K = y.shape[0], len(folds)
    oof = np.empty(n)
    level_one = np.full((K, n), np.nan)
    unlabeled, models = [], []
    for k, fold in enumerate(folds):
        train, test, text = fold.train, fold.test, fold.text
        if family == TEXT_FAMILY:
            oof[test] = text.held_out_scores
            level_one[k, train] = text.train_scores
            unlabeled.append(text.unlabeled_scores)
            continue
        A_train, A_test = training_design(X, fold), X[test]
        if fold.users is not None:  # the user columns before the text score, which stays last
            A_test = with_user_columns(A_test, fold.users.held_out_features)
        if text is not None:
            A_test = np.column_stack([A_test, text.held_out_scores])
        ignored = ignored_text_column(A_train.shape[1], text is not None, n)
        model = make_model(family, seed, threads, forest_jobs, ignore_column=ignored, columns=columns)
        model.fit(A_train, y[train])
        oof[test] = model.predict(A_test)
        if keep and Xu.shape[0]:
            Xu_k = Xu if fold.users is None else with_user_columns(Xu, fold.users.unlabeled_features)
            unlabeled.append(model.predict(Xu_k if text is None else np.column_stack([Xu_k, text.unlabeled_scores])))
        else:
            unlabeled.append(np.empty(0))
        if inner:
            oob = out_of_bag(model, A_train)
            if oob is None:
                oob = inner_crossfit(A_train, y[train], family, seed, threads, ignored, columns)
            level_one[k, train] = oob
        if keep:
            models.append(model)
    return FoldPredictions(family, oof, level_one, tuple(unlabeled), tuple(models))


def longest_first(families: Sequence[str]) -> list[str]:
    """The families in the order their fits are handed to workers: the forest (the longest) first."""
    return sorted(families, key=lambda f: f != "random_forest")


def fold_of(folds: Sequence[Fold], n: int) -> np.ndarray:
    """Each labeled row's fold (the one that holds it out)."""
    fold = np.empty(n, dtype=np.int64)
    for k, f in enumerate(folds):
        fold[f.test] = k
    return fold


def held_out_text_scores(folds: Sequence[Fold], n: int) -> np.ndarray | None:
    """Each labeled row's held-out text score (the last column its fold's model reads), None without text."""
    if any(fold.text is None for fold in folds):
        return None
    scores = np.empty(n)
    for fold in folds:
        scores[fold.test] = fold.text.held_out_scores
    return scores


def held_out_user_features(folds: Sequence[Fold], n: int) -> np.ndarray | None:
    """Each labeled row's held-out user columns (what its fold's model read before the text score), None without."""
    if any(fold.users is None for fold in folds):
        return None
    features = np.empty((n, fold_width(folds)))
    for fold in folds:
        features[fold.test] = fold.users.held_out_features
    return features


def fold_width(folds: Sequence[Fold]) -> int:
    """The number of user columns of ``folds`` (0 without)."""
    return 0 if not folds or folds[0].users is None else folds[0].users.held_out_features.shape[1]


def labels_used(fold: Fold) -> np.ndarray:
    """Every labeled row whose label fold ``fold``'s prediction may read: its training rows, the labels its text
    scores used and those its user columns used (``crossfit.oof_violations`` checks them)."""
    used = [fold.train]
    used += [fold.text.labels_used] if fold.text is not None else []
    used += [fold.users.labels_used] if fold.users is not None else []
    return np.unique(np.concatenate(used))


def crossfit_from_folds(
    fit: FoldPredictions, folds: Sequence[Fold], y: np.ndarray, n_unlabeled: int, seed: int, note: str | None
) -> CrossFit:
    """The cross-fit of one family from its fold loop (``fit``, run with ``keep``): labeled row i gets its held-out
    fold's prediction, unlabeled row j the mean over the fold models, (1/K) sum_k f_k(x_j); each fold's
    ``train_index_by_fold`` is its training rows plus every label its text scores used (``crossfit.py``)."""
    train_rows = tuple(labels_used(f) for f in folds)
    mean_unlabeled = np.mean(np.stack(fit.unlabeled), axis=0) if n_unlabeled else np.empty(0, dtype=np.float64)
    text_folds = tuple(f.text for f in folds if f.text is not None)
    n = y.shape[0]
    return CrossFit(
        fit.family,
        len(folds),
        seed,
        fit.oof,
        fold_of(folds, n),
        mean_unlabeled,
        train_rows,
        fit.models,
        "crossfit",
        note,
        held_out_text_scores(folds, n),
        text_folds,
        held_out_user_features(folds, n),
        tuple(f.users for f in folds if f.users is not None),
        tuple(fit.unlabeled) if n_unlabeled else tuple(np.empty(0) for _ in folds),
    )


def constant_oof(y: np.ndarray, folds: Sequence[Fold]) -> np.ndarray:
    """The honest floor's out-of-fold predictions: each held-out fold predicted by its training folds' mean."""
    constant = np.empty(y.shape[0])
    for fold in folds:
        constant[fold.test] = y[fold.train].mean()
    return constant


# --------------------------------------------------------------------------------------------------------
# repeated cross-validation of several families


@dataclass(frozen=True, eq=False)
class SeedFits:
    """Every family's outer fold models of one cross-validation seed, with that seed's folds and level-one
    predictions, kept so the cross-fit reuses them (``stack.crossfit_from_fits``) instead of fitting them again:
    they are exactly the fits ``crossfit.crossfit_predict`` and ``stack.stack_crossfit_predict`` make with that seed
    (same folds, features, text scores and model seeds). ``note`` says when k was reduced (``effective_k``)."""

    seed: int
    k: int
    note: str | None
    folds: tuple[Fold, ...]
    fits: dict[str, FoldPredictions]


@dataclass(frozen=True, eq=False)
class CVRun:
    """What ``cross_validate_families`` fitted: the folds of each seed and each (family, seed)'s fold loop (models
    only for ``keep_seed``)."""

    k: int
    note: str | None
    seeds: tuple[int, ...]
    families: tuple[str, ...]
    folds: dict[int, list[Fold]]
    fits: dict[tuple[str, int], FoldPredictions]
    keep_seed: int | None = None

    def result(self, family: str, y: np.ndarray) -> CVResult:
        """``family``'s metrics over the seeds (``cv_result``)."""
        per_seed = [seed_metrics(s, y, self.fits[family, s].oof) for s in self.seeds]
        return cv_result(family, y, per_seed, self.fits[family, self.seeds[0]].oof, self.k, self.note)

    def kept(self) -> SeedFits | None:
        """The fits of ``keep_seed`` for the cross-fit, or None when it was not one of the seeds."""
        if self.keep_seed not in self.folds:
            return None
        fits = {f: self.fits[f, self.keep_seed] for f in self.families}
        return SeedFits(self.keep_seed, self.k, self.note, tuple(self.folds[self.keep_seed]), fits)


def cross_validate_families(
    X: np.ndarray,
    y: np.ndarray,
    families: Sequence[str],
    k: int = 5,
    seeds: Sequence[int] = (42, 43, 44, 45, 46),
    threads: int | None = None,
    text: TextFeature | None = None,
    level_one: bool = False,
    keep_seed: int | None = None,
    workers: int | None = None,
    users: UserRatings | None = None,
    columns: dict[str, np.ndarray] | None = None,
) -> CVRun:
    """Repeated k-fold cross-validation of each of ``families`` on the labeled rows ``X``, ``y`` (checked by the
    caller): each seed's folds (``outer_folds``), then each (family, seed)'s ``fit_folds``, with the level-one
    predictions (``level_one``) and, for ``keep_seed``, the fold models. ``text``: the labeled rows' text (rows in
    the order of ``X``); each seed's text scores are computed once and shared by every family. ``workers``: worker
    processes (None: ``workers.workers_for`` the fits); one runs everything here, in order. ``columns``: the columns
    of X each family that reads only some reads (``families.family_columns``)."""
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("cross-validation needs at least one seed")
    k_used, note = effective_k(y.shape[0], k)
    workers = workers_for(len(seeds) * len(families), y.shape[0]) if workers is None else workers
    no_rows = np.empty((0, X.shape[1]))
    with native_threads(threads) as n_threads:
        fold_jobs = [(y, k_used, s, text, users) for s in seeds]
        folds_of = dict(zip(seeds, map_jobs(outer_folds, fold_jobs, workers), strict=True))
        jobs = [
            (X, y, no_rows, f, folds_of[s], s, n_threads, level_one, s == keep_seed, forest_threads(len(y), workers))
            + ((columns or {}).get(f),)
            for f in longest_first(families)
            for s in seeds
        ]
        fitted = {(job[3], job[5]): fit for job, fit in zip(jobs, map_jobs(fit_folds, jobs, workers), strict=True)}
    return CVRun(k_used, note, seeds, tuple(families), folds_of, fitted, keep_seed)


def predict_unlabeled(model: Pipeline, Xu: np.ndarray, text_scores: np.ndarray | None) -> np.ndarray:
    """A fold model's predictions for the unlabeled rows (their text score last, as in ``fit_folds``)."""
    if not Xu.shape[0]:
        return np.empty(0)
    return model.predict(Xu if text_scores is None else np.column_stack([Xu, text_scores]))
