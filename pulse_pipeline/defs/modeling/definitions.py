"""The modeling stage: every model family cross-validated (the paper's Table 2) and cross-fit predictions."""

import dagster as dg

from . import assets, checks
from .resources import modeling_resource


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_modules([assets]),
        asset_checks=dg.load_asset_checks_from_modules([checks]),
        resources={"modeling": modeling_resource()},
    )
