"""``features.event_features``: one row per staged session, counted off its event stream.

Why: these are the behavioural signals (the paper's six, plus what a user would feel: failures, errors, cost,
duration) that the happiness model reads next to the annotations. Everything is counted inside DuckDB except
the parsing of shell commands and Python cells (``shell.py``), which runs once per *distinct* command string and is
joined back as a small lookup table: a paper-scale corpus has millions of command events but few distinct ones.

Rules (events are those of the session's winning record in ``staging.sessions``):

- ``user_message_count``: ``message`` actions with source ``user``; ``n_segments``: from ``staging.sessions``.
- Git: the command of every ``run`` action (``command``, else ``text``) and the shell lines of every
  ``run_ipython`` action's code (``text``, else ``args.code`` / ``action.code`` / ``code`` of the raw event) are
  parsed by ``shell.git_subcommands`` / ``shell.python_shell_commands``. ``git_<op>_count`` is how many times the
  session runs ``git <op>`` (every occurrence in every command); ``git_<op>`` is 1 when that count is > 0.
- ``shell_commands``: ``run`` actions. ``failed_commands``: ``run`` observations whose ``exit_code`` is set and
  non-zero (an observation without an exit code is not a failure).
- ``test_runs``: ``run`` actions whose command ``shell.is_test_command`` accepts. ``test_failures``: those whose
  observation has a non-zero exit code; an action's observation is the ``run`` observation whose ``cause`` is the
  action's ``event_id``, else the session's next ``run`` observation after it.
- ``file_edits``: ``edit`` and ``write`` actions. ``error_observations``: ``error`` observations.
  ``condensations``: ``condensation`` actions and observations.
- ``last_segment_finished``: 1 when the session's last work segment (``staging.work_segments``) contains a
  ``finish`` action, else 0 (also 0 with no segment).
- ``duration_seconds``: last minus first event timestamp; NULL without timestamps.
- LLM usage (cumulative in both formats, so never summed over events). V0: the maximum over the session's events
  of ``llm_metrics.accumulated_cost``, ``.accumulated_token_usage.prompt_tokens`` and ``.completion_tokens``.
  V1: the last ``ConversationStateUpdateEvent`` carrying stats (key ``stats``: ``value.usage_to_metrics``; key
  ``full_state``: ``value.stats.usage_to_metrics``), summed over its ``usage_to_metrics`` entries (agent,
  condenser, ...). V1 wins when a stream has both. When the stream gives a column no value, the session's metadata
  does: ``llm_usage.cost_usd`` / ``.prompt_tokens`` / ``.completion_tokens`` in ``raw.sessions.metadata_json``
  (top level, else under the record's ``metadata`` object), which adapters of formats that keep usage outside
  their events write (an SDK conversation's ``base_state.json`` stats, Claude Code, Codex; see
  ``ingest/events.llm_usage``). NULL when none of them has it.
- ``user_stops``: events of the user stopping or pausing the agent (:data:`USER_STOP`): the user taking the
  wheel back, a guardrail metric (``docs/guardrails.md``). ``llm_total_tokens``: prompt plus completion tokens,
  NULL unless both are known (a sum with one part missing would read as a cheap session).
- Critic scores: OpenHands V1 attaches ``critic_result = {score, message, metadata}`` to ActionEvents and
  MessageEvents, ``score`` being a critic model's predicted probability that the agent succeeded, in [0, 1]. The
  whole result stays in ``raw.events.raw_json``; here, over the session's actions (both kinds are actions in the
  canonical model) whose ``critic_result.score`` is a number in [0, 1] (anything else is not a score and is not
  counted): ``critic_score_last`` (the latest in the stream), ``critic_score_mean``, ``critic_score_min`` (NULL
  when the session has no score) and ``critic_scored_events`` (their count, 0 when none).

  **They are ready-made predictions of success** that the model stage may use: ``features.session_features``
  carries every column of this table, so the satisfaction models see them as features like any other (a session
  whose last critic score is low is one the agent's own critic expected to fail). Where a session has no score,
  the model pipelines impute 0 (``modeling/families.py``), and 0 is *not* neutral for a score: it claims the critic
  was sure the session failed. That is acceptable only because ``critic_scored_events`` is 0 exactly there, so a
  tree model (the usual choice) tells unscored sessions from low-scored ones in one split; the linear
  ``ordinal_logit`` cannot fully, and on a corpus that mixes scored and unscored sessions (a critic switched on
  for one arm only) its critic coefficients mix "low score" with "no critic". Without any score in the corpus the
  columns are constant and change no model.
- Sentiment (``sentiment.py``, whose docstring gives every rule): the VADER compound score of each English user
  message (the messages ``user_message_count`` counts, read redacted from ``features.user_text``), summarised
  per session as ``user_sentiment_mean`` / ``_min`` / ``_max`` / ``_first`` / ``_last`` / ``_slope`` and
  ``user_negative_share`` (NULL when no user message is English), ``user_english_share``,
  ``last_user_message_chars``, and whether the session ends on thanks, on a complaint or on the agent's turn
  (``ends_on_thanks`` / ``ends_on_complaint`` / ``ends_on_agent_turn``, 0/1).
  Scored in Python once per session and joined back as a small table, like the parsed commands.
"""

