"""``features.session_features``: the one wide table the model stage reads, one row per staged session.

Columns, in a stable order: the event features (``tables.EVENT_FEATURES``), then every rubric feature in rubric
order: a ``yes_no`` feature is one 0/1 column; a ``category`` or ``categories`` feature is one 0/1 column per option,
``<feature>__<option>``, in the rubric's option order. A session the annotator could not answer has NULLs there
(and ``annotation_status`` says why). The columns follow the rubric, so a new rubric entry becomes new columns.

Then the scores that already exist, as features (``SCORE_COLUMNS`` then one column per configured field):

- ``judge_likert``: the LLM judge's 1-5 Likert score (``features.judge_scores.likert_score`` of the configured
  judge model, rows with status ``ok`` or ``truncated``); NULL where the judge did not run or did not answer, and
  NULL for every session when no LLM is configured.
- ``score_<path>``: for each JSON path of ``PULSE_SCORE_FIELDS`` (``a.b`` reads ``$.a.b`` of the session's
  ``metadata_json``; the column name is the path with ``.`` and ``-`` as ``_``, lower case), the value when it is
  a JSON number; NULL when the path is absent, and NULL when the value is not a number (a string, a boolean, an
  object): those are counted per column in ``WideBuild.non_numeric`` and the asset's metadata.
- The OpenHands critic's scores are event features already (``critic_score_last``/``_mean``/``_min``).
- ``eval_score_mean``, ``eval_score_min``, ``eval_scored``, and ``eval__<name>`` for the most frequent judge names:
  trace tools' judge scores (``raw.eval_scores``), each on [0, 1] (``eval_scores.py``); only when some eval score
  was read.

What the models see where a score is NULL: the pipelines impute a constant 0 (``modeling/families.py``). For
``judge_likert`` 0 lies below the 1-5 scale, so a tree separates "not judged" from any score; a linear model (the
ordinal logit) reads it as a very low score. A column NULL for every session is all 0 after imputation: it carries
nothing and changes no prediction, so an unconfigured judge or an absent metadata score costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .. import tables
from ..settings import score_settings
from ..warehouse import Warehouse
from .eval_scores import EVAL_COLUMNS, eval_features_sql, eval_names, has_eval_scores, name_column
from .rubric import Rubric


def option_column(feature: str, option: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", option.lower()).strip("_")
    return f"{feature}__{slug}"


def feature_columns(rubric: Rubric) -> list[str]:
    """The annotated columns of the wide table, in order."""
    cols: list[str] = []
    for f in rubric.features:
        cols.extend([f.name] if f.value_type == "yes_no" else [option_column(f.name, o) for o in f.options])
    return cols


SCORE_COLUMNS = ("judge_likert", *EVAL_COLUMNS)
"""Scores PULSE itself may have computed, as columns after the rubric's (see the module docstring)."""


def score_column(path: str) -> str:
    """The column of a ``PULSE_SCORE_FIELDS`` path: ``eval.score-v2`` -> ``score_eval_score_v2``."""
    return "score_" + path.replace(".", "_").replace("-", "_").lower()


