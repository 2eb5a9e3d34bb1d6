"""Giving the memory a large phase freed back to the system before the next one.

Why: when Python frees the objects of a phase (a frame's columns cast to floats, a chunk's text), glibc's allocator
keeps most of the pages for later allocations instead of returning them, so the process's resident memory stays at
the phase's peak, and the next phase's worker processes are counted on top of it. At ten times the paper's scale
the modeling step's process held ~130 MB more after loading the features, and ~200-270 MB more after each chunk of
unrated sessions, than after glibc's ``malloc_trim(0)`` (measured by hand on the kept 10x warehouse;
docs/performance.md, "The modeling step's memory at 10x").

``release_freed_memory`` calls ``malloc_trim(0)`` where the C library is glibc (Linux) and does nothing elsewhere:
it frees no live object, only pages the allocator holds free. It does not reach DuckDB's or polars' memory:
they allocate through their own allocators (jemalloc).

Polars' jemalloc keeps what polars freed for up to 1.5 s (the ``dirty_decay_ms:500,muzzy_decay_ms:1000`` polars
sets when it is imported), and the modeling step frees and allocates frames all along (the features read and cast,
each chunk of unrated sessions), so what it freed a moment ago was counted in the step's peak. ``POLARS_ALLOCATOR``
makes polars give freed pages back at once: ``pulse_pipeline/__init__.py`` sets it before anything imports polars,
so every PULSE process and the worker processes they start (which inherit the environment) use it. Measured with
``bench/scale.py --scales 10 --backlog`` on one machine, one run each: the 10x peak was 2 975 and 3 009 MiB without
it, 2 866 and 2 888 MiB with it (the modeling step's, every time), in 809.8 and 800.3 s without it, 807.2 and
886.9 s with it (that run slower in every stage, reading too, which polars does not do: the machine); at 1x, back to
back, 119.6 and 123.6 s without, 120.4 and 123.5 s with it.
A ``_RJEM_MALLOC_CONF`` already in the environment is left as it is (polars reads it after its own defaults).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

POLARS_ALLOCATOR = "dirty_decay_ms:0,muzzy_decay_ms:0"
"""Polars' jemalloc options (``_RJEM_MALLOC_CONF``): freed pages go back to the system at once."""


def configure_polars_allocator() -> None:
    """Set ``POLARS_ALLOCATOR`` for polars unless the environment names its own options; to take effect this must
    run before polars is imported (polars reads the variable once, at import)."""
    os.environ.setdefault("_RJEM_MALLOC_CONF", POLARS_ALLOCATOR)


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl, Windows)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> bool:
    """Return the C heap's free pages to the system; True if it could (glibc), False where it cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
