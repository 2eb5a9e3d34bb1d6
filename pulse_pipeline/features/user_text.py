"""``features.user_text``: what each session's user wrote, redacted: the one place PULSE reads user messages.

Why: the text model, the sentiment columns, the annotators' transcripts and ``pulse discover`` all read what users
wrote. Each used to read ``raw.events`` on its own, and only some redacted it (the text model did, sentiment and
the heuristic annotator read credentials and email addresses as they were typed). Read once here and redacted once
(``redact.redact``), every reader sees the same messages, none sees a secret, and the stages after features read
users' words through this table instead of going back to the raw events.

Rows: one per user message of a staged session (the ``message`` actions with source ``user`` of the session's
winning record in ``staging.sessions``: the ones ``user_message_count`` counts), with

- ``session_id``;
- ``position``: the message's place among the session's user messages, 0 first, in stream order (``seq``);
- ``text``: the message redacted by ``redact.redact``; NULL when the event has no text (it is still a message:
  sentiment reads it as empty, the text model leaves it out, as they did before).

Refreshed for the sessions whose record changed (``incremental.py``), not rebuilt whole; a session's version is its
record's plus ``code_version()`` (this module and ``redact.py``), so a change of the redaction rules redacts every
session again. A table computed from these rows adds the version they were computed from to its own
(``with_user_text_version``), so it is recomputed after them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pyarrow as pa

from .. import tables
from ..incremental import Refreshed, code_digest, refreshing
from ..staging import SESSION_VERSIONS_SQL
from ..warehouse import Warehouse
from . import redact as redact_module
from .batches import session_batches
from .redact import redact

SESSIONS_PER_PART = 20_000
"""Sessions whose messages are read and redacted at a time: memory stays a part's messages (~2 KB a session at
the paper's scale) whatever the size of the warehouse."""

SCHEMA = pa.schema([("session_id", pa.string()), ("position", pa.int32()), ("text", pa.string())])


def user_messages_sql(sessions: str, events: str | None = None) -> str:
    """The unredacted user messages (session_id, position, text) of the sessions whose ``staging.sessions`` rows are
    in relation ``sessions``, for one batch of ``batches.session_batches`` (``$ids``, whose events lie between row
    ids ``$first_row`` and ``$last_row`` of ``events``, by default ``raw.events``)."""
    events = events or tables.EVENTS.qualified
    return f"""
SELECT s.session_id, (row_number() OVER (PARTITION BY s.session_id ORDER BY e.seq) - 1)::INTEGER AS position, e.text
FROM {events} e JOIN {sessions} s USING (record_key)
WHERE e.kind = 'action' AND e.name = 'message' AND e.source = 'user'
    AND e.rowid BETWEEN $first_row AND $last_row AND s.session_id IN (SELECT unnest($ids))
ORDER BY s.session_id, position
"""


def redacted(rows: pa.Table) -> pa.Table:
    """``rows`` (``user_messages_sql``) with each text redacted: ``SCHEMA`` rows."""
    texts = [None if t is None else redact(t) for t in rows.column("text").to_pylist()]
    return pa.table(
        [rows.column("session_id"), rows.column("position").cast(pa.int32()), pa.array(texts, pa.string())],
        schema=SCHEMA,
    )


def code_version() -> str:
    """What the rows are computed by: this module and the redaction rules."""
    return code_digest(redact_module, sys.modules[__name__])


def build_user_text(wh: Warehouse, sessions_per_part: int = SESSIONS_PER_PART) -> Refreshed:
    """Refresh ``features.user_text`` for the sessions whose record changed (``incremental.py``): their user
    messages read from the raw events a part at a time (``batches.session_batches``), redacted and written."""
    t = tables.USER_TEXT
    with refreshing(wh, t.qualified, SESSION_VERSIONS_SQL, code_version()) as refresh:
        refresh.delete(wh, t)
        sql = user_messages_sql(refresh.sessions)
        for batch in session_batches(wh, refresh.sessions, sessions_per_part):
            params = {"ids": batch.session_ids, "first_row": batch.first_row, "last_row": batch.last_row}
            wh.insert(t, redacted(wh.con.execute(sql, params).to_arrow_table()))
    return Refreshed(wh.count(t), refresh.touched)


def with_user_text_version(versions_sql: str) -> str:
    """``versions_sql`` (session_id, version) with the version each session's user text was computed from appended:
    the versions of a table computed from ``features.user_text`` (empty where it has not been computed yet)."""
    return f"""
SELECT v.session_id, v.version || '|' || coalesce(u.version, '') AS version
FROM ({versions_sql}) v
LEFT JOIN {tables.COMPUTED_VERSIONS.qualified} u
    ON u.table_name = '{tables.USER_TEXT.qualified}' AND u.session_id = v.session_id
"""


def load_user_messages(wh: Warehouse, session_ids: Sequence[str] | None = None) -> dict[str, list[str]]:
    """Session id -> its user messages with text, redacted, in stream order (one query); of the sessions
    ``session_ids`` only when given (every session's text is the largest thing the modeling step holds: ~2 KB a
    session). A session without a user message with text is absent. The given ids are joined first, so DuckDB
    builds its hash table on them and streams the messages past it."""
    t = tables.USER_TEXT.qualified
    if session_ids is None:
        source, params = t, {}
    else:
        source = f"(SELECT unnest($ids) AS session_id) w JOIN {t} USING (session_id)"
        params = {"ids": list(session_ids)}
    rows = wh.con.execute(
        f"SELECT session_id, list(text ORDER BY position) FROM {source} WHERE text IS NOT NULL GROUP BY session_id",
        params,
    ).fetchall()
    return {sid: list(messages) for sid, messages in rows}
