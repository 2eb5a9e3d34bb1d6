"""What the report reads: one query per section over the warehouse, each giving rows or why there are none.

Every function takes an open DuckDB connection (the working database inside the asset, the published copy for
``pulse report``) and returns a ``Rows``: a polars frame and, when the frame holds nothing to show, a sentence
saying which table is empty and the likely cause. A missing table (a warehouse from before it existed) is an
empty one with that reason, never an exception: the page shows the sentence where the section would be.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from .. import tables
from ..estimates.experiments import OBSERVATIONAL

# Why a table is usually empty: what a reader does next. A table's own notes, when it has rows, say more.
LIKELY_CAUSE = {
    tables.EXPERIMENT_EFFECTS.qualified: "no assigned session has a cross-fit prediction: the drops hold no "
    "assignments.csv, or too few sessions are rated for the model stage",
    tables.POWER.qualified: "no experiment comparison: the drops hold no assignments",
    tables.CONCLUSIONS.qualified: "no experiment comparison: the drops hold no assignments, or too few sessions are "
    "rated for the model stage",
    tables.CV_METRICS.qualified: "too few rated sessions to cross-validate a model",
    tables.PREDICTIONS.qualified: "too few rated sessions to cross-fit a model",
    tables.RECALIBRATION.qualified: "too few rated sessions to cross-fit a model",
    tables.LABEL_SHIFT.qualified: "no rated or no unrated sessions to compare",
    tables.FEATURE_COMPARISONS.qualified: "no experiment comparison with sessions in both arms",
    tables.BENCHMARK_POINTS.qualified: "no benchmarks file and no assigned sessions",
    tables.BENCHMARK_CORRELATION.qualified: "the benchmarks file (PULSE_HOME/benchmarks.csv, else the shipped one) "
    "names no comparison that could be used",
    tables.SEGMENT_EFFECTS.qualified: "no experiment comparison with task types or development clusters",
    tables.SRM_CHECK.qualified: "the drops hold no assignments",
    tables.EFFECT_HISTORY.qualified: "no session has a start time, or no comparison has ratings on any day",
    tables.ASK_POLICY.qualified: "too few ratings to fit the error model",
    tables.STAGING_SESSIONS.qualified: "no drop has been ingested",
    tables.AGREEMENT_HISTORY.qualified: "no rated session has both a cross-fit prediction and a start time: too few "
    "rated sessions for the model stage, or the sessions carry no start time",
    tables.GUARDRAILS.qualified: "no guardrail is declared in experiments.toml ([guardrails.<name>]), or no "
    "experiment comparison: the drops hold no assignments",
}


@dataclass(frozen=True)
class Rows:
    """A section's rows, and why they are empty (None when there is something to show)."""

    frame: pl.DataFrame
    why_empty: str | None = None


def _query(con: duckdb.DuckDBPyConnection, table: str, sql: str, params: list | None = None) -> Rows:
    """Run ``sql`` (which reads ``table``); an empty result or a missing table gives the reason instead."""
    if not exists(con, table):
        return Rows(pl.DataFrame(), f"{table} does not exist in this warehouse: materialize the pipeline again")
    frame = con.execute(sql, params or []).pl()
    if frame.is_empty():
        return Rows(frame, f"{table} has no rows: {LIKELY_CAUSE.get(table, 'nothing was computed')}")
    return Rows(frame)


def effects(con: duckdb.DuckDBPyConnection) -> Rows:
    """Every method's row of every comparison (``estimates.experiment_effects``)."""
    return _query(
        con,
        tables.EXPERIMENT_EFFECTS.qualified,
        f"SELECT * FROM {tables.EXPERIMENT_EFFECTS.qualified} ORDER BY experiment, treatment NULLS FIRST, method",
    )


def conclusions(con: duckdb.DuckDBPyConnection) -> Rows:
    """PULSE's conclusion per comparison (``estimates.conclusions``): the method it is read by, why, the verdict and
    the sentence; single-arm experiments too (no treatment)."""
    return _query(
        con,
        tables.CONCLUSIONS.qualified,
        f"SELECT * FROM {tables.CONCLUSIONS.qualified} ORDER BY experiment, treatment NULLS FIRST",
    )


def guardrails(con: duckdb.DuckDBPyConnection) -> Rows:
    """Every comparison's guardrails (``estimates.guardrails``: one row per comparison and guardrail, its verdict,
    relative effect and interval against the margin), for the first screen beside each decision."""
    return _query(
        con,
        tables.GUARDRAILS.qualified,
        f"SELECT * FROM {tables.GUARDRAILS.qualified} ORDER BY experiment, treatment, guardrail",
    )


def power(con: duckdb.DuckDBPyConnection) -> Rows:
    """Minimum detectable effects per comparison (``estimates.power``)."""
    return _query(con, tables.POWER.qualified, f"SELECT * FROM {tables.POWER.qualified} ORDER BY experiment, treatment")


