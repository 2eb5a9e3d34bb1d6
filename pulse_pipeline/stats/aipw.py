"""Doubly robust (AIPW) mean of one arm, cross-fit propensities, and the rated-vs-unrated diagnostic.

When to prefer AIPW over PPI. PPI (``pulse_pipeline.stats.ppi``) assumes the rated sessions are a random sample of
the arm's sessions. They are not if who rates depends on the session: the paper finds rated sessions have more
user messages (rank-biserial 0.32). PPI's correction is the mean residual Y - f over the rated sessions; when the
residual differs between the sessions that rate more and the rest (the model is off there, or the arm matters
more to them in ways no feature records), that mean is not the arm's, and the PPI interval does not know it
(research notes section 5: 89-90 % coverage for a nominal 95 %; our validation, ``studies.coverage``: 87-88 %).
AIPW weights each rated session's residual by 1 / P(rated | features) and stays valid (94 % there), at about a
third more width than PPI. :func:`propensity_auc` tells which case you are in: an out-of-fold AUC near 0.5 means
rated sessions look like the rest and PPI is fine; clearly above 0.5 means they differ and AIPW is the safer
estimate.

What AIPW assumes. (1) Rating depends only on what the features record ("missing at random" given X): no hidden
reason to rate that also moves satisfaction. (2) Every session had some chance to be rated (overlap:
propensities bounded away from 0). (3) Either the propensity model or the prediction model f is right (hence
"doubly robust"). Propensities must be estimated out of fold (:func:`crossfit_propensity`), just as f must be
cross-fit.

No wider than it must be. The estimand is always the arm's mean over all its sessions: no session is trimmed and
no overlap weight changes what is estimated. Two things keep the interval from widening for nothing:

- the weights are normalized (the Hajek form, :func:`aipw_mean`), and propensities are used as estimated: no hard
  clip at an absolute floor (the clip at 0.01 it replaces bit hardest where the rated share is small, and on real
  data with ratings at random moved the rated sessions' overfit propensities to the floor, which only widened
  the interval);
- the propensity model does no harm when it finds nothing: :func:`chosen_propensity` recalibrates its
  out-of-fold propensities toward the arm's rated fraction by maximum likelihood (Platt's slope, at least 0), so a
  model that ranks who is rated no better than chance gives every session (nearly) the same weight, and AIPW is
  then the prediction-powered mean at lam = N / (n + N), about as wide as cross-PPI.

When the weights still cost width (Kish's effective number of ratings below n / ``WEIGHTS_WIDEN``^2) or the
predictions miss the ratings by more than the ratings vary, the arm's note says so (``WEIGHTS_VARY``,
``PREDICTIONS_MISS``): the conclusions repeat it where AIPW's interval is wider than naive.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy.special import expit
from scipy.stats import rankdata
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_info, threadpool_limits

from pulse_pipeline.stats.cluster import clustered_variance
from pulse_pipeline.stats.naive import join_notes
from pulse_pipeline.stats.ppi import ArmMean, as_vector, normal_quantile

WEIGHTS_WIDEN = 1.05
"""The width the weights may cost before the note says so: normalized weights multiply the residual term's standard
error by about sqrt(n / n_eff) (Kish), and 1.05 is the widest a prediction-powered interval should be against
naive (issue 37's target)."""
CALIBRATION_PENALTY = 3.841458820694124
"""The 95 % quantile of chi-square with one degree of freedom (z_0.975^2): the calibration's slope is kept only when
the likelihood-ratio test rejects "rated at random" at the level of the pipeline's 95 % intervals
(:func:`calibrate`)."""
WEIGHTS_VARY = "the propensity weights vary"
PREDICTIONS_MISS = "the predictions miss the ratings by more than the ratings vary"
PROPENSITY_C = 0.1  # inverse L2 strength of the propensity model (features standardized)
PROPENSITY_TOL = 1e-8
"""Stopping tolerance of the propensity model's Newton solver: converged, not stopped on the way (see
:func:`crossfit_propensity`)."""


def aipw_mean(
    y_labeled,
    f_all,
    rated_mask,
    propensity,
    clip: tuple[float, float] | None = None,
    alpha: float = 0.05,
    clusters=None,
    lam: float | None = 1.0,
) -> ArmMean:
    """Augmented inverse-propensity-weighted (doubly robust) mean of one arm over all its sessions.

    With N_total sessions i, R_i = 1 if session i is rated, Y_i its rating, f_i its (cross-fit) prediction and
    pi_i = P(R_i = 1 | X_i) its (cross-fit) propensity (clipped to [clip_low, clip_high] only when ``clip`` is
    given), w_i = 1 / pi_i::

        r      = sum_rated w_i (Y_i - lam f_i) / sum_rated w_i       the propensity-weighted mean residual
        mu     = lam mean_i f_i + r
        psi_i  = lam f_i + r + R_i w_i (Y_i - lam f_i - r) / W,   W = sum_rated w_i / N_total
        se^2   = Var(psi) / N_total        (sample variance, ddof = 1: the influence-function variance)
        CI     = mu -/+ z_{1 - alpha/2} se

    lam = 1 (the default) is plain AIPW with outcome model f; ``lam`` None tunes it per arm (:func:`aipw_lambda`:
    the lam in [0, 1] that minimizes Var(psi), in closed form), as PPI++ and cross-PPI tune theirs. Why: AIPW
    takes f with weight 1, so where f fits badly within the arm (a small arm's few ratings, a model useless there
    even after recalibration) the residual term adds more variance than the mean of f removes, and the interval
    is wider than the ratings alone would give; lam = 0 is the Hajek IPW mean, which under a constant propensity
    is the rated mean, and the tuned interval is never wider than either end (sessions independent).

    Why the tuned form stays valid. Any fixed function g(X) is a valid augmentation of the IPW mean: mean g +
    weighted mean of (Y - g) over the rated sessions is consistent for the arm's mean whenever the propensity is
    right, whatever g, and lam f is such a function for each fixed lam. lam_hat is one number estimated from
    every session of the arm; like PPI++'s lam_hat it converges to a fixed lam*, and the estimate's first-order
    expansion at lam_hat equals that at lam* (the derivative of mu(lam) in lam, mean f - weighted mean of f over
    the rated, has mean 0 when the propensity is right), so the influence-function interval at lam_hat keeps its
    coverage; the cost of the one fitted number is O(1/N_total), as for PPI++.

    What happens to double robustness. Plain AIPW (lam = 1) is consistent when either the propensity or f is
    right. At lam < 1 the outcome model is lam f, which is not right even when f is, so consistency then rests on
    the propensity alone (as the IPW mean's does); lam_hat < 1 is chosen only where f explains little of Y within
    the arm, which is where f's half of the double robustness was worth little anyway. The propensity model here
    (:func:`chosen_propensity`) is the rated fraction unless "rated at random" is rejected, so under rating at
    random it is exactly right.

    Clustered by user (``clusters`` given: sessions of one user share dependence), the centred contributions
    (psi_i - mu) / N_total are summed per user u and se^2 = G / (G - 1) sum_u (sum_{i in u} (psi_i - mu) / N_total)^2
    over the arm's G users (``stats.cluster.clustered_variance``); with one session per user this is exactly the
    formula above (mean(psi) = mu, since the weighted residuals about r sum to 0).

    The residuals are averaged with normalized weights (the Hajek form) rather than summed over N_total (the
    Horvitz-Thompson form): estimated propensities are noisy, and E[1 / pi_hat] > 1 / pi inflates the
    unnormalized residual term, which moves each arm's mean toward its own residual and biases a difference of
    arms; normalizing removes that. With everyone rated and pi = 1, psi_i = Y_i and mu is the plain mean of the
    ratings. With a constant propensity mu is the cross-prediction mean over every session, mean f + mean rated
    residual, which is exactly the prediction-powered mean mean(Y) + lam (mean(f~) - mean(f)) at lam = N / N_total
    (N unrated sessions, f~ their predictions): mean f = (n mean(f) + N mean(f~)) / N_total. Its se^2 is PPI's at
    that lam, Var(lam f~) / N + Var(Y - lam f) / n, up to ddof and the between-group term of Var(psi)
    (``tests/test_stats.py`` checks both).

    The note says what widened the interval (``WEIGHTS_VARY``: Kish's effective number of ratings, n_eff = (sum
    w)^2 / sum w^2, below n / WEIGHTS_WIDEN^2; ``PREDICTIONS_MISS``: Var(Y - f) > Var(Y) over the rated sessions
    when some sessions are unrated, so the correction adds more variance than the predictions remove).

    Args:
        y_labeled: ratings of the rated sessions, shape (n,), in the order they appear in ``rated_mask``.
        f_all: predictions for all N_total sessions of the arm, shape (N_total,) (out of fold for rated ones).
        rated_mask: boolean, shape (N_total,), True for the n rated sessions.
        propensity: P(rated | X) for all sessions, shape (N_total,) (only the rated sessions' values enter mu).
        clip: None (the default: propensities used as estimated; every rated session's must be in (0, 1]), or
            (clip_low, clip_high), 0 < clip_low <= clip_high <= 1: propensities clipped to this range before use,
            which bounds the weights (at most 1 / clip_low) at the price of some bias.
        alpha: error level; the interval targets coverage 1 - alpha. Must be in (0, 1).
        clusters: None (independent sessions) or each session's cluster code, shape (N_total,): the
            cluster-robust se above.
        lam: the outcome model's coefficient: 1 (the default) plain AIPW, a number in [0, 1] used as given, None
            tuned per arm by :func:`aipw_lambda` (clustered too: the session-level lam, as clustered PPI++ and
            cross-PPI use, so the estimate does not move with the unit; only its se is cluster-robust).

    Returns:
        ArmMean with method "aipw", the lam used (the outcome model's coefficient), n = rated, N = unrated, and
        ``n_clipped`` = how many rated sessions' propensities were moved by the clip (also in the note when > 0).
        No rated sessions: NaN with a note (the mean of f alone would be uncorrected). N_total = 1: infinite
        interval with a note.
    """
    z = normal_quantile(alpha)
    lo, hi = (0.0, 1.0) if clip is None else clip
    if clip is not None and not 0.0 < lo <= hi <= 1.0:
        raise ValueError(f"clip must satisfy 0 < low <= high <= 1, got {clip}")
    y = as_vector(y_labeled, "y_labeled")
    f = as_vector(f_all, "f_all")
    rated = np.asarray(rated_mask, dtype=bool).reshape(-1)
    pi = as_vector(propensity, "propensity")
    total = f.size
    if rated.size != total or pi.size != total:
        raise ValueError(f"f_all, rated_mask, propensity lengths differ: {total}, {rated.size}, {pi.size}")
    n = int(rated.sum())
    if y.size != n:
        raise ValueError(f"y_labeled has {y.size} values but rated_mask marks {n} sessions")
    if not (np.isfinite(y.sum()) and np.isfinite(f.sum())):
        raise ValueError("y_labeled or f_all contains NaN or infinite values")
    pi_r = pi[rated]
    if np.isnan(pi_r).any():
        raise ValueError("propensity is NaN for a rated session")
    if clip is None and not ((pi_r > 0) & (pi_r <= 1)).all():
        raise ValueError("a rated session's propensity is outside (0, 1]: pass clip to bound it")
    nan = float("nan")
    if total == 0 or n == 0:
        return ArmMean(nan, nan, nan, nan, 1.0, n, total - n, "aipw", note="no rated sessions: the mean is undefined")
    n_clipped = 0 if clip is None else int(np.count_nonzero((pi_r < lo) | (pi_r > hi)))
    w = 1.0 / (pi_r if clip is None else np.clip(pi_r, lo, hi))
    if lam is None:
        lam = aipw_lambda(y, f, rated, w)
    lam = float(lam)
    resid = y - lam * f[rated]  # lam = 1.0: lam * f is f, bit for bit (plain AIPW)
    r = float(np.dot(w, resid) / w.sum())
    est = lam * float(f.mean()) + r
    note = f"{n_clipped} rated session(s) had propensity clipped to [{lo}, {hi}]" if n_clipped else None
    n_effective = float(w.sum() ** 2 / np.dot(w, w))
    if n > 1 and n_effective * WEIGHTS_WIDEN**2 < n:
        note = join_notes(note, f"{WEIGHTS_VARY}: {n_effective:.0f} effective ratings of {n}")
    if n > 1 and total > n and float(resid.var()) > float(y.var()):  # everyone rated: mu is mean(Y), f drops out
        note = join_notes(note, PREDICTIONS_MISS)
    if total < 2:
        inf = float("inf")
        note = join_notes(note, "a single session: no variance estimate, interval unbounded")
        return ArmMean(est, inf, -inf, inf, lam, n, total - n, "aipw", note=note, n_clipped=n_clipped)
    psi = lam * f + r
    psi[rated] += w * (resid - r) / (w.sum() / total)
    if clusters is None:
        se = math.sqrt(float(psi.var(ddof=1)) / total)
    else:
        var, n_clusters = clustered_variance((psi - est) / total, clusters)
        se = math.sqrt(var) if n_clusters >= 2 else float("inf")
        if n_clusters < 2:
            note = join_notes(note, "a single user: no variance estimate, interval unbounded")
    if se == 0.0:
        note = join_notes(note, "standard error is 0 (all psi equal): zero-width interval")
    return ArmMean(est, se, est - z * se, est + z * se, lam, n, total - n, "aipw", note=note, n_clipped=n_clipped)


def aipw_lambda(y: np.ndarray, f: np.ndarray, rated: np.ndarray, w: np.ndarray) -> float:
    """The power-tuning weight of AIPW's outcome model: the lam in [0, 1] that minimizes the estimated
    influence-function variance of :func:`aipw_mean` at lam.

    With the normalized weights of the rated sessions, W = sum_rated w_i / N_total, the weighted means
    rY = sum_rated w_i Y_i / sum_rated w_i and rf = sum_rated w_i f_i / sum_rated w_i, the influence function of
    mu(lam) = lam mean_i f_i + sum_rated w_i (Y_i - lam f_i) / sum_rated w_i is linear in lam::

        psi_i(lam) = a_i + lam b_i
        a_i = rY + R_i w_i (Y_i - rY) / W          (the Hajek IPW mean's influence function)
        b_i = (f_i - rf) - R_i w_i (f_i - rf) / W  (what the augmentation f adds)

    so Var(psi(lam)) = Var(a) + 2 lam Cov(a, b) + lam^2 Var(b) is a parabola, least at::

        lam_hat = -Cov(a, b) / Var(b),   clipped to [0, 1]

    (``tests/test_aipw_no_wider.py`` checks it against a grid). lam = 1 is plain AIPW, lam = 0 the Hajek IPW
    mean of the ratings (under a constant propensity: the rated mean), so the tuned interval is never wider than
    either (sessions independent). 0 when Var(b) is 0 (f constant, or everyone rated with equal weights: f
    drops out of mu). ``y`` has the n rated sessions' ratings, ``f`` all N_total predictions, ``w`` the rated
    sessions' weights 1 / pi.
    """
    total = f.size
    wsum = float(w.sum())
    ry = float(np.dot(w, y)) / wsum
    fr = f[rated]
    rf = float(np.dot(w, fr)) / wsum
    scale = wsum / total
    a = np.full(total, ry)
    a[rated] += w * (y - ry) / scale
    b = f - rf
    b[rated] -= w * (fr - rf) / scale
    bc = b - b.mean()
    var_b = float(np.dot(bc, bc))
    if var_b <= 1e-14 * (1.0 + float(np.dot(b, b))):
        return 0.0
    cov_ab = float(np.dot(a - a.mean(), bc))
    return float(np.clip(-cov_ab / var_b, 0.0, 1.0))


def _prepare(X, rated) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X.reshape(-1, 1)
    r = np.asarray(rated, dtype=bool).reshape(-1)
    if X.shape[0] != r.size:
        raise ValueError(f"X has {X.shape[0]} rows but rated has {r.size}")
    return X, r


def _folds(r: np.ndarray, k: int, seed: int):
    """Stratified folds, or None when a class has fewer than 2 members (nothing to learn out of fold)."""
    smallest = int(min(r.sum(), r.size - r.sum()))
    if smallest < 2:
        return None
    return StratifiedKFold(n_splits=min(k, smallest), shuffle=True, random_state=seed).split(np.zeros(r.size), r)


def count_like(X: np.ndarray) -> np.ndarray:
    """Which columns of ``X`` (NaN read as 0) are count-like: never negative and above 1 somewhere (message,
    commit, failure counts). A boolean per column."""
    # NaN as 0 changes neither extreme: 0 is in both already (``initial``)
    return (np.nanmin(X, axis=0, initial=0.0) >= 0) & (np.nanmax(X, axis=0, initial=0.0) > 1)


def propensity_design(X: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
    """The propensity model's inputs: every feature (NaN -> 0), plus log1p of each count-like feature.

    Who rates tends to follow counts on a log scale (a fifth message matters more than a fiftieth), and a linear
    logit in the raw count would put extreme propensities on the long tail. ``counts``: which columns are
    count-like (None: :func:`count_like` of ``X``; a model fit earlier is applied with the choice it was fit with).
    """
    if counts is None:
        counts = count_like(X)
    n, p = X.shape
    # filled column by column (Fortran order): a frame's columns are copied whole, ~3x as fast as np.hstack
    design = np.empty((n, p + int(np.count_nonzero(counts))), order="F")
    features = design[:, :p]
    features[:] = X
    np.copyto(features, 0.0, where=np.isnan(features))
    np.log1p(np.maximum(features[:, counts], 0.0), out=design[:, p:])
    return design


@dataclass(frozen=True, eq=False)
class PropensityFit:
    """A cross-fit of the propensity model, kept to predict later sessions (``eq=False``: it holds models).

    ``propensity[i]`` is row i's out-of-fold P(rated | x), made by ``models[folds[i]]``, which never saw row i.
    With fewer than 2 rated (or unrated) rows there is no model: ``folds`` is all -1 and every propensity is
    ``constant``, the rated fraction.

    ``calibration`` = (a, s): the out-of-fold propensities' recalibration, P(rated) = expit(a + s
    logit(propensity)), fit by maximum likelihood on every row's out-of-fold propensity (:func:`calibrate`); s = 0
    when the model found nothing (every row then gets the rated fraction). :meth:`weighting` gives the
    propensities AIPW weights by (:func:`chosen_propensity`)."""

    propensity: np.ndarray
    folds: np.ndarray  # each row's fold; -1: no model
    models: tuple  # fold k's fitted pipeline (scaler and logistic regression)
    counts: np.ndarray  # the count-like columns the design was made with (``propensity_design``)
    constant: float  # the rated fraction: the propensity when there is no model
    calibration: tuple[float, float] = (0.0, 0.0)  # (a, s) of :func:`calibrate`; s = 0: the rated fraction

    @property
    def model_helps(self) -> bool:
        """True when the out-of-fold propensities rank who is rated the right way round, so that their
        recalibration keeps some of their spread (slope s > 0). False with no model."""
        return bool(self.models) and self.calibration[1] > 0

    def weighting(self, propensity: np.ndarray | None = None) -> np.ndarray:
        """The propensities AIPW weights by: ``propensity`` (None: this fit's out-of-fold ones) recalibrated,
        expit(a + s logit(propensity)); the rated fraction for every row when s = 0 (:func:`chosen_propensity`)."""
        p = self.propensity if propensity is None else np.asarray(propensity, dtype=np.float64)
        if not self.model_helps:
            return np.full(p.shape, self.constant)
        a, slope = self.calibration
        return expit(a + slope * logit(p))

    def predict(self, X, folds: np.ndarray) -> np.ndarray:
        """P(rated | x) of the rows ``X`` (features in the fit's order), row i by the model of fold ``folds[i]``;
        a row with fold -1 (a session no model saw) by the mean of every fold model's probability."""
        X = np.asarray(X, dtype=np.float64).reshape(len(folds), -1)
        if not self.models:
            return np.full(len(folds), self.constant)
        D = propensity_design(X, self.counts)
        out = np.empty(len(folds))
        unseen = folds < 0
        if unseen.any():
            out[unseen] = np.mean([m.predict_proba(D[unseen])[:, 1] for m in self.models], axis=0)
        for k, model in enumerate(self.models):
            rows = np.flatnonzero(folds == k)
            if rows.size:
                out[rows] = model.predict_proba(D[rows])[:, 1]
        return out


def crossfit_propensity(X, rated, k: int = 5, seed: int = 42, workers: int = 1) -> np.ndarray:
    """Out-of-fold propensities P(rated | X) from a regularized logistic regression.

    For each of k stratified folds (``StratifiedKFold(k, shuffle=True, random_state=seed)``) fit, on the other
    folds, a logistic regression on the standardized ``propensity_design(X)`` with a strong L2 penalty
    (``C = PROPENSITY_C``: with a few hundred rated sessions and dozens of features a weak penalty overfits, the
    weights 1 / pi scatter and the AIPW interval widens for nothing), and predict the held-out fold. A session's
    propensity therefore never comes from a model that saw whether it was rated.

    The solver is Newton's method with a Cholesky solve (``newton-cholesky``) run to ``PROPENSITY_TOL``: the fit
    is the penalized maximum-likelihood model this docstring names. Why not scikit-learn's default (L-BFGS at its
    default tolerance): it stopped after ~40 iterations, where the exact fit needs ~230, with propensities up to
    68 % from the penalized fit's (the seven arms of 40 000-60 000 sessions at ten times the paper's scale: 14-68 %
    per arm; 1.4 % on the test's 4 000 sessions). Newton converges in about 5-8 steps, each a product X'WX that
    BLAS computes at full speed, so the converged fit costs about what the stopped one did (those seven arms:
    10.6 s against 12.0 s on two cores, one run).

    Args:
        X: session features, shape (N_total, p); NaN is imputed as 0.
        rated: boolean, shape (N_total,), True for rated sessions.
        k: number of folds (reduced to the size of the smaller class if that is below k).
        seed: fold shuffling seed.
        workers: folds fit at once, in Python threads (the fit's arithmetic runs in numpy and BLAS, which release
            the GIL; two threads on two cores fit the five folds of a 60 000-session arm ~1.3x as fast, measured by
            hand with the Newton solver). The result is the same for any number.

    Returns:
        Array of shape (N_total,) in (0, 1]. If fewer than 2 sessions are rated (or unrated) no model can be fit
        out of fold and every entry is the overall rated fraction. :func:`crossfit_propensity_fit` returns the
        fold models too.
    """
    return crossfit_propensity_fit(X, rated, k=k, seed=seed, workers=workers).propensity


def crossfit_propensity_fit(
    X, rated, k: int = 5, seed: int = 42, workers: int = 1, counts: np.ndarray | None = None
) -> PropensityFit:
    """:func:`crossfit_propensity`, with each row's fold and the fold models, to predict later sessions.
    ``counts``: :func:`count_like` of ``X``, when the caller has it already (None: found here)."""
    X, r = _prepare(X, rated)
    constant = float(r.mean()) if r.size else 0.0
    out = np.full(r.size, constant)
    folds = np.full(r.size, -1)
    counts = count_like(X) if counts is None else np.asarray(counts, dtype=bool)
    splits = _folds(r, k, seed)
    if splits is None:
        return PropensityFit(out, folds, (), counts, constant)
    splits = list(splits)
    D = propensity_design(X, counts)
    # a new thread starts at OpenMP's default (one thread per core: its limit is per thread, not per process), so
    # each fold's thread takes the native thread limits of this one (``modeling.threads.native_threads``' cap)
    limits: dict[str, int] = {}
    for library in threadpool_info():
        api, n = library["user_api"], library["num_threads"]
        limits[api] = min(n, limits.get(api, n))

    def fit_fold(train: np.ndarray, test: np.ndarray):
        with threadpool_limits(limits=limits):
            model = make_pipeline(
                StandardScaler(),
                LogisticRegression(C=PROPENSITY_C, solver="newton-cholesky", tol=PROPENSITY_TOL, max_iter=100),
            )
            model.fit(D[train], r[train])
            out[test] = model.predict_proba(D[test])[:, 1]
            return model

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        models = tuple(done.result() for done in [pool.submit(fit_fold, *split) for split in splits])  # raises
    for fold, (_, test) in enumerate(splits):
        folds[test] = fold
    return PropensityFit(out, folds, models, counts, constant, calibrate(out, r))


def logit(p: np.ndarray) -> np.ndarray:
    """log(p / (1 - p)), p kept in [1e-12, 1 - 1e-12] so that no propensity gives an infinite logit."""
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def calibrate(propensity, rated, steps: int = 50) -> tuple[float, float]:
    """(a, s) maximizing the likelihood of who was rated under P(rated) = expit(a + s logit(propensity)), s >= 0:
    Platt's recalibration of out-of-fold propensities, by Newton's method on the two numbers.

    s = 1, a = 0 is the model as it is; s = 0 is the rated fraction for every row (a its logit). A slope at or
    below 0 (the out-of-fold ranking runs backwards or nowhere: the model found nothing but noise) gives s = 0, and
    so does a slope whose likelihood-ratio test against the rated fraction does not reject "rated at random" at
    the 5 % level (twice the log-likelihood gain at most ``CALIBRATION_PENALTY``, chi-square with one degree of
    freedom under that hypothesis: the out-of-fold propensities are held out, only the slope is fit here)."""
    x = logit(propensity)
    r = np.asarray(rated, dtype=np.float64).reshape(-1)
    rate = float(r.mean()) if r.size else 0.0
    if not 0 < rate < 1 or np.ptp(x) == 0:
        return (0.0, 0.0)
    nothing = (math.log(rate / (1 - rate)), 0.0)
    theta = np.array(nothing)
    design = np.column_stack([np.ones_like(x), x])
    for _ in range(steps):
        p = expit(design @ theta)
        hessian = (design * (p * (1 - p))[:, None]).T @ design
        try:
            step = np.linalg.solve(hessian, design.T @ (r - p))
        except np.linalg.LinAlgError:
            # the propensities separate rated from unrated sessions: the likelihood rises without bound as s
            # grows, every p saturates and the Hessian is singular; the last finite step is as far as it goes
            break
        if not np.all(np.isfinite(step)):
            break
        theta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    if not np.all(np.isfinite(theta)) or theta[1] <= 0:
        return nothing
    p = np.clip(expit(design @ theta), 1e-15, 1 - 1e-15)
    gain = float(np.sum(r * np.log(p / rate) + (1 - r) * np.log((1 - p) / (1 - rate))))  # log-likelihood ratio
    return (float(theta[0]), float(theta[1])) if 2 * gain > CALIBRATION_PENALTY else nothing


def chosen_propensity(X, rated, k: int = 5, seed: int = 42, workers: int = 1) -> np.ndarray:
    """The propensities AIPW weights by: the cross-fit model's out-of-fold propensities
    (:func:`crossfit_propensity`) recalibrated toward the arm's rated fraction as far as who was rated says
    (:func:`calibrate`), so that a model that finds nothing does no harm.

    The rule, and why it is not tuned to anything. Platt's recalibration fits two numbers, a and s in expit(a + s
    logit(pi_hat)), by maximum likelihood on every session's out-of-fold propensity: the candidates run from the
    rated fraction (s = 0) through the model as it is (s = 1), and the likelihood of who was actually rated picks
    how much of the model's spread to keep; the slope is kept only when the likelihood-ratio test rejects "rated
    at random" at the level of the intervals themselves (5 %), so nothing is tuned to data. When ratings come at
    random the true propensity is the constant: a model fit to noise ranks held-out sessions no better than chance
    (often backwards), and s is 0 in about 19 arms of 20, every weight equal. Weights that varied for nothing
    would only add variance (normalized weights widen the interval by about sqrt(1 + CV(w)^2), Kish's design
    effect) without removing any bias; with s = 0 AIPW is exactly the prediction-powered mean mean(Y) + lam
    (mean(f~) - mean(f)) at lam = N / (n + N) (:func:`aipw_mean`), about as wide as cross-PPI. When who rates does
    follow the features the out-of-fold ranking carries it and s stays above 0: a model whose ranking is right but
    whose probabilities are too extreme (overfit to few rated sessions) or too flat (the L2 penalty) is rescaled,
    not dropped. A session's own label moves the two numbers by O(1/n); the calibration is kept with the fit
    (``PropensityFit.weighting``)."""
    return crossfit_propensity_fit(X, rated, k=k, seed=seed, workers=workers).weighting()


def propensity_auc(rated, propensity) -> float:
    """ROC AUC of out-of-fold propensities against who was rated: "are rated sessions representative?".

    About 0.5: rated sessions look like the rest (PPI's assumption is plausible). Clearly above 0.5: rating
    depends on the features; prefer :func:`aipw_mean`. NaN when fewer than 2 sessions are rated or unrated.

    Computed as the Mann-Whitney statistic, AUC = (R - n1 (n1 + 1) / 2) / (n1 n0), R the sum of the rated
    sessions' ranks among all propensities (ties at their average rank), n1 rated and n0 unrated sessions: the
    area ``sklearn.metrics.roc_auc_score`` integrates, ties counting one half (equal to it within 1e-12,
    ``tests/test_speed_estimates.py``), without its input checks, which cost ten times the arithmetic on the
    effect history's hundreds of looks.
    """
    r = np.asarray(rated, dtype=bool).reshape(-1)
    n1 = int(r.sum())
    n0 = r.size - n1
    if min(n1, n0) < 2:
        return float("nan")
    ranks = rankdata(np.asarray(propensity, dtype=np.float64).reshape(-1))
    return float((ranks[r].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
