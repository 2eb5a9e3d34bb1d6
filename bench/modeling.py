"""Modeling benchmark at the paper's scale: cross-validate every family (5 folds x 5 seeds), cross-fit predictions
for every session, choose a family, permutation importance of the chosen one; time each step and peak RSS.

The data are the generator's session-level table (``simulate_sessions(36000, seed=7)``: ~1 800 rated, ~34 000
unrated sessions), with the counts, tone, finish flag and task-type one-hot as features (20 columns), so the
numbers measure the models, not the warehouse.

    .venv/bin/python bench/modeling.py                          # the paper's scale, the four tabular families
    .venv/bin/python bench/modeling.py --seeds 2 --families hist_gbm,lightgbm
    .venv/bin/python bench/modeling.py --pad-features 40     # 60 columns, like a wide table with a rubric
    .venv/bin/python bench/modeling.py --stage               # the stage itself, text and stack, on a warehouse
    .venv/bin/python bench/modeling.py --stage --profile-fits --workdir /tmp/bench   # CPU of each kind of fit

``--stage`` measures what the pipeline's modeling step (``defs/modeling/assets.py``' ``models``) runs, on a
warehouse built from a synthetic corpus of ``--sessions`` sessions (written and ingested once with ``pulse ingest``,
kept under --workdir): load every session's features and the rated sessions' text, cross-validate every configured
family, the text model and the stack keeping seed 42's fits, then the cross-fit of the chosen family from those fits
(vectorize and predict the unrated sessions a chunk at a time, importance and top terms); wall and CPU seconds of
the process and its workers per step. The session-level table above has no text, so only this mode measures the
text model. ``--stage --profile-fits`` prints the CPU seconds of one fit of each kind instead, and how many of
each the step runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pulse_pipeline.modeling.crossfit import (  # noqa: E402
    CVResult,
    choose_family,
    cross_validate,
    crossfit_predict,
    oof_violations,
    pearson,
)
from pulse_pipeline.modeling.families import FAMILIES  # noqa: E402
from pulse_pipeline.modeling.importance import permutation_importance_oof  # noqa: E402
from pulse_pipeline.synth import FEATURE_NAMES, feature_matrix, simulate_sessions  # noqa: E402

TARGET_SECONDS = 60.0
STAGE_TARGET_SECONDS = 90.0
"""The modeling stage with the text model and the stack at paper scale (issue 13), and its memory target."""
STAGE_TARGET_MB = 2048.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process, its finished children and every live process under it (the
    worker processes of ``modeling/workers.py`` live on between steps, so ``RUSAGE_CHILDREN`` alone misses them).
    Why CPU and not wall time: on a machine shared with other runs, wall time measures the neighbours too."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime
    parent_of: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # the process ended while being read
            continue
        pid = int(stat.parent.name)
        parent_of[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])
    tree, grown = {os.getpid()}, True
    while grown:
        below = {p for p, parent in parent_of.items() if parent in tree} - tree
        tree |= below
        grown = bool(below)
    return total + sum(ticks.get(p, 0) for p in tree - {os.getpid()}) / _TICKS


def fmt(result: CVResult, name: str) -> str:
    m = result.metric(name)
    return f"{m.mean:.3f} ± {m.sd:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=36000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--seeds", type=int, default=5, help="CV seeds, from 42 (the paper: 42)")
    parser.add_argument("--folds", type=int, default=5)
    # the generator's session-level model has no text: the text family and the stack are measured by bench/stack.py
    parser.add_argument("--families", default=",".join(f for f in FAMILIES if f not in ("text", "stack")))
    parser.add_argument(
        "--pad-features",
        type=int,
        default=0,
        help="append this many irrelevant columns (Poisson(1) counts and 0/1 flags, half each): the real "
        "features.session_features has ~60 columns once the rubric's one-hot options are added",
    )
    parser.add_argument("--stage", action="store_true", help="time the two modeling assets on a warehouse (see above)")
    parser.add_argument(
        "--profile-fits",
        action="store_true",
        help="with --stage: CPU seconds of one fit of each kind (one outer fold, one thread) instead of the stage",
    )
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    if args.stage and args.profile_fits:
        profile_fits(args.sessions, args.seed, args.folds, args.workdir)
        return
    if args.stage:
        run_stage(args.sessions, args.seed, args.seeds, args.folds, args.workdir)
        return
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    seeds = tuple(42 + i for i in range(args.seeds))

    print(f"load average before start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    started = time.perf_counter()
    table = simulate_sessions(args.sessions, seed=args.seed)
    X, names = feature_matrix(table), list(FEATURE_NAMES)
    if args.pad_features:
        rng = np.random.default_rng(0)
        n_counts = args.pad_features // 2
        pad = np.column_stack(
            [
                rng.poisson(1.0, (len(table), n_counts)),
                rng.random((len(table), args.pad_features - n_counts)) < 0.2,
            ]
        ).astype(np.float64)
        X = np.column_stack([X, pad])
        names += [f"pad_{j}" for j in range(args.pad_features)]
    Xl, y, Xu = X[table.rated], table.label[table.rated], X[~table.rated]
    t_data = time.perf_counter() - started
    print(
        f"data: {len(table)} sessions, {len(y)} rated, {len(Xu)} unrated, {X.shape[1]} features "
        f"({t_data:.2f} s to simulate)"
    )
    print(f"cross-validation: {args.folds} folds x {len(seeds)} seeds = {args.folds * len(seeds)} fits per family\n")

    header = f"{'family':<14} {'CV s':>7} {'cross-fit s':>11}   {'MSE':>13} {'MAE':>13} {'Pearson r':>13}"
    print(header)
    print("-" * len(header))
    results: list[CVResult] = []
    crossfits = {}
    timings: dict[str, tuple[float, float]] = {}
    for family in families:
        t0 = time.perf_counter()
        result = cross_validate(Xl, y, family, k=args.folds, seeds=seeds)
        t1 = time.perf_counter()
        cf = crossfit_predict(Xl, y, Xu, family, k=args.folds, seed=42)
        t2 = time.perf_counter()
        assert oof_violations(cf.fold, cf.train_index_by_fold) == 0
        results.append(result)
        crossfits[family] = cf
        timings[family] = (t1 - t0, t2 - t1)
        print(
            f"{family:<14} {t1 - t0:7.2f} {t2 - t1:11.2f}   {fmt(result, 'mse'):>13} {fmt(result, 'mae'):>13} "
            f"{fmt(result, 'pearson'):>13}"
        )

    chosen = choose_family(results, by="pearson")
    cf = crossfits[chosen.family]
    r, _ = pearson(y, cf.oof)
    print(
        f"\nchosen: {chosen.family} (highest mean Pearson {chosen.metric('pearson').mean:.3f}); "
        f"cross-fit OOF Pearson (seed 42) {r:.3f}; oof_violations 0 of {len(y)}"
    )
    # the memory a run keeps: the chosen family's fold models (the others would be dropped after predicting)
    for family in families:
        if family != chosen.family:
            del crossfits[family]

    t0 = time.perf_counter()
    importance = permutation_importance_oof(cf, Xl, y, names, n_repeats=5, seed=0)
    t_imp = time.perf_counter() - t0
    top = ", ".join(f"{i.feature} {i.mean:.3f}" for i in importance[:5])
    print(f"permutation importance ({chosen.family}, 5 repeats x {cf.k} folds): {t_imp:.2f} s; top 5: {top}")

    total = time.perf_counter() - started
    modeling = sum(a + b for a, b in timings.values()) + t_imp
    # what the Dagster stage runs: CV of every family, then cross-fit and importance of the chosen one only
    stage = sum(cv for cv, _ in timings.values()) + timings[chosen.family][1] + t_imp
    print(f"\nstage as the pipeline runs it (CV all, cross-fit + importance of {chosen.family}): {stage:.2f} s")
    print(f"everything above (cross-fit of every family too): {modeling:.2f} s; total with data: {total:.2f} s")
    print(f"peak RSS: {peak_rss_mb():.0f} MB")
    verdict = "within" if total <= TARGET_SECONDS else "OVER"
    print(f"target {TARGET_SECONDS:.0f} s: {verdict}")
    slowest = max(timings, key=lambda f: sum(timings[f]))
    share = sum(timings[slowest]) / modeling
    print(f"slowest family: {slowest} ({sum(timings[slowest]):.2f} s, {share:.0%} of the modeling time)")


def stage_home(sessions: int, seed: int, workdir: Path) -> Path:
    """A PULSE_HOME holding a synthetic corpus of ``sessions`` sessions, ingested once (with one cheap family and
    one seed: the models it fits are not the ones measured) and reused."""
    home = workdir / f"modeling-home-{sessions}-seed{seed}"
    if not (home / "pulse.duckdb").exists():
        from pulse_pipeline.synth import write_corpus

        corpus = workdir / f"corpus-{sessions}-seed{seed}"
        if not (corpus / "_truth.json").exists():
            print(f"writing {sessions} synthetic sessions to {corpus}", flush=True)
            write_corpus(corpus, sessions, seed=seed)
        print(f"ingesting them into {home} (once)", flush=True)
        env = {**os.environ, "PULSE_HOME": str(home), "PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_CV_SEEDS": "1"}
        subprocess.run([sys.executable, "-m", "pulse_pipeline.cli", "ingest", str(corpus)], env=env, check=True)
    return home


def run_stage(sessions: int, seed: int, n_seeds: int, folds: int, workdir: Path) -> None:
    """Time the modeling step as the asset runs it, with every family (text and stack included)."""
    import polars as pl

    from pulse_pipeline.connections import connect
    from pulse_pipeline.modeling.comparison import compare_models
    from pulse_pipeline.modeling.data import load_modeling_data, unrated_chunks
    from pulse_pipeline.modeling.predictions import crossfit_tables
    from pulse_pipeline.paths import PulseHome
    from pulse_pipeline.settings import MODEL_FAMILIES, modeling_settings
    from pulse_pipeline.warehouse import Warehouse

    home = stage_home(sessions, seed, workdir)
    wh = Warehouse(connect(PulseHome(home).work_db))  # the bench's own home: tables a newer PULSE adds get created
    seeds = tuple(42 + i for i in range(n_seeds))
    seed_rows = modeling_settings().cv_seed_rows  # PULSE_CV_SEED_ROWS, as the pipeline reads it
    print(f"load average before start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    steps: list[tuple[str, float]] = []

    cpu: list[float] = []

    def timed(label: str, fn):
        t0, c0 = time.perf_counter(), tree_cpu_seconds()
        out = fn()
        steps.append((label, time.perf_counter() - t0))
        cpu.append(tree_cpu_seconds() - c0)
        print(
            f"  {label:<58} {steps[-1][1]:7.1f} s  {cpu[-1]:7.1f} CPU-s   peak RSS {peak_rss_mb():5.0f} MB",
            flush=True,
        )
        return out

    print("the modeling step (cv_metrics and the cross-fit tables):")
    data = timed("load features, vectorize the rated sessions' text", lambda: load_modeling_data(wh, "rated"))
    n_rated = int(data.labeled.sum())
    print(
        f"  ({len(data.y)} sessions, {n_rated} rated, {data.X.shape[1]} feature columns, "
        f"{data.text.Z.shape[1] if data.text is not None else 0} text terms)"
    )
    comparison = timed(
        f"cross-validate {len(MODEL_FAMILIES)} families, {folds} folds x up to {len(seeds)} seeds",
        lambda: compare_models(
            data, pl.DataFrame(), MODEL_FAMILIES, seeds, folds, "pearson", keep_seed=42, seed_rows=seed_rows
        ),
    )
    chosen = comparison.chosen.family
    print(f"  (seeds used: {comparison.rows[0].n_seeds}, PULSE_CV_SEED_ROWS {seed_rows})")
    result = timed(
        f"cross-fit {chosen} from the kept fits: vectorize, predict the unrated, importance, terms",
        lambda: crossfit_tables(
            data, chosen, folds, families=MODEL_FAMILIES, kept=comparison.kept, unrated=unrated_chunks(wh, data)
        ),
    )
    total = sum(s for _, s in steps)
    print("\nTable 2 (out-of-fold, mean over seeds):")
    for model in dict.fromkeys(r.model for r in comparison.rows):
        cells = {r.metric: r.mean for r in comparison.rows if r.model == model}
        print(f"  {model:<14} MSE {cells['mse']:.3f}  MAE {cells['mae']:.3f}  r {cells['pearson']:.3f}")
    print(f"chosen: {chosen}; cross-fit out-of-fold r (seed 42) {result.oof_pearson:.3f}")
    peak = peak_rss_mb()
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"\nstage: {total:.1f} s, {sum(cpu):.1f} CPU-s (target under {STAGE_TARGET_SECONDS:.0f} s: "
        f"{'met' if total < STAGE_TARGET_SECONDS else 'NOT met'}); peak RSS {peak:.0f} MB "
        f"(target under {STAGE_TARGET_MB:.0f} MB: {'met' if peak < STAGE_TARGET_MB else 'NOT met'})"
    )


def _cpu(fn, *args):
    """(result, CPU seconds of this process) of ``fn(*args)``: the fits below run here, on one thread."""
    t0 = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t0


def profile_fits(sessions: int, seed: int, folds: int, workdir: Path) -> None:
    """CPU seconds of one fit of each kind the modeling stage runs, on the first outer fold of seed 42, one thread,
    and how many of each the step runs with the defaults (5 folds x 5 seeds, every family, the stack chosen):
    what to multiply to see where the stage's CPU goes. The cross-fit reuses cross-validation's seed-42 fits, so
    it only predicts (before, it fitted each of them once more: a fifth of the cross-validation's fits)."""
    from pulse_pipeline.connections import connect
    from pulse_pipeline.modeling.cv import inner_crossfit, out_of_bag, outer_folds
    from pulse_pipeline.modeling.data import load_modeling_data
    from pulse_pipeline.modeling.families import make_model
    from pulse_pipeline.modeling.importance import fold_rise
    from pulse_pipeline.modeling.threads import native_threads
    from pulse_pipeline.paths import PulseHome
    from pulse_pipeline.warehouse import Warehouse

    home = stage_home(sessions, seed, workdir)
    wh = Warehouse(connect(PulseHome(home).work_db))
    print(f"load average before start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    data, t_load = _cpu(load_modeling_data, wh, "all")
    rated = data.labeled
    X, y, Xu = data.X[rated], data.y[rated], data.X[~rated]
    text = data.text_feature()
    print(f"load features + vectorize every session's text: {t_load:.1f} CPU-s in this process (workers not counted)")
    print(f"{len(y)} rated, {len(Xu)} unrated, {X.shape[1]} columns\n")
    rows = []
    with native_threads(1):
        fold_list, t_text = _cpu(outer_folds, y, folds, 42, text)
        rows.append(("text: nested scores of one seed (k outer + k*5 inner ridges)", t_text, 5, 0))
        fold = fold_list[0]
        A_train = np.column_stack([X[fold.train], fold.text.train_scores])
        A_test = np.column_stack([X[fold.test], fold.text.held_out_scores])
        A_u = np.column_stack([Xu, fold.text.unlabeled_scores])
        rng = np.random.default_rng(0)
        held = A_test.shape[0]
        perms = rng.permuted(np.broadcast_to(np.arange(held), (5, A_test.shape[1], held)), axis=-1)
        for family in ("ordinal_logit", "random_forest", "hist_gbm", "lightgbm"):
            model = make_model(family, random_state=42, threads=1, forest_jobs=1)
            _, t_fit = _cpu(model.fit, A_train, y[fold.train])
            oob, t_oob = _cpu(out_of_bag, model, A_train)
            if oob is None:
                _, t_inner = _cpu(inner_crossfit, A_train, y[fold.train], family, 42, 1)
                inner = "2 inner fits"
            else:
                t_inner, inner = t_oob, "out-of-bag"
            _, t_pred_u = _cpu(model.predict, A_u)
            _, t_imp = _cpu(fold_rise, model, A_test, y[fold.test], perms)
            rows.append((f"{family}: outer fit", t_fit, 25, 0))  # the cross-fit reuses seed 42's
            rows.append((f"{family}: level-one ({inner})", t_inner, 25, 0))
            rows.append((f"{family}: predict {len(Xu)} unrated", t_pred_u, 0, folds))
            rows.append((f"{family}: permutation importance of one fold", t_imp, 0, folds))
    print(f"{'one fit (fold 0 of seed 42, 1 thread)':<62} {'CPU-s':>6} {'in the CV':>14} {'in cross-fit':>12}")
    total_cv = total_cf = 0.0
    for label, t, n_cv, n_cf in rows:
        total_cv, total_cf = total_cv + t * n_cv, total_cf + t * n_cf
        print(f"{label:<62} {t:6.2f} {n_cv:>5} = {t * n_cv:5.1f} {n_cf:>4} = {t * n_cf:5.1f}")
    print(f"{'sum (the stack chosen: every family cross-fit)':<62} {'':>6} {total_cv:>14.1f} {total_cf:>12.1f}")


if __name__ == "__main__":
    main()
