"""Modeling tables: cross-validated metrics per family (the paper's Table 2), cross-fit predictions for every
session with the fold models' training sets, and permutation importance of the chosen model."""

import dagster as dg

from ... import tables
from ...modeling.comparison import compare_models, load_judge_agreement, table_2
from ...modeling.crossfit import crossfit_predict, pearson
from ...modeling.data import load_modeling_data
from ...modeling.importance import permutation_importance_oof
from ..markdown import markdown_table
from ..resources import WarehouseResource
from ..specs import SESSION_FEATURES_KEY, key, table_spec
from .resources import ModelingResource


def _skip(wh, reason: str, *which: tables.Table) -> dict:
    for t in which:
        wh.con.execute(f"DELETE FROM {t.qualified}")
    return {"skipped": reason}


KINDS = ("duckdb", "scikit-learn")


@dg.asset(
    **table_spec(
        tables.CV_METRICS, [SESSION_FEATURES_KEY, tables.SESSION_LABELS, tables.JUDGE_SCORES], "modeling", KINDS
    )
)
def cv_metrics(context: dg.AssetExecutionContext, warehouse: WarehouseResource, modeling: ModelingResource):
    with warehouse.warehouse() as wh:
        comparison = compare_models(
            load_modeling_data(wh),
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
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(comparison.rows),
            "chosen_model": chosen.family,
            "chosen_by": modeling.choose_by,
            **{f"chosen_{m.name}": float(m.mean) for m in chosen.metrics},
            "table_2": dg.MetadataValue.md(markdown_table(table_2(comparison.rows))),
        }
    )


@dg.multi_asset(
    specs=[
        dg.AssetSpec(**table_spec(t, [tables.CV_METRICS, SESSION_FEATURES_KEY], "modeling", KINDS))
        for t in (tables.PREDICTIONS, tables.FOLD_TRAINING, tables.FEATURE_IMPORTANCE)
    ],
    name="crossfit",
)
def crossfit(context: dg.AssetExecutionContext, warehouse: WarehouseResource, modeling: ModelingResource):
    """Cross-fit predictions with the chosen family: one model is fit across all experiment arms, as the paper
    does (the arms share users, tasks and the agent's scaffold; a model per arm would have a fraction of the labels)."""
    outputs = (tables.PREDICTIONS, tables.FOLD_TRAINING, tables.FEATURE_IMPORTANCE)
    with warehouse.warehouse() as wh:
        chosen = wh.con.execute("SELECT DISTINCT model FROM modeling.cv_metrics WHERE chosen").fetchone()
        data = load_modeling_data(wh)
        if chosen is None:
            meta = _skip(wh, "skipped: no model was chosen (see modeling/cv_metrics)", *outputs)
            for t in outputs:
                yield dg.MaterializeResult(asset_key=key(t), metadata=meta)
            return
        family = chosen[0]
        lab = data.labeled
        context.log.info(f"cross-fitting {family}: {int(lab.sum())} rated, {int((~lab).sum())} unrated sessions")
        cf = crossfit_predict(data.X[lab], data.y[lab], data.X[~lab], family, k=modeling.folds, seed=42)
        ids_lab, ids_unlab = data.session_ids[lab], data.session_ids[~lab]
        y = data.y[lab]
        rows = [
            (sid, True, float(yy), (float(yy) - 1) / 4, float(p), (float(p) - 1) / 4, int(f), family, "out_of_fold")
            for sid, yy, p, f in zip(ids_lab, y, cf.oof, cf.fold, strict=True)
        ] + [
            (sid, False, None, None, float(p), (float(p) - 1) / 4, None, family, "fold_mean")
            for sid, p in zip(ids_unlab, cf.unlabeled, strict=True)
        ]
        training = [(family, fold, str(ids_lab[i])) for fold, index in enumerate(cf.train_index_by_fold) for i in index]
        importance = permutation_importance_oof(cf, data.X[lab], y, list(data.feature_names))
        wh.replace_rows(tables.PREDICTIONS, rows)
        wh.replace_rows(tables.FOLD_TRAINING, training)
        wh.replace_rows(tables.FEATURE_IMPORTANCE, [(family, i.feature, i.mean, i.sd, i.rank) for i in importance])
        top = wh.frame("SELECT feature, importance_mean, importance_sd FROM modeling.feature_importance ORDER BY rank")
    r = pearson(y, cf.oof)[0]
    yield dg.MaterializeResult(
        asset_key=key(tables.PREDICTIONS),
        metadata={
            "dagster/row_count": len(rows),
            "model": family,
            "oof_pearson": r,
            **({"note": cf.note} if cf.note else {}),
        },
    )
    yield dg.MaterializeResult(asset_key=key(tables.FOLD_TRAINING), metadata={"dagster/row_count": len(training)})
    yield dg.MaterializeResult(
        asset_key=key(tables.FEATURE_IMPORTANCE),
        metadata={
            "dagster/row_count": len(importance),
            "top_features": dg.MetadataValue.md(markdown_table(top, max_rows=15)),
        },
    )
