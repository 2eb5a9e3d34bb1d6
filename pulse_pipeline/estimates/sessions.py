"""What the estimates stage reads of the warehouse: the assigned sessions as one frame (arm, label, cross-fit
prediction and every session feature), the size of every arm, the model family the model stage chose, and the
out-of-fold correlation each comparison found."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from .. import tables
from ..label_scales import SCALES
from ..warehouse import Warehouse
from .experiments import RANDOMIZED, ArmsFrom
from .field_arms import empty_frame, read_field_arms
from .methods import Method

KEYS = (
    "session_id",
    "experiment",
    "variant",
    "user_id",
    "labeled",
    "label",
    "prediction",
    "prediction_calibrated",
    "ask_probability",
    "label_scale",
    "scale",
    "design",
    "design_note",
)


def assigned_sessions(
    wh: Warehouse, with_features: bool = True, arms_from: Mapping[str, ArmsFrom] | None = None
) -> pl.DataFrame:
    """One row per assigned session and experiment: ``KEYS`` then the features of ``features.session_features``.

    The arms are ``staging.assignments``' (design ``randomized``) and, for each experiment of ``arms_from``
    (``experiments.read_arms_from``) that has no assignment, those read from a session field
    (``field_arms.read_field_arms``: design ``observational``); a session can then be in several experiments, one
    row each. ``design_note`` says where an observational experiment's arms came from and how many sessions are in
    none of them, or that a randomized experiment's assignments won over its ``arms_from``.

    ``label`` is the normalized rating (null when unrated); ``prediction`` the normalized cross-fit prediction
    (null when the model stage made none) and ``prediction_calibrated`` the same recalibrated for the lambda = 1
    methods (``modeling/recalibration.py``: equal to it when the model needs none); ``ask_probability`` the
    probability the rating widget was shown with (``staging.session_asks``; null when no ask was logged).
    Features are null for a session the feature stage has not seen. ``with_features`` False: ``KEYS`` only, for a
    reader that needs no feature (at ten times the paper's scale the ~70 feature columns are most of the 0.7 s the
    frame takes).

    Labels are on one scale per experiment (``one_scale_per_experiment``): ``label_scale`` is the scale of the
    session's own label (``staging.session_labels.scale``), ``scale`` the experiment's; a session whose label is on
    another scale than its experiment's counts as unrated here (``labeled`` false, ``label`` null).
    """
    has_features = (
        with_features
        and wh.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'features'"
            " AND table_name = 'session_features'"
        ).fetchone()[0]
    )
    features = ", f.* EXCLUDE (session_id, annotation_status)" if has_features else ""
    join = f"LEFT JOIN {tables.SESSION_FEATURES.qualified} f USING (session_id)" if has_features else ""
    arms_from = dict(arms_from or {})
    listed = wh.con.execute(f"SELECT DISTINCT experiment FROM {tables.STAGING_ASSIGNMENTS.qualified}").fetchall()
    assigned = {name for (name,) in listed}
    won = {name: spec for name, spec in arms_from.items() if name in assigned}
    note = f"CASE {' '.join('WHEN experiment = ? THEN ?' for _ in won)} END" if won else "NULL::VARCHAR"
    wh.con.register(FIELD_ARMS, read_field_arms(wh, arms_from, assigned) if arms_from else empty_frame())
    try:
        return wh.frame(
            f"""
        WITH arms AS (
            SELECT session_id, experiment, variant, user_id, '{RANDOMIZED}' AS design, {note} AS design_note
            FROM {tables.STAGING_ASSIGNMENTS.qualified}
            UNION ALL BY NAME SELECT * FROM {FIELD_ARMS})
        SELECT a.session_id, a.experiment, a.variant, a.user_id, l.label IS NOT NULL AS labeled, l.label, p.prediction,
               p.prediction_calibrated, k.ask_probability, l.scale AS label_scale, a.design, a.design_note
               {features}
        FROM arms a
        LEFT JOIN {tables.SESSION_LABELS.qualified} l USING (session_id)
        LEFT JOIN {tables.PREDICTIONS.qualified} p USING (session_id)
        LEFT JOIN {tables.SESSION_ASKS.qualified} k USING (session_id)
        {join}
        ORDER BY a.session_id, a.experiment""",
            [x for name, spec in sorted(won.items()) for x in (name, assignments_won(spec))],
        ).pipe(one_scale_per_experiment)
    finally:
        wh.con.unregister(FIELD_ARMS)


FIELD_ARMS = "_pulse_field_arms"
"""The observational arms, registered for the query of ``assigned_sessions`` while it runs."""


def assignments_won(spec: ArmsFrom) -> str:
    """The note of a randomized experiment that ``experiments.toml`` also gives an ``arms_from``."""
    return f"arms from its assignments, which win over arms_from = {spec.field!r} in experiments.toml"


def one_scale_per_experiment(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with each experiment's labels on one rating scale, and the column ``scale`` saying which.

    The rule: an experiment is estimated on the scale most of its rated sessions carry (``label_scale``); on a tie,
    the first of ``label_scales.SCALES`` (stars). A session rated on another scale counts as unrated in this frame
    (``labeled`` false, ``label`` null; ``label_scale`` keeps its own scale, so the sessions left out can be counted:
    ``left_out_by_scale``). Why not both: a thumbs-up share and a mean star label are both in [0, 1] but measure
    different things, so their mean, or a difference of arms with different mixes of them, means nothing; and one
    scale per experiment, not per comparison, keeps the control arm the same in every comparison. ``scale`` is
    null for an experiment with no rated session. A frame without ``label_scale`` (rows made by hand) is returned
    with every label on stars; one without ``labeled`` (no labels at all), as it is."""
    if "labeled" not in frame.columns:
        return frame
    if "label_scale" not in frame.columns:
        return frame.with_columns(
            pl.when(pl.col("labeled")).then(pl.lit(SCALES[0])).otherwise(None).alias("label_scale"),
            pl.lit(SCALES[0] if frame["labeled"].any() else None, pl.Utf8).alias("scale"),
        )
    counts = (
        frame.filter(pl.col("labeled") & pl.col("label_scale").is_not_null())
        .group_by("experiment", "label_scale")
        .len()
        .rows()
    )
    best: dict[str, tuple[int, int, str]] = {}
    for experiment, scale, n in counts:
        rank = (n, -SCALES.index(scale) if scale in SCALES else -len(SCALES), scale)
        best[experiment] = max(best.get(experiment, rank), rank)
    chosen = {experiment: rank[2] for experiment, rank in best.items()}
    scale = pl.col("experiment").replace_strict(chosen, default=None, return_dtype=pl.Utf8)
    frame = frame.with_columns(scale.alias("scale"))
    off = (pl.col("labeled") & (pl.col("label_scale") != pl.col("scale"))).fill_null(False)
    return frame.with_columns(
        pl.when(off).then(None).otherwise(pl.col("label")).alias("label"),
        (pl.col("labeled") & ~off).alias("labeled"),
    )


