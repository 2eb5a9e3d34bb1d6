"""Label-only comparisons of two arms: Welch interval, percentile bootstrap, permutation p-value.

Every function takes the ratings of the treatment arm ``y_t`` and of the control arm ``y_c`` (1-D arrays of any
numeric dtype) and estimates the difference of means ``mean(y_t) - mean(y_c)``. Intervals are returned as a frozen
:class:`Interval`; degenerate inputs (an empty arm, a single rating, all ratings equal) never raise and never
return an unexplained NaN: the reason is written in ``Interval.note``.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy import stats

CHUNK_ENTRIES = 4_000_000
"""Bootstrap and permutation work (here and in ``cluster.py``) in chunks of at most this many matrix entries (8
bytes each: 32 MB), so memory stays bounded whatever the arm sizes."""


@dataclass(frozen=True)
class Interval:
    """A point estimate with its standard error and a (1 - alpha) confidence interval.

    ``note`` is None for a regular result and otherwise says, in words, what was degenerate about the input and
    what was done about it (e.g. an infinite interval because an arm has a single rating).
    """

    estimate: float
    se: float
    ci_low: float
    ci_high: float
    note: str | None = None


def as_finite_1d(y, name: str) -> np.ndarray:
    """``y`` as a 1-D float64 array; a NaN or infinite value is a ``ValueError`` naming ``name`` (an estimator
    never returns a number computed from one)."""
    arr = np.asarray(y, dtype=np.float64)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if not np.isfinite(arr.sum()):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def check_alpha(alpha: float) -> None:
    """Refuse an ``alpha`` outside (0, 1) with a ``ValueError`` that says so."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def join_notes(*notes: str | None) -> str | None:
    """The non-empty ``notes`` joined with "; ", or None when there is none (a result's ``note``)."""
    kept = [n for n in notes if n]
    return "; ".join(kept) if kept else None


def empty_arm_interval(n_t: int, n_c: int) -> Interval | None:
    """The all-NaN ``Interval`` with its reason when an arm has no rating (a difference is then undefined), else
    None."""
    if n_t == 0 or n_c == 0:
        which = " and ".join(a for a, k in (("treatment", n_t), ("control", n_c)) if k == 0)
        nan = float("nan")
        return Interval(nan, nan, nan, nan, note=f"no ratings in {which}: the difference is undefined")
    return None


def welch_difference(y_t, y_c, alpha: float = 0.05) -> Interval:
    """Welch's difference of means with a t interval (Welch-Satterthwaite degrees of freedom).

    With sample variances s_t^2, s_c^2 (ddof = 1) and sizes n_t, n_c::

        estimate = mean(y_t) - mean(y_c)
        se       = sqrt(s_t^2 / n_t + s_c^2 / n_c)
        df       = se^4 / ((s_t^2/n_t)^2 / (n_t - 1) + (s_c^2/n_c)^2 / (n_c - 1))
        CI       = estimate -/+ t_{1 - alpha/2, df} * se

    This equals ``scipy.stats.ttest_ind(y_t, y_c, equal_var=False).confidence_interval(1 - alpha)``.

    Args:
        y_t: ratings of the treatment arm, shape (n_t,).
        y_c: ratings of the control arm, shape (n_c,).
        alpha: error level; the interval targets coverage 1 - alpha. Must be in (0, 1).

    Returns:
        Interval. Degenerate cases (noted): an empty arm gives NaN throughout; an arm with one rating has no
        variance estimate, so se and the interval are infinite; se = 0 (all ratings equal within each arm) gives
        the zero-width interval [estimate, estimate].
    """
    check_alpha(alpha)
    y_t, y_c = as_finite_1d(y_t, "y_t"), as_finite_1d(y_c, "y_c")
    n_t, n_c = y_t.size, y_c.size
    empty = empty_arm_interval(n_t, n_c)
    if empty is not None:
        return empty
    est = float(y_t.mean() - y_c.mean())
    if n_t < 2 or n_c < 2:
        inf = float("inf")
        return Interval(est, inf, -inf, inf, note="an arm has one rating: no variance estimate, interval unbounded")
    a = y_t.var(ddof=1) / n_t
    b = y_c.var(ddof=1) / n_c
    se2 = a + b
    if se2 <= 0.0:
        return Interval(est, 0.0, est, est, note="all ratings equal within each arm: zero-width interval")
    se = float(np.sqrt(se2))
    df = se2**2 / (a**2 / (n_t - 1) + b**2 / (n_c - 1))
    q = float(stats.t.ppf(1.0 - alpha / 2.0, df))
    return Interval(est, se, est - q * se, est + q * se)


