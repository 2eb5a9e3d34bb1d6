"""What raters' habits are worth: the out-of-fold r and the prediction-powered width the user columns buy.

The generator draws a per-user generosity (sd 0.35 stars, ``synth.model.GeneratorParams.generosity_sd``) that no
session feature records. The user columns (``modeling.user_ratings``: the user's other ratings, shrunk toward the
mean, and how many) can recover part of it, as much as the user's other ratings allow: so the gain depends on how
many ratings a user has, which this bench varies. Two densities, ratings at random:

- ``paper``: the paper's density, 36 000 sessions by 15 000 users (2.4 sessions a user, lognormal activity), 5 %
  rated (~1 800 ratings): most raters rated once, a user's other ratings are rare;
- ``heavy``: the same sessions by users with tens of sessions each (``--heavy-sessions-per-user``, default 40),
  5 % rated: a user has a couple of other ratings, heavy users many.

Per replication (generator seed = replication index) the same rated sessions are cross-fit twice, with and without
the user columns (``crossfit.crossfit_predict``, family ``--family``, k = 5, seed 42: same folds), and printed:
each one's out-of-fold r over every rated session, and for the llm-backbone comparison (gpt-5 vs
claude-4-sonnet, as ``pulse validate`` draws it) the PPI++ and cross-PPI interval widths over the naive Welch
width (``estimates.effects.compare``). Means over replications, with the paired r gain's mean +/- se.

With ``--convai2 DIR`` (the real corpus of ``/work/wt/CORPUS37.md``: ConvAI2's volunteer dialogues, the only ones
with user ids, rated 1-5 by the human who chatted), it also cross-fits, on the rated dialogues that hold a human
message, a tabular model of a few counts, the bot and the TF-IDF text score, with and without the user columns,
over ``--fold-seeds`` fold seeds (default 5), and prints the mean r of each and the users' intra-class
correlation tau^2 / (tau^2 + sigma^2).

Measured (issue 37, 2 shared cores; 36 000 sessions, 5 % rated, hist_gbm, 5 replications):

    density  sess/user  ratings  rater has another  r without  r with  gain (se)      ppi w/naive   crossppi w/naive
    paper          2.4     1776              13.5%      0.549   0.552  +0.003 (0.002)  0.840->0.841  0.845->0.845
    heavy         40.0     1776              87.5%      0.549   0.564  +0.015 (0.003)  0.839->0.834  0.841->0.836

    ConvAI2 volunteers: 759 rated dialogues with a human message, 545 unrated, 454 raters (92 rated twice or more);
    users' intra-class correlation 0.317
      hist_gbm       r without 0.291  with 0.368  gain +0.077 (se 0.008, 5 fold seeds)
      text           r without 0.346  with 0.346  gain +0.000 (se 0.000, 5 fold seeds)

    .venv/bin/python bench/user_features.py                        # both densities, 5 replications
    .venv/bin/python bench/user_features.py --sessions 6000 --replications 2
    .venv/bin/python bench/user_features.py --replications 0 --convai2 /work/corpus37/convai2
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pulse_pipeline.estimates.effects import ArmData, Settings, compare  # noqa: E402
from pulse_pipeline.estimates.methods import Method  # noqa: E402
from pulse_pipeline.modeling.crossfit import crossfit_predict, pearson  # noqa: E402
from pulse_pipeline.modeling.text import TextFeature, vectorize  # noqa: E402
from pulse_pipeline.modeling.user_ratings import UserRatings, user_ratings, user_table  # noqa: E402
from pulse_pipeline.stars import stars_to_label  # noqa: E402
from pulse_pipeline.synth.model import GeneratorParams, feature_matrix, simulate_sessions  # noqa: E402

EXPERIMENT, CONTROL, TREATMENT = "llm-backbone", "claude-4-sonnet", "gpt-5"
SETTINGS = Settings(n_resamples=200, n_permutations=50, threads=1)
WIDTHS = (Method.PPI, Method.CROSSPPI)


def replication(seed: int, n: int, per_user: float, rated: float, family: str) -> dict[str, float]:
    """One corpus: r with and without the user columns, and each one's PPI widths / naive on llm-backbone."""
    params = replace(GeneratorParams(), users_per_session=1.0 / per_user)
    table = simulate_sessions(n, seed=seed, scenario="random", rated_fraction=rated, params=params)
    lab = np.asarray(table.rated, dtype=bool)
    X_lab, X_unl = feature_matrix(table, lab), feature_matrix(table, ~lab)
    y = stars_to_label(np.asarray(table.label, dtype=np.float64))[lab]
    users = user_ratings(np.asarray(table.user_id).tolist(), lab)
    rater = np.unique(np.asarray(table.user_id)[lab], return_inverse=True)[1]
    # the share of ratings whose rater rated another session too: the rows a user column can inform
    out: dict[str, float] = {
        "ratings": float(lab.sum()),
        "raters_with_another": float(np.mean(np.bincount(rater)[rater] >= 2)),
    }
    in_exp = np.asarray(table.experiment) == EXPERIMENT
    variant = np.asarray(table.variant)
    for name, u in (("without", None), ("with", users)):
        cf = crossfit_predict(X_lab, y, X_unl, family, k=5, seed=42, threads=1, users=u)
        out[f"r_{name}"] = pearson(y, cf.oof)[0]
        arms = []
        for arm in (TREATMENT, CONTROL):
            a = in_exp[lab] & (variant[lab] == arm)
            b = in_exp[~lab] & (variant[~lab] == arm)
            arms.append(ArmData(arm, y[a], cf.oof[a], cf.unlabeled[b], X_lab[a], X_unl[b]))
        rows = {r.method: r for r in compare(*arms, SETTINGS)[0]}
        naive = rows[Method.NAIVE_WELCH].ci_high - rows[Method.NAIVE_WELCH].ci_low
        for method in WIDTHS:
            out[f"{method}_{name}"] = (rows[method].ci_high - rows[method].ci_low) / naive
    return out