from __future__ import annotations

import sys
from collections import Counter
from importlib import metadata

import pyarrow as pa

from .. import tables
from ..incremental import Refreshed, code_digest, refreshing
from ..staging import SESSION_VERSIONS_SQL
from ..warehouse import Warehouse
from . import sentiment, shell
from .sentiment import COLUMNS as SENTIMENT_COLUMNS
from .sentiment import SESSIONS_PER_PART, sentiment_table
from .shell import GIT_OPERATIONS, git_subcommands, is_test_command, python_shell_commands
from .user_text import with_user_text_version
from .workers import TASK_SESSIONS, worker_count

LOOKUP = "_pulse_event_feature_commands"
SENTIMENT = "_pulse_event_feature_sentiment"
CHANGED_EVENTS = "_pulse_changed_events"  # temporary: the events of the sessions a refresh recomputes

_CODE = (
    "coalesce(e.text, json_extract_string(e.raw_json, '$.args.code'),"
    " json_extract_string(e.raw_json, '$.action.code'), json_extract_string(e.raw_json, '$.code'))"
)
BODY_SQL = f"CASE WHEN e.name = 'run' THEN coalesce(e.command, e.text) ELSE {_CODE} END"
"""The text parsed for a ``run`` / ``run_ipython`` action (``e`` is a ``raw.events`` row)."""


def distinct_bodies_sql(sessions: str, events: str | None = None) -> str:
    """Every command / cell to parse, of the sessions whose ``staging.sessions`` rows are in relation ``sessions``
    (their events in ``events``: ``raw.events`` by default, or a subset)."""
    events = events or tables.EVENTS.qualified
    return f"""
SELECT DISTINCT e.name = 'run_ipython' AS is_code, {BODY_SQL} AS body
FROM {events} e JOIN {sessions} s USING (record_key)
WHERE e.kind = 'action' AND e.name IN ('run', 'run_ipython') AND body IS NOT NULL
"""


_SUM_OPS = ",\n    ".join(f"sum(c.{op}_n)::INTEGER AS {op}_n" for op in GIT_OPERATIONS)
_OP_COLUMNS = ",\n    ".join(f"coalesce(g.{op}_n, 0), (coalesce(g.{op}_n, 0) > 0)::INTEGER" for op in GIT_OPERATIONS)
_SENTIMENT_COLUMNS = ",\n    ".join(
    f"coalesce(snt.{c}, 0)" if c.startswith("ends_on_") else f"snt.{c}" for c in SENTIMENT_COLUMNS
)
_METRIC = "json_extract_string(e.raw_json, '$.value.{prefix}usage_to_metrics.*.{path}')"


_PROMPT_TOKENS = (
    "coalesce(CASE WHEN v1.session_id IS NOT NULL THEN v1.prompt_tokens ELSE v0.prompt_tokens END, usage.prompt_tokens)"
)
_COMPLETION_TOKENS = (
    "coalesce(CASE WHEN v1.session_id IS NOT NULL THEN v1.completion_tokens ELSE v0.completion_tokens END,"
    " usage.completion_tokens)"
)
USER_STOP = (
    "source = 'user' AND ((kind = 'action' AND name IN ('stop', 'pause'))"
    " OR (name = 'change_agent_state' AND agent_state IN ('paused', 'stopped')))"
)
"""An event of the user stopping or pausing the agent (``e``: a ``raw.events`` row): Claude Code's "[Request
interrupted by user" (a ``stop`` action), OpenHands V1's ``PauseEvent`` (a ``pause`` action) and V0's
``change_agent_state`` to paused or stopped, each from the user."""


