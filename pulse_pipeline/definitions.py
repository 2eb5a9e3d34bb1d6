"""The Dagster code location: each stage's definitions (``defs/<stage>/definitions.py``) merged, plus what spans
stages: the warehouse, the jobs, automation, the publish sensor (``defs/publish.py``) and the nightly schedule.
Nothing else happens here: importing this module creates no folder and copies no file (the CLI prepares
PULSE_HOME, see ``paths.PulseHome.ensure``)."""

from __future__ import annotations

import dagster as dg

from .defs.estimates import definitions as estimates
from .defs.features import definitions as features
from .defs.ingest import definitions as ingest
from .defs.ingest.sensors import DROP_JOB
from .defs.modeling import definitions as modeling
from .defs.publish import publish_sensor
from .defs.report import definitions as report
from .defs.resources import warehouse_resource
from .defs.staging import definitions as staging
from .paths import PulseHome
from .preflight import check_settings

# Coverage validation (20 minutes) runs only when asked for: `pulse validate`.
ON_DEMAND = dg.AssetSelection.groups("validation")
DERIVED = (
    dg.AssetSelection.all()
    - dg.AssetSelection.assets(ingest.assets.raw_drop).required_multi_asset_neighbors()
    - ON_DEMAND
)
DOWNSTREAM_JOB = "refresh_downstream"
# The drop sensor's run (defs/ingest/sensors.py): the drop's partition, then every derived table, so that the state
# is whole, and published, when the run ends.
DROP_SELECTION = dg.AssetSelection.assets(ingest.assets.raw_drop) | DERIVED


def _spanning_stages(home: PulseHome) -> dg.Definitions:
    downstream_job = dg.define_asset_job(
        DOWNSTREAM_JOB, selection=DERIVED, description="Rebuild every table derived from the raw tables."
    )
    drop_job = dg.define_asset_job(
        DROP_JOB,
        selection=DROP_SELECTION,
        description="Read one drop into the raw tables, then refresh every table derived from them: the drop "
        "sensor's run, after which the publish sensor finds the state whole and publishes it.",
    )
    return dg.Definitions(
        jobs=[downstream_job, drop_job],
        sensors=[
            dg.AutomationConditionSensorDefinition(
                "pulse_automation",
                target=dg.AssetSelection.all() - ON_DEMAND,
                default_status=dg.DefaultSensorStatus.RUNNING,
                minimum_interval_seconds=30,
            ),
            publish_sensor,
        ],
        schedules=[
            dg.ScheduleDefinition(
                name="nightly_refresh",
                job=downstream_job,
                cron_schedule="0 0 * * *",  # UTC: the day's model refit (modeling/reuse.py) falls here, not on a drop
                default_status=dg.DefaultScheduleStatus.RUNNING,
                description=(
                    "Rebuild derived tables at midnight UTC even if no drop came; the models refit on the first run "
                    "of a UTC day, so it is this one, not the day's first drop."
                ),
            ),
        ],
        resources={"warehouse": warehouse_resource(home)},
        executor=dg.in_process_executor,
    )


def build_definitions(home: PulseHome) -> dg.Definitions:
    """Every stage's definitions for ``home``, after its settings files and ``PULSE_*`` variables are checked
    (``preflight.check_settings``): a broken file stops the code location from loading, and with it every run
    ``pulse ui`` launches (each run loads the definitions anew), in one line naming the file, before any work."""
    check_settings(home)
    return dg.Definitions.merge(
        ingest.definitions(),
        staging.definitions(),
        features.definitions(home),
        modeling.definitions(),
        estimates.definitions(home),
        report.definitions(home),
        _spanning_stages(home),
    )


defs = build_definitions(PulseHome.from_env())