@dataclass(frozen=True)
class WideBuild:
    """What ``build_session_features`` wrote: rows, and per ``score_*`` column how many sessions had a value at
    its path that was not a JSON number (written as NULL)."""

    rows: int
    non_numeric: dict[str, int] = field(default_factory=dict)


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def build_session_features(
    wh: Warehouse,
    rubric: Rubric,
    annotator: str,
    prompt_version: str,
    judge_model: str | None = None,
    score_fields: tuple[str, ...] = (),
    score_ranges: Mapping[str, tuple[float, float] | str] | None = None,
) -> WideBuild:
    """Rebuild ``features.session_features`` from the event features, ``annotator``'s answers of
    ``prompt_version``, ``judge_model``'s Likert scores (None: the column is all NULL) and the metadata scores at
    ``score_fields``, and the trace tools' eval scores on their ``score_ranges`` (``PULSE_SCORE_RANGES`` when None;
    see the module docstring)."""
    pivots = []
    for f in rubric.features:
        value = f"max(CASE WHEN v.feature = {_q(f.name)} AND v.value <> '' THEN v.value END)"
        if f.value_type == "yes_no":
            pivots.append(f"CASE upper({value}) WHEN 'YES' THEN 1 WHEN 'NO' THEN 0 END AS \"{f.name}\"")
        else:
            for option in f.options:
                pivots.append(
                    f"list_contains(string_split({value}, '|'), {_q(option)})::INTEGER"
                    f' AS "{option_column(f.name, option)}"'
                )
    event_cols = ", ".join(f'ef."{c}"' for c in tables.EVENT_FEATURES.column_names if c != "session_id")
    feature_cols = ", ".join(f'a."{c}"' for c in feature_columns(rubric))
    paths = [(score_column(p), "$." + p) for p in score_fields]
    score_cols = "".join(
        f", CASE WHEN json_type(s.metadata_json, {_q(path)}) IN ('BIGINT', 'UBIGINT', 'DOUBLE')"
        f' THEN json_extract(s.metadata_json, {_q(path)})::DOUBLE END AS "{col}"'
        for col, path in paths
    )
    with_evals = has_eval_scores(wh.con)
    ranges = score_settings().ranges if score_ranges is None else score_ranges
    names = eval_names(wh.con) if with_evals else []
    evals_cte = f", evals AS ({eval_features_sql(ranges, names)})" if with_evals else ""
    eval_cols = (
        ", ev.eval_score_mean, ev.eval_score_min, coalesce(ev.eval_scored, 0)::INTEGER AS eval_scored"
        + "".join(f', ev."{name_column(n)}"' for n in names)
        if with_evals
        else ""
    )
    eval_join = "LEFT JOIN evals ev USING (session_id)" if with_evals else ""
    wh.con.execute(
        f"""
        CREATE OR REPLACE TABLE {tables.SESSION_FEATURES.qualified} AS
        WITH answers AS (
            SELECT v.session_id, {", ".join(pivots)}
            FROM {tables.ANNOTATION_VALUES.qualified} v
            WHERE v.annotator = ? AND v.prompt_version = ?
            GROUP BY v.session_id
        ), status AS (
            SELECT session_id, status FROM {tables.ANNOTATIONS.qualified} WHERE annotator = ? AND prompt_version = ?
        ), judge AS (
            SELECT session_id, max(likert_score) AS judge_likert FROM {tables.JUDGE_SCORES.qualified}
            WHERE model = ? AND status IN ('ok', 'truncated') GROUP BY session_id
        ){evals_cte}
        SELECT s.session_id, {event_cols}, {feature_cols},
               j.judge_likert::DOUBLE AS judge_likert{eval_cols}{score_cols},
               coalesce(st.status, 'missing') AS annotation_status
        FROM {tables.STAGING_SESSIONS.qualified} s
        LEFT JOIN {tables.EVENT_FEATURES.qualified} ef USING (session_id)
        LEFT JOIN answers a USING (session_id)
        LEFT JOIN status st USING (session_id)
        LEFT JOIN judge j USING (session_id)
        {eval_join}
        ORDER BY s.session_id
    """,
        [annotator, prompt_version, annotator, prompt_version, judge_model],
    )
    non_numeric = {
        col: wh.con.execute(
            f"SELECT count(*) FROM {tables.STAGING_SESSIONS.qualified} WHERE json_type(metadata_json, ?) NOT IN"
            " ('BIGINT', 'UBIGINT', 'DOUBLE', 'NULL')",
            [path],
        ).fetchone()[0]
        for col, path in paths
    }
    built = wh.con.execute(f"SELECT count(*) FROM {tables.SESSION_FEATURES.qualified}").fetchone()[0]
    return WideBuild(built, non_numeric)
