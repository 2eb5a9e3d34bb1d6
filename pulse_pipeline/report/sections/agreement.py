"""Section 11: does the model still agree with people? The agreement watch (``modeling.agreement_history``) window
by window, the long run before each window, and what the check says of the newest one."""

from __future__ import annotations

import polars as pl

from ... import tables
from ...modeling.agreement_history import MEASURES, POOLED, RATINGS, WARNING_MEASURES, WINDOW_RATINGS
from .. import data, figures
from ..html import Section, esc, headline, missing, number, table, td

MEASURE_NAMES = {
    "oof_r": "model: out-of-fold r",
    "mse_vs_constant": "model: MSE gain over the constant",
    "calibration_slope": "model: calibration slope",
    "judge_kappa": "LLM judge: κ with people (≥ 4 stars)",
    "judge_r": "LLM judge: r of its Likert score",
}
PANEL_NAMES = {
    "oof_r": "model: r",
    "mse_vs_constant": "model: MSE gain",
    "calibration_slope": "model: slope",
    "judge_kappa": "judge: κ",
    "judge_r": "judge: r (Likert)",
}
"""Short names for the figure's panels (the tables use ``MEASURE_NAMES``)."""
REFERENCE = {"oof_r": 0.0, "mse_vs_constant": 0.0, "calibration_slope": 1.0, "judge_kappa": 0.0, "judge_r": 0.0}
"""The level each panel marks: no agreement (0), or a well-scaled prediction (slope 1)."""
MIN_ARM_RATINGS = 10
"""An arm's newest-window rows are tabled from this many ratings (fewer: an r interval wider than about [-0.4, 0.9])."""

# ---------------------------------------------------------------- 11. agreement watch


def agreement_section(history: data.Rows) -> Section:
    s = Section("agreement", "11. Does the model still agree with people?")
    s.add(
        "<p>The prediction-powered estimates gain on the naive ones by as much as the model agrees with the "
        "ratings. Each window's rated sessions measure it again: the model's out-of-fold r, its MSE gain over the "
        "out-of-fold constant (the constant's MSE minus the model's: what a rating's correction saves), its "
        "calibration slope and, where the LLM judge ran, its κ with people (rating ≥ 4 stars against its "
        "verdict) and the r of its Likert score; each with a 95 % interval, against the long run, the same "
        "measure over every earlier window. A window whose interval lies wholly below the long run's is marked; "
        "the check warns when the newest window's r or κ does. A fall costs width, not validity: each arm's "
        "correction is computed from that arm's own ratings.</p>"
    )
    if history.why_empty:
        s.empty(history.why_empty)
        return s
    frame = history.frame
    newest = int(frame["window_index"].max())
    kind = frame["window_kind"][0]
    starts = frame.group_by("window_index").agg(pl.col("window_start").min()).sort("window_index")["window_start"]
    how = (
        f"every {WINDOW_RATINGS} ratings, counted back from the newest (fewer than {WINDOW_RATINGS} rated sessions "
        "in the median week)"
        if kind == RATINGS
        else f"calendar weeks by the session's start (at least {WINDOW_RATINGS} rated sessions in the median week)"
    )
    s.add(
        f"<p>{newest + 1} windows of {esc(how)}, the first from {starts[0]:%Y-%m-%d}, the newest from"
        f" {starts[-1]:%Y-%m-%d}.</p>"
    )
    s.add(f"<p>{esc(verdict(frame, newest))}</p>")
    pooled = frame.filter((pl.col("experiment") == POOLED) & (pl.col("variant") == POOLED))
    measures = [m for m in MEASURES if m in set(pooled["measure"])]
    if measures:
        panels = [
            figures.WatchPanel(
                PANEL_NAMES.get(m, m),
                REFERENCE.get(m, 0.0),
                tuple(
                    figures.WindowPoint(
                        r["window_start"],
                        r["value"],
                        r["ci_low"],
                        r["ci_high"],
                        r["long_run_ci_low"],
                        r["long_run_ci_high"],
                        bool(r["below_long_run"]),
                    )
                    for r in pooled.filter(pl.col("measure") == m).sort("window_index").to_dicts()
                ),
            )
            for m in measures
        ]
        svg = figures.agreement_watch(
            "fig-agreement-watch", "Agreement with people by window: every rated session", panels
        )
        s.figure(
            svg,
            "Each measure by window over every rated session, with its 95 % interval: the model's out-of-fold r, its "
            "MSE gain over the constant, its calibration slope and, where the LLM judge ran, its κ with people and "
            "the r of its Likert score. The grey band is the long run's interval over the windows before each one; a "
            "window below it is a vermillion triangle. The dotted line is no agreement (0), or a well-scaled "
            "prediction (slope 1).",
            _numbers(pooled, measures),
        )
    arms = frame.filter((pl.col("window_index") == newest) & (pl.col("experiment") != POOLED))
    shown = arms.filter(pl.col("n_ratings") >= MIN_ARM_RATINGS)
    if arms.height:
        s.add("<h3>The newest window, arm by arm</h3>")
        left = arms.filter(pl.col("n_ratings") < MIN_ARM_RATINGS).select("experiment", "variant").unique().height
        if left:
            s.add(
                f'<p class="small">{left} arm{"s" if left != 1 else ""} with fewer than {MIN_ARM_RATINGS} ratings in'
                " the newest window left out of this table (their intervals span nearly every value; the warehouse"
                f" has their rows: <code>{esc(tables.AGREEMENT_HISTORY.qualified)}</code>).</p>"
            )
        if shown.height:
            s.add(_newest_table(shown))
    return s


