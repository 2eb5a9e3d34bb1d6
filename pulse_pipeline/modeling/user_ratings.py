"""Raters' habits as a feature: each user's other ratings, shrunk toward the mean, cross-fitted per fold.

Why: raters differ. Some give 5 to everything, some never more than 3; the generator draws a per-user generosity
(sd 0.35 stars, ``synth.model``) that no session feature records, and real raters do the same. A user's *other*
ratings are signal about the next one that costs nothing, provided no label ever predicts itself.

The two columns (``USER_COLUMNS``), computed from a set of *source* rows S (labeled rows whose labels may be read):

- ``user_rating_count`` n_u: user u's ratings among S;
- ``user_rating_mean``: their mean shrunk toward the overall mean (empirical Bayes, the normal random-intercept
  model y = mu + b_u + e, b_u ~ (0, tau^2), e ~ (0, sigma^2)):

      m_u = mu + B_u (ybar_u - mu),   B_u = tau^2 n_u / (tau^2 n_u + sigma^2)          (m_u = mu when n_u = 0)

  with, over the rows of S (d_i = y_i - mu),

      mu      = mean_S y,
      tau^2   = max(0, sum_u [(sum_{i in u} d_i)^2 - sum_{i in u} d_i^2] / sum_u n_u (n_u - 1)),
      sigma^2 = max(mean_S d^2 - tau^2, EPS).

  Why shrink: m_u is the best linear predictor of user u's next rating from their n_u ratings under that model
  (the BLUP, James-Stein's estimator): a user with one 5-star rating is not known to be a generous user, and a
  raw mean would tell a model so with the same weight as twenty ratings' mean. tau^2 is the moment estimator of
  the covariance of two ratings of one user (Cov(y_i, y_j) = tau^2 for i != j of the same user): unbiased, read
  off the pairs alone, defined as soon as one user has two ratings; negative (no user effect seen) it is 0, every
  m_u is mu and the column carries nothing (a model ignores a constant): no harm. A row without a user gets
  (mu, 0). The count is a column too because B_u depends on it and a model may want to weigh the two itself.

Cross-fitting, per outer fold k of the cross-validation engine (``cv.outer_folds``), like the nested text score
(``text.nested_text_scores``):

- a held-out row of F_k and every unrated row read S = T_k, fold k's training rows (``FoldUserFeatures.outer``);
- a training row of T_k reads S = T_k minus its inner fold: T_k is split by ``KFold(min(INNER_FOLDS, |T_k| // 2),
  shuffle=True, random_state=seed)`` and each inner fold's rows read the other inner folds (``inner``).

Why inner folds and not leave-one-out (S = T_k minus the row itself): the leave-one-out mean of row i,
(S_u - y_i) / (n_u - 1), is a decreasing linear function of y_i among one user's rows, so a model that can tell
the user apart (their count is a column; other features correlate) reads the row's own label back off it:
the classic leave-one-out target-encoding leak (Prokhorenkova et al. 2018, "CatBoost: unbiased boosting", the
"prediction shift"). Training rows would then carry a feature anti-correlated with their label within a user,
unlike any held-out row. With inner folds a training row's feature reads no label of its own inner fold, so it is
independent of the row's own label exactly as a held-out row's is of F_k's labels; the price is that training
rows see (INNER_FOLDS - 1) / INNER_FOLDS of T_k's ratings, slightly fewer than held-out rows (the count column
says how many). Measured (issue 37), the price is small and the leak did not show on these data: leave-one-out
training features gave an out-of-fold r higher by +0.011 (hist_gbm) and +0.002 (random forest) on the generator
(10 000 sessions, 40 a user, 10 % rated, 2 seeds) and by +0.002, +0.005, +0.001 (hist_gbm, random forest, ordinal
logit) on ConvAI2's real raters (5 fold seeds). Either way no held-out row reads its own fold's labels, so the
choice is efficiency, not validity; inner folds are kept because they cannot shift on data where a model can tell
the users apart, which the generator's features cannot.

Every label any of fold k's user features read is in T_k, and ``FoldUserFeatures.labels_used`` lists them; the
engine joins them to the fold's ``train_index_by_fold`` (``cv.crossfit_from_folds``, ``stack.blend``), so
``crossfit.oof_violations`` and the check ``predictions_are_out_of_fold`` catch a held-out row whose user feature
read its own fold's labels; ``user_feature_violations`` counts a training row whose feature read its own label.

Folds are not grouped by user. Grouped, all of a user's ratings fall in one fold, so every *rated* row's feature
would be empty (n_u = 0) while unrated rows' are not: the rectifier of prediction-powered inference could not see
the signal, and f would be a different function on rated and unrated rows. Session-level folds keep the
estimators valid: given T_k, a held-out row and an unrated row of the same user read the same T_k ratings and
(when ratings are missing at random) are exchangeable, so E[y - f_k] over F_k is the unrated rows' too. Where the
unit is the user (user-assigned experiments), the clustered estimators (``stats/cluster.py``) sum each user's
labeled and unlabeled influence before squaring, so the dependence a user's labels create through their own
feature (their unrated sessions' predictions lean on their ratings) stays inside that user's cluster; the
``user_features`` scenario of ``pulse validate`` checks the coverage (``studies/coverage.py``).

Absent without harm: when no session carries a user, or no user has two ratings (nobody has *other* ratings),
``user_ratings`` returns None and the models get no column at all: the predictions are the same as without
this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from sklearn.model_selection import KFold

USER_MEAN = "user_rating_mean"
"""The column of the user's other ratings' shrunk mean (``CONTRACT``: the name everyone relies on)."""
USER_COUNT = "user_rating_count"
"""The column of how many other ratings the user has in the source rows."""
USER_COLUMNS: tuple[str, ...] = (USER_MEAN, USER_COUNT)
"""The user columns, in the order they are appended to a row's features (before the text score, kept last)."""

