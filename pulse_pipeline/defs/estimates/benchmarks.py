"""Benchmark correlation: per task cluster, rating differences against benchmark score differences."""

import dagster as dg

from ... import tables
from ...estimates.benchmarks import build_benchmark_tables
from ..features.resources import AnnotatorResource
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import key, table_spec
from .resources import EstimatesResource
from .sessions import SESSIONS_DEPS, run_sessions


@dg.multi_asset(
    specs=[
        dg.AssetSpec(**table_spec(t, SESSIONS_DEPS, "estimates"))
        for t in (tables.BENCHMARK_POINTS, tables.BENCHMARK_CORRELATION)
    ]
)
def benchmark_tables(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    estimates: EstimatesResource,
    annotator: AnnotatorResource,
):
    """ΔH per (comparison, cluster) from the ratings joined to ΔB from ``benchmarks.csv`` (PULSE_HOME's, else the
    shipped default)."""
    path, rubric = estimates.benchmarks_file().path, annotator.rubric()
    with warehouse.warehouse() as wh:
        result = build_benchmark_tables(
            path,
            rubric,
            run_sessions(context.run_id, warehouse.database, wh, estimates.arms_from()),
            estimates.benchmark_min_ratings,
        )
        wh.replace(tables.BENCHMARK_POINTS, result.points, nan_as_null=True)  # NaN: undefined, the note says why
        wh.replace(tables.BENCHMARK_CORRELATION, result.correlation, nan_as_null=True)
    yield dg.MaterializeResult(
        asset_key=key(tables.BENCHMARK_POINTS),
        metadata={
            "dagster/row_count": result.points.height,
            "points_used": int((result.points["status"] == "used").sum()),
            "rejected_file_lines": result.rejected_lines,
            **estimates.benchmarks_metadata(),
        },
    )
    yield dg.MaterializeResult(
        asset_key=key(tables.BENCHMARK_CORRELATION),
        metadata={
            "dagster/row_count": result.correlation.height,
            **estimates.benchmarks_metadata(),
            "correlation": dg.MetadataValue.md(markdown_table(result.correlation)),
        },
    )


@dg.asset_check(
    asset=key(tables.BENCHMARK_POINTS),
    blocking=False,
    description="Warns when lines of benchmarks.csv could not be used: with a rubric that has no development_cluster"
    " feature every line is a 'rejected' point with that reason (any other bad line stops the run before it starts).",
)
def benchmark_file_is_clean(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        reasons = [
            r
            for (r,) in wh.con.execute(
                f"SELECT reason FROM {tables.BENCHMARK_POINTS.qualified} WHERE status = 'rejected' ORDER BY reason"
            ).fetchall()
        ]
    return dg.AssetCheckResult(
        passed=not reasons,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(reasons[:5]) + (f" (and {len(reasons) - 5} more)" if len(reasons) > 5 else "")
        if reasons
        else None,
        metadata={"rejected_lines": len(reasons)},
    )
