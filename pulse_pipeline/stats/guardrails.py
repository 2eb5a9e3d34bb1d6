"""Guardrail metrics: a difference of means per arm (sessions or users as the unit), its relative effect, CUPED
with each user's pre-experiment mean, and the one-sided non-inferiority verdict.

A guardrail is an outcome a change must not harm beyond a declared margin (cost per session, duration, tokens):
it is measured on every session of each arm (no ratings needed), so the estimator is a plain difference of means
whose uncertainty is made honest for the unit and narrowed with pre-experiment data where it exists.

Every quantity below is linearized into per-session *influence* terms phi_i (the estimator's first-order change
from session i), summed within each user when users are the unit and squared with the CR1 factor of
``stats.cluster.clustered_variance``: ``Var = G / (G - 1) sum_u (sum_{i in u} phi_i)^2``. With g None every session
is its own cluster and this is the ddof-1 sample variance over n (Welch). The arms hold disjoint users (a
user-randomized experiment) or independent sessions, so the arms' variances add.

Arm mean (per arm, its n sessions with a value; the same number as the ratio of per-user sums, sum S_u / sum n_u)::

    ybar = sum_i y_i / n,                phi_i = (y_i - ybar) / n

With users as the unit this is exactly ``stats.cluster.clustered_welch_difference``'s ratio-of-means delta
method ((S_u - ybar n_u) / sum n_u summed per user), as GrowthBook's ``RatioStatistic`` does for a ratio metric.

CUPED (Deng et al. 2013; GrowthBook ``RegressionAdjustedStatistic``, ``compute_theta`` in
``packages/stats/gbstats/models/statistics.py``). Each session carries its user's mean of the metric over the
user's sessions before the experiment (x_i), NaN when the user has none. A session without history cannot be
dropped (that would change the population compared) nor given x = 0 as if it were a measurement; it gets a
missing-data indicator instead (the standard regression adjustment for a missing covariate): the covariates are::

    z_i = ( h_i (x_i - xbar_h),  h_i )          h_i = 1 if the user has history, xbar_h the pooled mean of x over them

so users with history are adjusted along their pre-period mean and users without it only by their group's
intercept: the estimator is the regression-adjusted difference with a separate intercept for the no-history
group, and a session without history keeps its plain value up to that constant shift (which differences out when
the arms are balanced in it). With one column constant (everybody has history, or nobody) it is dropped; with
everybody having history this is GrowthBook's scalar theta. theta is the least-squares slope of y on z over the
POOLED sessions of both arms (GrowthBook: ``compute_theta`` on the joint statistic), treated as fixed in the
variance as GrowthBook does (its estimation error is O(1/n))::

    e_i   = y_i - theta . z_i
    A_arm = ybar_arm - theta . (zbar_arm - zbar_pooled)          the adjusted arm mean
    phi_i = (e_i - ebar_arm) / n_arm                             Var(A_arm) as above (GrowthBook: var(post)
                                                                 + theta^2 var(pre) - 2 theta cov, over n)
    effect = A_t - A_c

Do no harm: CUPED is used only when its estimated variance of the effect is smaller than plain's; otherwise the
plain estimate is returned (method "plain", the note says why). With theta the pooled least-squares slope the
adjusted variance is asymptotically never larger, so the choice only matters where the two are nearly equal and
nearly perfectly correlated, where picking either changes coverage by a negligible amount (checked by the
``guardrail_cuped`` validation scenario). ``variance_reduction = 1 - Var_cuped / Var_plain`` of the effect.

Relative effect (GrowthBook ``frequentist_diff`` with ``relative=True``: the difference over the absolute
control mean; its delta-method variance is ``variance_of_ratios`` in ``gbstats/utils.py`` for plain, and
``frequentist_variance_relative_cuped`` in ``gbstats/models/tests.py`` for CUPED)::

    r = effect / |ybar_c|
    phi_t,i = phi^A_t,i / |ybar_c|
    phi_c,i = -phi^A_c,i / |ybar_c| - sign(ybar_c) effect / ybar_c^2 * (y_i - ybar_c) / n_c

For plain this is var_t / ybar_c^2 + ybar_t^2 var_c / ybar_c^4, GrowthBook's ``variance_of_ratios(ybar_t,
var_t, ybar_c, var_c, 0)``. For CUPED GrowthBook evaluates the control gradient at the unadjusted treatment mean
(ybar_t / ybar_c instead of 1 + effect / ybar_c); the two agree to first order, this is the exact gradient of r.

The relative interval and the relative margin's test are on the log of the ratio of the arm means (plain: the
observed means, so r = R - 1 exactly; CUPED: the adjusted ones, A_t / A_c - 1), when both are positive::

    log R = log(A_t / A_c),    phi_i = phi^A_i / A_arm (each arm),    relative CI = exp(log R -/+ t se) - 1

The ratio of two skewed means (cost, duration) is far closer to lognormal than to normal, so a test of
log R <= log(1 + m) keeps its level at smaller samples than one of r <= m (the ``guardrail_margin`` validation
measured "pass" at the margin 7.2 % with r, 6.3 % with log R, at ~1 000 users per arm; both reach 5 % with more).
``relative_se`` keeps the linear delta-method se of r (GrowthBook's), used when a mean is not positive.

Intervals: estimate -/+ t_{1 - alpha/2, df} se with Welch-Satterthwaite df over clusters,
df = (v_t + v_c)^2 / (v_t^2 / (G_t - 1) + v_c^2 / (G_c - 1)), as ``clustered_welch_difference`` (GrowthBook's
frequentist test also uses Welch's t).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .cluster import clustered_variance
from .naive import check_alpha

DIRECTIONS = ("lower", "higher")
"""Which way a guardrail metric is better: "lower" (cost, duration: harm is the treatment being higher) or
"higher" (harm is the treatment being lower)."""

MARGIN_TYPES = ("relative", "absolute")
"""A margin as a share of the control mean ("relative": 0.10 = 10 %) or in the metric's units ("absolute")."""

