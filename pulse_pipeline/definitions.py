"""The Dagster code location: assembles the stages in ``defs/``; nothing else happens here."""

from __future__ import annotations

import dagster as dg

from .defs.estimates import assets as estimate_assets
from .defs.estimates import benchmarks as benchmark_assets
from .defs.estimates import diagnostics as diagnostic_assets
from .defs.features import assets as feature_assets
from .defs.features.checks import feature_checks
from .defs.features.resources import annotator_resource
from .defs.ingest.assets import raw_drop
from .defs.ingest.sensors import INGEST_JOB, drop_sensor
from .defs.modeling import assets as modeling_assets
from .defs.modeling.checks import modeling_checks
from .defs.modeling.resources import modeling_resource
from .defs.resources import warehouse_resource
from .defs.staging import assets as staging_assets
from .defs.staging.checks import staging_checks
from .paths import PulseHome

# Coverage validation (20 minutes) runs only when asked for: `pulse validate`.
ON_DEMAND = dg.AssetSelection.groups("validation")
DERIVED = dg.AssetSelection.all() - dg.AssetSelection.assets(raw_drop).required_multi_asset_neighbors() - ON_DEMAND
DOWNSTREAM_JOB = "refresh_downstream"


def build_definitions(home: PulseHome) -> dg.Definitions:
    home.ensure()
    ingest_job = dg.define_asset_job(
        INGEST_JOB, selection=dg.AssetSelection.assets(raw_drop), description="Read one drop into the raw tables."
    )
    downstream_job = dg.define_asset_job(
        DOWNSTREAM_JOB, selection=DERIVED, description="Rebuild every table derived from the raw tables."
    )
    return dg.Definitions(
        assets=[
            raw_drop,
            *dg.load_assets_from_modules(
                [staging_assets, feature_assets, modeling_assets, estimate_assets, diagnostic_assets, benchmark_assets]
            ),
        ],
        asset_checks=[
            *staging_checks,
            *feature_checks,
            *modeling_checks,
            estimate_assets.intervals_are_not_too_good,
            *diagnostic_assets.DIAGNOSTIC_CHECKS,
            benchmark_assets.benchmark_file_is_clean,
        ],
        jobs=[ingest_job, downstream_job],
        sensors=[
            drop_sensor,
            dg.AutomationConditionSensorDefinition(
                "pulse_automation",
                target=dg.AssetSelection.all() - ON_DEMAND,
                default_status=dg.DefaultSensorStatus.RUNNING,
                minimum_interval_seconds=30,
            ),
        ],
        schedules=[
            dg.ScheduleDefinition(
                name="nightly_refresh",
                job=downstream_job,
                cron_schedule="0 3 * * *",
                default_status=dg.DefaultScheduleStatus.RUNNING,
                description="Safety net: rebuild derived tables nightly even if no drop came.",
            ),
        ],
        resources={
            "warehouse": warehouse_resource(home),
            "annotator": annotator_resource(),
            "modeling": modeling_resource(),
            "estimates": estimate_assets.estimates_resource(home.root),
        },
        executor=dg.in_process_executor,
    )


defs = build_definitions(PulseHome.from_env())
