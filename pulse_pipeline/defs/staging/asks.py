"""staging.session_asks: the sessions the rating widget was shown to, with the probability it was shown with."""

import dagster as dg

from ... import staging, tables
from ..resources import WarehouseResource
from ..specs import table_spec


@dg.asset(
    **table_spec(
        tables.SESSION_ASKS, [tables.STAGING_SESSIONS, tables.ASKS, tables.EVENTS, tables.WORK_SEGMENTS], "staging"
    )
)
def session_asks(warehouse: WarehouseResource) -> dg.MaterializeResult:
    with warehouse.warehouse() as wh:
        n = staging.build_session_asks(wh)
        answered = wh.count(tables.SESSION_ASKS, "n_answered > 0")
        mixed = wh.count(tables.SESSION_ASKS, "n_probabilities > 1")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": n,
            "dagster/table_name": tables.SESSION_ASKS.qualified,
            "answered_sessions": answered,
            "sessions_with_several_probabilities": mixed,
        }
    )
