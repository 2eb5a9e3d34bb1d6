"""The stack's cost and gain at the paper's scale: what the modeling stage runs when "stack" is configured.

Data as ``bench/modeling.py`` (``simulate_sessions(36000, seed=7)``: ~1 800 rated, ~34 000 unrated sessions, 20
feature columns). Timed: ``stack.cross_validate_all`` of the tabular families with and without the stack (the
difference is the inner fits' cost; the families' rows are the same), then ``stack.stack_crossfit_predict`` (the
cross-fit stage when the stack is chosen: outer and inner fits of every family, every unrated session predicted by
every fold model). Printed: each row's MSE and Pearson r, the stack's weights per fold, the times and peak RSS.

    .venv/bin/python bench/stack.py                    # the paper's scale, the four tabular families, 5 seeds
    .venv/bin/python bench/stack.py --sessions 6000 --seeds 2
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pulse_pipeline.modeling.crossfit import oof_violations, pearson  # noqa: E402
from pulse_pipeline.modeling.stack import STACK, cross_validate_all, stack_crossfit_predict  # noqa: E402
from pulse_pipeline.synth import feature_matrix, simulate_sessions  # noqa: E402

BUDGET_SECONDS = 90.0
"""The modeling stage's budget at the paper's scale, with the text model and the stack (issue 13)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=36000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--families", default="ordinal_logit,random_forest,hist_gbm,lightgbm")
    args = parser.parse_args()
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    seeds = tuple(42 + i for i in range(args.seeds))
    print(f"load average before start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    table = simulate_sessions(args.sessions, seed=args.seed)
    X = feature_matrix(table)
    Xl, y, Xu = X[table.rated], table.label[table.rated], X[~table.rated]
    print(f"data: {len(table)} sessions, {len(y)} rated, {len(Xu)} unrated, {X.shape[1]} features\n")

    t0 = time.perf_counter()
    cross_validate_all(Xl, y, families, k=args.folds, seeds=seeds, stack=False)
    t_plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = cross_validate_all(Xl, y, families, k=args.folds, seeds=seeds, stack=True)
    t_cv = time.perf_counter() - t0
    for r in results:
        mse, rho = r.metric("mse"), r.metric("pearson")
        print(f"{r.family:<14} MSE {mse.mean:.4f} ± {mse.sd:.4f}   r {rho.mean:.4f} ± {rho.sd:.4f}")
    best = max((r for r in results if r.family in families), key=lambda r: r.metric("pearson").mean)
    stack = next(r for r in results if r.family == STACK)
    gain = stack.metric("pearson").mean - best.metric("pearson").mean
    print(f"\nstack r - best family ({best.family}) r: {gain:+.4f}")
    print(f"CV of {len(families)} families x {len(seeds)} seeds: {t_plain:.1f} s; with the stack {t_cv:.1f} s")

    t0 = time.perf_counter()
    fit, weights = stack_crossfit_predict(Xl, y, Xu, families, k=args.folds, seed=42)
    t_cf = time.perf_counter() - t0
    assert oof_violations(fit.fold, fit.train_index_by_fold) == 0
    print(f"cross-fit of the stack (seed 42): {t_cf:.1f} s; out-of-fold r {pearson(y, fit.oof)[0]:.4f}")
    for k, w in enumerate(weights.weights):
        print(
            f"  fold {k}: b {weights.intercepts[k]:+.3f}  "
            + "  ".join(f"{f} {x:.3f}" for f, x in zip(families, w, strict=True))
        )
    stage = t_cv + t_cf
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nstage (CV with the stack + its cross-fit): {stage:.1f} s (budget {BUDGET_SECONDS:.0f} s)")
    print(f"peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()
