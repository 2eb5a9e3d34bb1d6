"""The rows of ``estimates.experiment_effects``: every method's effect for every treatment-vs-control comparison.

Each experiment's arms come from the sessions that have a cross-fit prediction; its control from
``experiments.toml`` (:func:`experiments.experiments_of`). Per comparison, :func:`effects.compare` gives one
estimate per method; each becomes a row with the effect also in stars, the arms' sizes and the comparison's
diagnostics. A single-arm experiment gets one row saying there is nothing to compare. Finally every method's
p-values are Holm-adjusted across all comparisons of the run (:func:`with_holm`).

Every row records the experiment's randomization unit (``experiments.resolve_unit``: configured in
``experiments.toml`` or detected from all its assignments) and its source. When the unit is ``user`` the arms'
sessions carry their user codes, so every interval is clustered by user, and the sessions of users seen in
several arms are left out (``sessions_excluded`` and the note say how many).

Every row records the experiment's design (``design``): ``randomized`` when its arms are assignments, or
``observational`` when they come from a session field (``arms_from`` in ``experiments.toml``,
``field_arms.py``): then its difference is an association, not the effect of the change, and the note says where
the arms came from and how many sessions are in none.

Every row records the rating scale its labels are on (``scale``: ``stars_1_5`` or ``thumbs``, chosen per
experiment by ``sessions.one_scale_per_experiment``). Scales are never mixed in one comparison: the sessions of a
comparison rated on the other scale count as unrated there, and the note says how many. The ``*_stars`` columns
are the effect in stars, so they are NULL on thumbs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from ..label_scales import STARS
from ..stars import label_difference_in_stars
from ..stats.multitest import holm
from .effects import NO_STRATA, ArmData, MethodEstimate, Settings, arm_data, compare
from .experiments import RANDOMIZED, Experiment, Unit, experiments_of, for_unit, units_of
from .methods import NO_METHOD, Method
from .sessions import feature_names, left_out_by_scale, one_scale_per_experiment
from .strata import DEFAULT_STRATA, STRATUM, strata_problem, stratum_labels


@dataclass(frozen=True, kw_only=True)
class EffectRow:
    """One row of ``estimates.experiment_effects``: one method's answer for one comparison.

    Effects are on the normalized label (0-1); the ``*_stars`` columns are the same numbers in stars.
    """

    experiment: str
    treatment: str | None
    control: str
    method: str  # a Method of effects.compare, or NO_METHOD "none" (a single-arm experiment)
    effect: float | None = None
    se: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_holm: float | None = None  # set by with_holm, once every comparison of the run is known
    effect_stars: float | None = None
    ci_low_stars: float | None = None
    ci_high_stars: float | None = None
    n_labeled_treatment: int | None = None
    n_labeled_control: int | None = None
    N_unlabeled_treatment: int | None = None
    N_unlabeled_control: int | None = None
    lambda_treatment: float | None = None
    lambda_control: float | None = None
    oof_rho: float | None = None
    rated_vs_unrated_auc: float | None = None
    width_vs_naive: float | None = None
    best_width_theory: float | None = None
    valid: bool
    flags: str | None = None
    note: str | None = None
    unit: str = "session"  # the randomization unit: "session" or "user" (intervals clustered by user)
    unit_source: str | None = None  # "configured", or "detected: <evidence>"
    sessions_excluded: int = 0  # sessions of users seen in several arms, left out under unit = "user"
    scale: str | None = None  # the rating scale of the labels (label_scales.SCALES); None: no rated session
    design: str = RANDOMIZED  # RANDOMIZED, or OBSERVATIONAL: arms from a session field (an association)


def comparison_rows(
    exp: Experiment,
    treat: ArmData,
    control: ArmData,
    estimates: Sequence[MethodEstimate],
    diagnostics: Mapping[str, float],
    unit: Unit | None = None,
    scale: str | None = STARS,
    scale_note: str | None = None,
) -> list[EffectRow]:
    """The rows of one comparison: one per method of ``effects.compare`` (``estimates``, ``diagnostics``);
    ``unit``: the experiment's randomization unit (None: sessions, source not recorded); ``scale``: the rating
    scale of its labels (the ``*_stars`` columns only on stars); ``scale_note``: the sessions it left out for
    being rated on another scale (``scale_left_out_note``)."""
    unit = unit or Unit("session", "not given")
    in_stars = label_difference_in_stars if scale == STARS else _no_stars
    return [
        EffectRow(
            experiment=exp.name,
            treatment=treat.name,
            control=control.name,
            method=e.method,
            effect=e.effect,
            se=e.se,
            ci_low=e.ci_low,
            ci_high=e.ci_high,
            p_value=e.p_value,
            effect_stars=in_stars(e.effect),
            ci_low_stars=in_stars(e.ci_low),
            ci_high_stars=in_stars(e.ci_high),
            n_labeled_treatment=len(treat.y),
            n_labeled_control=len(control.y),
            N_unlabeled_treatment=len(treat.f_unlabeled),
            N_unlabeled_control=len(control.f_unlabeled),
            lambda_treatment=e.lambda_treatment,
            lambda_control=e.lambda_control,
            oof_rho=diagnostics["oof_rho"],
            rated_vs_unrated_auc=diagnostics["auc"],
            width_vs_naive=e.width_vs_naive,
            best_width_theory=diagnostics["best_width_theory"],
            valid=e.valid,
            flags=e.flags,
            note="; ".join(x for x in (exp.notes, unit.note, scale_note, e.note) if x) or None,
            unit=unit.unit,
            unit_source=unit.source,
            sessions_excluded=unit.excluded_sessions,
            scale=scale,
            design=exp.design,
        )
        for e in estimates
    ]


def _why_no_strata(e: MethodEstimate, why: str) -> MethodEstimate:
    """``e`` with, when it is the ``ppi_stratified`` row, why the experiment has no strata in its note."""
    if e.method != Method.PPI_STRATIFIED or e.note is None:
        return e
    return replace(e, note=e.note.replace(NO_STRATA, f"{NO_STRATA} ({why})"))


def _strata_named(e: MethodEstimate, column: str) -> MethodEstimate:
    """``e`` with, when it is the ``ppi_stratified`` row, the column its strata come from in its note."""
    if e.method != Method.PPI_STRATIFIED:
        return e
    return replace(e, note="; ".join(x for x in (f"strata by {column}", e.note) if x))


def _no_stars(_: float | None) -> None:
    """A difference of thumbs labels has no value in stars."""
    return None


def scale_left_out_note(rows: pl.DataFrame, scale: str | None) -> str | None:
    """The note for a comparison whose sessions (``rows``) include some rated on another scale than ``scale``."""
    n = left_out_by_scale(rows)
    if not n:
        return None
    others = ", ".join(sorted(set(rows["label_scale"].drop_nulls().to_list()) - {scale}))
    return (
        f"{n} sessions rated on {others} left out of the labels (counted as unrated): this experiment is estimated"
        f" on {scale}, the scale most of its rated sessions carry; scales are never mixed"
    )


def with_holm(rows: Sequence[EffectRow]) -> list[EffectRow]:
    """``rows`` with ``p_holm``: each method's p-values Holm-adjusted across every comparison of the run.

    Per method, because the methods are alternative answers to the same question, not further questions. A row
    without a p-value keeps ``p_holm`` None and does not count among the tests.
    """
    out = list(rows)
    for method in {r.method for r in out}:
        idx = [i for i, r in enumerate(out) if r.method == method]
        p = np.array([np.nan if out[i].p_value is None else out[i].p_value for i in idx], dtype=float)
        for i, q in zip(idx, holm(p), strict=True):
            out[i] = replace(out[i], p_holm=None if np.isnan(q) else float(q))
    return out


def experiment_effect_rows(
    sessions: pl.DataFrame,
    controls: dict[str, str],
    settings: Settings,
    insample: Mapping[str, float] | None = None,
    progress: Callable[[str], None] | None = None,
    units: Mapping[str, str] | None = None,
    strata: Mapping[str, str] | None = None,
    default_strata: str = DEFAULT_STRATA,
) -> list[EffectRow]:
    """Rows of ``estimates.experiment_effects``, Holm-adjusted; [] when no assigned session has a prediction.

    ``sessions``: an ``estimates.sessions.assigned_sessions`` frame (sessions without a cross-fit prediction are
    left out); ``controls``: experiment -> control arm (``experiments.read_controls``); ``insample``: session id ->
    the in-sample model's prediction (the table ``modeling.insample_predictions``, ``modeling/insample.py``), for
    the ``ppi_insample`` rows; ``progress`` (e.g. a logger) hears of each comparison as it starts; ``units``:
    experiment -> configured unit (``experiments.read_units``; absent: detected from ``sessions``' ``user_id``; a
    frame without that column counts every session as its own user, so the unit is detected as session);
    ``strata``: experiment -> the session column whose values make ``ppi_stratified``'s strata
    (``experiments.toml``'s ``strata``; absent: ``default_strata``, the file's top-level one or the task type).
    A column the frame lacks (or "none") leaves the experiment without strata: its ``ppi_stratified`` rows are
    PPI++'s and their note says why.
    """
    if "scale" not in sessions.columns:  # a frame made by hand: its labels on one scale per experiment
        sessions = one_scale_per_experiment(sessions)
    predicted = sessions.filter(pl.col("prediction").is_not_null())
    if predicted.is_empty():
        return []
    if "user_id" not in sessions.columns:  # a frame without user ids: every session is its own user
        sessions = sessions.with_columns(pl.lit(None, pl.Utf8).alias("user_id"))
        predicted = predicted.with_columns(pl.lit(None, pl.Utf8).alias("user_id"))
    unit_of = units_of(sessions, units or {})
    features = feature_names(predicted)
    rows: list[EffectRow] = []
    for exp in experiments_of(predicted, controls):
        unit = unit_of[exp.name]
        in_experiment = for_unit(predicted.filter(pl.col("experiment") == exp.name), unit)
        by_user = unit.unit == "user"
        scale = next(iter(in_experiment["scale"].drop_nulls()), None)
        column = (strata or {}).get(exp.name, default_strata)
        no_strata = strata_problem(in_experiment, column)
        if no_strata is None:
            in_experiment = in_experiment.with_columns(pl.Series(STRATUM, stratum_labels(in_experiment, column)))
        if not exp.treatments:
            rows.append(
                EffectRow(
                    experiment=exp.name,
                    treatment=None,
                    control=exp.control,
                    method=NO_METHOD,
                    valid=False,
                    note="; ".join(x for x in (exp.nothing_to_compare, exp.design_note) if x),
                    unit=unit.unit,
                    unit_source=unit.source,
                    sessions_excluded=unit.excluded_sessions,
                    scale=scale,
                    design=exp.design,
                )
            )
            continue
        control = arm_data(
            exp.control,
            in_experiment.filter(pl.col("variant") == exp.control),
            features,
            insample,
            by_user=by_user,
            kept_as=f"{exp.name}/{exp.control}",
        )
        for treatment in exp.treatments:
            if progress is not None:
                progress(f"{exp.name}: {treatment} vs {exp.control}")
            arm = in_experiment.filter(pl.col("variant") == treatment)
            treat = arm_data(treatment, arm, features, insample, by_user=by_user, kept_as=f"{exp.name}/{treatment}")
            estimates, diagnostics = compare(treat, control, settings)
            if no_strata is not None:
                estimates = [_why_no_strata(e, no_strata) for e in estimates]
            else:
                estimates = [_strata_named(e, column) for e in estimates]
            both = in_experiment.filter(pl.col("variant").is_in([treatment, exp.control]))
            note = scale_left_out_note(both, scale)
            rows.extend(comparison_rows(exp, treat, control, estimates, diagnostics, unit, scale, note))
    return with_holm(rows)
