"""The report's figures: one function per figure, each returning inline SVG text with its text alternative.

matplotlib draws on a ``Figure`` of its own (no pyplot, so no global figure state and no GUI backend: safe inside
a Dagster run) and saves it as SVG with text as paths, so a figure looks the same on any machine, needs no font
and prints sharp. Every figure has a fixed size, uses the Okabe-Ito palette (distinguishable with the common
colour-vision deficiencies) and never relies on colour alone: each method has its own marker shape, intervals
of different kinds have their own line style, and labels say what a colour would.

Each SVG gets ``role="img"``, a ``<title>`` and a ``<desc>`` that states the numbers shown, so a screen reader
reads the figure; the page also lists the same numbers in a table.
"""

from __future__ import annotations

import functools
import hashlib
import html
import io
import math
import os
import pickle
import re
import textwrap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib import dates as mdates
from matplotlib.figure import Figure

from ..estimates import methods as methods_module
from . import style as style_module
from .style import BLACK, BLUE, GREY, METHODS, method_style

STARS_PER_UNIT = 4.0  # label = (stars - 1) / 4: a difference of 0.25 on the label is one star (stars.py)


STYLE = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "svg.fonttype": "path",
}


@contextmanager
def _style(fig_id: str) -> Iterator[None]:
    """The report's look; the SVG's hashed ids salted with the figure's id, so a figure's SVG is the same on every
    build."""
    with matplotlib.rc_context({**STYLE, "svg.hashsalt": fig_id}):
        yield


_DRAWN: ContextVar[tuple[Path, set[Path]] | None] = ContextVar("pulse_figure_cache", default=None)
_SOURCE = hashlib.sha1(
    b"".join(Path(m).read_bytes() for m in (__file__, style_module.__file__, methods_module.__file__))
    + matplotlib.__version__.encode()
).hexdigest()
"""What a kept figure was drawn by: this module, the style it draws with (``style.py``: colours, markers), the
methods' names (``estimates/methods.py``) and matplotlib's version. A change to any of them draws every figure again."""


@contextmanager
def drawn_once(folder: Path | None) -> Iterator[None]:
    """While open, each figure function's SVG is kept in ``folder`` by a digest of its arguments (and of
    ``_SOURCE``: this module's source, ``style.py``'s and matplotlib's version), and read from there when a later
    build draws it with the same arguments; at the end, the SVGs this build did not use are removed. None: draw
    everything.

    Why: a drop of ratings alone rebuilds the report at every run of a live drop; drawing its ~20 figures was most of
    the report's time (18 of 25 s under load at the paper's scale), and most figures (feature comparisons, the
    split check, agreement) do not change with a rating. The SVG of a figure depends on its arguments only (ids
    salted with the figure's id, no date: ``_style``, ``_svg``), so a kept one is the one drawing would give."""
    if folder is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    used: set[Path] = set()
    token = _DRAWN.set((folder, used))
    try:
        yield
    finally:
        _DRAWN.reset(token)
    for path in folder.glob("*.svg"):
        if path not in used:
            path.unlink(missing_ok=True)


def _kept(draw: Callable[..., str]) -> Callable[..., str]:
    """``draw``'s SVG from ``drawn_once``'s folder when it holds one for these arguments, else drawn and kept."""

    @functools.wraps(draw)
    def wrapper(*args, **kwargs) -> str:
        cache = _DRAWN.get()
        if cache is None:
            return draw(*args, **kwargs)
        folder, used = cache
        try:
            arguments = pickle.dumps((args, sorted(kwargs.items())), protocol=5)
        except (pickle.PicklingError, TypeError, AttributeError):
            return draw(*args, **kwargs)
        key = hashlib.sha1(f"{_SOURCE}/{draw.__name__}/".encode() + arguments).hexdigest()
        path = folder / f"{key}.svg"
        used.add(path)
        try:
            return path.read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            pass
        svg = draw(*args, **kwargs)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(svg, encoding="utf-8")
        os.replace(partial, path)
        return svg

    return wrapper


