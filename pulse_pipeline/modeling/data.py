"""The modeling data: features.session_features joined to the labels, as arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..warehouse import Warehouse

NOT_FEATURES = ("session_id", "annotation_status")


@dataclass(frozen=True)
class ModelingData:
    feature_names: tuple[str, ...]
    session_ids: np.ndarray  # every staged session, sorted
    X: np.ndarray  # float, NaN where a feature is unknown (the model pipelines impute)
    y: np.ndarray  # label in stars (mean of segment ratings), NaN for unrated sessions

    @property
    def labeled(self) -> np.ndarray:
        return ~np.isnan(self.y)


def load_modeling_data(wh: Warehouse) -> ModelingData:
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
    return ModelingData(tuple(names), frame["session_id"].to_numpy(), X, y)
