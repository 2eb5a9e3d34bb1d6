"""The ``allocation_neyman`` validation scenario: asking by stratum (Neyman allocation) against asking alike.

The question (issue 40, "Allocation"): does asking for ratings in proportion to each stratum's rectifier spread
(``stats/allocation.py``: n_h proportional to W_h sigma_h) reach the width of PPI++ with uniform asking on fewer
ratings, and keep the interval's coverage?

The generator (known truth, predictions drawn directly: no model is fit). Each arm has ``N_PER_ARM`` sessions in
three strata with probabilities ``SHARES`` = (0.5, 0.3, 0.2); a session's rating is y = mu_{arm,h} + e, e ~ N(0,
``LABEL_SD``), and its prediction f = y + u, u ~ N(0, ``MODEL_NOISE``[h]): the model is sharp in the first stratum
(noise 0.05), fair in the second (0.25) and noise in the third (1.0), so the rectifier Y - lam_h f spreads
sigma_h ~ (0.05, 0.18, 0.24) with each stratum's best lambda. Stratum means ``MEANS`` differ a little, and the
treatment moves them by ``EFFECTS``: the true effect is sum_h SHARES_h EFFECTS_h (the population's; each arm's own
shares vary around it, which the stratified standard error counts: ``stats/stratified.py``).

Each replication draws both arms and three ways of rating them:

- ``ppi``: ``N_RATINGS`` sessions per arm rated at random (asking everyone alike), PPI++ with one lambda per arm
  (``stats.ppi.ppi_mean``): the reference the target names;
- ``ppi_stratified``: the same ratings, the stratified PPI++ mean (``stats.stratified.stratified_ppi_mean``);
- ``ppi_stratified_neyman``: ``NEYMAN_SHARE`` x ``N_RATINGS`` (20 % fewer) ratings per arm, allocated across the
  strata by Neyman (``stats.allocation.neyman_shares``, rounded to whole ratings), at random within each stratum,
  the stratified PPI++ mean. The sigma_h the allocation uses are estimated, not known: from a pilot of
  ``PILOT_RATINGS`` sessions rated at random in an earlier draw from the same generator (the ratings an ask policy
  is fit on before the experiment; they are not the experiment's and are not counted), each stratum's rectifier sd
  at its own PPI++ lambda (Cov(Y, f) / Var(f), clipped to [0, 1]; ``stats.allocation.rectifier_sd``).

The rows have ``scenario.ReplicationRow``'s fields (``coverage.summarize`` takes them); each method's interval is the
Wald interval of the difference of the arms' means (``stats.ppi.difference``), scored against the truth.

Targets (``check_allocation``): every method's coverage within 93-97 %, and ``ppi_stratified_neyman``'s mean width
(on 20 % fewer ratings) at most ``ppi``'s and at most ``ppi_stratified``'s: Neyman allocation reaches PPI++'s width
with >= 20 % fewer ratings, and the allocation alone (the same stratified estimator, asking alike) does too, so the
saving is not only the stratified estimator's own gain over one lambda (which in this generator is large: a single
lambda must compromise between a sharp model and noise).
The ratings Neyman would need for exactly PPI++'s width are ``NEYMAN_SHARE`` x (w_neyman / w_ppi)^2 of PPI++'s
(width proportional to 1 / sqrt(n) when, as here, the unrated part is small), printed by ``pulse validate`` as the
mean widths.

Measured (``pulse validate --scenarios allocation_neyman --replications 500 --workers 1``, seed 0): see
docs/asking.md ("Validation").

Deterministic in ``seed``: replication i uses a seed derived from (seed, "allocation_neyman", i) only.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from ..estimates.methods import Method
from ..stats.allocation import neyman_shares, rectifier_sd
from ..stats.ppi import ArmMean, difference, ppi_mean
from ..stats.stratified import stratified_ppi_mean
from .scenario import ReplicationRow, value

SCENARIO = "allocation_neyman"
SHARES = np.array([0.5, 0.3, 0.2])
MEANS = np.array([0.55, 0.45, 0.5])  # control's mean rating per stratum (a 0-1 scale)
EFFECTS = np.array([0.04, 0.0, -0.03])  # the treatment's effect per stratum
LABEL_SD = 0.25
MODEL_NOISE = np.array([0.05, 0.25, 1.0])
N_PER_ARM = 4000
N_RATINGS = 400
NEYMAN_SHARE = 0.8
PILOT_RATINGS = 300
TRUTH = float(SHARES @ EFFECTS)
NEYMAN = f"{Method.PPI_STRATIFIED}_neyman"  # stratified PPI++ with the asks allocated by Neyman
METHODS = (str(Method.PPI), str(Method.PPI_STRATIFIED), NEYMAN)  # stored names (plain str: polars reads enums as Enum)
COVERAGE = (0.93, 0.97)


def _arm(rng: np.random.Generator, n: int, effect: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stratum, y, f) of n sessions of one arm."""
    h = rng.choice(SHARES.size, n, p=SHARES)
    y = MEANS[h] + (EFFECTS[h] if effect else 0.0) + rng.normal(0.0, LABEL_SD, n)
    return h, y, y + rng.normal(0.0, MODEL_NOISE[h])


