"""Staging: the raw rows of all drops resolved into one consistent view (SQL inside DuckDB, no Dagster).

Rules, each in one query below:

- **Duplicate sessions**: a session id delivered more than once counts once: the record from the latest drop
  (by the drop's modification time, then its id); within one drop, the later file, then the later record.
- **Replaced sessions** are made visible, not undone: ``staging.replaced_sessions`` has a row for each drop whose
  record of a session lost to another drop's record *with different content* (a digest of the record's session
  fields and its events' raw JSON), so a drop delivered again, or copied under another name, replaces nothing.
  Why not ``raw.quarantine``: nothing was malformed, both records were read and accepted (the drop's counts
  reconcile with them), and the replaced record is live again if the later drop goes; quarantine is for what PULSE
  could not accept, and ``pulse ingest --strict`` fails on it. The check ``no_session_replaced_by_another_drop``
  warns in the UI.
- **Work segments** come from the events of that winning record (segments are cut at ingest: ``segments.py``).
  They are refreshed for the sessions whose record changed (``incremental.py``); a session's version, what its
  per-session rows are computed from, is its winning record and that record's drop fingerprint
  (``SESSION_VERSIONS_SQL``).
- **Ratings** join a segment through ``event_id`` (the event's segment; an event after a segment closed, such
  as the state change that follows it, belongs to the segment before it), else through ``segment_index``,
  else they rate the session's last segment. A segment rated twice keeps its latest rating (by
  ``created_at``, then delivery order). Ratings that join nothing (unknown session, unknown event, no such
  segment) go to ``raw.quarantine`` with stage ``staging``; they come back if the session arrives later.
- **Ratings from trace tools' scores** (``ingest/scores.py``) carry their scale (``raw.ratings.scale``: stars, or a
  thumb from a BOOLEAN score; NULL, an older PULSE's row, is stars) and may name only an event: a score on a trace
  names the trace id, the event id of the user message that opens the trace's segment, and a trace inside a
  Langfuse session does not know that session. Such a rating joins the staged session that has the event (none:
  quarantined, and it comes back when its trace arrives in a later drop; more than one: quarantined, name the
  session).
- **Asks** (``raw.asks``: the widget shown with a known ``ask_probability``, answered or not) join their session
  by the same rules as ratings, and are quarantined for the same reasons (worded "ask names ..." when unanswered).
  An answered ask is a rating like any other. ``staging.session_asks`` has one row per asked session: its asks,
  how many were answered, and its first ask's probability (the policy decides once per session).
- **Thumbs** (``label_scales.py``): a feedback-dataset record's ``feedback`` (or ``polarity``), kept in
  ``staging.sessions.feedback``, is a rating on the scale ``thumbs``: ``positive`` 1, ``negative`` 0 (case and
  surrounding blanks ignored). It rates the session's last work segment, as a star rating that names no event or
  segment does: OpenHands shows the thumbs below the conversation's last agent turn, and the record is posted
  with the trajectory as it stood then, so what the user judged is the work they had just seen (it is also the
  closest a per-conversation rating comes to the per-segment unit the stars use). Its ``created_at`` is the
  record's ``timestamp`` (in UTC, as every timestamp: a zone-less one is UTC). A ``feedback`` that is no thumb,
  and a thumb on a session with no work segment, go to ``raw.quarantine`` (stage ``staging``, record type
  ``rating``) with the reason. Star ratings are on the scale
  ``stars_1_5``; ``staging.segment_ratings`` keeps one rating per segment *and scale*.
- **Labels**: a session's label is the mean of its segment ratings on one scale: with stars, ``label = (mean -
  1) / 4`` in [0, 1] (``label_stars`` the mean); with thumbs only, the thumb (``label_stars`` NULL). A session
  rated both ways is labelled by its stars and its thumb is left out of its label (it stays in
  ``staging.segment_ratings``): stars are asked per segment and are the finer measurement, and a label that
  averaged a thumb with stars would be on neither scale. ``scale`` says which one a label is on.
- **Assignments**: an assignments file row beats the session's own metadata from the same drop; otherwise the
  latest drop wins. Assignments for sessions PULSE has not seen are quarantined (stage ``staging``).
"""

from __future__ import annotations

from .. import tables
from ..label_scales import STARS, THUMBS, thumb_label_sql
from ..stars import stars_to_label_sql

SESSIONS_SQL = f"""
SELECT s.* FROM {tables.SESSIONS.qualified} s JOIN {tables.DROPS.qualified} d USING (drop_id)
QUALIFY row_number() OVER (
    PARTITION BY s.session_id ORDER BY d.mtime DESC, d.drop_id DESC, s.source_file DESC, s.record_index DESC) = 1
"""

