"""How small an arm difference a comparison can detect, and how many ratings that takes (normal approximation).

Two independent arms are compared by the difference of their mean labels (any numeric scale: stars, a 0..1
score; ``sd`` is the label's standard deviation in the same units, assumed equal in both arms).

Minimum detectable effect (MDE): the smallest true difference of arm means that a two-sided test at level
``alpha`` detects (rejects "no difference") with probability ``power``. True differences smaller than the MDE
will usually be missed; it is a property of the design (sizes, noise), not of the observed data::

    MDE = (z_{1 - alpha/2} + z_{power}) * sd * sqrt(k_t / n_t + k_c / n_c)

with n the number of labeled (rated) sessions of an arm and k = 1 for the mean of the labels alone.

Prediction-powered means (PPI++, see :mod:`pulse_pipeline.stats.ppi`) also use N unlabeled sessions whose
predictions correlate rho with the label. Their variance is a fraction k of the labels-only variance::

    k = 1 - rho^2 * N / (n + N)

so n labels plus N predictions are worth n / k labels ("effective labels", ppi_py's ``effective_n``). This k is
the best case: it assumes the power-tuned lam of PPI++ (estimated well, i.e. n not tiny) and rated sessions
representative of their arm (ratings missing at random), so that rho measured on the rated sessions holds for the
unrated ones too. With self-selected ratings or a rho measured optimistically, the real variance is larger than k
says.
"""

from __future__ import annotations

import math

from scipy.stats import norm

# Relative slack when comparing an MDE with a target effect, so that rounding in sqrt does not add a label.
_REL_TOL = 1e-12


def _check_n(n: int, name: str) -> None:
    if not n >= 2:
        raise ValueError(f"{name} must be at least 2 labeled sessions, got {n}")


def _check_N(N: int, name: str) -> None:
    if not N >= 0:
        raise ValueError(f"{name} (unlabeled sessions) must be non-negative, got {N}")


def _check_rho(rho: float) -> None:
    if not -1.0 <= rho <= 1.0:
        raise ValueError(f"rho must be in [-1, 1], got {rho}")


def _z_sum(alpha: float, power: float) -> float:
    """z_{1 - alpha/2} + z_{power}."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}")
    return float(norm.ppf(1.0 - alpha / 2.0) + norm.ppf(power))


def _check_sd(sd: float) -> None:
    if not (math.isfinite(sd) and sd > 0.0):
        raise ValueError(f"sd must be positive and finite, got {sd}")


def ppi_variance_factor(n: int, N: int, rho: float) -> float:
    """Variance of the PPI++ mean relative to the mean of the n labels alone: k = 1 - rho^2 * N / (n + N).

    Args:
        n: labeled sessions (>= 2).
        N: unlabeled sessions with predictions (>= 0).
        rho: correlation of predictions and labels, in [-1, 1].

    Returns:
        k in (0, 1]; 1.0 when rho = 0 or N = 0 (predictions add nothing).
    """
    _check_n(n, "n")
    _check_N(N, "N")
    _check_rho(rho)
    return 1.0 - rho * rho * N / (n + N)


def minimum_detectable_effect(
    n_treatment: int,
    n_control: int,
    sd: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    N_treatment: int = 0,
    N_control: int = 0,
    rho: float = 0.0,
) -> float:
    """MDE = (z_{1 - alpha/2} + z_{power}) * sd * sqrt(k_t / n_t + k_c / n_c), k = :func:`ppi_variance_factor`.

    Args:
        n_treatment, n_control: labeled sessions per arm (>= 2 each).
        sd: standard deviation of the label (same units as the returned MDE), positive and finite.
        alpha: two-sided test level, in (0, 1).
        power: probability of detecting a true difference equal to the MDE, in (0, 1).
        N_treatment, N_control: unlabeled sessions per arm (>= 0); 0 (the default) gives the labels-only MDE.
        rho: correlation of predictions and labels, in [-1, 1]; 0 (the default) gives the labels-only MDE.

    Returns:
        The MDE, in the units of ``sd`` (always positive).
    """
    _check_n(n_treatment, "n_treatment")
    _check_n(n_control, "n_control")
    _check_N(N_treatment, "N_treatment")
    _check_N(N_control, "N_control")
    _check_sd(sd)
    z = _z_sum(alpha, power)
    k_t = ppi_variance_factor(n_treatment, N_treatment, rho)
    k_c = ppi_variance_factor(n_control, N_control, rho)
    return z * sd * math.sqrt(k_t / n_treatment + k_c / n_control)


def labels_per_arm_needed(
    effect: float, sd: float, *, alpha: float = 0.05, power: float = 0.8, N: int = 0, rho: float = 0.0
) -> int:
    """Smallest n labels per arm (both arms: n labels, N unlabeled) whose MDE is at most |effect|.

    With c = 2 (z_{1 - alpha/2} + z_{power})^2 sd^2 / effect^2 the labels-only answer is n = c. With N predictions
    per arm, MDE <= |effect| means n / k >= c, i.e. n (n + N) >= c (n + (1 - rho^2) N), whose positive root is::

        n = [-(N - c) + sqrt((N - c)^2 + 4 c (1 - rho^2) N)] / 2

    The root is rounded up (at least 2) and checked against :func:`minimum_detectable_effect`.

    Args:
        effect: the difference of arm means to detect (sign ignored), non-zero and finite.
        sd, alpha, power, rho: as in :func:`minimum_detectable_effect`.
        N: unlabeled sessions per arm (>= 0).

    Returns:
        n, an int >= 2.
    """
    if not (math.isfinite(effect) and effect != 0.0):
        raise ValueError(f"effect must be non-zero and finite, got {effect}")
    _check_sd(sd)
    _check_N(N, "N")
    _check_rho(rho)
    z = _z_sum(alpha, power)
    c = 2.0 * (z * sd / effect) ** 2
    b, q = N - c, c * (1.0 - rho * rho) * N
    root = math.sqrt(b * b + 4.0 * q)
    # The two forms are equal; the second avoids cancellation when N is much larger than c.
    n_real = (root - b) / 2.0 if b <= 0.0 else 2.0 * q / (b + root)

    target = abs(effect) * (1.0 + _REL_TOL)

    def mde(k: int) -> float:
        return minimum_detectable_effect(k, k, sd, alpha=alpha, power=power, N_treatment=N, N_control=N, rho=rho)

    n = max(2, math.ceil(n_real))
    while n > 2 and mde(n - 1) <= target:
        n -= 1
    while mde(n) > target:
        n += 1
    return n


def labels_per_arm_at_rated_share(
    effect: float, sd: float, rated_share: float, *, alpha: float = 0.05, power: float = 0.8, rho: float = 0.0
) -> int:
    """Labels per arm for PPI when traffic keeps its share r of rated sessions (N grows with n: N = n (1 - r) / r).

    The PPI variance factor is then 1 - rho^2 N / (n + N) = 1 - rho^2 (1 - r) whatever n, so the answer is the
    labels-only one for a label sd shrunk by sqrt of that factor. With rho = 0 it is the naive answer.

    Args:
        rated_share: r, rated sessions over all sessions, in (0, 1].
        effect, sd, alpha, power, rho: as in :func:`labels_per_arm_needed`.
    """
    if not 0.0 < rated_share <= 1.0:
        raise ValueError(f"rated_share must be in (0, 1], got {rated_share}")
    _check_rho(rho)
    _check_sd(sd)
    k = 1.0 - rho * rho * (1.0 - rated_share)
    return labels_per_arm_needed(effect, sd * math.sqrt(k), alpha=alpha, power=power)
