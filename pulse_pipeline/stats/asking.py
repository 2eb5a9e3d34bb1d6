"""The propensity of being rated when the rating widget was shown with a known probability (active inference).

Active statistical inference (Zrnic & Candès, 2024) asks for a label with a probability q(x) the analyst chose,
larger where the model is unsure, and corrects with inverse-probability weights. In PULSE a session is rated
when two things happen: the platform shows the widget (probability q_i, chosen by the ask policy and logged with
the ask as ``ask_probability``), and the user answers it (probability a(x_i), unknown: users choose). So

    P(rated_i | x_i) = q_i * a(x_i)

q_i is known exactly; only a(x) is estimated, on the asked sessions alone (answered or not), out of fold so no
session's weight comes from a model that saw whether it answered. With a known q_i the AIPW mean
(``stats.aipw.aipw_mean``) stays valid however unequal the q_i are, as long as users answer for reasons the
features record; the interval is narrower than uniform asking at the same number of ratings when q_i follows the
model's error (the variance of the residual term is sum_i (Y_i - f_i)^2 / (q_i a_i), smallest for q proportional
to |Y - f| at a fixed sum of q_i a_i).

The answer model is the logistic regression AIPW uses for the propensity of being rated (``crossfit_propensity``,
L2-penalized), fit on the asked sessions, on ``answer_design`` (counts on a log scale, every column standardized
and clipped to 3 sds, so a rare flag or a long tail cannot give extreme weights). Its output is floored at
``ANSWER_FLOOR``, so a weight never exceeds 1 / (q_i * ANSWER_FLOOR).
"""

from __future__ import annotations

import numpy as np

from .aipw import crossfit_propensity

ANSWER_FLOOR = 0.01
"""Lowest estimated answer probability used: users who almost never answer would otherwise get weights of
thousands from a noisy estimate."""


def answer_design(X: np.ndarray) -> np.ndarray:
    """The answer model's inputs: count-like features (never negative, above 1 somewhere) as log1p, then every
    column standardized over the given rows and clipped to [-3, 3]; NaN is 0 before and after.

    A long tail or a rare flag (a session with 2 rebases where 98 % have none is 10 sds out) gives a linear
    logit extreme answer probabilities there; with a few hundred asked sessions the weights 1 / a_hat then
    scatter for nothing (measured in the ``active`` validation: weights up to 500 where the true answer rate
    never fell below 0.14). Standardizing uses no answer, so it leaks nothing into the cross-fit."""
    X = np.where(np.isnan(X), 0.0, X)
    counts = (X.min(axis=0, initial=0.0) >= 0) & (X.max(axis=0, initial=0.0) > 1)
    X = np.where(counts, np.log1p(np.maximum(X, 0.0)), X)
    sd = X.std(axis=0)
    Z = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return np.clip(Z, -3.0, 3.0)


def known_ask_propensity(X, ask_probability, asked, answered, k: int = 5, seed: int = 42) -> np.ndarray:
    """P(rated | x) for every session of one arm, = known ask probability x cross-fit P(answer | asked, x).

        propensity_i = q_i * max(a_hat(x_i), ANSWER_FLOOR)

    where a_hat is ``crossfit_propensity`` fit on the asked sessions only (target: answered), each asked session
    predicted by the fold model that did not see it. Sessions never asked cannot be rated; they get q_i times the
    asked sessions' answer rate (their value never enters the AIPW mean, which uses rated sessions' propensities
    only, and q_i is NaN when no ask was logged).

    Pass the result as ``propensity`` to ``stats.aipw.aipw_mean`` with ``clip=(min over rated sessions, 1.0)``:
    the known q_i must not be clipped (clipping a known probability only adds bias).

    Args:
        X: session features, shape (N_total, p) (NaN imputed as 0 by the answer model).
        ask_probability: q_i, shape (N_total,): the probability the widget was shown with; NaN for sessions never
            asked. Every asked session's q_i must be in (0, 1].
        asked: boolean, shape (N_total,): the widget was shown (an ask was logged, answered or not).
        answered: boolean, shape (N_total,): the session was rated. A rated session must have been asked.
        k: folds of the answer model.
        seed: fold shuffling seed.

    Returns:
        Array of shape (N_total,). With fewer than 2 asked sessions answered (or unanswered) the answer model is
        the asked sessions' answer rate.
    """
    q = np.asarray(ask_probability, dtype=np.float64).reshape(-1)
    a = np.asarray(asked, dtype=bool).reshape(-1)
    r = np.asarray(answered, dtype=bool).reshape(-1)
    if not q.size == a.size == r.size:
        raise ValueError(f"ask_probability, asked, answered lengths differ: {q.size}, {a.size}, {r.size}")
    if (r & ~a).any():
        raise ValueError(f"{int((r & ~a).sum())} rated session(s) were never asked: log an ask with every rating")
    q_asked = q[a]
    if not ((q_asked > 0) & (q_asked <= 1)).all():
        raise ValueError("every asked session needs an ask probability in (0, 1]")
    X = np.asarray(X, dtype=np.float64)
    X = X.reshape(-1, 1) if X.ndim == 1 else X
    answer = np.full(q.size, r[a].mean() if a.any() else np.nan)
    if a.any():
        answer[a] = crossfit_propensity(answer_design(X[a]), r[a], k=k, seed=seed)
    return q * np.maximum(answer, ANSWER_FLOOR)
