"""Giving the memory a large phase freed back to the system before the next one.

Why: when Python frees the objects of a phase (a frame's columns cast to floats, a chunk's text), glibc's allocator
keeps most of the pages for later allocations instead of returning them, so the process's resident memory stays at
the phase's peak, and the next phase's worker processes are counted on top of it. At ten times the paper's scale
the modeling step's process held ~130 MB more after loading the features, and ~200-270 MB more after each chunk of
unrated sessions, than after glibc's ``malloc_trim(0)`` (measured by hand on the kept 10x warehouse; README "The
modeling step's memory at 10x").

``release_freed_memory`` calls ``malloc_trim(0)`` where the C library is glibc (Linux) and does nothing elsewhere:
it frees no live object, only pages the allocator holds free. It does not reach DuckDB's or polars' memory:
they allocate through their own allocators (jemalloc).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


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
