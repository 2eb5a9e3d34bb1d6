"""PULSE's conclusion per comparison (``estimates.conclusions``), read off the effects and power tables; its
metadata shows each sentence in the UI."""

import dagster as dg

from ... import tables
from ...estimates.conclusions import conclusion_rows
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import table_spec

EFFECTS_IN_ORDER = (
    f"SELECT * FROM {tables.EXPERIMENT_EFFECTS.qualified} ORDER BY experiment, treatment NULLS FIRST, method"
)
MAX_SENTENCES = 6  # the first comparisons' sentences as entries of their own; every one is in the table entry


@dg.asset(**table_spec(tables.CONCLUSIONS, [tables.EXPERIMENT_EFFECTS, tables.POWER], "estimates"))
def conclusions(warehouse: WarehouseResource) -> dg.MaterializeResult:
    with warehouse.warehouse() as wh:
        effects = wh.frame(EFFECTS_IN_ORDER).to_dicts()
        power = wh.frame(f"SELECT * FROM {tables.POWER.qualified}").to_dicts()
        rows = conclusion_rows(effects, power)
        wh.replace(tables.CONCLUSIONS, rows, nan_as_null=True)
        shown = wh.frame(f"""
            SELECT experiment, treatment, control, verdict, method, sentence
            FROM {tables.CONCLUSIONS.qualified} ORDER BY experiment, treatment NULLS FIRST""")
    compared = [r for r in rows if r.treatment is not None]
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            "comparisons": len(compared),
            "with_a_difference": sum(1 for r in compared if r.direction is not None),
            "conclusions": dg.MetadataValue.md(markdown_table(shown, max_rows=60)),
            **{
                f"{r.experiment}: {r.treatment} vs {r.control}": dg.MetadataValue.text(r.sentence)
                for r in compared[:MAX_SENTENCES]
            },
        }
    )
