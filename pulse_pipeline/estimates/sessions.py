"""What the estimates stage reads of the warehouse: the assigned sessions as one frame (arm, label, cross-fit
prediction and every session feature), the size of every arm, the model family the model stage chose, and the
out-of-fold correlation each comparison found."""

from __future__ import annotations

import polars as pl

from ..warehouse import Warehouse

KEYS = ("session_id", "experiment", "variant", "user_id", "labeled", "label", "prediction", "ask_probability")


def assigned_sessions(wh: Warehouse, with_features: bool = True) -> pl.DataFrame:
    """One row per assigned session: ``KEYS`` then the features of ``features.session_features``.

    ``label`` is the normalized rating (null when unrated); ``prediction`` the normalized cross-fit prediction
    (null when the model stage made none); ``ask_probability`` the probability the rating widget was shown with
    (``staging.session_asks``; null when no ask was logged). Features are null for a session the feature stage
    has not seen. ``with_features`` False: ``KEYS`` only, for a reader that needs no feature (at ten times the
    paper's scale the ~70 feature columns are most of the 0.7 s the frame takes).
    """
    has_features = (
        with_features
        and wh.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'features'"
            " AND table_name = 'session_features'"
        ).fetchone()[0]
    )
    features = ", f.* EXCLUDE (session_id, annotation_status)" if has_features else ""
    join = "LEFT JOIN features.session_features f USING (session_id)" if has_features else ""
    return wh.frame(f"""
        SELECT a.session_id, a.experiment, a.variant, a.user_id, l.label IS NOT NULL AS labeled, l.label, p.prediction,
               k.ask_probability
               {features}
        FROM staging.assignments a
        LEFT JOIN staging.session_labels l USING (session_id)
        LEFT JOIN modeling.predictions p USING (session_id)
        LEFT JOIN staging.session_asks k USING (session_id)
        {join}
        ORDER BY a.session_id""")


def feature_names(frame: pl.DataFrame) -> list[str]:
    """The numeric feature columns of an ``assigned_sessions`` frame."""
    return [c for c, t in frame.schema.items() if c not in KEYS and t.is_numeric()]


def assignments(wh: Warehouse) -> pl.DataFrame:
    """``staging.assignments`` as a frame (session_id, experiment, variant, user_id): what the unit is detected
    from and what the sample-ratio check counts."""
    return wh.frame("SELECT session_id, experiment, variant, user_id FROM staging.assignments ORDER BY session_id")


def arm_sizes(wh: Warehouse) -> dict[str, dict[str, int]]:
    """experiment -> arm -> assigned sessions (what the sample-ratio check tests)."""
    sizes: dict[str, dict[str, int]] = {}
    for experiment, arm, n in wh.con.execute(
        "SELECT experiment, variant, count(*) FROM staging.assignments GROUP BY ALL"
    ).fetchall():
        sizes.setdefault(experiment, {})[arm] = n
    return sizes


def chosen_family(wh: Warehouse) -> str | None:
    """The model family the model stage chose (and cross-fit); None when it chose none."""
    chosen = wh.con.execute("SELECT DISTINCT model FROM modeling.cv_metrics WHERE chosen").fetchone()
    return chosen[0] if chosen else None


def oof_rho_by_comparison(wh: Warehouse) -> dict[tuple[str, str], float | None]:
    """(experiment, treatment) -> the out-of-fold correlation of predictions and labels ``experiment_effects`` found."""
    return {
        (experiment, treatment): rho
        for experiment, treatment, rho in wh.con.execute(
            "SELECT experiment, treatment, oof_rho FROM estimates.experiment_effects WHERE method = 'naive_welch'"
        ).fetchall()
    }
