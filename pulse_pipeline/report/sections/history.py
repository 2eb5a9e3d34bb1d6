"""Section 9: how each comparison's estimate evolved, with the always-valid confidence sequence."""

from __future__ import annotations

import polars as pl

from ...estimates.methods import Method
from .. import data, figures
from ..html import Section, comparison_label, esc, missing, slug, table, td
from ..style import method_style

HISTORY_METHODS = (Method.PPI, Method.NAIVE_WELCH)  # without a chosen estimate: PPI's history, else the naive one

# ---------------------------------------------------------------- 9. history


def history_section(history: data.Rows, conclusions: data.Rows) -> Section:
    s = Section("history", "9. How did the estimate evolve?")
    s.add(
        "<p>The estimate as it stood at the end of each day. The dashed 95 % interval is valid for one look "
        "planned in advance; looking every day and stopping when it first excludes zero finds differences that "
        "are not there. The dotted confidence sequence is valid on every day at once: stopping the first day it "
        "excludes zero is safe.</p>"
    )
    if history.why_empty:
        s.empty(history.why_empty)
        return s
    chosen = {}  # the method section 1 reads each comparison by, so both sections tell one story
    if conclusions.why_empty is None:
        chosen = {(r["experiment"], r["treatment"]): r["method"] for r in conclusions.frame.to_dicts()}
    for (experiment, treatment), group in history.frame.group_by(["experiment", "treatment"], maintain_order=True):
        methods = set(group["method"].to_list())
        preferred = [chosen.get((experiment, treatment)), *HISTORY_METHODS]
        method = next((m for m in preferred if m in methods), sorted(methods)[0])
        rows = group.filter((pl.col("method") == method) & pl.col("effect").is_not_null()).to_dicts()
        control = group["control"][0]
        name = method_style(method).label
        s.add(f"<h3>{esc(experiment)}: {esc(comparison_label(treatment, control))} ({esc(name)})</h3>")
        if len(rows) < 2:
            notes = sorted({n for n in group["note"].to_list() if n})
            s.add(f'<p class="empty">Fewer than two days with an estimate{": " + esc(notes[0]) if notes else ""}.</p>')
            continue
        looks = [
            figures.Look(r["day"], r["effect"], r["ci_low"], r["ci_high"], r["cs_low"], r["cs_high"])
            for r in rows
            if not any(missing(r[c]) for c in ("ci_low", "ci_high", "cs_low", "cs_high"))
        ]
        first_fixed = next((r["day"] for r in rows if r["excludes_zero_fixed"]), None)
        first_cs = next((r["day"] for r in rows if r["excludes_zero_cs"]), None)
        stop = (
            f"The confidence sequence first excluded zero on {first_cs:%Y-%m-%d}: a team could have stopped then."
            if first_cs
            else "The confidence sequence never excluded zero: no day was safe to stop on with a difference."
        )
        fixed = (
            f" The one-look interval first excluded zero on {first_fixed:%Y-%m-%d}."
            if first_fixed
            else " The one-look interval never excluded zero."
        )
        s.add(f"<p>{esc(stop + fixed)}</p>")
        if len(looks) < 2:
            continue
        svg = figures.history(
            f"fig-history-{slug(experiment, treatment)}", f"{experiment}: {treatment} vs {control}, {name}", looks
        )
        numbers = table(
            [
                "day",
                "sessions",
                "rated",
                "effect (0–1)",
                "95 % low (0–1)",
                "95 % high (0–1)",
                "sequence low (0–1)",
                "sequence high (0–1)",
            ],
            [
                [
                    td(f"{r['day']:%Y-%m-%d}"),
                    td(r["n_sessions"]),
                    td(r["n_rated"]),
                    td(r["effect"], 3, True),
                    td(r["ci_low"], 3, True),
                    td(r["ci_high"], 3, True),
                    td(r["cs_low"], 3, True),
                    td(r["cs_high"], 3, True),
                ]
                for r in rows
            ],
        )
        s.figure(
            svg,
            f"{esc(name)} estimate of {esc(treatment)} against {esc(control)} by day on the 0–1 scale (stars on "
            "the right), with the one-look interval (dashed) and the always-valid confidence sequence (dotted)"
            + (
                "; the axis stops at ±1, the largest difference the scale allows, and the early days' sequence runs "
                "beyond it."
                if any(abs(v) > figures.SCALE_LIMIT for x in looks for v in (x.cs_low, x.cs_high, x.ci_low, x.ci_high))
                else "."
            ),
            numbers,
        )
    return s