CONVAI2_FILES = ("data_intermediate.json", "data_volunteers.json")
"""ConvAI2's files whose dialogues name their user (``participant1_id``); the human is participant1."""


def load_convai2(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, TextFeature, UserRatings]:
    """ConvAI2's dialogues with a human message and a user id's file: the rated ones' features and labels
    (normalized), the unrated ones' features, the text of both and who rated."""
    rows = []
    for name in CONVAI2_FILES:
        for d in json.loads((folder / name).read_text()):
            said = [m["text"] for m in d["dialog"] if m.get("sender") == "participant1" and m.get("text")]
            if not said:
                continue  # no human message: PULSE would open no work segment
            bot = sum(1 for m in d["dialog"] if m.get("sender") == "participant2")
            stars = d.get("eval_score")
            rated = isinstance(stars, int) and 1 <= stars <= 5
            user = (d.get("participant1_id") or {}).get("user_id")
            bot_id = (d.get("participant2_id") or {}).get("user_id") or ""
            rows.append((f"{name}#{len(rows)}", said, bot, bot_id, user, float(stars) if rated else np.nan))
    y_all = np.array([r[5] for r in rows])
    lab = ~np.isnan(y_all)
    bots = sorted({r[3] for r in rows})
    X_all = np.array(
        [[len(r[1]), sum(len(t.split()) for t in r[1]), r[2]] + [float(r[3] == b) for b in bots] for r in rows]
    )
    ids = [r[0] for r in rows]
    matrix = vectorize(ids, {r[0]: r[1] for r in rows}, lab)
    pos = {int(i): j for j, i in enumerate(matrix.rows)}
    text = TextFeature(
        matrix.Z[[pos[i] for i in np.flatnonzero(lab)]], matrix.Z[[pos[i] for i in np.flatnonzero(~lab)]]
    )
    users = user_ratings([r[4] for r in rows], lab)
    return X_all[lab], stars_to_label(y_all[lab]), X_all[~lab], text, users


