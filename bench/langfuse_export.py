"""Langfuse export benchmark: a generated blob-storage export read into the raw tables, against orjson's floor.

    .venv/bin/python bench/langfuse_export.py                     # 100 000 observations, Parquet and JSONL
    .venv/bin/python bench/langfuse_export.py --observations 20000 --formats jsonl csv

Writes an export (``synth/langfuse_export.py``: ``traces/``, ``observations_v2/``, ``scores/``; four observations a
trace: a root span, two generations, a tool; a user-feedback or thumbs score on two traces in three and an EVAL score
on each) in each asked file kind, then reads it as ``pulse ingest`` does, in this process:

- *read*: the drop's units and the Langfuse reader, up to the Arrow batches the warehouse is given (what the issue's
  target, 50 000 observations/s, is about);
- *load*: ``load_drop`` into a fresh in-memory warehouse (the read, the inserts, the reconciliation).

For each it prints observations/s by wall time and by this process's CPU time (the machine is shared: CPU time is
the steadier figure), and, for JSON lines, the rate at which orjson merely parses the same lines (a floor no reader
of this format beats). Nothing is asserted: the figures go in ``docs/sources/langfuse.md``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb
import orjson
import pyarrow as pa

from pulse_pipeline.ingest.drop import Piece, drop_units, read_piece
from pulse_pipeline.ingest.load import load_drop, reconcile_drop
from pulse_pipeline.synth.langfuse_export import FORMATS, OBSERVATIONS_PER_TRACE, write_export
from pulse_pipeline.warehouse import Warehouse


def read_only(drop: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds to read the drop into Arrow batches, and the events read."""
    wall, cpu = time.perf_counter(), time.process_time()
    events = 0
    for unit in drop_units(drop):
        for batch in read_piece(drop.name, Piece(unit)):
            events += batch.freeze().read["event"]
    return time.perf_counter() - wall, time.process_time() - cpu, events


def load(drop: Path) -> tuple[float, float, bool]:
    """Wall and CPU seconds of ``load_drop`` into a fresh in-memory warehouse, and whether the drop reconciles."""
    con = duckdb.connect()
    wh = Warehouse(con)
    wall, cpu = time.perf_counter(), time.process_time()
    load_drop(wh, drop.name, drop)
    took = time.perf_counter() - wall, time.process_time() - cpu
    ok, _ = reconcile_drop(wh, drop.name)
    con.close()
    return *took, ok


def orjson_floor(drop: Path) -> float:
    """CPU seconds for orjson to parse every line of the drop's JSON-lines files."""
    lines = [line for f in sorted(drop.rglob("*.jsonl")) for line in f.read_bytes().split(b"\n") if line]
    cpu = time.process_time()
    for line in lines:
        orjson.loads(line)
    return time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observations", type=int, default=100_000)
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=["parquet", "jsonl"])
    parser.add_argument("--workdir", type=Path, default=None, help="where the exports are written (a temp folder)")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pulse-langfuse-bench-"))
    pa.array(["warm-up"])  # pyarrow imports pandas on its first conversion: once a process, not the reader's cost
    traces = max(1, args.observations // OBSERVATIONS_PER_TRACE)
    print(f"Langfuse export: {traces:,} traces, {traces * OBSERVATIONS_PER_TRACE:,} observations, in {workdir}")
    for fmt in args.formats:
        drop = workdir / f"export-{fmt}"
        truth = write_export(drop, traces, fmt)
        n = truth.observations
        size = sum(f.stat().st_size for f in drop.rglob("*") if f.is_file()) / 1e6
        wall, read_cpu, events = read_only(drop)
        print(
            f"{fmt:8s} {size:7.1f} MB  read: {wall:6.2f} s wall {n / wall:9,.0f} obs/s | {read_cpu:6.2f} s CPU"
            f" {n / read_cpu:9,.0f} obs/s  ({events:,} events, {len(truth.sessions):,} sessions,"
            f" {truth.scores:,} scores)"
        )
        wall, cpu, ok = load(drop)
        print(f"{'':8s} {'':10s} load: {wall:6.2f} s wall {n / wall:9,.0f} obs/s | {cpu:6.2f} s CPU  reconciled={ok}")
        if fmt == "jsonl":
            floor = orjson_floor(drop)
            print(
                f"{'':8s} {'':10s} orjson parse alone: {floor:6.2f} s CPU (reading costs {read_cpu / floor:.1f}x that)"
            )


if __name__ == "__main__":
    main()