def left_out_by_scale(frame: pl.DataFrame) -> int:
    """Sessions of ``frame`` (a ``one_scale_per_experiment`` frame) rated on another scale than their experiment's."""
    if "label_scale" not in frame.columns or "scale" not in frame.columns:
        return 0
    return frame.filter(pl.col("label_scale").is_not_null() & (pl.col("label_scale") != pl.col("scale"))).height


def feature_names(frame: pl.DataFrame) -> list[str]:
    """The numeric feature columns of an ``assigned_sessions`` frame."""
    return [c for c, t in frame.schema.items() if c not in KEYS and t.is_numeric()]


def assignments(wh: Warehouse) -> pl.DataFrame:
    """``staging.assignments`` as a frame (session_id, experiment, variant, user_id): what the unit is detected
    from and what the sample-ratio check counts."""
    return wh.frame(
        f"SELECT session_id, experiment, variant, user_id FROM {tables.STAGING_ASSIGNMENTS.qualified}"
        " ORDER BY session_id"
    )


def arm_sizes(wh: Warehouse) -> dict[str, dict[str, int]]:
    """experiment -> arm -> assigned sessions (what the sample-ratio check tests)."""
    sizes: dict[str, dict[str, int]] = {}
    for experiment, arm, n in wh.con.execute(
        f"SELECT experiment, variant, count(*) FROM {tables.STAGING_ASSIGNMENTS.qualified} GROUP BY ALL"
    ).fetchall():
        sizes.setdefault(experiment, {})[arm] = n
    return sizes


def oof_rho_by_comparison(wh: Warehouse) -> dict[tuple[str, str], float | None]:
    """(experiment, treatment) -> the out-of-fold correlation of predictions and labels ``experiment_effects`` found."""
    return {
        (experiment, treatment): rho
        for experiment, treatment, rho in wh.con.execute(
            f"SELECT experiment, treatment, oof_rho FROM {tables.EXPERIMENT_EFFECTS.qualified} WHERE method = ?",
            [Method.NAIVE_WELCH],
        ).fetchall()
    }
