"""The agreement watch: does the model (and the LLM judge) still agree with people, window after window?

Why: a prediction-powered estimate gains on the naive one by as much as the model agrees with the ratings (PPI++'s
width factor is about sqrt(1 - rho^2 N / (n + N)) per arm, ``stats/ppi.py``). When a new agent version changes what
the features mean, or the LLM judge drifts, that gain falls silently. Its *validity* does not: the rectifier
(the ratings' mean error of the model) is computed per arm on that arm's own ratings, so a worse model widens the
interval, it does not bias it. The watch measures the agreement over time so that the fall is seen.

**Which sessions.** Rated sessions with an out-of-fold prediction (``modeling.predictions``: ``labeled`` and a
prediction) and a start time (``staging.sessions.started_at``); ``label`` and ``prediction`` on the normalized 0-1
scale, as the model was scored (Table 2). The arms: every experiment x variant of ``staging.assignments``, and
``all`` x ``all``, every such session pooled (arms read from a session field by ``arms_from`` are the estimates
stage's and are not split here: their sessions are in ``all``).

**Windows** (``windows``). A calendar week (Monday 00:00 to the next Monday, by the session's start, UTC) when the
median number of such sessions per week, over the weeks from the first to the last one holding any (empty weeks
count 0), is at least ``WINDOW_RATINGS``; otherwise every ``WINDOW_RATINGS`` ratings in the order of the sessions'
starts, counted back from the newest (so the newest window is always whole; the oldest holds what is left). The
same windows serve every arm. Why N = 80: the watch must see the drift the issue names, a fall of r from 0.5 to
0.1. atanh(0.5) - atanh(0.1) = 0.449; with n ratings in the newest window and a long run of at least 5 windows
before it, the rule below (disjoint 95 % intervals) catches it with probability
Phi((0.449 - 1.96 (a + b)) / sqrt(a^2 + b^2)), a = 1/sqrt(n - 3), b = 1/sqrt(5n - 3): 0.69 at n = 60, 0.84 at
n = 80, 0.93 at n = 100. 80 is the smallest round number above 80 % power from r alone (the other measures add
to it); fewer ratings per window cannot see the drift the watch is for.

**Measures**, each with a 95 % interval (``ALPHA``), over a window's rated sessions of one arm:

- ``oof_r``: Pearson r of the label and the out-of-fold prediction; Fisher-z interval
  tanh(atanh r -+ 1.96 / sqrt(n - 3)) (``stats.correlation.fisher_interval``; scipy's ``pearsonr`` gives the same).
- ``mse_vs_constant``: the **difference** MSE(constant) - MSE(model), the mean over the window of
  d_i = (y_i - c_i)^2 - (y_i - f_i)^2, with its paired t interval (``stats.agreement.paired_mean``). Positive: the
  model beats the constant. Why a difference: it is what a rating's rectifier saves at lambda = 1 (cross-PPI):
  Var(Y) - Var(Y - f) when both are centred, in squared label units; 0 means the model adds nothing, and "higher is
  better" holds for every measure, so one rule reads them all. The constant c_i is the **out-of-fold constant**:
  the mean label of the rated sessions in the other folds than the session's own (``modeling.predictions.fold``),
  what fold k's model was trained on, as Table 2's ``constant`` and ``recalibration.decide`` have it. Why not the
  mean of the labels known before the window: the model's out-of-fold predictions come from folds drawn across the
  whole history, so each was fitted on labels of its own window and later ones; a constant from the earlier
  windows alone would know less than the model, and the difference would measure that, not the model's skill (a
  shift of the ratings' level in a window would be counted as the model's merit).
- ``calibration_slope``: the least-squares slope b of the label on the prediction, se^2 = s^2 / sum (f - mean f)^2
  (``recalibration.calibration_slope``), t interval on n - 2 degrees of freedom. 1: well scaled; toward 0: the
  prediction's differences carry less and less of the ratings'.
- ``judge_kappa``, where the LLM judge ran (``features.judge_scores``, status ``ok``): Cohen's kappa of the judge's
  ``binary_satisfied`` and the person's verdict "rating >= 4 stars" (label >= 0.75: 4 = "Satisfied" on the judge's
  own Likert scale, ``features/prompts.py``; a thumb up is label 1, down 0), with Fleiss-Cohen-Everitt's
  large-sample se (``stats.agreement.cohen_kappa``). No existing rule of the modeling stage binarizes the ratings:
  Table 2 scores the judge's Likert score only (``comparison.JUDGE_AGREEMENT_SQL``).
- ``judge_r``: Pearson r of the judge's ``likert_score`` and the label, Fisher-z interval.

**The long run and the verdict.** For each window, the long run is the same measure, with its interval, over the
arm's rated sessions in every window *before* it (pooled, not averaged); the newest window's row thus holds the
long run over every earlier window, and each earlier row what the watch said then. ``below_long_run`` is true
exactly when both intervals exist and the window's upper bound is below the long run's lower bound
(``ci_high < long_run_ci_low``: the two 95 % intervals are disjoint, the window's below); NULL for an arm's first
window (no long run), when either interval is undefined, or when the window holds fewer than
``MIN_VERDICT_RATINGS`` (10) of the arm's ratings. For one measure the false-alarm rate under no change
is P(Z > 1.96 (a + b) / sqrt(a^2 + b^2)): at most 2.5 % (a long run far larger than the window), 0.7 % with 10
equal windows before it.

**The check** (``newest_falls``) warns when a row of the newest window, of any arm, has it for ``oof_r`` or
``judge_kappa``: one measure per agreement the watch is for. The model's r is the one PPI++'s gain is a function
of (sqrt(1 - rho^2 N / (n + N))); the judge's kappa is its verdict against people's. The other three are the same
agreements seen another way: the MSE difference and the slope fall with r, and also move with the level and scale
of the prediction, which PPI++'s lambda and the recalibration (``recalibration.py``) already absorb; the judge's r
on its Likert score moves with its kappa. Each keeps its own ``below_long_run`` in the table and the report, but a
warning on each would count one fall up to three times: measured on ``drift_stationary`` (150 replications, 11
windows each), warning on all five measures fired in 4.2 % of windows (5.9 % on another 60), on these two in
2.1 % (2.5 % in ``pulse validate``'s 500 replications), while both caught the ``drift`` scenario's fall in 94-96 %
of replications. ``pulse validate --scenarios
drift,drift_stationary`` (``studies/drift.py``) measures it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from .. import tables
from ..stars import stars_to_label
from ..stats.agreement import Agreement, cohen_kappa, paired_mean, t_quantile
from ..stats.correlation import fisher_interval
from ..warehouse import Warehouse
from .recalibration import calibration_slope

WINDOW_RATINGS = 80
"""N: the ratings a window needs (module docstring): weeks when the median week holds at least N, else windows of N."""
ALPHA = 0.05
MIN_VERDICT_RATINGS = 10
"""A window with fewer ratings (of the arm, with the measure's inputs) gets no verdict (``below_long_run`` NULL): the
normal approximations behind its intervals (Fisher's z, the t of a slope, kappa's large-sample se) rest on more
than a handful of 1-5 star ratings; at 3 or 4 an interval is either nearly all of [-1, 1] or, when the few ratings
happen to agree, spuriously narrow (3 equal ratings: slope 0 with se 0)."""
POOLED = "all"
"""The experiment and variant of the row that pools every rated session."""
WEEK = "week"
RATINGS = "ratings"
SATISFIED_LABEL = float(stars_to_label(4.0))
"""A person's verdict "satisfied": rating >= 4 stars, label >= 0.75 (a thumb up is 1)."""
MODEL_MEASURES = ("oof_r", "mse_vs_constant", "calibration_slope")
JUDGE_MEASURES = ("judge_kappa", "judge_r")
MEASURES = MODEL_MEASURES + JUDGE_MEASURES
WARNING_MEASURES = ("oof_r", "judge_kappa")
"""The measures whose fall the check warns about (module docstring: one per agreement the watch is for)."""

RATED_COLUMNS = ("session_id", "started_at", "label", "prediction", "fold", "judge_satisfied", "judge_likert")
"""The columns of the rated sessions ``agreement_rows`` reads (``load_rated``): one row per rated session."""
ARM_COLUMNS = ("session_id", "experiment", "variant")

RATED_SQL = f"""
SELECT p.session_id, s.started_at, p.label, p.prediction, p.fold,
       j.binary_satisfied AS judge_satisfied, CAST(j.likert_score AS DOUBLE) AS judge_likert
FROM {tables.PREDICTIONS.qualified} p
LEFT JOIN {tables.STAGING_SESSIONS.qualified} s USING (session_id)
LEFT JOIN (SELECT * FROM {tables.JUDGE_SCORES.qualified} WHERE status = 'ok'
           QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY model) = 1) j USING (session_id)
WHERE p.labeled AND p.label IS NOT NULL AND p.prediction IS NOT NULL
ORDER BY s.started_at, p.session_id
"""
ARMS_SQL = f"""SELECT DISTINCT session_id, experiment, variant FROM {tables.STAGING_ASSIGNMENTS.qualified}
WHERE experiment IS NOT NULL AND variant IS NOT NULL ORDER BY ALL"""


@dataclass(frozen=True)
class AgreementRow:
    """One row of ``modeling.agreement_history`` (its columns, in its order)."""

    window_kind: str  # 'week' | 'ratings'
    window_start: datetime  # the week's Monday 00:00, or the first rated session's start in a ratings window
    window_end: datetime  # the next Monday 00:00 (exclusive), or the last rated session's start (inclusive)
    experiment: str
    variant: str
    measure: str
    value: float
    ci_low: float
    ci_high: float
    n_ratings: int
    long_run_value: float | None
    long_run_ci_low: float | None
    long_run_ci_high: float | None
    below_long_run: bool | None
    note: str | None
    window_index: int  # 0 the oldest window
    long_run_n_ratings: int  # rated sessions of the arm (with the measure's inputs) in the windows before


def load_rated(wh: Warehouse) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(rated sessions with a start time, their arms, rated sessions left out for having no start time)."""
    rated = wh.frame(RATED_SQL)
    arms = wh.frame(ARMS_SQL)
    no_start = rated.filter(pl.col("started_at").is_null()).height
    return rated.filter(pl.col("started_at").is_not_null()), arms, no_start


def out_of_fold_constant(label: np.ndarray, fold: np.ndarray) -> np.ndarray:
    """Per session, the mean label of the sessions in the other folds (module docstring); a session without a fold
    (none should have one: rated sessions always do) gets the mean of every label, and a single fold NaN."""
    label = np.asarray(label, dtype=np.float64)
    fold = np.asarray(fold, dtype=np.float64)
    out = np.full(label.size, float(label.mean()) if label.size else math.nan)
    known = ~np.isnan(fold)
    total, count = float(label[known].sum()), int(known.sum())
    for k in np.unique(fold[known]):
        inside = fold == k
        rest = count - int(inside.sum())
        out[inside] = (total - float(label[inside].sum())) / rest if rest else math.nan
    return out


@dataclass(frozen=True)
class Windows:
    """Each session's window (``index``: 0 the oldest) and each window's bounds."""

    kind: str
    index: np.ndarray
    starts: list[datetime]
    ends: list[datetime]


def weekly_counts(started_at: Sequence[datetime]) -> np.ndarray:
    """Rated sessions per calendar week, from the first week holding one to the last, empty weeks 0."""
    monday = np.array([_monday(t) for t in started_at], dtype="datetime64[D]")
    weeks = ((monday - monday.min()).astype(np.int64) // 7) if monday.size else np.array([], dtype=np.int64)
    return np.bincount(weeks) if weeks.size else np.array([], dtype=np.int64)


def windows(started_at: Sequence[datetime], n: int = WINDOW_RATINGS) -> Windows:
    """The windows of sessions started at ``started_at`` (sorted oldest first): weeks, or every ``n`` ratings
    counted back from the newest (module docstring)."""
    started = list(started_at)
    counts = weekly_counts(started)
    if counts.size and float(np.median(counts)) >= n:
        monday = [_monday(t) for t in started]
        first = min(monday)
        index = np.array([(m - first).days // 7 for m in monday], dtype=np.int64)
        used = sorted(set(index.tolist()))
        renumber = {w: i for i, w in enumerate(used)}  # weeks with no rating hold no window
        starts = [first + timedelta(days=7 * w) for w in used]
        return Windows(
            WEEK, np.array([renumber[w] for w in index.tolist()]), starts, [s + timedelta(days=7) for s in starts]
        )
    total = len(started)
    blocks = np.array([(total - 1 - i) // n for i in range(total)], dtype=np.int64)  # 0: the newest n ratings
    index = (blocks.max() - blocks) if total else blocks
    bounds = [np.flatnonzero(index == w) for w in range(int(index.max()) + 1 if total else 0)]
    return Windows(RATINGS, index, [started[b[0]] for b in bounds], [started[b[-1]] for b in bounds])


def _monday(t: datetime) -> datetime:
    day = datetime(t.year, t.month, t.day)
    return day - timedelta(days=day.weekday())


def measure(name: str, rows: pl.DataFrame) -> Agreement:
    """Measure ``name`` over ``rows`` (rated sessions with ``label``, ``prediction``, ``constant``, judge columns)."""
    if name in JUDGE_MEASURES:
        rows = rows.filter(pl.col("judge_satisfied" if name == "judge_kappa" else "judge_likert").is_not_null())
    y = rows["label"].to_numpy().astype(np.float64)
    if name == "oof_r":
        return pearson(y, rows["prediction"].to_numpy().astype(np.float64))
    if name == "judge_r":
        return pearson(y, rows["judge_likert"].to_numpy().astype(np.float64))
    if name == "judge_kappa":
        return cohen_kappa(y >= SATISFIED_LABEL - 1e-9, rows["judge_satisfied"].to_numpy().astype(bool), alpha=ALPHA)
    f = rows["prediction"].to_numpy().astype(np.float64)
    if name == "mse_vs_constant":
        c = rows["constant"].to_numpy().astype(np.float64)
        return paired_mean((y - c) ** 2 - (y - f) ** 2, alpha=ALPHA)
    if name == "calibration_slope":
        return slope(y, f)
    raise ValueError(f"unknown measure {name!r}; expected one of {', '.join(MEASURES)}")


def pearson(x: np.ndarray, y: np.ndarray) -> Agreement:
    """Pearson r with its Fisher-z interval; NaN with a note when fewer than 3 pairs or a side is constant."""
    n = int(x.size)
    if n < 3:
        return Agreement(math.nan, math.nan, math.nan, n, f"{n} rated sessions: r needs at least 3")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return Agreement(math.nan, math.nan, math.nan, n, "a constant side: r is undefined")
    r = float(np.corrcoef(x, y)[0, 1])
    low, high = fisher_interval(r, n, "pearson", ALPHA)
    return Agreement(r, low, high, n, "3 rated sessions: the interval is all of [-1, 1]" if n == 3 else None)


def slope(y: np.ndarray, f: np.ndarray) -> Agreement:
    """The calibration slope of ``y`` on ``f`` with its t interval on n - 2 degrees of freedom."""
    b, se = calibration_slope(y, f)
    n = int(y.size)
    if math.isnan(b):
        return Agreement(math.nan, math.nan, math.nan, n, "fewer than 3 rated sessions or a constant prediction")
    if np.ptp(y) == 0:
        return Agreement(b, math.nan, math.nan, n, "every rating the same: the slope is 0 and has no interval")
    half = t_quantile(1.0 - ALPHA / 2.0, n - 2) * se
    return Agreement(b, b - half, b + half, n)


def _finite(*values: float) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def agreement_rows(
    rated: pl.DataFrame,
    arms: pl.DataFrame | None = None,
    *,
    window_ratings: int = WINDOW_RATINGS,
    progress: Callable[[str], None] | None = None,
) -> list[AgreementRow]:
    """The rows of ``modeling.agreement_history`` (module docstring) from ``rated`` (``RATED_COLUMNS``: one row per
    rated session with a start time) and ``arms`` (``ARM_COLUMNS``; None: the pooled arm only)."""
    if rated.is_empty():
        return []
    rated = rated.sort("started_at", "session_id")
    found = windows(rated["started_at"].to_list(), window_ratings)
    rated = rated.with_columns(
        pl.Series("window", found.index),
        pl.Series("constant", out_of_fold_constant(rated["label"].to_numpy(), rated["fold"].to_numpy())),
    )
    groups = [(POOLED, POOLED, rated)]
    if arms is not None and not arms.is_empty():
        joined = rated.join(arms.select(ARM_COLUMNS).unique(), on="session_id", how="inner")
        for (experiment, variant), part in joined.group_by("experiment", "variant", maintain_order=True):
            groups.append((experiment, variant, part))
    judged = rated["judge_satisfied"].is_not_null().any() or rated["judge_likert"].is_not_null().any()
    out: list[AgreementRow] = []
    groups = [groups[0], *sorted(groups[1:], key=lambda g: (str(g[0]), str(g[1])))]  # the pooled arm first
    for experiment, variant, part in groups:
        if progress is not None:
            progress(f"agreement watch: {experiment} / {variant}")
        part = part.sort("window", maintain_order=True)  # each window a slice, every earlier one the slice before it
        by_window = part["window"].to_numpy()
        firsts = np.flatnonzero(np.r_[True, by_window[1:] != by_window[:-1]])
        bounds = [
            (int(by_window[a]), int(a), int(b)) for a, b in zip(firsts, [*firsts[1:], by_window.size], strict=True)
        ]
        for name in MEASURES if judged else MODEL_MEASURES:
            for w, a, b in bounds:
                got = measure(name, part.slice(a, b - a))
                if name in JUDGE_MEASURES and got.n == 0:
                    continue  # the judge did not run on this window's rated sessions of the arm
                past = measure(name, part.slice(0, a)) if a else None
                below = None
                if past is not None and got.n >= MIN_VERDICT_RATINGS and _finite(got.ci_high, past.ci_low):
                    below = got.ci_high < past.ci_low
                out.append(
                    AgreementRow(
                        window_kind=found.kind,
                        window_start=found.starts[w],
                        window_end=found.ends[w],
                        experiment=experiment,
                        variant=variant,
                        measure=name,
                        value=got.value,
                        ci_low=got.ci_low,
                        ci_high=got.ci_high,
                        n_ratings=got.n,
                        long_run_value=None if past is None else past.value,
                        long_run_ci_low=None if past is None else past.ci_low,
                        long_run_ci_high=None if past is None else past.ci_high,
                        below_long_run=below,
                        note=_note(got, past, few=past is not None and got.n < MIN_VERDICT_RATINGS),
                        window_index=int(w),
                        long_run_n_ratings=0 if past is None else past.n,
                    )
                )
    return out


def _note(got: Agreement, past: Agreement | None, few: bool = False) -> str | None:
    notes = []
    if got.note:
        notes.append(got.note)
    if few:
        notes.append(f"{got.n} ratings, fewer than {MIN_VERDICT_RATINGS}: no verdict against the long run")
    if past is None:
        notes.append("the arm's first window: no long run to compare with")
    elif past.note:
        notes.append(f"long run: {past.note}")
    return "; ".join(notes) or None


def newest_below(rows: Sequence[AgreementRow]) -> list[AgreementRow]:
    """The rows of the newest window (the highest ``window_index``) whose interval lies below the long run's, every
    measure (empty: nothing fell, or no window has a long run yet)."""
    if not rows:
        return []
    newest = max(r.window_index for r in rows)
    return [r for r in rows if r.window_index == newest and r.below_long_run]


def newest_falls(rows: Sequence[AgreementRow]) -> list[AgreementRow]:
    """What the check warns about: the rows of ``newest_below`` whose measure is one of ``WARNING_MEASURES``."""
    return [r for r in newest_below(rows) if r.measure in WARNING_MEASURES]


WHAT_IT_MEANS = (
    "The prediction-powered estimates gain on the naive ones by as much as the model (and the LLM judge behind its"
    " features) agrees with people. A newest window below the long run means that gain is falling: the PPI++, cross-"
    "PPI and AIPW intervals of sessions like these get wider, closer to the naive ones. They stay valid: the"
    " rectifier is computed per arm from the arm's own ratings, so a worse model costs width, not bias."
)
WHAT_TO_DO = (
    "Look at what changed in that window (a new agent version, a new task mix, a changed judge model or prompt):"
    " the report's section 'Does the model still agree with people?' plots each measure by window. If the"
    " features mean something else now, refit (`pulse materialize` refits on the next day's first run; more"
    " ratings of the new sessions help most) or re-run `pulse discover` for features that fit the new agent; if"
    " the judge drifted, pin its model and prompt version. Until then read the estimates' widths, not the model's"
    " past gain; nothing needs to be discarded."
)


def load_history(wh: Warehouse) -> list[AgreementRow]:
    """The stored rows of ``modeling.agreement_history`` (what the check reads)."""
    frame = wh.frame(f"SELECT * FROM {tables.AGREEMENT_HISTORY.qualified} ORDER BY window_index, experiment, variant")
    return [AgreementRow(**r) for r in frame.iter_rows(named=True)]


def describe_fall(row: AgreementRow) -> str:
    """One fall in words: which arm and measure, its value and interval against the long run's."""
    arm = "every rated session" if row.experiment == POOLED else f"{row.experiment} / {row.variant}"
    return (
        f"{row.measure} of {arm} in the window from {row.window_start:%Y-%m-%d}: {row.value:.3f}"
        f" [{row.ci_low:.3f}, {row.ci_high:.3f}] on {row.n_ratings} ratings, below the long run's"
        f" {row.long_run_value:.3f} [{row.long_run_ci_low:.3f}, {row.long_run_ci_high:.3f}]"
        f" on {row.long_run_n_ratings}"
    )
