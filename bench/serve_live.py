"""Live freshness (issue 35): ratings reaching the day's drop every few seconds, the Dagster daemon taking them, and
how far the published warehouse lags each acknowledged rating. ``live(...)`` is the measure, for a feed of ratings:

- ``bench/serve.py --live``: a real `pulse serve` under paced clients (``PacedClients`` there): the measure of the
  issue's target;
- this script: the service's roller played (``Roller``, ``PlayedRolls``), for the pipeline's side without the
  service: one drop per UTC day, ``PULSE_HOME/drops/serve-YYYY-MM-DD/``, each roll a new file
  ``roll-<seq 8 digits>.jsonl`` written under a hidden temporary name in that folder and renamed, never rewritten
  (as the service writes them); a roll holds the asks shown (``ask_probability``, no rating) and the ratings
  (stars, ``segment_index``) of sessions the home already holds, never rated before (the last work segment of
  each), ``--asks-per-roll`` and ``--ratings-per-roll`` of them every ``--roll-seconds``; a rating counts as
  acknowledged when its roll is renamed.

    PULSE_HOME=/tmp/live-home .venv/bin/pulse demo --sessions 36000      # once: a home at the paper's scale
    .venv/bin/python bench/serve_live.py --home /tmp/live-home --minutes 10
    .venv/bin/python bench/serve_live.py --home /tmp/small --minutes 0.5 --roll-seconds 2 --workdir /tmp/live

The home is copied (``--workdir``, default a temporary folder, removed at the end unless given; ``--in-place``
uses it as it is, and leaves the day's drop in it). `dagster-daemon run` starts on it (the drop sensor, the publish
sensor, the automation sensor and the run queue, as `pulse ui` runs them, without the web server); once the drop
sensor has ticked, the feed starts. Every second the published `pulse.duckdb` is opened read-only, as an analyst
does; for each published state (a new file) it prints when it appeared, how many of the feed's ratings it shows for
the first time, and their lag (acknowledged to published): the largest and the median. After ``--minutes`` the feed
stops, the bench waits for every acknowledged rating to be published (at most ``--drain-seconds``), stops the
daemon, and prints the drop's runs (the ratings each loaded, its steps by stage), the longest lag against the
issue's target (under 3 minutes), and whether it keeps up: the states' longest lags of the second half no larger
than those of the first (within one roll interval and 25 %; the first state, which waited for one run from an idle
start, left out), and no acknowledged rating left unpublished at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import dagster as dg
import duckdb
from scale import STAGES, stage_of_step
from ui_freshness import sensor_ticks

from pulse_pipeline.defs.ingest.sensors import DROP_JOB, SENSOR_NAME
from pulse_pipeline.paths import PROJECT_ROOT, PulseHome

VENV_BIN = Path(sys.executable).parent
TARGET_LAG_SECONDS = 180.0
ID_PREFIX = "live-"


def day_drop(drops: Path, now: datetime) -> Path:
    """The service's drop folder of ``now``'s UTC day."""
    return drops / f"serve-{now:%Y-%m-%d}"


def write_roll(folder: Path, seq: int, rows: list[dict]) -> Path:
    """One roll, as the service writes it: a hidden temporary file in the day's folder (a sidecar to the drop
    sensor: its name ends in ``.partial``, not a data suffix), flushed and fsynced, renamed to ``roll-<seq>.jsonl``."""
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"roll-{seq:08d}.jsonl"
    partial = folder / f".{final.name}.partial"
    with partial.open("w") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
        out.flush()
        os.fsync(out.fileno())
    os.rename(partial, final)
    return final


@dataclass
class Roller:
    """Writes a roll every ``every`` seconds from a queue of (session, its last segment) never rated: each roll asks
    ``asks`` sessions (with probability ``q``) and rates ``ratings`` of them, the asked ones first."""

    drops: Path
    sessions: list[tuple[str, int]]
    asks: int
    ratings: int
    every: float
    q: float
    seed: int = 0
    written: dict[int, tuple[float, int]] = field(default_factory=dict)  # seq -> (wall time written, ratings)
    acknowledged: dict[str, float] = field(default_factory=dict)  # rating id -> wall time its roll was renamed
    stop: threading.Event = field(default_factory=threading.Event)

    def rows(self, seq: int, now: datetime) -> list[dict]:
        rng = random.Random(self.seed * 1_000_003 + seq)
        picked = [self.sessions.pop() for _ in range(min(max(self.asks, self.ratings), len(self.sessions)))]
        at = now.isoformat().replace("+00:00", "Z")
        rows = [
            {
                "id": f"ask-{seq:08d}-{i:03d}",
                "session_id": session,
                "segment_index": segment,
                "ask_probability": self.q,
                "created_at": at,
                "policy_version": "bench-live",
            }
            for i, (session, segment) in enumerate(picked[: self.asks])
        ]
        rows += [
            {
                "id": f"{ID_PREFIX}{seq:08d}-{i:03d}",
                "session_id": session,
                "segment_index": segment,
                "rating": rng.randint(1, 5),
                "reason": None,
                "created_at": at,
            }
            for i, (session, segment) in enumerate(picked[: self.ratings])
        ]
        return rows

    def run(self) -> None:
        seq = 0
        next_at = time.monotonic()
        while not self.stop.is_set() and self.sessions:
            seq += 1
            now = datetime.now(UTC)
            rows = self.rows(seq, now)
            write_roll(day_drop(self.drops, now), seq, rows)
            at = time.time()
            self.written[seq] = (at, sum("rating" in r for r in rows))
            self.acknowledged.update((r["id"], at) for r in rows if "rating" in r)
            next_at += self.every
            self.stop.wait(max(0.0, next_at - time.monotonic()))


def unrated_sessions(published: Path, seed: int) -> list[tuple[str, int]]:
    """The home's sessions never rated nor asked, each with its last work segment, shuffled by ``seed``."""
    with duckdb.connect(str(published), read_only=True) as con:
        found = con.execute(
            """SELECT w.session_id, max(w.segment_index) FROM staging.work_segments w
            ANTI JOIN staging.session_labels l USING (session_id)
            ANTI JOIN staging.session_asks a USING (session_id)
            GROUP BY ALL ORDER BY 1"""
        ).fetchall()
    random.Random(seed).shuffle(found)
    return found


