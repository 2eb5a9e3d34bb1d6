"""``pulse discover`` against the scripted server (``tests/fake_llm.py``) on a small synthetic corpus:
which sessions the discovery prompt shows, the candidate rubric, the annotation prompts, the gain table, the re-ask
of an invalid answer, and the exit without an LLM."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from pulse_pipeline import cli
from pulse_pipeline.discovery.discover import discover, proposals_check
from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.features.heuristic.annotator import HeuristicAnnotator, UnknownRuleError
from pulse_pipeline.features.llm import InvalidAnswer
from pulse_pipeline.features.prompts import render_transcript
from pulse_pipeline.features.redact import redact
from pulse_pipeline.features.rubric import load_rubric
from pulse_pipeline.features.transcripts import iter_transcripts
from pulse_pipeline.features.user_text import build_user_text
from pulse_pipeline.features.wide import build_session_features
from pulse_pipeline.modeling.crossfit import cross_validate
from pulse_pipeline.modeling.data import load_modeling_data
from pulse_pipeline.modeling.text import TextFeature
from pulse_pipeline.synth import write_corpus
from tests.helpers import ingest_paths
from tests.test_llm import settings_for

from .fake_llm import DISCOVERY_ANSWER, POSITIVE_WORDS, FakeLLM, Reply

SECRET = "sk-" + "a1" * 24
SEEDS = (42,)


@pytest.fixture
def corpus_wh(wh, tmp_path):
    """60 synthetic sessions, staged, with event features and the wide table (no annotations: their columns are
    NULL). The generator rates few sessions (about 1 in 15), so every session gets a hand-made rating: 1 + the number of
    user messages, capped at 5 (a rating the event features can predict)."""
    write_corpus(tmp_path / "corpus", 60, seed=5)
    ingest_paths(wh, tmp_path / "corpus")
    wh.con.execute(
        "CREATE OR REPLACE TABLE staging.session_labels AS SELECT session_id, 1 AS n_rated_segments,"
        " least(1 + n_user_messages, 5)::DOUBLE AS label_stars, (least(1 + n_user_messages, 5) - 1) / 4.0 AS label"
        " FROM staging.sessions"
    )
    build_user_text(wh)
    build_event_features(wh)
    build_session_features(wh, load_rubric(), "heuristic", "")
    return wh


def _ranked(wh) -> list[str]:
    """Rated sessions with a user message, highest rating first, ties by md5 of the id (worked out here)."""
    rows = wh.con.execute(
        "SELECT l.session_id, l.label_stars FROM staging.session_labels l JOIN staging.sessions s USING (session_id)"
        " WHERE l.label_stars IS NOT NULL AND s.n_user_messages > 0"
    ).fetchall()
    return [sid for sid, _ in sorted(rows, key=lambda r: (-r[1], hashlib.md5(r[0].encode()).hexdigest()))]


def test_discover_end_to_end(corpus_wh, fake_llm: FakeLLM, tmp_path: Path) -> None:
    wh = corpus_wh
    ranked = _ranked(wh)
    top = ranked[0]
    wh.con.execute(
        "UPDATE raw.events SET text = text || ' key ' || ? WHERE session_id = ? AND seq = (SELECT min(seq) FROM"
        " raw.events WHERE session_id = ? AND source = 'user' AND name = 'message')",
        [SECRET, top, top],
    )
    # an event edited in place keeps its session's version: the user text is read again by hand
    wh.con.execute("DELETE FROM staging.computed_versions WHERE table_name = 'features.user_text'")
    build_user_text(wh)
    fake_llm.push(Reply(content="{not json"), kind="discover")  # the first answer is invalid: re-asked once
    settings = settings_for(fake_llm)
    out = tmp_path / "cands" / "rubric.toml"
    found = discover(wh, settings, load_rubric(), out, "ordinal_logit", sample=6, seeds=SEEDS, say=lambda _: None)

    # the sample: 3 highest- and 3 lowest-rated
    assert found.high == tuple(ranked[:3]) and found.low == tuple(ranked[-3:])
    discovery = fake_llm.prompts("discover")
    assert len(discovery) == 2 and discovery[0] == discovery[1]  # asked, then re-asked with the same prompt
    prompt = discovery[0]
    assert SECRET not in fake_llm.bodies_text() and "[REDACTED:openai_key]" in prompt
    transcripts = {t.session_id: t for b in iter_transcripts(wh) for t in b}
    per = settings.transcript_chars // 6
    for sid in found.high + found.low:
        assert render_transcript(transcripts[sid], per, redact=redact)[0] in prompt
    shown_messages = sum(len(transcripts[s].user_messages) for s in found.high + found.low)
    assert prompt.count("User: ") == shown_messages  # nobody else's messages
    assert prompt.index(render_transcript(transcripts[ranked[0]], per, redact=redact)[0]) < prompt.index("LOWEST-RATED")

    # the candidate rubric
    cand = load_rubric(out)
    expected = [f["name"] for f in DISCOVERY_ANSWER["features"]]
    assert [f.name for f in cand.features] == expected
    assert [(f.value_type, f.options, f.heuristic, f.prompt) for f in cand.features] == [
        ("yes_no", (), "", "analysis"),
        ("category", ("Short", "Medium", "Long"), "", "analysis"),
    ]

    # annotation asked exactly the candidate questions, once per session with a user message
    analysis = fake_llm.prompts("analysis")
    with_user = sum(1 for t in transcripts.values() if any(m.strip() for m in t.user_messages))
    assert len(analysis) == with_user and not fake_llm.prompts("issues")
    for p in analysis:
        questions = [line for line in p.split("\n\n") if line[:2] in ("2.", "3.", "4.")]
        assert questions == [
            "2. Answer YES or NO: Did the user thank the assistant or say the work was good?",
            "3. Classify the length of the user’s longest message into exactly one of these categories (choose"
            " only one that best fits): [Short, Medium, Long]",
        ]

    # the gain table: one row per candidate, finite, and user_thanked's rho_with as computed here from its rule
    assert [g.name for g in found.gains] == expected
    assert all(math.isfinite(x) for g in found.gains for x in (g.rho_current, g.rho_with, g.gain))
    data = load_modeling_data(wh)
    rows = data.labeled & ~np.isin(data.session_ids, list(found.high + found.low))
    text = TextFeature(data.text.Z[np.flatnonzero(rows)], data.text.Z[np.flatnonzero(~data.labeled)])
    thanked = np.array(
        [
            float(any(w in render_transcript(transcripts[s], 40_000, redact=redact)[0].lower() for w in POSITIVE_WORDS))
            if any(m.strip() for m in transcripts[s].user_messages)
            else np.nan
            for s in data.session_ids
        ]
    )

    def rho(X: np.ndarray) -> float:
        cv = cross_validate(X, data.y[rows], "ordinal_logit", seeds=SEEDS, text=text)
        return next(m.mean for m in cv.metrics if m.name == "pearson")

    g = found.gains[0]
    assert g.n_rated == int(rows.sum())
    assert g.rho_current == pytest.approx(rho(data.X[rows]), abs=1e-12)
    assert g.rho_with == pytest.approx(rho(np.column_stack([data.X[rows], thanked[rows]])), abs=1e-12)
    saved = json.loads(found.gains_path.read_text())
    assert found.gains_path == out.with_suffix(".gains.json")
    assert [r["name"] for r in saved["gains"]] == expected and saved["shown_high"] == list(found.high)


def test_proposals_are_validated() -> None:
    check = proposals_check(load_rubric())
    ok = {"features": [{"name": "User Thanked!", "question": "Did they?", "value_type": "yes_no"}]}
    assert check(ok)[0].name == "user_thanked"
    bad = [
        {"features": []},
        {"features": [{"name": "sentiment", "question": "q", "value_type": "yes_no"}]},  # an existing feature
        {"features": [{"name": "judge_likert", "question": "q", "value_type": "yes_no"}]},  # an existing column
        {"features": [{"name": "a", "question": "q", "value_type": "yes_no"}] * 2},  # repeated
        {"features": [{"name": "a", "question": "q", "value_type": "count"}]},
        {"features": [{"name": "a", "question": "q", "value_type": "category", "options": ["Only"]}]},
        {"features": [{"name": "a", "question": "", "value_type": "yes_no"}]},
    ]
    for answer in bad:
        with pytest.raises(InvalidAnswer):
            check(answer)


def test_a_rubric_feature_without_heuristic_is_for_the_llm_only(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    path.write_text('[[feature]]\nname = "x"\ndefinition = "Did it?"\nvalue_type = "yes_no"\nprompt = "analysis"\n')
    (f,) = load_rubric(path).features
    assert f.heuristic == ""
    with pytest.raises(UnknownRuleError, match="'x' has no heuristic rule"):
        HeuristicAnnotator(load_rubric(path))


def test_without_an_llm_discover_exits_2(monkeypatch, capsys) -> None:
    monkeypatch.delenv("PULSE_LLM_MODEL", raising=False)
    assert cli.main(["discover", "--sample", "4"]) == 2
    assert "set PULSE_LLM_MODEL" in capsys.readouterr().err
