"""The report stage: the HTML report over the estimates and modeling tables, at the end of the graph."""

import dagster as dg

from ...paths import PulseHome
from . import assets


def definitions(home: PulseHome) -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_modules([assets]),
        asset_checks=dg.load_asset_checks_from_modules([assets]),
        resources={
            "report": assets.ReportResource(folder=str(home.report), figure_cache=str(home.work_db.parent / "figures"))
        },
    )
