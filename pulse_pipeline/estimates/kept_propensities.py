"""AIPW's propensity model, fitted again only when it must: a small drop keeps each arm's fold models.

Why: at ten times the paper's scale the seven arms' cross-fit propensities (40 000-60 000 sessions each) cost
~12 s of a 100-session drop's ~67 s, refitted for 100 new sessions. Cross-fitting stays valid when an arm's fold
models are kept across drops, as long as no session's propensity comes from a model that saw it:

- a session of the kept fit keeps its fold, whose model was fitted without it (whether it is rated now or its
  features changed since does not matter: that model never saw it);
- a session the kept fit did not hold (a new one, or one the fit's sessions lacked) gets the mean of the fold
  models' probabilities, as the modeling step predicts its unrated sessions (``modeling/reuse.py``).

The price is efficiency, not validity: the newest sessions train no propensity model until the next fit. The arm
is fitted again (``refit_reason``) when there is no kept fit or it cannot be read; when the code, the settings,
the library versions, the arm's feature columns or which of them are count-like (``aipw.propensity_design``)
changed (``fit_key``); when the kept fit was made on an earlier day (UTC, as the models are); or when the sessions
added since the fit and those whose rated status changed exceed ``refit_share`` of the fit's sessions
(``PULSE_MODEL_REFIT_SHARE``, which rules the models' kept fit too; 0: fit at every run, nothing kept, the
behaviour before this module). Sessions gone since the fit do not count: ``effect_history`` reads the arm's
sessions that have a start day, ``experiment_effects`` all of them, and each may reuse the other's fit.

One file per arm under ``PULSE_HOME/.work/propensities/`` (joblib, written atomically), named by a digest of the
arm's key (experiment and variant); it holds session ids, folds and the fold models' coefficients, no word of
any user's.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import joblib
import numpy as np
import polars as pl
import sklearn

from ..incremental import code_digest
from ..stats import aipw
from ..stats.aipw import PropensityFit, count_like, crossfit_propensity_fit


@dataclass(frozen=True, eq=False)
class KeptPropensity:
    """One arm's kept cross-fit (``eq=False``: it holds models)."""

    key: str  # fit_key: what else the fit depends on
    fitted_at: datetime
    session_ids: pl.Series  # the sessions it was fitted on, in the fit's row order
    rated: np.ndarray  # ... whether each was rated then
    fit: PropensityFit


def fit_key(arm: str, columns: Sequence[str], counts: np.ndarray, seed: int, k: int) -> str:
    """A digest of what an arm's fit depends on besides its sessions: the propensity code, the arm, its feature
    columns and which of them are count-like, the fold settings, and the version of the library that fits and
    stores it."""
    settings = (arm, tuple(columns), counts.tolist(), seed, k, f"sklearn {sklearn.__version__}")
    return code_digest(aipw, sys.modules[__name__], text=repr(settings))


def _changed(kept: KeptPropensity, session_ids: pl.Series, rated: np.ndarray) -> tuple[np.ndarray, int]:
    """Each session's fold in the kept fit (-1: not in it), and how many sessions are new or changed their rated
    status since the fit."""
    then = pl.DataFrame({"session_id": kept.session_ids, "fold": kept.fit.folds, "rated_then": kept.rated}).unique(
        "session_id", keep="first"
    )
    now = pl.DataFrame({"session_id": session_ids, "rated_now": rated}).with_row_index("row")
    joined = now.join(then, on="session_id", how="left").sort("row")
    fold = joined["fold"].fill_null(-1).to_numpy()
    changed = int((joined["rated_then"].is_null() | (joined["rated_then"] != joined["rated_now"])).sum())
    return fold, changed


