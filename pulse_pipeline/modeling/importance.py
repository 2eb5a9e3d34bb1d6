"""Permutation importance of a cross-fit model, measured on held-out rows only.

Why held-out: importance on the rows a model was trained on rewards memorized noise (a random forest fits its
training labels almost exactly, so shuffling any column it split on "hurts"). Each fold model is therefore scored
on its own held-out fold, the rows whose out-of-fold predictions the estimates use.

For fold model f with held-out rows H_f, repeat r and feature j, with x^{(j,r)} the rows of H_f whose column j is
permuted among themselves (a random permutation per fold, repeat and feature)::

    d_{f,r,j} = MSE(y_H, f(x^{(j,r)})) - MSE(y_H, f(x_H))           the rise in error when j carries no information
    importance_j = mean over (f, r) of d_{f,r,j}                     (= the mean over folds of the fold means)
    sd_j         = sample sd (ddof=1) over the k * n_repeats values d_{f,r,j}

Cost: a fold with more than ``MAX_FOLD_ROWS`` held-out rows is measured on that many of them, drawn at random
(the rest would only refine a mean that is already precise); one ``predict`` per chunk of (repeat, feature) pairs,
the permuted copies stacked into one matrix, so a fold costs about n_repeats * n_features * |H_f| predicted rows
in a handful of calls, all inside ``threads.native_threads`` like every fit (the fold models keep the ``n_jobs``
they were built with). Folds run in worker processes (``workers.py``) from ``workers.MIN_ROWS`` labeled rows; the
permutations (and any subset of rows) are drawn here first, fold by fold, so the result does not depend on where a
fold ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .cv import CrossFit
from .threads import native_threads
from .workers import map_jobs, workers_for

MAX_ROWS_PER_PREDICT = 50_000
"""Rows per stacked ``predict`` call: bounds memory at ~rows x features x 8 bytes (70 features: 28 MB), times the
copies a pipeline makes on the way (imputed, scaled, the forest's float32): at 250 000 rows those copies took
~0.5 GB in each worker process at ten times the paper's scale, the modeling step's peak."""

MAX_FOLD_ROWS = 1_000
"""Held-out rows per fold the importance is measured on (a random subset above it). Why: the cost is
n_repeats x features x rows predicted per fold, at the paper's scale (367 held-out rows a fold) ~19 CPU-s for the
stack's families, a sixth of the modeling step, and it grows with the ratings; a feature's mean rise in MSE over
5 folds x 1 000 rows is already measured on 2.7x the rows the paper's whole labeled set gives. At and below
5 000 rated sessions (5 folds) every held-out row is used, as before."""


@dataclass(frozen=True)
class Importance:
    """One feature's permutation importance (rise in MSE, stars^2); ``rank`` 1 is the most important."""

    feature: str
    mean: float
    sd: float
    rank: int


def fold_rise(model, Xh: np.ndarray, yh: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """d_{f,r,j} of one fold model on its held-out rows ``Xh``, ``yh`` (``perms[r, j]``: the permutation of the rows
    for repeat r and feature j), as an (n_repeats, p) array."""
    h, p = Xh.shape
    n_repeats = perms.shape[0]
    base = float(np.mean((yh - model.predict(Xh)) ** 2))
    pairs = [(r, j) for r in range(n_repeats) for j in range(p)]
    step = max(1, MAX_ROWS_PER_PREDICT // h)
    rise = np.empty((n_repeats, p))
    for start in range(0, len(pairs), step):
        chunk = pairs[start : start + step]
        rs = np.array([r for r, _ in chunk])
        js = np.array([j for _, j in chunk])
        stacked = np.broadcast_to(Xh, (len(chunk), h, p)).copy()
        # copy c gets column js[c] replaced by its permuted values
        copies, rows = np.arange(len(chunk))[:, None], np.arange(h)[None, :]
        stacked[copies, rows, js[:, None]] = Xh[perms[rs, js], js[:, None]]
        pred = model.predict(stacked.reshape(-1, p)).reshape(len(chunk), h)
        rise[rs, js] = np.mean((yh[None, :] - pred) ** 2, axis=1) - base
    return rise


def permutation_importance_oof(
    crossfit: CrossFit,
    X_labeled: np.ndarray,
    y: np.ndarray,
    feature_names: Sequence[str],
    n_repeats: int = 5,
    seed: int = 0,
    threads: int | None = None,
    max_fold_rows: int = MAX_FOLD_ROWS,
) -> list[Importance]:
    """Permutation importance of ``crossfit``'s fold models on their held-out rows (formula in the module
    docstring), sorted by rank (mean descending; ties keep the column order; NaN last).

    ``X_labeled`` and ``y`` are the labeled rows the cross-fit was trained on, in the same order. In-sample
    predictions have no held-out rows, so they are refused. ``threads``: the OpenMP/BLAS cap while predicting
    (None: PULSE_MODEL_THREADS). ``max_fold_rows``: held-out rows measured per fold (``MAX_FOLD_ROWS``).
    """
    if crossfit.method != "crossfit":
        raise ValueError(
            f"permutation importance needs held-out rows; a {crossfit.method!r} fit has none (use crossfit_predict)"
        )
    X = np.asarray(X_labeled, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    names = [str(f) for f in feature_names]
    if X.ndim != 2 or X.shape[0] != y.shape[0] or X.shape[0] != crossfit.oof.shape[0]:
        raise ValueError(
            f"X_labeled {X.shape} and y {y.shape} must be the {crossfit.oof.shape[0]} labeled rows "
            "the cross-fit was trained on"
        )
    if len(names) != X.shape[1]:
        raise ValueError(f"{len(names)} feature names for {X.shape[1]} columns")
    if n_repeats < 1:
        raise ValueError(f"n_repeats must be >= 1; got {n_repeats}")

    p = X.shape[1]
    rng = np.random.default_rng(seed)
    jobs = []  # one per fold with two or more held-out rows: its model, rows, labels and permutations
    for f, model in enumerate(crossfit.models):
        held = np.flatnonzero(crossfit.fold == f)
        if held.size < 2:
            continue
        if held.size > max_fold_rows:
            held = np.sort(rng.choice(held, max_fold_rows, replace=False))
        # perms[r, j] is the permutation of the held-out rows for repeat r, feature j
        perms = rng.permuted(np.broadcast_to(np.arange(held.size), (n_repeats, p, held.size)), axis=-1)
        jobs.append((model, X[held], y[held], perms))
    with native_threads(threads):
        drops = map_jobs(fold_rise, jobs, workers_for(len(jobs), X.shape[0]))  # one (n_repeats, p) block per fold
    if not drops:
        raise ValueError("no fold has two or more held-out rows: nothing to measure importance on")

    values = np.concatenate(drops, axis=0)  # (folds * n_repeats, p)
    means = values.mean(axis=0)
    sds = values.std(axis=0, ddof=1) if values.shape[0] >= 2 else np.full(p, math.nan)
    order = sorted(range(p), key=lambda j: (math.isnan(means[j]), -means[j] if not math.isnan(means[j]) else 0.0, j))
    return [Importance(names[j], float(means[j]), float(sds[j]), rank) for rank, j in enumerate(order, start=1)]
