"""``features.session_features``: the one wide table the model stage reads, one row per staged session.

Columns, in a stable order: the event features (``tables.EVENT_FEATURES``), then every rubric feature in rubric
order: a ``yes_no`` feature is one 0/1 column; a ``category`` or ``categories`` feature is one 0/1 column per option,
``<feature>__<option>``, in the rubric's option order. A session the annotator could not answer has NULLs there
(and ``annotation_status`` says why). The columns follow the rubric, so a new rubric entry becomes new columns.
"""

from __future__ import annotations

import re

from .. import tables
from ..warehouse import Warehouse
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


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def build_session_features(wh: Warehouse, rubric: Rubric, annotator: str, prompt_version: str) -> int:
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
    wh.con.execute(
        f"""
        CREATE OR REPLACE TABLE features.session_features AS
        WITH answers AS (
            SELECT v.session_id, {", ".join(pivots)}
            FROM features.annotation_values v
            WHERE v.annotator = ? AND v.prompt_version = ?
            GROUP BY v.session_id
        ), status AS (
            SELECT session_id, status FROM features.annotations WHERE annotator = ? AND prompt_version = ?
        )
        SELECT s.session_id, {event_cols}, {feature_cols},
               coalesce(st.status, 'missing') AS annotation_status
        FROM staging.sessions s
        LEFT JOIN features.event_features ef USING (session_id)
        LEFT JOIN answers a USING (session_id)
        LEFT JOIN status st USING (session_id)
        ORDER BY s.session_id
    """,
        [annotator, prompt_version, annotator, prompt_version],
    )
    return wh.con.execute("SELECT count(*) FROM features.session_features").fetchone()[0]
