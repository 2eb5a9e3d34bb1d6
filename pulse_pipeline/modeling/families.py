"""The model families that predict a session's satisfaction (stars) from its features: the paper's Appendix A.2.

The paper's set-up ("ML Model set-up and parameters"), one scikit-learn ``Pipeline`` per family:

- ``ordinal_logit``: StandardScaler(with_mean=True) -> OrdinalLogitRegressor(C=2.0, class_weight="balanced"),
  an ordinal logistic model whose ``predict`` is the expected rating sum_k k * P(stars = k | x); the L2 penalty
  (C=2.0) is the paper's explicit regularization against outliers;
- ``random_forest``: RandomForestRegressor(n_estimators=400, max_features=1/3, min_samples_leaf=5) (the
  paper's best model, Table 2: r = 0.29). The paper gives only the 400 trees; the other two are the classic
  regression-forest defaults (Breiman's p/3 candidate columns per split, leaves of at least 5 rows: R's
  randomForest for regression) instead of scikit-learn's (every column, leaves of 1 row), which grow each tree
  to fit its bootstrap sample's labels exactly. With ~70 mostly weak columns and noisy 1-5 star labels the
  classic ones predict better out of fold (r +0.02 on a paper-scale synthetic warehouse, every seed) and fit
  2.4x faster, which the modeling stage's time budget needs once the stack fits every family. Each tree draws
  its bootstrap sample of at most ``MAX_TREE_ROWS`` rows (``BoundedForest``): at the paper's scale (~1 450
  training rows a fold) and up to three times it, that is every row, as before; at ten times it (~14 400) a
  third of them. Why: a tree's size grows with its sample (one leaf per ~5 rows), and the five fold forests the
  cross-fit keeps, ships to worker processes and stores took ~400 MB at that scale, the largest part of the
  modeling step's memory; subsampled forests average trees on subsamples and stay consistent (the subsample
  grows with the data, and 400 trees on 5 000-row samples still see every row ~140 times);
- ``hist_gbm``: HistGradientBoostingRegressor(early_stopping=True), otherwise scikit-learn's defaults. Those
  defaults stop early (10 % of the training rows held out, 10 rounds without gain) only above 10 000 rows; our
  labeled sets are ~200-2 000 rows, where all 100 rounds overfit noisy stars: stopping early raised the
  out-of-fold r from 0.41 to 0.42 (paper-scale synthetic warehouse) and 0.43 to 0.48 (demo), 3 seeds each,
  at 2.4x less CPU;
- ``lightgbm``: LGBMRegressor(n_estimators=300, learning_rate=0.05, num_leaves=15, min_child_samples=20), not in
  the paper: a second boosted-tree family, small and shallow because the labeled set is small (~1 750 rows);
- ``sentiment``: StandardScaler -> Ridge(alpha=1) on the VADER statistics of the user's messages alone
  (``SENTIMENT_COLUMNS``, the ``user_`` columns of ``features.sentiment``), not in the paper: the obvious
  baseline on real rated conversations (a ridge on a handful of VADER statistics reaches r ~0.25 there), so the
  choice can never fall below it by more than selection noise; with ~8 columns it holds up with a few dozen labels.
  It reads only those columns (``columns``, from ``family_columns``).

Every pipeline starts with ``SimpleImputer(strategy="constant", fill_value=0)``. Why zero and not the mean: most
columns are counts read off the event stream (commits, pushes, failed commands, test runs), and a count that is
missing means the session had none of those events (``features.event_features`` has no row, the LEFT JOIN gives
NULL); a 0/1 rubric column whose annotation failed is read as "not flagged", the conservative reading, and
``annotation_status`` says how often that happened. A mean imputation would also leak the other rows' values into
each row, which is harmless here but pointless.

The paper's pipelines begin with DictVectorizer -> to_dense because its features were per-session dicts. That step
is not needed here: ``features.session_features`` is already a dense numeric table, one column per feature, with
each category one-hot encoded as ``<feature>__<option>`` 0/1 columns (see ``features/wide.py``), so the arrays go
straight to the imputer.

Threads (``threads.py`` says why fits are capped at all): lightgbm gets ``n_jobs`` = the PULSE_MODEL_THREADS
setting (default 1), because it sets its own OpenMP thread count and so escapes the cap ``threads.native_threads``
puts around every fit. random_forest gets ``n_jobs`` = every core the process may use (``settings.usable_cores``,
2 on this project's machines): its threads are Python threads that sleep while they wait, so two processes share
the cores fairly instead of collapsing, and one alone fits 1.8x as fast as on one thread. With fixed seeds the
thread count changes no prediction of ordinal_logit, hist_gbm or lightgbm at the pipeline's scale
(``tests/test_threads.py``); the forest adds its trees' predictions in the order its threads finish, so its
predictions agree run to run to ~1e-15, not bit for bit.

``OrdinalLogitRegressor`` is imported inside ``make_model`` so the other families work without it.
"""

