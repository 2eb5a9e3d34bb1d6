"""The report's figures: one function per figure, each returning inline SVG text with its text alternative.

How a figure becomes SVG, the shared look and the figures kept between builds are in ``drawing.py``. Every
figure has a fixed size, uses the Okabe-Ito palette (distinguishable with the common colour-vision deficiencies)
and never relies on colour alone: each method has its own marker shape, intervals of different kinds have their
own line style, and labels say what a colour would.

Each SVG gets ``role="img"``, a ``<title>`` and a ``<desc>`` that states the numbers shown, so a screen reader
reads the figure; the page also lists the same numbers in a table.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from matplotlib import dates as mdates
from matplotlib.figure import Figure

from .drawing import fmt, is_number, kept, legend_below, styled, svg_of, title_left, wrapped
from .style import BLACK, BLUE, GREY, METHODS, VERMILLION, method_style

STARS_PER_UNIT = 4.0  # label = (stars - 1) / 4: a difference of 0.25 on the label is one star (stars.py)


@dataclass(frozen=True)
class Interval:
    """One row of a forest plot: a label, a point, its interval, and how to draw it."""

    label: str
    method: str
    effect: float | None
    low: float | None
    high: float | None
    flagged: bool = False


def _xerr(row: Interval) -> list[list[float]] | None:
    """The interval as matplotlib's error-bar lengths, or None when a bound is missing (the point alone)."""
    if is_number(row.low) and is_number(row.high):
        return [[row.effect - row.low], [row.high - row.effect]]
    return None


@kept
def forest(fig_id: str, title: str, rows: Sequence[Interval], reference: float | None) -> str:
    """Every method's effect with its 95 % interval, top to bottom in ``rows`` order; the naive estimate as a
    dotted reference line. Flagged rows: hollow marker, dashed interval, "(flagged)" in the label. Rows without
    numbers keep their label, marked "(no estimate)"."""
    with styled(fig_id):
        fig = Figure(figsize=(7.2, 0.42 * len(rows) + 1.5), layout="constrained")
        ax = fig.add_subplot()
        labels = []
        for y, row in enumerate(reversed(rows)):
            style = method_style(row.method)
            suffix = " (flagged)" if row.flagged else ""
            if not is_number(row.effect):
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
        if is_number(reference):
            ax.axvline(reference, color=BLACK, linestyle=":", linewidth=1.2, label="naive estimate")
            legend_below(fig, 1)
        ax.set_xlabel("effect: treatment − control on the 0–1 rating scale (0.25 = one star)")
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.grid(axis="y", visible=False)
        top = ax.secondary_xaxis("top", functions=(lambda x: x * STARS_PER_UNIT, lambda s: s / STARS_PER_UNIT))
        top.set_xlabel("stars")
        title_left(fig, title)
        desc = "; ".join(
            f"{r.label}: {fmt(r.effect)} [{fmt(r.low)}, {fmt(r.high)}]" + (" flagged" if r.flagged else "")
            for r in rows
        )
        return svg_of(fig, fig_id, title, f"Effect and 95 % interval by method. {desc}.")


@dataclass(frozen=True)
class WidthRow:
    """One comparison: each method's interval width relative to naive, and the best PPI allows for its rho."""

    comparison: str
    best: float | None
    widths: dict[str, float | None]
    flagged: frozenset[str] = frozenset()  # methods flagged for this comparison: hollow markers, as in ``forest``


@kept
def width_gain(fig_id: str, rows: Sequence[WidthRow]) -> str:
    """Per comparison, the interval width of each method relative to naive (markers) against the best width
    PPI++ can reach with the arms' out-of-fold correlations (a black bar,
    ``stats.ppi.best_width_ratio_of_difference``); 1 = no narrower than naive."""
    title = "Interval width relative to naive, against the best PPI++ can do with these predictions"
    with styled(fig_id):
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
            if is_number(row.best):
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
                if is_number(value):
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
        legend_below(fig, 4)
        title_left(fig, title)
        desc = "; ".join(
            f"{r.comparison}: best {fmt(r.best, 2, False)}, "
            + ", ".join(
                f"{method_style(m).label} {fmt(v, 2, False)}" + (" flagged" if m in r.flagged else "")
                for m, v in r.widths.items()
            )
            for r in rows
        )
        return svg_of(fig, fig_id, title, desc)