def pilot_sds(rng: np.random.Generator) -> np.ndarray:
    """Each stratum's rectifier sd at its own PPI++ lambda, from ``PILOT_RATINGS`` ratings of an earlier draw."""
    h, y, f = _arm(rng, PILOT_RATINGS, effect=False)
    sds = []
    for k in range(SHARES.size):
        yk, fk = y[h == k], f[h == k]
        lam = float(np.clip(np.cov(yk, fk)[0, 1] / fk.var(ddof=1), 0.0, 1.0)) if yk.size > 2 else 0.0
        sds.append(rectifier_sd(yk, fk, lam))
    return np.array(sds)


def _neyman_counts(total: int, shares: np.ndarray, available: np.ndarray) -> np.ndarray:
    """Whole ratings per stratum: the largest-remainder rounding of total x shares, at most each stratum's sessions."""
    raw = total * shares
    counts = np.floor(raw).astype(int)
    counts[np.argsort(counts - raw)[: total - counts.sum()]] += 1
    return np.minimum(counts, available)


def _uniform(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    rated = np.zeros(size, dtype=bool)
    rated[rng.choice(size, n, replace=False)] = True
    return rated


def _neyman(rng: np.random.Generator, h: np.ndarray, counts: np.ndarray) -> np.ndarray:
    rated = np.zeros(h.size, dtype=bool)
    for k, c in enumerate(counts):
        rated[rng.choice(np.flatnonzero(h == k), c, replace=False)] = True
    return rated


def _ppi(y, f, rated, h) -> ArmMean:
    return ppi_mean(y[rated], f[rated], f[~rated])


def _stratified(y, f, rated, h) -> ArmMean:
    return stratified_ppi_mean(y[rated], f[rated], f[~rated], h[rated], h[~rated])


def replicate_allocation(seed: int, scenario: str = SCENARIO, **_: object) -> list[ReplicationRow]:
    """One replication: both arms drawn, rated three ways (module docstring), each scored against ``TRUTH``."""
    rng = np.random.default_rng(seed)
    sds = pilot_sds(rng)
    arms = [_arm(rng, N_PER_ARM, effect=True), _arm(rng, N_PER_ARM, effect=False)]  # treatment, control
    shares = neyman_shares(SHARES, sds)
    n_neyman = int(round(NEYMAN_SHARE * N_RATINGS))
    means: dict[str, list[ArmMean]] = {m: [] for m in METHODS}
    for h, y, f in arms:
        uniform = _uniform(rng, N_RATINGS, h.size)
        available = np.bincount(h, minlength=SHARES.size)
        neyman = _neyman(rng, h, _neyman_counts(n_neyman, shares, available))
        means[Method.PPI].append(_ppi(y, f, uniform, h))
        means[Method.PPI_STRATIFIED].append(_stratified(y, f, uniform, h))
        means[NEYMAN].append(_stratified(y, f, neyman, h))
    rows = []
    for method, (t, c) in means.items():
        d = difference(t, c)
        rows.append(
            ReplicationRow(
                scenario=scenario,
                method=method,
                covered=bool(d.ci_low <= TRUTH <= d.ci_high),
                width=float(d.ci_high - d.ci_low),
                error=float(d.estimate - TRUTH),
                flagged=False,
            )
        )
    return rows


def check_allocation(frame: pl.DataFrame) -> list[str]:
    """The targets (module docstring) the summary ``frame`` does not meet; [] when all are met."""
    unmet = []
    lo, hi = COVERAGE
    for method in METHODS:
        v = value(frame, SCENARIO, method, "coverage")
        if v is None:
            unmet.append(f"{SCENARIO} {method}: no row")
        elif not lo <= v <= hi:
            unmet.append(f"{SCENARIO} {method} coverage within {lo:.0%}-{hi:.0%}: got {v:.1%}")
    neyman = value(frame, SCENARIO, NEYMAN, "mean_width")
    for reference in (Method.PPI, Method.PPI_STRATIFIED):
        width = value(frame, SCENARIO, reference, "mean_width")
        if neyman is not None and width is not None and neyman > width:
            unmet.append(
                f"{SCENARIO} ppi_stratified_neyman on {NEYMAN_SHARE:.0%} of the ratings as narrow as {reference}: "
                f"got {neyman / width:.3f} x its width"
            )
    return unmet
