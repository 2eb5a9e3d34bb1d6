"""The staging stage: sessions (later drops win), work segments, segment ratings, asks, labels and assignments."""

import dagster as dg

from . import asks, assets, checks


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_modules([assets, asks]),
        asset_checks=dg.load_asset_checks_from_modules([checks]),
    )