@kept
def calibration(fig_id: str, predicted: Sequence[float], observed: Sequence[float], counts: Sequence[int]) -> str:
    """Mean rating against mean prediction by decile of prediction (stars), with the diagonal of a perfectly
    calibrated model."""
    title = "Calibration: mean rating by decile of the out-of-fold prediction"
    with styled(fig_id):
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
        title_left(fig, title)
        desc = "; ".join(
            f"decile {i + 1} ({n} sessions): predicted {p:.2f}, observed {o:.2f}"
            for i, (p, o, n) in enumerate(zip(predicted, observed, counts, strict=True))
        )
        return svg_of(fig, fig_id, title, desc)


@kept
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
    with styled(fig_id):
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
        ax.set_xlabel(wrapped(xlabel))
        legend_below(fig, 2)
        title_left(fig, title)
        desc = "; ".join(f"{label}: {value:+.3g}{unit}" for label, value in zip(labels, values, strict=True))
        return svg_of(fig, fig_id, title, desc)


@dataclass(frozen=True)
class Point:
    label: str
    x: float
    y: float


@kept
def scatter_fit(
    fig_id: str, title: str, points: Sequence[Point], xlabel: str, ylabel: str, summary: str, slope_unit: str = ""
) -> str:
    """Labelled points with their least-squares line (when the x values vary), its slope in ``slope_unit``;
    ``summary`` (the correlations) is written in the figure and its description."""
    with styled(fig_id):
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
        legend_below(fig, 2)
        title_left(fig, f"{title}\n{textwrap.fill(summary, 85)}")  # the correlations, wrapped to the figure's width
        desc = f"{summary}. " + "; ".join(f"{p.label}: x {p.x:+.2f}, y {p.y:+.2f}" for p in points)
        return svg_of(fig, fig_id, title, desc)


@kept
def segments(fig_id: str, title: str, rows: Sequence[Interval]) -> str:
    """Effects within segments, two methods per segment side by side: rows come in pairs sharing a label, in
    the order given; each method keeps its marker. Flagged rows: hollow marker, dashed interval, "(flagged)" in
    the legend, as in ``forest``."""
    with styled(fig_id):
        labels = list(dict.fromkeys(r.label for r in rows))
        fig = Figure(figsize=(7.2, 0.5 * len(labels) + 1.6), layout="constrained")
        ax = fig.add_subplot()
        methods = list(dict.fromkeys(r.method for r in rows))
        offsets = dict(zip(methods, np.linspace(0.15, -0.15, len(methods)) if len(methods) > 1 else [0.0], strict=True))
        position = {label: len(labels) - 1 - i for i, label in enumerate(labels)}
        seen: set[str] = set()
        for row in rows:
            if not is_number(row.effect):
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
        ax.set_xlabel(wrapped("effect: treatment − control on the 0–1 rating scale (0.25 = one star)"))
        legend_below(fig, len(methods))
        title_left(fig, title)
        desc = "; ".join(
            f"{r.label}, {method_style(r.method).label}: {fmt(r.effect)} [{fmt(r.low)}, {fmt(r.high)}]"
            + (" flagged" if r.flagged else "")
            for r in rows
        )
        return svg_of(fig, fig_id, title, desc)


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
    values = [v for x in looks for v in (x.effect, x.ci_low, x.ci_high, x.cs_low, x.cs_high) if is_number(v)]
    low, high = max(-SCALE_LIMIT, min(values)), min(SCALE_LIMIT, max(values))
    margin = 0.05 * (high - low) or 0.05
    return max(-SCALE_LIMIT, low - margin), min(SCALE_LIMIT, high + margin)


