"""The modeling data: features.session_features joined to the labels, as arrays, and the users' text."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..warehouse import Warehouse
from .text import TextFeature, TextMatrix, load_user_messages, vectorize

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
        and pass the same object to every family, so each seed's text scores are computed once. Text vectorized for
        the rated sessions only (``load_modeling_data(text_of="rated")``) gives no unlabeled rows: enough to
        cross-validate, not to predict the unrated sessions."""
        if self.text is None:
            return None
        position = {int(r): i for i, r in enumerate(self.text.rows)}
        labeled = [position[int(r)] for r in np.flatnonzero(self.labeled)]
        unlabeled = [position[int(r)] for r in np.flatnonzero(~self.labeled) if int(r) in position]
        return TextFeature(self.text.Z[labeled], self.text.Z[unlabeled])


def load_modeling_data(wh: Warehouse, text_of: str = "all") -> ModelingData:
    """Every staged session's features and label, and the TF-IDF of its users' messages (``text.py``) for
    ``text_of`` = "all" sessions, the "rated" ones (what cross-validation needs: the same columns, a fraction of the
    cost at paper scale) or "none"."""
    if text_of not in ("all", "rated", "none"):
        raise ValueError(f"text_of must be 'all', 'rated' or 'none'; got {text_of!r}")
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
    text = None
    if text_of != "none":
        ids = [str(s) for s in session_ids]
        text = vectorize(ids, load_user_messages(wh), ~np.isnan(y), rated_only=text_of == "rated")
    return ModelingData(tuple(names), session_ids, X, y, text)
