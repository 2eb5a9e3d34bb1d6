"""The rows of ``estimates.guardrails``: every comparison's guardrail metrics against their margins.

A guardrail (``experiments.toml``: ``[guardrails.NAME]`` for every experiment, ``[experiments.X.guardrails.NAME]``
for one; ``guardrail_settings.guardrails_for``) names a numeric session column that a change must not make worse
beyond a margin. For every treatment-vs-control comparison and every guardrail of its experiment, one row:

- Sessions: every assigned session of the two arms (``sessions.assigned_sessions``; no rating or prediction
  needed), without the sessions of users seen in several arms when the unit is the user (``experiments.for_unit``,
  as ``experiment_effects``). A session whose metric is NULL (a source that logs no cost) is left out and counted
  in the note.
- Unit: the experiment's randomization unit (``experiments.units_of``: configured or detected). Under ``user`` the
  arms carry user cluster codes (``stats.cluster.cluster_codes``: a session without a user id is its own cluster),
  so the difference, its relative version and the CUPED adjustment are clustered by user
  (``stats/guardrails.py``).
- CUPED covariate: for each user, the mean of the metric over the user's sessions (any staged session, of any
  experiment or none: ``metric_history``) that STARTED before the experiment's first session (the earliest
  ``staging.sessions.started_at`` of its assigned sessions). Such a session cannot have been touched by the
  experiment. Sessions of users without one (new users, no user id, no start time) carry NaN: the missing-history
  indicator of ``stats.guardrails``. ``stats.guardrails`` uses CUPED only where it narrows the interval (method
  ``cuped``), else the plain difference (method ``plain``; the note says why).
- The confidence sequence over days: the look days are ``history.look_days`` of the comparison's dated sessions
  (sessions whose start has a day), as ``estimates.effect_history`` looks; the row reports the sequence at the LAST
  look, which holds every dated session: the estimate on them -/+ ``stats.sequential.cs_radius(se, t)``, t their
  units (users under ``user``, else sessions) with a value, at the guardrail's alpha (two-sided, like the fixed
  interval). A team that looks at the guardrail every day reads this, not the fixed interval. Sessions without a
  start time are in the fixed estimate but not in the sequence (the note counts them).
- Verdict: ``stats.guardrails.noninferiority`` (pass / fail / inconclusive; NULL when not estimable).
- Design: the experiment's (``randomized`` or ``observational``: arms from a session field, the row's difference
  is an association and its note says so).

A single-arm experiment has no comparison and no guardrail row. A metric that is not a numeric column of the
sessions frame gets a row with no estimate and a note (the preflight and the asset stop on it first:
``guardrail_settings.check_guardrail_metrics``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import polars as pl

from .. import tables
from ..stats.cluster import cluster_codes
from ..stats.guardrails import MIN_HISTORY, guardrail_difference, noninferiority
from ..stats.sequential import DEFAULT_PLANNED_N, confidence_sequence
from ..warehouse import Warehouse
from .experiments import OBSERVATIONAL, RANDOMIZED, Experiment, Unit, experiments_of, for_unit, units_of
from .guardrail_settings import Guardrail
from .history import look_days
from .sessions import feature_names


@dataclass(frozen=True, kw_only=True)
class GuardrailRow:
    """One row of ``estimates.guardrails`` (columns in ``tables.GUARDRAILS``)."""

    experiment: str
    treatment: str
    control: str
    guardrail: str
    metric: str
    direction: str
    unit: str = "session"
    method: str | None = None
    n_treatment: int | None = None
    n_control: int | None = None
    treatment_mean: float | None = None
    control_mean: float | None = None
    effect: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    relative_effect: float | None = None
    relative_ci_low: float | None = None
    relative_ci_high: float | None = None
    cs_low: float | None = None
    cs_high: float | None = None
    margin: float | None = None
    margin_type: str | None = None
    alpha: float | None = None
    p_noninferiority: float | None = None
    verdict: str | None = None
    variance_reduction: float | None = None
    design: str = RANDOMIZED
    note: str | None = None


def metric_history(wh: Warehouse, metrics: Sequence[str]) -> pl.DataFrame:
    """Every staged session: ``session_id``, ``user_id``, ``started_at`` and the ``metrics`` columns of
    ``features.session_features`` (NULL where the feature stage has not seen the session); what the CUPED
    covariate and each session's start are read from. ``metrics`` must be columns of that table."""
    cols = "".join(f', f."{m}"' for m in dict.fromkeys(metrics))
    return wh.frame(
        f"SELECT s.session_id, s.user_id, s.started_at{cols} FROM {tables.STAGING_SESSIONS.qualified} s"
        f" LEFT JOIN {tables.SESSION_FEATURES.qualified} f USING (session_id) ORDER BY s.session_id"
    )