@kept
def history(fig_id: str, title: str, looks: Sequence[Look]) -> str:
    """The estimate day by day (solid), its fixed-horizon 95 % interval (dashed, valid for one look) and the
    always-valid confidence sequence (dotted, valid at every look)."""
    with styled(fig_id):
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
        legend_below(fig, 3)
        title_left(fig, title)
        last = looks[-1]
        desc = (
            f"{len(looks)} looks from {looks[0].day:%Y-%m-%d} to {last.day:%Y-%m-%d}; on the last day the estimate is"
            f" {fmt(last.effect)}, interval [{fmt(last.ci_low)}, {fmt(last.ci_high)}], confidence sequence"
            f" [{fmt(last.cs_low)}, {fmt(last.cs_high)}]"
        )
        return svg_of(fig, fig_id, title, desc)


@dataclass(frozen=True)
class WindowPoint:
    """One window of the agreement watch: its start, the measure with its interval, the long run before it."""

    start: datetime
    value: float | None
    low: float | None
    high: float | None
    long_low: float | None
    long_high: float | None
    below: bool


@dataclass(frozen=True)
class WatchPanel:
    """One measure's windows, with the level a reader compares it with (r 0, slope 1, ...) and its name."""

    label: str
    reference: float
    points: tuple[WindowPoint, ...]


@kept
def agreement_watch(fig_id: str, title: str, panels: Sequence[WatchPanel]) -> str:
    """Each measure window by window, one panel each on a shared time axis: the window's value and 95 % interval
    (blue circles; a window whose interval lies below the long run's: vermillion triangles, pointing down), and the
    long run's interval over the earlier windows (grey band, a step at each window)."""
    with styled(fig_id):
        fig = Figure(figsize=(7.2, 1.9 * len(panels) + 1.0), layout="constrained")
        axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        described = []
        for ax, panel in zip(axes, panels, strict=True):
            pts = [p for p in panel.points if is_number(p.value)]
            band = [p for p in panel.points if is_number(p.long_low) and is_number(p.long_high)]
            if band:
                ax.fill_between(
                    [p.start for p in band],
                    [p.long_low for p in band],
                    [p.long_high for p in band],
                    step="mid",
                    color=GREY,
                    alpha=0.22,
                    linewidth=0,
                    label="long run: every earlier window (95 % interval)",
                )
            for below, colour, marker, label in (
                (False, BLUE, "o", "window (95 % interval)"),
                (True, VERMILLION, "v", "window below the long run"),
            ):
                chosen = [p for p in pts if p.below is below]
                if not chosen:
                    continue
                low = [p.value - p.low if is_number(p.low) else 0.0 for p in chosen]
                high = [p.high - p.value if is_number(p.high) else 0.0 for p in chosen]
                ax.errorbar(
                    [p.start for p in chosen],
                    [p.value for p in chosen],
                    yerr=[low, high],
                    fmt=marker,
                    color=colour,
                    markersize=5,
                    capsize=2,
                    linewidth=1,
                    label=label,
                )
            ax.axhline(panel.reference, color=BLACK, linewidth=0.7, linestyle=":")
            ax.set_ylabel(wrapped(panel.label))
            described.append(
                f"{panel.label}: "
                + "; ".join(
                    f"{p.start:%Y-%m-%d} {fmt(p.value)} [{fmt(p.low)}, {fmt(p.high)}]" + (" below" if p.below else "")
                    for p in pts
                )
            )
        axes[-1].xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=8))
        axes[-1].xaxis.set_major_formatter(mdates.DateFormatter("%d %b\n%Y"))
        handles, labels = {}, []
        for ax in axes:  # one legend for every panel: each kind once
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                if label not in handles:
                    handles[label] = handle
                    labels.append(label)
        if handles:
            fig.legend([handles[x] for x in labels], labels, loc="outside lower left", ncol=3)
        title_left(fig, title)
        return svg_of(fig, fig_id, title, ". ".join(described))
