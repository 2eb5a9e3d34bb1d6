"""Progress bars for the long commands (synth, ingest, materialize, validate, demo): the one place that decides
whether bars show, and the one that draws them (with tqdm).

Bars show only while a command is inside :func:`showing` with ``enabled`` true (False under ``--json``) and
stderr is a terminal: pipes, CI logs and tests get no bars and no carriage returns. The science modules never
import this module: they take a plain callback, ``advance(done, total)``, called with the units just finished and
the units of the whole job (a load knows its drop's bytes only once it has listed the drop, so the total comes
with the count).

The Dagster assets run in the CLI's own process (``runs.py``), so a command cannot hand them a callback. Instead
:func:`showing` sets this module's *current stream* for the duration of the command, and an asset asks
:func:`bar` for a callback: it gets one while a command shows bars, and None otherwise (the daemon, the UI, tests
that call assets), so nothing is drawn there. The stream is put back when the command's ``with`` block ends,
whatever happens in it, so it never leaks from one run into the next.

While bars show, ``sys.stderr`` is replaced by tqdm's ``DummyTqdmFile``: log lines (Dagster's INFO lines, the
CLI's messages) are printed above the bars instead of being glued to them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, TextIO


class Advance(Protocol):
    """The callback a bar is driven by: ``done`` units just finished of ``total``; ``note`` (e.g. the asset
    just materialized) is shown after the counts."""

    def __call__(self, done: int, total: int, note: str | None = None) -> None: ...


_stream: TextIO | None = None  # where bars go while a command shows them; None: no bars


def bars_shown(enabled: bool, stream: TextIO) -> bool:
    """Whether bars go to ``stream``: asked for (``enabled``) and a terminal (a pipe or file never gets bars)."""
    isatty = getattr(stream, "isatty", None)
    return enabled and callable(isatty) and bool(isatty())


@contextmanager
def showing(enabled: bool) -> Iterator[None]:
    """For a command: bars of everything run inside the block go to stderr when :func:`bars_shown`; meanwhile
    ``sys.stderr`` writes its lines above the bars."""
    global _stream
    target = sys.stderr
    if not bars_shown(enabled, target):
        yield
        return
    from tqdm.contrib import DummyTqdmFile

    previous, previous_stderr = _stream, sys.stderr
    _stream = target
    sys.stderr = DummyTqdmFile(target)
    try:
        yield
    finally:
        _stream, sys.stderr = previous, previous_stderr


@contextmanager
def bar(description: str, unit: str = "it", scale: bool = False, total: int | None = None) -> Iterator[Advance | None]:
    """A bar as an :class:`Advance` callback while a command shows bars, else None.

    ``unit`` names what is counted (``"B"`` with ``scale``: bytes shown as kB, MB, ...); ``total``, when known
    before the first call, is shown from the start (else from the first call on). The bar shows the count,
    the total, the rate and the time left; a bar opened inside another one is drawn below it and removed when
    done, the outermost stays."""
    if _stream is None:
        yield None
        return
    from tqdm import tqdm

    shown = tqdm(
        desc=description, total=total, unit=unit, unit_scale=scale, file=_stream, dynamic_ncols=True, leave=None
    )
    with shown:

        def advance(done: int, total: int, note: str | None = None) -> None:
            if shown.total != total:
                shown.total = total
            if note is not None:
                shown.set_postfix_str(note, refresh=False)
            shown.update(done)

        yield advance
