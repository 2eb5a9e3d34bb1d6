"""What every table asset shares: its key and description from the table contract, its group, eager automation."""

from collections.abc import Iterable

import dagster as dg

from .. import tables

EAGER = dg.AutomationCondition.eager()
AUTOMATION_SENSOR = "pulse_automation"  # the sensor that evaluates EAGER (definitions.py), every 30 s
SESSION_FEATURES_KEY = dg.AssetKey(["features", "session_features"])  # built from the rubric: not in the contract


def key(t: tables.Table) -> dg.AssetKey:
    return dg.AssetKey([t.schema, t.name])


def table_spec(
    t: tables.Table, deps: Iterable[tables.Table | dg.AssetKey], group: str, kinds: Iterable[str] = ("duckdb",)
) -> dict:
    """Keyword arguments for ``dg.asset`` or ``dg.AssetSpec`` of the asset that writes table ``t``."""
    return dict(
        key=key(t),
        deps=[key(d) if isinstance(d, tables.Table) else d for d in deps],
        description=t.description,
        group_name=group,
        kinds=set(kinds),
        automation_condition=EAGER,
    )
