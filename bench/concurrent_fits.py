"""Two processes fitting models at once: how much slower each is than one alone, with and without the thread limit.

Each process cross-validates the pipeline's model families (``modeling.crossfit.cross_validate``, k folds x seeds,
as the modeling stage does for Table 2) on the generator's session-level table (``simulate_sessions(60000,
seed=7)``: ~3 000 rated sessions x 20 features, the paper's scale). For each thread limit, PULSE_MODEL_THREADS =
the default and ``all`` (every usable core, as before the limit existed), it times the work in one process alone,
then in two processes started together, and prints the ratio (the slower of the two / alone). Issue 12's target:
two at once each within 2.5x of one alone.

Both worker processes of a limit start together, build the data and warm up (imports, one tiny fit per family)
before anything is timed; the first then works alone while the second waits on its stdin, then both work at once.

    .venv/bin/python bench/concurrent_fits.py                        # the paper's scale, all four families
    .venv/bin/python bench/concurrent_fits.py --families hist_gbm --folds 5 --seeds 5   # issue 12's 25 fits
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pulse_pipeline.modeling.crossfit import cross_validate  # noqa: E402
from pulse_pipeline.modeling.families import FAMILIES  # noqa: E402
from pulse_pipeline.settings import DEFAULT_MODEL_THREADS, model_threads, usable_cores  # noqa: E402
from pulse_pipeline.synth import feature_matrix, simulate_sessions  # noqa: E402

TARGET_RATIO = 2.5


def worker(args: argparse.Namespace) -> None:
    """Build the data, warm up, say ``ready``; then for each ``go`` line on stdin time the work and print it."""
    table = simulate_sessions(args.sessions, seed=7)
    X = feature_matrix(table)
    Xl, y = X[table.rated], table.label[table.rated]
    families = args.families.split(",")
    seeds = tuple(42 + i for i in range(args.seeds))
    for family in families:  # warm-up: lazy imports (lightgbm) and first-call costs stay out of the timings
        cross_validate(Xl[:40], y[:40], family, k=2, seeds=(0,))
    print(json.dumps({"ready": True, "threads": model_threads(), "rated": len(y), "features": X.shape[1]}), flush=True)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        seconds = {}
        for family in families:
            started = time.perf_counter()
            cross_validate(Xl, y, family, k=args.folds, seeds=seeds)
            seconds[family] = time.perf_counter() - started
        print(json.dumps({"seconds": seconds}), flush=True)


def start_worker(args: argparse.Namespace, threads: str) -> subprocess.Popen:
    command = [sys.executable, __file__, "--worker", "--sessions", str(args.sessions), "--families", args.families]
    command += ["--folds", str(args.folds), "--seeds", str(args.seeds)]
    env = {**os.environ, "PULSE_MODEL_THREADS": threads}
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def message(process: subprocess.Popen) -> dict:
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"a worker stopped early (exit code {process.wait()}); see its error above")
    return json.loads(line)


def run_limit(args: argparse.Namespace, threads: str) -> tuple[dict, dict, dict, dict]:
    """One limit (PULSE_MODEL_THREADS=``threads``): the first worker's ready message, its timings alone, and
    both workers' timings at once (seconds per family)."""
    first, second = start_worker(args, threads), start_worker(args, threads)
    try:
        ready = message(first)
        message(second)
        first.stdin.write("go\n")
        first.stdin.flush()
        alone = message(first)["seconds"]
        for process in (first, second):
            process.stdin.write("go\n")
            process.stdin.flush()
        pair = (message(first)["seconds"], message(second)["seconds"])
    finally:
        for process in (first, second):
            process.stdin.close()
            process.wait()
    return ready, alone, *pair


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=60000, help="sessions simulated; ~5 %% are rated")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=1, help="CV seeds per family, from 42")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    families = args.families.split(",")
    cores = usable_cores()
    print(
        f"load average before start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        f"({cores} usable cores, os.cpu_count() {os.cpu_count()})"
    )
    results = []
    for threads, label in ((str(DEFAULT_MODEL_THREADS), "default"), ("all", "no limit")):
        ready, alone, a, b = run_limit(args, threads)
        results.append((f"threads={ready['threads']} ({label})", alone, a, b))
    fits = len(families) * args.folds * args.seeds
    print(
        f"data: {ready['rated']} rated sessions x {ready['features']} features; per process: cross_validate of "
        f"{', '.join(families)} ({args.folds} folds x {args.seeds} CV seeds = {fits} fits, each with a predict)"
    )
    print("times in seconds; two at once = the slower of the two processes; ratio = two at once / alone")
    print("threads: OpenMP, BLAS and LightGBM; the random forest uses every usable core under both limits\n")
    header = f"{'family':<15}" + "".join(f"{name:>34}" for name, *_ in results)
    print(header)
    print(f"{'':<15}" + f"{'alone':>12}{'two at once':>14}{'ratio':>8}" * len(results))
    ratios = []
    for family in [*families, "total"]:
        row = f"{family:<15}"
        for _, alone, a, b in results:
            one = sum(alone.values()) if family == "total" else alone[family]
            two = max(sum(a.values()), sum(b.values())) if family == "total" else max(a[family], b[family])
            row += f"{one:12.2f}{two:14.2f}{two / one:8.2f}"
            if family == "total":
                ratios.append(two / one)
        print(row)
    print()
    for (name, *_), ratio in zip(results, ratios, strict=True):
        verdict = "within" if ratio <= TARGET_RATIO else "OVER"
        print(f"{name}: two at once / alone = {ratio:.2f} ({verdict} the {TARGET_RATIO}x target)")
    default_alone, all_alone = (sum(alone.values()) for _, alone, *_ in results)
    print(f"one process alone, default / no limit = {default_alone / all_alone:.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
