"""The drop sensor: each new (or rewritten) file or folder in the drop folder becomes a partition and a run that
reads it and refreshes every table derived from it; a drop already loaded as it is now is never run again; a run
that failed (killed, or its drop crashed it) is requested again, a few times; a drop rewritten while its run is
queued or in progress waits for that run to end, and then one run takes it as it is (``busy_drops``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import duckdb
from dagster._core.events import DagsterEventType

from ... import tables
from ...connections import connect, exists
from ...ingest.drop import fingerprint, list_drops
from ..resources import WarehouseResource
from .assets import LOADED_FINGERPRINT, RAW_KEYS
from .partitions import drops_partitions

INGEST_JOB = "ingest_drop"  # the raw tables of one drop (`pulse ingest` runs it, then the derived tables)
# The sensor's run: one drop, then every derived table, in one run (the job is defined in definitions.py, beside
# the derived selection). Why one run: the publish sensor publishes only a state where every table is newer than
# what it reads; a run that loaded the drop alone left the derived tables stale, and the analysts waited for the
# automation sensor's run (3 min 46 s for a small drop).
DROP_JOB = "ingest_drop_and_refresh"
SENSOR_NAME = "drop_sensor"
# Ticks this often: the drop's time to the analysts is this, plus the run, plus the publish sensor's interval.
SENSOR_INTERVAL_SECONDS = 5
# A drop whose run failed is requested again up to this many times: enough for a killed run or a machine
# restart, not an endless loop on a drop that fails every time.
MAX_RETRIES = 3
_RETRY = ":retry-"


def run_key(key: str, drop_fingerprint: str, retry: int = 0) -> str:
    """``<drop>:<fingerprint>`` for a drop's first run, ``…:retry-N`` for its N-th retry.

    Dagster requests a run key once, so the fingerprint makes a rewritten drop run again and an unchanged one
    never twice, and the retry number makes a failed run's retry a new request."""
    return f"{key}:{drop_fingerprint}" + (f"{_RETRY}{retry}" if retry else "")


