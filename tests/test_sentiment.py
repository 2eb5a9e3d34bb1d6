"""Sentiment as a trajectory (``features/sentiment.py``): expected scores come from vaderSentiment called here,
statistics are worked out by hand (numpy's polyfit for the slope), the English rule on a table of examples."""

from __future__ import annotations

import json

import numpy as np
import pytest
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from pulse_pipeline.features.event_features import build_event_features
from pulse_pipeline.features.sentiment import (
    COLUMNS,
    is_complaint,
    is_english,
    is_thanks,
    sentiment_table,
    session_sentiment,
    slope,
    vader_text,
)
from pulse_pipeline.features.user_text import build_user_text

from .helpers import ingest_paths

VADER = SentimentIntensityAnalyzer()


def vader(text: str) -> float:
    return VADER.polarity_scores(text)["compound"]


@pytest.mark.parametrize(
    ("message", "english"),
    [
        ("Please fix the failing test in utils.py, the parse_config function throws KeyError", True),
        ("fix parse_config in utils.py, it throws KeyError", True),
        ("Implement OAuth2 login with JWT tokens for the FastAPI backend", True),
        ("Run pytest tests/test_sentiment.py -q and show me the output", True),
        ("Hmm, it still doesn't work. Same error as before.", True),
        ("ok", True),
        ("thanks!", True),
        ("lgtm", True),
        ("thx", True),
        ("no", True),
        ("continue", True),
        ('print("hello world")', True),  # code whose names are English words: judged like prose, scores 0
        ("Kannst du bitte den Fehler in der Datei beheben?", False),
        ("Das war nicht so gut, was ist mit dem Test?", False),  # war, so, was, test are English words too
        ("Die Tests laufen nicht durch", False),
        ("Danke, das funktioniert jetzt!", False),
        ("Peux-tu corriger le bug dans le fichier, merci", False),
        ("Le test échoue avec une erreur", False),
        ("Por favor arregla el error en el archivo", False),
        ("El test falla con un error de import", False),
        ("Il test fallisce", False),
        ("请帮我修复这个错误", False),
        ("请修复 test_foo 中的 bug", False),
        ("このバグを直してください", False),
        ("Пожалуйста, исправь ошибку в файле", False),
        ("def foo(x):\n    return x + 1", True),  # "return": one English word of three tokens
        ("src/pulse_pipeline/features/wide.py", False),
        ("123", False),
        ("!!!", False),
        ("", False),
    ],
)
def test_english_rule(message, english):
    assert is_english(message) is english


@pytest.mark.parametrize(
    ("message", "thanks", "complaint"),
    [
        ("thanks, that works!", True, False),
        ("Thank you so much", True, False),
        ("thx", True, False),
        ("Danke!", True, False),
        ("merci beaucoup", True, False),
        ("Спасибо, всё работает", True, False),
        ("谢谢", True, False),
        ("ありがとうございます", True, False),
        ("thanks, but it still doesn't work", False, True),  # a phrase of complaint wins over thanks
        ("Hmm, it still doesn't work. Same error as before.", False, True),  # VADER reads it as positive (0.31)
        ("This is terrible, you broke everything", False, True),  # no phrase needed: VADER <= -0.05
        ("Das funktioniert nicht", False, True),
        ("type the command again", False, False),  # "ty" is a whole word only
        ("add a test for the parser", False, False),
    ],
)
def test_thanks_and_complaint(message, thanks, complaint):
    assert (is_thanks(message) and not is_complaint(message), is_complaint(message)) == (thanks, complaint)


