"""The rows of ``estimates.effect_history``: every comparison's effect as it stood at the end of each day.

A team watching an experiment looks at its estimate every day. For every treatment-vs-control comparison and
method (``METHODS``), and for every look day d (below), :func:`effects.compare` runs on the sessions that STARTED
on or before d (``staging.sessions.started_at``, its UTC date), exactly as ``estimates.experiment_effects`` runs
it on all of them. Each row holds that day's estimate with two intervals:

- ``ci_low``/``ci_high``: the fixed-horizon 95 % interval, valid for ONE look decided in advance. Acting on the
  first day it excludes zero makes false positives far likelier than 5 % (the ``peeking`` validation scenario
  measures how much: ``studies/peeking.py``);
- ``cs_low``/``cs_high``: the always-valid confidence sequence (``stats/sequential.py``): effect -/+
  ``cs_radius(se, t, planned_n)``, t the units to date (below). It covers the truth on every day at once with
  probability >= 95 %, so a team may stop the first day it excludes zero (``excludes_zero_cs``).

Choices:

- The randomization unit is ``experiment_effects``'s (``experiments.units_of``: configured or detected): under
  ``user`` the arms carry user codes, so compare's intervals are clustered by user, and the sessions of users seen
  in several arms are left out (the note says how many). The sequence's clock t counts the comparison's
  independent units to date, both arms: sessions, or users under ``user`` (column ``unit``). They are what every
  method's estimate averages over (naive's difference of rated means is, to first order, a mean over sessions of
  rated * (Y - mean) / P(rated)). ``planned_n`` (default ``sequential.DEFAULT_PLANNED_N``, GrowthBook's 5 000)
  is the number of units where the sequence is tightest; it costs width, never validity, when far off.
- Methods: ``naive_welch``, ``ppi``, ``crossppi``, ``aipw``, ``ppi_stratified`` (its strata as
  ``experiment_effects`` makes them, pooled at each look by the ratings to date). The resampling method
  ``naive_bootstrap`` is left out, and so is the permutation p-value (a row has no p-value): compare runs without
  resampling (``resampling=False``) at every look. ``ppi_insample`` (never valid) is not computed.
- Predictions are the stored cross-fit predictions (``modeling.predictions``), fit on every label known when
  the model stage last ran, and so are the propensities of ``aipw``: cross-fit once per arm on the whole period
  (``effects.propensities``) and read by every look. A re-run's history is a retrospective on today's model, not
  what the pipeline showed on day d.
- Looks. One per day with at least one session of the experiment. An experiment whose sessions span more than
  ``max_looks`` such days is looked at once per period of k = ceil(span / max_looks) calendar days instead (the
  period's last day with data; the row's note says so), so hundreds of days cost at most ``max_looks`` compares
  per comparison. Looking less often keeps the sequence valid (it holds at every day, so at any subset).
- A look where an arm has fewer than two ratings gets compare's rows (NaN numbers, its note); a look with no new
  rating since the previous look says so in the note. Sessions without a start time cannot be placed on a day:
  they are left out and every row of their experiment counts them in its note. A single-arm experiment, or a
  comparison with no dated session, gets one row (method ``none``, no day) saying why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date

import numpy as np
import polars as pl

from .. import tables
from ..stats.sequential import DEFAULT_PLANNED_N, confidence_sequence
from ..warehouse import Warehouse
from .effects import ArmColumns, Settings, arm_columns, arm_data, compare, propensities
from .experiments import experiments_of, for_unit, units_of
from .methods import NO_METHOD, Method
from .sessions import feature_names
from .strata import DEFAULT_STRATA, STRATUM, strata_problem, stratum_labels

METHODS: tuple[Method, ...] = (Method.NAIVE_WELCH, Method.PPI, Method.CROSSPPI, Method.AIPW, Method.PPI_STRATIFIED)
MAX_LOOKS = 100


@dataclass(frozen=True, kw_only=True)
class HistoryRow:
    """One row of ``estimates.effect_history``: one method's estimate of one comparison as of one look day."""

    experiment: str
    treatment: str | None
    control: str
    method: str  # a METHODS entry, or NO_METHOD "none" (nothing to compare; see note)
    unit: str = "session"  # the randomization unit, whose count to date is the sequence's clock
    day: date | None = None
    n_rated: int | None = None  # rated sessions of both arms started on or before day
    n_sessions: int | None = None  # all sessions of both arms started on or before day (the sequence's clock)
    effect: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    cs_low: float | None = None
    cs_high: float | None = None
    excludes_zero_fixed: bool | None = None
    excludes_zero_cs: bool | None = None
    note: str | None = None