def pre_experiment_means(history: pl.DataFrame, metric: str, start: datetime | None) -> dict[str, float]:
    """user_id -> the mean of ``metric`` over the user's sessions in ``history`` that started before ``start``
    (with a value and a user id); {} when ``start`` is None (no session of the experiment has a start time)."""
    if start is None or metric not in history.columns:
        return {}
    before = history.filter(
        (pl.col("started_at") < start) & pl.col("user_id").is_not_null() & pl.col(metric).is_not_null()
    )
    means = before.group_by("user_id").agg(pl.col(metric).cast(pl.Float64).mean())
    return dict(zip(means["user_id"].to_list(), means[metric].to_list(), strict=True))


def _values(frame: pl.DataFrame, metric: str) -> np.ndarray:
    """The metric per session as float64, NULL as NaN."""
    return frame[metric].cast(pl.Float64).fill_null(np.nan).to_numpy().astype(np.float64)


def _covariate(frame: pl.DataFrame, means: Mapping[str, float]) -> np.ndarray:
    """Each session's user's pre-experiment mean, NaN for a user without one (or no user id)."""
    return np.array([means.get(u, np.nan) if u is not None else np.nan for u in frame["user_id"].to_list()])


def _codes(frame: pl.DataFrame, by_user: bool) -> np.ndarray | None:
    return cluster_codes(frame["user_id"].to_list()) if by_user else None


