"""Around the estimate: sample-ratio check, feature differences, label shift, subgroup effects, power."""

import dagster as dg

from ... import tables
from ...estimates.allocation import allocation_rows
from ...estimates.experiments import experiments_of, read_splits
from ...estimates.feature_comparisons import feature_comparison_rows
from ...estimates.label_shift import (
    WARN_ABOVE,
    WHAT_IT_MEANS,
    WHAT_THE_REPORT_DOES,
    Shift,
    describe_shift,
    label_shift_rows,
    shift_finding,
)
from ...estimates.methods import NO_METHOD
from ...estimates.power import power_rows
from ...estimates.sessions import arm_sizes, assignments, feature_names, oof_rho_by_comparison
from ...estimates.srm import ALARM_P, srm_rows, unit_counts
from ...estimates.strata import strata_columns
from ...estimates.subgroups import subgroup_effect_rows
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import key, table_spec
from .resources import EstimatesResource
from .sessions import SESSIONS_DEPS, run_sessions


def _asset(table: tables.Table, deps: list) -> dg.asset:
    return dg.asset(**table_spec(table, deps, "estimates"))


@_asset(tables.SRM_CHECK, [tables.STAGING_ASSIGNMENTS])
def srm_check(context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource):
    splits = read_splits(estimates.experiments_file().path)  # checked before the run started (settings_files)
    with warehouse.warehouse() as wh:
        # counted in the randomized unit: users when experiments.toml says so or the assignments show it
        units = unit_counts(assignments(wh), estimates.units())
        rows = srm_rows(arm_sizes(wh), splits, units)
        wh.replace(tables.SRM_CHECK, rows, nan_as_null=True)
        shown = wh.frame(f"SELECT * EXCLUDE (note) FROM {tables.SRM_CHECK.qualified} ORDER BY experiment, arm")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            **estimates.experiments_metadata(),
            "srm": dg.MetadataValue.md(markdown_table(shown, max_rows=30)),
        }
    )


@dg.asset_check(asset=key(tables.SRM_CHECK), blocking=False, description=f"Warns at p < {ALARM_P}.")
def split_matches_design(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        bad = wh.con.execute(
            f"SELECT DISTINCT experiment, p_value FROM {tables.SRM_CHECK.qualified} WHERE mismatch ORDER BY 1"
        ).fetchall()
    why = [f"{e} (p = {p:.2g})" if p is not None else f"{e} (sessions in an arm outside the split)" for e, p in bad]
    return dg.AssetCheckResult(
        passed=not bad,
        severity=dg.AssetCheckSeverity.WARN,
        description="sample-ratio mismatch: " + ", ".join(why) if bad else None,
        metadata={"mismatched_experiments": len(bad)},
    )


@_asset(tables.FEATURE_COMPARISONS, SESSIONS_DEPS)
def feature_comparisons(context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource):
    with warehouse.warehouse() as wh:
        sessions = run_sessions(context.run_id, warehouse.database, wh, estimates.arms_from())
        exps = experiments_of(sessions, estimates.controls())
        rows = feature_comparison_rows(sessions, feature_names(sessions), exps)
        wh.replace(tables.FEATURE_COMPARISONS, rows, nan_as_null=True)
        top = wh.frame(f"""
            SELECT experiment, treatment, control, population, feature, round(mean_treatment, 4) AS mean_t,
                   round(mean_control, 4) AS mean_c, round(p_bh, 4) AS p_bh
            FROM {tables.FEATURE_COMPARISONS.qualified} WHERE p_bh < 0.05
            ORDER BY experiment, treatment, population, p_bh""")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            "significant_after_bh": top.height,
            "differences": dg.MetadataValue.md(markdown_table(top, max_rows=40)),
        }
    )


@_asset(tables.LABEL_SHIFT, SESSIONS_DEPS)
def label_shift(context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource):
    with warehouse.warehouse() as wh:
        sessions = run_sessions(context.run_id, warehouse.database, wh, estimates.arms_from())
        rows = label_shift_rows(sessions, feature_names(sessions))
        wh.replace(tables.LABEL_SHIFT, rows, nan_as_null=True)
        top = wh.frame(f"""
            SELECT feature, round(mean_rated, 3) AS mean_rated, round(mean_unrated, 3) AS mean_unrated,
                   round(rank_biserial, 3) AS rbc FROM {tables.LABEL_SHIFT.qualified}
            WHERE rank_biserial IS NOT NULL
            ORDER BY abs(rank_biserial) DESC""")
    return dg.MaterializeResult(
        metadata={"dagster/row_count": len(rows), "largest_shifts": dg.MetadataValue.md(markdown_table(top))}
    )


