"""The page's first screen: the synthetic banner, then one row per comparison with its decision and conclusion,
and under it why that decision and each guardrail (verdict, effect and interval against the margin)."""

from __future__ import annotations

import json
from collections.abc import Mapping

import polars as pl

from ... import tables
from ...estimates.decisions import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    guardrail_numbers,
    guardrail_writer,
    interval_level,
    tolerated,
)
from ...estimates.experiments import OBSERVATIONAL
from .. import data
from ..html import Section, esc, mark, missing, number, stars
from ..style import method_style

VERDICT_SIGNS = {PASS: "✓", FAIL: "✗", INCONCLUSIVE: "?", None: "–"}
"""A sign before each guardrail's verdict, beside its word (the word carries the meaning; sign and colour help)."""

# ---------------------------------------------------------------- the guardrails beside each decision


def guardrail_item(g: Mapping) -> str:
    """One guardrail as a list item: its sign and verdict in words, its name, metric and which way is better, its
    effect with its interval (relative, in %, when its margin is relative; in the metric's units when absolute),
    each number marked for machines (``html.mark``), and the harm its margin tolerates."""
    verdict = g.get("verdict")
    where = {k: g[k] for k in ("experiment", "treatment", "guardrail")}
    effect, low, high, scale = guardrail_numbers(g)
    percent = scale == "relative"
    columns = ("relative_effect", "relative_ci_low", "relative_ci_high") if percent else ("effect", "ci_low", "ci_high")
    write = guardrail_writer(scale)

    shown = [
        mark(v, tables.GUARDRAILS.qualified, c, where, write(v), percent)
        for v, c in zip((effect, low, high), columns, strict=True)
    ]
    better = f"{esc(str(g.get('direction') or '?'))} is better"
    word = verdict or "not estimable"
    head = (
        f'<span class="verdict verdict-{esc(word.replace(" ", "-"))}" data-field="verdict">'
        f'<span aria-hidden="true">{VERDICT_SIGNS.get(verdict, "–")}</span> {esc(word)}</span> '
        f"<strong>{esc(str(g['guardrail']))}</strong> ({esc(str(g.get('metric') or ''))}, {better})"
    )
    if missing(effect):
        note = g.get("note")
        return f'<li data-guardrail="{esc(str(g["guardrail"]))}">{head}{": " + esc(note) if note else ""}</li>'
    bound = tolerated(g)
    limit = "up to" if (bound or 0) >= 0 else "down to"
    against = f"of {g['control']}'s mean" if percent else str(g.get("metric") or "")
    return (
        f'<li data-guardrail="{esc(str(g["guardrail"]))}">{head}: {shown[0]} ({interval_level(g)} interval {shown[1]}'
        f" to {shown[2]}); tolerated: {limit} {esc(write(bound))} {esc(against)}</li>"
    )


def guardrails_row(r: Mapping, rows: list[Mapping], why_none: str | None, span: int) -> str:
    """The row under a comparison: why its decision (``decision_why``), then its guardrails (``guardrail_item``),
    or that it has none (``why_none``: the guardrails table holds nothing at all, said once elsewhere)."""
    key = esc(json.dumps({"experiment": r["experiment"], "treatment": r["treatment"]}))
    why = r.get("decision_why")
    said = f'<p class="why" data-field="decision_why">{esc(why)}</p>' if why else ""
    if rows:
        listed = f'<ul class="guardrails">{"".join(guardrail_item(g) for g in rows)}</ul>'
    else:  # when the table holds none at all, the reason is said once, under the summary table
        listed = "" if why_none else '<p class="small">Guardrails: none declared for this comparison.</p>'
    return f'<tr class="decision-detail" data-decision-of="{key}"><td colspan="{span}">{said}{listed}</td></tr>'


def decision_cell(decision: str | None) -> str:
    """The decision in words, bold, with its class for colour ('–' for a warehouse from before decisions)."""
    if not decision:
        return '<td data-field="decision">–</td>'
    return (
        f'<td data-field="decision"><strong class="decision decision-{esc(decision.replace(" ", "-"))}">'
        f"{esc(decision)}</strong></td>"
    )


# ---------------------------------------------------------------- the answer, and what the data are


def summary_section(conclusions: data.Rows, guardrails: data.Rows | None = None) -> Section:
    """The answer first: one row per comparison of ``estimates.conclusions``: its decision, its verdict, the method
    it is read by and why, the effect and its 95 % interval in stars, and that method's interval width against
    naive; under it, why that decision and each guardrail of ``estimates.guardrails`` (``guardrails``; empty or
    missing: the reason is said under each comparison). Rows carry ``data-comparison`` and their cells
    ``data-field``, so the browser test compares them with the warehouse."""
    s = Section("summary", "The answer: did each change make users happier, and should it ship?")
    if conclusions.why_empty:
        s.empty(conclusions.why_empty)
        return s
    guardrails = guardrails or data.Rows(pl.DataFrame(), "no guardrails were read")
    by_comparison: dict[tuple, list[Mapping]] = {}
    if guardrails.why_empty is None:
        for g in guardrails.frame.to_dicts():
            by_comparison.setdefault((g["experiment"], g["treatment"], g["control"]), []).append(g)
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
        decision = r.get("decision")
        cells.append(
            f'<tr data-comparison="{key}" data-decision="{esc(decision or "")}">'
            f'<th scope="row">{esc(experiment)}: {esc(treatment)} vs {esc(control)}</th>'
            f"{decision_cell(decision)}"
            f'<td data-field="conclusion">{f"<strong>{short}</strong>" if r["direction"] else short}</td>'
            f'<td><span data-field="method">{esc(method)}</span><br><span class="why">{esc(r["why"])}</span></td>'
            f'<td class="num" data-field="effect_stars">{stars(r["effect"])}</td>'
            f'<td class="num" data-field="interval_stars">{interval}</td>'
            f'<td class="num" data-field="width_vs_naive">{number(r["width_vs_naive"], 2)}</td></tr>'
            + guardrails_row(r, by_comparison.get((experiment, treatment, control), []), guardrails.why_empty, 7)
        )
    if cells:
        head = "".join(
            f'<th scope="col">{h}</th>'
            for h in (
                "comparison",
                "decision",
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
            "Each comparison is read by PPI++ when it is valid and not flagged (stratified PPI++ when it has strata), "
            "else by AIPW, else by the naive "
            'difference (<a href="#effects">section 1</a> shows every method). Interval width ÷ naive below 1: '
            'the unrated sessions made the interval narrower (<a href="#unrated">section 2</a>).</p>',
            '<p class="small">Decision, by a rule fixed before the data (docs/decisions.md): <strong>ship</strong> '
            "only when the rating difference is positive (its interval above zero, kept by Holm's correction) and "
            "no guardrail fails (an inconclusive one is named as a caveat); <strong>hold</strong> when a guardrail "
            "fails or the ratings are clearly lower; "
            "<strong>keep collecting</strong> otherwise; <strong>no decision</strong> for an observational "
            "comparison (an association is not an effect), a single arm, or no valid estimate. A guardrail is a "
            "metric the change must not harm beyond a declared margin (experiments.toml); it <em>passes</em> (✓) "
            "when the one-sided (1 − α) bound of its harm is inside the tolerated margin, <em>fails</em> (✗) when "
            "the harm is beyond the margin at level α, and is <em>inconclusive</em> (?) otherwise. The interval "
            "shown is two-sided (1 − α), so it may reach a little past the margin on a pass.</p>",
        )
    if cells and guardrails.why_empty:
        s.add(f'<p class="small" data-guardrails="none">No guardrails shown: {esc(guardrails.why_empty)}.</p>')
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