def calibration(con: duckdb.DuckDBPyConnection, bins: int = 10) -> Rows:
    """Mean rating by decile of the out-of-fold prediction, in stars: rated sessions only, the rating from
    ``staging.session_labels`` (what the model was scored against), the prediction from ``modeling.predictions``.
    Fewer rated sessions than bins give as many bins as sessions."""
    return _query(
        con,
        tables.PREDICTIONS.qualified,
        f"""
        WITH rated AS (
            SELECT p.prediction_stars AS prediction, l.label_stars AS rating,
                   ntile(?) OVER (ORDER BY p.prediction_stars, p.session_id) AS decile
            FROM {tables.PREDICTIONS.qualified} p JOIN {tables.SESSION_LABELS.qualified} l USING (session_id)
            WHERE p.labeled AND p.prediction_stars IS NOT NULL AND l.label_stars IS NOT NULL)
        SELECT decile, count(*) AS n, avg(prediction) AS mean_prediction, avg(rating) AS mean_rating
        FROM rated GROUP BY decile ORDER BY decile""",
        [bins],
    )


def cv_metrics(con: duckdb.DuckDBPyConnection) -> Rows:
    """The paper's Table 2 (``modeling.cv_metrics``), one row per model and metric."""
    return _query(
        con, tables.CV_METRICS.qualified, f"SELECT * FROM {tables.CV_METRICS.qualified} ORDER BY metric, mean, model"
    )


def recalibration(con: duckdb.DuckDBPyConnection) -> Rows:
    """Whether the chosen model's predictions were recalibrated for the lambda = 1 methods, and why
    (``modeling.recalibration``: one row per fit)."""
    return _query(con, tables.RECALIBRATION.qualified, f"SELECT * FROM {tables.RECALIBRATION.qualified}")


def label_shift(con: duckdb.DuckDBPyConnection, top: int = 8) -> Rows:
    """The features on which rated sessions differ most from unrated ones (largest |rank-biserial|)."""
    if not _has_rows(con, tables.LABEL_SHIFT.qualified, "rank_biserial IS NOT NULL"):
        return _notes(con, tables.LABEL_SHIFT.qualified)
    return _query(
        con,
        tables.LABEL_SHIFT.qualified,
        f"""SELECT * FROM {tables.LABEL_SHIFT.qualified} WHERE rank_biserial IS NOT NULL
           ORDER BY abs(rank_biserial) DESC, feature LIMIT ?""",
        [top],
    )


COST_FEATURE = "llm_cost_usd"  # the agent's LLM cost per session (features/event_features.py), the paper's Table 10


def feature_differences(con: duckdb.DuckDBPyConnection, top: int = 8) -> Rows:
    """Per comparison, the ``top`` features that differ most between arms over all sessions (smallest p-value,
    then largest standardized difference): the paper's Figure 4, bottom. ``standardized`` is the difference over
    the arms' pooled sd (``feature_comparisons.standardized_difference``), comparable across features of any scale
    (a relative difference explodes for a feature whose control mean is near zero, such as a sentiment score). Cost
    is shown on its own (``cost``)."""
    return _query(
        con,
        tables.FEATURE_COMPARISONS.qualified,
        f"""
        SELECT * FROM (
            SELECT *, row_number() OVER (PARTITION BY experiment, treatment
                                         ORDER BY p_value NULLS LAST, abs(standardized) DESC, feature) AS rank
            FROM (SELECT *, standardized_difference AS standardized
                  FROM {tables.FEATURE_COMPARISONS.qualified} WHERE population = 'all' AND feature IS DISTINCT FROM ?)
            WHERE treatment IS NULL OR standardized IS NOT NULL)
        WHERE rank <= ? ORDER BY experiment, treatment, rank""",
        [COST_FEATURE, top],
    )


IMBALANCED = 0.1
"""A standardized difference above this (in absolute value) is the usual mark of arms unlike in a feature (Austin
2009): the balance table counts such features."""


