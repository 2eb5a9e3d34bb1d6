"""The feature stage: event features, annotations by the configured annotator, the LLM judge, agreement and the
wide session-features table."""

import dagster as dg

from ...paths import PulseHome
from . import assets, checks
from .resources import annotator_resource


def definitions(home: PulseHome) -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_modules([assets]),
        asset_checks=dg.load_asset_checks_from_modules([checks]),
        resources={"annotator": annotator_resource(home=home)},
    )
