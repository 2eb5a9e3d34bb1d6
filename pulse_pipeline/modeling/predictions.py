"""The cross-fit tables and their audit.

``crossfit_tables`` fits the chosen family across all experiment arms (``crossfit.crossfit_predict``, seed 42), or
takes cross-validation's seed-42 fits, the same ones (``stack.crossfit_from_fits``), and lays the result out as the
tables the estimates stage and the checks read:

- ``modeling.predictions``: a row per session. A rated session gets its out-of-fold prediction and the fold whose
  model made it (method ``out_of_fold``); an unrated one gets the mean of the fold models' predictions (method
  ``fold_mean``, no fold). Stars go on the label scale with ``stars.stars_to_label``.
- ``modeling.fold_training``: which rated sessions trained each fold model (and so each fold's recalibration map,
  fitted on those rows' labels alone: ``recalibration.py``).
- ``modeling.recalibration``: whether ``prediction_calibrated`` (what cross-PPI and AIPW's outcome model read) is
  the prediction recalibrated by cross-fitted linear maps, and why (``recalibration.decide``).
- ``modeling.feature_importance``: permutation importance of the fold models on their held-out folds (with the
  text, ``text_score`` is one more feature; the family "text" has none, its model reads words, not features).
- ``modeling.text_fold_training``: with the text, the inner cross-fit of the text score within each outer fold.
- ``modeling.text_terms``: the text ridge's most predictive terms (``text.top_terms``, explanation only).

With the text, a fold's ``fold_training`` rows are every rated session whose label its prediction used: the
tabular model's training rows and those of the text ridges (outer and inner) that made its text scores.

``audit_out_of_fold`` reads them back and counts, with ``crossfit.oof_violations`` (the one out-of-fold test), the
rated sessions whose prediction came from a model that was trained on their rating, and, from
``text_fold_training``, the rated sessions whose inner text score came from a ridge trained on their rating.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from .. import tables
from ..memory import release_freed_memory
from ..stars import stars_to_label
from ..warehouse import Warehouse
from . import cv
from .crossfit import TEXT_FAMILY, TEXT_SCORE, CrossFit, oof_violations, pearson
from .data import ModelingData
from .families import SENTIMENT, family_columns
from .importance import permutation_importance_oof
from .recalibration import Recalibration, level_one_by_fold, recalibrate
from .stack import BASELINE, BASELINE_MEMBERS, STACK, SeedFits, crossfit_from_fits
from .text import TextFeature, top_terms
from .user_ratings import USER_COLUMNS, UserRatings
from .workers import release_workers

CROSSFIT_SEED = 42
"""The seed of the cross-fit folds and models: the paper's, and the first CV seed."""


@dataclass(frozen=True, eq=False)
class CrossFitTables:
    """The rows of the three cross-fit tables (``eq=False``: it holds frames), and how well the predictions did."""

    predictions: pl.DataFrame  # modeling.predictions: rated sessions first, then unrated, each by session id
    fold_training: pl.DataFrame  # modeling.fold_training
    importance: pl.DataFrame  # modeling.feature_importance, most important first
    text_fold_training: pl.DataFrame  # modeling.text_fold_training (empty without text)
    text_terms: pl.DataFrame  # modeling.text_terms (empty without text)
    oof_pearson: float  # Pearson r of the rated sessions' labels and out-of-fold predictions (NaN if undefined)
    note: str | None  # why fewer folds were used, when they were
    fit: CrossFit  # the fit itself: its fold models, for a later run to reuse (``reuse.KeptFit``)
    recalibration: Recalibration | None = None  # prediction_calibrated's maps and why (``recalibration.py``)
    recalibration_rows: pl.DataFrame | None = None  # modeling.recalibration


