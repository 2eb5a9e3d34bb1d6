"""The report's look in one place: the page's stylesheet, the Okabe-Ito palette, and each method's name, colour
and marker (the figures draw with them, the tables name methods by them).

The palette stays distinguishable with the common colour-vision deficiencies, and no method relies on colour alone:
each has its own marker shape. A method's name for people is ``estimates.methods.method_label``, so the figures,
the tables and the stored conclusions call it the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..estimates.methods import REPORT_ORDER, Method, method_label

BLACK, GREY, BLUE, SKY, ORANGE, VERMILLION, GREEN = (
    "#000000",
    "#666666",
    "#0072B2",
    "#56B4E9",
    "#E69F00",
    "#D55E00",
    "#009E73",
)
PURPLE = "#CC79A7"  # Okabe-Ito's reddish purple


@dataclass(frozen=True)
class MethodStyle:
    label: str
    colour: str
    marker: str


METHODS = {
    Method.NAIVE_WELCH: MethodStyle(method_label(Method.NAIVE_WELCH), BLACK, "o"),
    Method.NAIVE_BOOTSTRAP: MethodStyle(method_label(Method.NAIVE_BOOTSTRAP), GREY, "s"),
    Method.PPI: MethodStyle(method_label(Method.PPI), BLUE, "D"),
    Method.CROSSPPI: MethodStyle(method_label(Method.CROSSPPI), SKY, "^"),
    Method.AIPW: MethodStyle(method_label(Method.AIPW), ORANGE, "v"),
    Method.PPI_STRATIFIED: MethodStyle(method_label(Method.PPI_STRATIFIED), PURPLE, "h"),
    Method.PPI_INSAMPLE: MethodStyle(method_label(Method.PPI_INSAMPLE), VERMILLION, "X"),
}
"""Each method's style, in ``REPORT_ORDER`` (legends list them in this order)."""


def method_style(method: str) -> MethodStyle:
    """The style of ``method`` (a ``Method`` or its stored string); an unknown one grey, with a plus marker."""
    return METHODS.get(method, MethodStyle(method, GREY, "P"))


def method_rank(method: str) -> int:
    """Where ``method`` comes in ``REPORT_ORDER`` (an unknown one last)."""
    return REPORT_ORDER.index(method) if method in REPORT_ORDER else len(REPORT_ORDER)


STYLESHEET = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #111;
       max-width: 64rem; margin: 0 auto; padding: 1rem 1.5rem 4rem; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.5rem; border-bottom: 2px solid #ccc; } h3 { margin-top: 1.8rem; }
h4 { margin: 1.2rem 0 .3rem; }
nav ol { columns: 2; } .meta, .small, .why { color: #444; font-size: .9em; }
.conclusion { background: #f3f6fa; border-left: 4px solid #0072B2; padding: .5rem .8rem; }
.banner { background: #fde8e8; border: 2px solid #D55E00; padding: .6rem .9rem; margin: .8rem 0; }
table.summary { font-size: .95em; } table.summary th[scope="row"] { font-weight: 600; white-space: nowrap; }
.empty { background: #fff7e6; border-left: 4px solid #E69F00; padding: .5rem .8rem; }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .9em; color: #333; margin-top: .3rem; }
details { margin: .3rem 0 1rem; } summary { cursor: pointer; color: #0057a0; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: .85em; margin: .5rem 0; }
th, td { border-bottom: 1px solid #ddd; padding: .25rem .5rem; text-align: left; vertical-align: top; }
td.num, td.na { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
thead th { border-bottom: 2px solid #999; }
dl.glossary { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; font-size: .9em; }
dl.glossary dt { font-weight: 600; } dl.glossary dd { margin: 0; }
@media print { nav { display: none; } }
.decision { padding: 0 .3rem; border-radius: 3px; white-space: nowrap; } .decision-ship { background: #d6f2e7; }
.decision-hold { background: #fde0cf; } .decision-keep-collecting { background: #fff1c6; }
.decision-no-decision { background: #eee; } tr.decision-detail td { border-bottom: 2px solid #ccc; padding-top: 0; }
tr.decision-detail p.why { margin: 0 0 .2rem; } ul.guardrails { margin: 0 0 .3rem; padding-left: 1.2rem; }
ul.guardrails li { font-size: .9em; } .verdict { font-weight: 600; white-space: nowrap; }
.verdict-pass { color: #00684A; } .verdict-fail { color: #B03A00; } .verdict-inconclusive { color: #7A5A00; }
.verdict-not-estimable { color: #555; }
"""
