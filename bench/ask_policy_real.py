"""Do no harm when asking, on real human ratings: the ask policy's forms against asking everyone alike.

The corpus is ConvAI2's human evaluation dialogues (``/work/wt/CORPUS37.md``, read by ``bench/real_corpus.py``'s
``read_corpus``: 3 197 dialogues, every one rated 1-5 by the person who had it). Every dialogue is rated, so the
error e_i = y_i - f_i of every dialogue is known and any way of asking can be simulated on it:

1. cross-fitted predictions: the label y = (stars - 1) / 4, predicted out of fold (5 folds) by one of
   ``real_corpus``'s baselines (``--model``: ``tfidf_ridge``, ridge on TF-IDF 1-2 grams of the human's messages,
   r ~0.52; ``vader_ridge``, ridge on the VADER sentiment of the human's messages, r ~0.3, near the issue's 0.27);
2. the policy's inputs, counts a platform knows when a dialogue stops (``FEATURES``: the human's and the bot's
   messages and words, the human's mean message length), and a stratum per dialogue: the collection round it came
   from (``source``: the four hackathon days, the volunteers' intermediate and final rounds; a stated proxy for a
   task type, which these dialogues do not have);
3. ``--splits`` times: a random half of the dialogues is the history the policy is fit on (``fit_policy``, which
   chooses its form by cross-fitted variance on held-out folds of that half), the other half is where it asks.
   On that half every form asks at the same expected number of asks (``--share`` of the dialogues; the multiplier
   solved on the half: ``ask_policy.multiplier_for_budget``), and the rectifier's variance the design controls,
   V = sum_i e_i^2 / q_i (the module docstring of ``estimates/ask_policy.py``; no answer model: everyone rated
   answers), is divided by uniform's:

   - ``error``: the Poisson GLM error model (``fit_error_model``) fit on the history;
   - ``stratified``: Neyman across the rounds (``fit_strata``: sigma_h = the round's root mean square error);
   - ``chosen``: the policy ``fit_policy`` exports (uniform unless a form beat uniform on its held-out folds);
   - ``oracle``: q proportional to |e_i| itself (a policy that knew each error: the bound no model reaches).

It prints each split's ratios and their mean, range and how often each is above 1 (worse than uniform), and which
form the policy chose. Run: ``.venv/bin/python bench/ask_policy_real.py --corpus /work/corpus37/convai2`` (about a
minute; no PULSE home, no pipeline run).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from real_corpus import baseline_predictions, pearson, read_corpus, vader_columns  # noqa: E402

from pulse_pipeline.estimates.ask_policy import (  # noqa: E402
    ask_probabilities,
    ask_scores,
    fit_error_model,
    fit_policy,
    fit_strata,
    multiplier_for_budget,
    stratum_features,
)

FEATURES = ("human_messages", "bot_messages", "human_words", "bot_words", "human_chars_per_message")
FLOOR = 0.01
FORMS = ("error", "stratified", "chosen", "oracle")


def dialogue_features(corpus) -> dict[str, np.ndarray]:
    rows = []
    for d in corpus.dialogues:
        human = [t for h, t in d.turns if h]
        bot = [t for h, t in d.turns if not h]
        rows.append(
            (
                len(human),
                len(bot),
                sum(len(t.split()) for t in human),
                sum(len(t.split()) for t in bot),
                sum(len(t) for t in human) / max(1, len(human)),
            )
        )
    table = np.array(rows, dtype=np.float64)
    return {name: table[:, j] for j, name in enumerate(FEATURES)}


def variance(e: np.ndarray, scores: np.ndarray, asks: float) -> float:
    """sum e^2 / q with q = min(1, max(FLOOR, m score)) at sum q = asks."""
    q = ask_probabilities(scores, multiplier_for_budget(scores, asks, FLOOR), FLOOR)
    return float(np.sum(e * e / q))


def one_split(features, labels, e, share: float, seed: int) -> tuple[dict[str, float], str, dict]:
    rng = np.random.default_rng(seed)
    n = e.size
    history = np.zeros(n, dtype=bool)
    history[rng.permutation(n)[: n // 2]] = True
    ask = ~history
    fh = {k: v[history] for k, v in features.items()}
    fa = {k: v[ask] for k, v in features.items()}
    asks = share * ask.sum()
    uniform = variance(e[ask], np.ones(ask.sum()), asks)
    ratios = {}
    intercept, terms, _ = fit_error_model(fh, np.abs(e[history]))
    ratios["error"] = variance(e[ask], ask_scores(fa, intercept, terms, None), asks) / uniform
    strata = fit_strata(labels[history], np.abs(e[history]))
    with_strata = fa | stratum_features(labels[ask])
    ratios["stratified"] = variance(e[ask], ask_scores(with_strata, 0.0, (), None, strata), asks) / uniform
    policy = fit_policy(
        fh, np.ones(history.sum(), dtype=bool), np.abs(e[history]), 1.0, share * history.sum(), strata=labels[history]
    )
    chosen = ask_scores(with_strata, policy.intercept, policy.terms, None, policy.strata)
    ratios["chosen"] = variance(e[ask], chosen, asks) / uniform
    ratios["oracle"] = variance(e[ask], np.maximum(np.abs(e[ask]), 1e-9), asks) / uniform
    return ratios, policy.form, policy.choice


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="/work/corpus37/convai2", help="ConvAI2's 2018/data folder")
    parser.add_argument("--splits", type=int, default=20, help="random halves (history / asked)")
    parser.add_argument("--share", type=float, default=0.25, help="expected asks as a share of the asked half")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--model",
        default="tfidf_ridge",
        choices=("tfidf_ridge", "vader_ridge", "average"),
        help="the cross-fitted predictions (real_corpus's baselines; vader_ridge is the weaker, r ~0.3)",
    )
    args = parser.parse_args()
    start = time.monotonic()
    corpus = read_corpus(Path(args.corpus))
    y = np.array([(d.stars - 1) / 4 for d in corpus.dialogues])
    docs = ["\n".join(d.user_text) for d in corpus.dialogues]
    fold = np.random.default_rng(args.seed).permutation(y.size) % 5
    vader = (
        np.array([v for v in vader_columns(corpus).values()]) if args.model != "tfidf_ridge" else np.zeros((y.size, 1))
    )
    f = baseline_predictions(docs, vader, y, fold)[args.model]
    e = y - f
    features = dialogue_features(corpus)
    labels = np.array([d.source for d in corpus.dialogues], dtype=object)
    print(
        f"{y.size} rated dialogues; out-of-fold r of {args.model} {pearson(y, f):.3f}; strata (collection round): "
        + ", ".join(f"{s} {int((labels == s).sum())}" for s in sorted(set(labels)))
    )
    print(f"every form at {args.share:.0%} of the asked half's dialogues asked; V / V_uniform per split:")
    print(f"{'split':>5}  " + "  ".join(f"{k:>10}" for k in FORMS) + "  chosen form (cross-fit R: error, stratified)")
    table = {k: [] for k in FORMS}
    picks = []
    for i in range(args.splits):
        ratios, form, choice = one_split(features, labels, e, args.share, args.seed * 1000 + i)
        for k in FORMS:
            table[k].append(ratios[k])
        picks.append(form)
        fig = ", ".join(f"{choice[k]:.3f}/{choice[k + '_upper']:.3f}" for k in ("error", "stratified"))
        print(f"{i:>5}  " + "  ".join(f"{ratios[k]:>10.3f}" for k in FORMS) + f"  {form} ({fig})")
    print("over splits: mean [min, max], splits above 1 (worse than uniform)")
    for k in FORMS:
        v = np.array(table[k])
        print(f"  {k:>10}: {v.mean():.3f} [{v.min():.3f}, {v.max():.3f}], above 1 in {int((v > 1 + 1e-12).sum())}")
    print("chosen forms: " + ", ".join(f"{f} {picks.count(f)}" for f in sorted(set(picks))))
    print(f"({time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
