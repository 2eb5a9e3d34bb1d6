"""The modeling stage: every model family cross-validated (the paper's Table 2) and cross-fit predictions."""

import dagster as dg

from . import agreement, assets, checks
from .resources import modeling_resource


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_modules([assets, agreement]),
        asset_checks=dg.load_asset_checks_from_modules([checks, agreement]),
        resources={"modeling": modeling_resource()},
    )