def test_session_statistics_by_hand():
    messages = [
        "Please add a login page.",  # English
        "This is terrible, nothing works!",  # English, negative
        "Das ist schlecht.",  # German: not scored
        "Great, much better now.",  # English, positive
        "ok thanks",  # English
    ]
    scores = [vader(m) for i, m in enumerate(messages) if i != 2]
    assert scores[1] <= -0.05 < scores[2]
    got = session_sentiment(messages, agent_spoke_last=True)
    assert got.user_english_share == pytest.approx(4 / 5)
    assert got.user_sentiment_mean == pytest.approx(sum(scores) / 4)
    assert got.user_sentiment_min == pytest.approx(min(scores))
    assert got.user_sentiment_max == pytest.approx(max(scores))
    assert got.user_sentiment_first == pytest.approx(scores[0])
    assert got.user_sentiment_last == pytest.approx(scores[-1])
    assert got.user_sentiment_slope == pytest.approx(np.polyfit(np.arange(4), scores, 1)[0])
    assert got.user_negative_share == pytest.approx(sum(s <= -0.05 for s in scores) / 4)
    assert got.last_user_message_chars == len("ok thanks")
    assert (got.ends_on_thanks, got.ends_on_complaint, got.ends_on_agent_turn) == (1, 0, 1)


def test_slope_matches_polyfit_and_needs_two_points():
    values = [0.3, -0.2, 0.5, 0.9, -0.7]
    assert slope(values) == pytest.approx(np.polyfit(np.arange(5), values, 1)[0])
    assert slope([0.4]) is None and slope([]) is None


def test_one_english_message_has_no_slope():
    got = session_sentiment(["Bitte den Fehler beheben", "this is wrong"], agent_spoke_last=False)
    assert got.user_english_share == 0.5
    assert got.user_sentiment_mean == got.user_sentiment_first == got.user_sentiment_last == vader("this is wrong")
    assert got.user_sentiment_slope is None
    assert (got.ends_on_thanks, got.ends_on_complaint, got.ends_on_agent_turn) == (0, 1, 0)


def test_only_non_english_messages_give_null_statistics():
    got = session_sentiment(["Kannst du bitte den Fehler beheben?", "请帮我修复这个错误", "Danke!"], True)
    assert got.user_english_share == 0
    assert all(getattr(got, c) is None for c in COLUMNS if c.startswith("user_sentiment"))
    assert got.user_negative_share is None
    assert got.last_user_message_chars == len("Danke!")
    assert (got.ends_on_thanks, got.ends_on_complaint, got.ends_on_agent_turn) == (1, 0, 1)


def test_no_user_message():
    got = session_sentiment([], agent_spoke_last=True)
    assert {c: getattr(got, c) for c in COLUMNS} == dict.fromkeys(COLUMNS[:9]) | {
        "ends_on_thanks": 0,
        "ends_on_complaint": 0,
        "ends_on_agent_turn": 1,
    }


def test_long_message_is_read_as_its_head_and_tail():
    long = "great " * 100 + "x" * 5000 + " this is awful"
    cut = vader_text(long)
    assert len(cut) == 2005 and cut.endswith("this is awful")
    got = session_sentiment([long], agent_spoke_last=False)
    assert got.last_user_message_chars == len(long)
    assert got.user_sentiment_mean == pytest.approx(vader(cut))


def _session(session_id: str, *turns: tuple[str, str]) -> dict:
    events = [
        {"id": str(i), "source": source, "type": "message", "text": text} for i, (source, text) in enumerate(turns)
    ]
    events.append({"id": "run", "source": "agent", "type": "run", "command": "pytest -q"})
    return {"session_id": session_id, "user_id": "u", "events": events}


