"""`pulse ingest` killed at seeded random points publishes only whole states: the long form of the kill test.

S0: drop A ingested. Then `pulse ingest B`, killed (SIGKILL) at seeded random times spread over its two phases,
reading the drop and rebuilding the derived tables (and publishing), each attempt starting from what the previous
kill left. After every kill the analysts' pulse.duckdb must be S0 or S1 (A then B ingested cleanly, in another
home), table for table; one run to the end then gives S1. Each kill is a `pulse ingest` of its own (start-up, then
the phase up to the kill), so the kills are what the run costs: ``--kills-per-phase`` kills a phase, one in each
equal share of it.

    .venv/bin/python bench/killed_runs.py                       # 6 kills a phase: 12 runs killed
    .venv/bin/python bench/killed_runs.py --kills-per-phase 10 --seed 3

Prints each kill (when, in which phase it landed, which published file it left) and exits 1, saying why, when a
published state was neither S0 nor S1, when fewer than half the rebuild's kills landed in the rebuild, or when the
last run did not give S1. ``tests/test_snapshots.py`` runs the same check with 2 kills a phase (one in each half of
each phase).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pulse_pipeline.synth import write_corpus  # noqa: E402
from pulse_pipeline.warehouse_diff import diff_warehouses  # noqa: E402

SEED = 12
# Columns that record where a file was or a wall-clock time, not a result: raw.drops.path, mtime and fingerprint
# and features.annotations.annotated_at are left out by warehouse_diff itself (VOLATILE); the benchmark rows say
# where the (missing) benchmarks file was looked for, an absolute path under each PULSE_HOME.
IGNORE = ["estimates.benchmark_points.reason"]
FAST = {"PULSE_CV_SEEDS": "1", "PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_INGEST_WORKERS": "1"}
READING, REBUILDING, PUBLISHED = "ingesting drop", "rebuilding derived tables", "published "


def _pulse(home: Path, *args: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, **FAST, "PULSE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "pulse_pipeline.cli", *args], env=env, stdout=out, stderr=out)


def _phase(log: Path) -> str:
    text = log.read_text()
    return next((name for name in (PUBLISHED, REBUILDING, READING) if name in text), "starting").strip()


def _timed_ingest(home: Path, drop: Path, log: Path) -> dict[str, float]:
    """Run `pulse ingest` to the end; returns when (seconds after its start) each phase began, and the end."""
    started = time.monotonic()
    run = _pulse(home, "ingest", str(drop), log=log)
    begun: dict[str, float] = {}
    while run.poll() is None:
        begun.setdefault(_phase(log), time.monotonic() - started)
        time.sleep(0.05)
    _expect(run.returncode == 0, log.read_text()[-3000:])
    return begun | {"end": time.monotonic() - started}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _expect(holds: bool, why: str) -> None:
    if not holds:
        raise AssertionError(why)


def kill_at_random_points(workdir: Path, kills_per_phase: int, seed: int = SEED, sessions: int = 100) -> list[str]:
    """The check above in ``workdir`` (empty): one line per kill; raises AssertionError, saying why, when it fails."""
    a, b = workdir / "A", workdir / "B"
    write_corpus(a, sessions, seed=1, rated_fraction=0.15)
    write_corpus(b, sessions, seed=2, rated_fraction=0.15)
    s0_home, s1_home, home = workdir / "s0", workdir / "s1", workdir / "killed"
    phases = _timed_ingest(s0_home, a, workdir / "s0.log")  # ingesting A takes as long as B: the kills' clock
    # every state compared is a file in the home it was published for (the views read the lake beside them,
    # lake.guard_where, and pulse diff attaches them): S0 and S1 stay in their homes; the killed home, a copy of S0's,
    # is published for where it is, and each copy kept after a kill goes into it
    s0 = s0_home / "pulse.duckdb"
    for h in (s1_home, home):  # B is put in the drop folder first: registering it is not what this check is about
        shutil.copytree(s0_home, h, symlinks=True)
        shutil.copytree(b, h / "drops" / "B")
    _expect(_pulse(home, "publish", log=workdir / "publish.log").wait(timeout=300) == 0, "pulse publish failed")
    clean = _pulse(s1_home, "ingest", str(s1_home / "drops" / "B"), log=workdir / "s1.log")  # S1, meanwhile

    rng = random.Random(seed)
    reading, rebuilding, end = phases["ingesting drop"], phases["rebuilding derived tables"], phases["end"]
    # Each kill is anchored at the start of its phase as the killed run's own log shows it, then waits a seeded
    # share of that phase's length in the timed run (one kill in each equal share of each phase): a busy machine
    # slows the runs, and a clock started with the process would then land the rebuild's kills while reading.
    kills = [
        (marker, (stop - start) * (i + rng.random()) / kills_per_phase)
        for marker, start, stop in ((READING, reading, rebuilding), (REBUILDING, rebuilding, end))
        for i in range(kills_per_phase)
    ]
    rng.shuffle(kills)
    outcomes: list[str] = []
    copies: dict[str, Path] = {}  # each distinct published file seen after a kill, compared once S1 is there
    for i, (marker, after) in enumerate(kills):
        log = workdir / f"kill{i}.log"
        run = _pulse(home, "ingest", str(home / "drops" / "B"), log=log)
        while run.poll() is None and marker not in log.read_text():
            time.sleep(0.02)
        try:
            run.wait(timeout=after)
            outcome = "finished"
        except subprocess.TimeoutExpired:
            run.send_signal(signal.SIGKILL)
            run.wait()
            outcome = "killed"
        at = f"{after:.2f} s into {marker!r}"
        digest = _digest(home / "pulse.duckdb")
        if digest not in copies:
            copies[digest] = shutil.copy(home / "pulse.duckdb", home / f"published-after-kill{i}.duckdb")
        outcomes.append(f"kill {i} {at}: {outcome} while {_phase(log)}, {copies[digest].name}")

    _expect(clean.wait(timeout=600) == 0, (workdir / "s1.log").read_text()[-3000:])
    s1 = s1_home / "pulse.duckdb"
    # the two states differ, so the check can tell them apart
    _expect(bool(diff_warehouses(s0, s1, digits=10, ignore=IGNORE)), "S0 and S1 are the same")
    for copy in copies.values():
        same = [name for name, state in (("S0", s0), ("S1", s1)) if not diff_warehouses(state, copy, 10, IGNORE)]
        why = f"{copy.name} is neither S0 nor S1: {diff_warehouses(s1, copy, 10, IGNORE)[:3]}; {outcomes}"
        _expect(bool(same), why)
    # the rebuild was hit: half its kills at least landed in it
    rebuild_hit = sum("killed while rebuilding" in o for o in outcomes)
    _expect(rebuild_hit >= kills_per_phase // 2, f"{rebuild_hit} kills landed in the rebuild: {outcomes}")
    _timed_ingest(home, home / "drops" / "B", workdir / "final.log")
    _expect(
        not diff_warehouses(s1, home / "pulse.duckdb", digits=10, ignore=IGNORE), f"the last run is not S1: {outcomes}"
    )
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills-per-phase", type=int, default=6, help="kills while reading, and while rebuilding")
    parser.add_argument("--seed", type=int, default=SEED, help="the kills' times and order")
    parser.add_argument("--sessions", type=int, default=100, help="sessions in each of the drops A and B")
    parser.add_argument(
        "--workdir", type=Path, help="where the homes go (kept; must be empty); default: a temporary folder"
    )
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pulse-killed-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            outcomes = kill_at_random_points(workdir, args.kills_per_phase, args.seed, args.sessions)
        except AssertionError as failed:
            print(f"FAILED: {failed}")
            sys.exit(1)
    print("\n".join(outcomes))
    killed = {phase: sum(f"killed while {phase}" in o for o in outcomes) for phase in (READING, REBUILDING)}
    print(
        f"{len(outcomes)} runs killed or let finish ({killed[READING]} killed while reading the drop, "
        f"{killed[REBUILDING]} while rebuilding): every published state was S0 or S1, and the last run gave S1 "
        f"({time.monotonic() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
