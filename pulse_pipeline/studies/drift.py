"""The ``drift`` and ``drift_stationary`` validation scenarios: does the agreement watch see the model stop agreeing
with people, and stay quiet when nothing changed?

The generator (``draw``): ``weeks`` calendar weeks (12) of rated sessions, ``n_per_arm`` ratings per arm per week
(50; two arms, gpt-5 and claude-4-sonnet of llm-backbone, so 100 a week pooled: weekly windows, since 100 >=
``WINDOW_RATINGS`` = 80), each session's start uniform in its week. Each session has a latent satisfaction
u ~ N(0, 1); its stars cut u at the normal quantiles of the shares ``STAR_SHARES`` (8, 12, 20, 30, 30 % for 1..5
stars, a typical skew toward content users); its label is (stars - 1) / 4. The model's out-of-fold prediction is

    f = mean(label) + r sd(label) (c u + sqrt(1 - c^2) e),   c = r / corr(label, u),   e ~ N(0, 1),

so corr(label, f) = r exactly (in expectation) and, with r = ``R_BEFORE``, the calibration slope is 1. In
``drift`` the last ``CHANGE_WEEKS`` (2) weeks have r = ``R_AFTER`` (0.1) with the same spread of f (what a model
whose features changed meaning does: it still varies as much, and means less; its slope falls to 0.2); in
``drift_stationary`` every week has r = 0.5. Folds are drawn uniformly from 5 (the out-of-fold constant). An LLM
judge ran on every session, unchanged over time: its Likert score cuts v = 0.6 u + 0.8 e' at the same quantiles
and its binary verdict is Likert >= 4.

Each replication calls the watch's own functions, ``modeling.agreement_history.agreement_rows`` (every window's
rows, each with the long run over the windows before it) and ``newest_falls`` (the check's rule) on the rows up to
window w, for every window w that has a long run: "fired at w" is what the check would have said at the end of
window w. (The rows of windows up to w depend on the sessions of later windows only through the out-of-fold
constant, as the pipeline's do: its cross-fit spans the whole history.) The rows have
``scenario.ReplicationRow``'s fields, so ``coverage.summarize`` and ``estimates.coverage_validation`` take them;
per replication one row for ``watch`` (any measure of any arm: the check) and one per measure (any arm):

- ``covered``: fired at the first window after the change (the first with at least half its ratings from the
  changed weeks; in ``drift_stationary`` the same window position): the ``coverage`` column is the share of
  replications where it fired there: detection in ``drift``, a false alarm in ``drift_stationary``;
- ``flagged``: fired at the window after that (the second changed week): ``share_flagged``;
- ``error``: the share of the windows before the change (``drift``) or of every window with a long run
  (``drift_stationary``) where it fired: the ``bias`` column is the false alarms per window;
- ``width``: the width of the pooled arm's ``oof_r`` interval at the first window after the change.

Targets (``check_drift`` returns the unmet ones): ``drift``: the watch fires at the first window after the change in
at least ``DETECTION_MIN`` (80 %) of replications at the generator's 100 ratings a week; ``drift_stationary``: it
fires in at most ``FALSE_ALARM_MAX`` (5 %) of windows (the ``bias`` column of ``watch``).

Measured (``pulse validate --scenarios drift,drift_stationary --replications 500 --workers 1``, seed 0, 140 s):
``drift``: the check fired at the first window after the change in 96.4 % of replications (oof_r alone 96.2 %,
mse_vs_constant 94.2 %, calibration_slope 92.0 %), at the second in 93 %, and in 2.2 % of the windows before the
change; ``drift_stationary``: in 2.5 % of windows (2.8 % at the change window's position). With 40 ratings per arm
a week (weekly windows of 80) 91.7 % and 3.0 %; with 25 (windows of 80 ratings) 83.7 % and 2.0 % (300
replications each). Every target met.

Deterministic in ``seed``.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from functools import lru_cache

import numpy as np
import polars as pl
from scipy import stats

from ..modeling.agreement_history import (
    MEASURES,
    POOLED,
    AgreementRow,
    agreement_rows,
    newest_below,
    newest_falls,
    windows,
)
from .scenario import CONTROL, EXPERIMENT, TREATMENT, value

WEEKS = 12
CHANGE_WEEKS = 2
N_PER_ARM = 50
R_BEFORE = 0.5
R_AFTER = 0.1
JUDGE_LATENT_R = 0.6
FOLDS = 5
STAR_SHARES = (0.08, 0.12, 0.20, 0.30, 0.30)
FIRST_MONDAY = datetime(2025, 6, 2)
WATCH = "watch"
DETECTION_MIN = 0.80
FALSE_ALARM_MAX = 0.05


@lru_cache(maxsize=1)
def label_moments() -> tuple[float, float, float]:
    """(mean, sd, corr(label, u)) of the label g(u) = (stars - 1) / 4 with stars cut from u ~ N(0, 1) at
    ``STAR_SHARES``' quantiles, exactly: E[g(u) u] = sum_k g_k (phi(c_{k-1}) - phi(c_k)) over the cuts c, and
    corr = E[g(u) u] / sd(g) since sd(u) = 1."""
    cuts = stats.norm.ppf(np.cumsum(STAR_SHARES)[:-1])
    edges = np.concatenate([[-np.inf], cuts, [np.inf]])
    g = (np.arange(1, 6) - 1) / 4.0
    p = np.asarray(STAR_SHARES)
    moment = float(np.sum(g * (stats.norm.pdf(edges[:-1]) - stats.norm.pdf(edges[1:]))))
    mean = float(np.sum(p * g))
    sd = math.sqrt(float(np.sum(p * g**2)) - mean**2)
    return mean, sd, moment / sd


def stars_of_latent(latent: np.ndarray) -> np.ndarray:
    """1-5 stars cut from a standard normal latent at the quantiles of ``STAR_SHARES``."""
    cuts = stats.norm.ppf(np.cumsum(STAR_SHARES)[:-1])
    return 1.0 + np.searchsorted(cuts, latent).astype(np.float64)


def draw(
    seed: int, *, drift: bool, weeks: int = WEEKS, n_per_arm: int = N_PER_ARM, change_weeks: int = CHANGE_WEEKS
) -> tuple[pl.DataFrame, pl.DataFrame, datetime]:
    """(rated sessions as ``agreement_history.RATED_COLUMNS``, their arms, when the change starts) (docstring)."""
    rng = np.random.default_rng(seed)
    n = 2 * n_per_arm * weeks
    week = np.repeat(np.arange(weeks), 2 * n_per_arm)
    arm = np.tile(np.repeat([TREATMENT, CONTROL], n_per_arm), weeks)
    u = rng.normal(size=n)
    label = (stars_of_latent(u) - 1.0) / 4.0
    changed = week >= weeks - change_weeks
    r = np.where(changed & drift, R_AFTER, R_BEFORE)
    mean, sd, latent = label_moments()
    c = r / latent
    f = mean + R_BEFORE * sd * (c * u + np.sqrt(1.0 - c**2) * rng.normal(size=n))
    likert = stars_of_latent(JUDGE_LATENT_R * u + math.sqrt(1.0 - JUDGE_LATENT_R**2) * rng.normal(size=n))
    seconds = rng.uniform(0.0, 7 * 86400.0, size=n)
    started = [FIRST_MONDAY + timedelta(days=7 * int(w), seconds=float(s)) for w, s in zip(week, seconds, strict=True)]
    ids = [f"drift-{seed}-{i:05d}" for i in range(n)]
    rated = pl.DataFrame(
        {
            "session_id": ids,
            "started_at": started,
            "label": label,
            "prediction": f,
            "fold": rng.integers(0, FOLDS, size=n),
            "judge_satisfied": likert >= 4,
            "judge_likert": likert,
        }
    )
    arms = pl.DataFrame({"session_id": ids, "experiment": EXPERIMENT, "variant": arm})
    return rated, arms, FIRST_MONDAY + timedelta(days=7 * (weeks - change_weeks))


def fired(rows: list[AgreementRow], window: int) -> set[str]:
    """What the watch says when ``window`` is the newest: the measures whose interval lies below the long run in
    some arm (``newest_below``), plus ``WATCH`` when the check warns (``newest_falls``)."""
    upto = [r for r in rows if r.window_index <= window]
    return {r.measure for r in newest_below(upto)} | ({WATCH} if newest_falls(upto) else set())


def replicate_drift(
    seed: int,
    scenario: str = "drift",
    n_per_arm: int = N_PER_ARM,
    rated_fraction: float | None = None,
    family: str | None = None,
) -> list[dict]:
    """One replication of ``drift`` or ``drift_stationary`` (module docstring); ``n_per_arm``: ratings per arm per
    week. ``rated_fraction`` and ``family`` are ``pulse validate``'s options for the other scenarios: every session
    drawn here is rated and no model is fit (the predictions are drawn), so they are ignored."""
    rated, arms, change = draw(seed, drift=scenario == "drift", n_per_arm=n_per_arm)
    rows = agreement_rows(rated, arms)
    started = rated.sort("started_at", "session_id")["started_at"]
    share = (
        pl.DataFrame({"window": windows(started.to_list()).index, "after": (started >= change).to_numpy()})
        .group_by("window")
        .agg(pl.col("after").mean())
    )
    first = int(share.filter(pl.col("after") >= 0.5)["window"].min())
    last = max(r.window_index for r in rows)
    by_window = {w: fired(rows, w) for w in range(1, last + 1)}
    before = range(1, first) if scenario == "drift" else range(1, last + 1)
    width = next(
        (
            r.ci_high - r.ci_low
            for r in rows
            if r.window_index == first and r.experiment == POOLED and r.measure == "oof_r"
        ),
        math.nan,
    )
    out = []
    for method in (WATCH, *MEASURES):

        def hit(w: int, method: str = method) -> bool:
            return method in by_window.get(w, set())

        out.append(
            dict(
                scenario=scenario,
                method=method,
                covered=hit(first),
                width=float(width),
                error=float(np.mean([hit(w) for w in before])) if len(before) else math.nan,
                flagged=hit(first + 1),
            )
        )
    return out


TARGETS = {
    "drift": (
        "coverage",
        lambda v: v >= DETECTION_MIN,
        f"fires at the first window after the change >= {DETECTION_MIN:.0%}",
    ),
    "drift_stationary": ("bias", lambda v: v <= FALSE_ALARM_MAX, f"fires in <= {FALSE_ALARM_MAX:.0%} of windows"),
}
"""Per scenario: the summary column the target reads, the test, and the target in words (module docstring)."""


def check_drift(frame: pl.DataFrame, scenario: str) -> list[str]:
    """The target of ``scenario`` (module docstring) a ``coverage.summarize`` frame does not meet, in words; []
    when it is met. A missing ``scenario``/``watch`` row is unmet."""
    column, ok, target = TARGETS[scenario]
    v = value(frame, scenario, WATCH, column)
    if v is None or math.isnan(v):
        return [f"{scenario} {WATCH} {target}: no row"]
    return [] if ok(v) else [f"{scenario} {WATCH} {target}: got {v:.1%}"]
