"""Validation scenarios ``active`` and ``active_varying``: asking for ratings where the model is unsure vs asking
at random, at the same expected number of ratings, both estimated with the known asking probability (Zrnic &
Candès, 2024).

One replication (``replicate_active``):

1. **History.** A past period drawn from the generator (``validation.PARAMS``, another seed): ``history_ratings``
   sessions rated at random. The model f (``validation.DEFAULT_FAMILY``, cross-fit k = 5) and the ask policy's
   error model (``ask_policy.fit_error_model``: log-linear in ``POLICY_FEATURES``, fit on |y - f_oof| of the
   history) are fit there, as a team would fit them before the experiment starts.
2. **Experiment.** A fresh draw; the llm-backbone experiment's sessions (~``n_per_arm`` per arm). f predicts every
   session with the mean of the history's fold models, so f never saw an experiment label.
3. **Two ways to ask**, both with the same expected number of ratings, 2 x ``ratings_per_arm`` (sum_i q_i a_i,
   a_i the probability that a shown widget is answered; the simulation knows a, a real team budgets asks):
   ``uniform``: q_i = c for everyone; ``active``: q_i = min(1, max(floor, m * e_hat(x_i))), e_hat the history's
   error model (``ask_policy.multiplier_for_budget`` with weights a_i). Both use the same uniforms, so their widths
   differ by the design, not by the luck of the draw.
4. **Estimate** per arm: the AIPW mean (``stats.aipw.aipw_mean``) with P(rated_i) = q_i x a_hat(x_i), a_hat the
   answer model cross-fit on the arm's asked sessions (``stats.asking.known_ask_propensity``), unclipped; the
   effect is treatment minus control, the arms' variances add, 95 % Wald interval; scored against
   ``validation.truth()``.

The scenarios:

- ``active``: the generator as it is; users answer with a_i = expit(c + 0.8 log M) (M user messages, mean
  ``answer_rate``), more often in chattier sessions as in the paper. The model's error varies little with the
  counts the platform knows (|y - f| from ~0.12 to ~0.19 between the 5th and 95th percentile of e_hat), and the
  answer rate varies more (0.14 to 0.85): the width ratio is near 1. (With a varying answer rate the best design
  is q proportional to e / sqrt(a), which the policy cannot know without the answer model.)
- ``active_varying``: raters of sessions that went wrong disagree more (zero-mean noise on the label with sd
  ``VARYING_NOISE`` x log1p(failed commands) / its mean, so the arms' true means are unchanged) and users answer
  at random (a = ``answer_rate``): the error varies threefold and the ideal width ratio E[s] / sqrt(E[s^2]) is 0.90.

Targets (``check_active``): coverage 93-97 % for both methods in both scenarios, and the active interval narrower
than uniform in ``active_varying`` (width ratio below 1); the ratios are reported by ``width_ratios``.

Measured (``pulse validate --scenarios active,active_varying``: 500 replications per scenario, seed 0, 8 min on 2
cores): active uniform 93.6 %, active 93.8 %, width ratio 1.02; active_varying uniform 94.4 %, active 95.4 %, width
ratio 0.90. Every target met.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from ..modeling.crossfit import crossfit_predict
from ..stars import stars_to_label
from ..stats.aipw import aipw_mean
from ..stats.asking import known_ask_propensity
from ..synth.model import feature_matrix, rating_probability, simulate_sessions
from .ask_policy import DEFAULT_FLOOR, ask_probabilities, expected_error, fit_error_model, multiplier_for_budget
from .validation import CONTROL, DEFAULT_FAMILY, DEFAULT_N_PER_ARM, EXPERIMENT, PARAMS, TREATMENT, truth

SCENARIOS: tuple[str, ...] = ("active", "active_varying")
VARYING_NOISE = 0.5
"""active_varying: sd of the extra zero-mean rating noise per unit of log1p(failed commands) over its mean."""
METHODS: tuple[str, ...] = ("uniform", "active")
POLICY_FEATURES: tuple[str, ...] = ("user_messages", "n_segments", "file_edits", "failed_commands", "test_runs")
"""The generator's names for the counts the pipeline's policy reads (``ask_policy.POLICY_FEATURES``)."""
COVERAGE = (0.93, 0.97)
DEFAULT_REPLICATIONS = 500
Z95 = 1.959963984540054


def _history(seed: int, n_per_arm: int, history_ratings: int):
    """A past period's sessions and which ``history_ratings`` of them were rated (at random)."""
    hist = simulate_sessions(6 * n_per_arm, seed=seed, scenario="random", params=PARAMS)
    pick = np.random.default_rng(seed).choice(len(hist), size=history_ratings, replace=False)
    mask = np.zeros(len(hist), dtype=bool)
    mask[pick] = True
    return hist, mask


def _rating_noise(table, mask: np.ndarray, scenario: str, rng: np.random.Generator) -> np.ndarray:
    """Zero for ``active``; for ``active_varying`` N(0, s_i^2) with s_i = VARYING_NOISE * t_i / mean(t),
    t = log1p(failed commands): raters of sessions that went wrong disagree more. The noise has mean 0, so every
    arm's true mean (the estimand) is unchanged."""
    if scenario == "active":
        return np.zeros(int(mask.sum()))
    t = np.log1p(np.asarray(table.failed_commands, dtype=np.float64)[mask])
    return rng.normal(0.0, VARYING_NOISE * t / t.mean())


