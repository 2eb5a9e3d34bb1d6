"""PULSE's conclusion and decision per comparison (``estimates.conclusions``), read off the effects, power,
history and guardrails tables; its metadata shows each decision and sentence in the UI."""

import dagster as dg

from ... import tables
from ...estimates.conclusions import conclusion_rows
from ...estimates.decisions import DECISIONS
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import table_spec

EFFECTS_IN_ORDER = (
    f"SELECT * FROM {tables.EXPERIMENT_EFFECTS.qualified} ORDER BY experiment, treatment NULLS FIRST, method"
)
GUARDRAILS_IN_ORDER = f"SELECT * FROM {tables.GUARDRAILS.qualified} ORDER BY experiment, treatment, guardrail"
HISTORY_OF_SEQUENCES = f"""
    SELECT experiment, treatment, method, day, cs_low, cs_high FROM {tables.EFFECT_HISTORY.qualified}
    WHERE day IS NOT NULL AND cs_low IS NOT NULL AND cs_high IS NOT NULL"""
MAX_SENTENCES = 6  # the first comparisons' sentences as entries of their own; every one is in the table entry


@dg.asset(
    **table_spec(
        tables.CONCLUSIONS,
        [tables.EXPERIMENT_EFFECTS, tables.POWER, tables.EFFECT_HISTORY, tables.GUARDRAILS],
        "estimates",
    )
)
def conclusions(warehouse: WarehouseResource) -> dg.MaterializeResult:
    with warehouse.warehouse() as wh:
        effects = wh.frame(EFFECTS_IN_ORDER).to_dicts()
        power = wh.frame(f"SELECT * FROM {tables.POWER.qualified}").to_dicts()
        guardrails = wh.frame(GUARDRAILS_IN_ORDER).to_dicts()
        history = wh.frame(HISTORY_OF_SEQUENCES).to_dicts()
        rows = conclusion_rows(effects, power, guardrails, history)
        wh.replace(tables.CONCLUSIONS, rows, nan_as_null=True)
        shown = wh.frame(f"""
            SELECT experiment, treatment, control, decision, verdict, method, guardrails_passed AS passed,
                   guardrails_failed AS failed, guardrails_inconclusive AS inconclusive, sentence
            FROM {tables.CONCLUSIONS.qualified} ORDER BY experiment, treatment NULLS FIRST""")
    compared = [r for r in rows if r.treatment is not None]
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            "comparisons": len(compared),
            "with_a_difference": sum(1 for r in compared if r.direction is not None),
            **{f"decided {d}": sum(1 for r in compared if r.decision == d) for d in DECISIONS},
            "guardrails_failed": sum(r.guardrails_failed for r in compared),
            "conclusions": dg.MetadataValue.md(markdown_table(shown, max_rows=60)),
            **{
                f"{r.experiment}: {r.treatment} vs {r.control}": dg.MetadataValue.md(
                    f"**{r.decision}**: {r.decision_why}\n\n{r.sentence}"
                )
                for r in compared[:MAX_SENTENCES]
            },
        }
    )
