"""What the ingest and scale benchmarks share: `pulse ingest` in a fresh interpreter, timed, with its peak RSS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def pulse_ingest(home: Path, drop: Path) -> tuple[float, dict, float]:
    """`pulse ingest` in a fresh interpreter: seconds, its JSON summary, and that process's peak RSS in MiB."""
    return _timed(home, _RSS_CHILD, str(drop), f"pulse ingest of {drop}")


def pulse_materialize(home: Path) -> tuple[float, dict, float]:
    """`pulse materialize` of every drop already in the home's drop folder, in a fresh interpreter, as
    ``pulse_ingest`` times it: each drop's raw tables in turn, then every derived table once. Its summary has the
    timings and ``sessions``, the sessions of the warehouse."""
    return _timed(home, _MATERIALIZE_CHILD, "", f"pulse materialize of {home}")


def _timed(home: Path, child_code: str, argument: str, what: str) -> tuple[float, dict, float]:
    """One of the child scripts below in a fresh interpreter: seconds, its JSON summary, its peak RSS in MiB.

    The summary adds to the command's own summary: ``read_seconds`` (up to the derived tables' rebuild),
    ``setup_seconds`` (before the run starts), ``derived_seconds``, ``read_rss_mib`` (the process's peak RSS when
    the drop is read), ``tree_rss_mib``: the largest sum of the RSS of the process and every process under it
    (the reader processes of a large drop), sampled every ``SAMPLE_SECONDS``, and ``tree_samples``: every sample,
    [wall-clock time (``time.time()``, as Dagster's event log times steps), MiB]. Why sampled: a process's peak RSS
    leaves its children out, and the kernel's peak for children counts each forked child at its parent's size
    before it runs another program (Dagster starts small ``tail`` processes that way)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(
            [sys.executable, "-c", child_code, argument],
            env={**os.environ, "PULSE_HOME": str(home)},
            stdout=out,
            stderr=err,
            text=True,
        )
        samples: list[tuple[float, float]] = []
        while child.poll() is None:
            samples.append((time.time(), tree_rss_mib(child.pid)))
            time.sleep(SAMPLE_SECONDS)
        tree_peak = max((mib for _, mib in samples), default=0.0)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            # the command's own last words: a bench that fails at scale must say why (e.g. DuckDB out of memory)
            raise RuntimeError(f"{what} failed (exit {child.returncode}):\n{err.read()[-3000:]}")
        *summary, rss = out.read().strip().splitlines()
    # a sample can miss a short peak: the tree took at least the process's own peak
    figures = {"tree_rss_mib": max(tree_peak, float(rss)), "tree_samples": samples}
    return seconds, {**json.loads("\n".join(summary)), **figures}, float(rss)


SAMPLE_SECONDS = 0.2
_PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / 2**20


def tree_rss_mib(pid: int) -> float:
    """RSS (MiB) of the process and every process under it now, from /proc (pages shared between them count in
    each, so this is an upper bound); 0 once the process is gone."""
    parent_of: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # the process ended while being read
            continue
        parent_of[int(stat.parent.name)] = int(fields[1])
    tree, grown = {pid}, True
    while grown:
        below = {p for p, parent in parent_of.items() if parent in tree} - tree
        tree |= below
        grown = bool(below)
    pages = 0
    for p in tree:
        try:
            pages += int(Path(f"/proc/{p}/statm").read_text().split()[1])
        except (OSError, IndexError):
            continue
    return pages * _PAGE_MIB


# Runs `pulse ingest` in a fresh interpreter and prints that process's own peak RSS (MiB) last.
_RSS_CHILD = """
import json, resource, sys, time
from dataclasses import asdict
from pathlib import Path
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.runs import ingest

def mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

marks = {}
read_rss = []
def say(message):  # runs.ingest says "ingesting drop" as the run starts, "rebuilding derived tables" after it
    marks.setdefault(message.split()[0], time.perf_counter())
    if message.startswith("rebuilding"):
        read_rss.append(mib())
started = time.perf_counter()
summary = ingest(PulseHome.from_env().ensure(), Path(sys.argv[1]), say=say)
done = time.perf_counter()
if "rebuilding" not in marks or "ingesting" not in marks:
    sys.exit("bench: runs.ingest no longer says 'ingesting drop' and 'rebuilding derived tables'; update the markers")
timing = {
    "read_seconds": marks["rebuilding"] - started,
    "setup_seconds": marks["ingesting"] - started,
    "derived_seconds": done - marks["rebuilding"],
    "read_rss_mib": read_rss[0],
}
print(json.dumps({**asdict(summary), **timing}))
print(mib())
"""

# Runs `pulse materialize` over the home's drop folder in a fresh interpreter, timed as above: it says "[i/k] drop
# ..." as each drop's run starts and "materializing N derived assets" when the derived tables' run starts.
_MATERIALIZE_CHILD = """
import json, resource, sys, time
import duckdb
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.runs import materialize

def mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

marks = {}
read_rss = []
def say(message):
    marks.setdefault("drop" if message.startswith("[") else message.split()[0], time.perf_counter())
    if message.startswith("materializing"):
        read_rss.append(mib())
home = PulseHome.from_env().ensure()
started = time.perf_counter()
materialize(home, say=say)
done = time.perf_counter()
if "materializing" not in marks or "drop" not in marks:
    sys.exit("bench: runs.materialize no longer says '[i/k] drop' and 'materializing'; update the markers")
with duckdb.connect(str(home.warehouse), read_only=True) as con:
    sessions = con.execute("SELECT count(*) FROM raw.sessions").fetchone()[0]
timing = {
    "read_seconds": marks["materializing"] - started,
    "setup_seconds": marks["drop"] - started,
    "derived_seconds": done - marks["materializing"],
    "read_rss_mib": read_rss[0],
    "sessions": sessions,
}
print(json.dumps(timing))
print(mib())
"""
