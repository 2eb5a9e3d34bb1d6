"""The strata of the stratified prediction-powered estimate (``ppi_stratified``): which session column makes them,
each session's stratum, and the rule that pools strata too small to estimate on their own.

Which column (:func:`strata_column`). ``experiments.toml`` may set ``strata = "<column>"`` at the top (every
experiment) or in an experiment's table (that one wins); without either it is the task type
(:data:`DEFAULT_STRATA`, the rubric's ``task_type`` feature). ``"none"`` turns the strata off: the method's row is
then PPI++'s, noted "no strata".

A session's stratum (:func:`stratum_labels`), read from a row of ``estimates.sessions.assigned_sessions`` (which
joins ``features.session_features``):

- a column of the frame: its value as text (null: :data:`UNKNOWN`). A numeric column with more than
  :data:`MAX_LEVELS` distinct values is cut at its quartiles (over the frame's rows) into four strata
  ``q1``..``q4``: a stratum per value of a continuous column would leave every stratum a handful of ratings;
- a rubric feature answered by option, which ``features/wide.py`` stores one-hot (``task_type__fix_bugs``, ...,
  one 0/1 column per option): the option (the part after ``__``) whose column is 1; several options (a
  ``categories`` feature) joined by ``+``; none, or not annotated (null): :data:`UNKNOWN`. So a session without a
  task type is a stratum of its own, "unknown", not dropped (dropping it would change the arm's mean).

:func:`strata_problem` says when the column is neither (the method's row then says so and equals PPI++).

Pooling small strata (:func:`pooled`). A stratum gets its own lambda and its own mean, both estimated from its
rated sessions, so each needs enough of them. The rule, fixed before any data: a stratum with fewer than
``MIN_STRATUM_RATED`` = 30 rated sessions in any arm where it has sessions is merged into one stratum
:data:`POOLED`; when that pooled stratum is itself short of 30 in an arm, it is merged with the kept stratum with
the fewest ratings (repeatedly), until every stratum has 30 or only one is left (then the estimate is PPI++).

Why 30. Per stratum, the standard error uses ddof-0 variances and a lambda tuned on the same ratings; each makes
the stratum's variance about 1/n_h (relatively) too small, so about 2/n_h together. At n_h = 30 that is at most
~7 % of the variance (3.4 % of the standard error) even if every stratum sat at the minimum, which takes a nominal
95 % interval to no lower than ~94.2 %: inside the validation's 93-97 %. It is also the usual size at which a mean
of bounded ratings is close enough to normal for a Wald interval. Fewer (say 10) would cost up to ~20 % of the
variance; more would pool strata where the model's gain differs, which is what stratifying is for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import numpy as np
import polars as pl

from .experiments import experiments_config

DEFAULT_STRATA: Final = "task_type"
"""The strata column when ``experiments.toml`` sets none: the rubric's task type (``rubric_default.toml``)."""
NO_STRATA: Final = "none"
"""The ``strata`` value that turns the strata off."""
UNKNOWN: Final = "unknown"
"""The stratum of a session whose column is null (or, one-hot, has no option set)."""
POOLED: Final = "pooled"
"""The stratum small strata are merged into (:func:`pooled`)."""
MIN_STRATUM_RATED: Final = 30
"""A stratum with fewer rated sessions in an arm is pooled (module docstring: why 30)."""
MAX_LEVELS: Final = 12
"""A numeric column with more distinct values than this is cut at its quartiles."""
STRATUM: Final = "stratum"
"""The frame column ``experiment_effects`` puts each session's stratum in (``effects.arm_columns`` reads it)."""


def strata_column(config_path: Path | str, experiment: str) -> str:
    """The strata column of ``experiment``: its own ``strata`` in ``experiments.toml`` at ``config_path``, else
    the file's top-level ``strata``, else :data:`DEFAULT_STRATA` (a missing file: the default). May be
    :data:`NO_STRATA`. A bad value raises ``settings_files.SettingsFileError`` (``experiments_config``)."""
    config = experiments_config(Path(config_path))
    return config.strata.get(experiment, config.default_strata or DEFAULT_STRATA)


