"""Every method's effect for one treatment-vs-control comparison, with the honesty diagnostics.

Methods (one row each, on the normalized label; stars = 4 x normalized for a difference):

- ``naive_welch`` and ``naive_bootstrap``: the difference of rated means, with a Welch interval and a percentile
  bootstrap interval; both carry the two-sided permutation-test p-value.
- ``ppi``: per arm the PPI++ mean over the cross-fit predictions (λ̂ clipped to [0, 1]); the arms' variances add.
  The honest floor: when ``Settings.floor`` says the predictions lose to the constant (every family's out-of-fold
  MSE above the training folds' mean rating's, with few labels: ``modeling.comparison.floor_reason``), λ = 0 in
  both arms, so the row is the naive estimate mean(Y_t) − mean(Y_c) with se² = Var(Y_t)/n_t + Var(Y_c)/n_c
  (ddof 0) and a z interval: no gain, and none of λ̂'s noise either.
- ``crossppi``: the cross-prediction form (Zrnic & Candès) on ``prediction_calibrated``, with its λ tuned per arm
  to the arm's own variance (``stats.ppi.crossppi_lambda``: Cov(Y, f)/(Var(f) + (n/N)·Var(f~)) on the arm's
  out-of-fold f and fold-mean f~, clipped to [0, 1]; clustered by user, the same λ, as PPI++'s), so never wider
  than the arm's rated mean alone (sessions independent); the row's note and ``lambda_treatment`` / ``lambda_control``
  say the λ each arm used. λ = 1 (plain cross-PPI) is wider than naive wherever the model is useless in an arm,
  which a small arm's few ratings make likely even after recalibration (a map fitted on all arms together).
- ``aipw``: the doubly robust mean, with the propensity of being rated estimated per arm by a cross-fit classifier
  on the session features, recalibrated toward the arm's rated fraction (``stats.aipw.chosen_propensity``: equal
  weights when the classifier finds nothing, so AIPW is then about as wide as cross-PPI), and its outcome model
  λ·f with λ tuned per arm to the influence-function variance (``stats.aipw.aipw_lambda``, clipped to [0, 1];
  clustered, the same λ), so never wider than the propensity-weighted rated mean alone (sessions independent);
  ``lambda_treatment`` / ``lambda_control`` and the note say the λ each arm used. Prefer it when who
  rates depends on the session (chattier users rate more); it assumes rating depends only on what the features
  record.
- ``ppi_stratified``: PPI++ with a λ per stratum (Fisch et al. 2024; ``stats.stratified``): the arm's sessions
  split by a session column (``estimates/strata.py``: the task type unless ``experiments.toml`` names another),
  each stratum's PPI++ mean on its own data with its own λ̂ (λ = 0 in every stratum under the honest floor), the
  strata combined with weights = their share of all the arm's sessions, rated and unrated; a stratum with fewer
  than ``strata.MIN_STRATUM_RATED`` ratings in either arm is pooled (``pooled_strata``). The row's
  ``lambda_treatment`` / ``lambda_control`` are the size-weighted mean λ of each arm, and its note each stratum's
  λ. Arms without strata (``ArmData.s_labeled`` None): the row is PPI++'s, noted "no strata". Its "labels seen"
  flag compares with the narrowest width a λ per stratum allows (``stats.stratified.best_width_ratio_stratified``),
  which is below PPI++'s when strata differ.
- ``ppi_insample``: PPI with predictions from a model fit on all the labels, as the paper did. Never valid: shown
  only to compare with published numbers, and always flagged.

The unit. When the experiment randomizes users (``ArmData.clustered``: ``arm_data(..., by_user=True)``, which
``experiment_effects`` sets from ``experiments.resolve_unit``), every method above is cluster-robust by user
(``stats.cluster``): Welch's interval by the delta method on per-user totals, the bootstrap resamples users, the
permutation test permutes users, PPI, cross-PPI, stratified PPI and AIPW sum their influence functions per user.
The estimates are the same numbers; only the uncertainty changes.

Diagnostics: the out-of-fold correlation ρ of predictions and ratings (both arms pooled); the best width PPI allows
relative to naive, from each arm's own ρ_a: √(1 − ρ_a²·N_a/(n_a + N_a)) per arm, the arms' variances added
(``stats.ppi.best_width_ratio_of_difference``); each method's width relative to the naive interval (2·z·se of
Welch's difference: the same normal quantile the PPI intervals use, so a small sample's t quantile does not make
PPI look narrower). A PPI-type
row narrower than that bound by more than ``tolerance`` + 1/√(2n) (n = ratings in both arms: the sampling noise
of a ratio of two standard errors estimated from n labels) is flagged "predictions may have seen the labels".
When the arm's cross-fit propensity model (the one AIPW uses) tells its rated sessions from its unrated ones with
out-of-fold AUC above ``auc_threshold``, PPI rows are flagged "rated sessions are not representative": the PPI
correction then averages residuals over sessions unlike the rest, and its interval understates the error.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl
from scipy.stats import norm

from ..modeling.threads import native_threads
from ..settings import usable_cores
from ..stats.aipw import aipw_mean, crossfit_propensity_fit, propensity_auc
from ..stats.asking import known_ask_propensity
from ..stats.cluster import (
    cluster_bootstrap_difference,
    cluster_codes,
    cluster_permutation_pvalue,
    clustered_crossppi_mean,
    clustered_ppi_mean,
    clustered_welch_difference,
)
from ..stats.naive import bootstrap_difference, permutation_pvalue, welch_difference
from ..stats.ppi import ArmMean, best_width_ratio_of_difference, crossppi_mean, difference, ppi_mean, wald_p_value
from ..stats.stratified import StratifiedMean, as_method, best_width_ratio_stratified, stratified_ppi
from .kept_propensities import PropensityStore
from .methods import NAIVE, PPI_METHODS, Method
from .strata import MIN_STRATUM_RATED, POOLED, STRATUM, pooled

SEEN_LABELS = "predictions may have seen the labels"
NO_STRATA = "no strata: the same as PPI++"
"""The note of a ``ppi_stratified`` row whose arms carry no strata (``ArmData.s_labeled`` None)."""
NOT_REPRESENTATIVE = "rated sessions are not representative"


@dataclass(frozen=True)
class ArmData:
    """One arm's sessions: labels (normalized) of the rated ones, and predictions (normalized) for all."""

    name: str
    y: np.ndarray  # rated sessions' labels
    f_labeled: np.ndarray  # their out-of-fold predictions
    f_unlabeled: np.ndarray  # unrated sessions' fold-mean predictions
    X_labeled: np.ndarray  # features, for the propensity and the shift diagnostic
    X_unlabeled: np.ndarray
    f_insample_labeled: np.ndarray | None = None  # predictions of one model fit on all labels (ppi_insample only)
    f_insample_unlabeled: np.ndarray | None = None
    g_labeled: np.ndarray | None = None  # cluster (user) codes of the rated sessions; None: sessions independent
    g_unlabeled: np.ndarray | None = None  # ... and of the unrated ones (one coding for the whole arm)
    q_labeled: np.ndarray | None = None  # the logged ask probability of the rated sessions (NaN: not logged)
    q_unlabeled: np.ndarray | None = None  # ... and of the unrated ones (NaN: never asked, or not logged)
    # P(rated | x) made beforehand, e.g. ``history``'s over the whole period (as its predictions are); None: here
    propensity_labeled: np.ndarray | None = None
    propensity_unlabeled: np.ndarray | None = None
    # the arm's name in ``Settings.kept`` (experiment/variant), its session ids (rated first) and the names of X's
    # columns: its propensity fit may then be kept across runs (``kept_propensities``); None: fitted here each time
    kept_as: str | None = None
    session_ids: np.ndarray | None = None
    feature_names: tuple[str, ...] = ()
    # the predictions recalibrated for cross-PPI and AIPW (``modeling.predictions.prediction_calibrated``):
    # cross-PPI and AIPW's outcome model read them; None: the same as f_labeled / f_unlabeled
    fc_labeled: np.ndarray | None = None
    fc_unlabeled: np.ndarray | None = None
    # each session's stratum (``estimates/strata.py``: task type by default), for ``ppi_stratified``; None: no
    # strata (its row is then PPI++'s)
    s_labeled: np.ndarray | None = None
    s_unlabeled: np.ndarray | None = None

    @property
    def calibrated(self) -> tuple[np.ndarray, np.ndarray]:
        """(rated, unrated) predictions for cross-PPI and AIPW's outcome model: the recalibrated ones when given."""
        if self.fc_labeled is None or self.fc_unlabeled is None:
            return self.f_labeled, self.f_unlabeled
        return self.fc_labeled, self.fc_unlabeled

    @property
    def known_asking(self) -> bool:
        """True when every rated session logged the probability its rating widget was shown with: AIPW's
        propensity is then that known probability times the estimated answer probability (``stats.asking``)."""
        return self.q_labeled is not None and len(self.y) > 0 and bool(np.isfinite(self.q_labeled).all())

    @property
    def clustered(self) -> bool:
        """True when the arm's sessions carry user codes (the experiment randomizes users)."""
        return self.g_labeled is not None and self.g_unlabeled is not None