def _resampled_means(rng: np.random.Generator, y: np.ndarray, b: int) -> np.ndarray:
    """Means of ``b`` bootstrap resamples of ``y`` (one (b, n) index matrix)."""
    idx = rng.integers(0, y.size, size=(b, y.size))
    return y[idx].mean(axis=1)


def bootstrap_difference(y_t, y_c, n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05) -> Interval:
    """Percentile bootstrap for the difference of means, resampling each arm independently.

    For b = 1..B draw y_t* (n_t draws with replacement from y_t) and y_c* (n_c from y_c) and set
    d_b = mean(y_t*) - mean(y_c*). Then::

        estimate = mean(y_t) - mean(y_c)                 (the observed difference, not the bootstrap mean)
        se       = sd(d_1..d_B)                          (ddof = 1)
        CI       = [quantile(d, alpha/2), quantile(d, 1 - alpha/2)]   (numpy's default linear quantile)

    Resamples are drawn as (chunk, n) index matrices with ``numpy.random.default_rng(seed).integers`` (treatment
    then control in each chunk; a chunk holds at most 4 million indices), so the result is exactly reproducible
    for a given seed and memory stays bounded.

    Args:
        y_t: ratings of the treatment arm, shape (n_t,).
        y_c: ratings of the control arm, shape (n_c,).
        n_resamples: B, the number of bootstrap resamples (>= 2).
        seed: seed of the numpy Generator.
        alpha: error level; the interval targets coverage 1 - alpha. Must be in (0, 1).

    Returns:
        Interval. An empty arm gives NaN with a note; an arm with a single rating contributes no variability
        (noted: the interval then understates uncertainty).
    """
    check_alpha(alpha)
    if n_resamples < 2:
        raise ValueError("n_resamples must be at least 2")
    y_t, y_c = as_finite_1d(y_t, "y_t"), as_finite_1d(y_c, "y_c")
    n_t, n_c = y_t.size, y_c.size
    empty = empty_arm_interval(n_t, n_c)
    if empty is not None:
        return empty
    est = float(y_t.mean() - y_c.mean())
    rng = np.random.default_rng(seed)
    chunk = max(1, CHUNK_ENTRIES // max(n_t, n_c))
    diffs = np.empty(n_resamples)
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        diffs[start : start + b] = _resampled_means(rng, y_t, b) - _resampled_means(rng, y_c, b)
    lo, hi = np.quantile(diffs, [alpha / 2.0, 1.0 - alpha / 2.0])
    note = None
    if n_t < 2 or n_c < 2:
        note = "an arm has a single rating: the bootstrap sees no variability in it, the interval is too narrow"
    return Interval(est, float(diffs.std(ddof=1)), float(lo), float(hi), note=note)


def permutation_pvalue(y_t, y_c, n_permutations: int = 10_000, seed: int = 0, workers: int = 1) -> float:
    """Two-sided Monte Carlo permutation p-value for the difference of means.

    Pool z = (y_t, y_c) (size m = n_t + n_c, total T = sum z). A permutation assigns a uniformly random subset of
    n_t pooled ratings to treatment; with S its sum the statistic is::

        stat = S / n_t - (T - S) / n_c

    For B random subsets::

        p = (1 + #{b : |stat_b| >= |stat_obs|}) / (1 + B)

    (the "+1" counts the observed assignment, so p is never 0 and the test is valid at every B).

    Vectorized: per chunk of rows, a (chunk, m) matrix of uniform random keys; the n_small smallest keys of
    each row (``numpy.argpartition``, the first n_small positions of an argsort of random keys, found in O(m)
    instead of O(m log m)) pick the rows of the smaller arm, and S comes from one gather-and-sum. Ties in |stat|
    are counted with a relative tolerance of 1e-12 so that permutations equal to the observed one always count.
    The keys are drawn in this thread, chunk after chunk; ``workers`` threads pick and count the chunks
    (``argpartition`` and the sums release the GIL), so the p-value is the same for any number of them.

    Args:
        y_t: ratings of the treatment arm, shape (n_t,).
        y_c: ratings of the control arm, shape (n_c,).
        n_permutations: B, the number of random permutations (>= 1).
        seed: seed of ``numpy.random.default_rng``; the p-value is exactly reproducible for a given seed.
        workers: threads counting the chunks (1: this thread alone).

    Returns:
        The p-value in (0, 1]. If an arm is empty there is nothing to compare and 1.0 is returned.
    """
    y_t, y_c = as_finite_1d(y_t, "y_t"), as_finite_1d(y_c, "y_c")
    return block_permutation_pvalue(y_t, np.ones(y_t.size), y_c, np.ones(y_c.size), n_permutations, seed, workers)


def block_permutation_pvalue(
    s_t, n_t, s_c, n_c, n_permutations: int = 10_000, seed: int = 0, workers: int = 1
) -> float:
    """``permutation_pvalue`` for blocks of ratings that move between arms together: block j has the sum s_j and
    the count n_j of its ratings, a permutation gives a random subset of as many blocks as treatment had to
    treatment, and stat = sum s / sum n (treatment) - the same (control). With every block one rating (n = 1) it is
    ``permutation_pvalue`` exactly; ``cluster.cluster_permutation_pvalue`` passes users' totals. 1.0 when an arm
    has no block."""
    if n_permutations < 1:
        raise ValueError("n_permutations must be at least 1")
    s_t, n_t, s_c, n_c = (np.asarray(x, dtype=np.float64).reshape(-1) for x in (s_t, n_t, s_c, n_c))
    if s_t.size == 0 or s_c.size == 0:
        return 1.0
    s, n = np.concatenate([s_t, s_c]), np.concatenate([n_t, n_c])
    m = s.size
    s_total, n_total = float(s.sum()), float(n.sum())
    # Draw the smaller arm; its sums determine the statistic (treatment's = the drawn ones or the rest).
    small_is_t = s_t.size <= s_c.size
    k = s_t.size if small_is_t else s_c.size
    obs = abs(float(s_t.sum() / n_t.sum() - s_c.sum() / n_c.sum()))
    tol = 1e-12 * max(1.0, obs)
    rng = np.random.default_rng(seed)
    chunk = max(1, min(256, CHUNK_ENTRIES // m))

    def extreme(keys: np.ndarray) -> int:
        """How many of the chunk's permutations (one row of random keys each) are at least as extreme."""
        b = keys.shape[0]
        if k < m:
            idx = np.argpartition(keys, k - 1, axis=1)[:, :k]
            s_small, n_small = s[idx].sum(axis=1), n[idx].sum(axis=1)
        else:
            s_small, n_small = np.full(b, s_total), np.full(b, n_total)
        s_tr, n_tr = (s_small, n_small) if small_is_t else (s_total - s_small, n_total - n_small)
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = s_tr / n_tr - (s_total - s_tr) / (n_total - n_tr)
        return int(np.count_nonzero(np.abs(stat) >= obs - tol))

    count, pending = 0, deque()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for start in range(0, n_permutations, chunk):
            pending.append(pool.submit(extreme, rng.random((min(chunk, n_permutations - start), m))))
            if len(pending) > max(1, workers):  # a chunk of keys per thread in flight: memory stays bounded
                count += pending.popleft().result()
        count += sum(done.result() for done in pending)
    return (1.0 + count) / (1.0 + n_permutations)
