"""Neyman allocation of ratings (and of asks) across strata for the stratified prediction-powered mean.

The stratified PPI++ mean of an arm (Fisch et al. 2024, "Stratified prediction-powered inference"; PULSE's
``stats/stratified.py``) estimates each stratum h's mean with its own power-tuning lam_h and combines them with the
strata's shares W_h = N_h / N of the arm's sessions. With n_h ratings in stratum h its variance is

    V(n) = sum_h W_h^2 sigma_h^2 / n_h  +  sum_h W_h^2 lam_h^2 Var_h(f~) / N_h
           (the rated part: the rectifier)  (the unrated part: does not depend on where the ratings go)

sigma_h the standard deviation of the rectifier Y - lam_h f within stratum h (``rectifier_sd``). This is the
textbook stratified-sampling variance (Cochran, *Sampling Techniques*, 3rd ed., 5.5) with the rectifier in place of
Y, so its minimiser is the same:

**Per rating (a budget of n ratings).** Minimise sum_h W_h^2 sigma_h^2 / n_h subject to sum_h n_h = n: the
Lagrangian's derivative -W_h^2 sigma_h^2 / n_h^2 + mu = 0 gives n_h = W_h sigma_h / sqrt(mu), i.e.

    n_h = n W_h sigma_h / sum_k W_k sigma_k                     (Neyman), and then V = (sum_h W_h sigma_h)^2 / n

Asking everyone alike puts n_h = n W_h (proportional allocation), V = sum_h W_h sigma_h^2 / n. By Cauchy-Schwarz
(sum W sigma)^2 <= (sum W)(sum W sigma^2) = sum W sigma^2, with equality iff every sigma_h is the same: Neyman is
never worse, and gains exactly as much as the strata's rectifier spreads differ.

**Per ask (a budget of asks, as PULSE budgets: ``estimates/ask_models.py``).** A stratum's sessions are asked with
probability q_h and answer with probability a_h, so n_h = N_h q_h a_h ratings come from A_h = N_h q_h asks. With
N_h = N W_h, V = (1/N) sum_h W_h sigma_h^2 / (q_h a_h); minimise it subject to sum_h N_h q_h = A:
d/dq_h [W_h sigma_h^2 / (q_h a_h) + mu N W_h q_h] = 0 gives q_h^2 = sigma_h^2 / (mu N a_h), so

    q_h proportional to sigma_h / sqrt(a_h),   the share of asks in h   A_h / A = W_h t_h / sum_k W_k t_k,
                                               t_h = sigma_h / sqrt(a_h)

and V = (sum_h W_h sigma_h / sqrt(a_h))^2 / A, against asking alike (q_h = A / N) V = sum_h W_h sigma_h^2 / a_h / A.
This is the ask policy's q proportional to s / sqrt(a) (``estimates/ask_models.py``'s docstring) with s_i the
stratum's sigma_h and a_i its answer rate; with every a_h equal it is the per-rating Neyman share. (The clip
q_h <= 1 binds when a stratum's Neyman share would ask more sessions than it has; ``ask_shares`` caps such strata at
every session asked and shares the rest among the others by the same rule, the KKT solution.)

**The ratings (asks) a target width takes.** A two-sided interval of level 1 - alpha has width w = 2 z sqrt(V),
z = z_{1 - alpha/2}. With the rated part c / n (c = sum_h W_h^2 sigma_h^2 / s_h for shares s_h of the ratings) and
the unrated part U, w is met when c / n <= (w / 2z)^2 - U, so

    n = c / ((w / 2z)^2 - U),     uniform: c = sum_h W_h sigma_h^2,   Neyman: c = (sum_h W_h sigma_h)^2

and the ratings Neyman saves against asking alike at the same width are 1 - (sum W sigma)^2 / sum W sigma^2,
whatever the width and U (the same share for asks with sigma_h / sqrt(a_h) in place of sigma_h).

Nothing here knows PULSE: arrays in, arrays out (ARCHITECTURE.md's rule for ``stats/``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm


def _check(weights, sds, answer_rates=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    W = np.asarray(weights, dtype=np.float64).reshape(-1)
    s = np.asarray(sds, dtype=np.float64).reshape(-1)
    a = np.ones_like(W) if answer_rates is None else np.asarray(answer_rates, dtype=np.float64).reshape(-1)
    if not W.size == s.size == a.size or W.size == 0:
        raise ValueError(
            f"weights, sds and answer rates must have one entry per stratum, got {W.size}, {s.size}, {a.size}"
        )
    if not (np.isfinite(W).all() and (W >= 0).all() and W.sum() > 0):
        raise ValueError("stratum weights must be non-negative, finite and not all 0")
    if not (np.isfinite(s).all() and (s >= 0).all()):
        raise ValueError("stratum standard deviations must be non-negative and finite")
    if not (np.isfinite(a).all() and (a > 0).all() and (a <= 1).all()):
        raise ValueError("answer rates must be in (0, 1]")
    return W / W.sum(), s, a


def rectifier_sd(y, f, lam: float) -> float:
    """sd of the rectifier Y - lam f over one stratum's rated sessions (ddof 0, as ``stats.ppi`` computes
    Var(Y - lam f)); NaN with no rated session."""
    r = np.asarray(y, dtype=np.float64) - lam * np.asarray(f, dtype=np.float64)
    return float(r.std()) if r.size else math.nan


def neyman_shares(weights, sds) -> np.ndarray:
    """The share of the ratings each stratum gets: n_h / n = W_h sigma_h / sum_k W_k sigma_k (module docstring).

    Every sigma_h 0 (no rectifier spread anywhere): the proportional shares W_h (nothing to gain, nothing lost)."""
    W, s, _ = _check(weights, sds)
    t = W * s
    return t / t.sum() if t.sum() > 0 else W


def ask_shares(weights, sds, answer_rates=None, asks_per_session: float | None = None) -> np.ndarray:
    """The share of the asks each stratum gets under a budget of asks: A_h / A proportional to
    W_h sigma_h / sqrt(a_h) (module docstring); ``answer_rates`` None: every a_h = 1, the per-rating Neyman shares.

    ``asks_per_session``: the budget A / N; when given, a stratum whose share would ask more than all its sessions
    (q_h > 1) is capped at q_h = 1 and the rest of the budget shared among the others by the same rule (KKT)."""
    W, s, a = _check(weights, sds, answer_rates)
    score = s / np.sqrt(a)
    if not (score * W).sum() > 0:
        return W
    if asks_per_session is None:
        return W * score / (W * score).sum()
    if not asks_per_session > 0:
        raise ValueError(f"asks_per_session must be positive, got {asks_per_session}")
    capped = np.zeros(W.size, dtype=bool)
    q = np.ones(W.size)
    for _ in range(W.size + 1):
        left = asks_per_session - W[capped].sum()  # asks per session left for the uncapped strata
        free = ~capped & (W > 0)
        if left <= 0 or not free.any():
            q = np.where(capped, 1.0, 0.0)
            break
        m = left / float((W[free] * score[free]).sum()) if (W[free] * score[free]).sum() > 0 else math.inf
        q = np.where(capped, 1.0, np.minimum(1.0, m * score))
        over = free & (m * score > 1.0)
        if not over.any():
            break
        capped |= over
    asks = W * q
    return asks / asks.sum()


def rated_variance(weights, sds, n_ratings) -> float:
    """The rated part of the stratified mean's variance, sum_h W_h^2 sigma_h^2 / n_h (n_h ratings in stratum h;
    a stratum with W_h sigma_h > 0 and no rating makes it infinite)."""
    W, s, _ = _check(weights, sds)
    n = np.asarray(n_ratings, dtype=np.float64).reshape(-1)
    if n.size != W.size:
        raise ValueError(f"n_ratings has {n.size} entries for {W.size} strata")
    need = W * s > 0
    if (n[need] <= 0).any():
        return math.inf
    return float(np.sum((W[need] * s[need]) ** 2 / n[need]))


def ratings_for_width(
    weights, sds, width: float, shares=None, *, unrated_variance: float = 0.0, alpha: float = 0.05
) -> float:
    """Total ratings n for which the stratified mean's two-sided 1 - alpha interval has ``width`` when stratum h
    gets n s_h of them: n = (sum_h W_h^2 sigma_h^2 / s_h) / ((width / 2z)^2 - U) (module docstring).

    ``shares`` None: the Neyman shares; pass ``weights`` for asking everyone alike. ``unrated_variance`` U: the
    part the ratings do not touch; inf when U alone is wider than ``width``. Not rounded (a planning figure)."""
    W, s, _ = _check(weights, sds)
    if not (math.isfinite(width) and width > 0):
        raise ValueError(f"width must be positive and finite, got {width}")
    sh = neyman_shares(W, s) if shares is None else np.asarray(shares, dtype=np.float64).reshape(-1)
    z = float(norm.ppf(1.0 - alpha / 2.0))
    room = (width / (2.0 * z)) ** 2 - unrated_variance
    if not room > 0:
        return math.inf
    need = W * s > 0
    if (sh[need] <= 0).any():
        return math.inf
    return float(np.sum((W[need] * s[need]) ** 2 / sh[need]) / room)


def ratings_saved(weights, sds, answer_rates=None) -> float:
    """The share of ratings (of asks, with ``answer_rates``) Neyman allocation saves against asking everyone alike
    at the same width: 1 - (sum_h W_h t_h)^2 / sum_h W_h t_h^2, t_h = sigma_h / sqrt(a_h) (module docstring);
    0 when every stratum is alike, NaN when no stratum has rectifier spread."""
    W, s, a = _check(weights, sds, answer_rates)
    t = s / np.sqrt(a)
    uniform = float(np.sum(W * t * t))
    return 1.0 - float(np.sum(W * t)) ** 2 / uniform if uniform > 0 else math.nan