@dataclass(frozen=True, eq=False)
class ArmColumns:
    """One arm's sessions as arrays, in the frame's order: what ``ArmData`` is made of, before rated and unrated
    are split. ``take(mask)`` makes the ``ArmData`` of a subset without filtering a frame again: ``history``'s
    looks take the sessions started by each look day from the same columns (``eq=False``: it holds arrays)."""

    name: str
    rated: np.ndarray  # bool: labeled is true
    unrated: np.ndarray  # bool: labeled is false (a null labeled is neither, as a frame filter drops it)
    label: np.ndarray
    prediction: np.ndarray
    X: np.ndarray
    insample: np.ndarray | None = None
    user_ids: np.ndarray | None = None  # object array; by_user only
    ask_probability: np.ndarray | None = None
    propensity: np.ndarray | None = None
    kept_as: str | None = None  # as ``ArmData.kept_as``
    session_ids: np.ndarray | None = None  # object array; with kept_as only
    feature_names: tuple[str, ...] = ()
    prediction_calibrated: np.ndarray | None = None  # None: the frame has no such column (same as prediction)
    stratum: np.ndarray | None = None  # object array: the frame's ``strata.STRATUM`` column; None: no strata

    def take(self, mask: np.ndarray | None = None) -> ArmData:
        """The ``ArmData`` of the sessions where ``mask`` (all: None), rated and unrated in the frame's order."""
        rated, unrated = (self.rated, self.unrated) if mask is None else (self.rated & mask, self.unrated & mask)

        def split(column: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
            return (None, None) if column is None else (column[rated], column[unrated])

        g_rated = g_unrated = None
        if self.user_ids is not None:
            kept = slice(None) if mask is None else mask
            codes = cluster_codes(self.user_ids[kept].tolist())
            labeled = self.rated[kept]
            g_rated, g_unrated = codes[labeled], codes[~labeled]
        return ArmData(
            self.name,
            self.label[rated].astype(float),
            self.prediction[rated].astype(float),
            self.prediction[unrated].astype(float),
            self.X[rated],
            self.X[unrated],
            *split(self.insample),
            g_rated,
            g_unrated,
            *split(self.ask_probability),
            *split(self.propensity),
            self.kept_as,
            None if self.session_ids is None else np.concatenate(split(self.session_ids)),
            self.feature_names,
            *(split(None if self.prediction_calibrated is None else self.prediction_calibrated.astype(float))),
            *split(self.stratum),
        )


def arm_columns(
    name: str,
    sessions: pl.DataFrame,
    features: Sequence[str] = (),
    insample: Mapping[str, float] | None = None,
    *,
    by_user: bool = False,
    kept_as: str | None = None,
) -> ArmColumns:
    """One arm's columns from its rows of an ``estimates.sessions.assigned_sessions`` frame (arguments as
    :func:`arm_data`'s)."""
    labeled = sessions["labeled"]
    X = sessions.select(features).cast(pl.Float64).to_numpy() if features else np.empty((sessions.height, 0))
    columns = sessions.columns
    return ArmColumns(
        name,
        labeled.fill_null(False).to_numpy().astype(bool),
        (~labeled).fill_null(False).to_numpy().astype(bool),
        sessions["label"].to_numpy(),
        sessions["prediction"].to_numpy(),
        X,
        None if insample is None else np.array([insample[s] for s in sessions["session_id"]], dtype=float),
        sessions["user_id"].to_numpy().astype(object) if by_user else None,
        sessions["ask_probability"].cast(pl.Float64).fill_null(np.nan).to_numpy() if "ask_probability" in columns
        else None,
        sessions["propensity"].cast(pl.Float64).to_numpy() if "propensity" in columns else None,
        kept_as,
        None if kept_as is None else sessions["session_id"].to_numpy().astype(object),
        tuple(features),
        sessions["prediction_calibrated"].to_numpy() if "prediction_calibrated" in columns else None,
        sessions[STRATUM].to_numpy().astype(object) if STRATUM in columns else None,
    )  # fmt: skip


def arm_data(
    name: str,
    sessions: pl.DataFrame,
    features: Sequence[str] = (),
    insample: Mapping[str, float] | None = None,
    *,
    by_user: bool = False,
    kept_as: str | None = None,
) -> ArmData:
    """One arm from its rows of an ``estimates.sessions.assigned_sessions`` frame.

    ``sessions``: the arm's sessions with ``session_id``, ``labeled``, ``label`` and ``prediction`` (normalized);
    ``features``: the columns that make X (the propensity model's inputs; none: X has no columns);
    ``insample``: session id -> normalized prediction of the model fit on every label (``ppi_insample``; None:
    no such row); ``by_user``: the experiment randomizes users: every method's interval is clustered by
    ``user_id`` (``stats.cluster.cluster_codes``: a session without a user id is its own cluster); ``kept_as``:
    the arm's name among the kept propensity fits (its experiment and variant; ``Settings.kept``), None: none.
    """
    return arm_columns(name, sessions, features, insample, by_user=by_user, kept_as=kept_as).take()


@dataclass(frozen=True)
class Settings:
    alpha: float = 0.05
    n_resamples: int = 10_000
    n_permutations: int = 10_000
    seed: int = 0
    tolerance: float = 0.02
    auc_threshold: float = 0.6
    threads: int | None = None  # native (BLAS) threads of the propensity fits; None: PULSE_MODEL_THREADS
    floor: str | None = None  # why the predictions lose to the constant (then ppi's lambda is 0), or None
    kept: PropensityStore | None = None  # where arms with ``kept_as`` keep their propensity fits; None: nowhere


@dataclass(frozen=True)
class MethodEstimate:
    """One method's answer for one comparison (a row of ``estimates.experiment_effects`` without its labels)."""

    method: str
    effect: float
    se: float
    ci_low: float
    ci_high: float
    p_value: float
    lambda_treatment: float | None
    lambda_control: float | None
    width_vs_naive: float
    valid: bool
    flags: str | None
    note: str | None


_FITTED: OrderedDict[bytes, tuple[np.ndarray, np.ndarray]] = OrderedDict()
"""Propensities already cross-fit in this process, by a digest of what they were fit on (the newest last)."""
FITTED_KEPT = 32


def _crossfit_once(X: np.ndarray, rated: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The model's out-of-fold propensities and those AIPW weights by (``stats.aipw.crossfit_propensity_fit(X,
    rated, seed=seed)``: ``propensity``, ``weighting()``), fit once per process for the same inputs.

    Why: the same arm is fit again and again with the same features, labels and seed: a control arm once per
    comparison it is in, and every arm again by ``effect_history`` (which reads the same sessions as
    ``experiment_effects`` when they all have a start day), in the same process when the pipeline runs in one
    (``pulse ingest``, ``pulse materialize``). The fit is deterministic, so a digest of its inputs names its
    result; the ``FITTED_KEPT`` latest results are kept (two floats per session each)."""
    h = hashlib.blake2b(digest_size=20)
    for part in (np.ascontiguousarray(X, dtype=np.float64), np.ascontiguousarray(rated, dtype=bool)):
        h.update(repr(part.shape).encode())
        h.update(part.tobytes())
    key = h.digest() + seed.to_bytes(8, "little", signed=True)
    if key not in _FITTED:
        fit = crossfit_propensity_fit(X, rated, seed=seed, workers=usable_cores())
        _FITTED[key] = (fit.propensity, fit.weighting())
        while len(_FITTED) > FITTED_KEPT:
            _FITTED.popitem(last=False)
    _FITTED.move_to_end(key)
    model, weighting = _FITTED[key]
    return model.copy(), weighting.copy()


def _selection(arm: ArmData, s: Settings, with_auc: bool = True) -> tuple[np.ndarray, np.ndarray, float]:
    """The arm's rated mask (rated sessions first), the propensities AIPW weights by, and the out-of-fold AUC of
    the propensity model (NaN unless ``with_auc``).

    The AUC is the model's, whatever AIPW weights by: when the model predicts who is rated no better than the
    rated fraction (``stats.aipw.chosen_propensity``) AIPW weighs every rated session the same, but whether rated
    sessions look like the rest is still the model's ranking to tell.

    With known asking (``ArmData.known_asking``) the propensity is the logged ask probability times the cross-fit
    probability of answering an ask (``stats.asking.known_ask_propensity``); otherwise P(rated | x) is estimated
    whole (``stats.aipw.crossfit_propensity_fit``), or taken from the arm's kept fit (``Settings.kept``, when the
    arm has a ``kept_as`` name: ``kept_propensities``)."""
    rated = np.r_[np.ones(len(arm.y), bool), np.zeros(len(arm.f_unlabeled), bool)]
    if arm.propensity_labeled is not None and arm.propensity_unlabeled is not None:
        propensity = np.r_[arm.propensity_labeled, arm.propensity_unlabeled]
        return rated, propensity, propensity_auc(rated, propensity) if with_auc else float("nan")
    X = np.vstack([arm.X_labeled, arm.X_unlabeled])
    # the logistic fits run in OpenBLAS, whose threads spin like OpenMP's: capped as model fits are
    with native_threads(s.threads):
        if s.kept is not None and s.kept.refit_share > 0 and arm.kept_as is not None and arm.session_ids is not None:
            estimated, weighting = s.kept.propensities(
                arm.kept_as, arm.session_ids, X, rated, arm.feature_names, seed=s.seed + 42, workers=usable_cores()
            )
        else:
            estimated, weighting = _crossfit_once(X, rated, seed=s.seed + 42)
        # the AUC says whether rated sessions look like the rest (PPI's assumption), however they came to be rated
        auc = propensity_auc(rated, estimated) if with_auc else float("nan")
        if arm.known_asking:  # NaN for sessions never asked: AIPW reads only the rated sessions' propensities
            q = np.r_[arm.q_labeled, arm.q_unlabeled]
            return rated, known_ask_propensity(X, q, np.isfinite(q), rated, seed=s.seed + 42), auc
    return rated, weighting, auc


def propensities(arm: ArmData, s: Settings) -> np.ndarray:
    """The arm's P(rated | x) as ``compare``'s AIPW weights by (rated sessions first, then unrated): known
    asking's, or a whole cross-fit estimate (the rated fraction when the model does not beat it). ``history``
    makes it once for the whole period and passes it to every look."""
    return _selection(arm, s)[1]


def _aipw_arm(arm: ArmData, rated: np.ndarray, propensity: np.ndarray, s: Settings):
    """One arm's AIPW mean: outcome model lam f on the recalibrated predictions, lam tuned per arm to the
    influence-function variance (``stats.aipw.aipw_lambda``; clustered, the same session-level lam)."""
    f_all = np.concatenate(arm.calibrated)
    clusters = np.r_[arm.g_labeled, arm.g_unlabeled] if arm.clustered else None
    if arm.known_asking:  # a known probability is not clipped: clipping it only adds bias
        clip = (float(propensity[rated].min()), 1.0)
        result = aipw_mean(arm.y, f_all, rated, propensity, clip=clip, alpha=s.alpha, clusters=clusters, lam=None)
        return replace(result, note="; ".join(x for x in (result.note, "known ask probability") if x))
    return aipw_mean(arm.y, f_all, rated, propensity, alpha=s.alpha, clusters=clusters, lam=None)


def _ppi_arm(arm: ArmData, lam: float | None, s: Settings, clustered: bool, cross: bool = False) -> ArmMean:
    """One arm's PPI++ (``cross``: cross-PPI on the recalibrated predictions, its lam tuned per arm to its own
    variance) mean, cluster-robust by user when ``clustered``."""
    if clustered:
        if cross:
            fc, fcu = arm.calibrated
            return clustered_crossppi_mean(arm.y, fc, arm.g_labeled, fcu, arm.g_unlabeled, s.alpha)
        return clustered_ppi_mean(arm.y, arm.f_labeled, arm.g_labeled, arm.f_unlabeled, arm.g_unlabeled, lam, s.alpha)
    if cross:
        return crossppi_mean(arm.y, *arm.calibrated, alpha=s.alpha)
    return ppi_mean(arm.y, arm.f_labeled, arm.f_unlabeled, lam=lam, alpha=s.alpha)


Strata = tuple[np.ndarray, np.ndarray]
"""One arm's strata: of its rated sessions, of its unrated ones."""


