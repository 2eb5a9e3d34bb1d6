"""Modeling tables: cross-validated metrics per family (the paper's Table 2), cross-fit predictions for every
session with the fold models' training sets, and permutation importance of the chosen model.

One step writes them all (``models``), by ``modeling.reuse.refresh_models``: either a fit (cross-validation, the
choice, and the cross-fit from seed 42's fits, ``stack.crossfit_from_fits``; the unrated sessions' text a chunk
at a time, ``data.unrated_chunks``), kept on disk under ``PULSE_HOME/.work/models/``; or, for a small drop, the
kept fit reused: only the new or changed sessions are predicted, every other row and table stays as the fit
left it (``reuse.py`` says when it fits again, and why the predictions stay out of fold)."""

from pathlib import Path

import dagster as dg

from ... import tables
from ...modeling.comparison import FLOOR_MAX_LABELS, CVMetricRow, ModelComparison, table_2
from ...modeling.predictions import CrossFitTables
from ...modeling.reuse import ModelsRun, Reused, refresh_models
from ..markdown import markdown_table
from ..metadata import significant
from ..resources import WarehouseResource
from ..specs import SESSION_FEATURES_KEY, key, table_spec
from .resources import ModelingResource

KINDS = ("duckdb", "scikit-learn")
INPUTS = [SESSION_FEATURES_KEY, tables.SESSION_LABELS, tables.JUDGE_SCORES, tables.USER_TEXT]
CROSSFIT_TABLES = (
    tables.PREDICTIONS,
    tables.FOLD_TRAINING,
    tables.FEATURE_IMPORTANCE,
    tables.TEXT_FOLD_TRAINING,
    tables.TEXT_TERMS,
    tables.TEXT_VOCABULARY,
    tables.RECALIBRATION,
)
INSAMPLE_TABLE = tables.INSAMPLE_PREDICTIONS
"""The in-sample comparison model's predictions (``modeling/insample.py``): rewritten at every run, a kept fit's too."""
NO_CHOSEN_MODEL = "skipped: no model was chosen (see modeling/cv_metrics)"
MODELS_FOLDER = "models"
"""The kept fit's folder, beside the working database (``PULSE_HOME/.work/models/``)."""


@dg.multi_asset(
    specs=[dg.AssetSpec(**table_spec(tables.CV_METRICS, INPUTS, "modeling", KINDS))]
    + [dg.AssetSpec(**table_spec(t, [tables.CV_METRICS, *INPUTS], "modeling", KINDS)) for t in CROSSFIT_TABLES]
    + [dg.AssetSpec(**table_spec(INSAMPLE_TABLE, [tables.CV_METRICS, *INPUTS], "modeling", KINDS))],
    name="models",
)
def models(context: dg.AssetExecutionContext, warehouse: WarehouseResource, modeling: ModelingResource):
    """Cross-validate every configured family (Table 2), choose one, then cross-fit it for every session: one
    model is fit across all experiment arms, as the paper does (the arms share users, tasks and the agent's
    scaffold; a model per arm would have a fraction of the labels). A small drop reuses the kept fit."""
    with warehouse.warehouse() as wh:
        run = refresh_models(
            wh,
            Path(warehouse.database).parent / MODELS_FOLDER,
            families=modeling.families,
            seeds=modeling.seeds,
            folds=modeling.folds,
            choose_by=modeling.choose_by,
            seed_rows=modeling.seed_rows,
            refit_share=modeling.refit_share,
            say=context.log.info,
        )
        stored = [] if run.reused is None else stored_cv_rows(wh)
        vocabulary = wh.count(tables.TEXT_VOCABULARY)
        insample_rows = wh.count(INSAMPLE_TABLE)
    if run.reused is not None:
        yield from _reused_results(run.reused, stored)
    elif run.result is None:
        context.log.warning(run.comparison.skipped)
        yield dg.MaterializeResult(asset_key=key(tables.CV_METRICS), metadata={"skipped": run.comparison.skipped})
        for t in CROSSFIT_TABLES:
            yield dg.MaterializeResult(asset_key=key(t), metadata={"skipped": NO_CHOSEN_MODEL})
    else:
        yield _cv_metrics_result(context, run.comparison, modeling, run)
        yield from _crossfit_results(run.comparison.chosen.family, run.result, vocabulary)
    yield _insample_result(run, insample_rows)  # last: after cv_metrics, which it depends on