def failed_attempts(instance: dg.DagsterInstance) -> dict[str, int]:
    """How many of this sensor's runs failed, per first-run key (``<drop>:<fingerprint>``).

    Only failures are read: they are few, and since each attempt has its own run key, the number of failures
    names the next attempt (Dagster skips it if it was already requested, whether still running or done)."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE], tags={"dagster/sensor_name": SENSOR_NAME})
    )
    counts: dict[str, int] = {}
    for run in runs:
        first = run.tags.get("dagster/run_key", "").split(_RETRY)[0]
        if first:
            counts[first] = counts.get(first, 0) + 1
    return counts


def recorded_fingerprints(instance: dg.DagsterInstance) -> dict[str, str]:
    """Per drop, the fingerprint its latest load recorded in the Dagster instance (the ``fingerprint`` metadata of
    its latest raw/drops materialization, whoever ran it: this sensor, `pulse ingest`, `pulse demo`).

    Two queries whatever the number of drops; a load recorded before that metadata existed has none."""
    drops_key = RAW_KEYS[tables.DROPS]
    latest = instance.event_log_storage.get_latest_storage_id_by_partition(
        drops_key, DagsterEventType.ASSET_MATERIALIZATION
    )
    if not latest:
        return {}
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=drops_key, storage_ids=list(latest.values())), limit=len(latest)
    ).records
    found = {}
    for record in records:
        materialization = record.asset_materialization
        value = materialization.metadata.get(LOADED_FINGERPRINT) if materialization else None
        if materialization is not None and materialization.partition and value is not None:
            found[materialization.partition] = str(value.value)
    return found


def warehouse_fingerprints(database: Path) -> dict[str, str] | None:
    """Per drop, the fingerprint of the load ``raw.drops`` holds (written last, so the drop is loaded whole); None
    when the working database is busy (a run is writing: it is not waited for) or unreadable.

    The warehouse is the truth the instance may lack: a new ``DAGSTER_HOME`` (field notes §3.6), or drops loaded
    before loads recorded their fingerprint."""
    if not exists(database):
        return {}
    try:
        con = connect(database, read_only=True, wait_seconds=0)
    except (RuntimeError, duckdb.Error):
        return None
    try:
        return dict(con.execute(f"SELECT drop_id, fingerprint FROM {tables.DROPS.qualified}").fetchall())
    except duckdb.CatalogException:
        return {}  # no raw table yet
    except duckdb.Error:
        return None
    finally:
        con.close()


# A run in these states may still read the drop, or has not read it yet: the drop's next run waits for it.
BUSY_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def busy_drops(instance: dg.DagsterInstance) -> set[str]:
    """The drops (partition keys) with a run queued or in progress, whoever asked for it.

    Why: a drop that grows while it is loaded (the rating service adds a roll file to its day's drop every few
    seconds, ``serve-YYYY-MM-DD/roll-<seq>.jsonl``) has a new fingerprint at every tick. Each used to be a new run
    key, so a run was queued per roll, each loading the whole drop again after the one before: the queue grew as
    long as the rolls came faster than a run, and the published state fell ever further behind. While a drop's run
    is queued or running, no other is requested for it; when it ends, the next tick compares the drop as it is
    then with what that run loaded (its recorded fingerprint, ``loaded_drops``), and one run takes every roll that
    came meanwhile. Nothing is lost: a run records the fingerprint the drop had when it started reading
    (``ingest/load.py``), so a roll added during the read leaves the drop not loaded as it is, and a failed run is
    retried as before (``failed_attempts``). A run whose process died stays STARTED until run monitoring fails it
    (``dagster.yaml``), so it holds its drop at most that long."""
    runs = instance.get_runs(filters=dg.RunsFilter(statuses=BUSY_STATUSES))
    return {key for run in runs if (key := run.tags.get("dagster/partition"))}


def loaded_drops(instance: dg.DagsterInstance, database: Path, current: Mapping[str, str]) -> set[str] | None:
    """The drops of ``current`` (key → fingerprint now) already loaded as they are now; None when that cannot be
    told now: the instance does not vouch for every drop and the working database is busy.

    The instance's record answers first (no lock taken); the warehouse is read only when some drop is not
    recorded as loaded, without waiting. Busy means a run is writing: runs go one at a time, so a new drop loses
    nothing by being requested at a later tick, while requesting every drop not vouched for would run a home's
    old drops again (a home whose loads predate the recorded fingerprint)."""
    recorded = recorded_fingerprints(instance)
    loaded = {key for key, now in current.items() if recorded.get(key) == now}
    if len(loaded) == len(current):
        return loaded
    in_warehouse = warehouse_fingerprints(database)
    if in_warehouse is None:
        return None
    return loaded | {key for key, now in current.items() if in_warehouse.get(key) == now}


def drop_job_assets(context: dg.SensorEvaluationContext) -> list[dg.AssetKey] | None:
    """Every asset the drop job materializes, named on each of its runs (None where the sensor is evaluated outside a
    code location, as in a unit test: the run is then the whole job, the same assets).

    Why name them: eager automation (``defs/specs.EAGER``) ignores a parent's update made by a run that also planned
    the child, and it tells that only from the run's asset selection. A job run carries none, so to the automation
    sensor every table the drop's run refreshed looked updated behind its children's backs, and a tick that fell in
    the wrong moment of the run requested the report again after the run had rebuilt it."""
    try:
        repository = context.repository_def
    except dg.DagsterInvariantViolationError:
        return None
    if repository is None:
        return None
    return sorted(repository.get_job(DROP_JOB).asset_layer.selected_asset_keys)


@dg.sensor(
    name=SENSOR_NAME,
    job_name=DROP_JOB,
    minimum_interval_seconds=SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Watches PULSE_HOME/drops; one partition per drop, and for each new or rewritten drop one run that reads "
        "it and refreshes every derived table (then the publish sensor publishes). A drop already loaded as it is "
        "(by pulse ingest, pulse demo or an earlier run) is not run again. A drop whose run failed is run again, "
        f"up to {MAX_RETRIES} times. A drop rewritten while its run is queued or running waits for that run, "
        "then one run takes it as it is then."
    ),
)
def drop_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource) -> dg.SensorResult:
    drops = list_drops(warehouse.drops)
    known = set(context.instance.get_dynamic_partitions(drops_partitions.name))
    new_keys = [k for k in drops if k not in known]
    busy = busy_drops(context.instance)
    # a drop whose run is queued or running is looked at again once that run ended (``busy_drops``)
    current = {key: fingerprint(path) for key, path in drops.items() if key not in busy}
    loaded = loaded_drops(context.instance, Path(warehouse.database), current)
    if loaded is None:
        return dg.SensorResult(
            skip_reason=f"{warehouse.database} is busy (a run is writing): drops not recorded as loaded are looked"
            " at again next tick",
            cursor=context.cursor,
        )
    failed = failed_attempts(context.instance)
    # The cursor holds the run keys of drops given up on, so that each is reported once.
    given_up = set(json.loads(context.cursor)) if context.cursor else set()
    still_given_up: set[str] = set()
    requests = []
    for key in drops:
        if key in busy:
            still_given_up |= {first for first in given_up if first.rpartition(":")[0] == key}
            continue
        if key in loaded:
            continue
        first = run_key(key, current[key])
        failures = failed.get(first, 0)
        if failures > MAX_RETRIES:
            still_given_up.add(first)
            if first not in given_up:
                context.log.warning(
                    f"drop {key}: its run failed {failures} times (1 run + {MAX_RETRIES} retries); not retrying. "
                    "Read the failed runs' logs, fix the cause, then rewrite the drop or re-execute a run."
                )
            continue
        requests.append(
            dg.RunRequest(
                run_key=run_key(key, current[key], failures),
                partition_key=key,
                asset_selection=drop_job_assets(context),
            )
        )
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[drops_partitions.build_add_request(new_keys)] if new_keys else [],
        cursor=json.dumps(sorted(still_given_up)),
    )