VERDICTS = ("pass", "fail", "inconclusive")

MIN_HISTORY = 10
"""CUPED needs at least this many sessions with a pre-experiment mean in EACH arm; else the plain difference. The
slope is then fit on a handful of points and the fixed-theta variance, which ignores its estimation error, is too
optimistic; and an adjustment on a few sessions narrows nothing a reader should rely on. Fixed before any data
(GrowthBook has no such floor: it adjusts whenever CUPED is switched on)."""


@dataclass(frozen=True)
class GuardrailEstimate:
    """The difference treatment - control of a guardrail metric, in metric units and relative to the control mean.

    ``treatment_mean`` and ``control_mean`` are the arms' observed means; ``effect`` is the plain or the
    CUPED-adjusted difference (``method``), so with CUPED it need not equal their difference. Intervals are
    two-sided at 1 - alpha with Welch's t (``df``, ``relative_df``). ``n_*`` count the sessions with a value.
    """

    treatment_mean: float
    control_mean: float
    effect: float
    se: float
    ci_low: float
    ci_high: float
    relative_effect: float
    relative_se: float
    relative_ci_low: float
    relative_ci_high: float
    method: str
    variance_reduction: float | None
    n_treatment: int
    n_control: int
    note: str | None
    df: float = math.inf
    relative_df: float = math.inf
    n_clusters_treatment: int = 0
    n_clusters_control: int = 0
    log_ratio: float = math.nan
    log_ratio_se: float = math.nan
    log_ratio_df: float = math.inf


