"""Session transcripts for annotators, read from the warehouse in batches: one query per batch, each reading only
the stretch of ``raw.events`` where its sessions' events lie (``batches.py``). The agent's steps and messages come
from the events; the user's messages from ``features.user_text`` (redacted, ``user_text.py``), refreshed before."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from .. import tables
from ..warehouse import Warehouse
from .annotation import AgentStep, SessionTranscript
from .batches import session_batches

# Agent actions an annotator sees as steps; messages are listed apart, bookkeeping actions are left out.
STEP_NAMES = (
    "run",
    "run_ipython",
    "edit",
    "write",
    "read",
    "browse",
    "browse_interactive",
    "call_tool_mcp",
    "delegate",
    "finish",
    "think",
    "task_tracking",
    "push",
    "send_pr",
    "other",
)

TRANSCRIPTS_SQL = f"""
WITH chosen AS (
    SELECT record_key, session_id FROM {tables.STAGING_SESSIONS.qualified} WHERE session_id IN (SELECT unnest($ids))
), ev AS (
    -- only what a transcript needs: an action's text, the code an edit wrote, the next event's kind, exit code and
    -- name (the written code is taken out of the raw JSON before the window, which then sorts narrow rows)
    SELECT session_id, seq, kind, name, source, text, written,
           lead(kind) OVER w AS next_kind, lead(exit_code) OVER w AS next_exit, lead(name) OVER w AS next_name
    FROM (
        SELECT c.session_id, e.record_key, e.seq, e.kind, e.name, e.source, e.exit_code,
               CASE WHEN e.kind = 'action' THEN e.text END AS text,
               CASE WHEN e.kind = 'action' AND e.name IN ('edit', 'write') THEN coalesce(
                   nullif(json_extract_string(e.raw_json, '$.args.content'), ''),
                   nullif(json_extract_string(e.raw_json, '$.args.new_str'), ''),
                   nullif(json_extract_string(e.raw_json, '$.args.file_text'), ''),
                   nullif(json_extract_string(e.raw_json, '$.action.file_text'), ''),
                   nullif(json_extract_string(e.raw_json, '$.action.new_str'), '')) END AS written
        FROM {tables.EVENTS.qualified} e JOIN chosen c USING (record_key)
        WHERE e.rowid BETWEEN $first_row AND $last_row
    )
    WINDOW w AS (PARTITION BY record_key ORDER BY seq)
), steps AS (
    SELECT session_id, list({{
        'name': name, 'text': text,
        'exit_code': CASE WHEN next_kind = 'observation' THEN next_exit END,
        'written': written,
        'error': next_kind = 'observation' AND next_name = 'error'
    }} ORDER BY seq) AS steps
    FROM ev WHERE kind = 'action' AND source <> 'user' AND name IN {STEP_NAMES}
    GROUP BY session_id
), messages AS (
    SELECT session_id, list(text ORDER BY seq) FILTER (WHERE text IS NOT NULL) AS agent_messages
    FROM ev WHERE kind = 'action' AND name = 'message' AND source <> 'user'
    GROUP BY session_id
), said AS (
    -- the user's messages, redacted, from the one place they are read (user_text.py)
    SELECT session_id, list(text ORDER BY position) FILTER (WHERE text IS NOT NULL) AS user_messages
    FROM {tables.USER_TEXT.qualified} WHERE session_id IN (SELECT unnest($ids))
    GROUP BY session_id
)
SELECT c.session_id, u.user_messages, m.agent_messages, st.steps
FROM chosen c LEFT JOIN said u USING (session_id) LEFT JOIN messages m USING (session_id)
LEFT JOIN steps st USING (session_id)
ORDER BY c.session_id
"""


def transcript_tables(
    wh: Warehouse, batch_size: int = 2000, session_ids: list[str] | None = None
) -> Iterator[pa.Table]:
    """The rows of ``TRANSCRIPTS_SQL`` for every staged session (or the given ones), ``batch_size`` sessions at a
    time: batches in the order their events are stored (``batches.session_batches``), each ordered by session id.

    One query per batch keeps DuckDB's memory to a batch's events, and its row-id range keeps the scan to them,
    whatever the size of the warehouse. Plain Arrow, so a batch can go to a worker process (``workers.py``)."""
    if session_ids is None:
        listed = f"SELECT session_id FROM {tables.STAGING_SESSIONS.qualified} ORDER BY 1"
        session_ids = [r[0] for r in wh.con.execute(listed).fetchall()]
    chosen = (
        f"(SELECT record_key, session_id FROM {tables.STAGING_SESSIONS.qualified}"
        " WHERE session_id IN (SELECT unnest($ids)))"
    )
    for batch in session_batches(wh, chosen, batch_size, params={"ids": session_ids}):
        params = {"ids": batch.session_ids, "first_row": batch.first_row, "last_row": batch.last_row}
        yield wh.con.execute(TRANSCRIPTS_SQL, params).to_arrow_table()


def transcripts_of(rows: pa.Table) -> list[SessionTranscript]:
    """The transcripts of one batch of ``transcript_tables``, in its order."""
    return [
        SessionTranscript(
            row["session_id"],
            tuple(row["user_messages"] or ()),
            tuple(
                AgentStep(s["name"], s["text"], s["exit_code"], s["written"], bool(s["error"]))
                for s in row["steps"] or ()
            ),
            tuple(row["agent_messages"] or ()),
        )
        for row in rows.to_pylist()
    ]


def iter_transcripts(
    wh: Warehouse, batch_size: int = 2000, session_ids: list[str] | None = None
) -> Iterator[list[SessionTranscript]]:
    """Transcripts of every staged session (or the given ones), ``batch_size`` at a time, as ``transcript_tables``
    reads them."""
    for rows in transcript_tables(wh, batch_size, session_ids):
        yield transcripts_of(rows)