@dg.asset_check(
    asset=key(tables.LABEL_SHIFT),
    blocking=False,
    description=(
        "Do rated sessions look like unrated ones? PPI++ assumes they do. Warns when any feature's rank-biserial"
        f" correlation between rated and unrated sessions is beyond ±{WARN_ABOVE} (0: alike; ±1: every rated"
        " session above, or below, every unrated one). The result names each such feature, by how much it"
        " differs, what that means for PPI++ (prefer AIPW, which corrects for who rates) and what the report does."
    ),
)
def rated_sessions_are_representative(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.warehouse() as wh:
        found = wh.frame(f"""
            SELECT feature, rank_biserial, mean_rated, mean_unrated, n_rated, n_unrated, p_bh
            FROM {tables.LABEL_SHIFT.qualified} WHERE rank_biserial IS NOT NULL
            ORDER BY abs(rank_biserial) DESC, feature""")
    shifts = [
        Shift(r["feature"], r["rank_biserial"], r["mean_rated"], r["mean_unrated"]) for r in found.iter_rows(named=True)
    ]
    beyond = found.filter(found["rank_biserial"].abs() > WARN_ABOVE)
    shown = beyond if beyond.height else found.head(1)
    finding = shift_finding(shifts)
    return dg.AssetCheckResult(
        passed=beyond.height == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description=finding,
        metadata={
            "shifted_features": beyond.height,
            "threshold": WARN_ABOVE,
            "finding": dg.MetadataValue.text(finding),
            **({"largest_shift": describe_shift(shifts[0])} if shifts else {}),
            # the features beyond the threshold, or the largest shift when none is
            "shifts": dg.MetadataValue.md(markdown_table(shown, max_rows=20)),
            "what_it_means_for_ppi": dg.MetadataValue.text(WHAT_IT_MEANS),
            "what_the_report_does": dg.MetadataValue.text(WHAT_THE_REPORT_DOES),
        },
    )


@_asset(tables.SEGMENT_EFFECTS, SESSIONS_DEPS)
def segment_effects(context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource):
    with warehouse.warehouse() as wh:
        sessions = run_sessions(context.run_id, warehouse.database, wh, estimates.arms_from())
        exps = experiments_of(sessions, estimates.controls())
        rows = subgroup_effect_rows(sessions, exps, estimates.segment_min_ratings)
        wh.replace(tables.SEGMENT_EFFECTS, rows, nan_as_null=True)
    estimated = sum(1 for r in rows if r.method != NO_METHOD)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            "estimated_rows": estimated,
            "min_ratings_per_arm": estimates.segment_min_ratings,
        }
    )


@_asset(tables.POWER, [*SESSIONS_DEPS, tables.EXPERIMENT_EFFECTS])
def power(context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource):
    with warehouse.warehouse() as wh:
        sessions = run_sessions(context.run_id, warehouse.database, wh, estimates.arms_from(), with_features=False)
        exps = experiments_of(sessions, estimates.controls())
        rows = power_rows(sessions, exps, oof_rho_by_comparison(wh), estimates.target_effect)
        wh.replace(tables.POWER, rows, nan_as_null=True)
        shown = wh.frame(f"""
            SELECT experiment, treatment, round(mde_naive, 4) AS mde_naive, round(mde_ppi, 4) AS mde_ppi,
                   labels_per_arm_naive, labels_per_arm_ppi FROM {tables.POWER.qualified} ORDER BY 1, 2""")
    return dg.MaterializeResult(
        metadata={"dagster/row_count": len(rows), "power": dg.MetadataValue.md(markdown_table(shown, max_rows=30))}
    )


@_asset(tables.ASK_ALLOCATION, [*SESSIONS_DEPS])
def ask_allocation(context: dg.AssetExecutionContext, warehouse: WarehouseResource, estimates: EstimatesResource):
    """The share of asks per stratum that minimises the width (Neyman), per experiment: ``pulse power
    --experiments`` shows it."""
    with warehouse.warehouse() as wh:
        sessions = run_sessions(context.run_id, warehouse.database, wh, estimates.arms_from())
        exps = experiments_of(sessions, estimates.controls())
        columns = strata_columns(estimates.experiments_file().path, [e.name for e in exps])
        rows = allocation_rows(sessions, exps, columns, estimates.target_effect)
        wh.replace(tables.ASK_ALLOCATION, rows, nan_as_null=True)
        shown = wh.frame(f"""
            SELECT experiment, stratum, round(residual_sd, 3) AS residual_sd, round(share_uniform, 3) AS uniform,
                   round(share_neyman, 3) AS neyman, round(ratings_saved, 3) AS ratings_saved
            FROM {tables.ASK_ALLOCATION.qualified} ORDER BY 1, 2""")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            "allocation": dg.MetadataValue.md(markdown_table(shown, max_rows=40)),
        }
    )
