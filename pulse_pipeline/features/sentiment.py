"""Sentiment as a trajectory: per-session statistics of the VADER compound score of the user's own messages.

Why: a session's satisfaction shows in how the user's words move (cordial at first, curt and negative at the end,
or the reverse), not in one 3-way category. Plain baselines on real rated conversations reach an out-of-fold
correlation of ~0.25 from a handful of VADER statistics alone, so ``features.event_features`` carries them and the
satisfaction models read them like any other column.

Which messages: a session's user messages are its rows of ``features.user_text`` (``user_text.py``: the
``message`` actions with source ``user`` of the session's winning record, the ones ``user_message_count`` counts,
redacted), in stream order; a message with no text counts as empty. Only whose turn ends the session
(``ends_on_agent_turn``) is read off the events, since it needs the agent's messages too.

English only: VADER knows English words only, so a message in German or Chinese scores ~0 and would read as
"neutral". Each message is judged English or not (``is_english``); only English messages are scored, and a session
whose user never writes English gets NULL statistics, not a neutral 0.

English rule (``is_english``), on the text VADER reads (``compound``: a long message's first and last 1 000
characters). Tokens are runs of letters, lower-cased; a CJK, kana or Hangul character is a token by itself (those
scripts have no spaces); Latin tokens of one letter are dropped (``x``, ``i``: no evidence either way). A token is
*English* when it is in ``english_words()`` (VADER's lexicon, English function words, common English and software
words), *foreign* when it is in ``foreign_words()`` (frequent function words of German, French, Spanish,
Italian, Portuguese and Dutch that are not English words) or written in a non-Latin script. With ``n`` tokens,
``e`` English and ``f`` foreign, the message is English when ``n > 0`` and ``e - f >= 0.3 n``. The threshold
was set on the examples of ``tests/test_sentiment.py``: English requests full of identifiers (``fix
parse_config in utils.py, it throws KeyError``, ``implement OAuth2 login with JWT tokens``) keep
``(e - f) / n`` at 0.4 or more, most at 0.6-1; German, French, Spanish and Italian sentences share a few words
with English (``in``, ``was``, ``so``, ``die``, ``test``, ``error``) but their function words keep
``(e - f) / n`` at 0.2 or less (``Die Tests laufen nicht durch``: 0.2); Chinese, Japanese and Russian tokens
are all foreign. Short replies ``ok``, ``thanks!``, ``thx``, ``lgtm`` are English; a message without a
letter (``123``, ``!!!``, an emoji) is not. Code and paths are judged like prose: code whose names are English
words (``print("hello world")``, ``def foo(x): return x + 1``) passes and scores ~0 like any neutral message;
a bare path (``src/pulse_pipeline/features/wide.py``) does not.

The phrase lists, too, read ``vader_text`` of a message (and the warehouse query hands over nothing more).

Session columns (English messages only, in stream order, ``c_0 .. c_{m-1}`` their compound scores):

- ``user_english_share``: English user messages / user messages (NULL with no user message).
- ``user_sentiment_mean`` / ``_min`` / ``_max`` / ``_first`` / ``_last``: of ``c``.
- ``user_sentiment_slope``: least-squares slope of ``c_j`` on ``j = 0..m-1``,
  ``sum((j - jbar)(c_j - cbar)) / sum((j - jbar)^2)``; NULL when ``m < 2``.
- ``user_negative_share``: share of ``c_j <= -0.05`` (VADER's own threshold for "negative").
- ``last_user_message_chars``: length in characters of the last user message, any language (NULL without one).
- ``ends_on_complaint`` / ``ends_on_thanks``: read off the *last user message* (the user's last word, whether
  or not the agent answers it). Complaint: a ``COMPLAINT_PHRASES`` match, or (English only) compound <= -0.05
  with no ``THANKS_PHRASES`` match. Thanks: a ``THANKS_PHRASES`` match (several languages) and not a complaint,
  so ``thanks, but it still doesn't work`` is a complaint. 0 with no user message.
- ``ends_on_agent_turn``: 1 when the session's last ``message`` action is not the user's (the agent spoke last
  and the user never answered), else 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

import pyarrow as pa

from .. import tables
from ..processes import ordered_map
from ..warehouse import Warehouse
from .batches import session_batches
from .heuristic.text import compound

NEGATIVE = -0.05
"""VADER's threshold: a compound score at or below it is negative."""