def balance(con: duckdb.DuckDBPyConnection, top: int = 8) -> Rows:
    """The feature balance of every observational comparison (``estimates.experiment_effects.design``): per
    comparison, over all its sessions, the ``top`` features whose arms differ most (largest absolute standardized
    difference, ``estimates.feature_comparisons``), each arm's mean, and how many of its features have a
    standardized difference (``n_features``) and how many above ``IMBALANCED`` (``n_imbalanced``)."""
    if not exists(con, tables.EXPERIMENT_EFFECTS.qualified):
        return Rows(pl.DataFrame(), f"{tables.EXPERIMENT_EFFECTS.qualified} does not exist in this warehouse")
    return _query(
        con,
        tables.FEATURE_COMPARISONS.qualified,
        f"""
        SELECT * FROM (
            SELECT experiment, treatment, control, feature, kind, mean_treatment, mean_control,
                   standardized_difference,
                   count(*) OVER comparison AS n_features,
                   count(*) FILTER (WHERE abs(standardized_difference) > ?) OVER comparison AS n_imbalanced,
                   row_number() OVER (PARTITION BY experiment, treatment
                                      ORDER BY abs(standardized_difference) DESC, feature) AS rank
            FROM {tables.FEATURE_COMPARISONS.qualified}
            WHERE population = 'all' AND treatment IS NOT NULL AND standardized_difference IS NOT NULL
              AND experiment IN (SELECT experiment FROM {tables.EXPERIMENT_EFFECTS.qualified}
                                 WHERE design = ?)
            WINDOW comparison AS (PARTITION BY experiment, treatment))
        WHERE rank <= ? ORDER BY experiment, treatment, rank""",
        [IMBALANCED, OBSERVATIONAL, top],
    )


def cost(con: duckdb.DuckDBPyConnection) -> Rows:
    """Mean agent cost per session in each arm of each comparison, over all sessions. Absent when the sessions
    carry no LLM usage (every cost zero or missing): the reason says so."""
    rows = _query(
        con,
        tables.FEATURE_COMPARISONS.qualified,
        f"""SELECT experiment, treatment, control, n_treatment, n_control, mean_treatment, mean_control, difference,
                  relative_difference, p_value
           FROM {tables.FEATURE_COMPARISONS.qualified}
           WHERE population = 'all' AND feature = ? AND treatment IS NOT NULL
           ORDER BY experiment, treatment""",
        [COST_FEATURE],
    )
    if rows.why_empty is not None:
        return Rows(rows.frame, f"no cost per session: {rows.why_empty} (cost is its feature {COST_FEATURE})")
    if not rows.frame["mean_treatment"].fill_null(0).abs().sum() + rows.frame["mean_control"].fill_null(0).abs().sum():
        return Rows(pl.DataFrame(), f"every session's {COST_FEATURE} is zero or missing: the logs carry no LLM usage")
    return rows


def benchmark_points(con: duckdb.DuckDBPyConnection) -> Rows:
    """The (comparison, cluster) points used in the benchmark correlation; when none, the reasons the points
    were left out (``estimates.benchmark_points`` keeps each with its reason)."""
    used = _query(
        con,
        tables.BENCHMARK_POINTS.qualified,
        f"""SELECT * FROM {tables.BENCHMARK_POINTS.qualified} WHERE status = 'used' AND delta_b IS NOT NULL
           AND delta_h IS NOT NULL ORDER BY treatment, control, cluster""",
    )
    if used.why_empty is None:
        return used
    reasons = benchmark_reasons(con)
    return Rows(used.frame, "no benchmark point was used: " + "; ".join(reasons) if reasons else used.why_empty)


def benchmark_reasons(con: duckdb.DuckDBPyConnection, limit: int = 5) -> list[str]:
    """The distinct reasons benchmark points were left out, the most frequent first."""
    if not exists(con, tables.BENCHMARK_POINTS.qualified):
        return []
    found = con.execute(
        f"""SELECT reason, count(*) AS n FROM {tables.BENCHMARK_POINTS.qualified}
           WHERE status <> 'used' AND reason IS NOT NULL GROUP BY reason ORDER BY n DESC, reason LIMIT ?""",
        [limit],
    ).fetchall()
    return [f"{reason} ({n} point{'s' if n > 1 else ''})" for reason, n in found]


def benchmark_left_out(con: duckdb.DuckDBPyConnection) -> Rows:
    """Per comparison, why its benchmark points were left out and how many (the points that are not used)."""
    return _query(
        con,
        tables.BENCHMARK_POINTS.qualified,
        f"""SELECT treatment, control, reason, count(*) AS n FROM {tables.BENCHMARK_POINTS.qualified}
           WHERE status <> 'used' AND reason IS NOT NULL GROUP BY ALL ORDER BY treatment, control, n DESC, reason""",
    )


def benchmark_correlation(con: duckdb.DuckDBPyConnection) -> Rows:
    """Pearson and Spearman per comparison (``estimates.benchmark_correlation``); when empty, why the points
    were left out."""
    rows = _query(
        con,
        tables.BENCHMARK_CORRELATION.qualified,
        f"SELECT * FROM {tables.BENCHMARK_CORRELATION.qualified} ORDER BY treatment, control, measure",
    )
    if rows.why_empty is not None and (reasons := benchmark_reasons(con)):
        return Rows(rows.frame, f"{rows.why_empty}. The points were left out because: {'; '.join(reasons)}")
    return rows


