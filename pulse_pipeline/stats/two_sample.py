"""Per-feature two-sample tests (an arm comparison, or rated vs unrated sessions) and the sample-ratio check.

Every test returns a frozen :class:`TestResult`. Degenerate inputs (an empty group, a constant feature) never
raise and never give an unexplained NaN: ``TestResult.note`` says what happened. Invalid inputs (NaN values,
non-binary values in a binary test, negative counts) raise ValueError.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

_NAN = float("nan")


@dataclass(frozen=True)
class TestResult:
    """One test's outcome.

    Attributes:
        statistic: the test's effect or test statistic (see each function: t, difference of proportions,
            rank-biserial correlation, chi-square).
        p_value: two-sided p-value (NaN when the test is undefined, with a note).
        test: which test was run, e.g. "welch t", "fisher exact", "mann-whitney u", "chi2 (df=1)".
        note: None for a regular result, otherwise what was degenerate and what was done.
        df: degrees of freedom where the test has them (Welch, chi-square), else None.
    """

    __test__ = False  # not a pytest test class despite the name

    statistic: float
    p_value: float
    test: str
    note: str | None = None
    df: float | None = None


def _values(x, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64).reshape(-1)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _empty_note(sizes: dict[str, int], minimum: int = 1) -> str | None:
    short = [name for name, k in sizes.items() if k < minimum]
    if not short:
        return None
    what = "no values" if minimum == 1 else f"fewer than {minimum} values"
    return f"{what} in {' and '.join(short)}"


def welch_test(x, y) -> TestResult:
    """Welch's unequal-variance t test of mean(x) = mean(y), two-sided (``scipy.stats.ttest_ind(equal_var=False)``).

    With sample variances s_x^2, s_y^2 (ddof = 1)::

        t  = (mean(x) - mean(y)) / sqrt(s_x^2 / n_x + s_y^2 / n_y)
        df = (s_x^2/n_x + s_y^2/n_y)^2 / ((s_x^2/n_x)^2 / (n_x - 1) + (s_y^2/n_y)^2 / (n_y - 1))
        p  = 2 * P(T_df > |t|)

    Degenerate cases (noted): fewer than 2 values in a group gives NaN; both groups constant and equal gives
    t = 0, p = 1; both constant but different has no variance to test against: NaN.
    """
    x, y = _values(x, "x"), _values(y, "y")
    short = _empty_note({"x": x.size, "y": y.size}, minimum=2)
    if short:
        return TestResult(_NAN, _NAN, "welch t", note=f"{short}: no variance estimate, t test undefined")
    if np.ptp(x) == 0.0 and np.ptp(y) == 0.0:
        if x[0] == y[0]:
            return TestResult(0.0, 1.0, "welch t", note=f"both groups constant and equal ({x[0]:g}): no difference")
        return TestResult(
            _NAN, _NAN, "welch t", note=f"both groups constant but different ({x[0]:g} vs {y[0]:g}): no variance"
        )
    with warnings.catch_warnings():
        # scipy warns of "precision loss" for a constant group; its variance is exactly 0, nothing is lost
        if np.ptp(x) == 0.0 or np.ptp(y) == 0.0:
            warnings.filterwarnings("ignore", message="Precision loss", category=RuntimeWarning)
        res = stats.ttest_ind(x, y, equal_var=False)
    return TestResult(float(res.statistic), float(res.pvalue), "welch t", df=float(res.df))


def binary_test(x, y) -> TestResult:
    """Fisher's exact test for a 0/1 feature, two-sided (``scipy.stats.fisher_exact``).

    The 2x2 table has rows x, y and columns (count of 1, count of 0); statistic = mean(x) - mean(y), the
    difference of proportions. The p-value sums the hypergeometric probabilities (margins fixed) of all tables
    no more likely than the observed one.

    Degenerate cases (noted): an empty group gives NaN; a feature constant in both groups gives 0 and p = 1.
    Values other than 0/1 (or True/False) raise ValueError.
    """
    x, y = _values(x, "x"), _values(y, "y")
    for name, arr in (("x", x), ("y", y)):
        if not np.isin(arr, (0.0, 1.0)).all():
            raise ValueError(f"{name} must contain only 0 and 1")
    empty = _empty_note({"x": x.size, "y": y.size})
    if empty:
        return TestResult(_NAN, _NAN, "fisher exact", note=f"{empty}: proportions undefined")
    ones_x, ones_y = int(x.sum()), int(y.sum())
    diff = ones_x / x.size - ones_y / y.size
    note = None
    if ones_x + ones_y in (0, x.size + y.size):
        note = f"feature is {int(x[0])} everywhere: no difference"
    _, p = stats.fisher_exact([[ones_x, x.size - ones_x], [ones_y, y.size - ones_y]], alternative="two-sided")
    return TestResult(float(diff), float(p), "fisher exact", note=note)


def rank_biserial_correlation(x_pos, x_neg) -> float:
    """Rank-biserial correlation r = 2 U / (n1 n2) - 1 of x_pos against x_neg (ties count one half).

    U = sum over x_pos of (#x_neg < x + 0.5 #x_neg == x), so r = P(X_pos > X_neg) - P(X_pos < X_neg) over all
    pairs: r > 0 when x_pos tends to be larger. Vectorized: two binary searches in the sorted x_neg,
    O((n1 + n2) log n2). NaN if a group is empty; 0 for a constant feature.
    """
    pos = np.asarray(x_pos, dtype=np.float64).reshape(-1)
    neg = np.sort(np.asarray(x_neg, dtype=np.float64).reshape(-1))
    if pos.size == 0 or neg.size == 0:
        return _NAN
    below = np.searchsorted(neg, pos, side="left")
    at_or_below = np.searchsorted(neg, pos, side="right")
    u = float(np.sum(below + 0.5 * (at_or_below - below)))
    return 2.0 * u / (pos.size * neg.size) - 1.0


def rank_biserial(x_pos, x_neg) -> TestResult:
    """Shift of a feature between two groups (e.g. rated vs unrated sessions): rank-biserial r and its p-value.

    statistic = :func:`rank_biserial_correlation` (in [-1, 1], positive when x_pos tends to be larger); p-value
    from the two-sided Mann-Whitney U test with the normal approximation (tie-corrected variance, continuity
    correction; ``scipy.stats.mannwhitneyu(method="asymptotic")``).

    Degenerate cases (noted): an empty group, or one value shared by every observation in both groups, give NaN.
    """
    pos, neg = _values(x_pos, "x_pos"), _values(x_neg, "x_neg")
    empty = _empty_note({"x_pos": pos.size, "x_neg": neg.size})
    if empty:
        return TestResult(_NAN, _NAN, "mann-whitney u", note=f"{empty}: no shift measurable")
    both = np.concatenate([pos, neg])
    if np.ptp(both) == 0.0:
        return TestResult(_NAN, _NAN, "mann-whitney u", note="constant feature: no shift measurable")
    p = stats.mannwhitneyu(pos, neg, alternative="two-sided", method="asymptotic").pvalue
    return TestResult(rank_biserial_correlation(pos, neg), float(p), "mann-whitney u")


def sample_ratio_test(observed, expected_shares) -> TestResult:
    """Sample-ratio mismatch check: chi-square goodness of fit of assignment counts to the intended split.

    Shares are normalized to sum to 1; with T = sum(observed) and e_i = T * share_i::

        chi2 = sum_i (o_i - e_i)^2 / e_i,   p = P(chi2_{k-1} > chi2)   (``scipy.stats.chisquare``)

    A small p says assignment did not follow the intended split (a bug in bucketing or logging), which biases
    every comparison of those arms.

    Degenerate cases (noted, NaN): fewer than 2 arms, or no sessions at all. Negative or non-finite counts,
    non-positive shares, or lengths that differ raise ValueError.
    """
    o = _values(observed, "observed")
    shares = _values(expected_shares, "expected_shares")
    if o.size != shares.size:
        raise ValueError(f"observed has {o.size} arms but expected_shares has {shares.size}")
    if (o < 0).any():
        raise ValueError("observed counts must be non-negative")
    if (shares <= 0).any():
        raise ValueError("expected_shares must be positive")
    k = o.size
    test = f"chi2 (df={max(k - 1, 0)})"
    if k < 2:
        return TestResult(_NAN, _NAN, test, note=f"{k} arm(s): nothing to compare")
    total = float(o.sum())
    if total == 0.0:
        return TestResult(_NAN, _NAN, test, note="no sessions assigned: nothing to compare")
    res = stats.chisquare(o, f_exp=total * shares / shares.sum())
    return TestResult(float(res.statistic), float(res.pvalue), test, df=float(k - 1))
