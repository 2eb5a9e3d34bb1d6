"""Does listening to users pay on the demo corpus? The stack of every family, reading the sentiment columns and the
text, against the best single family on the features PULSE had before it read users' words.

"Before" is ``features.session_features`` without the sentiment columns of the event-feature stage
(``features.sentiment.COLUMNS``) and without the text, cross-validated for the four tabular families; "after" is the
stack of the four and the text model (``stack.cross_validate_all``), with every column and the text score. Both use
the same folds per seed (folds depend on the seed and the labels only), so the per-seed differences are paired:

    d_s = r_stack,s - r_best,s,   mean d +/- sd(d) / sqrt(S)   over S seeds,

where "best" is the before-family with the highest mean r (the choice the pipeline would make). The warehouse is a
``pulse demo`` run (4 000 sessions, ~600 rated: the demo rates 15 %) built once under --workdir; ``--sessions``
makes a larger one.

    .venv/bin/python bench/stack_gain.py                 # the demo corpus, 10 seeds
    .venv/bin/python bench/stack_gain.py --sessions 12000 --seeds 5
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pulse_pipeline.connections import connect  # noqa: E402
from pulse_pipeline.features.sentiment import COLUMNS as SENTIMENT_COLUMNS  # noqa: E402
from pulse_pipeline.modeling.crossfit import TEXT_FAMILY  # noqa: E402
from pulse_pipeline.modeling.data import load_modeling_data  # noqa: E402
from pulse_pipeline.modeling.stack import STACK, cross_validate_all  # noqa: E402
from pulse_pipeline.paths import PulseHome  # noqa: E402
from pulse_pipeline.warehouse import Warehouse  # noqa: E402

TABULAR = ("ordinal_logit", "random_forest", "hist_gbm", "lightgbm")


def demo_home(sessions: int, workdir: Path) -> Path:
    """A PULSE_HOME where ``pulse demo --sessions N`` ran (once; the models it fit are not the ones measured)."""
    home = workdir / f"demo-home-{sessions}"
    if not (home / "pulse.duckdb").exists():
        print(f"running `pulse demo --sessions {sessions}` into {home} (once)", flush=True)
        env = {**os.environ, "PULSE_HOME": str(home), "PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_CV_SEEDS": "1"}
        subprocess.run(
            [sys.executable, "-m", "pulse_pipeline.cli", "demo", "--sessions", str(sessions)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return home


def per_seed_r(results, name: str) -> np.ndarray:
    return np.array([s.pearson for s in next(r for r in results if r.family == name).per_seed])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=4000)
    parser.add_argument("--seeds", type=int, default=10, help="CV seeds, from 42")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    seeds = tuple(42 + i for i in range(args.seeds))

    wh = Warehouse(connect(PulseHome(demo_home(args.sessions, args.workdir)).work_db))  # the bench's own home
    data = load_modeling_data(wh, text_of="rated")
    labeled = data.labeled
    X, y = data.X[labeled], data.y[labeled]
    old = [i for i, name in enumerate(data.feature_names) if name not in SENTIMENT_COLUMNS]
    print(
        f"{len(data.y)} sessions, {len(y)} rated; {len(data.feature_names)} feature columns, {len(old)} of them "
        f"before the sentiment columns; {args.folds} folds x {len(seeds)} seeds\n"
    )

    started = time.perf_counter()
    before = cross_validate_all(X[:, old], y, TABULAR, k=args.folds, seeds=seeds, stack=False)
    after = cross_validate_all(
        X, y, (*TABULAR, TEXT_FAMILY), k=args.folds, seeds=seeds, stack=True, text=data.text_feature()
    )
    seconds = time.perf_counter() - started
    print(f"{'model':<30} {'mean r':>7} {'sd over seeds':>14}")
    for label, results in (("before", before), ("after", after)):
        for r in results:
            m = r.metric("pearson")
            print(f"{label + ': ' + r.family:<30} {m.mean:7.3f} {m.sd:14.3f}")
    print()
    for label, base in (("before", before), ("after", after)):
        best = max((r for r in base if r.family in TABULAR), key=lambda r: r.metric("pearson").mean)
        d = per_seed_r(after, STACK) - per_seed_r(base, best.family)
        print(
            f"stack (after) - {best.family} ({label}), paired over {len(seeds)} seeds: {d.mean():+.3f} ± "
            f"{d.std(ddof=1) / np.sqrt(len(d)):.3f} (standard error); the stack wins {int((d > 0).sum())} of {len(d)}"
        )
    print(f"cross-validation: {seconds:.1f} s")


if __name__ == "__main__":
    main()
