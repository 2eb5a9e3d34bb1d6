"""The Langfuse pull sensor: under ``pulse ui`` (the Dagster daemon), ``pulse pull langfuse`` every
PULSE_LANGFUSE_PULL_INTERVAL seconds when the keys are set; the drop it writes is the drop sensor's to load.

A thin shell over ``pull/langfuse.py``. It requests no run: a pull writes a drop into ``PULSE_HOME/drops``, and
the drop sensor makes it a partition and a run, as any drop. Each tick pulls for at most ``TICK_SECONDS`` (a
sensor's evaluation is cut off after Dagster's 60 s timeout; a retry's wait that would pass it stops the tick
too): a larger backlog is pulled over several ticks, each
resuming from the stored cursor and writing what it got. Without keys, or while another pull of the project runs,
the tick is skipped saying why; a refusal (bad keys, Langfuse down past the retries) is logged and skipped, and
the next tick tries again.
"""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg

from ...pull.langfuse import PullBusy, PullError, pull_langfuse
from ...settings import LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY, langfuse_settings
from ..resources import WarehouseResource

SENSOR_NAME = "langfuse_pull_sensor"
TICK_SECONDS = 30  # pulling per tick: with a request's timeout and the drop's writing, under Dagster's 60 s
REQUEST_SECONDS = 15  # a request's timeout in the sensor


def langfuse_pull_sensor() -> dg.SensorDefinition:
    """The sensor, ticking at PULSE_LANGFUSE_PULL_INTERVAL (read when the code location loads)."""

    @dg.sensor(
        name=SENSOR_NAME,
        minimum_interval_seconds=langfuse_settings().interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"When {LANGFUSE_PUBLIC_KEY} and {LANGFUSE_SECRET_KEY} are set, pulls the Langfuse project's new "
            "observations (v2) and scores (v3) every PULSE_LANGFUSE_PULL_INTERVAL seconds into a drop, which the "
            f"drop sensor loads. At most {TICK_SECONDS} s a tick; the stored cursor resumes the next tick."
        ),
    )
    def langfuse_pull(context: dg.SensorEvaluationContext, warehouse: WarehouseResource) -> dg.SkipReason:
        settings = langfuse_settings()
        if not settings.configured:
            return dg.SkipReason(f"{LANGFUSE_PUBLIC_KEY} and {LANGFUSE_SECRET_KEY} are not both set: nothing to pull")
        try:
            report = pull_langfuse(
                Path(warehouse.database).parent,
                warehouse.drops,
                settings,
                deadline=time.monotonic() + TICK_SECONDS,
                timeout=REQUEST_SECONDS,
                say=context.log.info,
            )
        except PullBusy as busy:
            return dg.SkipReason(str(busy))
        except PullError as error:
            context.log.error(f"pulse pull langfuse: {error}")
            return dg.SkipReason(f"the pull stopped: {error}")
        context.log.info(report.line())
        return dg.SkipReason(report.line())

    return langfuse_pull
