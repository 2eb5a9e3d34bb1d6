"""The drop sensor: each new (or rewritten) file or folder in the drop folder becomes a partition and a run."""

import dagster as dg

from ...ingest.drop import fingerprint, list_drops
from ..resources import WarehouseResource
from .partitions import drops_partitions

INGEST_JOB = "ingest_drop"


@dg.sensor(
    job_name=INGEST_JOB,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Watches PULSE_HOME/drops; one partition per drop, one run per new or rewritten drop.",
)
def drop_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource) -> dg.SensorResult:
    drops = list_drops(warehouse.drops)
    known = set(context.instance.get_dynamic_partitions(drops_partitions.name))
    new_keys = [k for k in drops if k not in known]
    # The run key carries the drop's fingerprint: an unchanged drop is never run twice, a rewritten one is.
    requests = [dg.RunRequest(run_key=f"{key}:{fingerprint(path)}", partition_key=key) for key, path in drops.items()]
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[drops_partitions.build_add_request(new_keys)] if new_keys else [],
    )
