"""The modeling data: features.session_features joined to the labels, as arrays, and the users' text."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .. import tables
from ..connections import release_duckdb_memory
from ..features.user_text import load_user_messages
from ..warehouse import Warehouse
from .text import TextFeature, TextMatrix, transform_messages, vectorize, vocabulary_rows, word_columns
from .user_ratings import UserRatings, user_ratings

NOT_FEATURES = ("session_id", "annotation_status")

UNRATED_CHUNK = 10_000
"""Unrated sessions whose text is vectorized and predicted at a time (``unrated_chunks``): their TF-IDF rows take
~7 KB a session (~900 terms), so every session's at once would be 2.6 GB at 360 000 sessions; a chunk ~75 MB. A
chunk's text, its TF-IDF parts from the workers and their stacked copy held ~0.5 GB of the step at 20 000
sessions a chunk (ten times the paper's scale), then the step's peak."""


@dataclass(frozen=True)
class ModelingData:
    feature_names: tuple[str, ...]
    session_ids: np.ndarray  # every staged session, sorted
    X: np.ndarray  # float, NaN where a feature is unknown (the model pipelines impute)
    y: np.ndarray  # label in stars (mean of segment ratings), NaN for unrated sessions
    text: TextMatrix | None = None  # TF-IDF of the users' redacted messages, a row per session (text.py)
    user_ids: tuple[str | None, ...] | None = None  # each session's user (None: unknown), for user_ratings.py

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
        return TextFeature(self.text.Z[labeled], self.text.Z[unlabeled], word_columns=word_columns(self.text.terms))

    def user_feature(self) -> UserRatings | None:
        """Who rated what (``user_ratings.user_ratings``: labeled rows in the order of ``X[labeled]``, unlabeled in
        that of ``X[~labeled]``), or None when no user has two rated sessions (or no user is known): then the
        models get no user column. Computed from the ids and which sessions are rated, never from a rating."""
        if self.user_ids is None:
            return None
        return user_ratings(self.user_ids, self.labeled)


USER_IDS_SQL = f"""
SELECT f.session_id, coalesce(min(a.user_id), min(s.user_id)) AS user_id
FROM {tables.SESSION_FEATURES.qualified} f
LEFT JOIN {tables.STAGING_SESSIONS.qualified} s USING (session_id)
LEFT JOIN {tables.STAGING_ASSIGNMENTS.qualified} a USING (session_id)
GROUP BY f.session_id ORDER BY f.session_id
"""
"""Each modeled session's user: its assignment's (an assignments file may name it; the least id if several do, so the
columns are the same on every run), else its record's."""


def load_modeling_data(wh: Warehouse, text_of: str = "all") -> ModelingData:
    """Every staged session's features and label, and the TF-IDF of its users' messages (``text.py``) for
    ``text_of`` = "all" sessions, the "rated" ones (what cross-validation needs: the same columns, a fraction of the
    cost at paper scale) or "none"."""
    if text_of not in ("all", "rated", "none"):
        raise ValueError(f"text_of must be 'all', 'rated' or 'none'; got {text_of!r}")
    frame = wh.frame(
        f"SELECT f.*, l.label_stars FROM {tables.SESSION_FEATURES.qualified} f"
        f" LEFT JOIN {tables.SESSION_LABELS.qualified} l USING (session_id) ORDER BY f.session_id"
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
        labeled = ~np.isnan(y)
        # the rated sessions' text needs the messages of the sessions the vocabulary is fitted on, no others
        wanted = [ids[i] for i in vocabulary_rows(labeled)] if text_of == "rated" else None
        text = vectorize(ids, load_user_messages(wh, wanted), labeled, rated_only=text_of == "rated")
    users = wh.frame(USER_IDS_SQL)
    if users["session_id"].to_list() != [str(s) for s in session_ids]:
        raise ValueError(f"{tables.SESSION_FEATURES.qualified} changed while it was read; run the modeling step again")
    user_ids = tuple(users["user_id"].to_list())
    return ModelingData(tuple(names), session_ids, X, y, text, user_ids if any(user_ids) else None)


def unrated_chunks(
    wh: Warehouse, data: ModelingData, chunk: int = UNRATED_CHUNK
) -> Iterator[tuple[np.ndarray, TextFeature | None]]:
    """The unrated sessions of ``data`` (loaded with ``text_of="rated"``), ``chunk`` at a time, in the order of
    ``data.X[~data.labeled]``: their feature rows and a ``TextFeature`` of the rated rows and theirs (None without
    text), vectorized with ``data.text``'s vocabulary, so the same rows as ``text_of="all"`` would give. At least
    one chunk, empty when no session is unrated. What the cross-fit predicts the unrated sessions from, so that
    the modeling step never holds every session's text at once."""
    unrated = np.flatnonzero(~data.labeled)
    rated_text = data.text_feature()
    for start in range(0, max(1, unrated.size), chunk):
        rows = unrated[start : start + chunk]
        if rated_text is None:
            yield data.X[rows], None
            continue
        ids = [str(data.session_ids[i]) for i in rows]
        messages = load_user_messages(wh, ids)
        release_duckdb_memory(wh.con)  # what reading the chunk's text left in DuckDB's allocator
        Z = transform_messages(data.text.vectorizers, ids, messages)
        yield data.X[rows], TextFeature(rated_text.labeled, Z, word_columns=rated_text.word_columns)
