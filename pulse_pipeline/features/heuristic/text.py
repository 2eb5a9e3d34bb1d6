"""Text helpers of the offline annotator: VADER's compound score, capping long texts, quoting evidence.

Why capped: an export holds pasted logs and generated files of megabytes; the rules read a long text as its head and
tail (``cap``) and VADER a long message as its first and last ``VADER_CHARS`` characters, so one session cannot
take minutes.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache

HEAD_CHARS = 20_000
TAIL_CHARS = 20_000
VADER_CHARS = 1_000  # VADER reads a message's first and last VADER_CHARS characters
QUOTE_CHARS = 80

_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


@cache  # one analyzer, built on first use (threads racing to build it may each build one; one is kept)
def _analyzer():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


@lru_cache(maxsize=65_536)  # repeated messages ("continue", "thanks") are common
def _compound(message: str) -> float:
    return _analyzer().polarity_scores(message)["compound"]


def compound(message: str) -> float:
    """VADER compound of one message, read as its first and last ``VADER_CHARS`` characters."""
    if len(message) > 2 * VADER_CHARS:
        message = message[:VADER_CHARS] + " ... " + message[-VADER_CHARS:]
    return _compound(message)


def cap(text: str) -> str:
    """``text``, or its first ``HEAD_CHARS`` and last ``TAIL_CHARS`` characters when longer than both."""
    return text if len(text) <= HEAD_CHARS + TAIL_CHARS else text[:HEAD_CHARS] + " ... " + text[-TAIL_CHARS:]


def quote(text: str, limit: int = QUOTE_CHARS, mark: str = '"') -> str:
    """``text`` on one line, cut to ``limit`` characters, between ``mark``s."""
    text = " ".join(text[: limit * 4].split())
    return mark + (text if len(text) <= limit else text[: limit - 1] + "…") + mark


def quote_command(text: str) -> str:
    """A command as evidence: one line, at most 60 characters, between backticks."""
    return quote(text, 60, "`")


def plural(n: int, word: str) -> str:
    """``1 edit``, ``2 edits``, ``2 matches``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith(("ch", "sh", "s", "x")) else f"{n} {word}s"


def task_description(first_message: str) -> str:
    """The first sentence of the first user message, at most 200 characters."""
    head = first_message[:2000].strip()
    m = _SENTENCE_END.search(head)
    sentence = " ".join((head[: m.start()] if m else head).split())
    return sentence if len(sentence) <= 200 else sentence[:199] + "…"
