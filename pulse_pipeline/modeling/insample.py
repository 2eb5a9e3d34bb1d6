"""The in-sample comparison model: one model of the chosen family fit on every label, and its predictions as the
table ``modeling.insample_predictions``, which the estimates stage reads for its ``ppi_insample`` rows.

Why it exists: the paper fit its model on all the labels and used its predictions for PPI. Those predictions saw
the ratings they are rectified with, so the residuals y - f are too small and the interval too narrow (research
notes, section 5: coverage 0 of 60). The estimates stage shows what that does, never as a valid estimate
(``crossfit.insample_predict``). Why here: the modeling stage already holds the modeling data (features, labels,
the rated sessions' text and its vocabulary) and the chosen family, so the estimates stage reads the predictions
instead of vectorizing every session's text and fitting a model again.

The model sees exactly the labels the cross-fit models saw (``data.load_modeling_data``); the unrated sessions are
predicted a chunk at a time (``data.unrated_chunks``), so every session's text is never held at once (2.6 GB at ten
times the paper's scale), with the numbers the whole matrix gives. A blend (the stack) has no single in-sample
model: with the stack chosen, or no model chosen, the table is empty and the estimates stage has no
``ppi_insample`` rows. Every run of the modeling step rewrites it whole from the current labels, a kept fit's runs
too (``reuse.py``), as the estimates stage computed it at every run before.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl
from sklearn.linear_model import Ridge

from .. import tables
from ..stars import stars_to_label
from ..warehouse import Warehouse
from .crossfit import insample_predict
from .cv import TEXT_FAMILY, CrossFit
from .data import ModelingData, load_modeling_data, unrated_chunks
from .families import family_columns
from .stack import BASELINE, STACK
from .text import TextFeature, fit_text_regression
from .threads import native_threads

SCHEMA = {
    "session_id": pl.String,
    "labeled": pl.Boolean,
    "prediction_stars": pl.Float64,
    "prediction": pl.Float64,
    "model": pl.String,
}
"""The columns of ``modeling.insample_predictions``, as a polars schema."""


def insample_predictions(
    data: ModelingData, family: str, unrated: Iterable[tuple[np.ndarray, TextFeature | None]] | None = None
) -> dict[str, float]:
    """session id -> normalized prediction of one ``family`` model fit on every label (the paper's way).

    ``data`` is what the model stage fits on (``data.load_modeling_data``). ``unrated``: the unrated sessions'
    feature rows and text a chunk at a time, in the order of ``data.X[~data.labeled]`` (``data.unrated_chunks`` of
    ``data`` loaded with ``text_of="rated"``); None: ``data``'s own unrated rows and text. The model is fit once on
    the rated sessions and predicts each chunk as ``insample_predict`` predicts its unlabeled rows
    (``_predict_unrated``), so the chunks give the numbers the whole matrix gives."""
    frame = insample_frame(data, family, unrated)
    return dict(zip(frame["session_id"], frame["prediction"], strict=True))


def insample_frame(
    data: ModelingData, family: str, unrated: Iterable[tuple[np.ndarray, TextFeature | None]] | None = None
) -> pl.DataFrame:
    """The rows of ``modeling.insample_predictions`` (``insample_predictions``' numbers): the rated sessions first,
    then the unrated ones, each in the order of ``data``; predictions in stars and on the label scale (0-1)."""
    lab = data.labeled
    y = data.y[lab]
    text = data.text_feature()
    fit = insample_predict(data.X[lab], y, None, family, text=text, columns=family_columns(data.feature_names))
    with native_threads(None):  # the thread cap insample_predict fits under, so the ridge is the same numbers
        # insample_predict keeps no text ridge: the same deterministic fit is made again (rated rows only)
        ridge = None if text is None else fit_text_regression(text.labeled, y, text.alpha)
        chunks = [(data.X[~lab], text)] if unrated is None else unrated
        unrated_stars = [_predict_unrated(fit, ridge, Xu, t) for Xu, t in chunks]
    stars = np.concatenate([fit.oof, *unrated_stars])
    return pl.DataFrame(
        {
            "session_id": pl.Series(np.concatenate([data.session_ids[lab], data.session_ids[~lab]]), dtype=pl.String),
            "labeled": np.concatenate([np.ones(int(lab.sum()), bool), np.zeros(int((~lab).sum()), bool)]),
            "prediction_stars": stars,
            "prediction": stars_to_label(stars),
            "model": family,
        },
        schema=SCHEMA,
    )


def _predict_unrated(fit: CrossFit, ridge: Ridge | None, Xu: np.ndarray, text: TextFeature | None) -> np.ndarray:
    """The in-sample ``fit``'s predictions (stars) of the unrated rows ``Xu`` with text ``text.unlabeled``: the
    family "text" predicts the ridge's score, any other family's model reads that score as its last column
    (``cv.CrossFit``: how ``insample_predict`` predicts its unlabeled rows)."""
    if not Xu.shape[0]:
        return np.empty(0)
    score = None if ridge is None or text is None else ridge.predict(text.unlabeled)
    if fit.family == TEXT_FAMILY:
        return score
    return fit.models[0].predict(Xu if score is None else np.column_stack([Xu, score]))


def insample_table(wh: Warehouse, family: str | None, data: ModelingData | None = None) -> pl.DataFrame:
    """The rows of ``modeling.insample_predictions`` for the chosen ``family``: empty when none was chosen or it is
    a blend (the stack, the baseline). ``data``: the modeling data loaded with ``text_of="rated"`` (None: loaded
    here); the unrated sessions' text is read a chunk at a time."""
    if family is None or family in (STACK, BASELINE):
        return pl.DataFrame(schema=SCHEMA)
    data = load_modeling_data(wh, text_of="rated") if data is None else data
    return insample_frame(data, family, unrated_chunks(wh, data))


def load_insample_predictions(wh: Warehouse) -> dict[str, float] | None:
    """session id -> the in-sample model's normalized prediction, as stored; None when the table is empty (no
    model chosen, or the stack): then there are no ``ppi_insample`` rows."""
    rows = wh.con.execute(f"SELECT session_id, prediction FROM {tables.INSAMPLE_PREDICTIONS.qualified}").fetchall()
    return dict(rows) if rows else None
