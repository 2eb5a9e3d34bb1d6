"""The modeling data: features.session_features joined to the labels, as arrays, and the users' text."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..warehouse import Warehouse
from .text import TextFeature, TextMatrix, load_session_texts, vectorize

NOT_FEATURES = ("session_id", "annotation_status")


@dataclass(frozen=True)
class ModelingData:
    feature_names: tuple[str, ...]
    session_ids: np.ndarray  # every staged session, sorted
    X: np.ndarray  # float, NaN where a feature is unknown (the model pipelines impute)
    y: np.ndarray  # label in stars (mean of segment ratings), NaN for unrated sessions
    text: TextMatrix | None = None  # TF-IDF of the users' redacted messages, a row per session (text.py)

    @property
    def labeled(self) -> np.ndarray:
        return ~np.isnan(self.y)

    def text_feature(self) -> TextFeature | None:
        """The text split into labeled and unlabeled rows (the row order of ``X[labeled]`` and ``X[~labeled]``),
        for ``crossfit.cross_validate`` / ``crossfit_predict``; None when no session has user text. Make it once
        and pass the same object to every family, so each seed's text scores are computed once."""
        if self.text is None:
            return None
        return TextFeature(self.text.Z[np.flatnonzero(self.labeled)], self.text.Z[np.flatnonzero(~self.labeled)])


def load_modeling_data(wh: Warehouse, with_text: bool = True) -> ModelingData:
    """Every staged session's features and label; with ``with_text``, the TF-IDF of its users' messages too."""
    frame = wh.frame(
        "SELECT f.*, l.label_stars FROM features.session_features f"
        " LEFT JOIN staging.session_labels l USING (session_id) ORDER BY f.session_id"
    )
    names = [c for c in frame.columns if c not in (*NOT_FEATURES, "label_stars")]
    X = (
        frame.select(names).cast({c: float for c in names}).to_numpy().astype(float)
        if names
        else np.empty((frame.height, 0))
    )
    y = frame["label_stars"].cast(float).fill_null(np.nan).to_numpy()
    session_ids = frame["session_id"].to_numpy()
    text = vectorize(load_session_texts(wh, [str(s) for s in session_ids])) if with_text else None
    return ModelingData(tuple(names), session_ids, X, y, text)