def _insample_result(run: ModelsRun, rows: int) -> dg.MaterializeResult:
    """The in-sample model's table: its rows, the family, or why it is empty (no single model to fit)."""
    family = run.reused.kept.family if run.reused is not None else getattr(run.comparison.chosen, "family", None)
    metadata: dict = {"dagster/row_count": rows}
    if family is None:
        metadata["skipped"] = NO_CHOSEN_MODEL
    elif not rows:
        metadata["empty"] = f"the chosen model is {family}: a blend has no single in-sample model (no ppi_insample)"
    else:
        metadata["model"] = family
    return dg.MaterializeResult(asset_key=key(INSAMPLE_TABLE), metadata=metadata)


def stored_cv_rows(wh) -> list[CVMetricRow]:
    """The rows of ``modeling.cv_metrics`` as stored (a kept fit's Table 2, with the judge's rows of today)."""
    return [CVMetricRow(**r) for r in wh.frame(f"SELECT * FROM {tables.CV_METRICS.qualified}").iter_rows(named=True)]


def _reused_results(reused: Reused, stored: list[CVMetricRow]):
    """The materializations of a run that kept the fit: predictions of the new or changed sessions, the rest as
    the fit left it (said in each table's metadata)."""
    kept, since = reused.kept, reused.since
    fit = (
        f"kept the fit of {kept.fitted_at:%Y-%m-%d %H:%M} UTC ({kept.family}, fitted on {since.fitted} ratings;"
        f" {since.added} added and {since.changed} changed since)"
    )
    yield dg.MaterializeResult(
        asset_key=key(tables.CV_METRICS),
        metadata={
            "dagster/row_count": len(stored),
            "chosen_model": kept.family,
            "fit": fit,
            "rated_sessions": since.fitted,  # what the kept fit was cross-validated on
            "ratings_since_fit": since.since,
            "table_2": dg.MetadataValue.md(markdown_table(table_2(stored))),
        },
    )
    yield dg.MaterializeResult(
        asset_key=key(tables.PREDICTIONS),
        metadata={
            "dagster/row_count": reused.rows,
            "model": kept.family,
            "oof_pearson": significant(reused.oof_pearson),
            "rated_sessions": reused.rated,
            "sessions_touched": reused.touched,  # predicted again (new or changed) or removed
            "fit": fit,
        },
    )
    for t in CROSSFIT_TABLES[1:]:
        yield dg.MaterializeResult(asset_key=key(t), metadata={"unchanged": fit})


def _cv_metrics_result(
    context: dg.AssetExecutionContext, comparison: ModelComparison, modeling: ModelingResource, run: ModelsRun
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
            **{f"chosen_{m.name}": significant(m.mean) for m in chosen.metrics},  # numeric: the UI plots them over runs
            "rated_sessions": chosen.n_labeled,  # what the chosen family was cross-validated on
            "floor": comparison.floor or f"none: a family beats the constant or >= {FLOOR_MAX_LABELS} ratings",
            "fit": run.reason,
            "table_2": dg.MetadataValue.md(markdown_table(table_2(comparison.rows))),
        },
    )


def _crossfit_results(family: str, result: CrossFitTables, vocabulary: int):
    yield dg.MaterializeResult(
        asset_key=key(tables.PREDICTIONS),
        metadata={
            "dagster/row_count": result.predictions.height,
            "model": family,
            "oof_pearson": significant(result.oof_pearson),  # numeric: the UI plots it over runs
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
    yield dg.MaterializeResult(asset_key=key(tables.TEXT_VOCABULARY), metadata={"dagster/row_count": vocabulary})
    decision = result.recalibration.decision
    yield dg.MaterializeResult(
        asset_key=key(tables.RECALIBRATION),
        metadata={"dagster/row_count": 1, "recalibrated": decision.recalibrate, "reason": decision.reason},
    )
