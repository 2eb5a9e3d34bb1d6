"""Session transcripts for annotators, read from the warehouse in batches (one query, streamed)."""

from __future__ import annotations

from collections.abc import Iterator

from ..warehouse import Warehouse
from .annotation import AgentStep, SessionTranscript

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
WITH ev AS (
    SELECT e.session_id, e.seq, e.kind, e.name, e.source, e.text, e.raw_json,
           lead(e.kind) OVER w AS next_kind, lead(e.exit_code) OVER w AS next_exit, lead(e.name) OVER w AS next_name
    FROM raw.events e JOIN staging.sessions s USING (record_key)
    WINDOW w AS (PARTITION BY e.record_key ORDER BY e.seq)
), steps AS (
    SELECT session_id, list({{
        'name': name, 'text': text,
        'exit_code': CASE WHEN next_kind = 'observation' THEN next_exit END,
        'written': CASE WHEN name IN ('edit', 'write') THEN coalesce(
            nullif(json_extract_string(raw_json, '$.args.content'), ''),
            nullif(json_extract_string(raw_json, '$.args.new_str'), ''),
            nullif(json_extract_string(raw_json, '$.args.file_text'), ''),
            nullif(json_extract_string(raw_json, '$.action.file_text'), ''),
            nullif(json_extract_string(raw_json, '$.action.new_str'), '')) END,
        'error': next_kind = 'observation' AND next_name = 'error'
    }} ORDER BY seq) AS steps
    FROM ev WHERE kind = 'action' AND source <> 'user' AND name IN {STEP_NAMES}
    GROUP BY session_id
), messages AS (
    SELECT session_id,
           list(text ORDER BY seq) FILTER (WHERE source = 'user' AND text IS NOT NULL) AS user_messages,
           list(text ORDER BY seq) FILTER (WHERE source <> 'user' AND text IS NOT NULL) AS agent_messages
    FROM ev WHERE kind = 'action' AND name = 'message'
    GROUP BY session_id
)
SELECT s.session_id, m.user_messages, m.agent_messages, st.steps
FROM staging.sessions s LEFT JOIN messages m USING (session_id) LEFT JOIN steps st USING (session_id)
{{where}}
ORDER BY s.session_id
"""


def iter_transcripts(
    wh: Warehouse, batch_size: int = 2000, session_ids: list[str] | None = None
) -> Iterator[list[SessionTranscript]]:
    """Transcripts of every staged session (or the given ones), ``batch_size`` at a time, ordered by session id."""
    where, params = "", []
    if session_ids is not None:
        where, params = "WHERE s.session_id IN (SELECT unnest(?))", [session_ids]
    reader = wh.con.execute(TRANSCRIPTS_SQL.replace("{where}", where), params).to_arrow_reader(batch_size)
    for record_batch in reader:
        batch = []
        for row in record_batch.to_pylist():
            steps = tuple(
                AgentStep(s["name"], s["text"], s["exit_code"], s["written"], bool(s["error"]))
                for s in row["steps"] or ()
            )
            batch.append(
                SessionTranscript(
                    row["session_id"], tuple(row["user_messages"] or ()), steps, tuple(row["agent_messages"] or ())
                )
            )
        yield batch
