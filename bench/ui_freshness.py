"""Drop to analysts under `pulse ui`: seconds from a drop landing in the drop folder to its sessions in the
published `pulse.duckdb`.

    PULSE_HOME=/tmp/demo .venv/bin/pulse demo                       # once: a demo home to copy
    .venv/bin/python bench/ui_freshness.py --home /tmp/demo --port 3150
    .venv/bin/python bench/ui_freshness.py --home /tmp/demo --sessions 100 --seed 7 --workdir /tmp/fresh

The home is copied (``--workdir``, default a temporary folder, removed at the end unless given), so the measured
home is left as it was. `pulse ui` starts on the copy; once the daemon's drop sensor has ticked, the script counts
the runs it started on the home as it found it (none is expected: its drops are loaded already), writes a
synthetic corpus (``pulse synth``'s generator, ``--seed``; not the demo's seed) beside the drop folder and renames
it in, which starts the clock. It then polls the published `pulse.duckdb`, read-only as an analyst does, until
``staging.sessions`` holds the drop's sessions, and prints the seconds, with where they went: until the drop's run
was queued (the sensor's interval), until it started (launching a run worker), the run itself, and from its end to
the publish (the publish sensor). It then waits for the automation sensor's next tick after the drop's run, and
counts the runs other than the drop's started since the drop (none is expected: the drop's run refreshed every
derived table). Last it stops the UI with SIGINT, as Ctrl-C does, and waits for it to exit.

Target (issue 33): a small drop on the demo home reaches the analysts in under 60 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
import duckdb

from pulse_pipeline.defs.ingest.sensors import SENSOR_NAME
from pulse_pipeline.defs.specs import AUTOMATION_SENSOR
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.synth import write_corpus

VENV_BIN = Path(sys.executable).parent
TARGET_SECONDS = 60.0


def _instance(home: PulseHome) -> dg.DagsterInstance:
    os.environ["DAGSTER_HOME"] = str(home.dagster_home)
    return dg.DagsterInstance.from_config(str(home.dagster_home))


def sensor_ticks(instance: dg.DagsterInstance, name: str) -> int:
    """How many ticks the daemon has recorded for the sensor ``name`` (0 before its first evaluation)."""
    for state in instance.all_instigator_state():
        if state.instigator_name == name:
            return len(instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=1000))
    return 0


def visible_sessions(published: Path, drop: str) -> int:
    """Sessions of ``drop`` an analyst sees in the published file (0 while it is absent or not yet published)."""
    if not published.exists():
        return 0
    try:
        with duckdb.connect(str(published), read_only=True) as con:
            return con.execute("SELECT count(*) FROM staging.sessions WHERE drop_id = ?", [drop]).fetchone()[0]
    except duckdb.Error:
        return 0  # replaced while being opened, or not a warehouse yet


def ticked_after(instance: dg.DagsterInstance, name: str, moment: float) -> bool:
    """Whether the sensor ``name`` finished a tick that started after ``moment`` (a POSIX time)."""
    for state in instance.all_instigator_state():
        if state.instigator_name == name:
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=5)
            return any(t.timestamp > moment and t.status.value != "STARTED" for t in ticks)
    return False


def wait_for(what: str, check, timeout: float, ui: subprocess.Popen, log: Path, every: float = 0.25):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if ui.poll() is not None:
            raise SystemExit(f"pulse ui exited ({ui.returncode}) while waiting for {what}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"no {what} within {timeout:.0f} s; the UI's log:\n{log.read_text()[-3000:]}")
        time.sleep(every)
    return found


def stop(ui: subprocess.Popen) -> int:
    """SIGINT, as Ctrl-C: `pulse ui` stops its whole process group (processes.run_process_group)."""
    if ui.poll() is None:
        ui.send_signal(signal.SIGINT)
    try:
        return ui.wait(timeout=60)
    except subprocess.TimeoutExpired:
        ui.kill()
        return ui.wait()


def measure(
    source: Path, workdir: Path, port: int, sessions: int, seed: int, timeout: float, id_prefix: str | None = None
) -> float:
    root = workdir / "home"
    shutil.copytree(source, root, symlinks=True)  # copy2: the drops keep their times, so their fingerprints
    home = PulseHome(root)
    instance = _instance(home)
    runs_before = len(instance.get_run_records())
    published = home.warehouse
    drop = f"fresh-{sessions}-seed{seed}"
    log = workdir / "ui.log"
    env = {**os.environ, "PULSE_HOME": str(root), "DAGSTER_HOME": str(home.dagster_home)}
    started = time.monotonic()
    with log.open("w") as out:
        ui = subprocess.Popen(
            [str(VENV_BIN / "pulse"), "ui", "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        # two ticks: the sensor has evaluated the home as it found it, and the runs it asked for are recorded
        wait_for("two drop sensor ticks", lambda: sensor_ticks(instance, SENSOR_NAME) >= 2, 300, ui, log)
        print(f"pulse ui: drop sensor ticking {time.monotonic() - started:.1f} s after the start")
        newest_first = instance.get_run_records()
        at_start = [r.dagster_run for r in newest_first[: len(newest_first) - runs_before]]
        print(f"runs started on the home as found: {len(at_start)} {sorted({r.job_name for r in at_start})}")

        incoming = home.drops / f".incoming-{drop}"  # a name the sensor ignores, on the drop folder's file system
        write_corpus(incoming, sessions, seed=seed, prefix=id_prefix)  # ids of its own: it replaces no session
        dropped = time.time()
        os.rename(incoming, home.drops / drop)
        clock = time.monotonic()
        wait_for(f"sessions of {drop} in {published}", lambda: visible_sessions(published, drop), timeout, ui, log)
        seconds = time.monotonic() - clock
        published_at = published.stat().st_mtime
        # Let the automation sensor look once at the state the drop's run left: whatever it finds stale (it should
        # find nothing: the run refreshed every derived table) is requested in that tick, so it is counted below.
        ran = instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/partition": drop}))
        ended = max((r.end_time or time.time()) for r in ran) if ran else time.time()
        wait_for(
            "an automation tick after the run", lambda: ticked_after(instance, AUTOMATION_SENSOR, ended), 120, ui, log
        )
    finally:
        code = stop(ui)
    print(f"pulse ui stopped (exit {code})")

    records = instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/partition": drop}))
    if records:
        run = min(records, key=lambda r: r.create_timestamp)  # its first run (a retry would come later)
        queued = run.create_timestamp.timestamp()
        print(f"  drop sensor: run queued {queued - dropped:.1f} s after the drop ({run.dagster_run.job_name})")
        print(f"  run worker: started {run.start_time - queued:.1f} s after")
        print(f"  run: {run.end_time - run.start_time:.1f} s ({run.dagster_run.status.value})")
        print(f"  publish: {published_at - run.end_time:.1f} s after the run ended")
    other_runs = [
        r.dagster_run
        for r in instance.get_run_records()
        if r.create_timestamp.timestamp() >= dropped and r.dagster_run.tags.get("dagster/partition") != drop
    ]
    others = [r.job_name for r in other_runs]
    print(f"  other runs started after the drop: {len(others)} {sorted(others)}")
    for run in other_runs:  # what they were for: the automation sensor names its assets
        assets = sorted("/".join(k.path) for k in run.asset_selection or ())
        print(f"    {run.job_name}: {', '.join(assets) or 'every asset of the job'}")
    target = "under" if seconds < TARGET_SECONDS else "OVER"
    print(
        f"drop of {sessions} sessions to analysts: {seconds:.1f} s ({target} the {TARGET_SECONDS:.0f} s target;"
        f" {visible_sessions(published, drop)} sessions visible)"
    )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="a PULSE_HOME to copy (e.g. after `pulse demo`)")
    parser.add_argument("--port", type=int, default=3150)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--id-prefix",
        help="the corpus's id prefix (default: the generator's own, from its options); give the home's to make the "
        "drop replace sessions on purpose (replaced ratings make the model step fit again)",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="give up after this many seconds")
    parser.add_argument("--workdir", type=Path, help="where the copy goes (kept); default: a temporary folder")
    args = parser.parse_args()
    if not (args.home / "drops").is_dir():
        raise SystemExit(f"{args.home} is not a PULSE_HOME (no drops/): run `pulse demo` with PULSE_HOME={args.home}")
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        measure(args.home, args.workdir, args.port, args.sessions, args.seed, args.timeout, args.id_prefix)
    else:
        with tempfile.TemporaryDirectory(prefix="pulse-ui-freshness-") as tmp:
            measure(args.home, Path(tmp), args.port, args.sessions, args.seed, args.timeout, args.id_prefix)


if __name__ == "__main__":
    main()