def test_through_event_features(wh, tmp_path):
    drop = tmp_path / "sentiment.jsonl"
    sessions = [
        _session("s-thanks", ("user", "Please fix the login bug."), ("agent", "Fixed."), ("user", "thanks, works now")),
        _session("s-agent", ("user", "This is terrible, nothing works!"), ("agent", "Sorry, trying again.")),
        _session("s-german", ("user", "Kannst du bitte den Fehler beheben?"), ("user", "Das funktioniert nicht")),
        _session("s-none", ("agent", "Hello, how can I help?")),
    ]
    drop.write_text("\n".join(json.dumps(s) for s in sessions) + "\n")
    ingest_paths(wh, drop)
    build_user_text(wh)
    build_event_features(wh)
    rows = {r["session_id"]: r for r in wh.frame("SELECT * FROM features.event_features").to_dicts()}

    first, last = vader("Please fix the login bug."), vader("thanks, works now")
    thanks = rows["s-thanks"]
    assert thanks["user_message_count"] == 2 and thanks["user_english_share"] == 1
    assert thanks["user_sentiment_mean"] == pytest.approx((first + last) / 2)
    assert thanks["user_sentiment_slope"] == pytest.approx(last - first)
    assert (thanks["user_sentiment_first"], thanks["user_sentiment_last"]) == pytest.approx((first, last))
    assert thanks["last_user_message_chars"] == len("thanks, works now")
    assert (thanks["ends_on_thanks"], thanks["ends_on_complaint"], thanks["ends_on_agent_turn"]) == (1, 0, 0)

    agent = rows["s-agent"]
    assert agent["user_sentiment_min"] == pytest.approx(vader("This is terrible, nothing works!"))
    assert agent["user_negative_share"] == 1 and agent["user_sentiment_slope"] is None
    assert (agent["ends_on_thanks"], agent["ends_on_complaint"], agent["ends_on_agent_turn"]) == (0, 1, 1)

    german = rows["s-german"]
    assert german["user_english_share"] == 0
    assert german["user_sentiment_mean"] is None and german["user_negative_share"] is None
    assert (german["ends_on_thanks"], german["ends_on_complaint"], german["ends_on_agent_turn"]) == (0, 1, 0)

    none = rows["s-none"]
    assert none["user_message_count"] == 0 and none["user_english_share"] is None
    assert none["last_user_message_chars"] is None
    assert (none["ends_on_thanks"], none["ends_on_complaint"], none["ends_on_agent_turn"]) == (0, 0, 1)


def test_gathered_in_parts_gives_the_same_rows(wh, tmp_path):
    """sentiment_table gathers the sessions' messages a part at a time (memory bounded at scale): one session per
    part gives exactly the rows of one part for all."""
    drop = tmp_path / "parts.jsonl"
    turns = [("user", "fix it please"), ("agent", "done"), ("user", "thanks!"), ("user", "no, wrong file")]
    sessions = [_session(f"s{i}", *turns[: 1 + i % 4]) for i in range(7)]
    drop.write_text("\n".join(json.dumps(s) for s in sessions) + "\n")
    ingest_paths(wh, drop)
    build_user_text(wh)
    whole = sentiment_table(wh).to_pylist()
    assert len(whole) == 7
    assert sorted(sentiment_table(wh, sessions_per_part=1).to_pylist(), key=lambda r: r["session_id"]) == sorted(
        whole, key=lambda r: r["session_id"]
    )


def test_scores_the_redacted_user_text_of_features_user_text(wh, tmp_path):
    """The messages come from ``features.user_text``, redacted: a pasted key is not the user's words, and the
    length of the last message is the redacted one's; what the table holds is what is scored."""
    key = "sk-ant-" + "x1" * 20  # an Anthropic key's shape (redact.py)
    drop = tmp_path / "secret.jsonl"
    sessions = [
        _session("s-key", ("user", "Please fix the login bug."), ("agent", "Fixed."), ("user", f"use {key}")),
        _session("s-table", ("user", "Please fix the login bug."), ("agent", "Fixed.")),
    ]
    drop.write_text("\n".join(json.dumps(s) for s in sessions) + "\n")
    ingest_paths(wh, drop)
    build_user_text(wh)
    # the table is the source: a message it holds (and the events do not) is the one scored
    wh.con.execute("UPDATE features.user_text SET text = 'thanks, works now' WHERE session_id = 's-table'")
    rows = {r["session_id"]: r for r in sentiment_table(wh).to_pylist()}
    assert rows["s-key"]["last_user_message_chars"] == len("use [REDACTED:anthropic_key]")
    assert rows["s-table"]["user_sentiment_first"] == pytest.approx(vader("thanks, works now"))
    # the agent's message is still the last one of s-table: whose turn it is comes from the events
    assert (rows["s-table"]["ends_on_thanks"], rows["s-table"]["ends_on_agent_turn"]) == (1, 1)