def strata_columns(config_path: Path | str, experiments: list[str]) -> dict[str, str]:
    """experiment -> :func:`strata_column`, reading the file once."""
    config = experiments_config(Path(config_path))
    return {name: config.strata.get(name, config.default_strata or DEFAULT_STRATA) for name in experiments}


def _one_hot(frame: pl.DataFrame, column: str) -> list[str]:
    prefix = f"{column}__"
    return [c for c in frame.columns if c.startswith(prefix)]


def strata_problem(frame: pl.DataFrame, column: str) -> str | None:
    """Why ``column`` makes no strata of ``frame``, or None when it does (a column, or one-hot option columns)."""
    if column == NO_STRATA:
        return 'strata turned off (strata = "none")'
    if column in frame.columns or _one_hot(frame, column):
        return None
    return f"no session column {column!r} (nor its one-hot options {column}__*) to make strata of"


def stratum_labels(frame: pl.DataFrame, column: str) -> np.ndarray:
    """One stratum label (text) per row of ``frame`` (an ``assigned_sessions`` frame), from ``column`` (module
    docstring). Raises ValueError when :func:`strata_problem` finds no such column."""
    problem = strata_problem(frame, column)
    if problem is not None:
        raise ValueError(problem)
    if column in frame.columns:
        values = frame[column]
        if values.dtype.is_numeric() and values.drop_nulls().n_unique() > MAX_LEVELS:
            return _quartiles(values.cast(pl.Float64).to_numpy())
        texts = values.cast(pl.Utf8).to_list()
        return np.array([UNKNOWN if v is None else v for v in texts], dtype=object)
    options = _one_hot(frame, column)
    names = [c[len(column) + 2 :] for c in options]
    matrix = frame.select(pl.col(c).cast(pl.Float64).fill_null(0.0) for c in options).to_numpy() > 0.5
    out = np.empty(frame.height, dtype=object)
    for i, row in enumerate(matrix):
        chosen = [n for n, on in zip(names, row, strict=True) if on]
        out[i] = "+".join(chosen) if chosen else UNKNOWN
    return out


def _quartiles(x: np.ndarray) -> np.ndarray:
    """``q1``..``q4`` by the quartiles of the finite values of ``x`` (NaN: :data:`UNKNOWN`)."""
    finite = np.isfinite(x)
    cuts = np.quantile(x[finite], [0.25, 0.5, 0.75])
    out = np.full(x.size, UNKNOWN, dtype=object)
    out[finite] = np.array([f"q{k + 1}" for k in np.searchsorted(cuts, x[finite], side="left")], dtype=object)
    return out


def pooled(
    labels: np.ndarray, rated: np.ndarray, min_rated: int = MIN_STRATUM_RATED, *, groups: np.ndarray | None = None
) -> np.ndarray:
    """``labels`` with the strata too small to estimate merged (module docstring: the rule and why).

    ``labels``: one stratum per session; ``rated``: bool, the session has a rating; ``groups``: the arm of each
    session when ``labels`` holds several arms (None: one arm): a stratum is small when it has fewer than
    ``min_rated`` rated sessions in any arm where it has sessions. Returns a new object array; the strata kept
    keep their labels, the merged ones become :data:`POOLED` (or the label of the kept stratum they joined).
    """
    labels = np.asarray(labels, dtype=object).copy()
    rated = np.asarray(rated, dtype=bool)
    if labels.shape != rated.shape:
        raise ValueError(f"labels has {labels.size} values but rated has {rated.size}")
    groups = np.zeros(labels.size, dtype=np.int64) if groups is None else np.asarray(groups)

    def fewest(stratum: object) -> int:
        """The fewest rated sessions the stratum has in an arm where it has sessions."""
        here = labels == stratum
        return min(int((rated & here & (groups == g)).sum()) for g in np.unique(groups[here]))

    small = [s for s in _distinct(labels) if fewest(s) < min_rated]
    if small:
        labels[np.isin(labels, small)] = POOLED
    while POOLED in set(labels) and len(_distinct(labels)) > 1 and fewest(POOLED) < min_rated:
        smallest = min((s for s in _distinct(labels) if s != POOLED), key=lambda s: (fewest(s), str(s)))
        labels[labels == smallest] = POOLED
    return labels


def _distinct(labels: np.ndarray) -> list:
    return sorted(set(labels.tolist()), key=str)