def _svg(fig: Figure, fig_id: str, title: str, desc: str) -> str:
    """The figure as an ``<svg>`` element for inline use: no XML prolog, no metadata block (it names
    matplotlib's web site), an accessible name and description."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})  # constrained layout: nothing to trim
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)
    text = re.sub(r' xmlns(:xlink)?="[^"]*"', "", text)  # inline SVG in HTML needs no namespace declarations
    # one page holds many SVGs: their ids (glyphs, clip paths, groups) get the figure's id as prefix, so none clash
    text = re.sub(r'(\bid="|href="#|url\(#)([^")]+)', lambda m: f"{m.group(1)}{fig_id}-{m.group(2)}", text)
    head_end = text.index(">") + 1
    a11y = f'<title id="{fig_id}-title">{html.escape(title)}</title><desc id="{fig_id}-desc">{html.escape(desc)}</desc>'
    opening = text[:head_end].replace(
        "<svg", f'<svg role="img" id="{fig_id}" aria-labelledby="{fig_id}-title {fig_id}-desc"', 1
    )
    return opening + a11y + text[head_end:]


def _title(fig: Figure, title: str) -> None:
    """The title at the figure's left edge, above everything: an axes title starts where the axes do, after the
    row labels, and runs off the figure when the labels are long."""
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)


def _legend(fig: Figure, ncol: int) -> None:
    """The legend under the plot, when something drawn has a label (a figure whose values are all missing has
    none)."""
    if any(ax.get_legend_handles_labels()[0] for ax in fig.axes):
        fig.legend(loc="outside lower left", ncol=ncol)


def _wrapped(label: str) -> str:
    """An axis label in lines of at most 50 characters: long row labels (segment and feature names) leave the
    plot narrow, and one long line would run off the figure."""
    return textwrap.fill(label, 50)


def _fmt(value: float | None, digits: int = 3, signed: bool = True) -> str:
    if value is None or math.isnan(value):
        return "no value"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


@dataclass(frozen=True)
class Interval:
    """One row of a forest plot: a label, a point, its interval, and how to draw it."""

    label: str
    method: str
    effect: float | None
    low: float | None
    high: float | None
    flagged: bool = False


def _is_number(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def _xerr(row: Interval) -> list[list[float]] | None:
    """The interval as matplotlib's error-bar lengths, or None when a bound is missing (the point alone)."""
    if _is_number(row.low) and _is_number(row.high):
        return [[row.effect - row.low], [row.high - row.effect]]
    return None


@_kept
def forest(fig_id: str, title: str, rows: Sequence[Interval], reference: float | None) -> str:
    """Every method's effect with its 95 % interval, top to bottom in ``rows`` order; the naive estimate as a
    dotted reference line. Flagged rows: hollow marker, dashed interval, "(flagged)" in the label. Rows without
    numbers keep their label, marked "(no estimate)"."""
    with _style(fig_id):
        fig = Figure(figsize=(7.2, 0.42 * len(rows) + 1.5), layout="constrained")
        ax = fig.add_subplot()
        labels = []
        for y, row in enumerate(reversed(rows)):
            style = method_style(row.method)
            suffix = " (flagged)" if row.flagged else ""
            if not _is_number(row.effect):
                labels.append(f"{row.label} (no estimate)")
                continue
            labels.append(row.label + suffix)
            xerr = _xerr(row)
            bars = ax.errorbar(
                row.effect,
                y,
                xerr=xerr,
                fmt=style.marker,
                color=style.colour,
                markerfacecolor="white" if row.flagged else style.colour,
                markersize=7,
                capsize=3,
                linewidth=1.4,
            )
            if row.flagged and xerr is not None:
                bars.lines[2][0].set_linestyle("--")
        ax.set_yticks(range(len(rows)), labels)
        ax.axvline(0, color=GREY, linewidth=0.8)
        if _is_number(reference):
            ax.axvline(reference, color=BLACK, linestyle=":", linewidth=1.2, label="naive estimate")
            _legend(fig, 1)
        ax.set_xlabel("effect: treatment − control on the 0–1 rating scale (0.25 = one star)")
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.grid(axis="y", visible=False)
        top = ax.secondary_xaxis("top", functions=(lambda x: x * STARS_PER_UNIT, lambda s: s / STARS_PER_UNIT))
        top.set_xlabel("stars")
        _title(fig, title)
        desc = "; ".join(
            f"{r.label}: {_fmt(r.effect)} [{_fmt(r.low)}, {_fmt(r.high)}]" + (" flagged" if r.flagged else "")
            for r in rows
        )
        return _svg(fig, fig_id, title, f"Effect and 95 % interval by method. {desc}.")


