"""The estimates stage's cheaper paths give the rows the costlier ones gave.

- ``ppi_insample``'s in-sample model predicts the unrated sessions a chunk at a time (their text vectorized per
  chunk, ``modeling.data.unrated_chunks``) instead of from every session's text at once: the predictions equal,
  to the last bit, those of ``crossfit.insample_predict`` on the whole matrix (what the stage computed before).
- ``effect_history`` calls ``compare`` without resampling (no bootstrap, no permutation test: no history row reads
  them): every row equals, field for field, the row of the history that resampled at every look.
- Each look takes its sessions from arrays made once per arm (``effects.ArmColumns.take``) instead of filtering a
  frame: the arm equals, array for array, ``arm_data`` of the filtered frame, and so does every look's row.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from pulse_pipeline.estimates import effects, history
from pulse_pipeline.features.user_text import load_user_messages
from pulse_pipeline.modeling.crossfit import insample_predict
from pulse_pipeline.modeling.data import ModelingData, unrated_chunks
from pulse_pipeline.modeling.insample import insample_predictions
from pulse_pipeline.modeling.text import vectorize
from pulse_pipeline.stars import stars_to_label

from .test_history import CONTROLS, _sessions, _user_sessions
from .test_modeling_speed import message_warehouse, small_corpus


@pytest.fixture(scope="module")
def corpus():
    """130 sessions (90 rated) with text, in a warehouse holding their messages; the data loaded both ways."""
    ids, messages, y, X = small_corpus()
    wh = message_warehouse(messages)
    every = ModelingData(("a", "b", "c"), np.array(ids), X, y, vectorize(ids, load_user_messages(wh), ~np.isnan(y)))
    rated = ModelingData(
        every.feature_names, every.session_ids, X, y, vectorize(ids, load_user_messages(wh), ~np.isnan(y), True)
    )
    return wh, every, rated


@pytest.mark.parametrize("family", ["text", "ordinal_logit", "random_forest"])
def test_the_in_sample_model_a_chunk_at_a_time_predicts_what_the_whole_matrix_did(corpus, family):
    wh, every, rated = corpus
    assert rated.text.Z.shape[0] == 90 and every.text.Z.shape[0] == 130  # the rated sessions' text only is loaded
    chunks = list(unrated_chunks(wh, rated, chunk=7))
    assert [len(x) for x, _ in chunks] == [7, 7, 7, 7, 7, 5]
    got = insample_predictions(rated, family, iter(chunks))
    # before: one insample_predict on every session's text, its fitted values for the rated sessions and its
    # predictions of the unrated ones, on the 0-1 scale
    lab = every.labeled
    fit = insample_predict(every.X[lab], every.y[lab], every.X[~lab], family, text=every.text_feature())
    want = dict(zip(every.session_ids[lab], stars_to_label(fit.oof), strict=True))
    want.update(zip(every.session_ids[~lab], stars_to_label(fit.unlabeled), strict=True))
    # equal to the last bits a product's summation order may move (the chunks are multiplied a few rows at a time)
    assert got.keys() == want.keys() and len(got) == 130
    assert [got[k] for k in want] == pytest.approx([want[k] for k in want], abs=1e-12)
    whole = insample_predictions(every, family)  # without chunks: the data's own unrated rows
    assert [whole[k] for k in want] == pytest.approx([want[k] for k in want], abs=1e-12)


def test_compare_without_resampling_leaves_out_the_bootstrap_and_the_permutation_p_only():
    frame = _sessions().filter(pl.col("experiment") == "e")
    arms = [effects.arm_data(v, frame.filter(pl.col("variant") == v), ["user_messages"]) for v in ("b", "a")]
    s = effects.Settings(n_resamples=100, n_permutations=100)
    every, diagnostics = effects.compare(*arms, s)
    plain, plain_diagnostics = effects.compare(*arms, s, resampling=False)
    assert [r.method for r in every] == ["naive_welch", "naive_bootstrap", "ppi", "crossppi", "aipw", "ppi_stratified"]
    assert [r.method for r in plain] == ["naive_welch", "ppi", "crossppi", "aipw", "ppi_stratified"]
    assert repr(plain[1:]) == repr(every[2:]) and plain_diagnostics == diagnostics
    assert math.isnan(plain[0].p_value) and 0 < every[0].p_value <= 1
    assert repr(replace(plain[0], p_value=every[0].p_value)) == repr(every[0])


def test_compare_without_diagnostics_leaves_out_the_auc_and_its_flag_only():
    """The sessions of arm b rated far more often when they have many user messages: the AUC flags it."""
    frame = _sessions().filter(pl.col("experiment") == "e")
    rated = pl.when(pl.col("variant") == "b").then(pl.col("user_messages") > 12).otherwise(pl.col("labeled"))
    frame = frame.with_columns(labeled=rated, label=pl.when(rated).then(pl.col("prediction").clip(0, 1)))
    arms = [effects.arm_data(v, frame.filter(pl.col("variant") == v), ["user_messages"]) for v in ("b", "a")]
    every, diagnostics = effects.compare(*arms, resampling=False)
    plain, plain_diagnostics = effects.compare(*arms, resampling=False, diagnostics=False)
    assert diagnostics["auc"] > 0.6 and any(effects.NOT_REPRESENTATIVE in (r.flags or "") for r in every)
    assert math.isnan(plain_diagnostics["auc"]) and not any(
        effects.NOT_REPRESENTATIVE in (r.flags or "") for r in plain
    )
    assert {k: v for k, v in plain_diagnostics.items() if k != "auc"} == {
        k: v for k, v in diagnostics.items() if k != "auc"
    }
    assert [repr(replace(r, flags=None)) for r in plain] == [repr(replace(r, flags=None)) for r in every]


@pytest.mark.parametrize("unit", ["session", "user"])
def test_the_history_without_resampling_has_the_rows_of_the_history_with_it(monkeypatch, unit):
    """The history before: compare resampled (100 resamples, 100 permutations) and ranked every session for the
    AUC at every look, and the bootstrap row was dropped. Under the user unit the bootstrap and the permutation test
    resample users (stats.cluster)."""
    frame, controls = (_sessions(), CONTROLS) if unit == "session" else (_user_sessions(), {"u": "a"})
    units = {e: unit for e in controls}
    plain = history.history_rows(frame, controls, units=units)
    calls = []

    def compare_resampling(treat, control, s, resampling=True, diagnostics=True):
        calls.append((resampling, diagnostics))
        return effects.compare(treat, control, replace(s, n_resamples=100, n_permutations=100))

    monkeypatch.setattr(history, "compare", compare_resampling)
    before = history.history_rows(frame, controls, units=units)
    assert calls and set(calls) == {(False, False)}  # the history asked for no resampling, no AUC, at every look
    assert len(plain) == len(before) > 0 and {r.unit for r in plain if r.method != "none"} == {unit}
    assert [repr(r) for r in plain] == [repr(r) for r in before]  # repr: NaN != NaN, equal reprs are equal fields


def _same_arm(a: effects.ArmData, b: effects.ArmData) -> None:
    assert a.name == b.name
    for field in ("y", "f_labeled", "f_unlabeled", "X_labeled", "X_unlabeled", "f_insample_labeled",
                  "f_insample_unlabeled", "g_labeled", "g_unlabeled", "q_labeled", "q_unlabeled",
                  "propensity_labeled", "propensity_unlabeled"):  # fmt: skip
        x, y = getattr(a, field), getattr(b, field)
        assert (x is None and y is None) or (x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True)), field


def test_an_arms_columns_give_the_arm_of_any_filtered_frame():
    frame = _user_sessions().filter(pl.col("variant") == "a")
    rng = np.random.default_rng(2)
    frame = frame.with_columns(
        ask_probability=pl.Series([None if rng.random() < 0.3 else float(rng.random()) for _ in range(frame.height)]),
        propensity=pl.Series(rng.random(frame.height)),
        user_id=pl.Series([None if i % 7 == 0 else u for i, u in enumerate(frame["user_id"])]),  # own clusters
    )
    insample = {sid: float(i) / 100 for i, sid in enumerate(frame["session_id"])}
    for by_user in (False, True):
        columns = effects.arm_columns("a", frame, ["user_messages"], insample, by_user=by_user)
        for mask in (np.ones(frame.height, bool), rng.random(frame.height) < 0.5, np.zeros(frame.height, bool)):
            want = effects.arm_data("a", frame.filter(pl.Series(mask)), ["user_messages"], insample, by_user=by_user)
            _same_arm(columns.take(mask), want)
        assert columns.take().clustered == by_user


@pytest.mark.parametrize("unit", ["session", "user"])
def test_every_look_is_compare_on_the_frame_filtered_to_its_day(unit):
    frame, controls = (_sessions(), CONTROLS) if unit == "session" else (_user_sessions(), {"u": "a"})
    experiment, treatment, control = ("e", "b", "a") if unit == "session" else ("u", "b", "a")
    rows = history.history_rows(frame, controls, units={e: unit for e in controls})
    by_user = unit == "user"
    dated = frame.filter((pl.col("experiment") == experiment) & pl.col("day").is_not_null())
    if by_user:  # the switcher's sessions are left out (experiments.for_unit)
        dated = dated.filter(pl.col("user_id") != "both")
    arms = history._with_propensity(
        dated, experiment, (treatment, control), ["user_messages"], effects.Settings(), by_user
    )
    looks = sorted({r.day for r in rows if r.experiment == experiment})
    assert len(looks) == 3
    for day in looks:
        upto = arms.filter(pl.col("day") <= day)
        treat, ctrl = (
            effects.arm_data(v, upto.filter(pl.col("variant") == v), by_user=by_user) for v in (treatment, control)
        )
        want = {e.method: e for e in effects.compare(treat, ctrl, effects.Settings(), resampling=False)[0]}
        got = [r for r in rows if r.experiment == experiment and r.day == day]
        assert sorted(r.method for r in got) == sorted(history.METHODS)
        for r in got:
            e = want[r.method]
            assert (r.effect, r.ci_low, r.ci_high) == (e.effect, e.ci_low, e.ci_high)
            assert (r.n_sessions, r.n_rated) == (upto.height, int(upto["labeled"].sum()))