def convai2(folder: Path, family: str, fold_seeds: int) -> None:
    """The user columns on real ratings (see the module docstring)."""
    X, y, Xu, text, users = load_convai2(folder)
    table = user_table(users.labeled, y, np.arange(y.size), len(users.user_ids))
    rated_users = np.bincount(users.labeled[users.labeled >= 0])
    print(
        f"ConvAI2 volunteers: {y.size} rated dialogues with a human message, {Xu.shape[0]} unrated, "
        f"{int((rated_users > 0).sum())} raters ({int((rated_users >= 2).sum())} rated twice or more); "
        f"users' intra-class correlation {table.tau2 / (table.tau2 + table.sigma2):.3f}"
    )
    for fam in (family, "text"):
        r = {"without": [], "with": []}
        for seed in range(42, 42 + fold_seeds):
            for name, u in (("without", None), ("with", users)):
                cf = crossfit_predict(X, y, Xu, fam, k=5, seed=seed, threads=1, text=text, users=u)
                r[name].append(pearson(y, cf.oof)[0])
        gain = np.array(r["with"]) - np.array(r["without"])
        print(
            f"  {fam:<14} r without {np.mean(r['without']):.3f}  with {np.mean(r['with']):.3f}  "
            f"gain {gain.mean():+.3f} (se {gain.std(ddof=1) / math.sqrt(gain.size):.3f}, {fold_seeds} fold seeds)"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=36_000)
    parser.add_argument("--replications", type=int, default=5)
    parser.add_argument("--rated", type=float, default=0.05)
    parser.add_argument("--family", default="hist_gbm")
    parser.add_argument("--paper-sessions-per-user", type=float, default=36_000 / 15_000)
    parser.add_argument("--heavy-sessions-per-user", type=float, default=40.0)
    parser.add_argument("--fold-seeds", type=int, default=5, help="fold seeds of the real-corpus check")
    parser.add_argument("--convai2", type=Path, help="the ConvAI2 folder of CORPUS37.md: the real-corpus check too")
    args = parser.parse_args(argv)
    if args.convai2 is not None:
        convai2(args.convai2, args.family, args.fold_seeds)
    if args.replications < 1:
        return
    densities = {"paper": args.paper_sessions_per_user, "heavy": args.heavy_sessions_per_user}
    print(
        f"{args.sessions} sessions, {args.rated:.0%} rated at random, family {args.family}, "
        f"{args.replications} replications per density"
    )
    header = (
        f"{'density':<8}{'sess/user':>10}{'ratings':>9}{'rater has another':>19}{'r without':>11}{'r with':>9}"
        f"{'gain (se)':>17}{'ppi w/naive':>19}{'crossppi w/naive':>19}"
    )
    print(header)
    for density, per_user in densities.items():
        start = time.monotonic()
        reps = [replication(i, args.sessions, per_user, args.rated, args.family) for i in range(args.replications)]

        def mean(key: str, reps: list[dict[str, float]] = reps) -> float:
            return float(np.mean([r[key] for r in reps]))

        gain = np.array([r["r_with"] - r["r_without"] for r in reps])
        se = float(gain.std(ddof=1) / math.sqrt(gain.size)) if gain.size > 1 else math.nan
        widths = [f"{mean(f'{m}_without'):.3f}->{mean(f'{m}_with'):.3f}" for m in WIDTHS]
        print(
            f"{density:<8}{per_user:>10.1f}{mean('ratings'):>9.0f}{mean('raters_with_another'):>19.1%}"
            f"{mean('r_without'):>11.3f}{mean('r_with'):>9.3f}{f'{gain.mean():+.3f} ({se:.3f})':>17}"
            f"{widths[0]:>19}{widths[1]:>19}   ({time.monotonic() - start:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
