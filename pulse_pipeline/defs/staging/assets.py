"""Staging tables over all drops: resolved sessions, work segments, segment ratings, labels, assignments."""

import dagster as dg

from ... import staging, tables
from ..resources import WarehouseResource
from ..specs import table_spec


def _meta(t: tables.Table, rows: int, **extra: int) -> dict:
    return {"dagster/row_count": rows, "dagster/table_name": t.qualified, **extra}


@dg.asset(**table_spec(tables.STAGING_SESSIONS, [tables.SESSIONS, tables.DROPS], "staging"))
def sessions(warehouse: WarehouseResource) -> dg.MaterializeResult:
    with warehouse.warehouse() as wh:
        n = staging.build_sessions(wh)
        duplicates = wh.count(tables.SESSIONS) - n
    return dg.MaterializeResult(metadata=_meta(tables.STAGING_SESSIONS, n, superseded_records=duplicates))


@dg.asset(
    **table_spec(
        tables.REPLACED_SESSIONS, [tables.STAGING_SESSIONS, tables.SESSIONS, tables.EVENTS, tables.DROPS], "staging"
    )
)
def replaced_sessions(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The session records a later drop replaced with other content (``staging/sql.py``); the check
    ``no_session_replaced_by_another_drop`` warns when there are any."""
    with warehouse.warehouse() as wh:
        n = staging.build_replaced_sessions(wh)
        pairs = staging.replacements(wh)
    for by, of, count in pairs:
        context.log.warning(f"drop {by} replaced {count} sessions that drop {of} delivered (other content)")
    return dg.MaterializeResult(metadata=_meta(tables.REPLACED_SESSIONS, n, replacing_drops=len({p[0] for p in pairs})))


@dg.asset(**table_spec(tables.WORK_SEGMENTS, [tables.STAGING_SESSIONS, tables.EVENTS], "staging"))
def work_segments(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Refreshed for the sessions whose record changed (``sessions_touched``), not rebuilt whole."""
    with warehouse.warehouse() as wh:
        refreshed = staging.build_work_segments(wh)
        still_open = wh.count(tables.WORK_SEGMENTS, "NOT closed")
    meta = _meta(
        tables.WORK_SEGMENTS, refreshed.rows, open_at_stream_end=still_open, sessions_touched=refreshed.sessions_touched
    )
    return dg.MaterializeResult(metadata=meta)


@dg.asset(
    **table_spec(
        tables.SEGMENT_RATINGS,
        [tables.STAGING_SESSIONS, tables.RATINGS, tables.ASKS, tables.EVENTS, tables.WORK_SEGMENTS],
        "staging",
    )
)
def segment_ratings(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    with warehouse.warehouse() as wh:
        n, unmatched = staging.build_segment_ratings(wh)
    if unmatched:
        context.log.warning(f"{unmatched} ratings join no segment; see {tables.QUARANTINE.qualified} (stage 'staging')")
    return dg.MaterializeResult(metadata=_meta(tables.SEGMENT_RATINGS, n, ratings_quarantined=unmatched))


@dg.asset(**table_spec(tables.SESSION_LABELS, [tables.SEGMENT_RATINGS], "staging"))
def session_labels(warehouse: WarehouseResource) -> dg.MaterializeResult:
    with warehouse.warehouse() as wh:
        n = staging.build_session_labels(wh)
        labeled_share = n / max(wh.count(tables.STAGING_SESSIONS), 1)
    return dg.MaterializeResult(
        metadata={**_meta(tables.SESSION_LABELS, n), "labeled_share": dg.MetadataValue.float(round(labeled_share, 4))}
    )


@dg.asset(**table_spec(tables.STAGING_ASSIGNMENTS, [tables.STAGING_SESSIONS, tables.ASSIGNMENTS], "staging"))
def assignments(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    with warehouse.warehouse() as wh:
        n, unmatched = staging.build_assignments(wh)
    if unmatched:
        context.log.warning(f"{unmatched} assignments name unknown sessions; see {tables.QUARANTINE.qualified}")
    return dg.MaterializeResult(metadata=_meta(tables.STAGING_ASSIGNMENTS, n, assignments_quarantined=unmatched))
