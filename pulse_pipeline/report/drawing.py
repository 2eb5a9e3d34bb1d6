"""How the report's figures are drawn: the shared matplotlib look, the SVG each figure becomes, and the figures
drawn once and read back (``drawn_once``); ``figures.py`` holds one function per figure.

matplotlib draws on a ``Figure`` of its own (no pyplot, so no global figure state and no GUI backend: safe inside
a Dagster run) and saves it as SVG with text as paths, so a figure looks the same on any machine, needs no font
and prints sharp. Each SVG gets ``role="img"``, a ``<title>`` and a ``<desc>`` (``svg_of``), so a screen reader
reads the figure.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from ..estimates import methods as methods_module
from . import style as style_module

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
def styled(fig_id: str) -> Iterator[None]:
    """The report's look; the SVG's hashed ids salted with the figure's id, so a figure's SVG is the same on every
    build."""
    with matplotlib.rc_context({**STYLE, "svg.hashsalt": fig_id}):
        yield


_DRAWN: ContextVar[tuple[Path, set[Path]] | None] = ContextVar("pulse_figure_cache", default=None)
_SOURCE = hashlib.sha1(
    b"".join(
        Path(m).read_bytes()
        for m in (__file__, Path(__file__).with_name("figures.py"), style_module.__file__, methods_module.__file__)
    )
    + matplotlib.__version__.encode()
).hexdigest()
"""What a kept figure was drawn by: this module, ``figures.py``, the style it draws with (``style.py``: colours,
markers), the methods' names (``estimates/methods.py``) and matplotlib's version. A change to any of them draws every
figure again."""


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


def kept(draw: Callable[..., str]) -> Callable[..., str]:
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


def svg_of(fig: Figure, fig_id: str, title: str, desc: str) -> str:
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


def title_left(fig: Figure, title: str) -> None:
    """The title at the figure's left edge, above everything: an axes title starts where the axes do, after the
    row labels, and runs off the figure when the labels are long."""
    fig.suptitle(title, x=0.01, ha="left", fontsize=10)


def legend_below(fig: Figure, ncol: int) -> None:
    """The legend under the plot, when something drawn has a label (a figure whose values are all missing has
    none)."""
    if any(ax.get_legend_handles_labels()[0] for ax in fig.axes):
        fig.legend(loc="outside lower left", ncol=ncol)


def wrapped(label: str) -> str:
    """An axis label in lines of at most 50 characters: long row labels (segment and feature names) leave the
    plot narrow, and one long line would run off the figure."""
    return textwrap.fill(label, 50)


def fmt(value: float | None, digits: int = 3, signed: bool = True) -> str:
    if value is None or math.isnan(value):
        return "no value"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def is_number(value: float | None) -> bool:
    return value is not None and not math.isnan(value)
