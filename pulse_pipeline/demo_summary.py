"""What ``pulse demo`` prints after its run: one titled table per question the pipeline answers (which model,
what effect, the decision with its guardrails, looking every day, could each test see an effect, the unit, where
to ask, label shift, the agreement watch), each read from the published warehouse. ``show_query`` prints one such
table; ``pulse validate`` and ``pulse power --experiments`` print theirs with it too."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from . import tables
from .paths import PulseHome

if TYPE_CHECKING:  # only a type: the CLI imports this module before it knows whether it will open a warehouse
    import duckdb


class Section(NamedTuple):
    """One table of the demo's summary: the question it answers (its title) and the query that answers it."""

    title: str
    sql: str


def show_query(opened: Callable[[], duckdb.DuckDBPyConnection], title: str, sql: str) -> None:
    """Print ``title`` and the result of ``sql`` on the connection ``opened()`` returns (the published warehouse,
    read-only; closed after), or nothing if the result is empty or the query fails (a table not built yet)."""
    import duckdb

    with opened() as con:
        try:
            rel = con.sql(sql)
        except duckdb.Error:
            return
        if rel is not None and rel.fetchone() is not None:
            print(f"\n{title}")
            rel.show(max_width=200)


def demo_sections(home: PulseHome) -> list[Section]:
    """The demo's tables, in the order printed (the ask policy's title names where ``home`` exported it)."""
    return [
        Section(
            "Satisfaction models, out of fold (mean ± sd over CV seeds; * = chosen):",
            f"""
        PIVOT (SELECT model || CASE WHEN chosen THEN ' *' ELSE '' END AS model, metric,
                      printf('%.3f', mean) || coalesce(' ± ' || printf('%.3f', sd), '') AS cell
               FROM {tables.CV_METRICS.qualified})
        ON model USING first(cell) GROUP BY metric ORDER BY metric""",
        ),
        Section(
            "Did the treatment make users happier? Effect on the normalized rating (0-1), 95 % intervals:",
            f"""
        SELECT experiment, treatment || ' vs ' || control AS comparison, unit, method,
               printf('%+.3f', effect) AS effect, printf('[%+.3f, %+.3f]', ci_low, ci_high) AS ci95,
               printf('%.3f', p_value) AS p, printf('%.3f', p_holm) AS p_holm,
               printf('%.2f', width_vs_naive) AS width_vs_naive, coalesce(flags, '') AS flags
        FROM {tables.EXPERIMENT_EFFECTS.qualified}
        WHERE method IN ('naive_welch', 'ppi', 'crossppi', 'aipw') ORDER BY experiment, treatment, method""",
        ),
        Section(
            "The decision (docs/decisions.md): the ratings' answer with each guardrail's verdict and relative effect:",
            f"""
        SELECT c.experiment, c.treatment || ' vs ' || c.control AS comparison, c.decision, c.method,
               printf('%+.2f', 4 * c.effect) AS stars,
               coalesce(string_agg(g.guardrail || ' ' || coalesce(g.verdict, 'n/a')
                                   || printf(' %+.1f%%', 100 * g.relative_effect), ', ' ORDER BY g.guardrail), '')
                   AS guardrails
        FROM {tables.CONCLUSIONS.qualified} c
        LEFT JOIN {tables.GUARDRAILS.qualified} g USING (experiment, treatment, control)
        WHERE c.treatment IS NOT NULL GROUP BY ALL ORDER BY 1, 2""",
        ),
        Section(
            "Looking every day: the first day each interval excluded 0 (fixed: valid for one look; sequence: any day):",
            f"""
        SELECT experiment, treatment || ' vs ' || control AS comparison, method, count(*) AS looks,
               coalesce(CAST(CAST(min(day) FILTER (WHERE excludes_zero_fixed) AS DATE) AS VARCHAR), '-') AS fixed,
               coalesce(CAST(CAST(min(day) FILTER (WHERE excludes_zero_cs) AS DATE) AS VARCHAR), '-') AS sequence
        FROM {tables.EFFECT_HISTORY.qualified} WHERE day IS NOT NULL GROUP BY ALL ORDER BY ALL""",
        ),
        Section(
            "Could each test have seen an effect? Split check and minimum detectable effect (80 % power):",
            f"""
        SELECT p.experiment, p.treatment || ' vs ' || p.control AS comparison,
               printf('%.3f', s.p_value) AS split_p, CASE WHEN s.mismatch THEN 'MISMATCH' ELSE 'ok' END AS split,
               p.n_labeled_treatment || ' / ' || p.n_labeled_control AS ratings,
               printf('%.3f', p.mde_naive) AS mde_naive, printf('%.3f', p.mde_ppi) AS mde_ppi,
               p.labels_per_arm_naive AS ratings_needed_naive, p.labels_per_arm_ppi AS ratings_needed_ppi
        FROM {tables.POWER.qualified} p
        LEFT JOIN (SELECT DISTINCT experiment, p_value, mismatch FROM {tables.SRM_CHECK.qualified}) s
            USING (experiment)
        ORDER BY 1, 2""",
        ),
        Section(
            "The randomization unit of each experiment (user: intervals clustered by user):",
            "SELECT DISTINCT experiment, unit, unit_source, sessions_excluded"
            f" FROM {tables.EXPERIMENT_EFFECTS.qualified} ORDER BY 1",
        ),
        Section(
            f"Where to ask for ratings (the ask policy, exported to {home.root / 'ask_policy'};"
            " error and answer models):",
            f"""
        SELECT model, term, printf('%+.3f', coefficient) AS coefficient, printf('%.3f', multiplier) AS multiplier,
               printf('%.2f', floor) AS floor, printf('%.1f', budget_per_day) AS asks_per_day,
               fitted_on_ratings AS ratings, fitted_on_asks AS asks, coalesce(note, '') AS note
        FROM {tables.ASK_POLICY.qualified}
        ORDER BY model = 'answer', term = '(intercept)' DESC, abs(coefficient) DESC""",
        ),
        Section(
            "Do rated sessions look like unrated ones? Largest shifts (rank-biserial; PPI assumes none):",
            f"""
        SELECT feature, printf('%.3f', mean_rated) AS mean_rated, printf('%.3f', mean_unrated) AS mean_unrated,
               printf('%+.3f', rank_biserial) AS rank_biserial
        FROM {tables.LABEL_SHIFT.qualified} WHERE rank_biserial IS NOT NULL ORDER BY abs(rank_biserial) DESC LIMIT 5""",
        ),
        Section(
            "Does the model still agree with people? Its out-of-fold r per window, every rated session (the watch):",
            f"""
        SELECT window_kind AS window, CAST(window_start AS DATE) AS window_from, n_ratings AS ratings,
               printf('%.3f', value) AS r, printf('[%.3f, %.3f]', ci_low, ci_high) AS ci95,
               coalesce(printf('[%.3f, %.3f]', long_run_ci_low, long_run_ci_high), '') AS long_run,
               coalesce(CAST(below_long_run AS VARCHAR), '') AS below
        FROM {tables.AGREEMENT_HISTORY.qualified}
        WHERE experiment = 'all' AND variant = 'all' AND measure = 'oof_r' ORDER BY window_index""",
        ),
    ]


def print_demo_summary(home: PulseHome, opened: Callable[[], duckdb.DuckDBPyConnection]) -> None:
    """Print every section of ``demo_sections`` that has rows (``opened`` opens the published warehouse: the CLI
    passes its reader, which publishes again first when an analyst wrote to it), then where the report is and a
    query to try."""
    for section in demo_sections(home):
        show_query(opened, section.title, section.sql)
    print(f"report: {home.report / 'index.html'}")
    print(
        f'try: pulse sql "SELECT variant, count(*), avg(label) FROM {tables.SESSION_LABELS.qualified} '
        f'JOIN {tables.STAGING_ASSIGNMENTS.qualified} USING (session_id) GROUP BY variant"'
    )
