"""The estimates stage's cheaper paths give the rows the costlier ones gave.

- ``ppi_insample``'s in-sample model predicts the unrated sessions a chunk at a time (their text vectorized per
  chunk, ``modeling.data.unrated_chunks``) instead of from every session's text at once: the predictions equal,
  to the last bit, those of ``crossfit.insample_predict`` on the whole matrix (what the stage computed before).
"""

from __future__ import annotations

import numpy as np
import pytest

from pulse_pipeline.estimates.experiment_effects import insample_predictions
from pulse_pipeline.modeling.crossfit import insample_predict
from pulse_pipeline.modeling.data import ModelingData, unrated_chunks
from pulse_pipeline.modeling.text import load_user_messages, vectorize
from pulse_pipeline.stars import stars_to_label

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
    assert got == want and len(got) == 130
    assert insample_predictions(every, family) == want  # without chunks: the data's own unrated rows