def _none_if_nan(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def comparison_row(
    exp: Experiment,
    treatment: str,
    arms: pl.DataFrame,
    guardrail: Guardrail,
    unit: Unit,
    means: Mapping[str, float],
    planned_n: float = DEFAULT_PLANNED_N,
    min_history: int = MIN_HISTORY,
) -> GuardrailRow:
    """The row of one comparison and one guardrail; ``arms``: the comparison's sessions (columns ``variant``,
    ``user_id``, ``day``, the metric); ``means``: user -> pre-experiment mean of the metric."""
    base = dict(
        experiment=exp.name, treatment=treatment, control=exp.control, guardrail=guardrail.name,
        metric=guardrail.metric, direction=guardrail.direction, unit=unit.unit, margin=guardrail.margin,
        margin_type=guardrail.margin_type, alpha=guardrail.alpha, design=exp.design,
    )  # fmt: skip
    design_note = "observational arms: the difference is an association, not the change's effect" if (
        exp.design == OBSERVATIONAL) else None  # fmt: skip
    if guardrail.metric not in arms.columns or not arms.schema[guardrail.metric].is_numeric():
        return GuardrailRow(**base, note=_join(f"{guardrail.metric!r} is not a numeric session column", design_note))
    by_user = unit.unit == "user"
    t, c = arms.filter(pl.col("variant") == treatment), arms.filter(pl.col("variant") == exp.control)

    def estimate(t: pl.DataFrame, c: pl.DataFrame):
        return guardrail_difference(
            _values(t, guardrail.metric), _values(c, guardrail.metric), g_t=_codes(t, by_user),
            g_c=_codes(c, by_user), x_t=_covariate(t, means), x_c=_covariate(c, means), alpha=guardrail.alpha,
            min_history=min_history,
        )  # fmt: skip

    est = estimate(t, c)
    p, verdict = noninferiority(
        est, direction=guardrail.direction, margin=guardrail.margin, margin_type=guardrail.margin_type,
        alpha=guardrail.alpha,
    )  # fmt: skip
    # the confidence sequence at the last look: every session with a start day
    undated = arms["day"].null_count()
    cs_low = cs_high = None
    cs_note = None
    if undated < arms.height:
        looks, _ = look_days(arms["day"].drop_nulls().to_list())
        last = looks[-1]
        if undated:
            dated = pl.col("day").is_not_null() & (pl.col("day") <= last)
            seq = estimate(t.filter(dated), c.filter(dated))
            cs_note = f"{undated} sessions without a start time are not in the confidence sequence"
        else:
            seq = est
        n_units = seq.n_clusters_treatment + seq.n_clusters_control
        low, high = confidence_sequence(seq.effect, seq.se, n_units, planned_n, guardrail.alpha)
        cs_low, cs_high = _none_if_nan(low), _none_if_nan(high)
    else:
        cs_note = "no session has a start time: no confidence sequence"
    return GuardrailRow(
        **base,
        method=est.method,
        n_treatment=est.n_treatment,
        n_control=est.n_control,
        treatment_mean=_none_if_nan(est.treatment_mean),
        control_mean=_none_if_nan(est.control_mean),
        effect=_none_if_nan(est.effect),
        ci_low=_none_if_nan(est.ci_low),
        ci_high=_none_if_nan(est.ci_high),
        relative_effect=_none_if_nan(est.relative_effect),
        relative_ci_low=_none_if_nan(est.relative_ci_low),
        relative_ci_high=_none_if_nan(est.relative_ci_high),
        cs_low=cs_low,
        cs_high=cs_high,
        p_noninferiority=_none_if_nan(p),
        verdict=verdict,
        variance_reduction=est.variance_reduction,
        note=_join(design_note, est.note, cs_note, exp.notes, unit.note),
    )


def guardrail_rows(
    sessions: pl.DataFrame,
    history: pl.DataFrame,
    guardrails: Callable[[str], Sequence[Guardrail]],
    controls: Mapping[str, str],
    units: Mapping[str, str] | None = None,
    planned_n: float = DEFAULT_PLANNED_N,
    min_history: int = MIN_HISTORY,
) -> list[GuardrailRow]:
    """Rows of ``estimates.guardrails`` (module docstring).

    ``sessions``: an ``assigned_sessions`` frame (every assigned session, its metric columns among its features);
    ``history``: :func:`metric_history` (every staged session's user, start and metrics); ``guardrails``:
    experiment -> its guardrails (``guardrail_settings.guardrails_for`` bound to the file's config); ``controls`` and
    ``units`` as ``experiment_effects`` takes them; ``min_history``: ``stats.guardrails.MIN_HISTORY``.
    """
    if sessions.is_empty():
        return []
    if "user_id" not in sessions.columns:
        sessions = sessions.with_columns(pl.lit(None, pl.Utf8).alias("user_id"))
    starts = history.select("session_id", "started_at")
    sessions = sessions.join(starts, on="session_id", how="left", maintain_order="left").with_columns(
        pl.col("started_at").cast(pl.Date).alias("day")
    )
    unit_of = units_of(sessions, units or {})
    rows: list[GuardrailRow] = []
    for exp in experiments_of(sessions, dict(controls)):
        chosen = guardrails(exp.name)
        if not exp.treatments or not chosen:
            continue
        unit = unit_of[exp.name]
        in_exp = for_unit(sessions.filter(pl.col("experiment") == exp.name), unit)
        start = in_exp["started_at"].min()
        for guardrail in chosen:
            means = pre_experiment_means(history, guardrail.metric, start)
            for treatment in exp.treatments:
                arms = in_exp.filter(pl.col("variant").is_in([treatment, exp.control]))
                rows.append(comparison_row(exp, treatment, arms, guardrail, unit, means, planned_n, min_history))
    return rows


def numeric_session_columns(sessions: pl.DataFrame) -> list[str]:
    """The numeric session columns of an ``assigned_sessions`` frame: what a guardrail's metric may name."""
    return feature_names(sessions)


def missing_rows(
    table: pl.DataFrame, sessions: pl.DataFrame, guardrails: Callable[[str], Sequence[Guardrail]],
    controls: Mapping[str, str],
) -> list[str]:  # fmt: skip
    """What ``table`` (of ``estimates.guardrails``: experiment, treatment, guardrail, n_treatment, n_control)
    lacks against the comparisons of ``sessions`` and their guardrails, and rows whose session counts exceed the
    comparison's assigned sessions; [] when they reconcile."""
    have = {(e, t, g): (nt, nc) for e, t, g, nt, nc in table.select(
        "experiment", "treatment", "guardrail", "n_treatment", "n_control").iter_rows()}  # fmt: skip
    wanted: dict[tuple[str, str, str], tuple[int, int]] = {}
    for exp in experiments_of(sessions, dict(controls)):
        sizes = dict(sessions.filter(pl.col("experiment") == exp.name).group_by("variant").len().iter_rows())
        for g in guardrails(exp.name):
            for treatment in exp.treatments:
                wanted[(exp.name, treatment, g.name)] = (sizes.get(treatment, 0), sizes.get(exp.control, 0))
    problems = [f"{e}/{t}: no row for guardrail {g!r}" for e, t, g in sorted(set(wanted) - set(have))]
    problems += [
        f"{e}/{t}: a row for guardrail {g!r}, which is not configured" for e, t, g in sorted(set(have) - set(wanted))
    ]
    for key in sorted(set(wanted) & set(have)):
        (nt, nc), (at, ac) = have[key], wanted[key]
        if (nt or 0) > at or (nc or 0) > ac:
            problems.append(f"{key[0]}/{key[1]} {key[2]!r}: {nt}/{nc} sessions with a value, arms hold {at}/{ac}")
    return problems