def verdict(frame: pl.DataFrame, newest: int) -> str:
    """What the check says of the newest window, in one sentence or two."""
    last = frame.filter(pl.col("window_index") == newest)
    if last["below_long_run"].is_null().all():
        return "The newest window is the first: there is no long run to compare it with yet."
    below = sorted(  # what the check warns on first, the pooled arm first
        last.filter(pl.col("below_long_run").fill_null(False)).to_dicts(),
        key=lambda r: (r["measure"] not in WARNING_MEASURES, r["experiment"] != POOLED, r["experiment"], r["variant"]),
    )
    if not below:
        return (
            "No measure of the newest window lies below its long run, in any arm: the model agrees with people as "
            "it did."
        )
    warned = [r for r in below if r["measure"] in WARNING_MEASURES]
    said = "; ".join(
        f"{MEASURE_NAMES.get(r['measure'], r['measure'])} of "
        f"{'every rated session' if r['experiment'] == POOLED else r['experiment'] + ' / ' + r['variant']}: "
        f"{number(r['value'], 3)} [{number(r['ci_low'], 3)}, {number(r['ci_high'], 3)}] against "
        f"[{number(r['long_run_ci_low'], 3)}, {number(r['long_run_ci_high'], 3)}]"
        for r in below
    )
    lead = "The check warns: " if warned else "Below the long run (the check warns only on r and κ): "
    return (
        f"{lead}{said}. The prediction-powered intervals of such sessions get wider; they stay valid. See what "
        "changed in that window (agent version, task mix, the judge's model or prompt)."
    )


def _numbers(pooled: pl.DataFrame, measures: list[str]) -> str:
    rows = []
    for m in measures:
        for r in pooled.filter(pl.col("measure") == m).sort("window_index").to_dicts():
            rows.append(
                [
                    td(f"{r['window_start']:%Y-%m-%d}"),
                    td(MEASURE_NAMES.get(m, m)),
                    td(r["n_ratings"]),
                    td(r["value"], 3),
                    td(r["ci_low"], 3),
                    td(r["ci_high"], 3),
                    td(r["long_run_value"], 3),
                    td(r["long_run_ci_low"], 3),
                    td(r["long_run_ci_high"], 3),
                    td("–" if r["below_long_run"] is None else ("yes" if r["below_long_run"] else "no")),
                ]
            )
    return table(
        ["window from", "measure", "ratings", "value", "95 % low", "95 % high", "long run", "long run low",
         "long run high", "below"],
        rows,
    )  # fmt: skip


def _newest_table(arms: pl.DataFrame) -> str:
    rows = []
    for r in arms.sort("experiment", "variant", "measure").to_dicts():
        where = {k: r[k] for k in ("experiment", "variant", "measure", "window_index")}
        rows.append(
            [
                td(r["experiment"]),
                td(r["variant"]),
                td(MEASURE_NAMES.get(r["measure"], r["measure"])),
                td(r["n_ratings"]),
                headline(r["value"], tables.AGREEMENT_HISTORY.qualified, "value", where, 3, False),
                td(_interval(r["ci_low"], r["ci_high"])),
                td(_interval(r["long_run_ci_low"], r["long_run_ci_high"])),
                td("–" if r["below_long_run"] is None else ("yes" if r["below_long_run"] else "no")),
            ]
        )
    return table(["experiment", "variant", "measure", "ratings", "value", "95 % interval", "long run", "below"], rows)


def _interval(low: float | None, high: float | None) -> str:
    return "–" if missing(low) or missing(high) else f"[{number(low, 3)}, {number(high, 3)}]"
