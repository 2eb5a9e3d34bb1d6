"""Scale benchmark: k drops of the paper's size ingested one after another into one PULSE_HOME, k = 1, 3, 10.

    .venv/bin/python bench/scale.py                       # 1x, 3x and 10x: 36 000 to 360 000 sessions
    .venv/bin/python bench/scale.py --scales 1            # the paper's scale only
    .venv/bin/python bench/scale.py --quick               # a smoke run: 2 drops of 300 sessions
    .venv/bin/python bench/scale.py --scales 1,10 --backlog   # each scale's drops at once, one pulse materialize

For each scale k, a fresh PULSE_HOME takes k drops of --sessions-per-drop sessions, each by `pulse ingest` in its
own interpreter (``_measure.pulse_ingest``), so every derived table is refreshed after each drop: the stages over
every session (the duplicates rule, models, estimates, report) are paid k times, at 1, 2, ..., k times the
paper's scale, and the sum grows as k squared whatever their speed. With --backlog the k drops are put in the
drop folder at once (linked, not copied) and one `pulse materialize` (``_measure.pulse_materialize``) reads each
drop's raw tables in turn, then refreshes every derived table once, as a home taking over a backlog of drops
does: how the work grows with the warehouse, which is what the 10x/1x ratio asks about.
Printed per drop (or for the k drops at once) and summed per scale:
- wall time per stage: reading the drop (up to the derived tables' rebuild, as the command itself says), then each
  derived asset's step duration from Dagster's event log, summed by the asset's group (staging, features,
  modeling, estimates, report), and "other": the rest of the command's wall time (interpreter and Dagster start,
  time between steps, publishing the analysts' copy);
- peak RSS of the command with every process under it (the drop's readers), sampled, and of its own process;
  then the sampled peak per stage: each sample goes to the stage whose step was running then (the event log's
  step times), to "read" before the derived tables' first step, to "other" between and after steps;
- disk: the PULSE_HOME folder and the published pulse.duckdb.
Then one 100-session drop is added to the largest scale's warehouse, with its refresh time and how many sessions
the per-session stages touched: each per-session asset (``incremental.py``) reports the sessions it recomputed as
``sessions_touched`` in its materialization's metadata (the modeling step's predictions too, when it kept the last
fit: ``modeling/reuse.py``), and that drop's steps one by one, stage by stage. Each figure is printed beside the
issue's target (issue 16, "Speed and memory") with met or missed.

Drop i is ``synth.write_corpus`` with seed ``1000 + i`` and the id prefix ``d<i>`` (its sessions ``d<i>-s000001``..,
distinct drop after drop), and the user prefix ``bench`` for every drop: the same users come back drop after drop.
The small drop is prefixed ``extra``. Drops are written once into --workdir and kept (drop i is the same at every
scale); each PULSE_HOME is removed once measured (kept with --keep-homes).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import duckdb
from _measure import pulse_ingest, pulse_materialize

from pulse_pipeline.definitions import build_definitions
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.synth import write_corpus

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("staging", "features", "modeling", "estimates", "report")  # asset groups, in pipeline order
SMALL_DROP = 100
# Issue 16's targets on a 2-core machine
TARGET_1X_SECONDS = 120.0
TARGET_RATIO_PER_LINEAR = 1.2  # 10x/1x at most 12
TARGET_RSS_MIB = 3 * 1024.0  # at 10x
TARGET_SMALL_DROP_SECONDS = 60.0  # on the 10x warehouse


@dataclass
class Ingest:
    """One `pulse ingest`: wall seconds, reading, derived seconds by stage, peak RSS (MiB), what it materialized."""

    total: float
    read: float
    stages: dict[str, float]
    rss: float  # the command's process
    tree_rss: float  # the command's process and every process under it, at once
    sessions: int
    touched: dict[str, int] = field(default_factory=dict)  # per-session asset -> its metadata's sessions_touched
    steps: dict[str, float] = field(default_factory=dict)  # each derived step (op name) -> seconds
    stage_rss: dict[str, float] = field(default_factory=dict)  # "read", a STAGES entry or "other" -> sampled peak

    @property
    def other(self) -> float:
        return self.total - self.read - sum(self.stages.values())


def verdict(met: bool) -> str:
    return "met" if met else "missed"


def session_ids(folder: Path) -> set[str]:
    with (folder / "assignments.csv").open(newline="") as fh:
        return {row["session_id"] for row in csv.DictReader(fh)}


def write_drop(workdir: Path, n_sessions: int, index: int, prefix: str) -> Path:
    """Drop ``index`` of ``n_sessions`` sessions, written once (``_complete`` marks it finished)."""
    folder = workdir / f"drop-{n_sessions}-{prefix.rstrip('-')}"
    if (folder / "_complete").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    s = write_corpus(folder, n_sessions, seed=1000 + index, prefix=prefix.rstrip("-"), user_prefix="bench")
    (folder / "_complete").touch()
    print(
        f"  wrote {folder.name}: {s.n_sessions:,} sessions, {s.n_events:,} events, {s.bytes_written / 1e6:.0f} MB "
        f"in {time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return folder


def stage_of_step(home: PulseHome) -> dict[str, str]:
    """Each op's asset group (an asset check's op: its asset's group), by op name as the event log keys steps."""
    graph = build_definitions(home).resolve_asset_graph()
    stages = {}
    for a in graph.assets_defs:
        keys = list(a.keys) or [c.asset_key for c in a.check_keys]
        stages[a.node_def.name] = graph.get(keys[0]).group_name
    return stages


