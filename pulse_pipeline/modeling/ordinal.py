"""``OrdinalLogitRegressor``: a cumulative-logit (proportional-odds) model whose ``predict`` is the expected rating.

The paper's ``OrdinalLogitRegressor(C=2.0, class_weight="balanced")``, as a scikit-learn regressor.

Model. The rating takes one of K ordered levels ``l_1 < ... < l_K`` (``classes_``). With one coefficient vector
``beta`` (``coef_``, no intercept: the thresholds carry it) and K-1 thresholds ``theta_1 < ... < theta_{K-1}``
(``thresholds_``)::

    P(Y <= l_k | x) = sigma(theta_k - x . beta),      k = 1 .. K-1,      sigma(t) = 1 / (1 + exp(-t))
    P(Y  = l_k | x) = sigma(theta_k - x . beta) - sigma(theta_{k-1} - x . beta),   theta_0 = -inf, theta_K = +inf

so a larger ``x . beta`` moves probability toward the higher levels. ``predict(x) = sum_k l_k * P(Y = l_k | x)``,
the expected rating (a float), and ``predict_proba(x)`` is the (n, K) matrix of ``P(Y = l_k | x)``.

Fit. Minimize the class-weighted negative log-likelihood plus an L2 penalty on ``beta`` only (the thresholds are
not penalized), scikit-learn's ``LogisticRegression`` convention for ``C``::

    loss(beta, theta) = - sum_i w_i log P(Y = y_i | x_i) + ||beta||^2 / (2 C)

with ``w_i = sample_weight_i * class_weight[level(y_i)]``. The thresholds are parametrized as ``theta_1`` and the
logs of the increments, ``theta_k = theta_1 + sum_{j=2..k} exp(d_j)``, so they stay strictly increasing without
constraints; the optimizer is ``scipy.optimize.minimize(method="L-BFGS-B")`` with the analytic gradient
(``_loss_and_grad``), started from ``beta = 0`` and the thresholds that are optimal for ``beta = 0`` (the logits of
the weighted cumulative level shares). ``X`` is centered internally (an exact reparametrization, because the
thresholds are free) and the coefficients are rescaled by a diagonal preconditioner (another exact change of
variables), so that badly scaled features still converge; ``thresholds_`` are reported for the uncentered ``X``.

Levels. The targets are session means of 1-5 stars, so they can be fractional (3.5, 4.33):

- ``levels="round"`` (default): each target is rounded to the nearest integer, halves rounding up
  (``floor(y + 0.5)``: 1.4 -> 1, 1.5 -> 2, 2.5 -> 3, 4.33 -> 4), and the rounded values are the levels;
- ``levels="unique"``: every distinct target value (exact float equality) is a level.

Only levels observed in training (with a positive sample weight) are classes; a level absent from the training
targets gets no threshold and no probability. With a single observed level the model predicts that level
(``coef_`` all 0, no thresholds).

Class weights: ``"balanced"`` gives ``w = n / (K * n_level)`` per row, as scikit-learn does (with sample weights,
``n`` and ``n_level`` are sums of sample weights); a dict maps level -> weight (levels not in the dict weigh 1, keys
that are not observed levels are ignored, weights must be positive); ``None`` weighs every row 1.

``X`` must be finite: NaN or inf raise ``ValueError`` (the PULSE pipeline imputes before this step).
"""

from __future__ import annotations

import numbers
import warnings
from functools import cache

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import ThreadpoolController

try:
    from sklearn.utils.validation import validate_data
except ImportError:  # scikit-learn < 1.6

    def validate_data(estimator, /, **kwargs):
        return estimator._validate_data(**kwargs)


LEVEL_MODES = ("round", "unique")


@cache
def _blas_controller() -> ThreadpoolController:
    """The BLAS thread pools (numpy's and scipy's OpenBLAS), scanned once (threadpoolctl comes with scikit-learn)."""
    return ThreadpoolController()


def ordinal_levels(y, levels: str = "round") -> np.ndarray:
    """The level of each target: ``floor(y + 0.5)`` (nearest integer, halves up) for ``"round"``, ``y`` itself
    for ``"unique"``."""
    y = np.asarray(y, dtype=np.float64)
    if levels == "round":
        return np.floor(y + 0.5)
    if levels == "unique":
        return y.copy()
    raise ValueError(f"levels must be one of {LEVEL_MODES}, got {levels!r}")


