"""Benchmark correlation: per task cluster, rating differences against benchmark score differences."""

from pathlib import Path

import dagster as dg
import polars as pl

from ... import tables
from ...estimates.benchmarks import benchmark_correlation, read_benchmarks
from ...features.wide import option_column
from ..features.resources import AnnotatorResource
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import SESSION_FEATURES_KEY, key, table_spec
from .assets import EstimatesResource

CLUSTER_FEATURE = "development_cluster"


def cluster_ratings(wh, clusters: list[str]) -> pl.DataFrame:
    """session_id, variant, cluster, label: one row per rated, assigned session and development cluster it is in."""
    have = {
        r[0]
        for r in wh.con.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = 'features' AND table_name = 'session_features'"
        ).fetchall()
    }  # empty when the feature stage has not run: then no session is in any cluster
    parts = [
        f"SELECT a.session_id, a.variant, ? AS cluster, l.label FROM staging.assignments a"
        f" JOIN staging.session_labels l USING (session_id)"
        f' JOIN features.session_features f USING (session_id) WHERE f."{col}" = 1'
        for col in (option_column(CLUSTER_FEATURE, c) for c in clusters)
        if col in have
    ]
    names = [c for c in clusters if option_column(CLUSTER_FEATURE, c) in have]
    if not parts:
        return pl.DataFrame(schema={"session_id": pl.Utf8, "variant": pl.Utf8, "cluster": pl.Utf8, "label": pl.Float64})
    return wh.frame(" UNION ALL ".join(parts), names)


def rejected_rows(problems: pl.DataFrame, schema) -> pl.DataFrame:
    """Benchmark-file lines that could not be used, as ``rejected`` points (so none is silently lost)."""
    return pl.DataFrame(
        [
            {"benchmark": raw, "status": "rejected", "reason": f"benchmarks.csv line {line}: {reason}"}
            for line, raw, reason in problems.select("line", "raw", "reason").iter_rows()
        ],
        schema=schema,
    )


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            **table_spec(t, [tables.STAGING_ASSIGNMENTS, tables.SESSION_LABELS, SESSION_FEATURES_KEY], "estimates")
        )
        for t in (tables.BENCHMARK_POINTS, tables.BENCHMARK_CORRELATION)
    ]
)
def benchmark_tables(warehouse: WarehouseResource, estimates: EstimatesResource, annotator: AnnotatorResource):
    """ΔH per (comparison, cluster) from the ratings joined to ΔB from ``PULSE_HOME/benchmarks.csv``."""
    rubric = annotator.rubric()
    benchmarks, problems = read_benchmarks(Path(estimates.benchmarks_path), rubric)
    clusters = list(rubric.get(CLUSTER_FEATURE).options)
    with warehouse.warehouse() as wh:
        ratings = cluster_ratings(wh, clusters)
        points, summary = benchmark_correlation(benchmarks, ratings, min_ratings=estimates.benchmark_min_ratings)
        points = pl.concat([points, rejected_rows(problems, points.schema)], how="vertical")
        for t, frame in ((tables.BENCHMARK_POINTS, points), (tables.BENCHMARK_CORRELATION, summary)):
            wh.replace_rows(t, frame.fill_nan(None))  # NaN -> NULL: undefined, the note says why
    yield dg.MaterializeResult(
        asset_key=key(tables.BENCHMARK_POINTS),
        metadata={
            "dagster/row_count": points.height,
            "points_used": int((points["status"] == "used").sum()),
            "rejected_file_lines": problems.height,
        },
    )
    yield dg.MaterializeResult(
        asset_key=key(tables.BENCHMARK_CORRELATION),
        metadata={"dagster/row_count": summary.height, "correlation": dg.MetadataValue.md(markdown_table(summary))},
    )


@dg.asset_check(
    asset=key(tables.BENCHMARK_POINTS),
    blocking=False,
    description="Warns when lines of benchmarks.csv could not be used (each is a 'rejected' point with its reason).",
)
def benchmark_file_is_clean(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse(publish_after=False) as wh:
        reasons = [
            r
            for (r,) in wh.con.execute(
                "SELECT reason FROM estimates.benchmark_points WHERE status = 'rejected' ORDER BY reason"
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
