"""The report's HTML pieces: cells, tables, and the ``Section`` every section of the page fills.

Every value from the warehouse goes through ``esc`` (``html.escape``). Numbers are written by ``number`` and
``stars``, the same functions that write the numbers of ``estimates.conclusions``' sentences, so the page's cells
and the stored sentences agree digit for digit.

Headline numbers are marked for machines (``headline``): ``data-headline`` (the column), ``data-table``,
``data-where`` (the row's key as JSON) and ``data-value`` (the full-precision number; the cell shows it rounded),
so a test can compare the page with the warehouse without parsing prose.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..estimates.wording import in_stars, missing, number

esc = html.escape
stars = in_stars  # a difference on the 0-1 label scale in stars, 2 decimals


@dataclass
class Section:
    """One section of the page: its anchor, its title, its HTML parts and how many figures it holds."""

    anchor: str
    title: str
    parts: list[str] = field(default_factory=list)
    figures: int = 0

    def add(self, *html_parts: str) -> None:
        self.parts.extend(html_parts)

    def figure(self, svg: str, caption: str, numbers: str) -> None:
        """A figure with its caption, and the numbers it shows as a table under "The numbers"."""
        self.figures += 1
        self.add(
            f"<figure>{svg}<figcaption>{caption}</figcaption></figure>",
            f"<details><summary>The numbers</summary>{numbers}</details>",
        )

    def empty(self, reason: str) -> None:
        self.add(f'<p class="empty">Nothing to show: {esc(reason)}.</p>')

    def render(self, level: int) -> str:
        return f'<section id="{self.anchor}"><h{level}>{esc(self.title)}</h{level}>{"".join(self.parts)}</section>'


def td(value: object, digits: int = 3, signed: bool = False) -> str:
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, float) or value is None:
        cls = "na" if missing(value) else "num"
        return f'<td class="{cls}">{number(value, digits, signed)}</td>'
    if isinstance(value, int):
        return f'<td class="num">{value}</td>'
    return f"<td>{esc(str(value))}</td>"


def headline(value: float | None, table: str, column: str, where: dict, digits: int = 3, signed: bool = True) -> str:
    """A cell the browser test compares with ``SELECT column FROM table WHERE where``; a missing value is not
    a headline (nothing to compare)."""
    if missing(value):
        return td(None)
    attrs = (
        f'data-headline="{esc(column)}" data-table="{esc(table)}" data-where="{esc(json.dumps(where))}"'
        f' data-value="{value!r}"'
    )
    return f'<td class="num" {attrs}>{number(value, digits, signed)}</td>'


def mark(value: float | None, table: str, column: str, where: dict, text: str, percent: bool = False) -> str:
    """A headline number inside running text (a ``<span>``, marked as ``headline`` marks a cell), its ``text``
    written by the caller; ``percent``: the text shows 100 x the value with a ' %' (``data-unit="%"``). A missing
    value is plain text (nothing to compare)."""
    if missing(value):
        return esc(text)
    unit = ' data-unit="%"' if percent else ""
    attrs = (
        f'data-headline="{esc(column)}" data-table="{esc(table)}" data-where="{esc(json.dumps(where))}"'
        f' data-value="{value!r}"{unit}'
    )
    return f"<span {attrs}>{esc(text)}</span>"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], caption: str | None = None) -> str:
    """An HTML table from header texts and rows of ready ``<td>`` cells, in a horizontally scrolling box."""
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    body = "".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f'<div class="scroll"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def pair(treatment: object, control: object) -> str:
    """Two counts, treatment / control, '–' for a missing one."""
    return " / ".join("–" if missing(v) else str(v) for v in (treatment, control))


def percent(value: float | None) -> str:
    return "–" if missing(value) else f"{100 * value:+.1f} %"


def comparison_label(treatment: str | None, control: str | None) -> str:
    return f"{treatment} vs {control}" if treatment is not None else f"{control} (one arm)"


def slug(*parts: object) -> str:
    text = "-".join(str(p) for p in parts if p is not None)
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