def crossfit_tables(
    data: ModelingData,
    family: str,
    folds: int,
    say: Callable[[str], None] = lambda _: None,
    families: Sequence[str] = (),
    kept: SeedFits | None = None,
    unrated: Iterable[tuple[np.ndarray, TextFeature | None]] | None = None,
) -> CrossFitTables:
    """Cross-fit ``family`` on the rated sessions of ``data``, predict every session, measure importance.

    ``family`` "stack" blends ``families`` (the configured ones; "text" only when there is text) with
    ``stack.stack_crossfit_predict``; its fold_training rows are every label each fold's blend used. ``kept``:
    cross-validation's fits of seed ``CROSSFIT_SEED`` on the same rated rows (``comparison.compare_models``), the
    very fits the cross-fit would make, so they are reused (``stack.crossfit_from_fits``) and only the unrated
    sessions are predicted (without it they are made here, ``seed_fits``). ``unrated``: the unrated sessions'
    feature rows and text in chunks (``data.unrated_chunks``) instead of ``data``'s, so that every session's text
    is never held at once. ``prediction_calibrated`` is the recalibrated cross-fit (``recalibration.recalibrate``,
    from the same fits' level-one predictions), equal to ``prediction`` when the model needs none."""
    rated = data.labeled
    say(f"cross-fitting {family}: {int(rated.sum())} rated, {int((~rated).sum())} unrated sessions")
    X, y = data.X[rated], data.y[rated]
    text = data.text_feature()
    users = data.user_feature()  # the user columns (user_ratings.py), None without
    columns = family_columns(data.feature_names)
    base = [f for f in families if f not in (STACK, BASELINE) and (f != TEXT_FAMILY or text is not None)]
    base = [f for f in base if f != SENTIMENT or f in columns]
    if kept is not None and kept.seed != CROSSFIT_SEED:
        raise ValueError(f"the cross-fit uses seed {CROSSFIT_SEED}; cross-validation kept seed {kept.seed}")
    if kept is None:  # the very fits crossfit_predict / stack_crossfit_predict make, with their level-one predictions
        kept = seed_fits(X, y, family, base, folds, text, users, columns)
    if unrated is not None:
        # each chunk's cross-fit holds that chunk's text and scores: keep its predictions only (and the first
        # chunk's fit for the rest, which is the same in every chunk: the rated rows' fits)
        first, predicted, by_fold, done = None, [], [], 0
        for Xu, t in unrated:
            u = None if users is None else replace(users, unlabeled=users.unlabeled[done : done + Xu.shape[0]])
            done += Xu.shape[0]
            part = crossfit_from_fits(kept, X, y, Xu, family, families=base, text=t, users=u)
            first = part if first is None else first
            predicted.append(part.unlabeled)
            by_fold.append(part.unlabeled_folds)
            release_freed_memory()  # the chunk's text and its TF-IDF parts
        folds_unlabeled = tuple(np.concatenate(parts) for parts in zip(*by_fold, strict=True))
        fit = replace(first, unlabeled=np.concatenate(predicted), unlabeled_folds=folds_unlabeled)
        release_workers()  # they hold what the chunks left (text, fold models): ~1 GB at 10x the paper's scale
    else:
        fit = crossfit_from_fits(kept, X, y, data.X[~rated], family, families=base, text=text, users=users)
    recalibration = recalibrate(
        y,
        fit.oof,
        fit.fold,
        fit.unlabeled,
        fit.unlabeled_folds,
        kept.folds,
        lambda: level_one_by_fold(kept.fits, family, base, kept.folds, X, y, CROSSFIT_SEED, columns=columns),
    )
    say(f"{family} for the lambda = 1 methods: {recalibration.decision.reason}")
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
            "prediction_calibrated": stars_to_label(recalibration.oof),
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
            "prediction_calibrated": stars_to_label(recalibration.unlabeled),
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
    importance = _importance(fit, X, y, data.feature_names)
    terms = [] if text is None else top_terms(data.text, text.labeled, y)
    return CrossFitTables(
        predictions=pl.concat([rated_rows, unrated_rows], how="vertical_relaxed"),
        fold_training=fold_training,
        importance=importance,
        text_fold_training=_text_fold_training(fit, rated_ids),
        text_terms=pl.DataFrame(
            {
                "term": [t.term for t in terms],
                "block": [t.block for t in terms],
                "coefficient": pl.Series([t.coefficient for t in terms], dtype=pl.Float64),
                "direction": [t.direction for t in terms],
                "rank": pl.Series([t.rank for t in terms], dtype=pl.Int64),
            },
            schema={
                "term": pl.String,
                "block": pl.String,
                "coefficient": pl.Float64,
                "direction": pl.String,
                "rank": pl.Int64,
            },
        ),
        oof_pearson=pearson(y, fit.oof)[0],
        note=fit.note,
        fit=fit,
        recalibration=recalibration,
        recalibration_rows=recalibration_rows(family, recalibration),
    )