ENGLISH_THRESHOLD = 0.3
"""A message is English when (English tokens - foreign tokens) >= ENGLISH_THRESHOLD x tokens."""

VADER_CHARS = 1_000
"""The English rule reads what VADER reads: a long message's first and last VADER_CHARS characters."""

_FUNCTION_WORDS = """
a about above after again against all also am an and any are as at be because been before being below between
both but by can cannot could did do does doing done down during each either else even ever every few for from
further had has have having he her here hers herself him himself his how however if in into is it its itself
just least less let like may me might mine more most must my myself neither never no nor not now of off often on
once only or other others otherwise our ours ourselves out over own per rather same shall she should since so
some still such than that the their theirs them themselves then there these they this those though through thus
to too under until up upon us very via was we well were what whatever when where whether which while who whom
whose why will with within without would yet you your yours yourself yourselves yes yeah yep nope hey hi hello
isn aren wasn weren doesn don didn won wouldn couldn shouldn can't don't doesn't didn't isn't won't i'm it's
that's let's i've i'll i'd you're we're they're there's what's here's ll ve re
"""

_COMMON_WORDS = """
able accept access account across act action actually add added adding address after again ago agent agree ahead
allow almost alone along already alright always amount another answer anymore anyone anything anyway anywhere api
app apply approach area around ask asked asking attempt attached available away back bad base basic become before
begin behind believe best better big bit block body book both box branch break bring broken browser bug bugs build
building built button call called calls came can't care case cases cause change changed changes changing check
checked checking class clean clear click client close code column command comment commit complete config confirm
connect connection console context continue copy correct correctly could count create created current data database
date day days debug default define delete dependency deploy describe description detail details did different
directory do docs document documentation does doing done double download drop each early easy edit else empty
end enough ensure entire environment error errors even event everything example except exist existing expect
expected explain fail failed failing fails failure false feature features fetch field file files final finally
find fine finish first fix fixed fixes fixing folder follow following form format found free full function
functions get gets getting give given go goes going gone good got great group guess handle happen happened happens
hard head help here high hold home hope idea image implement implementation import include including info
information input inside install installed instead issue issues item items job keep key kind know known large
last later latest least leave left length less library line lines link list little load local log logic long look
looking looks lot main make makes making manage many maybe mean means merge message method might mind minute
missing mode model module more move much name need needed needs new next nothing number object old one ones open
option options order original output page part pass passed passing path people perfect place plan please point
possible post previous print probably problem problems process project pull push put question quick quite read
ready real really reason remove removed repo repository request required reset response rest result results return
returns review right run running runs same save say says script search second see seems seen send server service
set setting settings setup should show shows side simple since single small something sometimes source specific
start started state step steps still stop string stuff support sure system table take task tell test tested tests
text thanks thank thing things think though thought time times today together tool tools top total true try
trying turn type understand update updated upload url use used user users uses using value values version want
wanted way ways web well went whole why window word words work worked working works world write writing written
wrong yet ok okay lgtm thx ty pls plz please cool nice awesome sorry hmm wait run rerun fyi asap btw imo
login logout token tokens backend frontend throw throws thrown parse parser refactor query queries endpoint
deploy deployment docker container server api json yaml csv html css sql regex cli readme repo commit branch
pr merge rebase lint linter format compile compiler runtime exception stack trace crash crashes timeout port
variable variables parameter argument arguments import imports package packages folder dir config settings
"""

