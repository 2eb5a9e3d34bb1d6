"""The page's first screen: the synthetic banner, then one row per comparison with its conclusion."""

from __future__ import annotations

import json

from ...estimates.experiments import OBSERVATIONAL
from .. import data
from ..html import Section, esc, missing, number, stars
from ..style import method_style

# ---------------------------------------------------------------- the answer, and what the data are


def summary_section(conclusions: data.Rows) -> Section:
    """The answer first: one row per comparison of ``estimates.conclusions``: its verdict, the method it is read
    by and why, the effect and its 95 % interval in stars, and that method's interval width against naive. Rows
    carry ``data-comparison`` and their cells ``data-field``, so the browser test compares them with the
    warehouse."""
    s = Section("summary", "The answer: did each change make users happier?")
    if conclusions.why_empty:
        s.empty(conclusions.why_empty)
        return s
    cells, single = [], []
    for r in conclusions.frame.to_dicts():
        experiment, treatment, control = r["experiment"], r["treatment"], r["control"]
        if treatment is None:
            single.append(f"{experiment} ({control} only)")
            continue
        short = esc(r["verdict"])
        low, high = r["ci_low"], r["ci_high"]
        interval = "–" if missing(low) or missing(high) else f"{stars(low)} to {stars(high)}"
        method = method_style(r["method"]).label if r["method"] is not None else "–"
        key = esc(json.dumps({"experiment": experiment, "treatment": treatment}))
        cells.append(
            f'<tr data-comparison="{key}"><th scope="row">{esc(experiment)}: {esc(treatment)} vs {esc(control)}</th>'
            f'<td data-field="conclusion">{f"<strong>{short}</strong>" if r["direction"] else short}</td>'
            f'<td><span data-field="method">{esc(method)}</span><br><span class="why">{esc(r["why"])}</span></td>'
            f'<td class="num" data-field="effect_stars">{stars(r["effect"])}</td>'
            f'<td class="num" data-field="interval_stars">{interval}</td>'
            f'<td class="num" data-field="width_vs_naive">{number(r["width_vs_naive"], 2)}</td></tr>'
        )
    if cells:
        head = "".join(
            f'<th scope="col">{h}</th>'
            for h in (
                "comparison",
                "conclusion",
                "read by",
                "effect (stars)",
                "95 % interval (stars)",
                "interval width ÷ naive",
            )
        )
        s.add(
            f'<div class="scroll"><table class="summary"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(cells)}</tbody></table></div>",
            "<p class=\"small\">Effect: the treatment arm's mean rating minus the control arm's, in stars (ratings "
            "are 1 to 5 stars; the sections below use the 0–1 scale, (stars − 1) / 4, so one star there is 0.25). "
            "Each comparison is read by PPI++ when it is valid and not flagged, else by AIPW, else by the naive "
            'difference (<a href="#effects">section 1</a> shows every method). Interval width ÷ naive below 1: '
            'the unrated sessions made the interval narrower (<a href="#unrated">section 2</a>).</p>',
        )
    if single:
        s.add(f'<p class="small">Not compared (a single arm): {esc("; ".join(single))}.</p>')
    observational = sorted({r["experiment"] for r in conclusions.frame.to_dicts() if r.get("design") == OBSERVATIONAL})
    if observational:
        s.add(
            f'<p class="small" data-design="{OBSERVATIONAL}">Associational, not effects: the arms of '
            f"{esc(', '.join(observational))} come from a session field (arms_from in experiments.toml), not from "
            "randomization, so their rows compare the sessions that had each value, not what the change did; "
            '<a href="#effects">section 1</a> shows how alike their arms are.</p>'
        )
    return s


def synthetic_banner(corpus: data.Rows) -> str:
    """A banner when any session the analysis uses was made by a generator (``data.corpus``): all of them, or
    how many of which drops beside real ones. Empty when none is."""
    if corpus.why_empty:
        return ""
    rows = corpus.frame.to_dicts()
    made = [r for r in rows if r["synthetic"]]
    if not made:
        return ""
    total, synthetic = sum(r["sessions"] for r in rows), sum(r["synthetic"] for r in made)
    generators = sorted({g for r in made for g in (r["generators"] or "").split(", ") if g})
    seeds = sorted({x for r in made for x in (r["seeds"] or "").split(", ") if x}, key=lambda x: (len(x), x))
    source = f"{', '.join(generators)}" + (f", seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}" if seeds else "")
    if synthetic == total:
        text = (
            f"<strong>Synthetic data.</strong> All {total:,} sessions were made by PULSE's generator ({esc(source)}): "
            "the numbers show how the pipeline works, not how real users feel."
        )
    else:
        drops = "; ".join(
            f"{esc(r['drop_id'])}: {r['synthetic']:,} of {r['sessions']:,}" for r in rows if r["synthetic"]
        )
        real = total - synthetic
        text = (
            f"<strong>Mixed data: {synthetic:,} of {total:,} sessions are synthetic</strong>, made by PULSE's "
            f"generator ({esc(source)}), beside {real:,} real one{'s' if real != 1 else ''} (by drop: {drops}). "
            "Every effect "
            "below mixes made-up sessions with real ones: remove the synthetic drops before reading them as "
            "users' opinions."
        )
    return f'<p class="banner" role="note" data-synthetic="{synthetic}" data-sessions="{total}">{text}</p>'
