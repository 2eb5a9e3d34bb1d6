"""The report page's frame: one self-contained HTML document built from the warehouse's tables.

The page opens with the answer (issue 33): a banner when sessions were made by the generator (``data.corpus``), then
one row per comparison (``sections/answer.py``: the decision, the conclusion, the method it is read by, the effect
and its interval in stars, the width against naive; under it, why that decision and each guardrail). The detail
follows in issue 15's order: the effects per experiment, how much the unrated sessions helped, model quality,
rated against unrated sessions, what changed between arms (and cost), ratings against benchmarks, effects per task
type and cluster, the split check and power, the history, the design (unit, ask policy), whether the model still
agrees with people (the agreement watch). Every value from the warehouse is escaped (``html.escape``); the page
loads nothing (no script, no external stylesheet, font or image): the figures are inline SVG (``figures.py``).

The rooms: this module assembles the page (header, summary, table of contents, sections); ``data.py`` reads each
section's rows; ``sections/`` holds one module per section (or pair of sections); ``html.py`` the cells, tables,
headline marks and ``Section``; ``style.py`` the stylesheet, palette and each method's style; ``figures.py`` draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from . import data
from .html import Section, esc
from .sections.agreement import agreement_section
from .sections.answer import summary_section, synthetic_banner
from .sections.benchmarks import benchmark_section
from .sections.design import design_section
from .sections.effects import effects_section, width_section
from .sections.features import features_section
from .sections.history import history_section
from .sections.model import model_section, shift_section
from .sections.segments import segments_section
from .sections.split_power import split_power_section
from .style import STYLESHEET

__all__ = ["Page", "Section", "build_page"]


@dataclass
class Page:
    """The document and what it holds (for the asset's metadata)."""

    html: str
    sections: int
    figures: int


def build_page(con: duckdb.DuckDBPyConnection, source: str, built: datetime) -> Page:
    """The whole report from the warehouse open on ``con``; ``source`` (the warehouse's path) and ``built``
    (when) are shown in its header."""
    effects = data.effects(con)
    power = data.power(con)
    conclusions = data.conclusions(con)
    summary = summary_section(conclusions, data.guardrails(con))
    sections = [
        effects_section(effects, conclusions, data.balance(con)),
        width_section(effects),
        model_section(data.calibration(con), data.cv_metrics(con), data.recalibration(con)),
        shift_section(data.label_shift(con), effects),
        features_section(data.feature_differences(con), data.cost(con)),
        benchmark_section(data.benchmark_points(con), data.benchmark_correlation(con), data.benchmark_left_out(con)),
        segments_section(data.segment_effects(con), effects),
        split_power_section(data.srm(con), power),
        history_section(data.history(con), conclusions),
        design_section(data.units(con), data.ask_policy(con)),
        agreement_section(data.agreement_history(con)),
    ]
    toc = "".join(f'<li><a href="#{s.anchor}">{esc(s.title.split(". ", 1)[1])}</a></li>' for s in sections)
    body = "".join(s.render(2) for s in sections)
    banner = synthetic_banner(data.corpus(con))
    document = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>PULSE report</title><style>{STYLESHEET}</style></head><body>"
        "<header><h1>PULSE report: user satisfaction by experiment</h1>"
        f'<p class="meta">Built {built:%Y-%m-%d %H:%M} UTC from <code>{esc(source)}</code>. Every number comes from '
        "that warehouse; each figure's numbers are under &quot;The numbers&quot;.</p>"
        f"{banner}</header><main>{summary.render(2)}"
        f'<nav aria-label="Sections"><h2>The detail</h2><ol>{toc}</ol></nav>{body}</main></body></html>\n'
    )
    return Page(document, len(sections) + 1, sum(s.figures for s in (summary, *sections)))