@dataclass(frozen=True)
class WidthRow:
    """One comparison: each method's interval width relative to naive, and the best PPI allows for its rho."""

    comparison: str
    best: float | None
    widths: dict[str, float | None]
    flagged: frozenset[str] = frozenset()  # methods flagged for this comparison: hollow markers, as in ``forest``


@_kept
def width_gain(fig_id: str, rows: Sequence[WidthRow]) -> str:
    """Per comparison, the interval width of each method relative to naive (markers) against the best width
    PPI++ can reach with the arms' out-of-fold correlations (a black bar,
    ``stats.ppi.best_width_ratio_of_difference``); 1 = no narrower than naive."""
    title = "Interval width relative to naive, against the best PPI++ can do with these predictions"
    with _style(fig_id):
        fig = Figure(figsize=(7.2, 0.55 * len(rows) + 1.6), layout="constrained")
        ax = fig.add_subplot()
        methods = sorted(
            {m for r in rows for m in r.widths}, key=lambda m: list(METHODS).index(m) if m in METHODS else 99
        )
        offsets = np.linspace(-0.2, 0.2, len(methods)) if len(methods) > 1 else [0.0]
        labelled: set[str] = set()
        if any(row.flagged for row in rows):  # one legend entry for the hollow markers
            ax.plot([], [], marker="o", color=GREY, markerfacecolor="white", linestyle="none", label="hollow: flagged")
        for y, row in enumerate(reversed(rows)):
            if _is_number(row.best):
                ax.plot(
                    [row.best],
                    [y],
                    marker="|",
                    markersize=18,
                    color=BLACK,
                    linestyle="none",
                    label="best for PPI++ (from each arm's ρ)" if y == 0 else None,
                )
            for method, dy in zip(methods, offsets, strict=True):
                value = row.widths.get(method)
                if _is_number(value):
                    style = method_style(method)
                    ax.plot(
                        [value],
                        [y + dy],
                        marker=style.marker,
                        color=style.colour,
                        markerfacecolor="white" if method in row.flagged else style.colour,
                        linestyle="none",
                        markersize=6,
                        label=style.label if method not in labelled else None,
                    )
                    labelled.add(method)
        ax.axvline(1.0, color=GREY, linewidth=0.8)
        ax.set_yticks(range(len(rows)), [r.comparison for r in reversed(rows)])
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("interval width ÷ naive interval width (left of 1 = narrower than naive)")
        _legend(fig, 4)
        _title(fig, title)
        desc = "; ".join(
            f"{r.comparison}: best {_fmt(r.best, 2, False)}, "
            + ", ".join(
                f"{method_style(m).label} {_fmt(v, 2, False)}" + (" flagged" if m in r.flagged else "")
                for m, v in r.widths.items()
            )
            for r in rows
        )
        return _svg(fig, fig_id, title, desc)


@_kept
def calibration(fig_id: str, predicted: Sequence[float], observed: Sequence[float], counts: Sequence[int]) -> str:
    """Mean rating against mean prediction by decile of prediction (stars), with the diagonal of a perfectly
    calibrated model."""
    title = "Calibration: mean rating by decile of the out-of-fold prediction"
    with _style(fig_id):
        fig = Figure(figsize=(5.2, 4.4), layout="constrained")
        ax = fig.add_subplot()
        low = max(1.0, min(min(predicted), min(observed)) - 0.25)
        high = min(5.0, max(max(predicted), max(observed)) + 0.25)
        ax.plot([low, high], [low, high], color=GREY, linestyle="--", linewidth=1, label="perfect calibration")
        ax.plot(predicted, observed, marker="o", color=BLUE, linewidth=1.2, label="deciles (mean of each tenth)")
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        ax.set_aspect("equal")
        ax.set_xlabel("mean predicted rating (stars)")
        ax.set_ylabel("mean observed rating (stars)")
        ax.legend(loc="upper left")
        _title(fig, title)
        desc = "; ".join(
            f"decile {i + 1} ({n} sessions): predicted {p:.2f}, observed {o:.2f}"
            for i, (p, o, n) in enumerate(zip(predicted, observed, counts, strict=True))
        )
        return _svg(fig, fig_id, title, desc)


