"""Estimates-stage benchmark: our statistics side by side with their references, timed in one run (best of 5).

- PPI++ interval of one arm, n = 2 000 labels and N = 1 000 000 unlabeled predictions:
  ``pulse_pipeline.stats.ppi.ppi_mean`` vs ``ppi_py.ppi_mean_ci`` on the same arrays (target: ours <= 0.2x).
- Two-sided permutation test, 10 000 permutations, 2 000 labels (1 000 per arm):
  ``pulse_pipeline.stats.naive.permutation_pvalue`` vs ``scipy.stats.permutation_test`` (target: ours <= 0.5x).
- Percentile bootstrap of the difference, 10 000 resamples, 1 000 labels per arm (no reference: time only).
- The estimation stage at the paper's scale (one run): the generator's session-level table, 36 000 sessions in
  4 comparisons, as the ``assigned_sessions`` frame the pipeline reads, predictions cross-fit beforehand (the
  model stage's work, untimed); timed, with the pipeline's own functions: the in-sample model the ``ppi_insample``
  rows need, every other method of every comparison with the pipeline's settings (10 000 resamples and
  permutations), and the tables around the estimate (feature comparisons, label shift, subgroups, power).

    .venv/bin/python bench/estimation.py
    .venv/bin/python bench/estimation.py --repeats 3 --unlabeled 5000000
    .venv/bin/python bench/estimation.py --stage-only
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pulse_pipeline.stats.naive import bootstrap_difference, permutation_pvalue  # noqa: E402
from pulse_pipeline.stats.ppi import ppi_mean  # noqa: E402


def best_of(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Minimum wall time over ``repeats`` calls (after one untimed warm-up call) and the last result."""
    result = fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def _row(label: str, ours: float, ref: float | None, target: float | None) -> None:
    if ref is None:
        print(f"  {label:<52} {ours * 1e3:9.1f} ms")
        return
    ratio = ours / ref
    verdict = "OK" if target is None or ratio <= target else "MISSED"
    print(f"  {label:<46} {ours * 1e3:9.1f} ms  ref {ref * 1e3:9.1f} ms  ratio {ratio:5.3f} (<= {target}) {verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--labels", type=int, default=2_000)
    ap.add_argument("--unlabeled", type=int, default=1_000_000)
    ap.add_argument("--permutations", type=int, default=10_000)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=36_000, help="sessions for the stage timing")
    ap.add_argument("--stage-only", action="store_true", help="time only the estimation stage")
    args = ap.parse_args()
    if not args.stage_only:
        statistics(args)
    stage(args.sessions)


def statistics(args: argparse.Namespace) -> None:

    import ppi_py
    from scipy import stats

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    n, N = args.labels, args.unlabeled
    x = rng.normal(size=n + N)
    y = np.clip(np.round(4.0 + 0.3 * x[:n] + rng.normal(size=n)), 1, 5)
    f, fu = 3.9 + 0.5 * x[:n], 3.9 + 0.5 * x[n:]
    print(f"numpy {np.__version__}, ppi-python {version('ppi-python')}, best of {args.repeats}")

    print(f"PPI++ mean, n = {n}, N = {N:,}")
    t_ours, ours = best_of(lambda: ppi_mean(y, f, fu, alpha=0.05), args.repeats)
    t_ref, (lo, hi) = best_of(lambda: ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05), args.repeats)
    _row("ppi_mean vs ppi_py.ppi_mean_ci", t_ours, t_ref, 0.2)
    diff = max(abs(ours.ci_low - float(lo[0])), abs(ours.ci_high - float(hi[0])))
    print(f"  interval [{ours.ci_low:.6f}, {ours.ci_high:.6f}], lam {ours.lam:.4f}, max |ours - ppi_py| = {diff:.1e}")

    half = n // 2
    y_t, y_c = y[:half], y[half:]
    B = args.permutations
    print(f"Permutation test, {B:,} permutations, {half} + {n - half} labels")
    t_ours, p_ours = best_of(lambda: permutation_pvalue(y_t, y_c, n_permutations=B, seed=0), args.repeats)

    def scipy_perm():
        return stats.permutation_test(
            (y_t, y_c), lambda a, b, axis: a.mean(axis) - b.mean(axis), vectorized=True, n_resamples=B, random_state=0
        ).pvalue

    t_ref, p_ref = best_of(scipy_perm, args.repeats)
    _row("permutation_pvalue vs scipy.permutation_test", t_ours, t_ref, 0.5)
    print(f"  p = {p_ours:.4f} (ours), {p_ref:.4f} (scipy)")

    R = args.resamples
    print(f"Percentile bootstrap, {R:,} resamples, {half} + {n - half} labels")
    t_boot, b = best_of(lambda: bootstrap_difference(y_t, y_c, n_resamples=R, seed=0), args.repeats)
    _row("bootstrap_difference", t_boot, None, None)
    print(f"  estimate {b.estimate:.4f}, 95% CI [{b.ci_low:.4f}, {b.ci_high:.4f}], se {b.se:.4f}")