INNER_FOLDS = 5
"""Inner folds within T_k for the training rows' features: each reads 4/5 of T_k, close to the held-out rows'
T_k (a 2-fold split would halve every user's count, a mismatch between training and held-out rows)."""

EPS = 1e-12
"""Floor of sigma^2 (labels constant within every user: B_u = 1 where tau^2 > 0)."""

NO_USER = -1
"""The code of a session without a user (``user_codes``)."""


def user_codes(user_ids: Sequence[str | None]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Integer codes 0..U-1 of ``user_ids`` (one per distinct id, in first-seen order) and the ids they stand for;
    a missing id (None, NaN or "") gets ``NO_USER``: a session without a user has no other ratings."""
    codes = np.empty(len(user_ids), dtype=np.int64)
    known: dict[str, int] = {}
    for i, u in enumerate(user_ids):
        if u is None or u == "" or (isinstance(u, float) and np.isnan(u)):
            codes[i] = NO_USER
        else:
            codes[i] = known.setdefault(str(u), len(known))
    return codes, tuple(known)


@dataclass(frozen=True, eq=False)
class UserTable:
    """Per-user sums and counts of the labels of the source rows ``rows`` (indices into the labeled rows), and the
    shrinkage fitted on them: what ``features`` reads for any row, given its user's code."""

    rows: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    mu: float
    tau2: float
    sigma2: float

    def features(self, codes: np.ndarray) -> np.ndarray:
        """(m_u - mu, n_u) of each code (the module docstring's formula); (0, 0) for ``NO_USER`` and unseen users."""
        codes = np.asarray(codes, dtype=np.int64)
        seen = (codes >= 0) & (codes < self.counts.size)
        n = np.where(seen, self.counts[np.where(seen, codes, 0)], 0.0)
        s = np.where(seen, self.sums[np.where(seen, codes, 0)], 0.0)
        deviation = self.tau2 * (s - n * self.mu) / (self.tau2 * n + self.sigma2)
        return np.column_stack([deviation, n]).astype(np.float64)


def user_table(codes: np.ndarray, y: np.ndarray, rows: np.ndarray, n_users: int) -> UserTable:
    """The ``UserTable`` of the labels ``y[rows]`` (``codes``, ``y``: every labeled row's): mu, tau^2, sigma^2 as
    the module docstring computes them. Reads no label outside ``rows``, which it records."""
    rows = np.unique(np.asarray(rows, dtype=np.int64))
    c, v = np.asarray(codes, dtype=np.int64)[rows], np.asarray(y, dtype=np.float64)[rows]
    mu = float(v.mean()) if v.size else 0.0
    d = v - mu
    has = c >= 0
    sums = np.bincount(c[has], weights=v[has], minlength=n_users)
    counts = np.bincount(c[has], minlength=n_users).astype(np.float64)
    d_sum = np.bincount(c[has], weights=d[has], minlength=n_users)
    d_sq = np.bincount(c[has], weights=d[has] ** 2, minlength=n_users)
    pairs = float(np.sum(counts * (counts - 1)))
    tau2 = max(0.0, float(np.sum(d_sum**2 - d_sq)) / pairs) if pairs else 0.0
    sigma2 = max(float(np.mean(d**2)) - tau2 if v.size else 0.0, EPS)
    return UserTable(rows, sums, counts, mu, tau2, sigma2)


@dataclass(frozen=True, eq=False)
class FoldUserFeatures:
    """The user features of one outer fold (rows: indices into the labeled rows; features: (rows, 2) arrays in
    ``USER_COLUMNS`` order).

    ``train_features[j]`` is training row ``train_rows[j]``'s, read from ``inner[inner_fold[j]]``;
    ``held_out_features`` (of ``held_out_rows``) and ``unlabeled_features`` are read from ``outer``, the table of
    T_k, kept so that unlabeled rows can be given features later (``with_unlabeled``)."""

    train_rows: np.ndarray
    held_out_rows: np.ndarray
    train_features: np.ndarray
    held_out_features: np.ndarray
    unlabeled_features: np.ndarray
    outer: UserTable
    inner_fold: np.ndarray
    inner: tuple[UserTable, ...]

    @property
    def labels_used(self) -> np.ndarray:
        """Every labeled row whose label entered this fold's user features (outer and inner tables), sorted."""
        return np.unique(np.concatenate([self.outer.rows, *(t.rows for t in self.inner)]))

    def with_unlabeled(self, unlabeled_codes: np.ndarray) -> FoldUserFeatures:
        """The same fold with the unlabeled rows ``unlabeled_codes``' features (read from ``outer``)."""
        return replace(self, unlabeled_features=self.outer.features(unlabeled_codes))


def fold_user_features(
    codes: np.ndarray,
    y: np.ndarray,
    unlabeled_codes: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    n_users: int,
    seed: int,
    inner_k: int = INNER_FOLDS,
) -> FoldUserFeatures:
    """The ``FoldUserFeatures`` of the outer fold with training rows ``train`` and held-out rows ``test`` (the
    module docstring: held-out and unlabeled rows read T_k, a training row the other inner folds of T_k)."""
    train, test = np.asarray(train, dtype=np.int64), np.asarray(test, dtype=np.int64)
    outer = user_table(codes, y, train, n_users)
    train_features = np.empty((train.size, len(USER_COLUMNS)))
    inner_fold = np.zeros(train.size, dtype=np.int64)
    inner: list[UserTable] = []
    if train.size >= 2:
        splitter = KFold(n_splits=max(2, min(inner_k, train.size // 2)), shuffle=True, random_state=seed)
        for g, (fit_pos, score_pos) in enumerate(splitter.split(train)):
            table = user_table(codes, y, train[fit_pos], n_users)
            train_features[score_pos] = table.features(codes[train[score_pos]])
            inner_fold[score_pos] = g
            inner.append(table)
    else:  # one training row: nothing else to read
        empty = user_table(codes, y, train[:0], n_users)
        train_features[:] = empty.features(codes[train])
        inner.append(empty)
    return FoldUserFeatures(
        train,
        test,
        train_features,
        outer.features(codes[test]),
        outer.features(unlabeled_codes),
        outer,
        inner_fold,
        tuple(inner),
    )


@dataclass(frozen=True, eq=False)
class UserRatings:
    """Who rated what: the user code of each labeled row (in the order of ``X_labeled``) and of each unlabeled row,
    and the ids the codes stand for. ``fold(y, train, test, seed)`` gives one outer fold's features."""

    labeled: np.ndarray
    unlabeled: np.ndarray
    user_ids: tuple[str, ...]
    inner_k: int = INNER_FOLDS

    def fold(self, y: np.ndarray, train: np.ndarray, test: np.ndarray, seed: int) -> FoldUserFeatures:
        y = np.asarray(y, dtype=np.float64)
        if y.shape[0] != self.labeled.shape[0]:
            raise ValueError(f"the user codes have {self.labeled.shape[0]} labeled rows but y has {y.shape[0]}")
        return fold_user_features(
            self.labeled, y, self.unlabeled, train, test, len(self.user_ids), seed, inner_k=self.inner_k
        )

    def with_unlabeled(self, unlabeled_user_ids: Sequence[str | None]) -> UserRatings:
        """The same labeled rows with other unlabeled rows (users not among the labeled rows' have no ratings)."""
        code = {u: i for i, u in enumerate(self.user_ids)}
        codes = np.array([code.get(u, NO_USER) if u else NO_USER for u in unlabeled_user_ids], dtype=np.int64)
        return replace(self, unlabeled=codes)


def user_ratings(user_ids: Sequence[str | None], labeled: np.ndarray) -> UserRatings | None:
    """The ``UserRatings`` of sessions with ``user_ids`` (one per session) split by ``labeled``, or None (no user
    feature at all) when no user has two rated sessions: then no row could read another rating of its user."""
    codes, ids = user_codes(user_ids)
    labeled = np.asarray(labeled, dtype=bool)
    rated = codes[labeled]
    counts = np.bincount(rated[rated >= 0], minlength=len(ids))
    if not ids or counts.max(initial=0) < 2:
        return None
    return UserRatings(rated, codes[~labeled], ids)


def with_user_columns(X: np.ndarray, features: np.ndarray | None) -> np.ndarray:
    """``X`` with the user columns appended (unchanged without them)."""
    return X if features is None else np.column_stack([X, features])


def user_feature_violations(folds: Sequence[FoldUserFeatures]) -> int:
    """Training rows whose user feature read their own label: sum over outer folds k of
    #{j in T_k : j in inner[inner_fold(j)].rows}. 0 for exact nested cross-fitting. (A held-out row whose feature
    read F_k's labels is counted by ``crossfit.oof_violations``, through ``labels_used``.)"""
    violations = 0
    for fold in folds:
        for g, table in enumerate(fold.inner):
            violations += int(np.count_nonzero(np.isin(fold.train_rows[fold.inner_fold == g], table.rows)))
    return violations