def _v1_sum(path: str, cast: str) -> str:
    """Sum of one field over the usage_to_metrics entries of a V1 stats (or full_state) event."""
    stats = _METRIC.format(prefix="", path=path)
    full = _METRIC.format(prefix="stats.", path=path)
    return (
        f"list_sum(list_transform(CASE WHEN e.name = 'stats' THEN {stats} ELSE {full} END, x -> TRY_CAST(x AS {cast})))"
    )


def event_features_sql(sessions: str, events: str | None = None) -> str:
    """The rows of the sessions whose ``staging.sessions`` rows are in relation ``sessions`` (their events in
    ``events``: ``raw.events`` or a subset), given the lookup
    ``{LOOKUP}(is_code, body, <op>_n..., is_test)`` of their parsed commands and their ``{SENTIMENT}``
    (``sentiment.SCHEMA``)."""
    events = events or tables.EVENTS.qualified
    return f"""
WITH ev AS NOT MATERIALIZED (
    SELECT s.session_id, e.*
    FROM {events} e JOIN {sessions} s USING (record_key)
), counts AS (
    SELECT session_id,
        count(*) FILTER (WHERE kind = 'action' AND name = 'message' AND source = 'user') AS user_message_count,
        count(*) FILTER (WHERE kind = 'action' AND name = 'run') AS shell_commands,
        count(*) FILTER (WHERE kind = 'observation' AND name = 'run' AND exit_code <> 0) AS failed_commands,
        count(*) FILTER (WHERE kind = 'action' AND name IN ('edit', 'write')) AS file_edits,
        count(*) FILTER (WHERE kind = 'observation' AND name = 'error') AS error_observations,
        count(*) FILTER (WHERE kind IN ('action', 'observation') AND name = 'condensation') AS condensations,
        max(segment_index) FILTER (WHERE kind = 'action' AND name = 'finish') AS last_finish_segment,
        date_diff('microsecond', min(timestamp), max(timestamp)) / 1e6 AS duration_seconds,
        count(*) FILTER (WHERE {USER_STOP}) AS user_stops
    FROM ev GROUP BY session_id
), commands AS (
    SELECT e.session_id, e.record_key, e.seq, e.event_id, e.name, c.*
    FROM ev e JOIN {LOOKUP} c ON c.is_code = (e.name = 'run_ipython') AND c.body = {BODY_SQL}
    WHERE e.kind = 'action' AND e.name IN ('run', 'run_ipython')
), git AS (
    SELECT session_id,
    {_SUM_OPS}
    FROM commands c GROUP BY session_id
), run_rows AS (
    SELECT record_key, seq, event_id, true AS is_action, NULL::INTEGER AS exit_code
    FROM commands WHERE name = 'run' AND is_test
    UNION ALL
    SELECT record_key, seq, event_id, false, exit_code
    FROM ev WHERE kind = 'observation' AND name = 'run'
), paired AS (
    SELECT record_key, event_id, is_action,
        min(CASE WHEN NOT is_action THEN {{'seq': seq, 'exit_code': exit_code}} END)
            OVER (PARTITION BY record_key ORDER BY seq DESC) AS next_observation
    FROM run_rows
), by_cause AS (
    SELECT record_key, cause, min({{'seq': seq, 'exit_code': exit_code}}) AS observation
    FROM ev WHERE kind = 'observation' AND name = 'run' AND cause IS NOT NULL
    GROUP BY record_key, cause
), tests AS (
    SELECT s.session_id, count(*) AS test_runs,
        count(*) FILTER (WHERE coalesce(b.observation, p.next_observation).exit_code <> 0) AS test_failures
    FROM paired p JOIN {sessions} s USING (record_key)
    LEFT JOIN by_cause b ON b.record_key = p.record_key AND b.cause = p.event_id
    WHERE p.is_action
    GROUP BY s.session_id
), last_segment AS (
    SELECT session_id, max(segment_index) AS last_segment FROM {tables.WORK_SEGMENTS.qualified}
    WHERE session_id IN (SELECT session_id FROM {sessions}) GROUP BY session_id
), raw_json_values AS MATERIALIZED (
    -- the events v0, v1 and critic read their values from, in one pass over raw_json (the widest column: each
    -- pass cost as much as the rest of the query). is_v0 / is_v1 / is_critic: which of the three reads the row
    SELECT session_id, seq,
        contains(raw_json, '"llm_metrics"') AS is_v0,
        kind = 'state' AND (name = 'stats' OR (name = 'full_state' AND contains(raw_json, 'usage_to_metrics')))
            AS is_v1,
        kind = 'action' AND contains(raw_json, '"critic_result":{{') AS is_critic,
        CASE WHEN is_v0 THEN json_extract_string(raw_json, [
            '$.llm_metrics.accumulated_cost',
            '$.llm_metrics.accumulated_token_usage.prompt_tokens',
            '$.llm_metrics.accumulated_token_usage.completion_tokens']) END AS m,
        CASE WHEN is_v1 THEN {{
            'cost': {_v1_sum("accumulated_cost", "DOUBLE")},
            'prompt_tokens': {_v1_sum("accumulated_token_usage.prompt_tokens", "BIGINT")},
            'completion_tokens': {_v1_sum("accumulated_token_usage.completion_tokens", "BIGINT")}}} END AS v1_usage,
        CASE WHEN is_critic THEN TRY_CAST(json_extract_string(raw_json, '$.critic_result.score') AS DOUBLE)
            END AS score
    FROM ev e
    WHERE contains(raw_json, '"llm_metrics"') OR (kind = 'state' AND name IN ('stats', 'full_state'))
        OR (kind = 'action' AND contains(raw_json, '"critic_result":{{'))
), v0 AS (
    SELECT session_id, max(TRY_CAST(m[1] AS DOUBLE)) AS cost, max(TRY_CAST(m[2] AS BIGINT)) AS prompt_tokens,
        max(TRY_CAST(m[3] AS BIGINT)) AS completion_tokens
    FROM raw_json_values WHERE is_v0
    GROUP BY session_id
), v1 AS (
    SELECT session_id,
        arg_max(v1_usage.cost, seq) AS cost,
        arg_max(v1_usage.prompt_tokens, seq) AS prompt_tokens,
        arg_max(v1_usage.completion_tokens, seq) AS completion_tokens
    FROM raw_json_values WHERE is_v1
    GROUP BY session_id
), usage AS (
    SELECT session_id, TRY_CAST(u[1] AS DOUBLE) AS cost, TRY_CAST(u[2] AS BIGINT) AS prompt_tokens,
        TRY_CAST(u[3] AS BIGINT) AS completion_tokens
    FROM (
        SELECT s.session_id, list_transform(['cost_usd', 'prompt_tokens', 'completion_tokens'], k -> coalesce(
            json_extract_string(s.metadata_json, '$.llm_usage.' || k),
            json_extract_string(s.metadata_json, '$.metadata.llm_usage.' || k))) AS u
        FROM {sessions} s WHERE contains(s.metadata_json, '"llm_usage"')
    )
), critic AS (
    SELECT session_id, arg_max(score, seq) AS last, avg(score) AS mean, min(score) AS min, count(*) AS n
    FROM raw_json_values
    WHERE is_critic AND score BETWEEN 0 AND 1
    GROUP BY session_id
)
SELECT s.session_id,
    coalesce(k.user_message_count, 0),
    s.n_segments,
    {_OP_COLUMNS},
    coalesce(k.shell_commands, 0),
    coalesce(k.failed_commands, 0),
    coalesce(t.test_runs, 0),
    coalesce(t.test_failures, 0),
    coalesce(k.file_edits, 0),
    coalesce(k.error_observations, 0),
    coalesce(k.condensations, 0),
    coalesce((k.last_finish_segment = l.last_segment)::INTEGER, 0),
    k.duration_seconds,
    coalesce(CASE WHEN v1.session_id IS NOT NULL THEN v1.cost ELSE v0.cost END, usage.cost),
    {_PROMPT_TOKENS},
    {_COMPLETION_TOKENS},
    critic.last,
    critic.mean,
    critic.min,
    coalesce(critic.n, 0),
    {_SENTIMENT_COLUMNS},
    coalesce(k.user_stops, 0),
    {_PROMPT_TOKENS} + {_COMPLETION_TOKENS}
FROM {sessions} s
LEFT JOIN counts k USING (session_id)
LEFT JOIN git g USING (session_id)
LEFT JOIN tests t USING (session_id)
LEFT JOIN last_segment l USING (session_id)
LEFT JOIN v0 USING (session_id)
LEFT JOIN v1 USING (session_id)
LEFT JOIN usage USING (session_id)
LEFT JOIN critic USING (session_id)
LEFT JOIN {SENTIMENT} snt USING (session_id)
ORDER BY s.session_id
"""