def _clean(y, g, x, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    """The sessions of one arm with a finite value: (y, cluster codes, covariate or None, sessions dropped)."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    keep = np.isfinite(y)
    codes = np.arange(y.size, dtype=np.int64) if g is None else np.asarray(g).reshape(-1)
    if codes.size != y.size:
        raise ValueError(f"{name}: {codes.size} cluster codes for {y.size} values")
    cov = None
    if x is not None:
        cov = np.asarray(x, dtype=np.float64).reshape(-1)
        if cov.size != y.size:
            raise ValueError(f"{name}: {cov.size} covariate values for {y.size} values")
        cov = np.where(np.isfinite(cov), cov, np.nan)[keep]
    return y[keep], codes[keep], cov, int(y.size - keep.sum())


def _variance(phi: np.ndarray, g: np.ndarray) -> tuple[float, int]:
    """CR1 variance of sum(phi) over clusters g (ddof-1 over sessions when every cluster is one session)."""
    return clustered_variance(phi, g)


def _welch(v_t: float, G_t: int, v_c: float, G_c: int) -> float:
    """Welch-Satterthwaite degrees of freedom over clusters (infinite when a term has no spread)."""
    denom = (v_t**2 / (G_t - 1) if G_t > 1 else 0.0) + (v_c**2 / (G_c - 1) if G_c > 1 else 0.0)
    return (v_t + v_c) ** 2 / denom if denom > 0 else math.inf


def _interval(est: float, var: float, df: float, alpha: float) -> tuple[float, float, float]:
    """(se, low, high) of est -/+ t_{1-alpha/2, df} se; an infinite or NaN variance passes through."""
    if not math.isfinite(var):
        se = math.inf if var == math.inf else math.nan
        return se, (-math.inf if se == math.inf else math.nan), (math.inf if se == math.inf else math.nan)
    se = math.sqrt(max(var, 0.0))
    q = float(stats.t.ppf(1.0 - alpha / 2.0, df)) if math.isfinite(df) else float(stats.norm.ppf(1 - alpha / 2))
    return se, est - q * se, est + q * se


def _cuped_design(x: np.ndarray) -> np.ndarray:
    """The covariate columns z = (h (x - xbar_h), h) of the pooled sessions, constant columns dropped."""
    h = np.isfinite(x).astype(np.float64)
    if h.sum() == 0:
        return np.empty((x.size, 0))
    centred = np.where(h > 0, x - np.nanmean(x), 0.0)
    cols = [c for c in (centred, h) if np.ptp(c) > 0]
    return np.column_stack(cols) if cols else np.empty((x.size, 0))


def cuped_theta(y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Least-squares slopes of y on the columns of z with an intercept (pooled sessions): Cov(z)^-1 Cov(z, y).

    One column: GrowthBook's ``compute_theta``, cov(post, pre) / var(pre). The minimum-norm solution where the
    columns are collinear (never a singular-matrix error).
    """
    if z.shape[1] == 0:
        return np.empty(0)
    zc = z - z.mean(axis=0)
    return np.linalg.lstsq(zc, y - y.mean(), rcond=None)[0]


def guardrail_difference(
    y_t, y_c, *, g_t=None, g_c=None, x_t=None, x_c=None, alpha: float = 0.05, min_history: int = MIN_HISTORY
) -> GuardrailEstimate:
    """Treatment - control of a guardrail metric (see the module docstring for every formula).

    y: the metric per session (NaN: no value, left out and counted in the note); g: user cluster codes (None:
    sessions independent; codes of the two arms need not be disjoint integers, each arm is clustered on its own);
    x: the CUPED covariate per session (its user's pre-experiment mean; NaN where the user has no history); None
    for both arms: plain; fewer than ``min_history`` sessions with a covariate in an arm: plain. Degenerate arms
    follow ``clustered_welch_difference``: an empty arm gives NaN, an arm with one cluster an unbounded interval,
    no spread a zero-width interval (each noted).
    """
    check_alpha(alpha)
    yt, gt, xt, dropped_t = _clean(y_t, g_t, x_t, "treatment")
    yc, gc, xc, dropped_c = _clean(y_c, g_c, x_c, "control")
    notes: list[str] = []
    if dropped_t or dropped_c:
        notes.append(
            f"{dropped_t + dropped_c} sessions without a value left out ({dropped_t} treatment, {dropped_c} control)"
        )
    n_t, n_c = yt.size, yc.size
    nan = math.nan
    if n_t == 0 or n_c == 0:
        notes.append("an arm has no session with a value: nothing to compare")
        mt = float(yt.mean()) if n_t else nan
        mc = float(yc.mean()) if n_c else nan
        return GuardrailEstimate(
            mt, mc, nan, nan, nan, nan, nan, nan, nan, nan, "plain", None, n_t, n_c, "; ".join(notes)
        )
    mt, mc = float(yt.mean()), float(yc.mean())
    phi_t, phi_c = (yt - mt) / n_t, (yc - mc) / n_c  # plain influence of each arm's mean
    method, reduction = "plain", None
    effect = mt - mc
    arm_t, arm_c = mt, mc  # the arm means the effect is the difference of (CUPED: adjusted)
    use_x = xt is not None or xc is not None
    if use_x:
        xt_ = xt if xt is not None else np.full(n_t, nan)
        xc_ = xc if xc is not None else np.full(n_c, nan)
        z = _cuped_design(np.concatenate([xt_, xc_]))
        with_t, with_c = int(np.isfinite(xt_).sum()), int(np.isfinite(xc_).sum())
        if with_t == 0 and with_c == 0:
            notes.append("no user was seen before the experiment: plain, no CUPED")
        elif min(with_t, with_c) < min_history:
            notes.append(
                f"{with_t} treatment and {with_c} control sessions have a pre-experiment mean, fewer than"
                f" {min_history} in an arm: plain, no CUPED"
            )
        elif z.shape[1] == 0:
            notes.append("every pre-experiment mean is the same: plain, no CUPED")
        else:
            y_all = np.concatenate([yt, yc])
            theta = cuped_theta(y_all, z)
            e = y_all - z @ theta
            zbar = z.mean(axis=0)
            zt, zc = z[:n_t], z[n_t:]
            adj_t = mt - float(theta @ (zt.mean(axis=0) - zbar))
            adj_c = mc - float(theta @ (zc.mean(axis=0) - zbar))
            et, ec = e[:n_t], e[n_t:]
            cphi_t, cphi_c = (et - et.mean()) / n_t, (ec - ec.mean()) / n_c
            v_plain = _variance(phi_t, gt)[0] + _variance(phi_c, gc)[0]
            v_cuped = _variance(cphi_t, gt)[0] + _variance(cphi_c, gc)[0]
            share = f"{with_t + with_c} of {n_t + n_c} sessions"
            if math.isfinite(v_cuped) and v_cuped < v_plain:
                method, effect = "cuped", adj_t - adj_c
                arm_t, arm_c = adj_t, adj_c
                phi_t, phi_c = cphi_t, cphi_c
                reduction = 1.0 - v_cuped / v_plain
                notes.append(f"CUPED: {share} have a pre-experiment mean")
            else:
                notes.append(
                    "CUPED did not narrow the interval"
                    + (f" (variance {v_cuped / v_plain:.3f}x plain)" if v_plain > 0 and math.isfinite(v_cuped) else "")
                    + ": plain"
                )
    v_t, G_t = _variance(phi_t, gt)
    v_c, G_c = _variance(phi_c, gc)
    if G_t < 2 or G_c < 2:
        notes.append("an arm has a single user: no variance estimate, interval unbounded")
        v_t = math.inf if G_t < 2 else v_t
        v_c = math.inf if G_c < 2 else v_c
    var = v_t + v_c
    df = _welch(v_t, G_t, v_c, G_c) if math.isfinite(var) else math.inf
    if var == 0.0:
        notes.append("no spread within either arm: zero-width interval")
    se, lo, hi = _interval(effect, var, df, alpha)
    # relative effect, linear delta method (GrowthBook's): effect / |control mean|
    if mc == 0.0:
        notes.append("control mean is 0: no relative effect")
        rel = rse = rlo = rhi = nan
        rdf = math.inf
    else:
        rel = effect / abs(mc)
        rphi_t = phi_t / abs(mc)
        rphi_c = -phi_c / abs(mc) - math.copysign(1.0, mc) * effect / mc**2 * (yc - mc) / n_c
        rv_t = _variance(rphi_t, gt)[0] if G_t >= 2 else math.inf
        rv_c = _variance(rphi_c, gc)[0] if G_c >= 2 else math.inf
        rvar = rv_t + rv_c
        rdf = _welch(rv_t, G_t, rv_c, G_c) if math.isfinite(rvar) else math.inf
        rse, rlo, rhi = _interval(rel, rvar, rdf, alpha)
    # the ratio of the arm means on the log scale: the relative interval and the relative margin's test
    lr, lse, ldf = nan, nan, math.inf
    if arm_t > 0 and arm_c > 0:
        lv_t = _variance(phi_t / arm_t, gt)[0] if G_t >= 2 else math.inf
        lv_c = _variance(phi_c / arm_c, gc)[0] if G_c >= 2 else math.inf
        lvar = lv_t + lv_c
        ldf = _welch(lv_t, G_t, lv_c, G_c) if math.isfinite(lvar) else math.inf
        lr = math.log(arm_t / arm_c)
        lse, llo, lhi = _interval(lr, lvar, ldf, alpha)
        rel = math.expm1(lr)  # arm_t / arm_c - 1: effect / control mean (CUPED: the adjusted control mean)
        rlo, rhi = math.expm1(llo), math.expm1(lhi)
    elif not math.isnan(rel):
        notes.append("an arm's mean is not positive: relative interval and margin on the linear scale")
    return GuardrailEstimate(
        treatment_mean=mt,
        control_mean=mc,
        effect=float(effect),
        se=se,
        ci_low=lo,
        ci_high=hi,
        relative_effect=float(rel),
        relative_se=rse,
        relative_ci_low=rlo,
        relative_ci_high=rhi,
        method=method,
        variance_reduction=reduction,
        n_treatment=n_t,
        n_control=n_c,
        note="; ".join(notes) or None,
        df=float(df),
        relative_df=float(rdf),
        n_clusters_treatment=G_t,
        n_clusters_control=G_c,
        log_ratio=float(lr),
        log_ratio_se=float(lse),
        log_ratio_df=float(ldf),
    )


def check_rule(direction: str, margin: float, margin_type: str, alpha: float) -> None:
    """Refuse a guardrail rule that cannot be read: an unknown direction or margin type, a negative or non-finite
    margin, alpha outside (0, 0.5)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}; got {direction!r}")
    if margin_type not in MARGIN_TYPES:
        raise ValueError(f"margin_type must be one of {', '.join(MARGIN_TYPES)}; got {margin_type!r}")
    if not (isinstance(margin, int | float) and math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a number >= 0; got {margin!r}")
    if not (isinstance(alpha, int | float) and 0.0 < alpha < 0.5):
        raise ValueError(f"alpha must be in (0, 0.5); got {alpha!r}")


def harm(
    estimate: GuardrailEstimate, *, direction: str, margin: float, margin_type: str
) -> tuple[float, float, float, float]:
    """(harm, se, df, margin) on the scale the margin is tested on; positive harm is worse.

    Absolute: harm = effect ("lower" is better) or -effect ("higher"), the margin as given. Relative, with both
    arm means positive: on the log of the ratio R = mean_t / mean_c (the ratio of skewed means is far closer to
    lognormal than to normal, so its test keeps its level at smaller samples), harm = log R against log(1 + m)
    ("lower": the treatment at most m more) or harm = -log R against -log(1 - m) ("higher": at most m less; a
    margin m >= 1 tolerates any fall). Otherwise relative on the linear scale: harm = +/- relative effect, m.
    """
    sign = 1.0 if direction == "lower" else -1.0
    if margin_type == "absolute":
        return sign * estimate.effect, estimate.se, estimate.df, margin
    if not math.isnan(estimate.log_ratio):
        bound = math.log1p(margin) if direction == "lower" else (-math.log1p(-margin) if margin < 1 else math.inf)
        return sign * estimate.log_ratio, estimate.log_ratio_se, estimate.log_ratio_df, bound
    return sign * estimate.relative_effect, estimate.relative_se, estimate.relative_df, margin


def noninferiority(
    estimate: GuardrailEstimate, *, direction: str, margin: float, margin_type: str, alpha: float
) -> tuple[float, str | None]:
    """(one-sided p of H0 'harm >= margin', verdict 'pass' | 'fail' | 'inconclusive'; None when not estimable).

    With harm_hat, se, df and the margin on the tested scale from :func:`harm` (a relative margin is tested on
    the log of the ratio of the arm means) and q = t_{1 - alpha, df}::

        p    = P(T_df <= (harm_hat - margin) / se)          small when the harm is clearly below the margin
        pass          when harm_hat + q se <  margin        (the one-sided 1 - alpha upper bound is inside: p < alpha)
        fail          when harm_hat - q se >  margin        (the data show harm beyond the margin at level alpha)
        inconclusive  otherwise

    At a true harm equal to the margin, "pass" is the event p < alpha, which has probability alpha (the test's
    level; asymptotically exact), so a change that harms by exactly the margin passes in at most alpha of
    replications. Note the one-sided 1 - alpha bound is the two-sided 1 - 2 alpha interval's end, narrower than
    the stored two-sided 1 - alpha interval. An infinite se gives p = 0.5 and "inconclusive"; a NaN estimate or
    se gives (NaN, None).
    """
    check_rule(direction, margin, margin_type, alpha)
    h, se, df, margin = harm(estimate, direction=direction, margin=margin, margin_type=margin_type)
    if math.isnan(h) or math.isnan(se):
        return math.nan, None
    if margin == math.inf:
        return 0.0, "pass"
    if se == 0.0:
        if h < margin:
            return 0.0, "pass"
        return (1.0, "fail") if h > margin else (1.0, "inconclusive")
    dist = stats.t(df) if math.isfinite(df) else stats.norm()
    if math.isinf(se):
        return 0.5, "inconclusive"
    p = float(dist.cdf((h - margin) / se))
    q = float(dist.ppf(1.0 - alpha))
    if h + q * se < margin:
        return p, "pass"
    if h - q * se > margin:
        return p, "fail"
    return p, "inconclusive"