@_kept
def bars(
    fig_id: str,
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    strong: Sequence[bool],
    xlabel: str,
    legend: tuple[str, str],
    unit: str = "",
) -> str:
    """Horizontal bars, the first label at the top. ``strong`` bars are solid, the others hatched and light:
    the two kinds stay apart in greyscale. ``legend`` names (strong, other)."""
    with _style(fig_id):
        fig = Figure(figsize=(7.2, 0.34 * len(labels) + 1.5), layout="constrained")
        ax = fig.add_subplot()
        ys = list(range(len(labels)))[::-1]
        seen: set[bool] = set()
        for y, value, is_strong in zip(ys, values, strong, strict=True):
            ax.barh(
                y,
                value,
                color=BLUE if is_strong else "#cfe3f1",
                edgecolor=BLUE,
                hatch=None if is_strong else "///",
                label=None if is_strong in seen else legend[0 if is_strong else 1],
            )
            seen.add(is_strong)
        ax.axvline(0, color=GREY, linewidth=0.8)
        ax.set_yticks(ys, labels)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(_wrapped(xlabel))
        _legend(fig, 2)
        _title(fig, title)
        desc = "; ".join(f"{label}: {value:+.3g}{unit}" for label, value in zip(labels, values, strict=True))
        return _svg(fig, fig_id, title, desc)


@dataclass(frozen=True)
class Point:
    label: str
    x: float
    y: float