REPLACED_SESSIONS_SQL = f"""
WITH shared AS (  -- session ids that more than one drop delivered
    SELECT session_id FROM {tables.SESSIONS.qualified} JOIN {tables.DROPS.qualified} USING (drop_id)
    GROUP BY session_id HAVING count(DISTINCT drop_id) > 1
), records AS (  -- each drop's record of such a session: its last in the drop, as staged sessions are ordered
    SELECT s.* FROM {tables.SESSIONS.qualified} s JOIN {tables.DROPS.qualified} USING (drop_id)
    SEMI JOIN shared USING (session_id)
    QUALIFY row_number() OVER (
        PARTITION BY s.session_id, s.drop_id ORDER BY s.source_file DESC, s.record_index DESC) = 1
), events AS (
    SELECT record_key, md5(string_agg(coalesce(raw_json, ''), chr(30) ORDER BY seq)) AS digest
    FROM {tables.EVENTS.qualified} SEMI JOIN records USING (record_key) GROUP BY record_key
), content AS (
    SELECT r.*, md5(concat_ws(chr(31), r.user_id, r.experiment, r.variant, r.feedback, r.n_events, r.metadata_json,
                              e.digest)) AS digest
    FROM records r LEFT JOIN events e USING (record_key)
)
SELECT old.session_id, old.drop_id, old.source_file, old.record_index, old.user_id, old.n_events,
       new.drop_id, new.source_file, new.record_index, new.user_id, new.n_events
FROM content old JOIN {tables.STAGING_SESSIONS.qualified} kept USING (session_id)
JOIN content new ON new.record_key = kept.record_key
WHERE old.drop_id <> new.drop_id AND old.digest <> new.digest
ORDER BY old.session_id, old.drop_id
"""
"""A row per (session, drop whose record of it lost to another drop's, with other content): see the module
docstring. Reads ``staging.sessions`` for the winner, so the rule that picks it is written once."""

REPLACEMENTS_SQL = f"""
SELECT replaced_by_drop_id, drop_id, count(*) FROM {tables.REPLACED_SESSIONS.qualified}
GROUP BY ALL ORDER BY 3 DESC, 1, 2
"""
"""How many sessions each drop replaced of each other drop's (replacing drop, replaced drop, sessions)."""

SESSION_VERSIONS_SQL = f"""
SELECT s.session_id, s.record_key || '@' || d.fingerprint AS version
FROM {tables.STAGING_SESSIONS.qualified} s JOIN {tables.DROPS.qualified} d USING (drop_id)
"""
"""Each staged session's version: its winning record, and its drop's fingerprint (a drop rewritten under the same
name keeps its record keys but may change what they hold)."""


def work_segments_sql(sessions: str) -> str:
    """The work segments of the sessions whose ``staging.sessions`` rows are in relation ``sessions``."""
    return f"""
SELECT e.session_id, e.segment_index,
       arg_min(e.event_id, e.seq) AS open_event_id,
       arg_max(e.event_id, e.seq) AS close_event_id,
       coalesce(
         arg_max(e.event_id, e.seq) FILTER (WHERE e.kind = 'action' AND e.source <> 'user'
                                             AND e.name IN ('message', 'finish')),
         arg_max(e.event_id, e.seq) FILTER (WHERE e.name = 'error'),
         arg_max(e.event_id, e.seq)) AS rated_event_id,
       min(e.timestamp), max(e.timestamp), count(*)::INTEGER,
       (count(*) FILTER (WHERE e.kind = 'action' AND e.name = 'message' AND e.source = 'user'))::INTEGER,
       max(e.segment_close) AS close_reason,
       coalesce(max(e.segment_close), 'stream_end') <> 'stream_end' AS closed
FROM {tables.EVENTS.qualified} e JOIN {sessions} s USING (record_key)
WHERE e.segment_index IS NOT NULL
GROUP BY e.session_id, e.segment_index
ORDER BY e.session_id, e.segment_index
"""


RATINGS_AND_ASKS = (
    f"SELECT *, NULL::DOUBLE AS ask_probability FROM {tables.RATINGS.qualified}"
    f" UNION ALL BY NAME SELECT * FROM {tables.ASKS.qualified}"
)