from __future__ import annotations

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import Ridge
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from ..features.sentiment import COLUMNS as SENTIMENT_FEATURES
from ..settings import MODEL_FAMILIES, usable_cores
from .threads import threads_or_setting

FAMILIES: tuple[str, ...] = MODEL_FAMILIES
"""Every model family, in the order ties are broken (the earlier family wins); the names live with the settings that
select among them (``PULSE_MODEL_FAMILIES``), so they are checked when settings are read."""


SENTIMENT = "sentiment"
"""The family that reads the VADER sentiment columns alone (a ridge)."""

SENTIMENT_COLUMNS = tuple(c for c in SENTIMENT_FEATURES if c.startswith("user_"))
"""The columns the family ``sentiment`` reads: the VADER statistics of ``features.sentiment`` (English share,
mean, min, max, first, last, slope, negative share)."""


def family_columns(feature_names) -> dict[str, np.ndarray]:
    """The columns (indices into ``feature_names``) of each family that reads only some: ``sentiment``'s, when the
    features have any of them (none: no such family to fit)."""
    columns = np.flatnonzero([name in SENTIMENT_COLUMNS for name in feature_names])
    return {SENTIMENT: columns} if columns.size else {}


MAX_TREE_ROWS = 5_000
"""The most rows a random-forest tree draws for its bootstrap sample (``BoundedForest``)."""


class BoundedForest(RandomForestRegressor):
    """A ``RandomForestRegressor`` whose trees each draw a bootstrap sample of min(rows, ``MAX_TREE_ROWS``) rows
    (``max_samples``, set at each fit from the rows it is given): the plain forest up to that many rows."""

    def fit(self, X, y, sample_weight=None):
        self.max_samples = None if X.shape[0] <= MAX_TREE_ROWS else MAX_TREE_ROWS
        return super().fit(X, y, sample_weight)


def _imputer() -> SimpleImputer:
    # constant 0: a missing count means no such event (see the module docstring)
    return SimpleImputer(strategy="constant", fill_value=0.0, keep_empty_features=True)


def make_model(
    family: str,
    random_state: int = 0,
    threads: int | None = None,
    forest_jobs: int | None = None,
    ignore_column: int | None = None,
    columns: np.ndarray | None = None,
) -> Pipeline:
    """A fresh, unfitted pipeline ``impute -> [scale ->] model`` for ``family`` (one of ``FAMILIES``).

    ``random_state`` seeds the randomized families (random_forest, hist_gbm, lightgbm); the ordinal logit is
    deterministic. ``threads`` (None: the PULSE_MODEL_THREADS setting) is lightgbm's ``n_jobs``; hist_gbm and the
    ordinal logit take theirs from ``threads.native_threads``, and random_forest uses ``forest_jobs`` threads
    (None: every usable core; ``workers.py`` gives it 1 in a worker process, where the cores are shared out).
    ``ignore_column``: a column the model is given but does not read (dropped first: ``cv.reads_text_score``), so
    that every caller passes the same rows whichever columns the model reads. ``columns``: the columns the family
    ``sentiment`` reads (``family_columns``; it needs them).
    """
    if family == SENTIMENT:
        if columns is None or not len(columns):
            raise ValueError(f"the {SENTIMENT!r} family needs its columns: pass columns=family_columns(names)[...]")
        select = ColumnTransformer([("sentiment", "passthrough", [int(c) for c in columns])], remainder="drop")
        return Pipeline([("select", select), ("impute", _imputer()), ("scale", StandardScaler()), ("model", Ridge())])
    if ignore_column is not None:
        inner = make_model(family, random_state, threads, forest_jobs)
        drop = ColumnTransformer([("ignored", "drop", [ignore_column])], remainder="passthrough")
        return Pipeline([("ignore", drop), *inner.steps])
    if family == "ordinal_logit":
        from .ordinal import OrdinalLogitRegressor  # lazy: written in a separate module

        return Pipeline(
            [
                ("impute", _imputer()),
                ("scale", StandardScaler(with_mean=True)),
                ("model", OrdinalLogitRegressor(C=2.0, class_weight="balanced")),
            ]
        )
    if family == "random_forest":
        model = BoundedForest(
            n_estimators=400,
            max_features=1 / 3,
            min_samples_leaf=5,
            n_jobs=forest_jobs or usable_cores(),
            random_state=random_state,
        )
    elif family == "hist_gbm":
        model = HistGradientBoostingRegressor(early_stopping=True, random_state=random_state)
    elif family == "lightgbm":
        from lightgbm import LGBMRegressor  # lazy: importing lightgbm costs ~0.3 s

        model = LGBMRegressor(
            n_estimators=300,
            learning_rate=0.05,
            num_leaves=15,
            min_child_samples=20,
            n_jobs=threads_or_setting(threads),
            verbose=-1,
            random_state=random_state,
        )
    else:
        raise ValueError(f"unknown model family {family!r}; known families: {', '.join(FAMILIES)}")
    return Pipeline([("impute", _imputer()), ("model", model)])
