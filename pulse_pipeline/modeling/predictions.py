"""The cross-fit tables and their audit.

``crossfit_tables`` fits the chosen family across all experiment arms (``crossfit.crossfit_predict``, seed 42) and
lays the result out as the three tables the estimates stage and the checks read:

- ``modeling.predictions``: a row per session. A rated session gets its out-of-fold prediction and the fold whose
  model made it (method ``out_of_fold``); an unrated one gets the mean of the fold models' predictions (method
  ``fold_mean``, no fold). Stars go on the label scale with ``stars.stars_to_label``.
- ``modeling.fold_training``: which rated sessions trained each fold model.
- ``modeling.feature_importance``: permutation importance of the fold models on their held-out folds.

``audit_out_of_fold`` reads the first two back and counts, with ``crossfit.oof_violations`` (the one out-of-fold
test), the rated sessions whose prediction came from a model that was trained on their rating.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from .. import tables
from ..stars import stars_to_label
from ..warehouse import Warehouse
from .crossfit import crossfit_predict, oof_violations, pearson
from .data import ModelingData
from .importance import permutation_importance_oof

CROSSFIT_SEED = 42
"""The seed of the cross-fit folds and models: the paper's, and the first CV seed."""


@dataclass(frozen=True, eq=False)
class CrossFitTables:
    """The rows of the three cross-fit tables (``eq=False``: it holds frames), and how well the predictions did."""

    predictions: pl.DataFrame  # modeling.predictions: rated sessions first, then unrated, each by session id
    fold_training: pl.DataFrame  # modeling.fold_training
    importance: pl.DataFrame  # modeling.feature_importance, most important first
    oof_pearson: float  # Pearson r of the rated sessions' labels and out-of-fold predictions (NaN if undefined)
    note: str | None  # why fewer folds were used, when they were


def crossfit_tables(
    data: ModelingData, family: str, folds: int, say: Callable[[str], None] = lambda _: None
) -> CrossFitTables:
    """Cross-fit ``family`` on the rated sessions of ``data``, predict every session, measure importance."""
    rated = data.labeled
    say(f"cross-fitting {family}: {int(rated.sum())} rated, {int((~rated).sum())} unrated sessions")
    X, y = data.X[rated], data.y[rated]
    fit = crossfit_predict(X, y, data.X[~rated], family, k=folds, seed=CROSSFIT_SEED)
    rated_ids = data.session_ids[rated]

    rated_rows = pl.DataFrame(
        {
            "session_id": pl.Series(rated_ids, dtype=pl.String),
            "labeled": True,
            "label_stars": y,
            "label": stars_to_label(y),
            "prediction_stars": fit.oof,
            "prediction": stars_to_label(fit.oof),
            "fold": fit.fold,
            "model": family,
            "method": "out_of_fold",
        }
    )
    unrated_rows = pl.DataFrame(
        {
            "session_id": pl.Series(data.session_ids[~rated], dtype=pl.String),
            "labeled": False,
            "label_stars": None,
            "label": None,
            "prediction_stars": fit.unlabeled,
            "prediction": stars_to_label(fit.unlabeled),
            "fold": None,
            "model": family,
            "method": "fold_mean",
        }
    )
    training_rows = np.concatenate(fit.train_index_by_fold)
    fold_training = pl.DataFrame(
        {
            "model": family,
            "fold": np.repeat(np.arange(len(fit.train_index_by_fold)), [len(t) for t in fit.train_index_by_fold]),
            "session_id": pl.Series(rated_ids[training_rows], dtype=pl.String),
        }
    )
    ranked = permutation_importance_oof(fit, X, y, list(data.feature_names))
    importance = pl.DataFrame(
        {
            "model": family,
            "feature": [i.feature for i in ranked],
            "importance_mean": [i.mean for i in ranked],
            "importance_sd": [i.sd for i in ranked],
            "rank": [i.rank for i in ranked],
        }
    )
    return CrossFitTables(
        predictions=pl.concat([rated_rows, unrated_rows], how="vertical_relaxed"),
        fold_training=fold_training,
        importance=importance,
        oof_pearson=pearson(y, fit.oof)[0],
        note=fit.note,
    )


@dataclass(frozen=True)
class OutOfFoldAudit:
    """What the check ``predictions_are_out_of_fold`` reports; valid cross-fitting has zero of both."""

    in_sample_predictions: int  # rated sessions predicted by a fold model trained on them, or by no fold at all
    unrated_with_a_fold: int  # unrated sessions should get the mean of every fold model, not one fold's

    @property
    def passed(self) -> bool:
        return self.in_sample_predictions == 0 and self.unrated_with_a_fold == 0


def audit_out_of_fold(predictions: pl.DataFrame, fold_training: pl.DataFrame) -> OutOfFoldAudit:
    """Count the predictions that break cross-fitting, from the rows of ``modeling.predictions`` and
    ``modeling.fold_training``.

    For each model, the rated sessions with a fold become rows 0..n-1 and each fold's training sessions become
    indices into them, so ``oof_violations`` counts #{i : i in train[fold(i)]}; rated sessions without a fold
    count too (their prediction came from no held-out fold).
    """
    rated = predictions.filter(pl.col("labeled"))
    in_sample = rated.filter(pl.col("fold").is_null()).height
    for model in rated["model"].unique(maintain_order=True):
        held_out = rated.filter((pl.col("model") == model) & pl.col("fold").is_not_null()).with_row_index("row")
        trained = fold_training.filter(pl.col("model") == model).join(
            held_out.select("session_id", "row"), on="session_id"
        )
        n_folds = 1 + max(held_out["fold"].max() or 0, trained["fold"].max() or 0)
        train_index_by_fold = [trained.filter(pl.col("fold") == f)["row"].to_numpy() for f in range(n_folds)]
        in_sample += oof_violations(held_out["fold"].to_numpy(), train_index_by_fold)
    unrated_with_a_fold = predictions.filter(~pl.col("labeled") & pl.col("fold").is_not_null()).height
    return OutOfFoldAudit(in_sample_predictions=in_sample, unrated_with_a_fold=unrated_with_a_fold)


def audit_stored_predictions(wh: Warehouse) -> OutOfFoldAudit:
    """``audit_out_of_fold`` of the predictions and fold training sets in the warehouse."""
    return audit_out_of_fold(
        wh.frame(f"SELECT labeled, fold, model, session_id FROM {tables.PREDICTIONS.qualified}"),
        wh.frame(f"SELECT model, fold, session_id FROM {tables.FOLD_TRAINING.qualified}"),
    )
