"""release_freed_memory returns the pages glibc keeps after Python frees many small buffers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pulse_pipeline.memory import release_freed_memory


def _rss_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident set size from /proc (Linux)")
def test_freed_heap_pages_go_back_to_the_system():
    release_freed_memory()
    buffers = [bytearray(1_000) for _ in range(200_000)]  # ~200 MB in 1 000-byte blocks: glibc's heap, not pymalloc
    pin = bytearray(1_000)  # allocated last, at the heap's top: glibc cannot shrink the heap past it by itself
    held = _rss_mib()
    del buffers
    kept = _rss_mib()
    if not release_freed_memory():
        pytest.skip("the C library has no malloc_trim (not glibc)")
    released = _rss_mib()
    assert kept > held - 50  # freeing the buffers alone gave back (almost) nothing: the allocator kept the pages
    assert released < kept - 150  # the trim returned most of the ~200 MB
    assert len(pin) == 1_000
