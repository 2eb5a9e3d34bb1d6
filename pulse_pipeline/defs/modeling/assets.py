"""Modeling tables: cross-validated metrics per family (the paper's Table 2), cross-fit predictions for every
session with the fold models' training sets, and permutation importance of the chosen model.

One step writes them all (``models``): the cross-fit is seed 42's cross-validation fits again (same folds, features
and model seeds), so the step keeps those fits and only predicts the unrated sessions with them
(``stack.crossfit_from_fits``), and the features and the users' text are loaded and vectorized once. As two steps
the cross-fit refitted every family and the text vectorizer was fitted twice. The unrated sessions' text is
vectorized and predicted ``data.UNRATED_CHUNK`` sessions at a time (``data.unrated_chunks``): every session's
TF-IDF rows at once would take gigabytes at ten times the paper's scale."""

import dagster as dg

from ... import tables
from ...modeling.comparison import (
    FLOOR_MAX_LABELS,
    ModelComparison,
    compare_models,
    load_judge_agreement,
    table_2,
)
from ...modeling.data import load_modeling_data, unrated_chunks
from ...modeling.predictions import CROSSFIT_SEED, CrossFitTables, crossfit_tables
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import SESSION_FEATURES_KEY, key, table_spec
from .resources import ModelingResource

KINDS = ("duckdb", "scikit-learn")
INPUTS = [SESSION_FEATURES_KEY, tables.SESSION_LABELS, tables.JUDGE_SCORES]
CROSSFIT_TABLES = (
    tables.PREDICTIONS,
    tables.FOLD_TRAINING,
    tables.FEATURE_IMPORTANCE,
    tables.TEXT_FOLD_TRAINING,
    tables.TEXT_TERMS,
)
NO_CHOSEN_MODEL = "skipped: no model was chosen (see modeling/cv_metrics)"


@dg.multi_asset(
    specs=[dg.AssetSpec(**table_spec(tables.CV_METRICS, INPUTS, "modeling", KINDS))]
    + [dg.AssetSpec(**table_spec(t, [tables.CV_METRICS, *INPUTS], "modeling", KINDS)) for t in CROSSFIT_TABLES],
    name="models",
)
def models(context: dg.AssetExecutionContext, warehouse: WarehouseResource, modeling: ModelingResource):
    """Cross-validate every configured family (Table 2), choose one, then cross-fit it for every session: one
    model is fit across all experiment arms, as the paper does (the arms share users, tasks and the agent's
    scaffold; a model per arm would have a fraction of the labels)."""
    with warehouse.warehouse() as wh:
        data = load_modeling_data(wh, text_of="rated")  # the unrated sessions' text: a chunk at a time, below
        comparison = compare_models(
            data,
            load_judge_agreement(wh),
            families=modeling.families,
            seeds=modeling.seeds,
            folds=modeling.folds,
            choose_by=modeling.choose_by,
            say=context.log.info,
            keep_seed=CROSSFIT_SEED,
            seed_rows=modeling.seed_rows,
        )
        wh.replace(tables.CV_METRICS, comparison.rows, nan_as_null=True)
        result = None
        if comparison.chosen is not None:
            result = crossfit_tables(
                data,
                comparison.chosen.family,
                modeling.folds,
                context.log.info,
                families=modeling.families,
                kept=comparison.kept,
                unrated=unrated_chunks(wh, data),
            )
        wh.replace(tables.PREDICTIONS, [] if result is None else result.predictions)
        wh.replace(tables.FOLD_TRAINING, [] if result is None else result.fold_training)
        wh.replace(tables.FEATURE_IMPORTANCE, [] if result is None else result.importance)
        wh.replace(tables.TEXT_FOLD_TRAINING, [] if result is None else result.text_fold_training)
        wh.replace(tables.TEXT_TERMS, [] if result is None else result.text_terms)
    if result is None:
        context.log.warning(comparison.skipped)
        yield dg.MaterializeResult(asset_key=key(tables.CV_METRICS), metadata={"skipped": comparison.skipped})
        for t in CROSSFIT_TABLES:
            yield dg.MaterializeResult(asset_key=key(t), metadata={"skipped": NO_CHOSEN_MODEL})
        return
    yield _cv_metrics_result(context, comparison, modeling)
    yield from _crossfit_results(comparison.chosen.family, result)


def _cv_metrics_result(
    context: dg.AssetExecutionContext, comparison: ModelComparison, modeling: ModelingResource
) -> dg.MaterializeResult:
    chosen = comparison.chosen
    if comparison.floor:
        context.log.warning(comparison.floor)
    return dg.MaterializeResult(
        asset_key=key(tables.CV_METRICS),
        metadata={
            "dagster/row_count": len(comparison.rows),
            "chosen_model": chosen.family,
            "chosen_by": modeling.choose_by,
            **{f"chosen_{m.name}": float(m.mean) for m in chosen.metrics},  # numeric: the UI plots them over runs
            "rated_sessions": chosen.n_labeled,  # what the chosen family was cross-validated on
            "floor": comparison.floor or f"none: a family beats the constant or >= {FLOOR_MAX_LABELS} ratings",
            "table_2": dg.MetadataValue.md(markdown_table(table_2(comparison.rows))),
        },
    )


def _crossfit_results(family: str, result: CrossFitTables):
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