_FOREIGN_WORDS = """
der das dem den des ein eine einen einem einer und ist nicht mit auf ich du sie wir ihr es bitte danke noch
auch wie kannst kann ich mich mir dich dir sind haben hast hat wird wurde aber oder wenn dann nur schon mal
bei aus zum zur vom ja nein gut sehr diese dieser dieses funktioniert fehler datei
le la les un une des du et est pas avec pour dans sur je tu il elle nous vous ils elles ce cette mais ou donc
qui que quoi merci oui peux fait faire bien tres très aussi encore fichier erreur corriger
el los las una unos unas y es por para con sin pero como que qué esta este está gracias sí hola favor puedes
hacer bien muy también archivo arreglar funciona
il lo gli della delle dei che non per con una sono grazie ciao anche questo questa perché molto
o os um uma é não com para obrigado obrigada você está isso muito
het een en niet met voor van ik je jij wij zijn bedankt dank alsjeblieft ook maar
"""


THANKS_PHRASES = (
    # English
    "thanks",
    "thank you",
    "thank u",
    "thx",
    "thnx",
    "ty",
    "tysm",
    "cheers",
    "appreciate",
    "appreciated",
    "much obliged",
    # German, French, Spanish, Italian, Portuguese, Dutch, Swedish/Danish/Norwegian, Polish, Turkish
    "danke",
    "vielen dank",
    "merci",
    "gracias",
    "grazie",
    "obrigado",
    "obrigada",
    "bedankt",
    "dank je",
    "dank u",
    "tack",
    "tak",
    "takk",
    "dziękuję",
    "dzięki",
    "teşekkürler",
    "teşekkür ederim",
    # Russian, Ukrainian, Chinese, Japanese, Korean (matched as substrings: no spaces, or inflected)
    "спасибо",
    "дякую",
    "谢谢",
    "多谢",
    "感谢",
    "ありがとう",
    "감사합니다",
    "고마워",
)
"""Words of thanks. Latin-script phrases match as whole words (``ty`` is not ``type``), the rest as substrings."""

COMPLAINT_PHRASES = (
    "doesn't work",
    "does not work",
    "didn't work",
    "did not work",
    "not working",
    "still not",
    "still fail",
    "still broken",
    "still doesn't",
    "still don't",
    "still the same",
    "same error",
    "same problem",
    "same issue",
    "you broke",
    "broke it",
    "not what i asked",
    "not what i wanted",
    "that's wrong",
    "that is wrong",
    "this is wrong",
    "is wrong",
    "useless",
    "waste of time",
    "give up",
    "stop doing",
    "why did you",
    "funktioniert nicht",
    "ne marche pas",
    "ne fonctionne pas",
    "no funciona",
    "non funziona",
    "não funciona",
    "не работает",
    "不行",
    "没用",
    "動かない",
)
"""Phrases of a user who is not satisfied; matched as whole words in the lower-cased message."""

