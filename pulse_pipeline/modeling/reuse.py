"""The modeling step, fitting again only when it must: a small drop keeps the fold models of the last fit.

Why: at three times the paper's scale a 100-session drop spent 183 s in modeling, every cross-validation and
cross-fit redone over ~5 400 ratings, for predictions of 100 new sessions. Cross-fitting stays valid when the
fold models are kept across drops, as long as every rated session's prediction comes from a model that never
trained on its rating:

- a session rated since the fit was seen by no fold model (as a label); it is given a fold by a hash of its id
  (``hash_fold``: fixed, blind to its features and rating) and that fold's model's prediction;
- a session rated at the fit keeps its fold, whose model was fitted without it, even if its features changed;
- an unrated session that is new or changed gets the mean of the fold models, as every unrated session does;
- ``prediction_calibrated`` comes from the same fold's (or every fold's) prediction through the fit's kept
  recalibration maps (``recalibration.apply_maps``), each fitted on its fold's training rows alone;
- every other row of ``modeling.predictions`` stays as it is, and so do the other modeling tables: they describe
  the kept fit (``modeling.fold_training`` lists what each fold model trained on, so the blocking check
  ``predictions_are_out_of_fold`` audits the new rows like the old). Only the LLM judge's rows of
  ``modeling.cv_metrics`` are measured again: they fit nothing.

The price is efficiency, not validity: the newest ratings train no model until the next fit. So the step fits
everything again (``refit_reason``) when there is no kept fit or it cannot be read, when the code, the settings,
the feature columns or the library versions changed (``fit_key``), when the warehouse's predictions are not the
kept fit's (a run stopped after writing the fit, before its tables committed), when the kept fit was made on an
earlier day (UTC: the first run of each day refits, the nightly schedule included), when a rating the fit used is
gone, or when the ratings added or changed since the fit (a changed rating: its value, or its session's record or
features) exceed ``refit_share`` of the ratings it was fitted on (``PULSE_MODEL_REFIT_SHARE``, default 0.1; 0
refits at every run, the behaviour before this module).

Per-session bookkeeping as in ``incremental.py``: ``staging.computed_versions`` records, under the key
``modeling.predictions``, each session's version (``VERSIONS_SQL``: its staged record and drop, a hash of its
``features.session_features`` row, its rating) followed by the fit's id. A reused run recomputes the rows of the
sessions whose version changed; a fit records every session under its new id. The fit itself is kept with joblib
in ``PULSE_HOME/.work/models/kept-fit.joblib`` (``KeptFit``: the fold models, the text ridges, the rated
sessions it was fitted on with their folds, ratings and versions; no word: the text's vocabulary is users' words,
so it stays in the warehouse, ``modeling.text_vocabulary``), written before the step's tables commit; a fit
whose tables did not commit has an id the warehouse does not record, so it is never reused.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import joblib
import lightgbm
import numpy as np
import polars as pl
import sklearn

from .. import incremental, staging, stars, tables
from ..connections import release_duckdb_memory
from ..features import user_text
from ..features.user_text import load_user_messages
from ..incremental import code_digest, refreshing
from ..memory import release_freed_memory
from ..warehouse import Warehouse
from . import comparison as comparison_module
from . import crossfit, cv, data, importance, insample, ordinal, predictions, recalibration, stack, text, user_ratings
from . import families as families_module
from .comparison import ModelComparison, compare_models, judge_metric_rows, load_judge_agreement
from .crossfit import TEXT_FAMILY, CrossFit
from .data import load_modeling_data, unrated_chunks
from .predictions import CROSSFIT_SEED, CrossFitTables, crossfit_tables
from .text import transform_messages, vectorizers_from, vocabulary_table
from .threads import native_threads
from .workers import release_workers

KEY = tables.PREDICTIONS.qualified
"""The bookkeeping key in ``staging.computed_versions`` (the table's name: recreating the table forgets it)."""

KEPT_FILE = "kept-fit.joblib"

INPUTS_SQL = f"""
SELECT f.session_id, coalesce(v.version, '') || '#' || hash(f) AS input, l.label_stars
FROM {tables.SESSION_FEATURES.qualified} f
LEFT JOIN ({staging.SESSION_VERSIONS_SQL}) v USING (session_id)
LEFT JOIN {tables.SESSION_LABELS.qualified} l USING (session_id)
"""
"""Per session what its prediction is computed from (``input``: the staged record and drop, which give its text,
and a hash of its whole ``features.session_features`` row) and its rating (NULL: unrated)."""

VERSIONS_SQL = (
    f"SELECT session_id, input || '|' || coalesce(CAST(label_stars AS VARCHAR), '') AS version FROM ({INPUTS_SQL})"
)


def hash_fold(session_ids: Sequence[str], k: int) -> np.ndarray:
    """The fold of sessions rated after the fit: the first 8 bytes of sha1(id) mod k. Fixed for an id, the same on
    every machine, and blind to the session's features and rating."""
    return np.array([int.from_bytes(hashlib.sha1(s.encode()).digest()[:8], "big") % k for s in session_ids])


@dataclass(frozen=True, eq=False)
class KeptFit:
    """A fit kept for later runs (``eq=False``: it holds models and arrays). Fold k's prediction of a session with
    features x and text z is ``models[k]`` on [x, ridges[k](z)] (without text: on x; the stack's model is its
    ``stack.FoldBlend``; the family "text" has no model, its prediction is the ridge's score). The text's
    vectorizers are not here: their vocabulary is users' words, kept in ``modeling.text_vocabulary``
    (``text.vectorizers_from``)."""

    fit_id: str
    fitted_at: datetime
    key: str  # fit_key: what else the fit depends on
    family: str
    feature_names: tuple[str, ...]
    models: tuple
    ridges: tuple
    rated: pl.DataFrame  # session_id, input, label_stars, fold: the ratings the fit used
    user_tables: tuple | None = None  # fold k's user columns' source (``user_ratings.UserTable`` of T_k), or None
    user_ids: tuple[str, ...] = ()  # the users the tables' codes stand for
    maps: tuple = ()  # fold k's recalibration map (``recalibration.LinearMap``) for prediction_calibrated

    @property
    def k(self) -> int:
        return len(self.models)

    def predict_folds(self, X: np.ndarray, Z, users: Sequence[str | None] = ()) -> np.ndarray:
        """Every fold's prediction (stars) of the rows ``X`` (features in ``feature_names`` order) with text rows
        ``Z`` (None without text) and, when the fit read the user columns, the rows' ``users``: an array of shape
        (k, rows). Fold k's user columns come from its T_k's ratings (``user_tables[k]``)."""
        out = np.empty((self.k, X.shape[0]))
        code = {u: i for i, u in enumerate(self.user_ids)}
        codes = np.array([code.get(u, user_ratings.NO_USER) for u in users], dtype=np.int64)
        with native_threads(None):
            for k, (model, ridge) in enumerate(zip(self.models, self.ridges, strict=True)):
                score = None if ridge is None else ridge.predict(Z)
                if self.family == TEXT_FAMILY:
                    out[k] = score
                    continue
                Xk = (
                    X
                    if self.user_tables is None
                    else user_ratings.with_user_columns(X, self.user_tables[k].features(codes))
                )
                out[k] = model.predict(Xk if score is None else np.column_stack([Xk, score]))
        return out


def fit_key(
    *,
    families: Sequence[str],
    seeds: Sequence[int],
    folds: int,
    choose_by: str,
    seed_rows: int,
    feature_names: Sequence[str],
) -> str:
    """A digest of what a fit depends on besides the data: the modeling code, the redaction rules the text goes
    through, the settings, the feature columns and the versions of the libraries that fit and store it."""
    versions = f"sklearn {sklearn.__version__} lightgbm {lightgbm.__version__} duckdb {duckdb.__version__}"
    settings = (tuple(families), tuple(seeds), folds, choose_by, seed_rows, tuple(feature_names), versions)
    modules = (
        comparison_module,
        crossfit,
        cv,
        data,
        families_module,
        importance,
        ordinal,
        predictions,
        recalibration,
        stack,
        text,
    )
    modules += (user_ratings,)
    return code_digest(
        *modules, stars, incremental, sys.modules[__name__], text=repr(settings) + user_text.code_version()
    )


def load_kept(folder: Path, say: Callable[[str], None]) -> KeptFit | None:
    """The kept fit in ``folder``, or None when there is none or it cannot be read (then the step fits again)."""
    path = folder / KEPT_FILE
    if not path.exists():
        return None
    try:
        kept = joblib.load(path)
    except Exception as error:  # a file from another version of a library, or cut short: fit again
        say(f"the kept fit {path} could not be read ({type(error).__name__}: {error}); fitting again")
        return None
    return kept if isinstance(kept, KeptFit) else None


def save_kept(folder: Path, kept: KeptFit | None) -> None:
    """Write ``kept`` atomically (a temporary file renamed over the old one); None removes the kept fit."""
    path = folder / KEPT_FILE
    if kept is None:
        path.unlink(missing_ok=True)
        return
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    joblib.dump(kept, partial)
    os.replace(partial, path)


@dataclass(frozen=True)
class Arrivals:
    """The ratings now against those the kept fit used."""

    fitted: int  # ratings the fit used
    added: int  # sessions rated now that the fit did not use
    changed: int  # ratings the fit used whose value, or whose session's record or features, changed
    removed: int  # ratings the fit used that are gone (unrated or no longer staged)

    @property
    def since(self) -> int:
        return self.added + self.changed


def arrivals(rated_now: pl.DataFrame, kept: KeptFit) -> Arrivals:
    """Compare the rated sessions now (session_id, input, label_stars) with the kept fit's."""
    both = kept.rated.join(rated_now, on="session_id", how="full", suffix="_now", coalesce=True)
    fitted = pl.col("fold").is_not_null()
    now = pl.col("label_stars_now").is_not_null()
    counts = both.select(
        added=(~fitted & now).sum(),
        changed=(
            fitted
            & now
            & ((pl.col("label_stars") != pl.col("label_stars_now")) | (pl.col("input") != pl.col("input_now")))
        ).sum(),
        removed=(fitted & ~now).sum(),
    ).row(0, named=True)
    return Arrivals(kept.rated.height, **{name: int(n) for name, n in counts.items()})


def refit_reason(
    wh: Warehouse, kept: KeptFit | None, key: str, refit_share: float, now: datetime
) -> tuple[str | None, Arrivals | None]:
    """Why the step must fit again (the module docstring's rules, in order), or None to reuse ``kept``; and the
    ratings since the kept fit when it got that far."""
    if refit_share <= 0:
        return "PULSE_MODEL_REFIT_SHARE is 0: every run fits again", None
    if kept is None:
        return "no kept fit", None
    if kept.key != key:
        return "the modeling code, settings, feature columns or library versions changed since the kept fit", None
    if kept.fitted_at.date() < now.date():
        return f"the kept fit is from {kept.fitted_at:%Y-%m-%d} (UTC): the first run of a day fits again", None
    recorded, other = incremental.recorded_under(wh, KEY, kept.fit_id)
    if recorded == 0 or other:
        return "the warehouse's predictions are not the kept fit's", None
    rated_now = wh.frame(f"SELECT session_id, input, label_stars FROM ({INPUTS_SQL}) WHERE label_stars IS NOT NULL")
    since = arrivals(rated_now, kept)
    if since.removed:
        return f"{since.removed} of the {since.fitted} ratings the kept fit used are gone", since
    if since.since > refit_share * since.fitted:
        return (
            f"{since.since} ratings added or changed since the kept fit of {since.fitted}"
            f" (more than {refit_share:g} of them)",
            since,
        )
    return None, since


@dataclass(frozen=True, eq=False)
class Reused:
    """What a run that kept the fit did."""

    kept: KeptFit
    since: Arrivals
    touched: int  # sessions whose prediction row was recomputed or removed
    rows: int  # rows of modeling.predictions now
    rated: int  # rated sessions now
    oof_pearson: float  # over every rated session's out-of-fold prediction now


@dataclass(frozen=True, eq=False)
class ModelsRun:
    """The modeling step's outcome: a fit (``comparison``, and ``result`` when a family was chosen) or a reuse."""

    reason: str  # why it fitted, or that it reused
    comparison: ModelComparison | None = None
    result: CrossFitTables | None = None
    reused: Reused | None = None


def refresh_models(
    wh: Warehouse,
    folder: Path,
    *,
    families: Sequence[str],
    seeds: Sequence[int],
    folds: int,
    choose_by: str,
    seed_rows: int,
    refit_share: float,
    say: Callable[[str], None] = lambda _: None,
    now: datetime | None = None,
) -> ModelsRun:
    """The modeling step: fit (``modeling.cv_metrics`` and the cross-fit tables rewritten whole, the fit kept in
    ``folder``) or reuse the kept fit (only the new or changed sessions' predictions), by ``refit_reason``."""
    now = now or datetime.now(UTC)
    key = fit_key(
        families=families,
        seeds=seeds,
        folds=folds,
        choose_by=choose_by,
        seed_rows=seed_rows,
        feature_names=feature_names(wh),
    )
    kept = load_kept(folder, say)
    reason, since = refit_reason(wh, kept, key, refit_share, now)
    if reason is None:
        say(f"keeping the fit of {kept.fitted_at:%Y-%m-%d %H:%M} UTC: {since.since} ratings since, of {since.fitted}")
        return ModelsRun("kept the last fit", reused=_reuse(wh, kept, since))
    say(f"fitting the models: {reason}")
    return _fit(wh, folder, key, now, reason, families, seeds, folds, choose_by, seed_rows, say)


def feature_names(wh: Warehouse) -> tuple[str, ...]:
    """The feature columns of ``features.session_features``, in order (what ``data.load_modeling_data`` reads)."""
    columns = wh.con.execute(f"SELECT * FROM {tables.SESSION_FEATURES.qualified} LIMIT 0").description
    return tuple(c[0] for c in columns if c[0] not in data.NOT_FEATURES)


def _fit_id(wh: Warehouse, key: str) -> str:
    """The id of a fit made now: a digest of ``key`` and every session's version, so two warehouses with the same
    history record the same id (their tables are compared cell for cell by tests)."""
    n, mixed = wh.con.execute(f"SELECT count(*), bit_xor(hash(session_id, version)) FROM ({VERSIONS_SQL})").fetchone()
    return hashlib.sha1(f"{key}/{n}/{mixed}".encode()).hexdigest()[:16]


def _fit(
    wh: Warehouse,
    folder: Path,
    key: str,
    now: datetime,
    reason: str,
    families: Sequence[str],
    seeds: Sequence[int],
    folds: int,
    choose_by: str,
    seed_rows: int,
    say: Callable[[str], None],
) -> ModelsRun:
    release_duckdb_memory(wh.con)  # what the run's earlier steps' queries left in DuckDB's allocator
    release_freed_memory()  # ... and in this process's heap
    modeling_data = load_modeling_data(wh, text_of="rated")  # the unrated sessions' text: a chunk at a time
    release_duckdb_memory(wh.con)
    release_freed_memory()  # the feature frame and its casts
    comparison = compare_models(
        modeling_data,
        load_judge_agreement(wh),
        families=families,
        seeds=seeds,
        folds=folds,
        choose_by=choose_by,
        say=say,
        keep_seed=CROSSFIT_SEED,
        seed_rows=seed_rows,
    )
    wh.replace(tables.CV_METRICS, comparison.rows, nan_as_null=True)
    release_workers()  # the fits are done: idle workers would hold their leftovers through the cross-fit
    release_freed_memory()
    result = None
    if comparison.chosen is not None:
        result = crossfit_tables(
            modeling_data,
            comparison.chosen.family,
            folds,
            say,
            families=families,
            kept=comparison.kept,
            unrated=unrated_chunks(wh, modeling_data),
        )
        release_workers()  # the importance's: joblib would keep them idle (~1 GB at 10x) into the next steps
    chosen = None if comparison.chosen is None else comparison.chosen.family
    wh.replace(tables.INSAMPLE_PREDICTIONS, insample.insample_table(wh, chosen, modeling_data))
    wh.replace(tables.PREDICTIONS, [] if result is None else result.predictions)
    wh.replace(tables.RECALIBRATION, [] if result is None else result.recalibration_rows, nan_as_null=True)
    wh.replace(tables.FOLD_TRAINING, [] if result is None else result.fold_training)
    wh.replace(tables.FEATURE_IMPORTANCE, [] if result is None else result.importance)
    wh.replace(tables.TEXT_FOLD_TRAINING, [] if result is None else result.text_fold_training)
    wh.replace(tables.TEXT_TERMS, [] if result is None else result.text_terms)
    uses_text = result is not None and bool(result.fit.text_folds)
    wh.replace(tables.TEXT_VOCABULARY, vocabulary_table(modeling_data.text.vectorizers if uses_text else None))
    kept = None
    if result is not None:
        fit_id = _fit_id(wh, key)
        incremental.record_all(wh, KEY, VERSIONS_SQL, depends_on=fit_id)  # every session, under the new fit's id
        rated = result.predictions.filter(pl.col("labeled")).select("session_id", "label_stars", "fold")
        inputs = wh.frame(f"SELECT session_id, input FROM ({INPUTS_SQL}) WHERE label_stars IS NOT NULL")
        kept = keep_fit(fit_id, now, key, result.fit, modeling_data, rated.join(inputs, on="session_id"))
        kept = replace(kept, maps=result.recalibration.maps)
    else:
        incremental.forget(wh, KEY)
    save_kept(folder, kept)
    return ModelsRun(f"fitted: {reason}", comparison=comparison, result=result)


def keep_fit(
    fit_id: str, now: datetime, key: str, fit: CrossFit, modeling_data: data.ModelingData, rated: pl.DataFrame
) -> KeptFit:
    """What a later run needs to predict any session as this fit would (see ``KeptFit``)."""
    k = fit.k
    models = (None,) * k if fit.family == TEXT_FAMILY else tuple(fit.models)
    ridges = tuple(t.outer_ridge for t in fit.text_folds) if fit.text_folds else (None,) * k
    users = modeling_data.user_feature() if fit.user_folds else None
    return KeptFit(
        fit_id=fit_id,
        fitted_at=now,
        key=key,
        family=fit.family,
        feature_names=modeling_data.feature_names,
        models=models,
        ridges=ridges,
        rated=rated.select("session_id", "input", "label_stars", "fold"),
        user_tables=None if users is None else tuple(f.outer for f in fit.user_folds),
        user_ids=() if users is None else users.user_ids,
    )


def _reuse(wh: Warehouse, kept: KeptFit, since: Arrivals) -> Reused:
    """Recompute the prediction rows of the sessions whose version changed since they were computed, with the kept
    fold models; refresh the judge's rows of Table 2."""
    with refreshing(wh, KEY, VERSIONS_SQL, depends_on=kept.fit_id) as refresh:
        changed = wh.frame(
            f"SELECT c.session_id, i.label_stars FROM {incremental.CHANGED} c JOIN ({INPUTS_SQL}) i USING (session_id)"
            " WHERE c.version IS NOT NULL ORDER BY c.session_id"
        )
        refresh.delete(wh, tables.PREDICTIONS)
        wh.append(tables.PREDICTIONS, _predict(wh, kept, changed))
        touched = refresh.touched
    wh.replace(tables.INSAMPLE_PREDICTIONS, insample.insample_table(wh, kept.family))  # from today's ratings
    wh.con.execute(f"DELETE FROM {tables.CV_METRICS.qualified} WHERE source = 'llm_judge'")
    wh.append(tables.CV_METRICS, judge_metric_rows(load_judge_agreement(wh)), nan_as_null=True)
    rows, rated, r = wh.con.execute(
        "SELECT count(*), count(*) FILTER (WHERE labeled),"
        f" corr(label_stars, prediction_stars) FILTER (WHERE labeled) FROM {tables.PREDICTIONS.qualified}"
    ).fetchone()
    return Reused(kept, since, touched, rows, rated, float("nan") if r is None else float(r))


def _predict(wh: Warehouse, kept: KeptFit, changed: pl.DataFrame) -> pl.DataFrame:
    """The ``modeling.predictions`` rows of the sessions ``changed`` (session_id, label_stars) from the kept fit:
    a rated session the fit used keeps its fold, another rated session gets ``hash_fold``'s, and that fold's
    prediction; an unrated session the mean over the folds."""
    ids = changed["session_id"].to_list()
    X = _features(wh, ids, kept.feature_names)
    Z = None
    if ids and kept.ridges[0] is not None:
        vectorizers = vectorizers_from(wh.frame(f"SELECT * FROM {tables.TEXT_VOCABULARY.qualified}"))
        if vectorizers is None:
            raise ValueError(f"the kept fit reads the sessions' text, but {tables.TEXT_VOCABULARY.qualified} is empty")
        Z = transform_messages(vectorizers, ids, load_user_messages(wh, ids))
    users = _user_ids(wh, ids) if kept.user_tables is not None else ()
    P = kept.predict_folds(X, Z, users) if ids else np.empty((kept.k, 0))
    y = changed["label_stars"].cast(pl.Float64).to_numpy()
    labeled = ~np.isnan(y)
    fitted_fold = dict(zip(kept.rated["session_id"].to_list(), kept.rated["fold"].to_list(), strict=True))
    by_hash = hash_fold(ids, kept.k)
    fold = np.array([fitted_fold.get(s, h) for s, h in zip(ids, by_hash, strict=True)], dtype=np.int64)
    held_out = P[fold, np.arange(len(ids))] if ids else np.empty(0)
    prediction = np.where(labeled, held_out, P.mean(axis=0) if ids else np.empty(0))
    maps = kept.maps or (recalibration.IDENTITY,) * kept.k  # the fit's maps: prediction_calibrated stays cross-fit
    calibrated = recalibration.apply_maps(maps, P, np.where(labeled, fold, -1))
    rows = pl.DataFrame(
        {
            "session_id": pl.Series(ids, dtype=pl.String),
            "labeled": labeled,
            "label_stars": y,
            "label": stars.stars_to_label(y),
            "prediction_stars": prediction,
            "prediction": stars.stars_to_label(prediction),
            "fold": fold,
            "prediction_calibrated": stars.stars_to_label(calibrated),
        }
    )
    rated = pl.col("labeled")
    return rows.select(
        "session_id",
        "labeled",
        pl.when(rated).then("label_stars").alias("label_stars"),
        pl.when(rated).then("label").alias("label"),
        "prediction_stars",
        "prediction",
        pl.when(rated).then(pl.col("fold").cast(pl.Int32)).alias("fold"),
        pl.lit(kept.family).alias("model"),
        pl.when(rated).then(pl.lit("out_of_fold")).otherwise(pl.lit("fold_mean")).alias("method"),
        "prediction_calibrated",
    )


def _user_ids(wh: Warehouse, ids: list[str]) -> list[str | None]:
    """The user of each session ``ids`` (in that order) as ``data.load_modeling_data`` reads it."""
    frame = wh.frame(f"SELECT * FROM ({data.USER_IDS_SQL}) WHERE session_id IN (SELECT unnest($1))", [ids])
    user = dict(zip(frame["session_id"].to_list(), frame["user_id"].to_list(), strict=True))
    return [user.get(s) for s in ids]


def _features(wh: Warehouse, ids: list[str], names: tuple[str, ...]) -> np.ndarray:
    """The feature rows of sessions ``ids`` (in that order) as ``data.load_modeling_data`` reads them: floats,
    NaN where unknown, columns ``names``."""
    if not ids:
        return np.empty((0, len(names)))
    frame = wh.frame(
        f"SELECT * FROM {tables.SESSION_FEATURES.qualified}"
        " WHERE session_id IN (SELECT unnest($1)) ORDER BY session_id",
        [ids],
    )
    if frame["session_id"].to_list() != ids:
        raise ValueError(f"the sessions to predict must be {tables.SESSION_FEATURES.qualified} rows, in id order")
    return frame.select(names).cast(dict.fromkeys(names, pl.Float64)).to_numpy().astype(float)