def stage_peaks(samples: list[tuple[float, float]], spans: list[tuple[float, float, str]]) -> dict[str, float]:
    """The largest sample (time, MiB) per stage: a sample taken while a step ran (``spans``: start, end, its stage)
    goes to that step's stage (the first one listed, if two overlap), one taken before the first derived step to
    "read" (the reading of the drop and the start), any other to "other"."""
    first = min((start for start, _, stage in spans if stage in STAGES), default=float("inf"))
    peaks: dict[str, float] = {}
    for at, mib in samples:
        stage = next((stage for start, end, stage in spans if start <= at <= end), None)
        if stage not in STAGES:
            stage = "read" if at < first else "other"
        peaks[stage] = max(peaks.get(stage, 0.0), mib)
    return peaks


def measure(home: PulseHome, drop: Path | None, stage_of: dict[str, str]) -> Ingest:
    """`pulse ingest` of the drop (None: `pulse materialize` of the drop folder), its derived steps' durations
    and its materializations from the event log."""
    instance = dg.DagsterInstance.from_config(str(home.dagster_home)) if home.dagster_home.exists() else None
    before = {r.run_id for r in instance.get_runs()} if instance else set()
    total, summary, rss = pulse_ingest(home.root, drop) if drop else pulse_materialize(home.root)
    instance = dg.DagsterInstance.from_config(str(home.dagster_home))
    stages: dict[str, float] = defaultdict(float)
    touched, steps, spans = {}, {}, []
    for run in instance.get_runs():
        if run.run_id in before:
            continue
        for step in instance.get_run_step_stats(run.run_id):
            stage = stage_of.get(step.step_key, "other")
            if step.start_time and step.end_time:
                spans.append((step.start_time, step.end_time, stage))
            if stage in STAGES and step.start_time and step.end_time:
                stages[stage] += step.end_time - step.start_time
                steps[step.step_key] = step.end_time - step.start_time
        for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            event = entry.dagster_event
            sessions = event.event_specific_data.materialization.metadata.get("sessions_touched")
            if sessions is not None:
                touched[event.asset_key.to_user_string()] = sessions.value
    return Ingest(
        total=total,
        read=summary["read_seconds"],
        stages={s: stages.get(s, 0.0) for s in STAGES},
        rss=rss,
        tree_rss=summary["tree_rss_mib"],
        sessions=summary["sessions"],
        touched=touched,
        steps=steps,
        stage_rss=stage_peaks(summary["tree_samples"], spans),
    )


def line(name: str, m: Ingest) -> str:
    stages = "  ".join(f"{s} {m.stages[s]:.1f} s" for s in STAGES)
    return (
        f"{name}: read {m.read:.1f} s | {stages} | other {m.other:.1f} s | total {m.total:.1f} s | "
        f"peak RSS {m.tree_rss:.0f} MiB with its children ({m.rss:.0f} MiB alone) | by stage: "
        + ", ".join(f"{stage} {m.stage_rss[stage]:.0f}" for stage in ("read", *STAGES, "other") if stage in m.stage_rss)
        + " MiB"
    )


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def sessions_in(home: PulseHome) -> int:
    """Distinct sessions in the published warehouse."""
    with duckdb.connect(str(home.warehouse), read_only=True) as con:
        return con.execute("SELECT count(DISTINCT session_id) FROM raw.sessions").fetchone()[0]


