"""Judges' scores from trace tools (``raw.eval_scores``: Langfuse EVAL scores, OpenTelemetry evaluation results,
OpenInference LLM/CODE annotations) as session features: ``eval_score_mean``, ``eval_score_min``, ``eval_scored``.

They are features, never labels (``ingest/scores.py``): an LLM judge's "hallucination 0.1" says what a model
thought of the session, which may predict the user's rating but is not it.

Each score is put on [0, 1] first, so scores of different names can be averaged:

- ``BOOLEAN``: as it is (1 or 0);
- ``NUMERIC`` with a declared range (``PULSE_SCORE_RANGES``, ``name=LOW:HIGH``): ``(value - LOW) / (HIGH - LOW)``,
  clipped to [0, 1];
- ``NUMERIC`` without one: as it is when every value of that name in the corpus lies in [0, 1] (most evaluators'
  scale); else min-max over the corpus for that name, ``(value - min) / (max - min)`` (unsupervised: the labels are
  not read, so nothing of them leaks into the feature); a name whose values are all equal carries nothing there and
  is left out;
- ``CATEGORICAL``, ``TEXT``, ``CORRECTION``: no number, left out.

Per session: the mean and the minimum of its scores on [0, 1] (NULL when it has none) and how many it has
(``eval_scored``, 0 when none), as the critic scores are (``event_features.py``); and, for each of the
``MAX_NAMED`` most frequent names, that name's mean on [0, 1] as a column of its own, ``eval__<name>``
(``name_column``). Why both: one judge's "toxicity" (high is bad) and another's "helpfulness" (high is good) both
enter the mean, which loses their directions; a column per name keeps each judge's meaning for the models to weigh,
and the mean still serves a corpus of many rare names. A score names its session, or only its trace or observation
(then the staged session holding that event is its session, as for ratings; ``staging/sql.py``).

The columns exist only when some staged session has an eval score: a column NULL for every session carries nothing,
and adding it would change the random forest's draws of features (``max_features``) on corpora without any.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .. import tables
from ..settings import THUMBS_RANGE

EVAL_COLUMNS = ("eval_score_mean", "eval_score_min", "eval_scored")
MAX_NAMED = 10
"""The most frequent judge names that get a column each (``eval__<name>``); the others count in the mean only."""


def name_column(name: str) -> str:
    """The column of one judge name: ``Answer Relevance`` -> ``eval__answer_relevance``."""
    return "eval__" + (re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "unnamed")


def eval_names(con) -> list[str]:  # noqa: ANN001 - a DuckDB connection
    """The (lower-cased) names of numeric and boolean eval scores, most frequent first, at most ``MAX_NAMED``,
    one per column (two names that give the same column: the more frequent)."""
    found = con.execute(
        f"SELECT lower(name) AS n, count(*) AS c FROM {tables.EVAL_SCORES.qualified}"
        " WHERE value IS NOT NULL AND isfinite(value) AND upper(data_type) IN ('NUMERIC', 'BOOLEAN')"
        " GROUP BY 1 ORDER BY c DESC, n"
    ).fetchall()
    kept: dict[str, str] = {}
    for name, _ in found:
        kept.setdefault(name_column(name), name)
    return list(kept.values())[:MAX_NAMED]


def _ranges_sql(ranges: Mapping[str, tuple[float, float] | str]) -> str:
    """The declared numeric ranges as a VALUES list (lower-cased name, low, high); thumbs ranges are 0-1."""
    rows = []
    for name, declared in ranges.items():
        low, high = (0.0, 1.0) if declared == THUMBS_RANGE else declared
        rows.append(f"('{name.replace(chr(39), chr(39) * 2)}', {float(low)!r}, {float(high)!r})")
    return ", ".join(rows) or "(NULL, NULL, NULL)"


def eval_features_sql(ranges: Mapping[str, tuple[float, float] | str], names: Sequence[str] = ()) -> str:
    """One row per staged session with an eval score: ``session_id``, ``EVAL_COLUMNS`` and one column per name of
    ``names`` (``name_column``; module docstring)."""
    named = "".join(
        f", avg(v) FILTER (WHERE name = '{n.replace(chr(39), chr(39) * 2)}') AS \"{name_column(n)}\"" for n in names
    )
    return f"""
WITH declared(name, low, high) AS (VALUES {_ranges_sql(ranges)}),
scores AS (
    SELECT session_id, event_id, lower(name) AS name, value, upper(data_type) AS data_type
    FROM {tables.EVAL_SCORES.qualified} WHERE value IS NOT NULL AND isfinite(value)
), named AS (  -- a score naming only its trace or observation: the staged session holding that event
    SELECT e.event_id, min(e.session_id) AS session_id
    FROM {tables.EVENTS.qualified} e JOIN {tables.STAGING_SESSIONS.qualified} s USING (record_key)
    WHERE e.event_id IN (SELECT event_id FROM scores WHERE session_id IS NULL)
    GROUP BY e.event_id HAVING count(DISTINCT e.session_id) = 1
), placed AS (
    SELECT coalesce(sc.session_id, n.session_id) AS session_id, sc.name, sc.value, sc.data_type
    FROM scores sc LEFT JOIN named n ON sc.session_id IS NULL AND n.event_id = sc.event_id
), spread AS (
    SELECT name, min(value) AS lo, max(value) AS hi FROM placed WHERE data_type = 'NUMERIC' GROUP BY name
), unit AS (
    SELECT p.session_id, p.name,
        CASE WHEN p.data_type = 'BOOLEAN' THEN p.value
             WHEN p.data_type <> 'NUMERIC' THEN NULL
             WHEN d.name IS NOT NULL THEN least(1.0, greatest(0.0, (p.value - d.low) / (d.high - d.low)))
             WHEN sp.lo >= 0 AND sp.hi <= 1 THEN p.value
             WHEN sp.hi > sp.lo THEN (p.value - sp.lo) / (sp.hi - sp.lo)
        END AS v
    FROM placed p LEFT JOIN declared d USING (name) LEFT JOIN spread sp USING (name)
    WHERE p.session_id IN (SELECT session_id FROM {tables.STAGING_SESSIONS.qualified})
)
SELECT session_id, avg(v) AS eval_score_mean, min(v) AS eval_score_min, count(v)::INTEGER AS eval_scored{named}
FROM unit GROUP BY session_id
"""


def has_eval_scores(con) -> bool:  # noqa: ANN001 - a DuckDB connection
    """Whether ``raw.eval_scores`` holds any numeric score (else the columns are not added)."""
    return con.execute(f"SELECT count(*) FROM {tables.EVAL_SCORES.qualified} WHERE value IS NOT NULL").fetchone()[0] > 0