def segment_effects(con: duckdb.DuckDBPyConnection) -> Rows:
    """Naive and PPI effects per task type and development cluster; segments without an estimate keep their
    note (too few ratings)."""
    return _query(
        con,
        tables.SEGMENT_EFFECTS.qualified,
        f"""SELECT * FROM {tables.SEGMENT_EFFECTS.qualified}
           ORDER BY experiment, treatment NULLS FIRST, dimension DESC, segment, method""",
    )


def srm(con: duckdb.DuckDBPyConnection) -> Rows:
    """The split check (``estimates.srm_check``), one row per experiment and arm."""
    return _query(
        con, tables.SRM_CHECK.qualified, f"SELECT * FROM {tables.SRM_CHECK.qualified} ORDER BY experiment, arm"
    )


def history(con: duckdb.DuckDBPyConnection) -> Rows:
    """Each comparison's estimate by look day with both intervals (``estimates.effect_history``)."""
    return _query(
        con,
        tables.EFFECT_HISTORY.qualified,
        f"SELECT * FROM {tables.EFFECT_HISTORY.qualified} ORDER BY experiment, treatment NULLS FIRST, method, day",
    )


def agreement_history(con: duckdb.DuckDBPyConnection) -> Rows:
    """The agreement watch (``modeling.agreement_history``): every window, arm and measure, the pooled arm first."""
    return _query(
        con,
        tables.AGREEMENT_HISTORY.qualified,
        f"""SELECT * FROM {tables.AGREEMENT_HISTORY.qualified}
           ORDER BY experiment <> 'all', experiment, variant, measure, window_index""",
    )


def ask_policy(con: duckdb.DuckDBPyConnection) -> Rows:
    """The ask policy's terms (``estimates.ask_policy``)."""
    return _query(con, tables.ASK_POLICY.qualified, f"SELECT * FROM {tables.ASK_POLICY.qualified}")


def units(con: duckdb.DuckDBPyConnection) -> Rows:
    """Each experiment's randomization unit, where it came from, the sessions it left out, and its design."""
    return _query(
        con,
        tables.EXPERIMENT_EFFECTS.qualified,
        f"""SELECT experiment, any_value(unit) AS unit, any_value(unit_source) AS unit_source,
                  max(sessions_excluded) AS sessions_excluded, any_value(design) AS design
           FROM {tables.EXPERIMENT_EFFECTS.qualified} GROUP BY experiment ORDER BY experiment""",
    )


SYNTHETIC_PATH = "$.synthetic.generator"  # synth/corpus.py writes {"synthetic": {"generator", "seed", ...}}


def corpus(con: duckdb.DuckDBPyConnection) -> Rows:
    """Per drop, the sessions the analysis uses (``staging.sessions``: the latest record of each id) and how many
    of them a generator made: the marker ``synth/corpus.py`` writes into every record it makes, kept in
    ``metadata_json`` by ingest. It comes from the data, not from the command that ran: a synthetic drop
    ingested by hand is synthetic, and a real drop beside a synthetic one is counted apart. ``seeds`` lists the
    generators' seeds (comma-separated), NULL when none is synthetic."""
    return _query(
        con,
        tables.STAGING_SESSIONS.qualified,
        f"""
        WITH marked AS (
            SELECT drop_id,
                   CASE WHEN contains(metadata_json, '"synthetic"')
                        THEN json_extract_string(metadata_json, '{SYNTHETIC_PATH}') END AS generator,
                   CASE WHEN contains(metadata_json, '"synthetic"')
                        THEN json_extract_string(metadata_json, '$.synthetic.seed') END AS seed
            FROM {tables.STAGING_SESSIONS.qualified})
        SELECT drop_id, count(*) AS sessions, count(generator) AS synthetic,
               string_agg(DISTINCT generator, ', ' ORDER BY generator) AS generators,
               string_agg(DISTINCT seed, ', ' ORDER BY seed) AS seeds
        FROM marked GROUP BY drop_id ORDER BY drop_id""",
    )


def exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether ``schema.name`` is in the warehouse. Asked first, not caught after: DuckDB would otherwise look
    a missing table's name up among the caller's Python variables (its replacement scans)."""
    schema, name = table.split(".")
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?", [schema, name]
    ).fetchone()
    return found[0] > 0


def _has_rows(con: duckdb.DuckDBPyConnection, table: str, where: str) -> bool:
    return exists(con, table) and con.execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchone()[0] > 0


def _notes(con: duckdb.DuckDBPyConnection, table: str) -> Rows:
    """A table without numbers: its notes as the reason, or the usual cause."""
    rows = _query(con, table, f"SELECT DISTINCT note FROM {table} WHERE note IS NOT NULL ORDER BY note LIMIT 3")
    if rows.why_empty is None:
        return Rows(pl.DataFrame(), f"{table} has no numbers: " + "; ".join(rows.frame["note"].to_list()))
    return rows
