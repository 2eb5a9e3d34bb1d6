"""release_freed_memory returns the pages glibc keeps after Python frees many small buffers."""

from __future__ import annotations

import os
import subprocess
import sys
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


def test_duckdb_gives_back_its_cached_blocks_and_keeps_its_configured_limit(tmp_path, monkeypatch):
    """``connections.release_duckdb_memory``: a table read into DuckDB's buffer pool (~200 MB, DuckDB's own count
    of it) is evicted, and the memory limit is PULSE_DUCKDB_MEMORY again afterwards."""
    import duckdb

    from pulse_pipeline.connections import SQUEEZE_MIB, release_duckdb_memory

    monkeypatch.setenv("PULSE_DUCKDB_MEMORY", "700MB")
    con = duckdb.connect(str(tmp_path / "w.duckdb"), config={"memory_limit": "700MB"})
    con.execute("CREATE TABLE t AS SELECT range AS a, random() AS b FROM range(30000000)")
    con.execute("CHECKPOINT")
    con.execute("SELECT sum(a), sum(b) FROM t").fetchone()  # the table's blocks in the buffer pool
    held = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0] / 2**20
    limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    release_duckdb_memory(con)
    left = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0] / 2**20
    assert held > 2 * SQUEEZE_MIB and left <= SQUEEZE_MIB, (held, left)
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == limit  # 667.5 MiB, as opened
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 30_000_000  # nothing lost, read back from disk


_POLARS_FRAME = """
import os, sys
import numpy as np
if sys.argv[1] == "pulse_first":
    import pulse_pipeline  # sets polars' allocator options
    import polars as pl
else:
    import polars as pl
    import pulse_pipeline  # too late: polars read its options at import

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20

start = rss()
frame = pl.DataFrame({"a": np.arange(10_000_000), "b": np.arange(10_000_000) * 0.5})
frame = frame.with_columns((pl.col("a") * 3).alias("c"), pl.col("b").cast(pl.String).alias("s"))
held = rss()
del frame
print(start, held, rss())
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident set size from /proc (Linux)")
def test_polars_gives_freed_frames_back_at_once_in_pulse_processes():
    """``memory.configure_polars_allocator``: in a process that imported pulse_pipeline first, the ~400 MB a polars
    frame held are back with the system the moment it is freed; imported after polars, the setting is too late
    and polars' allocator still holds most of them (it gives them back over the next 1.5 s)."""
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    figures = {}
    for order in ("pulse_first", "polars_first"):
        out = subprocess.run(
            [sys.executable, "-c", _POLARS_FRAME, order], env=env, capture_output=True, text=True, check=True
        )
        figures[order] = [int(x) for x in out.stdout.split()]
    start, held, freed = figures["pulse_first"]
    assert held - start > 250, figures  # the frame was there
    assert freed - start < 50, figures  # and is gone from the resident set
    start, held, freed = figures["polars_first"]
    assert freed - start > 150, figures  # without the setting, polars' allocator kept it
