"""Raw tables: one drop (partition) read into raw.sessions, raw.events, raw.ratings, raw.assignments,
raw.quarantine and its row in raw.drops."""

import dagster as dg

from ... import progress, tables
from ...ingest.drop import find_drop
from ...ingest.load import load_drop, reconcile_drop
from ..resources import WarehouseResource
from .partitions import drops_partitions

RAW_KEYS = {t: dg.AssetKey([t.schema, t.name]) for t in tables.RAW_TABLES}
RECONCILES = "records_reconcile"
LOADED_FINGERPRINT = "fingerprint"  # metadata of a raw/drops materialization: the drop's fingerprint as loaded


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            key,
            description=t.description,
            group_name="ingest",
            kinds={"duckdb"},
            metadata={"dagster/table_name": t.qualified},
        )
        for t, key in RAW_KEYS.items()
    ],
    partitions_def=drops_partitions,
    check_specs=[
        dg.AssetCheckSpec(
            RECONCILES,
            asset=RAW_KEYS[tables.DROPS],
            description="For the drop: records read = accepted + quarantined, and the same for events.",
        )
    ],
    name="raw_drop",
)
def raw_drop(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    """Read one drop, replacing whatever that drop wrote before (re-running it changes nothing)."""
    key = context.partition_key
    path = find_drop(warehouse.drops, key)
    context.log.info(f"reading drop {key} from {path}")
    with (
        warehouse.warehouse(transaction=False) as wh,  # load_drop commits in batches (see ingest/load.py)
        progress.bar(f"reading {key}", unit="B", scale=True) as advance,  # a bar only under a CLI command
    ):
        load_drop(wh, key, path, progress=context.log.info, advance=advance)
        counts = {t: wh.count(t, "drop_id = ?", [key]) for t in tables.RAW_TABLES}
        ok, facts = reconcile_drop(wh, key)
        (loaded,) = wh.con.execute(
            f"SELECT fingerprint FROM {tables.DROPS.qualified} WHERE drop_id = ?", [key]
        ).fetchone()
    for t, asset_key in RAW_KEYS.items():
        # the fingerprint of what was loaded, on raw/drops: the drop sensor requests no run for a drop loaded as it
        # is now (by `pulse ingest`, `pulse demo` or an earlier run; see sensors.loaded_fingerprints)
        extra = {LOADED_FINGERPRINT: loaded} if t is tables.DROPS else {}
        yield dg.MaterializeResult(asset_key=asset_key, metadata={"dagster/row_count": counts[t], **extra})
    yield dg.AssetCheckResult(check_name=RECONCILES, asset_key=RAW_KEYS[tables.DROPS], passed=ok, metadata=facts)
