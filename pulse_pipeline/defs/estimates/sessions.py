"""The assigned sessions most estimates steps read (``estimates.sessions.assigned_sessions``), read once a run.

Seven estimates steps and one check read the same frame: one row per assigned session with its label, prediction,
ask probability and ~70 features. At ten times the paper's scale it takes about a second each time, most of what a
small drop's estimates cost beyond the effects themselves. Each of their assets depends on every table the
frame is read from (``SESSIONS_DEPS``), so in a run none of those tables is written again once the first of them
starts: the frame it reads is the frame each later one would read, and it is kept until the run ends. One run's
frame is kept at a time (a new run, or another warehouse, reads it again).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from ... import tables
from ...estimates.experiments import ArmsFrom
from ...estimates.sessions import KEYS, assigned_sessions
from ...warehouse import Warehouse
from ..specs import SESSION_FEATURES_KEY

SESSIONS_DEPS = [
    tables.STAGING_ASSIGNMENTS,
    tables.STAGING_SESSIONS,  # the arms of experiments whose arms are a session field (arms_from)
    tables.SESSION_LABELS,
    tables.PREDICTIONS,
    tables.SESSION_ASKS,
    SESSION_FEATURES_KEY,
]
"""Every table ``assigned_sessions`` reads: what an asset that calls ``run_sessions`` must depend on."""

_kept: dict[tuple[str, str], pl.DataFrame] = {}


def run_sessions(
    run_id: str, database: str, wh: Warehouse, arms_from: Mapping[str, ArmsFrom], with_features: bool = True
) -> pl.DataFrame:
    """``assigned_sessions(wh, arms_from=arms_from)`` as the first reader in run ``run_id`` of warehouse
    ``database`` read it (``arms_from``: ``EstimatesResource.arms_from``, the experiments whose arms are a session
    field; the same file for every reader of a run).

    ``with_features`` False: the ``KEYS`` columns only; read on their own (and not kept) when no reader in this
    run has read the whole frame yet."""
    frame = _kept.get((run_id, database))
    if frame is None and not with_features:
        return assigned_sessions(wh, with_features=False, arms_from=arms_from)
    if frame is None:
        frame = assigned_sessions(wh, arms_from=arms_from)
        _kept.clear()
        _kept[(run_id, database)] = frame
    return frame if with_features else frame.select(KEYS)
