"""Modeling tables: cross-validated metrics per family (the paper's Table 2), cross-fit predictions for every
session with the fold models' training sets, and permutation importance of the chosen model."""

import dagster as dg

from ... import tables
from ...modeling.comparison import FLOOR_MAX_LABELS, compare_models, load_chosen_family, load_judge_agreement, table_2
from ...modeling.data import load_modeling_data
from ...modeling.predictions import crossfit_tables
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import SESSION_FEATURES_KEY, key, table_spec
from .resources import ModelingResource

KINDS = ("duckdb", "scikit-learn")


@dg.asset(
    **table_spec(
        tables.CV_METRICS, [SESSION_FEATURES_KEY, tables.SESSION_LABELS, tables.JUDGE_SCORES], "modeling", KINDS
    )
)
def cv_metrics(context: dg.AssetExecutionContext, warehouse: WarehouseResource, modeling: ModelingResource):
    with warehouse.warehouse() as wh:
        comparison = compare_models(
            load_modeling_data(wh, text_of="rated"),  # cross-validation reads the rated sessions only
            load_judge_agreement(wh),
            families=modeling.families,
            seeds=modeling.seeds,
            folds=modeling.folds,
            choose_by=modeling.choose_by,
            say=context.log.info,
        )
        wh.replace(tables.CV_METRICS, comparison.rows, nan_as_null=True)
    if comparison.chosen is None:
        context.log.warning(comparison.skipped)
        return dg.MaterializeResult(metadata={"skipped": comparison.skipped})
    chosen = comparison.chosen
    if comparison.floor:
        context.log.warning(comparison.floor)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(comparison.rows),
            "chosen_model": chosen.family,
            "chosen_by": modeling.choose_by,
            **{f"chosen_{m.name}": float(m.mean) for m in chosen.metrics},  # numeric: the UI plots them over runs
            "rated_sessions": chosen.n_labeled,  # what the chosen family was cross-validated on
            "floor": comparison.floor or f"none: a family beats the constant or >= {FLOOR_MAX_LABELS} ratings",
            "table_2": dg.MetadataValue.md(markdown_table(table_2(comparison.rows))),
        }
    )


CROSSFIT_TABLES = (
    tables.PREDICTIONS,
    tables.FOLD_TRAINING,
    tables.FEATURE_IMPORTANCE,
    tables.TEXT_FOLD_TRAINING,
    tables.TEXT_TERMS,
)
NO_CHOSEN_MODEL = "skipped: no model was chosen (see modeling/cv_metrics)"


@dg.multi_asset(
    specs=[
        dg.AssetSpec(**table_spec(t, [tables.CV_METRICS, SESSION_FEATURES_KEY], "modeling", KINDS))
        for t in CROSSFIT_TABLES
    ],
    name="crossfit",
)
def crossfit(context: dg.AssetExecutionContext, warehouse: WarehouseResource, modeling: ModelingResource):
    """Cross-fit predictions with the chosen family: one model is fit across all experiment arms, as the paper
    does (the arms share users, tasks and the agent's scaffold; a model per arm would have a fraction of the labels)."""
    with warehouse.warehouse() as wh:
        family = load_chosen_family(wh)
        if family is None:
            for t in CROSSFIT_TABLES:
                wh.replace(t, [])
                yield dg.MaterializeResult(asset_key=key(t), metadata={"skipped": NO_CHOSEN_MODEL})
            return
        data = load_modeling_data(wh)
        result = crossfit_tables(data, family, modeling.folds, context.log.info, families=modeling.families)
        wh.replace(tables.PREDICTIONS, result.predictions)
        wh.replace(tables.FOLD_TRAINING, result.fold_training)
        wh.replace(tables.FEATURE_IMPORTANCE, result.importance)
        wh.replace(tables.TEXT_FOLD_TRAINING, result.text_fold_training)
        wh.replace(tables.TEXT_TERMS, result.text_terms)
    yield dg.MaterializeResult(
        asset_key=key(tables.PREDICTIONS),
        metadata={
            "dagster/row_count": result.predictions.height,
            "model": family,
            "oof_pearson": result.oof_pearson,  # numeric: the UI plots it over runs
            "rated_sessions": int(result.predictions["labeled"].sum()),  # what the fold models were fit on
            **({"note": result.note} if result.note else {}),
        },
    )
    yield dg.MaterializeResult(
        asset_key=key(tables.FOLD_TRAINING), metadata={"dagster/row_count": result.fold_training.height}
    )
    top = result.importance.select("feature", "importance_mean", "importance_sd")
    yield dg.MaterializeResult(
        asset_key=key(tables.FEATURE_IMPORTANCE),
        metadata={
            "dagster/row_count": result.importance.height,
            "top_features": dg.MetadataValue.md(markdown_table(top, max_rows=15)),
        },
    )
    yield dg.MaterializeResult(
        asset_key=key(tables.TEXT_FOLD_TRAINING), metadata={"dagster/row_count": result.text_fold_training.height}
    )
    # counts only: the terms are users' words, they stay in the warehouse
    yield dg.MaterializeResult(
        asset_key=key(tables.TEXT_TERMS), metadata={"dagster/row_count": result.text_terms.height}
    )