def replicate_active(
    seed: int,
    scenario: str = "active",
    n_per_arm: int = DEFAULT_N_PER_ARM,
    ratings_per_arm: float = 150.0,
    answer_rate: float = 0.5,
    history_ratings: int = 1000,
    floor: float = DEFAULT_FLOOR,
    family: str = DEFAULT_FAMILY,
) -> list[dict]:
    """One replication (module docstring): a row per method with scenario, method, covered, width, error, flagged
    (the columns of ``validation.ReplicationRow``; flagged is always False here), plus n_rated."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; expected one of {SCENARIOS}")
    hist_seed, exp_seed = (int(s) for s in np.random.SeedSequence([seed, 7]).generate_state(2))
    noise = np.random.default_rng([seed, 11])
    hist, hist_mask = _history(hist_seed, n_per_arm, history_ratings)
    table = simulate_sessions(6 * n_per_arm, seed=exp_seed, scenario="random", params=PARAMS)
    in_exp = np.asarray(table.experiment) == EXPERIMENT
    X = feature_matrix(table, in_exp)
    y = stars_to_label(np.asarray(table.label, dtype=np.float64))[in_exp]
    y = y + _rating_noise(table, in_exp, scenario, noise)
    variant = np.asarray(table.variant)[in_exp]

    X_hist = feature_matrix(hist, hist_mask)
    y_hist = stars_to_label(np.asarray(hist.label, dtype=np.float64))[hist_mask]
    y_hist = y_hist + _rating_noise(hist, hist_mask, scenario, noise)
    cf = crossfit_predict(X_hist, y_hist, X, family, k=5, seed=hist_seed % (2**31), threads=1)
    hist_features = {c: np.asarray(getattr(hist, c), dtype=np.float64)[hist_mask] for c in POLICY_FEATURES}
    intercept, terms, _ = fit_error_model(hist_features, y_hist - cf.oof)
    features = {c: np.asarray(getattr(table, c), dtype=np.float64)[in_exp] for c in POLICY_FEATURES}

    if scenario == "active":
        answer = rating_probability(features["user_messages"], "self_selected", answer_rate)
    else:
        answer = np.full(y.size, answer_rate)
    budget = 2.0 * ratings_per_arm
    designs = {
        "uniform": np.full(y.size, budget / answer.sum()),
        "active": ask_probabilities(
            scores := expected_error(features, intercept, terms),
            multiplier_for_budget(scores, budget, floor, answer),
            floor,
        ),
    }
    rng = np.random.default_rng(exp_seed)
    u_ask, u_answer = rng.random(y.size), rng.random(y.size)
    theta = truth()
    rows = []
    for method, q in designs.items():
        asked = u_ask < q
        answered = asked & (u_answer < answer)
        arms = []
        for arm in (TREATMENT, CONTROL):
            a = variant == arm
            pi = known_ask_propensity(X[a], np.where(asked[a], q[a], np.nan), asked[a], answered[a], seed=seed % 997)
            rated = answered[a]
            low = float(pi[rated].min()) if rated.any() else 1.0
            arms.append(aipw_mean(y[a][rated], cf.unlabeled[a], rated, pi, clip=(low, 1.0)))  # known: unclipped
        effect = arms[0].estimate - arms[1].estimate
        se = math.sqrt(arms[0].se ** 2 + arms[1].se ** 2)
        lo, hi = effect - Z95 * se, effect + Z95 * se
        ok = math.isfinite(lo) and math.isfinite(hi)
        rows.append(
            {
                "scenario": scenario,
                "method": method,
                "covered": bool(ok and lo <= theta <= hi),
                "width": float(hi - lo) if ok else float("nan"),
                "error": float(effect - theta),
                "flagged": False,
                "n_rated": int(answered.sum()),
            }
        )
    return rows


def width_ratios(frame: pl.DataFrame) -> dict[str, float]:
    """scenario -> mean width of ``active`` / mean width of ``uniform``."""
    widths = {(r["scenario"], r["method"]): r["mean_width"] for r in frame.iter_rows(named=True)}
    return {
        s: widths[(s, "active")] / widths[(s, "uniform")]
        for s in dict.fromkeys(frame["scenario"])
        if (s, "active") in widths and (s, "uniform") in widths
    }


def check_active(frame: pl.DataFrame) -> list[str]:
    """The unmet targets (module docstring), in words; [] when all are met. A missing row is unmet."""
    unmet = []
    lo, hi = COVERAGE
    got = {(r["scenario"], r["method"]): r["coverage"] for r in frame.iter_rows(named=True)}
    for scenario in dict.fromkeys(frame["scenario"]):
        for method in METHODS:
            c = got.get((scenario, method))
            if c is None or not lo <= c <= hi:
                shown = "missing" if c is None else f"{c:.1%}"
                unmet.append(f"{scenario} {method}: coverage {shown}, target {lo:.0%}-{hi:.0%}")
    ratio = width_ratios(frame).get("active_varying")
    if "active_varying" in set(frame["scenario"]) and not (ratio is not None and ratio < 1.0):
        unmet.append(f"active_varying: active/uniform width ratio {ratio}, target below 1")
    return unmet
