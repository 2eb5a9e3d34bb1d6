"""The drop sensor: each new (or rewritten) file or folder in the drop folder becomes a partition and a run; a run
that failed (killed, or its drop crashed it) is requested again, a few times."""

from __future__ import annotations

import json

import dagster as dg

from ...ingest.drop import fingerprint, list_drops
from ..resources import WarehouseResource
from .partitions import drops_partitions

INGEST_JOB = "ingest_drop"
SENSOR_NAME = "drop_sensor"
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
        filters=dg.RunsFilter(
            job_name=INGEST_JOB, statuses=[dg.DagsterRunStatus.FAILURE], tags={"dagster/sensor_name": SENSOR_NAME}
        )
    )
    counts: dict[str, int] = {}
    for run in runs:
        first = run.tags.get("dagster/run_key", "").split(_RETRY)[0]
        if first:
            counts[first] = counts.get(first, 0) + 1
    return counts


@dg.sensor(
    name=SENSOR_NAME,
    job_name=INGEST_JOB,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Watches PULSE_HOME/drops; one partition per drop, one run per new or rewritten drop; a drop whose run "
        f"failed is run again, up to {MAX_RETRIES} times."
    ),
)
def drop_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource) -> dg.SensorResult:
    drops = list_drops(warehouse.drops)
    known = set(context.instance.get_dynamic_partitions(drops_partitions.name))
    new_keys = [k for k in drops if k not in known]
    failed = failed_attempts(context.instance)
    # The cursor holds the run keys of drops given up on, so that each is reported once.
    given_up = set(json.loads(context.cursor)) if context.cursor else set()
    still_given_up: set[str] = set()
    requests = []
    for key, path in drops.items():
        drop_fingerprint = fingerprint(path)
        first = run_key(key, drop_fingerprint)
        failures = failed.get(first, 0)
        if failures > MAX_RETRIES:
            still_given_up.add(first)
            if first not in given_up:
                context.log.warning(
                    f"drop {key}: its run failed {failures} times (1 run + {MAX_RETRIES} retries); not retrying. "
                    "Read the failed runs' logs, fix the cause, then rewrite the drop or re-execute a run."
                )
            continue
        requests.append(dg.RunRequest(run_key=run_key(key, drop_fingerprint, failures), partition_key=key))
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[drops_partitions.build_add_request(new_keys)] if new_keys else [],
        cursor=json.dumps(sorted(still_given_up)),
    )