LOOKUP_SCHEMA = pa.schema(
    [("is_code", pa.bool_()), ("body", pa.string())]
    + [(f"{op}_n", pa.int32()) for op in GIT_OPERATIONS]
    + [("is_test", pa.bool_())]
)


def parse_command(body: str, is_code: bool) -> tuple[dict[str, int], bool]:
    """Git operation counts and test-ness of one ``run`` command (``is_code=False``) or ``run_ipython`` cell."""
    if "git" in body:
        lines = python_shell_commands(body) if is_code else [body]
        found = Counter(sub for line in lines for sub in git_subcommands(line))
        ops = {op: found[op] for op in GIT_OPERATIONS}
    else:
        ops = dict.fromkeys(GIT_OPERATIONS, 0)
    return ops, (not is_code and is_test_command(body))


def command_lookup(
    wh: Warehouse, sessions: str = tables.STAGING_SESSIONS.qualified, events: str = tables.EVENTS.qualified
) -> pa.Table:
    """Every distinct command / cell of the sessions in relation ``sessions`` (events in ``events``) that runs a
    counted git operation or a test, parsed once (others omitted)."""
    rows: dict[str, list] = {name: [] for name in LOOKUP_SCHEMA.names}
    for is_code, body in wh.con.execute(distinct_bodies_sql(sessions, events)).fetchall():
        ops, is_test = parse_command(body, is_code)
        if not is_test and not any(ops.values()):
            continue
        rows["is_code"].append(is_code)
        rows["body"].append(body)
        for op in GIT_OPERATIONS:
            rows[f"{op}_n"].append(ops[op])
        rows["is_test"].append(is_test)
    return pa.table(rows, schema=LOOKUP_SCHEMA)