def seed_fits(
    X: np.ndarray,
    y: np.ndarray,
    family: str,
    base: Sequence[str],
    folds: int,
    text: TextFeature | None,
    users: UserRatings | None = None,
    columns: dict[str, np.ndarray] | None = None,
) -> SeedFits:
    """The fits of seed ``CROSSFIT_SEED`` that cross-validation keeps (``cv.SeedFits``), made here when it kept
    none: ``family``'s (the stack: every family of ``base``, with their level-one predictions) fold loop, exactly
    ``crossfit.crossfit_predict``'s (``stack.stack_crossfit_predict``'s) fits."""
    members = list(base) if family == STACK else list(BASELINE_MEMBERS) if family == BASELINE else [family]
    if family == STACK and len(members) < 2:
        raise ValueError(f"the stack blends at least 2 families; got {', '.join(members) or 'none'}")
    labeled_text = (
        None if text is None else TextFeature(text.labeled, text.unlabeled[:0], word_columns=text.word_columns)
    )
    labeled_users = None if users is None else replace(users, unlabeled=users.unlabeled[:0])
    run = cv.cross_validate_families(
        X,
        y,
        members,
        folds,
        (CROSSFIT_SEED,),
        text=labeled_text,
        level_one=family == STACK,  # the blend's; a single family's are made only if its recalibration needs them
        keep_seed=CROSSFIT_SEED,
        workers=1,
        users=labeled_users,
        columns=columns,
    )
    return run.kept()


def recalibration_rows(family: str, recalibration: Recalibration) -> pl.DataFrame:
    """The row of ``modeling.recalibration``: the decision about ``family``'s predictions (``recalibration.py``)."""
    d = recalibration.decision
    return pl.DataFrame(
        {
            "model": [family],
            "recalibrated": [d.recalibrate],
            "reason": [d.reason],
            "n_labeled": pl.Series([d.n_labeled], dtype=pl.Int32),
            "mse_prediction": [d.mse_prediction],
            "mse_calibrated": [recalibration.mse_calibrated],
            "mse_constant": [d.mse_constant],
            "slope": [d.slope],
            "slope_se": [d.slope_se],
        }
    )


def _importance(fit: CrossFit, X: np.ndarray, y: np.ndarray, feature_names: tuple[str, ...]) -> pl.DataFrame:
    """Permutation importance of the fold models (the stack's: each fold's blend of its families, ``FoldBlend``);
    with the text, each held-out row carries its text score as the last column, as when it was predicted. The
    family "text" has no feature columns: no rows."""
    schema = {
        "model": pl.String,
        "feature": pl.String,
        "importance_mean": pl.Float64,
        "importance_sd": pl.Float64,
        "rank": pl.Int64,
    }
    if fit.family == TEXT_FAMILY:
        return pl.DataFrame(schema=schema)
    names = list(feature_names)
    if fit.user_features is not None:  # before the text score, as the fold models read them
        X, names = np.column_stack([X, fit.user_features]), [*names, *USER_COLUMNS]
    if fit.text_score is not None:
        X, names = np.column_stack([X, fit.text_score]), [*names, TEXT_SCORE]
    ranked = permutation_importance_oof(fit, X, y, names)
    return pl.DataFrame(
        {
            "model": fit.family,
            "feature": [i.feature for i in ranked],
            "importance_mean": [i.mean for i in ranked],
            "importance_sd": [i.sd for i in ranked],
            "rank": [i.rank for i in ranked],
        },
        schema=schema,
    )