def run_scale(k: int, n_sessions: int, workdir: Path, small_drop: bool, backlog: bool, keep: bool = False) -> float:
    """Ingest k drops into a fresh PULSE_HOME, print their figures (and, if asked, the small drop's); total s.

    One `pulse ingest` per drop, each refreshing every derived table; with ``backlog`` the k drops put in the drop
    folder at once and one `pulse materialize`: each drop's raw tables, then every derived table once."""
    how = "at once, one pulse materialize" if backlog else "one pulse ingest each"
    print(f"== {k}x: {k} drop{'s' * (k > 1)} of {n_sessions:,} sessions, {how} ==", flush=True)
    home = PulseHome(workdir / f"home-{n_sessions}-{k}x")
    shutil.rmtree(home.root, ignore_errors=True)
    home.ensure()
    stage_of = stage_of_step(home)
    runs = []
    if backlog:
        for i in range(k):  # linked, not copied: the drop folder holds the same files (same filesystem)
            drop = write_drop(workdir, n_sessions, i, f"d{i:02d}-")
            shutil.copytree(drop, home.drops / drop.name, copy_function=os.link)
        m = measure(home, None, stage_of)
        runs.append(m)
        print(line(f"{k} drops at once", m), flush=True)
    for i in range(0 if backlog else k):
        drop = write_drop(workdir, n_sessions, i, f"d{i:02d}-")
        m = measure(home, drop, stage_of)
        runs.append(m)
        print(line(f"drop {i + 1}/{k}", m), flush=True)
    total = sum(m.total for m in runs)
    summed = Ingest(
        total=total,
        read=sum(m.read for m in runs),
        stages={s: sum(m.stages[s] for m in runs) for s in STAGES},
        rss=max(m.rss for m in runs),
        tree_rss=max(m.tree_rss for m in runs),
        sessions=sum(m.sessions for m in runs),
        stage_rss={s: max(m.stage_rss.get(s, 0.0) for m in runs) for s in {s for m in runs for s in m.stage_rss}},
    )
    print(line(f"{k}x all drops", summed))
    end_target = f"  [target < {TARGET_1X_SECONDS:.0f} s: {verdict(total < TARGET_1X_SECONDS)}]" if k == 1 else ""
    print(f"{k}x end to end: {total:.1f} s{end_target}")
    rss = summed.tree_rss
    rss_target = f"target < {TARGET_RSS_MIB:.0f} MiB at 10x" + (f": {verdict(rss < TARGET_RSS_MIB)}" if k == 10 else "")
    print(f"{k}x peak RSS: {rss:.0f} MiB with its children (the command alone {summed.rss:.0f} MiB)  [{rss_target}]")
    print(
        f"{k}x disk: PULSE_HOME {folder_bytes(home.root) / 1e6:,.0f} MB, "
        f"published pulse.duckdb {home.warehouse.stat().st_size / 1e6:,.0f} MB",
        flush=True,
    )
    if small_drop:
        drop = workdir / f"drop-{SMALL_DROP}-extra"
        if not (drop / "_complete").exists():
            shutil.rmtree(drop, ignore_errors=True)
            write_corpus(drop, SMALL_DROP, seed=999, prefix="extra", user_prefix="bench")
            (drop / "_complete").touch()
        m = measure(home, drop, stage_of)
        touched, everyone = max(m.touched.values(), default=0), sessions_in(home)
        target = f"target < {TARGET_SMALL_DROP_SECONDS:.0f} s on the 10x warehouse" + (
            f": {verdict(m.total < TARGET_SMALL_DROP_SECONDS)}" if k == 10 else ""
        )
        print(
            f"one {SMALL_DROP}-session drop added to the largest warehouse ({k}x, {summed.sessions:,} sessions): "
            f"refreshed in {m.total:.1f} s  [{target}]"
        )
        print(line("  that drop", m))
        print(
            f"  per-session stages touched {touched:,} of {everyone:,} sessions (the drop holds {m.sessions:,}): "
            + ", ".join(f"{key} {n:,}" for key, n in sorted(m.touched.items()))
        )
        for stage in STAGES:
            slowest = sorted(((op, s) for op, s in m.steps.items() if stage_of.get(op) == stage), key=lambda kv: -kv[1])
            print(f"  its {stage} steps: " + ", ".join(f"{op} {s:.1f} s" for op, s in slowest))
    if keep:
        print(f"{k}x PULSE_HOME kept: {home.root}")
    else:
        shutil.rmtree(home.root)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", default="1,3,10", help="comma-separated numbers of drops (default 1,3,10)")
    ap.add_argument("--sessions-per-drop", type=int, default=36_000)
    ap.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "scale")
    ap.add_argument("--quick", action="store_true", help=f"a smoke run: 2 drops of 300 sessions, then {SMALL_DROP}")
    ap.add_argument(
        "--backlog",
        action="store_true",
        help="each scale's drops in the drop folder at once and one `pulse materialize` (every derived table once),"
        " instead of one `pulse ingest` per drop (every derived table refreshed after each drop)",
    )
    ap.add_argument(
        "--keep-homes",
        action="store_true",
        help="keep each scale's PULSE_HOME (under --workdir) to probe it afterwards, instead of removing it",
    )
    args = ap.parse_args()
    scales = [2] if args.quick else sorted({int(s) for s in args.scales.split(",")})
    n_sessions = 300 if args.quick else args.sessions_per_drop
    args.workdir.mkdir(parents=True, exist_ok=True)

    # distinct session ids across drops, or a later drop would replace the sessions of an earlier one
    seen: set[str] = set()
    for i in range(max(scales)):
        ids = session_ids(write_drop(args.workdir, n_sessions, i, f"d{i:02d}-"))
        if seen & ids:
            raise SystemExit(f"drop {i} repeats session ids of an earlier drop: {sorted(seen & ids)[:3]}")
        seen |= ids

    totals = {k: run_scale(k, n_sessions, args.workdir, k == scales[-1], args.backlog, args.keep_homes) for k in scales}
    if len(scales) > 1:
        small, big = scales[0], scales[-1]
        ratio, limit = totals[big] / totals[small], TARGET_RATIO_PER_LINEAR * big / small
        print(
            f"{big}x/{small}x time ratio: {ratio:.2f}  [target <= {limit:.1f} (1.2x linear): {verdict(ratio <= limit)}]"
        )
    else:
        print("time ratio: one scale measured (the target, 10x/1x <= 12, needs two)")


if __name__ == "__main__":
    main()