def pooled_strata(treat: ArmData, control: ArmData) -> tuple[Strata, Strata, str | None] | None:
    """Each arm's strata after pooling the small ones (``strata.pooled`` over both arms: a stratum with fewer than
    ``MIN_STRATUM_RATED`` ratings in either arm is pooled), and a note naming the pooled strata; None when an arm
    has no strata (``ArmData.s_labeled``)."""
    arms = (treat, control)
    if any(a.s_labeled is None or a.s_unlabeled is None for a in arms):
        return None
    parts = [x for a in arms for x in (a.s_labeled, a.s_unlabeled)]
    labels = np.concatenate([np.asarray(x, dtype=object).astype(str) for x in parts]).astype(object)
    rated = np.concatenate([np.full(len(x), k % 2 == 0) for k, x in enumerate(parts)])
    arm = np.concatenate([np.full(len(x), k // 2) for k, x in enumerate(parts)])
    out = pooled(labels, rated, groups=arm)
    merged = sorted(set(labels[out == POOLED].tolist()))
    small = [h for h in merged if _fewest_rated(labels == h, rated, arm) < MIN_STRATUM_RATED]
    joined = [h for h in merged if h not in small]
    note = None
    if merged and len(set(out.tolist())) == 1 and not joined:
        note = f"every stratum ({', '.join(small)}) has fewer than {MIN_STRATUM_RATED} ratings in an arm: pooled"
    elif merged:
        note = f"pooled: {', '.join(small)} (fewer than {MIN_STRATUM_RATED} ratings in an arm)"
        if joined:
            note += f", with {', '.join(joined)} (the smallest kept, so that the pool reaches {MIN_STRATUM_RATED})"
    bounds = np.cumsum([0, *(len(x) for x in parts)])
    split = [out[bounds[k] : bounds[k + 1]] for k in range(4)]
    return (split[0], split[1]), (split[2], split[3]), note


def _fewest_rated(members: np.ndarray, rated: np.ndarray, arm: np.ndarray) -> int:
    """The fewest rated sessions ``members`` has in an arm where it has sessions."""
    return min(int((members & rated & (arm == a)).sum()) for a in np.unique(arm[members]))


def _stratified_arm(arm: ArmData, strata: Strata, lam: float | None, s: Settings, clustered: bool) -> StratifiedMean:
    """One arm's stratified PPI++ mean (``stats.stratified``: lambda per stratum, strata weighted by their share of
    the arm's sessions), cluster-robust by user when ``clustered``."""
    g = (arm.g_labeled, arm.g_unlabeled) if clustered else (None, None)
    return stratified_ppi(
        arm.y, arm.f_labeled, arm.f_unlabeled, *strata, g_labeled=g[0], g_unlabeled=g[1], lam=lam, alpha=s.alpha
    )


def stratified_note(treat: StratifiedMean, control: StratifiedMean, pooled_note: str | None) -> str:
    """What ``ppi_stratified``'s row says of its strata: each one's lambda in treatment / control (- where the
    stratum has no session in an arm: nan), and the pooled ones."""
    lam_t = {p.stratum: p.lam for p in treat.strata}
    lam_c = {p.stratum: p.lam for p in control.strata}
    strata = sorted(set(lam_t) | set(lam_c))
    if len(strata) <= 1:
        head = "one stratum (the same as PPI++)"
    else:
        nan = float("nan")
        shown = ", ".join(f"{h} {lam_t.get(h, nan):.2f}/{lam_c.get(h, nan):.2f}" for h in strata)
        head = f"lambda per stratum (treatment/control): {shown}"
    return "; ".join(x for x in (head, pooled_note) if x)


def aipw_lambda_note(lam_treatment: float, lam_control: float) -> str:
    """What AIPW's row says of its outcome model: the lam each arm used (``stats.aipw.aipw_lambda``)."""
    return (
        f"outcome model's lambda tuned per arm to its own variance: treatment {lam_treatment:.2f}, control"
        f" {lam_control:.2f} (1 = plain AIPW, 0 = the propensity-weighted rated mean alone)"
    )


def crossppi_lambda_note(lam_treatment: float, lam_control: float) -> str:
    """What cross-PPI's row says of its weights: the lam each arm used (``stats.ppi.crossppi_lambda``)."""
    return (
        f"lambda tuned per arm to its own variance: treatment {lam_treatment:.2f}, control {lam_control:.2f}"
        " (1 = plain cross-PPI, 0 = the rated mean alone)"
    )


def compare(
    treat: ArmData, control: ArmData, s: Settings = Settings(), resampling: bool = True, diagnostics: bool = True
) -> tuple[list[MethodEstimate], dict[str, float]]:
    """Every method's estimate, and the comparison's diagnostics (oof_rho, auc, best_width_theory).

    ``resampling`` False leaves out what resamples the ratings: no ``naive_bootstrap`` row, and ``naive_welch``
    without its permutation p-value (NaN); every other number is the same. ``diagnostics`` False leaves out the
    rated-vs-unrated AUC (NaN, so no representativeness flag): a rank over every session of both arms. Both for a
    caller that reads only the effects, intervals and notes (``history``, at every look).

    When both arms carry user codes (``ArmData.clustered``: the experiment randomizes users) every interval,
    p-value and the naive width the flags compare with are cluster-robust by user (``stats.cluster``): Welch by
    the delta method on per-user totals, the bootstrap and the permutation test over users, PPI, cross-PPI and
    AIPW from per-user sums of their influence functions. ``ppi_insample`` stays session-level (it is never
    valid anyway).
    """
    clustered = treat.clustered and control.clustered
    too_few = [a.name for a in (treat, control) if len(a.y) < 2]
    if too_few:
        note = f"arm {', '.join(too_few)} has fewer than 2 ratings: no effect can be estimated"
        nan = float("nan")
        rows = [
            MethodEstimate(m, nan, nan, nan, nan, nan, None, None, nan, False, None, note)
            for m in (
                Method.NAIVE_WELCH,
                Method.NAIVE_BOOTSTRAP,
                Method.PPI,
                Method.CROSSPPI,
                Method.AIPW,
                Method.PPI_STRATIFIED,
            )
            if resampling or m != Method.NAIVE_BOOTSTRAP
        ]
        return rows, {"oof_rho": nan, "auc": nan, "best_width_theory": nan}

    y_all = np.r_[treat.y, control.y]
    f_all = np.r_[treat.f_labeled, control.f_labeled]
    rho = float(np.corrcoef(y_all, f_all)[0, 1]) if np.std(y_all) > 0 and np.std(f_all) > 0 else float("nan")
    n = len(y_all)
    best = best_width_ratio_of_difference([(a.y, a.f_labeled, len(a.f_unlabeled)) for a in (treat, control)])
    sel_t, sel_c = _selection(treat, s, diagnostics), _selection(control, s, diagnostics)
    aucs = [sel_t[2], sel_c[2]]
    auc = float(np.nanmax(aucs)) if not all(math.isnan(a) for a in aucs) else float("nan")

    boot, p_perm = None, float("nan")
    if clustered:
        groups = (treat.y, treat.g_labeled, control.y, control.g_labeled)
        welch = clustered_welch_difference(*groups, alpha=s.alpha)
        if resampling:
            boot = cluster_bootstrap_difference(*groups, n_resamples=s.n_resamples, seed=s.seed, alpha=s.alpha)
            p_perm = cluster_permutation_pvalue(
                *groups, n_permutations=s.n_permutations, seed=s.seed, workers=usable_cores()
            )
    else:
        welch = welch_difference(treat.y, control.y, alpha=s.alpha)
        if resampling:
            boot = bootstrap_difference(treat.y, control.y, n_resamples=s.n_resamples, seed=s.seed, alpha=s.alpha)
            p_perm = permutation_pvalue(
                treat.y, control.y, n_permutations=s.n_permutations, seed=s.seed, workers=usable_cores()
            )
    naive_width = 2 * norm.ppf(1 - s.alpha / 2) * welch.se
    slack = s.tolerance + 1 / math.sqrt(2 * n)

    def row(method, iv, lam_t=None, lam_c=None, valid=True, notes=(), bound=None):
        width = (iv.ci_high - iv.ci_low) / naive_width if naive_width > 0 else float("nan")
        flags = []
        least = best if bound is None else bound  # the narrowest width the method allows
        if method in PPI_METHODS and not math.isnan(least) and width < least - slack:
            flags.append(SEEN_LABELS)
        if method in PPI_METHODS and not math.isnan(auc) and auc > s.auc_threshold:
            flags.append(f"{NOT_REPRESENTATIVE} (AUC {auc:.2f})")
        if method == Method.PPI_INSAMPLE:
            flags.append("not valid: predictions from a model fit on all labels")
        p = p_perm if method in NAIVE else wald_p_value(iv.estimate, iv.se)
        note = "; ".join(x for x in (getattr(iv, "note", None), *notes) if x) or None
        return MethodEstimate(
            method,
            iv.estimate,
            iv.se,
            iv.ci_low,
            iv.ci_high,
            p,
            lam_t,
            lam_c,
            width,
            valid and method != Method.PPI_INSAMPLE,
            "; ".join(flags) or None,
            note,
        )

    rows = [row(Method.NAIVE_WELCH, welch)] + ([row(Method.NAIVE_BOOTSTRAP, boot)] if boot is not None else [])
    lam = 0.0 if s.floor else None
    pt, pc = (_ppi_arm(a, lam, s, clustered) for a in (treat, control))
    rows.append(
        row(
            Method.PPI,
            difference(pt, pc, alpha=s.alpha),
            pt.lam,
            pc.lam,
            notes=[x for x in (getattr(pt, "note", None), getattr(pc, "note", None), s.floor) if x],
        )
    )
    ct, cc = (_ppi_arm(a, None, s, clustered, cross=True) for a in (treat, control))
    rows.append(
        row(
            Method.CROSSPPI,
            difference(ct, cc, alpha=s.alpha),
            ct.lam,
            cc.lam,
            notes=[crossppi_lambda_note(ct.lam, cc.lam)],
        )
    )
    at, ac = _aipw_arm(treat, *sel_t[:2], s), _aipw_arm(control, *sel_c[:2], s)
    rows.append(
        row(
            Method.AIPW,
            difference(at, ac, alpha=s.alpha),
            at.lam,
            ac.lam,
            notes=[x for x in (getattr(at, "note", None), getattr(ac, "note", None)) if x]
            + ([aipw_lambda_note(at.lam, ac.lam)] if math.isfinite(at.lam) and math.isfinite(ac.lam) else []),
        )
    )
    strata = pooled_strata(treat, control)
    if strata is None:  # no strata: PPI++'s arms, relabelled
        st, sc = as_method(pt), as_method(pc)
        rows.append(
            row(Method.PPI_STRATIFIED, difference(st, sc, alpha=s.alpha), st.lam, sc.lam,
                notes=[x for x in (st.note, sc.note, s.floor, NO_STRATA) if x])
        )  # fmt: skip
    else:
        (strata_t, strata_c, pooled_note), lam = strata, (0.0 if s.floor else None)
        st, sc = (
            _stratified_arm(treat, strata_t, lam, s, clustered),
            _stratified_arm(control, strata_c, lam, s, clustered),
        )
        bound = best_width_ratio_stratified(
            [(a.y, a.f_labeled, *k) for a, k in ((treat, strata_t), (control, strata_c))]
        )
        rows.append(
            row(Method.PPI_STRATIFIED, difference(st.arm, sc.arm, alpha=s.alpha), st.arm.lam, sc.arm.lam,
                notes=[x for x in (s.floor, stratified_note(st, sc, pooled_note)) if x], bound=bound)
        )  # fmt: skip
    if treat.f_insample_labeled is not None and control.f_insample_labeled is not None:
        it, ic = (ppi_mean(a.y, a.f_insample_labeled, a.f_insample_unlabeled, alpha=s.alpha) for a in (treat, control))
        rows.append(row(Method.PPI_INSAMPLE, difference(it, ic, alpha=s.alpha), it.lam, ic.lam))
    return rows, {"oof_rho": rho, "auc": auc, "best_width_theory": best}