_LATIN = re.compile(r"[a-z\u00c0-\u024f]")
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|[^\W\d_]+(?:'[^\W\d_]+)?")
_WIDE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _phrase_pattern(phrases: Sequence[str]) -> re.Pattern[str]:
    """One regex for a phrase list: Latin phrases between word boundaries, others as plain substrings."""
    parts = [rf"(?<!\w){re.escape(p)}(?!\w)" if _LATIN.search(p) else re.escape(p) for p in phrases]
    return re.compile("|".join(parts))


_THANKS = _phrase_pattern(THANKS_PHRASES)
_COMPLAINT = _phrase_pattern(COMPLAINT_PHRASES)


@cache
def english_words() -> frozenset[str]:
    """VADER's lexicon (its alphabetic entries) plus ``_FUNCTION_WORDS`` and ``_COMMON_WORDS``."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    lexicon = {w for w in SentimentIntensityAnalyzer().lexicon if w.isalpha()}
    return frozenset(lexicon) | frozenset(_FUNCTION_WORDS.split()) | frozenset(_COMMON_WORDS.split())


@cache
def foreign_words() -> frozenset[str]:
    """``_FOREIGN_WORDS`` less every English word (``die``, ``was``, ``favor`` are English too)."""
    return frozenset(_FOREIGN_WORDS.split()) - english_words()


def vader_text(message: str) -> str:
    """What VADER and the English rule read of a message: all of it, or its first and last VADER_CHARS."""
    return message if len(message) <= 2 * VADER_CHARS else message[:VADER_CHARS] + " ... " + message[-VADER_CHARS:]


@lru_cache(maxsize=65_536)  # repeated messages ("continue", "thanks") are common
def is_english(message: str) -> bool:
    """The module docstring's English rule: ``n > 0`` and ``e - f >= ENGLISH_THRESHOLD * n``."""
    english, foreign = english_words(), foreign_words()
    n = e = f = 0
    for token in _TOKEN.findall(vader_text(message).lower()):
        if len(token) == 1 and not _WIDE.match(token):
            continue
        n += 1
        if token in english or token.replace("'", "") in english:
            e += 1
        elif token in foreign or not _LATIN.match(token):
            f += 1
    return n > 0 and e - f >= ENGLISH_THRESHOLD * n


def is_thanks(message: str) -> bool:
    """The message contains a ``THANKS_PHRASES`` phrase."""
    return _THANKS.search(vader_text(message).lower()) is not None


def is_complaint(message: str) -> bool:
    """A ``COMPLAINT_PHRASES`` match, or an English message scoring <= NEGATIVE that does not thank."""
    if _COMPLAINT.search(vader_text(message).lower()) is not None:
        return True
    return is_english(message) and compound(message) <= NEGATIVE and not is_thanks(message)


def slope(values: Sequence[float]) -> float | None:
    """Least-squares slope of ``values[j]`` on ``j = 0..m-1``; None when ``m < 2``."""
    m = len(values)
    if m < 2:
        return None
    jbar = (m - 1) / 2
    cbar = math.fsum(values) / m
    return math.fsum((j - jbar) * (c - cbar) for j, c in enumerate(values)) / math.fsum(
        (j - jbar) ** 2 for j in range(m)
    )


@dataclass(frozen=True)
class SessionSentiment:
    """The sentiment columns of one session (see the module docstring)."""

    user_english_share: float | None
    user_sentiment_mean: float | None
    user_sentiment_min: float | None
    user_sentiment_max: float | None
    user_sentiment_first: float | None
    user_sentiment_last: float | None
    user_sentiment_slope: float | None
    user_negative_share: float | None
    last_user_message_chars: int | None
    ends_on_thanks: int
    ends_on_complaint: int
    ends_on_agent_turn: int


COLUMNS = tuple(SessionSentiment.__dataclass_fields__)


def session_sentiment(
    user_messages: Sequence[str], agent_spoke_last: bool, last_message_chars: int | None = None
) -> SessionSentiment:
    """The sentiment columns of a session from its user messages (stream order) and who wrote its last message.

    The messages may come already cut by ``vader_text`` (the warehouse query cuts them, so a pasted log of
    megabytes never leaves DuckDB); ``last_message_chars`` is then the uncut length of the last one."""
    scores = [compound(m) for m in user_messages if is_english(m)]
    m = len(scores)
    last = user_messages[-1] if user_messages else None
    if last is not None and last_message_chars is None:
        last_message_chars = len(last)
    complaint = last is not None and is_complaint(last)
    return SessionSentiment(
        user_english_share=m / len(user_messages) if user_messages else None,
        user_sentiment_mean=math.fsum(scores) / m if m else None,
        user_sentiment_min=min(scores) if m else None,
        user_sentiment_max=max(scores) if m else None,
        user_sentiment_first=scores[0] if m else None,
        user_sentiment_last=scores[-1] if m else None,
        user_sentiment_slope=slope(scores),
        user_negative_share=sum(c <= NEGATIVE for c in scores) / m if m else None,
        last_user_message_chars=last_message_chars if last is not None else None,
        ends_on_thanks=int(last is not None and not complaint and is_thanks(last)),
        ends_on_complaint=int(complaint),
        ends_on_agent_turn=int(agent_spoke_last),
    )


def user_messages_sql(sessions: str, events: str | None = None) -> str:
    """Per session of relation ``sessions`` (``staging.sessions`` rows) with a ``message`` action: its user messages
    (``features.user_text``, redacted) cut as ``vader_text`` cuts them (stream order), the uncut length of the last
    one, and whether the last message is not the user's (read off its events); for the sessions of one batch
    (``batches.session_batches``: ``$ids``, whose events lie between row ids ``$first_row`` and ``$last_row``).
    Their events are in ``events`` (``raw.events`` by default, or a subset holding them)."""
    events = events or tables.EVENTS.qualified
    return f"""
WITH turns AS (
    SELECT s.session_id, coalesce(arg_max(e.source, e.seq), 'user') <> 'user' AS agent_spoke_last
    FROM {events} e JOIN {sessions} s USING (record_key)
    WHERE e.kind = 'action' AND e.name = 'message' AND e.rowid BETWEEN $first_row AND $last_row
        AND s.session_id IN (SELECT unnest($ids))
    GROUP BY s.session_id
), said AS (
    SELECT session_id,
        list(CASE WHEN length(coalesce(text, '')) <= {2 * VADER_CHARS} THEN coalesce(text, '')
            ELSE left(text, {VADER_CHARS}) || ' ... ' || right(text, {VADER_CHARS}) END ORDER BY position)
            AS user_messages,
        arg_max(length(coalesce(text, '')), position) AS last_user_chars
    FROM {tables.USER_TEXT.qualified}
    WHERE session_id IN (SELECT unnest($ids))
    GROUP BY session_id
)
SELECT t.session_id, u.user_messages, u.last_user_chars, t.agent_spoke_last
FROM turns t LEFT JOIN said u USING (session_id)
"""


USER_MESSAGES_COLUMNS = ("session_id", "user_messages", "last_user_chars", "agent_spoke_last")
"""The columns of ``user_messages_sql``."""

SESSIONS_PER_PART = 20_000
"""Sessions whose messages are gathered by one query. All at once, the lists of every session's messages outgrew
DuckDB's default memory limit (1 GB) at 108 000 sessions (`bench/scale.py`, three paper-scale drops). Each query
reads only the stretch of the events where its sessions' events lie (``batches.py``), so the parts cost what
they hold."""

SCHEMA = pa.schema(
    [("session_id", pa.string())]
    + [(c, pa.float64()) for c in COLUMNS if c.startswith("user_")]
    + [(c, pa.int32()) for c in COLUMNS if not c.startswith("user_")]
)


def sentiment_rows(messages: pa.Table) -> pa.Table:
    """``SCHEMA`` rows of one part's ``user_messages_sql`` rows: the work a worker process does."""
    rows: dict[str, list] = {name: [] for name in SCHEMA.names}
    columns = (messages.column(name).to_pylist() for name in USER_MESSAGES_COLUMNS)
    for session_id, texts, last_chars, agent_last in zip(*columns, strict=True):
        values = session_sentiment(texts or [], agent_last, last_chars)
        rows["session_id"].append(session_id)
        for c in COLUMNS:
            rows[c].append(getattr(values, c))
    return pa.table(rows, schema=SCHEMA)


def sentiment_table(
    wh: Warehouse,
    sessions_per_part: int = SESSIONS_PER_PART,
    sessions: str | None = None,
    events: str | None = None,
    workers: int = 1,
) -> pa.Table:
    """``SCHEMA`` rows for every session of relation ``sessions`` (``staging.sessions`` rows: all of them by
    default, or those being refreshed; their events in ``events``, ``raw.events`` by default) with a ``message``
    action (others have no user message and no agent turn), gathered ``sessions_per_part`` sessions at a time so
    memory does not grow with the warehouse; their user messages from ``features.user_text``, refreshed before.
    ``workers`` > 1 scores the parts in that many worker processes (``processes.ordered_map``): the same rows."""
    sessions = sessions or tables.STAGING_SESSIONS.qualified
    events = events or tables.EVENTS.qualified
    sql = user_messages_sql(sessions, events)

    def parts() -> Iterator[pa.Table]:
        for batch in session_batches(wh, sessions, sessions_per_part, events):
            params = {"ids": batch.session_ids, "first_row": batch.first_row, "last_row": batch.last_row}
            yield wh.con.execute(sql, params).to_arrow_table()

    return pa.concat_tables([SCHEMA.empty_table(), *ordered_map(sentiment_rows, parts(), workers)])
