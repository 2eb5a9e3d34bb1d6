"""Section 7: effects per task type and development cluster."""

from __future__ import annotations

import polars as pl

from .. import data, figures
from ..figures import Interval
from ..html import Section, comparison_label, esc, missing, pair, slug, table, td
from ..style import method_style

TOO_FEW = "too few ratings in an arm"  # why a segment has no estimate (its note has the count)

# ---------------------------------------------------------------- 7. segments


def _flags_by_comparison(effects: data.Rows) -> dict[tuple[str, str], dict[str, str]]:
    """(experiment, treatment) -> method -> its flags in ``estimates.experiment_effects`` (flagged rows only)."""
    if effects.why_empty:
        return {}
    found: dict[tuple[str, str], dict[str, str]] = {}
    for r in effects.frame.filter(pl.col("flags").is_not_null() & (pl.col("flags") != "")).to_dicts():
        found.setdefault((r["experiment"], r["treatment"]), {})[r["method"]] = r["flags"]
    return found


def segments_section(segments: data.Rows, effects: data.Rows | None = None) -> Section:
    """Effects within segments. A method flagged for the whole comparison in section 1 (``effects``) is drawn
    flagged here too (hollow marker, dashed interval) and named: what makes PPI++ doubtful over all sessions
    (rated sessions unlike the rest) holds within each segment as well."""
    s = Section("segments", "7. Effects per task type and development cluster")
    s.add(
        "<p>The naive and PPI++ effect within each task type and development cluster with enough ratings in both "
        "arms, on the 0–1 scale (0.25 = one star). Many small estimates: some will look different by chance; read "
        "them as where to look next, not as findings.</p>"
    )
    if segments.why_empty:
        s.empty(segments.why_empty)
        return s
    flags_by = _flags_by_comparison(effects) if effects is not None else {}
    for (experiment, treatment), group in segments.frame.group_by(["experiment", "treatment"], maintain_order=True):
        rows = group.to_dicts()
        control = rows[0]["control"]
        flagged = flags_by.get((experiment, treatment), {})
        s.add(f"<h3>{esc(experiment)}: {esc(comparison_label(treatment, control))}</h3>")
        estimated = [r for r in rows if not missing(r["effect"])]
        skipped: dict[str, set[str]] = {}
        for r in rows:  # a row without a segment speaks for the whole comparison: its note is shown below
            if missing(r["effect"]) and r["dimension"] and r["segment"]:
                skipped.setdefault(r["dimension"].replace("_", " ") + "s", set()).add(r["segment"])
        if estimated:
            intervals = [
                Interval(
                    f"{r['segment']} ({r['dimension'].replace('_', ' ')})",
                    r["method"],
                    r["effect"],
                    r["ci_low"],
                    r["ci_high"],
                    r["method"] in flagged,
                )
                for r in estimated
            ]
            svg = figures.segments(
                f"fig-segments-{slug(experiment, treatment)}",
                f"{experiment}: {treatment} vs {control} within segments",
                intervals,
            )
            numbers = table(
                [
                    "dimension",
                    "segment",
                    "method",
                    "effect (0–1)",
                    "95 % low (0–1)",
                    "95 % high (0–1)",
                    "rated T / C",
                    "p",
                ],
                [
                    [
                        td(r["dimension"]),
                        td(r["segment"]),
                        td(method_style(r["method"]).label + (" (flagged)" if r["method"] in flagged else "")),
                        td(r["effect"], 3, True),
                        td(r["ci_low"], 3, True),
                        td(r["ci_high"], 3, True),
                        td(pair(r["n_labeled_treatment"], r["n_labeled_control"])),
                        td(r["p_value"]),
                    ]
                    for r in estimated
                ],
            )
            marked = "; ".join(
                f"{method_style(m).label}: {flags}"
                for m, flags in flagged.items()
                if any(r["method"] == m for r in estimated)
            )
            s.figure(
                svg,
                "Effect with its 95 % interval in each segment with enough ratings; circles naive, diamonds PPI++."
                + (
                    f" Hollow markers and dashed intervals are flagged, as for the whole comparison in section 1"
                    f" ({esc(marked)}): read the naive estimates."
                    if marked
                    else ""
                ),
                numbers,
            )
        else:
            notes = sorted({r["note"] for r in rows if r["note"]})
            s.add(
                f'<p class="empty">No segment has enough ratings in both arms ({esc(notes[0] if notes else TOO_FEW)}'
                ").</p>"
            )
        if skipped and estimated:
            lists = "; ".join(f"{dimension}: {', '.join(sorted(names))}" for dimension, names in skipped.items())
            s.add(f'<p class="small">Not estimated ({esc(TOO_FEW)}): {esc(lists)}.</p>')
    return s
