"""Feature tables: the users' redacted text, event features, annotations (heuristic or LLM), the LLM judge,
agreement, the wide table."""

import time
from dataclasses import asdict
from pathlib import Path

import dagster as dg

from ... import tables
from ...features import store
from ...features.agreement import pairwise_agreement, read_human_labels
from ...features.annotate import annotate_sessions, judge_sessions
from ...features.event_features import build_event_features
from ...features.llm import LLMAnnotator, LLMCache, LLMJudge
from ...features.user_text import build_user_text
from ...features.wide import build_session_features, feature_columns
from ...settings import feature_settings, llm_settings
from ..markdown import markdown_table
from ..metadata import rounded
from ..resources import WarehouseResource
from ..specs import EAGER, SESSION_FEATURES_KEY, key, table_spec
from .resources import AnnotatorResource

_STAGED = [tables.STAGING_SESSIONS]


@dg.asset(**table_spec(tables.USER_TEXT, [*_STAGED, tables.EVENTS], "features"))
def user_text(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Refreshed for the sessions whose record changed (``sessions_touched``); the text itself never goes to the
    metadata (users' words stay in the warehouse)."""
    with warehouse.warehouse() as wh:
        refreshed = build_user_text(wh)
    return dg.MaterializeResult(
        metadata={"dagster/row_count": refreshed.rows, "sessions_touched": refreshed.sessions_touched}
    )


@dg.asset(
    **table_spec(tables.EVENT_FEATURES, [*_STAGED, tables.WORK_SEGMENTS, tables.EVENTS, tables.USER_TEXT], "features")
)
def event_features(warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Refreshed for the sessions whose record changed (``sessions_touched``), not rebuilt whole."""
    started = time.perf_counter()
    with warehouse.warehouse() as wh:
        refreshed = build_event_features(wh)
    seconds = time.perf_counter() - started
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": refreshed.rows,
            "sessions_touched": refreshed.sessions_touched,
            "sessions_per_second": round(refreshed.sessions_touched / max(seconds, 1e-9)),
        }
    )


@dg.multi_asset(
    specs=[
        dg.AssetSpec(**table_spec(t, [*_STAGED, tables.EVENTS, tables.USER_TEXT], "features"))
        for t in (tables.ANNOTATIONS, tables.ANNOTATION_VALUES)
    ],
    name="annotations",
)
def annotations(context: dg.AssetExecutionContext, warehouse: WarehouseResource, annotator: AnnotatorResource):
    """Label the staged sessions whose record changed (every one for a new prompt version or model) with the
    configured annotator; one bad session never fails the run."""
    rubric = annotator.rubric()
    with warehouse.warehouse() as wh:
        labeller = annotator.build(wh.con, context.log.info, rubric)
        run = annotate_sessions(wh, labeller, rubric, say=context.log.info)
    meta = {
        "annotator": annotator.annotator,
        "prompt_version": run.prompt_version,
        "rubric": rubric.version,
        "dagster/row_count": run.sessions,
        "sessions_touched": run.sessions_touched,
        **{f"status_{status}": n for status, n in run.statuses.items()},
    }
    if isinstance(labeller, LLMAnnotator):
        meta.update({f"llm_{k}": v for k, v in asdict(labeller.totals).items()})
    yield dg.MaterializeResult(asset_key=key(tables.ANNOTATIONS), metadata=rounded(meta))
    values = {"dagster/row_count": run.sessions * len(rubric.features), "sessions_touched": run.sessions_touched}
    yield dg.MaterializeResult(asset_key=key(tables.ANNOTATION_VALUES), metadata=values)


@dg.asset(**table_spec(tables.JUDGE_SCORES, [*_STAGED, tables.EVENTS, tables.USER_TEXT], "features"))
def judge_scores(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, annotator: AnnotatorResource
) -> dg.MaterializeResult:
    """The paper's LLM-as-a-judge baseline; without an LLM configured it is skipped, with the reason, and passes."""
    if not annotator.llm_model:
        reason = "skipped: no LLM configured (set PULSE_LLM_MODEL to run the LLM-as-a-judge baseline)"
        context.log.warning(reason)
        return dg.MaterializeResult(metadata={"skipped": reason})
    with warehouse.warehouse() as wh:
        judge = LLMJudge(llm_settings(), LLMCache(wh.con))
        refreshed = judge_sessions(wh, judge)
    totals = {f"llm_{k}": v for k, v in asdict(judge.totals).items()}
    meta = {"dagster/row_count": refreshed.rows, "sessions_touched": refreshed.sessions_touched}
    return dg.MaterializeResult(metadata=rounded({**meta, "model": judge.settings.model, **totals}))


@dg.asset(**table_spec(tables.ANNOTATOR_AGREEMENT, [tables.ANNOTATION_VALUES], "features"))
def annotator_agreement(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, annotator: AnnotatorResource
) -> dg.MaterializeResult:
    """Cohen's kappa per rubric feature for every pair of annotators (and a human-labelled file, if configured)."""
    rubric = annotator.rubric()
    with warehouse.warehouse() as wh:
        names = store.annotator_names(wh)
        has_human = bool(annotator.human_labels_path) and Path(annotator.human_labels_path).exists()
        # one labeller alone has no pair: its labels (millions of rows at scale, ~6 s at 10x) are not read
        comparable = len(names) + has_human > 1
        labels = store.labels_by_annotator(wh) if comparable else dict.fromkeys(names, {})
        if has_human:
            labels["human"], ignored = read_human_labels(Path(annotator.human_labels_path), rubric)
            if ignored:
                context.log.warning(f"human labels: columns not in the rubric ignored: {ignored}")
        rows = pairwise_agreement(labels, rubric)
        wh.replace(tables.ANNOTATOR_AGREEMENT, rows)
    note = "" if len(labels) > 1 else "only one annotator has labelled sessions: nothing to compare"
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": len(rows),
            "annotators": ", ".join(sorted(labels)),
            **({"note": note} if note else {}),
        }
    )


@dg.asset(
    key=SESSION_FEATURES_KEY,
    deps=[key(tables.EVENT_FEATURES), key(tables.ANNOTATION_VALUES), key(tables.JUDGE_SCORES), key(tables.EVAL_SCORES)],
    group_name="features",
    kinds={"duckdb"},
    automation_condition=EAGER,
    description="One row per session: event features, the chosen annotator's rubric answers, one-hot, the LLM "
    "judge's Likert score, trace tools' eval scores and the PULSE_SCORE_FIELDS metadata scores, in a stable "
    "column order (the model stage reads this).",
)
def session_features(warehouse: WarehouseResource, annotator: AnnotatorResource) -> dg.MaterializeResult:
    rubric = annotator.rubric()
    fields = feature_settings().score_fields
    with warehouse.warehouse() as wh:
        version = store.latest_prompt_version(wh, annotator.annotator) or ""
        built = build_session_features(wh, rubric, annotator.annotator, version, annotator.llm_model, fields)
        preview = wh.frame(f"SELECT * FROM {tables.SESSION_FEATURES.qualified} LIMIT 5")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": built.rows,
            **{f"non_numeric_{col}": n for col, n in built.non_numeric.items()},
            "annotator": annotator.annotator,
            "prompt_version": version,
            "annotated_columns": len(feature_columns(rubric)),
            "preview": dg.MetadataValue.md(markdown_table(preview)),
        }
    )