def session_days(wh: Warehouse) -> pl.DataFrame:
    """session_id -> ``day``, the UTC date its session started (null when ``staging.sessions`` has no start)."""
    return wh.frame(f"SELECT session_id, CAST(started_at AS DATE) AS day FROM {tables.STAGING_SESSIONS.qualified}")


def with_days(sessions: pl.DataFrame, days: pl.DataFrame) -> pl.DataFrame:
    """An ``assigned_sessions`` frame with each session's start ``day`` (a date, null when unknown) as a last
    column (not numeric, so never taken for a feature)."""
    return sessions.join(days.select("session_id", "day"), on="session_id", how="left", maintain_order="left")


def look_days(days: Sequence[date], max_looks: int = MAX_LOOKS) -> tuple[list[date], int]:
    """(the look days, the period in days) for sessions starting on ``days``.

    Every distinct day when there are at most ``max_looks`` of them (period 1); else periods of
    k = ceil((last - first + 1) / max_looks) calendar days from the first day, each looked at on its last day with
    data (period k), so at most ``max_looks`` looks.
    """
    distinct = sorted(set(days))
    if len(distinct) <= max_looks:
        return distinct, 1
    first = distinct[0]
    period = math.ceil(((distinct[-1] - first).days + 1) / max_looks)
    last_of_period: dict[int, date] = {}
    for d in distinct:
        last_of_period[(d - first).days // period] = d
    return sorted(last_of_period.values()), period


def _with_users(sessions: pl.DataFrame) -> pl.DataFrame:
    """``sessions`` with a ``user_id`` column: a frame without one counts every session as its own user (null ids,
    as ``experiment_effects`` does), so the unit is detected as session."""
    if "user_id" in sessions.columns:
        return sessions
    return sessions.with_columns(pl.lit(None, pl.Utf8).alias("user_id"))


def expected_looks(
    sessions: pl.DataFrame,
    controls: Mapping[str, str],
    max_looks: int = MAX_LOOKS,
    units: Mapping[str, str] | None = None,
) -> dict[tuple[str, str], list[date]]:
    """(experiment, treatment) -> its look days, for a :func:`with_days` frame (what the asset check expects);
    ``units`` as :func:`history_rows` takes them."""
    sessions = _with_users(sessions)
    predicted = sessions.filter(pl.col("prediction").is_not_null())
    if predicted.is_empty():
        return {}
    unit_of = units_of(sessions, units or {})
    out: dict[tuple[str, str], list[date]] = {}
    for exp in experiments_of(predicted, dict(controls)):
        in_exp = for_unit(predicted.filter(pl.col("experiment") == exp.name), unit_of[exp.name])
        in_exp = in_exp.filter(pl.col("day").is_not_null())
        for treatment in exp.treatments:
            arms = in_exp.filter(pl.col("variant").is_in([treatment, exp.control]))
            out[(exp.name, treatment)] = look_days(arms["day"].to_list(), max_looks)[0]
    return out


def _look_rows(
    exp_name: str,
    treatment: ArmColumns,
    control: ArmColumns,
    upto: tuple[np.ndarray, np.ndarray],
    s: Settings,
    planned_n: float,
    by_user: bool,
) -> list[HistoryRow]:
    """The METHODS rows of one comparison on the sessions where ``upto`` (per arm: started on or before the
    look); ``by_user``: the unit is the user (clustered intervals; the clock counts users)."""
    treat, ctrl = treatment.take(upto[0]), control.take(upto[1])
    # no row here reads a bootstrap, a p-value, or a flag (the AUC's)
    estimates, _ = compare(treat, ctrl, s, resampling=False, diagnostics=False)
    n_sessions = int(upto[0].sum() + upto[1].sum())
    n_units = n_sessions
    if by_user:  # a session without a user id is its own cluster (effects.arm_data), so it counts as one unit
        users = np.concatenate([treatment.user_ids[upto[0]], control.user_ids[upto[1]]])
        n_units = len({u for u in users if u is not None}) + sum(1 for u in users if u is None)
    n_rated = len(treat.y) + len(ctrl.y)
    rows = []
    for e in estimates:
        if e.method not in METHODS:
            continue
        cs_low, cs_high = confidence_sequence(e.effect, e.se, n_units, planned_n, s.alpha)
        defined = not math.isnan(e.effect)
        rows.append(
            HistoryRow(
                experiment=exp_name,
                treatment=treatment.name,
                control=control.name,
                method=e.method,
                unit="user" if by_user else "session",
                n_rated=n_rated,
                n_sessions=n_sessions,
                effect=e.effect,
                ci_low=e.ci_low,
                ci_high=e.ci_high,
                cs_low=cs_low,
                cs_high=cs_high,
                excludes_zero_fixed=(e.ci_low > 0 or e.ci_high < 0) if defined else None,
                excludes_zero_cs=(cs_low > 0 or cs_high < 0) if defined and not math.isnan(cs_low) else None,
                note=e.note,
            )
        )
    return rows


def _with_propensity(
    arms: pl.DataFrame, experiment: str, variants: Sequence[str], features: list[str], s: Settings, by_user: bool
) -> pl.DataFrame:
    """``arms`` with a ``propensity`` column: each arm's P(rated | x) cross-fit once on the whole period, which every
    look then reads (as it reads the whole period's predictions). Fitting it again at every look cost ~70 ms a look,
    nearly all of the history's time."""
    parts = []
    for variant in variants:
        arm = arms.filter(pl.col("variant") == variant)
        ids = pl.concat([arm.filter(pl.col("labeled"))["session_id"], arm.filter(~pl.col("labeled"))["session_id"]])
        p = propensities(arm_data(variant, arm, features, by_user=by_user, kept_as=f"{experiment}/{variant}"), s)
        parts.append(pl.DataFrame({"session_id": ids, "propensity": p}))
    return arms.join(pl.concat(parts), on="session_id", how="left")


def _join_notes(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def history_rows(
    sessions: pl.DataFrame,
    controls: Mapping[str, str],
    settings: Settings | None = None,
    planned_n: float = DEFAULT_PLANNED_N,
    max_looks: int = MAX_LOOKS,
    progress: Callable[[str], None] | None = None,
    units: Mapping[str, str] | None = None,
    strata: Mapping[str, str] | None = None,
    default_strata: str = DEFAULT_STRATA,
) -> list[HistoryRow]:
    """Rows of ``estimates.effect_history`` (module docstring); [] when no assigned session has a prediction.

    ``sessions``: a :func:`with_days` frame (sessions without a prediction are left out, as in
    ``experiment_effects``); ``controls``: experiment -> control arm; ``settings``: as ``experiment_effects``
    uses them (None: the defaults); ``progress`` hears of each comparison; ``units``: experiment -> configured
    unit (``experiments.read_units``; absent: detected from ``sessions``' ``user_id``, see :func:`_with_users`);
    ``strata``, ``default_strata``: ``ppi_stratified``'s strata column per experiment, as ``experiment_effects``.
    """
    sessions = _with_users(sessions)
    predicted = sessions.filter(pl.col("prediction").is_not_null())
    if predicted.is_empty():
        return []
    s = settings or Settings()
    features = feature_names(predicted)
    unit_of = units_of(sessions, units or {})
    rows: list[HistoryRow] = []
    for exp in experiments_of(predicted, dict(controls)):
        unit = unit_of[exp.name]
        by_user = unit.unit == "user"
        in_exp = for_unit(predicted.filter(pl.col("experiment") == exp.name), unit)
        column = (strata or {}).get(exp.name, default_strata)
        if strata_problem(in_exp, column) is None:  # else no strata: ppi_stratified's rows are PPI++'s
            in_exp = in_exp.with_columns(pl.Series(STRATUM, stratum_labels(in_exp, column)))
        undated = in_exp["day"].null_count()
        undated_note = f"sessions without a start time left out: {undated}" if undated else None
        if not exp.treatments:
            rows.append(
                HistoryRow(experiment=exp.name, treatment=None, control=exp.control, method=NO_METHOD, unit=unit.unit,
                           note=_join_notes(exp.nothing_to_compare, undated_note))
            )  # fmt: skip
            continue
        dated = in_exp.filter(pl.col("day").is_not_null())
        for treatment in exp.treatments:
            if progress is not None:
                progress(f"history {exp.name}: {treatment} vs {exp.control}")
            arms = dated.filter(pl.col("variant").is_in([treatment, exp.control]))
            if arms.is_empty():
                rows.append(
                    HistoryRow(experiment=exp.name, treatment=treatment, control=exp.control, method=NO_METHOD,
                               unit=unit.unit,
                               note=_join_notes("no session of this comparison has a start time", undated_note))
                )  # fmt: skip
                continue
            # with each session's propensity made, the looks read no feature: each arm's columns are made once
            # (effects.ArmColumns) and every look takes the sessions started by its day from them
            arms = _with_propensity(arms, exp.name, (treatment, exp.control), features, s, by_user).drop(features)
            looks, period = look_days(arms["day"].to_list(), max_looks)
            period_note = f"one look per {period} days (history capped at {max_looks} looks)" if period > 1 else None
            parts = {v: arms.filter(pl.col("variant") == v) for v in (treatment, exp.control)}
            columns = [arm_columns(v, part, by_user=by_user) for v, part in parts.items()]
            days = [part["day"].to_numpy() for part in parts.values()]
            rated_before = -1
            for day in looks:
                upto = (days[0] <= np.datetime64(day), days[1] <= np.datetime64(day))
                n_rated = int((columns[0].rated & upto[0]).sum() + (columns[1].rated & upto[1]).sum())
                new_ratings = "no new rating since the previous look" if n_rated == rated_before else None
                rated_before = n_rated
                for r in _look_rows(exp.name, *columns, upto, s, planned_n, by_user):
                    note = _join_notes(r.note, new_ratings, period_note, exp.note, unit.note, undated_note)
                    rows.append(replace(r, day=day, note=note))
    return rows


def missing_looks(table: pl.DataFrame, expected: Mapping[tuple[str, str], Sequence[date]]) -> list[str]:
    """What the rows ``table`` (of ``estimates.effect_history``) lack against ``expected`` (:func:`expected_looks`).

    One entry per comparison and look day without a row for every METHODS entry, and per (comparison, day) row
    that is not an expected look; [] when the rows reconcile.
    """
    have: dict[tuple[str, str, date], set[str]] = {}
    for experiment, treatment, day, method in table.select("experiment", "treatment", "day", "method").iter_rows():
        if day is not None:
            have.setdefault((experiment, treatment, day), set()).add(method)
    problems = []
    wanted = {(e, t, d) for (e, t), days in expected.items() for d in days}
    for key in sorted(wanted):
        lacking = [m for m in METHODS if m not in have.get(key, set())]
        if lacking:
            problems.append(f"{key[0]}/{key[1]} on {key[2]}: no {', '.join(lacking)} row")
    problems += [f"{e}/{t} on {d}: a row for a day that is not a look" for e, t, d in sorted(set(have) - wanted)]
    return problems
