"""The ingest stage: the drop sensor turns each drop into a partition, and one run reads it into the raw tables."""

import dagster as dg

from . import assets, pull_sensor, sensors

ingest_job = dg.define_asset_job(
    sensors.INGEST_JOB,
    selection=dg.AssetSelection.assets(assets.raw_drop),
    description="Read one drop into the raw tables.",
)


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_modules([assets]),
        jobs=[ingest_job],
        sensors=[sensors.drop_sensor, pull_sensor.langfuse_pull_sensor()],
    )
