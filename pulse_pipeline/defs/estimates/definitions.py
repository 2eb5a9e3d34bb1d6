"""The estimates stage: each experiment's effects by every method, what surrounds them (split check, feature
differences, label shift, subgroups, power, benchmarks) and the on-demand coverage validation."""

import dagster as dg

from ...paths import PulseHome
from . import ask_policy, assets, benchmarks, conclusions, diagnostics, guardrails, history
from .resources import estimates_resource

MODULES = [assets, benchmarks, diagnostics, history, ask_policy, conclusions, guardrails]


def definitions(home: PulseHome) -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_modules(MODULES),
        asset_checks=dg.load_asset_checks_from_modules(MODULES),
        resources={"estimates": estimates_resource(home)},
    )