EVENT_FEATURES_VERSIONS_SQL = with_user_text_version(f"""
SELECT v.session_id, v.version || '|' || coalesce(w.version, '') AS version
FROM ({SESSION_VERSIONS_SQL}) v
LEFT JOIN {tables.COMPUTED_VERSIONS.qualified} w
    ON w.table_name = '{tables.WORK_SEGMENTS.qualified}' AND w.session_id = v.session_id
""")
"""A session's version for its event features: its record's, the one its work segments were computed from and the
one its user text (which the sentiment columns read) was computed from."""


def code_version() -> str:
    """What the rows are computed by: this module, ``sentiment.py``, ``shell.py`` and VADER's release."""
    return code_digest(sentiment, shell, sys.modules[__name__], text=metadata.version("vaderSentiment"))


def build_event_features(wh: Warehouse) -> Refreshed:
    """Refresh ``features.event_features`` (one row per session of ``staging.sessions``) for the sessions whose
    record or work segments changed (``incremental.py``): their commands parsed, their messages scored."""
    t = tables.EVENT_FEATURES
    with refreshing(wh, t.qualified, EVENT_FEATURES_VERSIONS_SQL, code_version()) as refresh:
        events = tables.EVENTS.qualified
        if not refresh.whole:
            # Their events first, by record key alone: a content filter (``contains(raw_json, ...)``) in the same
            # scan as the join ran over every event of the warehouse when the changed sessions spanned several drops
            wh.con.execute(
                f"CREATE OR REPLACE TEMP TABLE {CHANGED_EVENTS} AS"
                f" SELECT e.* FROM {tables.EVENTS.qualified} e SEMI JOIN {refresh.sessions} s USING (record_key)"
            )
            events = CHANGED_EVENTS
        lookup = command_lookup(wh, refresh.sessions, events)
        workers = worker_count(refresh.touched)
        part = SESSIONS_PER_PART if workers == 1 else TASK_SESSIONS
        scores = sentiment_table(wh, part, sessions=refresh.sessions, events=events, workers=workers)
        refresh.delete(wh, t)
        wh.con.register(LOOKUP, lookup)
        wh.con.register(SENTIMENT, scores)
        try:
            sql = event_features_sql(refresh.sessions, events)
            wh.con.execute(f"INSERT INTO {t.qualified} ({', '.join(t.column_names)}) {sql}")
        finally:
            wh.con.unregister(LOOKUP)
            wh.con.unregister(SENTIMENT)
        wh.con.execute(f"DROP TABLE IF EXISTS {CHANGED_EVENTS}")
    return Refreshed(wh.count(t), refresh.touched)