def _unpack(params: np.ndarray, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """``(beta, thresholds)`` from the optimizer's vector ``[beta, theta_1, log-increments]``."""
    beta = params[:n_features]
    raw = params[n_features:]
    if raw.size == 0:
        return beta, raw.copy()
    thresholds = raw[0] + np.concatenate(([0.0], np.cumsum(np.exp(raw[1:]))))
    return beta, thresholds


def _pack(beta: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Inverse of ``_unpack`` (the thresholds must be strictly increasing)."""
    if thresholds.size == 0:
        return np.asarray(beta, dtype=np.float64).copy()
    return np.concatenate((beta, thresholds[:1], np.log(np.diff(thresholds))))


def _loss_and_grad(
    params: np.ndarray, X: np.ndarray, y_idx: np.ndarray, w: np.ndarray, C: float
) -> tuple[float, np.ndarray]:
    """The penalized weighted negative log-likelihood (module docstring) and its gradient in ``params``.

    ``y_idx`` is each row's level index 0..K-1 (K = number of thresholds + 1), ``w`` the row weights.
    ``log P(Y = k)`` is computed as ``log sigma(a) + log sigma(-b) + log(1 - exp(b - a))`` with
    ``a = theta_k - eta``, ``b = theta_{k-1} - eta``, which stays accurate where the two CDFs nearly cancel.
    """
    n_features = X.shape[1]
    beta, thresholds = _unpack(params, n_features)
    n_levels = thresholds.size + 1
    eta = X @ beta
    ext = np.concatenate(([-np.inf], thresholds, [np.inf]))
    upper = ext[y_idx + 1]
    lower = ext[y_idx]
    a = upper - eta
    b = lower - eta
    gap = upper - lower  # > 0, +inf for the two end levels
    with np.errstate(over="ignore"):
        log_p = -np.logaddexp(0.0, -a) - np.logaddexp(0.0, b) + np.log(-np.expm1(-gap))
        inv = 1.0 / np.expm1(gap)  # 0 where gap is inf (or overflows)
    d_a = expit(-a) + inv  # d log p / d a
    d_b = -expit(b) - inv  # d log p / d b
    loss = -(w @ log_p) + (beta @ beta) / (2.0 * C)

    grad_beta = X.T @ (w * (d_a + d_b)) + beta / C  # a and b both fall by eta
    g_ext = -np.bincount(y_idx + 1, weights=w * d_a, minlength=n_levels + 1) - np.bincount(
        y_idx, weights=w * d_b, minlength=n_levels + 1
    )
    g_theta = g_ext[1:n_levels]
    grad_raw = np.cumsum(g_theta[::-1])[::-1]  # theta_k depends on theta_1 and on every d_j with j <= k
    if grad_raw.size > 1:
        grad_raw[1:] *= np.exp(params[n_features + 1 :])
    return float(loss), np.concatenate((grad_beta, grad_raw))


def checked_sample_weight(sample_weight, n_rows: int) -> np.ndarray:
    """The row weights as a float array of ``n_rows``: None gives 1 to every row, a number that weight to every row,
    an array must be 1-D with one finite, non-negative weight per row (what scikit-learn's estimators accept; its
    own validator is private, so it is not imported)."""
    if sample_weight is None:
        return np.ones(n_rows)
    if isinstance(sample_weight, numbers.Number):
        weights = np.full(n_rows, sample_weight, dtype=np.float64)
    else:
        weights = np.ascontiguousarray(sample_weight, dtype=np.float64)
        if weights.ndim != 1 or weights.shape[0] != n_rows:
            raise ValueError(f"sample_weight must hold one weight per row ({n_rows}); got shape {weights.shape}")
    if not np.all(np.isfinite(weights)):
        raise ValueError("sample_weight has NaN or infinite weights; give every row a finite weight >= 0")
    if np.any(weights < 0):
        raise ValueError("sample_weight has negative weights; give every row a finite weight >= 0")
    return weights


class OrdinalLogitRegressor(RegressorMixin, BaseEstimator):
    """Cumulative-logit ordinal regression predicting the expected rating (see the module docstring).

    Parameters
    ----------
    C : float, default 2.0
        Inverse L2 penalty strength on the coefficients (``||beta||^2 / (2C)``); larger means weaker.
    class_weight : "balanced", dict or None, default "balanced"
        Weights of the levels in the log-likelihood.
    levels : {"round", "unique"}, default "round"
        How targets become levels: rounded to the nearest integer (halves up), or every distinct value.
    max_iter : int, default 500
        L-BFGS-B iteration limit (a ``ConvergenceWarning`` is raised when it is reached).
    tol : float, default 1e-6
        L-BFGS-B ``ftol`` and ``gtol``, on the loss divided by the total weight.

    Attributes
    ----------
    classes_ : ndarray of shape (K,)
        The ordered levels seen in training.
    coef_ : ndarray of shape (n_features,)
    thresholds_ : ndarray of shape (K - 1,), strictly increasing
    n_features_in_ : int
    n_iter_ : int
        L-BFGS-B iterations (0 with a single level).
    """

    def __init__(
        self,
        C: float = 2.0,
        class_weight: str | dict | None = "balanced",
        levels: str = "round",
        max_iter: int = 500,
        tol: float = 1e-6,
    ):
        self.C = C
        self.class_weight = class_weight
        self.levels = levels
        self.max_iter = max_iter
        self.tol = tol

    def _check_params(self) -> None:
        if not isinstance(self.C, numbers.Real) or not np.isfinite(self.C) or self.C <= 0:
            raise ValueError(f"C must be a positive finite number, got {self.C!r}")
        if self.levels not in LEVEL_MODES:
            raise ValueError(f"levels must be one of {LEVEL_MODES}, got {self.levels!r}")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}")
        if not isinstance(self.tol, numbers.Real) or not self.tol >= 0:
            raise ValueError(f"tol must be a non-negative number, got {self.tol!r}")
        cw = self.class_weight
        if cw is None or (isinstance(cw, str) and cw == "balanced"):
            return
        if not isinstance(cw, dict):
            raise ValueError(f"class_weight must be 'balanced', a dict level -> weight or None, got {cw!r}")
        for level, weight in cw.items():
            if not isinstance(weight, numbers.Real) or not np.isfinite(weight) or weight <= 0:
                raise ValueError(f"class_weight[{level!r}] must be a positive finite number, got {weight!r}")

    def _level_weights(self, level_sw: np.ndarray) -> np.ndarray:
        """The weight of each of ``classes_`` given the total sample weight of each level."""
        n_levels = self.classes_.size
        if self.class_weight is None:
            return np.ones(n_levels)
        if isinstance(self.class_weight, str):  # "balanced"
            return level_sw.sum() / (n_levels * level_sw)
        by_level = {float(k): float(v) for k, v in self.class_weight.items()}
        return np.array([by_level.get(float(level), 1.0) for level in self.classes_])

    def fit(self, X, y, sample_weight=None):
        """Fit on features ``X`` (n, p) and ratings ``y`` (n,); ``sample_weight`` multiplies the class weights."""
        self._check_params()
        X, y = validate_data(self, X=X, y=y, y_numeric=True, dtype=np.float64)
        sample_weight = checked_sample_weight(sample_weight, X.shape[0])
        keep = sample_weight > 0
        if not keep.any():
            raise ValueError("sample_weight is zero for every row: nothing to fit")
        if not keep.all():
            X, y, sample_weight = X[keep], y[keep], sample_weight[keep]

        self.classes_, y_idx = np.unique(ordinal_levels(y, self.levels), return_inverse=True)
        y_idx = y_idx.ravel()
        n_levels = self.classes_.size
        n_features = X.shape[1]
        level_sw = np.bincount(y_idx, weights=sample_weight, minlength=n_levels)
        w = sample_weight * self._level_weights(level_sw)[y_idx]

        if n_levels == 1:
            self.coef_ = np.zeros(n_features)
            self.thresholds_ = np.empty(0)
            self.n_iter_ = 0
            return self

        center = np.average(X, axis=0, weights=sample_weight)
        Xc = X - center
        level_w = np.bincount(y_idx, weights=w, minlength=n_levels)
        cum = np.cumsum(level_w)[:-1] / level_w.sum()
        theta0 = np.log(cum) - np.log1p(-cum)  # optimal thresholds at beta = 0
        theta0 = theta0[0] + np.concatenate(([0.0], np.cumsum(np.maximum(np.diff(theta0), 1e-3))))
        x0 = _pack(np.zeros(n_features), theta0)

        total = w.sum()
        # Diagonal preconditioning, an exact change of variables gamma = d * beta: d_j^2 approximates the curvature
        # of the mean loss along beta_j (a logistic-type likelihood term ~0.25 * var(x_j), plus the penalty), so
        # unscaled features converge as fast as standardized ones.
        d = np.sqrt(0.25 * np.average(Xc**2, axis=0, weights=w) + 1.0 / (self.C * total))
        precondition = np.concatenate((d, np.ones(n_levels - 1)))

        def fun(z):
            loss, grad = _loss_and_grad(z / precondition, Xc, y_idx, w, self.C)
            return loss / total, grad / (precondition * total)  # the mean loss: gtol does not depend on n

        # One BLAS thread: L-BFGS-B makes hundreds of tiny BLAS calls, and on a busy two-core machine multithreaded
        # OpenBLAS made a 1 750 x 60 fit ~30x slower (0.2 s instead of 0.006 s).
        with _blas_controller().limit(limits=1, user_api="blas"):
            res = minimize(
                fun,
                x0 * precondition,
                jac=True,
                method="L-BFGS-B",
                options={"maxiter": int(self.max_iter), "ftol": float(self.tol), "gtol": float(self.tol)},
            )
        if res.status == 1:  # iteration limit
            warnings.warn(
                f"OrdinalLogitRegressor did not converge in max_iter={self.max_iter} iterations; "
                "increase max_iter or scale the features",
                ConvergenceWarning,
                stacklevel=2,
            )
        beta, thresholds = _unpack(res.x / precondition, n_features)
        self.coef_ = beta.copy()
        self.thresholds_ = thresholds + center @ beta  # back to uncentered X: theta - (x - m).beta
        self.n_iter_ = int(res.nit)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """``P(Y = level | x)`` for each row of ``X`` and each of ``classes_``, shape (n, K)."""
        check_is_fitted(self)
        X = validate_data(self, X=X, reset=False, dtype=np.float64)
        eta = X @ self.coef_
        cdf = expit(self.thresholds_[None, :] - eta[:, None])
        n = X.shape[0]
        cdf = np.hstack((np.zeros((n, 1)), cdf, np.ones((n, 1))))
        return np.diff(cdf, axis=1)

    def predict(self, X) -> np.ndarray:
        """The expected rating ``sum_k classes_[k] * P(Y = classes_[k] | x)`` for each row of ``X``."""
        return self.predict_proba(X) @ self.classes_