def resolved_sql(source: str = RATINGS_AND_ASKS) -> str:
    """Each rating or ask of query ``source`` (rows of ``raw.ratings``/``raw.asks``) with the segment it joins
    (``seg``) or the ``problem`` that it joins none. A row's resolution reads only its own record's events, so
    resolving a subset gives those rows as resolving everything would."""
    return f"""
WITH src AS (
    {source}
), named AS (  -- an event a rating names without its session (a trace tool's score): the staged sessions holding it
    SELECT e.event_id, min(e.session_id) AS session_id, count(DISTINCT e.session_id) AS n_named
    FROM {tables.EVENTS.qualified} e JOIN {tables.STAGING_SESSIONS.qualified} s USING (record_key)
    WHERE e.event_id IN (SELECT event_id FROM src WHERE session_id IS NULL AND event_id IS NOT NULL)
    GROUP BY e.event_id
), found AS (
    SELECT src.* REPLACE (coalesce(src.session_id, CASE WHEN named.n_named = 1 THEN named.session_id END)
                          AS session_id),
           CASE WHEN src.session_id IS NULL THEN coalesce(named.n_named, 0) END AS n_named
    FROM src LEFT JOIN named ON src.session_id IS NULL AND named.event_id = src.event_id
), r AS (
    SELECT r.*, s.record_key, s.n_segments, CASE WHEN r.rating IS NULL THEN 'ask' ELSE 'rating' END AS kind
    FROM found r
    LEFT JOIN {tables.STAGING_SESSIONS.qualified} s ON s.session_id = r.session_id
), segment_so_far AS (  -- each event of a record some rating names an event of: the last segment begun by it
    SELECT e.record_key, e.event_id, e.seq, max(e.segment_index) OVER (PARTITION BY e.record_key ORDER BY e.seq) AS seg
    FROM {tables.EVENTS.qualified} e SEMI JOIN (SELECT record_key FROM r WHERE event_id IS NOT NULL) USING (record_key)
), ev AS (
    SELECT r.drop_id, r.source_file, r.record_index, r.item_index, e.seq, e.seg
    FROM r JOIN segment_so_far e ON e.record_key = r.record_key AND e.event_id = r.event_id
)
SELECT r.* EXCLUDE (n_named), d.mtime AS drop_mtime,
    CASE WHEN r.event_id IS NOT NULL THEN ev.seg
         WHEN r.segment_index IS NOT NULL THEN r.segment_index
         ELSE r.n_segments - 1 END AS seg,
    CASE WHEN r.n_named = 0 THEN r.kind || ' names event ' || r.event_id || ' and no session, and no session has'
                                     || ' that event (its trace may come in a later drop)'
         WHEN r.n_named > 1 THEN r.kind || ' names event ' || r.event_id || ' and no session, and ' || r.n_named
                                 || ' sessions have that event: name the session'
         WHEN r.record_key IS NULL THEN r.kind || ' names session ' || r.session_id || ', which no drop contains'
         WHEN r.event_id IS NOT NULL AND ev.seq IS NULL
              THEN r.kind || ' names event ' || r.event_id || ', which session ' || r.session_id || ' does not have'
         WHEN r.event_id IS NOT NULL AND ev.seg IS NULL
              THEN r.kind || ' names event ' || r.event_id || ', which precedes the first work segment'
         WHEN r.event_id IS NULL AND r.segment_index IS NOT NULL AND r.segment_index >= r.n_segments
              THEN r.kind || ' names segment ' || r.segment_index || ' but session ' || r.session_id
                   || ' has ' || r.n_segments || ' segments'
         WHEN r.event_id IS NULL AND r.segment_index IS NULL AND r.n_segments = 0
              THEN 'session ' || r.session_id || ' has no work segment to rate'
    END AS problem
FROM r JOIN {tables.DROPS.qualified} d USING (drop_id)
LEFT JOIN ev USING (drop_id, source_file, record_index, item_index)
"""


RESOLVED_RATINGS = "_pulse_resolved_ratings"
"""Temporary table of one ``build_segment_ratings``: ``resolved_sql()`` made once for its two queries (each
resolve reads the events of every record a rating names an event of)."""

THUMBS_SQL = f"""
SELECT session_id, n_segments, drop_id, source_file, record_index, feedback,
       {thumb_label_sql("feedback")} AS thumb,
       TRY_CAST(TRY_CAST(json_extract_string(metadata_json, '$.timestamp') AS TIMESTAMPTZ) AT TIME ZONE 'UTC'
                AS TIMESTAMP) AS created_at,
       CASE WHEN {thumb_label_sql("feedback")} IS NULL
                 THEN 'feedback ' || to_json(feedback) || ' of session ' || session_id
                      || ' is not a thumb: expected positive or negative'
            WHEN n_segments = 0 THEN 'session ' || session_id || ' has no work segment for its thumb to rate'
       END AS problem
FROM {tables.STAGING_SESSIONS.qualified} WHERE feedback IS NOT NULL
"""
"""Each staged session's thumb (``feedback``): its label, or the ``problem`` that keeps it from being one."""