def stamp(path: Path) -> tuple[int, int] | None:
    """What changes when the published file is replaced (a publish renames a new file over it)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


@dataclass(frozen=True)
class State:
    """A published state: when it appeared (wall time), the largest and the median lag of the ratings it shows
    for the first time, how many, and the load average then."""

    at: float
    max_lag: float
    p50_lag: float
    ratings: int
    load: float


def start_daemon(home: PulseHome, log: Path, env: dict[str, str]) -> subprocess.Popen:
    """`dagster-daemon run` on the project's workspace, in a process group of its own (its code server, its runs)."""
    env = {**os.environ, **env, "DAGSTER_HOME": str(home.dagster_home), "PULSE_HOME": str(home.root)}
    command = [str(VENV_BIN / "dagster-daemon"), "run", "-w", str(PROJECT_ROOT / "workspace.yaml")]
    with log.open("a") as out:
        return subprocess.Popen(
            command, cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_daemon(daemon: subprocess.Popen) -> int:
    """SIGTERM to the daemon's process group (the one it was started in), SIGKILL after 60 s."""
    try:
        os.killpg(daemon.pid, signal.SIGTERM)
        return daemon.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(daemon.pid, signal.SIGKILL)
        return daemon.wait()
    except ProcessLookupError:
        return daemon.wait()


def _wait(what: str, check, timeout: float, daemon: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if daemon.poll() is not None:
            raise SystemExit(f"the daemon exited ({daemon.returncode}) waiting for {what}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"no {what} within {timeout:.0f} s; the daemon's log:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    return found


def keeps_up(lags: list[float], every: float) -> tuple[bool | None, float, float]:
    """Whether the lag does not grow: the mean of the second half's lags within 25 % and one roll interval of the
    first half's, the first state left out (its rolls waited for one run from an idle start, the others for the
    rest of a run and the next: it is not the steady state); None with fewer than two states after it. And the two
    means."""
    steady = lags[1:]
    half = len(steady) // 2
    if half == 0:
        return None, float("nan"), float("nan")
    first, second = sum(steady[:half]) / half, sum(steady[half:]) / (len(steady) - half)
    return second <= 1.25 * first + every, first, second


def print_runs(home: PulseHome, instance: dg.DagsterInstance, since: float, fed: str):
    """The day drops' runs since ``since``: start, duration, status, ratings it loaded, its steps by stage."""
    stage_of = stage_of_step(home)
    runs = [
        r
        for r in instance.get_run_records(filters=dg.RunsFilter(job_name=DROP_JOB))
        if r.create_timestamp.timestamp() >= since
        and r.dagster_run.tags.get("dagster/partition", "").startswith("serve-")
    ]
    runs.sort(key=lambda r: r.create_timestamp)
    ids = {r.dagster_run.run_id for r in runs}
    others = [
        r.dagster_run.job_name
        for r in instance.get_run_records()
        if r.create_timestamp.timestamp() >= since and r.dagster_run.run_id not in ids
    ]
    print(f"other runs: {len(others)} {sorted(others)}")
    by_stage_all: dict[str, list[float]] = defaultdict(list)
    print(f"runs of the day's drop: {len(runs)}")
    for r in runs:
        stages: dict[str, float] = defaultdict(float)
        read = 0.0
        for step in instance.get_run_step_stats(r.dagster_run.run_id):
            if step.start_time and step.end_time:
                stage = stage_of.get(step.step_key, "ingest")
                seconds = step.end_time - step.start_time
                if stage in STAGES:
                    stages[stage] += seconds
                else:
                    read += seconds
        ratings = None
        for entry in instance.all_logs(r.dagster_run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            event = entry.dagster_event
            if event.asset_key.to_user_string() == "raw/ratings":
                ratings = event.event_specific_data.materialization.metadata["dagster/row_count"].value
        queued = r.create_timestamp.timestamp()
        took = (r.end_time - r.start_time) if r.start_time and r.end_time else float("nan")
        for stage in ("read", *STAGES):
            by_stage_all[stage].append(read if stage == "read" else stages.get(stage, 0.0))
        print(
            f"  +{queued - since:6.1f} s queued, started {((r.start_time or queued) - queued):4.1f} s after, "
            f"ran {took:5.1f} s ({r.dagster_run.status.value}); ratings in the drop {ratings}; "
            f"read {read:.1f} s, " + ", ".join(f"{s} {stages.get(s, 0.0):.1f} s" for s in STAGES)
        )
    if runs:
        print(
            "  mean per run: "
            + ", ".join(f"{s} {sum(v) / len(v):.1f} s" for s, v in by_stage_all.items())
            + f" ({fed})"
        )


class Feed(Protocol):
    """Where the ratings come from: the service under clients (``bench/serve.py --live``) or the played roller."""

    prefix: str  # the rating ids it writes start with this
    every: float  # how often a roll is written (the keeps-up verdict's tolerance)
    acknowledged: dict[str, float]  # rating id -> wall time it was acknowledged (the service's 2xx, or the rename)

    def describe(self) -> str: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...  # stops writing; what was acknowledged still reaches the drop
    def close(self) -> None: ...  # after the drain: whatever the feed runs is stopped
    def summary(self) -> str: ...


@dataclass
class PlayedRolls:
    """The roller played as the service's contract writes it (``Roller``), a thread of this process."""

    roller: Roller
    prefix: str = ID_PREFIX
    thread: threading.Thread | None = None

    @property
    def every(self) -> float:
        return self.roller.every

    @property
    def acknowledged(self) -> dict[str, float]:
        return self.roller.acknowledged

    def describe(self) -> str:
        r = self.roller
        return f"the roller played: a roll every {r.every:g} s: {r.asks} asks (q = {r.q:g}), {r.ratings} ratings"

    def start(self) -> None:
        self.thread = threading.Thread(target=self.roller.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.roller.stop.set()
        if self.thread is not None:
            self.thread.join()

    def close(self) -> None:
        self.stop()

    def summary(self) -> str:
        return f"roller stopped after {len(self.roller.written)} rolls"


def published_ratings(published: Path, prefix: str) -> set[str] | None:
    """The bench's rating ids in the published file; None while it cannot be read (being replaced)."""
    try:
        with duckdb.connect(str(published), read_only=True) as con:
            rows = con.execute("SELECT rating_id FROM raw.ratings WHERE starts_with(rating_id, ?)", [prefix])
            return {rating_id for (rating_id,) in rows.fetchall()}
    except duckdb.Error:
        return None


def median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return float("nan") if n == 0 else (ordered[(n - 1) // 2] + ordered[n // 2]) / 2


def live(
    source: Path,
    workdir: Path | None,
    minutes: float,
    make_feed: Callable[[PulseHome, list[tuple[str, int]]], Feed],
    drain_seconds: float = 600.0,
    seed: int = 0,
    env: dict[str, str] | None = None,
) -> dict:
    """Copy ``source`` into ``workdir`` (None: use it as it is), run the daemon and the feed for ``minutes``, print
    every published state's lag and the verdicts; returns the figures (``max_lag``, ``keeps_up``, ``states``).

    A rating's lag: from its acknowledgement to the first published state that holds it. Per state: the largest
    and the median lag of the ratings it shows for the first time."""
    if workdir is None:
        root = source
    else:
        root = workdir / "home"
        started = time.monotonic()
        shutil.copytree(source, root, symlinks=True)  # copy2: the drops keep their times, so their fingerprints
        print(f"home copied to {root} in {time.monotonic() - started:.1f} s")
    home = PulseHome(root).ensure()
    os.environ["DAGSTER_HOME"] = str(home.dagster_home)
    instance = dg.DagsterInstance.from_config(str(home.dagster_home))
    published = home.warehouse
    sessions = unrated_sessions(published, seed)
    feed = make_feed(home, sessions)
    print(f"home {root}: {len(sessions):,} sessions never rated nor asked; {feed.describe()}; {minutes:g} min")
    log = (workdir or Path(tempfile.mkdtemp(prefix="pulse-live-"))) / "daemon.log"
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    daemon = start_daemon(home, log, env or {})
    t0 = time.time()
    states: list[State] = []
    seen: set[str] = set()
    try:
        _wait("two drop sensor ticks", lambda: sensor_ticks(instance, SENSOR_NAME) >= 2, 300, daemon, log)
        print(f"daemon: drop sensor ticking {time.time() - t0:.1f} s after its start")
        t0 = time.time()
        feed.start()
        end = t0 + minutes * 60
        last = stamp(published)
        stopped = False
        while True:
            now = time.time()
            if now >= end and not stopped:
                feed.stop()
                stopped = True
                print(f"{feed.summary()}; waiting for the last ratings to be published", flush=True)
            acknowledged = dict(feed.acknowledged)
            if stopped and (set(acknowledged) <= seen or now > end + drain_seconds):
                break
            if daemon.poll() is not None:
                raise SystemExit(f"the daemon exited ({daemon.returncode}):\n{log.read_text()[-3000:]}")
            current = stamp(published)
            if current != last and (found := published_ratings(published, feed.prefix)) is not None:
                last = current
                new = found - seen
                if new:
                    lags = [now - acknowledged[r] for r in new if r in acknowledged]
                    state = State(now, max(lags, default=float("nan")), median(lags), len(new), os.getloadavg()[0])
                    states.append(state)
                    seen |= found
                    behind = len(set(acknowledged) - seen)
                    print(
                        f"+{now - t0:6.1f} s published: {len(new)} new ratings ({len(found)} in all); lag of the new"
                        f" ones: max {state.max_lag:5.1f} s, p50 {state.p50_lag:5.1f} s; {behind} acknowledged not"
                        f" yet published; load {state.load:.2f}",
                        flush=True,
                    )
            time.sleep(1.0)
    finally:
        feed.close()
        code = stop_daemon(daemon)
    print(f"daemon stopped (exit {code}); load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    acknowledged = dict(feed.acknowledged)
    print_runs(home, instance, t0 - 1, f"{len(acknowledged)} ratings acknowledged")
    lags = [s.max_lag for s in states]
    left = len(set(acknowledged) - seen)
    steady, first, second = keeps_up(lags, feed.every)
    max_lag = max(lags, default=float("nan"))
    verdict = "under" if max_lag < TARGET_LAG_SECONDS else "OVER"
    p50 = median([s.p50_lag for s in states])
    print(
        f"published states: {len(states)}; longest wait of a rating: {max_lag:.1f} s ({verdict} the"
        f" {TARGET_LAG_SECONDS:.0f} s target); median of the states' p50 lags {p50:.1f} s; mean of the states' longest"
        f" wait after the first state: first half {first:.1f} s, second half {second:.1f} s;"
        f" ratings left unpublished: {left}"
    )
    kept = None if steady is None else steady and left == 0
    told = {True: "yes", False: "NO", None: "not told (fewer than three published states)"}
    print(f"keeps up: {told[kept]}")
    return {"max_lag": max_lag, "keeps_up": kept, "states": len(states), "ratings": len(acknowledged)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="a PULSE_HOME with sessions (after `pulse demo`)")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--roll-seconds", type=float, default=5.0, help="the roller's interval (default 5)")
    parser.add_argument("--asks-per-roll", type=int, default=4)
    parser.add_argument("--ratings-per-roll", type=int, default=2)
    parser.add_argument("--ask-probability", type=float, default=0.25)
    parser.add_argument("--drain-seconds", type=float, default=600.0, help="after the roller stops, wait at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, help="where the home's copy goes (kept); default: a temporary folder")
    parser.add_argument("--in-place", action="store_true", help="use --home itself (its day drop is left in it)")
    args = parser.parse_args()
    # SIGTERM (a background job ignores SIGINT) ends the bench through its cleanup: the daemon is stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not (args.home / "drops").is_dir():
        raise SystemExit(f"{args.home} is not a PULSE_HOME (no drops/): run `pulse demo` with PULSE_HOME={args.home}")

    def played(home: PulseHome, sessions: list[tuple[str, int]]) -> PlayedRolls:
        roller = Roller(
            home.drops,
            sessions,
            args.asks_per_roll,
            args.ratings_per_roll,
            args.roll_seconds,
            args.ask_probability,
            args.seed,
        )
        return PlayedRolls(roller)

    run_live(args.home, args.workdir, args.in_place, args.minutes, played, args.drain_seconds, args.seed)


def run_live(
    home: Path,
    workdir: Path | None,
    in_place: bool,
    minutes: float,
    make_feed: Callable[[PulseHome, list[tuple[str, int]]], Feed],
    drain_seconds: float,
    seed: int,
) -> dict:
    """``live`` on ``home`` itself (``in_place``), on a copy in ``workdir`` (kept), or in a temporary folder."""
    if in_place:
        return live(home, None, minutes, make_feed, drain_seconds, seed)
    if workdir:
        workdir.mkdir(parents=True, exist_ok=True)
        return live(home, workdir, minutes, make_feed, drain_seconds, seed)
    with tempfile.TemporaryDirectory(prefix="pulse-serve-live-") as tmp:
        return live(home, Path(tmp), minutes, make_feed, drain_seconds, seed)


if __name__ == "__main__":
    main()