def stage(n_sessions: int) -> None:
    import polars as pl

    from pulse_pipeline.estimates.effects import Settings
    from pulse_pipeline.estimates.experiment_effects import experiment_effect_rows
    from pulse_pipeline.estimates.experiments import experiments_of
    from pulse_pipeline.estimates.feature_comparisons import feature_comparison_rows
    from pulse_pipeline.estimates.label_shift import label_shift_rows
    from pulse_pipeline.estimates.power import power_rows
    from pulse_pipeline.estimates.subgroups import DEFAULT_MIN_RATINGS, subgroup_effect_rows
    from pulse_pipeline.modeling.crossfit import crossfit_predict
    from pulse_pipeline.modeling.data import ModelingData
    from pulse_pipeline.modeling.insample import insample_predictions
    from pulse_pipeline.stars import stars_to_label
    from pulse_pipeline.synth import CONTROLS, EXPERIMENTS, FEATURE_NAMES, feature_matrix, simulate_sessions

    table = simulate_sessions(n_sessions, seed=7)
    X, rated = feature_matrix(table), np.asarray(table.rated, dtype=bool)
    stars = np.where(rated, np.asarray(table.label, dtype=np.float64), np.nan)
    y = stars_to_label(stars)
    cf = crossfit_predict(X[rated], y[rated], X[~rated], "hist_gbm")
    prediction = np.empty(len(table))
    prediction[rated], prediction[~rated] = cf.oof, cf.unlabeled
    session_ids = np.asarray(table.session_id)
    # the assigned_sessions frame the pipeline reads: keys, then the session features
    sessions = pl.DataFrame(
        {
            "session_id": session_ids,
            "experiment": np.asarray(table.experiment),
            "variant": np.asarray(table.variant),
            "labeled": rated,
            "label": y,
            "prediction": prediction,
        }
    ).with_columns(pl.col("label").fill_nan(None))
    sessions = sessions.hstack(pl.DataFrame(X, schema=list(FEATURE_NAMES)))
    print(f"\nEstimation stage: {len(table):,} sessions, {rated.sum():,} rated, {len(EXPERIMENTS)} experiments")

    started = time.perf_counter()
    insample_predictions(ModelingData(tuple(FEATURE_NAMES), session_ids, X, stars), "random_forest")
    t_insample = time.perf_counter() - started

    started = time.perf_counter()
    effects = experiment_effect_rows(sessions, dict(CONTROLS), Settings())
    t_effects = time.perf_counter() - started
    comparisons = len({(r.experiment, r.treatment) for r in effects})

    exps = experiments_of(sessions, dict(CONTROLS))
    oof_rho = {(r.experiment, r.treatment): r.oof_rho for r in effects if r.method == "naive_welch"}
    started = time.perf_counter()
    feature_comparison_rows(sessions, list(FEATURE_NAMES), exps)
    label_shift_rows(sessions, list(FEATURE_NAMES))
    subgroup_effect_rows(sessions, exps, DEFAULT_MIN_RATINGS)
    power_rows(sessions, exps, oof_rho)
    t_around = time.perf_counter() - started
    _row("in-sample random forest (for ppi_insample)", t_insample, None, None)
    _row(f"every method of {comparisons} comparisons", t_effects, None, None)
    _row("feature comparisons, label shift, subgroups, power", t_around, None, None)
    _row("estimation stage (sum)", t_insample + t_effects + t_around, None, None)


if __name__ == "__main__":
    main()
