"""Native threads of model fits: PULSE_MODEL_THREADS is parsed, applied inside every fit and predict, and changes
no prediction of the families it governs (``modeling/threads.py``)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from lightgbm import LGBMRegressor
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_info

from pulse_pipeline import settings
from pulse_pipeline.estimates.effects import ArmData, Settings, compare
from pulse_pipeline.modeling.crossfit import cross_validate, crossfit_predict, insample_predict
from pulse_pipeline.modeling.families import make_model
from pulse_pipeline.modeling.importance import permutation_importance_oof
from pulse_pipeline.modeling.threads import native_threads
from pulse_pipeline.settings import SettingsError
from pulse_pipeline.synth import FEATURE_NAMES, feature_matrix, simulate_sessions


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """~100 rated and ~300 unrated sessions (25 % rated)."""
    table = simulate_sessions(400, seed=3, rated_fraction=0.25)
    X = feature_matrix(table)
    return X[table.rated], table.label[table.rated], X[~table.rated]


def pools() -> dict[str, int]:
    """Threads of every OpenMP and BLAS pool loaded in this process, by library file."""
    return {p["filepath"]: p["num_threads"] for p in threadpool_info() if p["user_api"] in ("openmp", "blas")}


def spy(monkeypatch: pytest.MonkeyPatch, cls: type, method: str, seen: list[tuple[str, dict[str, int]]]) -> None:
    """Record, at every call of ``cls.method``, the thread pools as the call sees them."""
    original = getattr(cls, method)

    def recording(self, *args, **kwargs):
        seen.append((method, pools()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, method, recording)


# --------------------------------------------------------------------------------------------------------
# the setting


def test_the_setting_defaults_to_one_thread_and_accepts_all():
    assert settings.model_threads({}) == settings.DEFAULT_MODEL_THREADS == 1
    assert settings.modeling_settings({}).threads == 1
    assert settings.model_threads({"PULSE_MODEL_THREADS": " 3 "}) == 3
    assert settings.modeling_settings({"PULSE_MODEL_THREADS": "2"}).threads == 2
    # all: the cores this process may run on (its affinity, what a container's cpuset allows)
    assert settings.model_threads({"PULSE_MODEL_THREADS": "ALL"}) == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_thread_count_is_refused_with_its_name(value):
    with pytest.raises(SettingsError, match=r"PULSE_MODEL_THREADS=.* must be a whole number of threads >= 1 or 'all'"):
        settings.model_threads({"PULSE_MODEL_THREADS": value})
    with pytest.raises(SettingsError, match="PULSE_MODEL_THREADS"):
        settings.modeling_settings({"PULSE_MODEL_THREADS": value})


def test_native_threads_caps_every_pool_and_restores_it():
    before = pools()
    with native_threads(3) as n:
        assert n == 3 and set(pools().values()) == {3}
    assert pools() == before
    with pytest.raises(ValueError, match="threads must be >= 1"), native_threads(0):
        pass


# --------------------------------------------------------------------------------------------------------
# applied where fits happen


@pytest.mark.parametrize("threads", [1, 2])  # at least one differs from the machine's own count (its cores)
def test_every_histogram_boosting_fit_and_predict_runs_capped(data, monkeypatch, threads):
    Xl, y, Xu = data
    monkeypatch.setenv("PULSE_MODEL_THREADS", str(threads))
    seen: list[tuple[str, dict[str, int]]] = []
    spy(monkeypatch, HistGradientBoostingRegressor, "fit", seen)
    spy(monkeypatch, HistGradientBoostingRegressor, "predict", seen)
    before = pools()

    cross_validate(Xl, y, "hist_gbm", k=2, seeds=(0,))  # 2 fits, 2 held-out predicts
    cf = crossfit_predict(Xl, y, Xu, "hist_gbm", k=2)  # 2 fits, 2 held-out + 2 unlabeled predicts
    insample_predict(Xl, y, Xu, "hist_gbm")  # 1 fit, 2 predicts (the rated rows, the unrated rows)
    # per fold: the held-out rows, then the 20 permuted copies stacked in one call
    permutation_importance_oof(cf, Xl, y, FEATURE_NAMES, n_repeats=1)

    assert [m for m, _ in seen].count("fit") == 5 and [m for m, _ in seen].count("predict") == 12
    assert all(set(p.values()) == {threads} for _, p in seen), seen
    assert pools() == before  # the limit ends with the call


@pytest.mark.parametrize("threads", [1, 2])
def test_lightgbm_gets_the_count_as_n_jobs_and_the_forest_every_core(data, monkeypatch, threads):
    Xl, y, Xu = data
    monkeypatch.setenv("PULSE_MODEL_THREADS", str(threads))
    seen: list[tuple[str, dict[str, int]]] = []
    spy(monkeypatch, LGBMRegressor, "fit", seen)
    cf = crossfit_predict(Xl, y, Xu, "lightgbm", k=2)
    # LightGBM sets its own OpenMP thread count from num_threads at each call: the cap alone would not hold it
    assert [m[-1].booster_.params["num_threads"] for m in cf.models] == [threads, threads]
    assert len(seen) == 2 and all(set(p.values()) == {threads} for _, p in seen)
    assert make_model("lightgbm", threads=3)[-1].n_jobs == 3  # an explicit count wins over the setting
    # the forest's joblib threads sleep while they wait: it keeps every core the process may run on
    assert make_model("random_forest")[-1].n_jobs == len(os.sched_getaffinity(0))


def test_the_propensity_fits_of_aipw_run_capped(monkeypatch):
    monkeypatch.setenv("PULSE_MODEL_THREADS", "3")
    seen: list[tuple[str, dict[str, int]]] = []
    spy(monkeypatch, LogisticRegression, "fit", seen)
    rng = np.random.default_rng(0)

    def arm(name: str) -> ArmData:
        X_lab, X_unl = rng.random((30, 4)), rng.random((90, 4))
        y = rng.random(30)
        return ArmData(name, y, y + 0.1, rng.random(90), X_lab, X_unl)

    compare(arm("t"), arm("c"), Settings(n_resamples=50, n_permutations=50))
    compare(arm("t"), arm("c"), Settings(n_resamples=50, n_permutations=50, threads=1))
    # 5 stratified folds per arm, two arms per comparison: 10 fits at 3 threads, then 10 at 1
    assert [set(p.values()) for _, p in seen] == [{3}] * 10 + [{1}] * 10


# --------------------------------------------------------------------------------------------------------
# what the thread count changes


@pytest.mark.parametrize("family", ["ordinal_logit", "hist_gbm", "lightgbm"])
def test_one_or_two_threads_give_identical_predictions(data, family):
    """What holds at this scale, though the libraries do not promise it: their parallel loops split the work by
    feature or by row, so no floating-point sum is split across threads."""
    Xl, y, Xu = data
    one = crossfit_predict(Xl, y, Xu, family, k=2, threads=1)
    two = crossfit_predict(Xl, y, Xu, family, k=2, threads=2)
    np.testing.assert_array_equal(one.oof, two.oof)
    np.testing.assert_array_equal(one.unlabeled, two.unlabeled)