SEGMENT_RATINGS_SQL = f"""
(SELECT session_id, seg, rating, reason, created_at, rating_id,
        CASE WHEN event_id IS NOT NULL THEN 'event_id' WHEN segment_index IS NOT NULL THEN 'segment_index'
             ELSE 'last_segment' END,
        drop_id, source_file, record_index, coalesce(scale, '{STARS}')
 FROM {RESOLVED_RATINGS} WHERE problem IS NULL AND rating IS NOT NULL
 QUALIFY row_number() OVER (PARTITION BY session_id, seg, coalesce(scale, '{STARS}')
     ORDER BY created_at DESC NULLS LAST, drop_mtime DESC, drop_id DESC, source_file DESC, record_index DESC,
              item_index DESC) = 1)
UNION ALL
(SELECT session_id, n_segments - 1, thumb, NULL, created_at, NULL, 'last_segment', drop_id, source_file,
        record_index, '{THUMBS}'
 FROM ({THUMBS_SQL}) WHERE problem IS NULL)
ORDER BY 1, 2, 11
"""
"""One rating per rated segment and scale (the latest: stars, or a thumb a trace tool's BOOLEAN score gave; a NULL
scale, an older PULSE's row, is stars), and each session's ``feedback`` thumb on its last segment."""

RATING_QUARANTINE_SQL = f"""
SELECT drop_id, 'staging', source_file, record_index, item_index, 'rating', problem,
       CASE WHEN ask_probability IS NULL
            THEN to_json({{'rating_id': rating_id, 'session_id': session_id, 'event_id': event_id,
                          'segment_index': segment_index, 'rating': rating, 'reason': reason,
                          'created_at': created_at}})
            ELSE to_json({{'rating_id': rating_id, 'session_id': session_id, 'event_id': event_id,
                          'segment_index': segment_index, 'rating': rating, 'reason': reason,
                          'created_at': created_at, 'ask_probability': ask_probability}}) END::VARCHAR
FROM {RESOLVED_RATINGS} WHERE problem IS NOT NULL
UNION ALL
SELECT drop_id, 'staging', source_file, record_index, NULL, 'rating', problem,
       to_json({{'session_id': session_id, 'feedback': feedback}})::VARCHAR
FROM ({THUMBS_SQL}) WHERE problem IS NOT NULL
"""

ASKS_ONLY = f"SELECT * FROM {tables.ASKS.qualified}"
"""The asks alone, for ``SESSION_ASKS_SQL``."""

SESSION_ASKS_SQL = f"""
SELECT session_id, count(*)::INTEGER, count(rating)::INTEGER,
       first(ask_probability ORDER BY created_at NULLS LAST, drop_mtime, drop_id, source_file, record_index,
             item_index),
       count(DISTINCT ask_probability)::INTEGER, min(created_at)
FROM ({resolved_sql(ASKS_ONLY)}) WHERE problem IS NULL AND ask_probability IS NOT NULL
GROUP BY session_id ORDER BY session_id
"""

SESSION_LABELS_SQL = f"""
SELECT session_id, count(*)::INTEGER,
       CASE WHEN scale = '{STARS}' THEN avg(rating) END,
       CASE WHEN scale = '{STARS}' THEN {stars_to_label_sql("avg(rating)")} ELSE avg(rating) END,
       scale
FROM {tables.SEGMENT_RATINGS.qualified} GROUP BY session_id, scale
QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY scale = '{STARS}' DESC) = 1
ORDER BY session_id
"""
"""One label per rated session, on one scale: its stars when it has any, else its thumb (module docstring)."""

_CANDIDATE_ASSIGNMENTS = f"""
WITH candidates AS (
    SELECT a.session_id, a.experiment, a.variant, a.user_id, 'assignments_file' AS assigned_by,
           a.drop_id, a.source_file, a.record_index, 1 AS precedence, to_json(a)::VARCHAR AS raw_text
    FROM {tables.ASSIGNMENTS.qualified} a
    UNION ALL
    SELECT s.session_id, s.experiment, s.variant, s.user_id, 'session_metadata', s.drop_id, s.source_file,
           s.record_index, 0, NULL
    FROM {tables.STAGING_SESSIONS.qualified} s WHERE s.experiment IS NOT NULL AND s.variant IS NOT NULL
)
SELECT c.*, d.mtime AS drop_mtime, s.session_id IS NOT NULL AS known, s.user_id AS session_user
FROM candidates c JOIN {tables.DROPS.qualified} d USING (drop_id)
LEFT JOIN {tables.STAGING_SESSIONS.qualified} s USING (session_id)
"""

ASSIGNMENTS_SQL = f"""
SELECT session_id, experiment, variant, coalesce(user_id, session_user), assigned_by
FROM ({_CANDIDATE_ASSIGNMENTS}) WHERE known
QUALIFY row_number() OVER (PARTITION BY session_id
    ORDER BY drop_mtime DESC, drop_id DESC, precedence DESC, source_file DESC, record_index DESC) = 1
ORDER BY session_id
"""

ASSIGNMENT_QUARANTINE_SQL = f"""
SELECT drop_id, 'staging', source_file, record_index, NULL, 'assignment',
       'assignment for session ' || session_id || ', which no drop contains', raw_text
FROM ({_CANDIDATE_ASSIGNMENTS}) WHERE NOT known
"""