def _text_fold_training(fit: CrossFit, rated_ids: np.ndarray) -> pl.DataFrame:
    """The rows of ``modeling.text_fold_training``: per outer fold f and inner fold g, the rated sessions the inner
    ridge g was trained on (held_out false) and those it scored (held_out true)."""
    parts = []
    for f, t in enumerate(fit.text_folds):
        for g, trained in enumerate(t.inner_train):
            scored = t.train_rows[t.inner_fold == g]
            rows = np.concatenate([scored, trained])
            parts.append(
                pl.DataFrame(
                    {
                        "model": fit.family,
                        "fold": f,
                        "inner_fold": g,
                        "session_id": pl.Series(rated_ids[rows], dtype=pl.String),
                        "held_out": np.arange(rows.size) < scored.size,
                    }
                )
            )
    schema = {
        "model": pl.String,
        "fold": pl.Int32,
        "inner_fold": pl.Int32,
        "session_id": pl.String,
        "held_out": pl.Boolean,
    }
    return pl.concat([p.cast(schema) for p in parts]) if parts else pl.DataFrame(schema=schema)


@dataclass(frozen=True)
class OutOfFoldAudit:
    """What the check ``predictions_are_out_of_fold`` reports; valid cross-fitting has zero of both."""

    in_sample_predictions: int  # rated sessions predicted by a fold model trained on them, or by no fold at all
    unrated_with_a_fold: int  # unrated sessions should get the mean of every fold model, not one fold's
    in_sample_text_scores: int = 0  # rated sessions whose inner text score came from a ridge trained on them

    @property
    def passed(self) -> bool:
        return self.in_sample_predictions == 0 and self.unrated_with_a_fold == 0 and self.in_sample_text_scores == 0


def audit_out_of_fold(
    predictions: pl.DataFrame, fold_training: pl.DataFrame, text_fold_training: pl.DataFrame | None = None
) -> OutOfFoldAudit:
    """Count the predictions that break cross-fitting, from the rows of ``modeling.predictions`` and
    ``modeling.fold_training``.

    For each model, the rated sessions with a fold become rows 0..n-1 and each fold's training sessions become
    indices into them, so ``oof_violations`` counts #{i : i in train[fold(i)]}; rated sessions without a fold
    count too (their prediction came from no held-out fold). With ``text_fold_training`` (rows of
    ``modeling.text_fold_training``), a session scored by inner ridge (model, fold, inner_fold) that is also among
    that ridge's training sessions counts in ``in_sample_text_scores``.
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
    in_sample_text = 0
    if text_fold_training is not None and text_fold_training.height:
        keys = ["model", "fold", "inner_fold", "session_id"]
        scored = text_fold_training.filter(pl.col("held_out")).select(keys).unique()
        trained = text_fold_training.filter(~pl.col("held_out")).select(keys).unique()
        in_sample_text = scored.join(trained, on=keys).height
    return OutOfFoldAudit(in_sample, unrated_with_a_fold, in_sample_text)


def audit_stored_predictions(wh: Warehouse) -> OutOfFoldAudit:
    """``audit_out_of_fold`` of the predictions and fold training sets (outer and text inner) in the warehouse."""
    return audit_out_of_fold(
        wh.frame(f"SELECT labeled, fold, model, session_id FROM {tables.PREDICTIONS.qualified}"),
        wh.frame(f"SELECT model, fold, session_id FROM {tables.FOLD_TRAINING.qualified}"),
        wh.frame(f"SELECT model, fold, inner_fold, session_id, held_out FROM {tables.TEXT_FOLD_TRAINING.qualified}"),
    )
