"""When the analysts' copy (``PULSE_HOME/pulse.duckdb``) is replaced: only when the working database is whole.

No asset publishes. A run that stopped half-way (killed, or failed) has left some tables rebuilt from the new raw
data and others not, so the copy is replaced only after a successful run, and only if the working database then
holds a whole state (``why_not_whole``):

1. **no run is executing**: no run is STARTED (whose process still lives, if the instance's run launcher can
   tell; a killed ``pulse ingest`` stays STARTED) or CANCELING. Queued and starting runs have written nothing yet;
   their own success publishes again;
2. **every drop is loaded whole**: no drop has rows in the raw tables without its ``raw.drops`` row
   (``ingest/load.unfinished_drops``; ingest commits in batches, see ``ingest/load.py``);
3. **every asset is newer than what it reads**: in the Dagster instance's records, each asset's latest
   materialization comes after the latest materialization of every asset it depends on (for a raw table, of any
   drop). So every table was computed from the tables it reads as they are now, which is what one complete run
   leaves; a table never materialized while its inputs were is stale too. (A step killed after its commit but
   before Dagster recorded it is judged by its previous materialization: if its inputs changed since, it is stale
   anyway; if not, it recomputed the same rows.)

If the state is not whole nothing is published, and the reason is returned (``pulse ingest`` and ``pulse
materialize`` print it): the next successful run that completes the state publishes it. A selection such as
``pulse materialize --select group:staging`` therefore publishes only once the assets downstream of it are
rebuilt too (``pulse materialize``, or the automation sensor under ``pulse ui``).

Who publishes: ``runs.ingest`` and ``runs.materialize`` at their end, and, for runs the daemon launched (the drop
sensor's per-drop runs, the automation sensor's, the nightly schedule's), ``publish_sensor`` on each run's
success. The drop sensor's run refreshes every derived table after the drop (``DROP_JOB``), so its success finds
the state whole and publishes the drop at once. Each publish checks the rule while it holds the working database's
lock (``publish.publish``), so no writer can change the state between the check and the copy.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import duckdb
from dagster._core.launcher import WorkerStatus

from ..ingest.load import unfinished_drops
from ..publish import publish
from .resources import WarehouseResource

if TYPE_CHECKING:
    from dagster._core.definitions.assets.graph.base_asset_graph import BaseAssetGraph

# How soon after a run succeeds the publish sensor looks (Dagster's default, 30 s, was most of a small drop's wait);
# a look when no run has ended since reads only the run-status events past its cursor.
PUBLISH_INTERVAL_SECONDS = 5


def executing_runs(instance: dg.DagsterInstance) -> list[str]:
    """Runs that may be writing now: STARTED ones whose process lives, and CANCELING ones.

    A STARTED run whose process is gone (``kill -9``, a closed terminal) stays STARTED until run monitoring fails
    it; the instance's run launcher tells, where it can (``supports_check_run_worker_health``), and otherwise the
    run counts as executing."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING])
    )
    launcher = instance.run_launcher

    def dead(run: dg.DagsterRun) -> bool:
        return (
            run.status == dg.DagsterRunStatus.STARTED
            and launcher.supports_check_run_worker_health
            and launcher.check_run_worker_health(run).status == WorkerStatus.FAILED
        )

    return [f"{run.job_name} ({run.run_id[:8]})" for run in runs if not dead(run)]


def stale_assets(instance: dg.DagsterInstance, graph: BaseAssetGraph) -> list[str]:
    """Assets materialized before (or never since) the latest materialization of an asset they depend on, each
    as ``asset (older than parent)``, upstream first: what to materialize next."""
    keys = [k for k in graph.toposorted_asset_keys if k in graph.materializable_asset_keys]
    latest = {
        record.asset_entry.asset_key: record.asset_entry.last_materialization_record.storage_id
        for record in instance.get_asset_records(keys)
        if record.asset_entry.last_materialization_record is not None
    }
    stale = []
    for key in keys:
        newer = [p for p in sorted(graph.get(key).parent_keys) if p in latest and latest[p] > latest.get(key, -1)]
        if newer:
            stale.append(f"{key.to_user_string()} (older than {newer[0].to_user_string()})")
    return stale


def why_not_whole(instance: dg.DagsterInstance, graph: BaseAssetGraph, con: duckdb.DuckDBPyConnection) -> str | None:
    """Why the working database (open on ``con``) is not a whole state, or None when it is (the module's rule)."""
    if running := executing_runs(instance):
        return f"a run is executing: {', '.join(running)}; it publishes when it succeeds"
    if unfinished := unfinished_drops(con):
        return f"the last load of drop(s) {', '.join(unfinished)} did not finish; ingest them again"
    if stale := stale_assets(instance, graph):
        more = f" and {len(stale) - 3} more" if len(stale) > 3 else ""
        return f"tables are older than what they read: {', '.join(stale[:3])}{more}; materialize them"
    return None


def publish_if_whole(instance: dg.DagsterInstance, graph: BaseAssetGraph, work_db: Path, published: Path) -> str | None:
    """Publish the working database if it is whole; returns None when published, else why not."""
    return publish(work_db, published, ready=lambda con: why_not_whole(instance, graph, con))


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    name="publish_warehouse",
    minimum_interval_seconds=PUBLISH_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="After each successful run, replaces the analysts' pulse.duckdb if the working database is whole "
    "(no run executing, every drop loaded whole, every table newer than what it reads).",
)
def publish_sensor(context: dg.RunStatusSensorContext, warehouse: WarehouseResource) -> dg.SkipReason | None:
    graph = context.repository_def.asset_graph
    reason = publish_if_whole(context.instance, graph, Path(warehouse.database), Path(warehouse.publish_to))
    if reason:
        context.log.info(f"{warehouse.publish_to} not replaced: {reason}")
        return dg.SkipReason(reason)
    context.log.info(f"published {warehouse.publish_to} after run {context.dagster_run.run_id}")
    return None