@_kept
def scatter_fit(
    fig_id: str, title: str, points: Sequence[Point], xlabel: str, ylabel: str, summary: str, slope_unit: str = ""
) -> str:
    """Labelled points with their least-squares line (when the x values vary), its slope in ``slope_unit``;
    ``summary`` (the correlations) is written in the figure and its description."""
    with _style(fig_id):
        fig = Figure(figsize=(6.4, 4.6), layout="constrained")
        ax = fig.add_subplot()
        xs = np.array([p.x for p in points])
        ys = np.array([p.y for p in points])
        ax.plot(xs, ys, marker="o", linestyle="none", color=BLUE, markersize=6, label="task cluster")
        for p in points:
            ax.annotate(p.label, (p.x, p.y), textcoords="offset points", xytext=(5, 4), fontsize=7.5)
        if len(points) >= 2 and np.ptp(xs) > 0:
            slope, intercept = np.polyfit(xs, ys, 1)
            grid = np.linspace(xs.min(), xs.max(), 2)
            ax.plot(
                grid,
                intercept + slope * grid,
                color=BLACK,
                linestyle="--",
                linewidth=1,
                label=f"least-squares line (slope {slope:.3g}{' ' + slope_unit if slope_unit else ''})",
            )
        ax.axhline(0, color=GREY, linewidth=0.8)
        ax.axvline(0, color=GREY, linewidth=0.8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        _legend(fig, 2)
        _title(fig, f"{title}\n{textwrap.fill(summary, 85)}")  # the correlations, wrapped to the figure's width
        desc = f"{summary}. " + "; ".join(f"{p.label}: x {p.x:+.2f}, y {p.y:+.2f}" for p in points)
        return _svg(fig, fig_id, title, desc)


@_kept
def segments(fig_id: str, title: str, rows: Sequence[Interval]) -> str:
    """Effects within segments, two methods per segment side by side: rows come in pairs sharing a label, in
    the order given; each method keeps its marker. Flagged rows: hollow marker, dashed interval, "(flagged)" in
    the legend, as in ``forest``."""
    with _style(fig_id):
        labels = list(dict.fromkeys(r.label for r in rows))
        fig = Figure(figsize=(7.2, 0.5 * len(labels) + 1.6), layout="constrained")
        ax = fig.add_subplot()
        methods = list(dict.fromkeys(r.method for r in rows))
        offsets = dict(zip(methods, np.linspace(0.15, -0.15, len(methods)) if len(methods) > 1 else [0.0], strict=True))
        position = {label: len(labels) - 1 - i for i, label in enumerate(labels)}
        seen: set[str] = set()
        for row in rows:
            if not _is_number(row.effect):
                continue
            style = method_style(row.method)
            xerr = _xerr(row)
            bars = ax.errorbar(
                row.effect,
                position[row.label] + offsets[row.method],
                xerr=xerr,
                fmt=style.marker,
                color=style.colour,
                markerfacecolor="white" if row.flagged else style.colour,
                markersize=6,
                capsize=2.5,
                label=None if row.method in seen else style.label + (" (flagged)" if row.flagged else ""),
            )
            if row.flagged and xerr is not None:
                bars.lines[2][0].set_linestyle("--")
            seen.add(row.method)
        ax.axvline(0, color=GREY, linewidth=0.8)
        ax.set_yticks([position[label] for label in labels], labels)
        ax.set_ylim(-0.7, len(labels) - 0.3)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel(_wrapped("effect: treatment − control on the 0–1 rating scale (0.25 = one star)"))
        _legend(fig, len(methods))
        _title(fig, title)
        desc = "; ".join(
            f"{r.label}, {method_style(r.method).label}: {_fmt(r.effect)} [{_fmt(r.low)}, {_fmt(r.high)}]"
            + (" flagged" if r.flagged else "")
            for r in rows
        )
        return _svg(fig, fig_id, title, desc)


@dataclass(frozen=True)
class Look:
    day: datetime
    effect: float
    ci_low: float
    ci_high: float
    cs_low: float
    cs_high: float


SCALE_LIMIT = 1.0  # a difference of two means on the 0-1 scale lies in [-1, 1]


def history_limits(looks: Sequence[Look]) -> tuple[float, float]:
    """The history's vertical range: every estimate and band with a margin, but never beyond ±1, the largest
    difference the 0-1 scale allows (a first day's confidence sequence can reach ±2.7: drawn to scale it would
    flatten everything else). Bands beyond it run off the edge."""
    values = [v for x in looks for v in (x.effect, x.ci_low, x.ci_high, x.cs_low, x.cs_high) if _is_number(v)]
    low, high = max(-SCALE_LIMIT, min(values)), min(SCALE_LIMIT, max(values))
    margin = 0.05 * (high - low) or 0.05
    return max(-SCALE_LIMIT, low - margin), min(SCALE_LIMIT, high + margin)


@_kept
def history(fig_id: str, title: str, looks: Sequence[Look]) -> str:
    """The estimate day by day (solid), its fixed-horizon 95 % interval (dashed, valid for one look) and the
    always-valid confidence sequence (dotted, valid at every look)."""
    with _style(fig_id):
        fig = Figure(figsize=(7.2, 3.4), layout="constrained")
        ax = fig.add_subplot()
        days = [look.day for look in looks]
        ax.plot(days, [x.effect for x in looks], color=BLUE, linewidth=1.6, label="estimate")
        bands = (
            ("ci", BLUE, "--", 1.0, "95 % interval (valid for one look)"),
            ("cs", BLACK, ":", 1.3, "confidence sequence (valid every day)"),
        )
        for prefix, colour, style, width, label in bands:  # each band's two edges, the label on the lower one
            for edge, edge_label in (("low", label), ("high", None)):
                values = [getattr(x, f"{prefix}_{edge}") for x in looks]
                ax.plot(days, values, color=colour, linestyle=style, linewidth=width, label=edge_label)
        ax.axhline(0, color=GREY, linewidth=0.8)
        ax.set_ylim(*history_limits(looks))
        ax.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=8))
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%d %b\n%Y"))  # every tick a whole date
        ax.set_ylabel("effect (0–1 scale)")
        right = ax.secondary_yaxis("right", functions=(lambda x: x * STARS_PER_UNIT, lambda s: s / STARS_PER_UNIT))
        right.set_ylabel("stars")
        _legend(fig, 3)
        _title(fig, title)
        last = looks[-1]
        desc = (
            f"{len(looks)} looks from {looks[0].day:%Y-%m-%d} to {last.day:%Y-%m-%d}; on the last day the estimate is"
            f" {_fmt(last.effect)}, interval [{_fmt(last.ci_low)}, {_fmt(last.ci_high)}], confidence sequence"
            f" [{_fmt(last.cs_low)}, {_fmt(last.cs_high)}]"
        )
        return _svg(fig, fig_id, title, desc)
