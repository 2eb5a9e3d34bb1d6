"""The ``stratified_differ`` and ``stratified_same`` validation scenarios: stratified PPI++ (``ppi_stratified``)
against PPI++ where the model's quality differs by stratum, and where it does not.

Each replication draws one two-arm experiment straight from a generator with a known truth; no model is fitted.
Per arm, ``n_per_arm`` sessions (default 2 000) fall in three strata (task types) with shares ``SHARES`` (0.5,
0.3, 0.2: strata of different sizes); a session of stratum h in arm a has a true satisfaction
T ~ N(mu_h + delta_{h,a}, 0.2), its rating (when rated) is Y = T + e, e ~ N(0, 0.15) (the rating's noise), and
ratings are missing at random: each session is rated with probability ``rated_fraction`` (default 0.15, ~300
ratings an arm). The model's prediction is f = mu_h + b_h (T - mu_h) + u, u ~ N(0, s_h): it knows the stratum's
mean (a model reading the task type would) and tracks T with strength b_h, and it is independent of the rating's
noise e given T, which is what cross-fitting gives a real model's predictions (the prediction never saw the
rating it is compared with). The truth is the difference of the arms' population means,
sum_h share_h (delta_{h,t} - delta_{h,c}), with control's delta 0.

- ``stratified_differ``: strata of different label means (mu 0.75, 0.40, 0.55) and effects (+0.06, -0.02, 0.00),
  and a model strong in the first (b = 1, s = 0.05: r ~ 0.78 with Y), pure noise in the second (b = 0, s = 0.30:
  r = 0, its predictions spread 1.5 x as widely as in the first) and middling in the third (b = 0.6, s = 0.12:
  r ~ 0.5). PPI++'s one lambda per arm is a compromise: too small for the first stratum, and in the second every
  bit of lambda adds the predictions' noise. The gain depends on how much the strata differ: with the noise
  stratum's predictions as spread as the first's (s = 0.25) and means 0.70, 0.45, 0.55, stratified PPI++'s
  standard error came out 0.90 x PPI++'s (150 arms, seeds 0-149), here 0.87 x.
- ``stratified_same``: three strata alike (mu 0.6, effect +0.03, b = 0.8, s = 0.12 in each): a lambda per
  stratum has nothing to gain, and costs only the noise of estimating three lambdas instead of one.

The estimates are ``estimates.effects.compare``'s rows (the very function ``estimates.experiment_effects`` runs;
X the strata one-hot, for AIPW's propensity), with each session's stratum in ``ArmData.s_labeled`` /
``s_unlabeled``, so the strata are pooled by ``estimates/strata.py``'s rule as in the pipeline. The rows have
``scenario.ReplicationRow``'s fields.

Targets (``check_stratified``), at 95 % nominal: ``ppi_stratified`` coverage within 93-97 % in both scenarios;
its mean width at most 0.90 x PPI++'s in ``stratified_differ`` and at most 1.02 x in ``stratified_same``
(issue 40).

Measured: see docs/statistics.md ("Stratified PPI++") for the figures of
``pulse validate --scenarios stratified_differ,stratified_same --replications 500``.

Deterministic in ``seed``: replication i uses a seed derived from (seed, scenario, i) only, whatever the workers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ..estimates.effects import ArmData, Settings, compare
from ..estimates.methods import Method
from .scenario import ReplicationRow, scored, value

SHARES = (0.5, 0.3, 0.2)
STRATA = ("fix_bugs", "write_documentation", "implement_features")
N_PER_ARM = 2000
RATED_FRACTION = 0.15
TRUTH_SD = 0.2
RATING_NOISE_SD = 0.15
SETTINGS = Settings(n_resamples=200, n_permutations=50, threads=1)  # the naive rows' resamplings are not scored
COVERAGE = (0.93, 0.97)
DIFFER_MAX_WIDTH = 0.90
SAME_MAX_WIDTH = 1.02


@dataclass(frozen=True)
class Stratum:
    """One stratum of the generator: its label mean, the treatment's effect in it, and the model's strength b
    and noise s there (f = mu + b (T - mu) + N(0, s))."""

    mean: float
    effect: float
    strength: float
    noise: float


DESIGNS: dict[str, tuple[Stratum, ...]] = {
    "stratified_differ": (
        Stratum(0.75, 0.06, 1.0, 0.05),
        Stratum(0.40, -0.02, 0.0, 0.30),
        Stratum(0.55, 0.0, 0.6, 0.12),
    ),
    "stratified_same": (Stratum(0.6, 0.03, 0.8, 0.12),) * 3,
}


def true_effect(scenario: str) -> float:
    """sum_h share_h * effect_h: the difference of the arms' population means."""
    return float(sum(w * s.effect for w, s in zip(SHARES, DESIGNS[scenario], strict=True)))


def _arm(
    name: str, rng: np.random.Generator, design: tuple[Stratum, ...], treated: bool, n: int, rated_fraction: float
):
    h = rng.choice(len(SHARES), size=n, p=SHARES)
    mean = np.array([s.mean for s in design])[h]
    effect = np.array([s.effect for s in design])[h] if treated else 0.0
    truth = mean + effect + TRUTH_SD * rng.standard_normal(n)
    rating = truth + RATING_NOISE_SD * rng.standard_normal(n)
    strength, noise = np.array([s.strength for s in design])[h], np.array([s.noise for s in design])[h]
    f = mean + strength * (truth - mean) + noise * rng.standard_normal(n)
    rated = rng.random(n) < rated_fraction
    X = np.eye(len(SHARES))[h]
    labels = np.array(STRATA, dtype=object)[h]
    return ArmData(
        name, rating[rated], f[rated], f[~rated], X[rated], X[~rated],
        s_labeled=labels[rated], s_unlabeled=labels[~rated],
    )  # fmt: skip


def replicate_stratified(
    seed: int,
    scenario: str = "stratified_differ",
    n_per_arm: int = N_PER_ARM,
    rated_fraction: float = RATED_FRACTION,
    family: str | None = None,  # noqa: ARG001  (validate passes it to every scenario; no model is fitted here)
) -> list[ReplicationRow]:
    """One experiment of ``scenario`` (module docstring): every row of ``compare`` scored against the truth."""
    rng = np.random.default_rng(seed)
    design = DESIGNS[scenario]
    treat = _arm("t", rng, design, True, n_per_arm, rated_fraction)
    control = _arm("c", rng, design, False, n_per_arm, rated_fraction)
    theta = true_effect(scenario)
    rows, _ = compare(treat, control, SETTINGS, resampling=False)
    return scored(scenario, rows, theta)


def check_stratified(frame: pl.DataFrame, scenario: str) -> list[str]:
    """The targets of ``scenario`` (module docstring) ``frame`` (a ``coverage.summarize`` frame) does not meet."""
    unmet = []
    lo, hi = COVERAGE
    coverage = value(frame, scenario, Method.PPI_STRATIFIED, "coverage")
    if coverage is None or not lo <= coverage <= hi:
        unmet.append(f"{scenario} ppi_stratified coverage within {lo:.0%}-{hi:.0%}: got {coverage}")
    limit = DIFFER_MAX_WIDTH if scenario == "stratified_differ" else SAME_MAX_WIDTH
    strat = value(frame, scenario, Method.PPI_STRATIFIED, "mean_width")
    ppi = value(frame, scenario, Method.PPI, "mean_width")
    if strat is None or ppi is None or not strat <= limit * ppi:
        ratio = None if strat is None or ppi is None else f"{strat / ppi:.3f} x"
        unmet.append(f"{scenario} ppi_stratified mean width <= {limit} x ppi's: got {ratio}")
    return unmet
