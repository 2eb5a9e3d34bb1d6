"""Checks at the raw → staging boundary: each counts the rows that break one promise of a staging table."""

import dagster as dg

from ... import staging, tables
from ...stars import stars_to_label_sql
from ..resources import WarehouseResource
from ..specs import key

# (table, check name, what must hold, SQL counting the rows that break it)
RULES: list[tuple[tables.Table, str, str, str]] = [
    (
        tables.STAGING_SESSIONS,
        "one_row_per_session",
        "Each session id appears once.",
        f"SELECT count(*) - count(DISTINCT session_id) FROM {tables.STAGING_SESSIONS.qualified}",
    ),
    (
        tables.WORK_SEGMENTS,
        "segments_match_sessions",
        "Every session has exactly the segments numbered 0..n_segments-1 that ingest counted.",
        f"""SELECT count(*) FROM {tables.STAGING_SESSIONS.qualified} s LEFT JOIN (
            SELECT session_id, count(*) AS n, max(segment_index) AS top FROM {tables.WORK_SEGMENTS.qualified} GROUP BY 1
        ) w USING (session_id)
        WHERE coalesce(w.n, 0) <> s.n_segments OR (w.n IS NOT NULL AND w.top <> w.n - 1)""",
    ),
    (
        tables.SEGMENT_RATINGS,
        "ratings_join_segments",
        "Every kept rating is 1 to 5 stars or a thumb (1 or 0), and names an existing work segment.",
        f"""SELECT count(*) FROM {tables.SEGMENT_RATINGS.qualified} r
        LEFT JOIN {tables.WORK_SEGMENTS.qualified} w USING (session_id, segment_index)
        WHERE w.session_id IS NULL OR r.scale IS DISTINCT FROM 'stars_1_5' AND r.scale IS DISTINCT FROM 'thumbs'
           OR r.scale = 'stars_1_5' AND r.rating NOT BETWEEN 1 AND 5
           OR r.scale = 'thumbs' AND r.rating NOT IN (0, 1)""",
    ),
    (
        tables.SESSION_LABELS,
        "labels_in_range",
        "Labels on stars are means of 1-5 stars with label = (stars - 1) / 4 in [0, 1]; labels on thumbs are 1 or 0.",
        f"""SELECT count(*) FROM {tables.SESSION_LABELS.qualified}
        WHERE scale = 'stars_1_5' AND (label_stars NOT BETWEEN 1 AND 5 OR label_stars IS NULL
                                       OR abs(label - {stars_to_label_sql("label_stars")}) > 1e-12)
           OR scale = 'thumbs' AND (label NOT IN (0, 1) OR label_stars IS NOT NULL)
           OR scale IS NULL OR scale NOT IN ('stars_1_5', 'thumbs') OR n_rated_segments < 1""",
    ),
    (
        tables.STAGING_ASSIGNMENTS,
        "one_arm_per_session",
        "Each session is in one experiment arm, and it is a session PULSE has.",
        f"""SELECT (SELECT count(*) - count(DISTINCT session_id) FROM {tables.STAGING_ASSIGNMENTS.qualified})
             + (SELECT count(*) FROM {tables.STAGING_ASSIGNMENTS.qualified} a
                ANTI JOIN {tables.STAGING_SESSIONS.qualified} s USING (session_id))""",
    ),
]


def _make_check(t: tables.Table, name: str, description: str, sql: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=key(t), name=name, description=description, blocking=True)
    def _check(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        with warehouse.warehouse() as wh:
            bad = wh.con.execute(sql).fetchone()[0]
        return dg.AssetCheckResult(passed=bad == 0, metadata={"violations": bad})

    return _check


# module-level, so the staging definitions find them with the checks written by hand
staging_checks = [_make_check(*rule) for rule in RULES]


REPLACED_QUERY = (
    f'pulse sql "SELECT drop_id, replaced_by_drop_id, count(*) FROM {tables.REPLACED_SESSIONS.qualified} GROUP BY ALL"'
)


@dg.asset_check(
    asset=key(tables.REPLACED_SESSIONS),
    name="no_session_replaced_by_another_drop",
    blocking=False,
    description=(
        "Warns when a drop replaced sessions another drop had delivered, with other content: a later drop wins a"
        f" session id ({tables.STAGING_SESSIONS.qualified} keeps its record), which is right for a correction and"
        " wrong when two sources reuse ids (two synthetic corpora with the same --prefix, two exports numbering from"
        " 1). The metadata says how many sessions, from which drops; each one is a row of"
        f" {tables.REPLACED_SESSIONS.qualified} (the record that lost and the one kept): {REPLACED_QUERY}. A drop"
        " delivered again with the same content replaces nothing."
    ),
)
def no_session_replaced_by_another_drop(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        pairs = staging.replacements(wh)
    said = [f"drop {by} replaced {n} sessions of drop {of}" for by, of, n in pairs[:5]]
    if len(pairs) > 5:
        said.append(f"{len(pairs) - 5} more pairs of drops")
    return dg.AssetCheckResult(
        passed=not pairs,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(said) + f"; see {REPLACED_QUERY}" if pairs else None,
        metadata={"replaced_sessions": sum(n for *_, n in pairs), "replacing_drops": len({p[0] for p in pairs})},
    )