def refit_reason(kept: KeptPropensity | None, key: str, changed: int, refit_share: float, now: datetime) -> str | None:
    """Why the arm must be fitted again (the module docstring's rules, in order), or None to reuse ``kept``."""
    if refit_share <= 0:
        return "PULSE_MODEL_REFIT_SHARE is 0: every run fits again"
    if kept is None:
        return "no kept fit"
    if kept.key != key:
        return "the propensity code, settings, feature columns or library version changed since the kept fit"
    if kept.fitted_at.date() < now.date():
        return f"the kept fit is from {kept.fitted_at:%Y-%m-%d} (UTC): the first run of a day fits again"
    if changed > refit_share * len(kept.session_ids):
        return (
            f"{changed} sessions added or changed their rated status since the kept fit of"
            f" {len(kept.session_ids)} (more than {refit_share:g} of them)"
        )
    return None


@dataclass(frozen=True)
class PropensityStore:
    """Where the arms' kept propensity fits live, and when they are fitted again."""

    folder: Path
    refit_share: float
    say: Callable[[str], None] = lambda _: None

    def path(self, arm: str) -> Path:
        return self.folder / f"{hashlib.sha1(arm.encode()).hexdigest()[:16]}.joblib"

    def load(self, arm: str) -> KeptPropensity | None:
        """The arm's kept fit, or None when there is none or it cannot be read (then the arm is fitted again)."""
        path = self.path(arm)
        if not path.exists():
            return None
        try:
            kept = joblib.load(path)
        except Exception as error:  # a file from another version of a library, or cut short: fit again
            self.say(f"the kept propensity fit {path} could not be read ({type(error).__name__}: {error})")
            return None
        return kept if isinstance(kept, KeptPropensity) else None

    def save(self, arm: str, kept: KeptPropensity) -> None:
        """Write ``kept`` atomically: a temporary file renamed over the old one."""
        path = self.path(arm)
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        joblib.dump(kept, partial)
        os.replace(partial, path)

    def propensities(
        self,
        arm: str,
        session_ids: Sequence[str] | pl.Series,
        X: np.ndarray,
        rated: np.ndarray,
        columns: Sequence[str],
        seed: int,
        k: int = 5,
        workers: int = 1,
        now: datetime | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The arm's out-of-fold P(rated | x) by the model, and the propensities AIPW weights by (the model's, or
        the rated fraction when the model does not beat it out of fold: ``aipw.PropensityFit.weighting``), one per
        row of ``X`` (session ``session_ids[i]``, rated ``rated[i]``, features named ``columns``): from the kept
        fit when the module docstring's rules allow (its choice kept with it), else from a new cross-fit
        (``aipw.crossfit_propensity_fit``), which is kept for the next run when ``refit_share`` > 0.

        ``arm``: the arm's name (experiment/variant: a fit is never applied to another arm's sessions); ``now``:
        the time that decides the day rule (None: the clock, UTC)."""
        now = now or datetime.now(UTC)
        X = np.asarray(X, dtype=np.float64)
        rated = np.asarray(rated, dtype=bool)
        ids = pl.Series("session_id", session_ids, dtype=pl.Utf8)
        if len(columns) != X.shape[1]:
            raise ValueError(f"{len(columns)} column names for {X.shape[1]} feature columns")
        counts = count_like(X)
        key = fit_key(arm, columns, counts, seed, k)
        kept = self.load(arm) if self.refit_share > 0 else None
        folds, changed = _changed(kept, ids, rated) if kept is not None else (None, ids.len())
        reason = refit_reason(kept, key, changed, self.refit_share, now)
        if reason is None and kept is not None and folds is not None:
            self.say(f"{arm}: kept propensity fit reused ({changed} sessions new or changed since)")
            model = kept.fit.predict(X, folds)
            return model, kept.fit.weighting(model)
        fit = crossfit_propensity_fit(X, rated, k=k, seed=seed, workers=workers, counts=counts)
        if self.refit_share > 0:
            self.say(f"{arm}: propensity model fitted again ({reason})")
            self.save(arm, KeptPropensity(key, now, ids, rated.copy(), fit))
        return fit.propensity, fit.weighting()
