"""Section 6: do ratings agree with benchmarks (the paper's Table 3)."""

from __future__ import annotations

import math

import polars as pl

from ... import tables
from ...stars import label_difference_in_stars
from .. import data, figures
from ..html import Section, esc, headline, missing, number, pair, slug, table, td

# ---------------------------------------------------------------- 6. benchmarks


def _interval_text(r: dict) -> str | None:
    """Why a correlation has no usable interval, or None when it has one: Fisher's z needs 4 clusters (with 3
    any interval is all of [-1, 1]) and gives none at |r| = 1."""
    n = r["n_clusters"] or 0
    if missing(r["coefficient"]):
        return None
    if n <= 3:
        return f"n too small ({n} clusters; an interval needs 4)"
    if missing(r["ci_low"]) or missing(r["ci_high"]):
        return "none at |r| = 1"
    return None


def _correlation_caveat(r: dict) -> str | None:
    """A coefficient that says nothing: from 3 clusters (any three points give one), or ±1 from so few that an
    exact order or line is likely by chance (Spearman's ±1 from n points: 2/n! under no relation, 1 in 12 for 4)."""
    n, value = r["n_clusters"] or 0, r["coefficient"]
    if missing(value):
        return None
    if n <= 3:
        return f"meaningless: {n} clusters"
    if abs(value) >= 1 - 1e-9 and 2 / math.factorial(n) > 0.05:
        return f"meaningless: {n} clusters fall in one exact order by chance 1 time in {math.factorial(n) // 2}"
    return None


def _correlation_summary(r: dict) -> str:
    """'pearson -0.86 [-1.00, +0.57]', or the coefficient with why it has no interval or means nothing."""
    head = f"{r['measure']} {number(r['coefficient'], 2, True)}"
    why = _interval_text(r)
    caveat = _correlation_caveat(r)
    if why is None:
        head += f" [{number(r['ci_low'], 2, True)}, {number(r['ci_high'], 2, True)}]"
    else:
        head += f" (interval: {why})"
    return head + (f", {caveat}" if caveat else "")


def _stars_from_points(delta_h: float | None) -> float | None:
    """ΔH as ``estimates.benchmark_points`` stores it (percentage points of the 0-1 scale: 100 x the
    difference) in stars, the unit of the rest of the report: 4 x the 0-1 difference."""
    return None if missing(delta_h) else label_difference_in_stars(delta_h / 100)


def benchmark_section(points: data.Rows, correlation: data.Rows, left_out: data.Rows) -> Section:
    s = Section("benchmarks", "6. Do ratings agree with benchmarks?")
    s.add(
        "<p>Per task cluster, ΔH is the difference of mean ratings between two models, in stars, and ΔB the "
        "difference of their benchmark scores in percentage points of the benchmark (<code>benchmarks.csv</code>); "
        "the paper's Table 3. Points on a rising line mean users notice what benchmarks measure. With a handful "
        "of clusters the intervals are wide, and a correlation from 3 clusters, or ±1 from 4, means nothing.</p>"
    )
    if correlation.why_empty:
        s.empty(correlation.why_empty)
        return s
    corr_by: dict[tuple[str, str], list[dict]] = {}
    for r in correlation.frame.to_dicts():
        corr_by.setdefault((r["treatment"], r["control"]), []).append(r)
    used = points.frame if points.why_empty is None else pl.DataFrame()
    reasons_by: dict[tuple[str, str], list[str]] = {}
    if left_out.why_empty is None:
        for r in left_out.frame.to_dicts():
            reasons_by.setdefault((r["treatment"], r["control"]), []).append(
                f"{r['reason']} ({r['n']} point{'s' if r['n'] > 1 else ''})"
            )
    lacking = [pair for pair, corr in corr_by.items() if all(missing(r["coefficient"]) for r in corr)]
    if lacking:  # a comparison of the benchmarks file the data cannot speak to: one line, no empty table
        why = {
            pair: "; ".join(reasons_by.get(pair, [])) or corr_by[pair][0]["note"] or "no cluster used"
            for pair in lacking
        }
        s.add(
            '<p class="small">Named in the benchmarks file but not in the data, so not shown: '
            + "; ".join(f"{esc(t)} vs {esc(c)} ({esc(why[(t, c)])})" for t, c in lacking)
            + ".</p>"
        )
    for (treatment, control), corr in corr_by.items():
        if (treatment, control) in lacking:
            continue
        label = f"{treatment} vs {control}"
        s.add(f"<h3>{esc(label)}</h3>")
        summary = "; ".join(_correlation_summary(r) for r in corr)
        cells = []
        for r in corr:
            where = {"treatment": treatment, "control": control, "measure": r["measure"]}
            why = _interval_text(r)
            interval = (
                [f'<td class="na" colspan="2">{esc(why)}</td>']
                if why is not None
                else [
                    headline(r["ci_low"], tables.BENCHMARK_CORRELATION.qualified, "ci_low", where),
                    headline(r["ci_high"], tables.BENCHMARK_CORRELATION.qualified, "ci_high", where),
                ]
            )
            note = "; ".join(x for x in (_correlation_caveat(r), r["note"]) if x)
            cells.append(
                [
                    td(r["measure"]),
                    td(r["n_clusters"]),
                    headline(r["coefficient"], tables.BENCHMARK_CORRELATION.qualified, "coefficient", where),
                    *interval,
                    td(note),
                ]
            )
        corr_table = table(["measure", "clusters", "coefficient", "95 % low", "95 % high", "note"], cells)
        mine = (
            used.filter((pl.col("treatment") == treatment) & (pl.col("control") == control)).to_dicts()
            if not used.is_empty()
            else []
        )
        reasons = reasons_by.get((treatment, control), [])
        left = f'<p class="small">Clusters left out: {esc("; ".join(reasons))}.</p>' if reasons else ""
        if len(mine) < 2:
            s.add(
                corr_table,
                f'<p class="empty">Fewer than two clusters with both ΔB and ΔH for {esc(label)}: no figure.</p>',
                left,
            )
            continue
        pts = [figures.Point(p["cluster"], p["delta_b"], _stars_from_points(p["delta_h"])) for p in mine]
        svg = figures.scatter_fit(
            f"fig-benchmark-{slug(treatment, control)}",
            f"Rating difference against benchmark difference: {label}",
            pts,
            "ΔB: benchmark score difference (percentage points of the benchmark)",
            "ΔH: rating difference (stars)",
            summary,
            "stars per benchmark point",
        )
        numbers = table(
            ["cluster", "benchmark", "ΔB (benchmark points)", "ΔH (stars)", "rated T / C"],
            [
                [
                    td(p["cluster"]),
                    td(p["benchmark"]),
                    td(p["delta_b"], 2, True),
                    td(_stars_from_points(p["delta_h"]), 2, True),
                    td(pair(p["n_treatment"], p["n_control"])),
                ]
                for p in mine
            ],
        )
        s.figure(
            svg,
            f"Each point is a task cluster; the dashed line is the least-squares fit. {esc(summary)}.",
            corr_table + numbers,
        )
        if left:
            s.add(left)
    return s
