"""Runs never stay stuck: a run whose process died is marked failed (so the one-run queue moves), and the drop
sensor runs a failed drop again, a bounded number of times."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import dagster as dg
import pytest
from dagster._core.events import DagsterEvent, DagsterEventType
from dagster._core.launcher import WorkerStatus
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteRepositoryOrigin

from pulse_pipeline.defs.ingest.sensors import DROP_JOB, INGEST_JOB, MAX_RETRIES, SENSOR_NAME, drop_sensor, run_key
from pulse_pipeline.defs.resources import warehouse_resource
from pulse_pipeline.defs.run_launcher import PulseRunLauncher
from pulse_pipeline.ingest.drop import fingerprint
from pulse_pipeline.paths import PROJECT_ROOT, PulseHome

from .helpers import FIXTURES

T = TypeVar("T")


def _started_run(instance: dg.DagsterInstance, pid: int, at: float) -> dg.DagsterRun:
    """A run record as a run worker leaves it: STARTED by process ``pid`` at time ``at``."""
    run = instance.add_run(dg.DagsterRun(job_name=INGEST_JOB, run_id=str(uuid.uuid4())))
    instance.report_dagster_event(
        DagsterEvent(DagsterEventType.RUN_START.value, INGEST_JOB, pid=pid), run.run_id, timestamp=at
    )
    return instance.get_run_by_id(run.run_id)


def test_the_instance_fails_dead_runs(pulse_home):
    """PULSE_HOME's instance (dagster.yaml) monitors runs with the launcher's health check."""
    instance = dg.DagsterInstance.from_config(str(pulse_home.dagster_home))
    assert isinstance(instance.run_launcher, PulseRunLauncher)
    assert instance.run_monitoring_enabled and instance.run_monitoring_poll_interval_seconds == 15


def test_the_instance_runs_one_run_at_a_time_and_dequeues_every_second(pulse_home):
    """The run queue (dagster.yaml) starts one run at a time, and looks for the next every second (Dagster's
    default, 5 s, was part of every live rating's wait: ``bench/serve.py --live``)."""
    instance = dg.DagsterInstance.from_config(str(pulse_home.dagster_home))
    assert instance.run_coordinator.get_run_queue_config().max_concurrent_runs == 1
    assert instance.run_coordinator.dequeue_interval_seconds == 1


def test_health_check_fails_a_run_whose_process_is_gone():
    instance = dg.DagsterInstance.ephemeral()
    launcher = PulseRunLauncher()
    launcher.register_instance(instance)
    assert launcher.supports_check_run_worker_health
    now = time.time()

    alive = launcher.check_run_worker_health(_started_run(instance, os.getpid(), now))
    assert alive.status == WorkerStatus.RUNNING

    ended = subprocess.Popen(["true"])
    ended.wait()
    dead = launcher.check_run_worker_health(_started_run(instance, ended.pid, now))
    assert dead.status == WorkerStatus.FAILED
    assert f"pid {ended.pid}) is gone" in dead.msg

    # a process that started after the run did only reuses the pid: the run's own process is dead
    newer = subprocess.Popen(["sleep", "30"])
    try:
        reused = launcher.check_run_worker_health(_started_run(instance, newer.pid, now - 60))
        assert reused.status == WorkerStatus.FAILED
    finally:
        newer.kill()
        newer.wait()


def _sensor_run(instance: dg.DagsterInstance, key: str, status: dg.DagsterRunStatus) -> None:
    tags = {"dagster/sensor_name": SENSOR_NAME, "dagster/run_key": key, "dagster/partition": key.split(":")[0]}
    instance.add_run(dg.DagsterRun(job_name=DROP_JOB, run_id=str(uuid.uuid4()), status=status, tags=tags))


def test_sensor_retries_a_failed_drop_a_bounded_number_of_times(pulse_home):
    line = (FIXTURES / "canonical" / "sessions.jsonl").read_text().splitlines()[0] + "\n"
    paths = {name: pulse_home.drops / name for name in ("ok.jsonl", "killed.jsonl", "third.jsonl", "hopeless.jsonl")}
    for path in paths.values():
        path.write_text(line)
    first = {name: run_key(name, fingerprint(path)) for name, path in paths.items()}
    failure, success = dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.SUCCESS
    instance = dg.DagsterInstance.ephemeral()
    _sensor_run(instance, first["ok.jsonl"], success)
    _sensor_run(instance, first["killed.jsonl"], failure)
    for retry in range(MAX_RETRIES):  # the first run and two retries failed: one retry is left
        _sensor_run(instance, run_key("third.jsonl", fingerprint(paths["third.jsonl"]), retry), failure)
    for retry in range(MAX_RETRIES + 1):  # the first run and every retry failed
        _sensor_run(instance, run_key("hopeless.jsonl", fingerprint(paths["hopeless.jsonl"]), retry), failure)
    resources = {"warehouse": warehouse_resource(pulse_home)}

    with dg.build_sensor_context(instance=instance, resources=resources) as context:
        result = drop_sensor(context)
    assert {r.partition_key: r.run_key for r in result.run_requests} == {
        "ok.jsonl": first["ok.jsonl"],  # already run: Dagster skips a run key it has seen
        "killed.jsonl": first["killed.jsonl"] + ":retry-1",
        "third.jsonl": first["third.jsonl"] + f":retry-{MAX_RETRIES}",
    }
    # the drop given up on is remembered, so the warning is logged once
    assert json.loads(result.cursor) == [first["hopeless.jsonl"]]

    # a rewritten drop is a new drop: its retries start again
    paths["hopeless.jsonl"].write_text(line + line)
    with dg.build_sensor_context(instance=instance, resources=resources, cursor=result.cursor) as context:
        again = drop_sensor(context)
    requested = {r.partition_key: r.run_key for r in again.run_requests}
    assert requested["hopeless.jsonl"] == run_key("hopeless.jsonl", fingerprint(paths["hopeless.jsonl"]))
    assert json.loads(again.cursor) == []


def test_rolls_that_arrive_while_a_drop_is_busy_are_taken_together_after(pulse_home):
    """Issue 35: the rating service adds a roll file to its day's drop every few seconds. Each roll was a new
    fingerprint, so a new run key: a run was queued per roll while one ran, each loading the whole drop again. While
    a drop's run is queued or running, no other run is asked for it; when it ends, one run takes the drop as it is
    then (no roll lost), and a failed run is still retried; other drops are not held up."""
    line = (FIXTURES / "canonical" / "sessions.jsonl").read_text().splitlines()[0] + "\n"
    day = pulse_home.drops / "serve-2026-12-04"
    day.mkdir()
    (day / "roll-00000001.jsonl").write_text(line)
    first = run_key(day.name, fingerprint(day))
    other = pulse_home.drops / "other.jsonl"
    other.write_text(line)
    instance = dg.DagsterInstance.ephemeral()
    resources = {"warehouse": warehouse_resource(pulse_home)}

    def requested() -> dict[str, str]:
        with dg.build_sensor_context(instance=instance, resources=resources) as context:
            return {r.partition_key: r.run_key for r in drop_sensor(context).run_requests}

    assert requested()[day.name] == first
    tags = {"dagster/sensor_name": SENSOR_NAME, "dagster/run_key": first, "dagster/partition": day.name}
    # a queued run names the code location it is launched from (the daemon's); this one is never launched
    origin = RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("pulse"), "__repository__").get_job_origin(DROP_JOB)
    for status in (dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTED):
        run = instance.add_run(
            dg.DagsterRun(
                job_name=DROP_JOB, run_id=str(uuid.uuid4()), status=status, tags=tags, remote_job_origin=origin
            )
        )
        # two rolls arrive while the run waits or runs: nothing more is asked for that drop, the other drop runs
        (day / f"roll-0000000{len(list(day.iterdir())) + 1}.jsonl").write_text(line)
        assert requested() == {other.name: run_key(other.name, fingerprint(other))}
        instance.delete_run(run.run_id)

    # the run failed (killed): the drop as it is now (three rolls, a fingerprint never asked for) is one new run
    _sensor_run(instance, first, dg.DagsterRunStatus.FAILURE)
    now = run_key(day.name, fingerprint(day))
    assert now != first and requested()[day.name] == now
    # ... and if that one fails too, it is retried as any failed drop is
    _sensor_run(instance, now, dg.DagsterRunStatus.FAILURE)
    assert requested()[day.name] == now + ":retry-1"


def _wait_for(what: str, check: Callable[[], T | None], timeout: float, every: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


# A drop's run refreshes the derived tables too (the models among them): one cheap family and one CV seed keep
# the daemon's runs short, as in the ingest bench's smoke tests.
QUICK_MODELS = {"PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_CV_SEEDS": "1"}


def _start_daemon(home: PulseHome, log: Path) -> subprocess.Popen:
    """`dagster-daemon run` on the project's workspace, in its own process group (it, its code server, runs)."""
    env = {**os.environ, "DAGSTER_HOME": str(home.dagster_home), "PULSE_HOME": str(home.root), **QUICK_MODELS}
    command = [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", str(PROJECT_ROOT / "workspace.yaml")]
    with log.open("a") as out:
        return subprocess.Popen(
            command, cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the daemon's whole process group (as a power cut would) and wait until every member is gone."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    process.wait()

    def gone() -> bool:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return True
        return False

    _wait_for("the daemon's process group to end", gone, timeout=15, every=0.1)


def _ingest_runs(instance: dg.DagsterInstance, drop: str) -> list[dg.DagsterRun]:
    return list(instance.get_runs(filters=dg.RunsFilter(job_name=DROP_JOB, tags={"dagster/partition": drop})))


def _big_drop(path: Path, sessions: int) -> None:
    """A drop that takes a few seconds to read: the fixture's sessions copied under new ids."""
    records = [json.loads(line) for line in (FIXTURES / "canonical" / "sessions.jsonl").read_text().splitlines()]
    with path.open("w") as out:
        for i in range(sessions):
            out.write(json.dumps({**records[i % len(records)], "session_id": f"s{i}"}) + "\n")


@pytest.mark.slow
def test_a_killed_run_is_failed_and_the_next_drop_runs(pulse_home, tmp_path):
    """The issue's reproduction: a run killed with everything around it stays STARTED and, one run at a time,
    blocks every later drop. Now the restarted daemon fails it, runs the next drop, and retries the killed one."""
    _big_drop(pulse_home.drops / "a.jsonl", sessions=2000)
    instance = dg.DagsterInstance.from_config(str(pulse_home.dagster_home))
    log = tmp_path / "daemon.log"
    daemons = []
    try:
        daemons.append(_start_daemon(pulse_home, log))
        started = _wait_for(
            "drop a's run to start",
            lambda: [r for r in _ingest_runs(instance, "a.jsonl") if r.status == dg.DagsterRunStatus.STARTED],
            timeout=60,
            every=0.05,
        )[0]
        _kill_group(daemons[0])
        killed = instance.get_run_by_id(started.run_id)
        assert killed.status == dg.DagsterRunStatus.STARTED, "the run ended before it could be killed"

        (pulse_home.drops / "b.jsonl").write_bytes((FIXTURES / "canonical" / "sessions.jsonl").read_bytes())
        daemons.append(_start_daemon(pulse_home, log))
        # run monitoring checks every run at daemon start; the sensor ticks every 5 s, and drop b's run is queued
        # behind drop a's retry, each reading its drop and then refreshing every derived table
        _wait_for(
            "the killed run to be marked failed",
            lambda: instance.get_run_by_id(started.run_id).status == dg.DagsterRunStatus.FAILURE,
            timeout=30,
        )
        pid = instance.all_logs(started.run_id, of_type=DagsterEventType.RUN_START)[-1].dagster_event.pid
        failure = instance.all_logs(started.run_id, of_type=DagsterEventType.RUN_FAILURE)[-1]
        assert f"(pid {pid}) is gone" in failure.dagster_event.message
        _wait_for(
            "drop b's run to succeed after the daemon restarted",
            lambda: [r for r in _ingest_runs(instance, "b.jsonl") if r.status == dg.DagsterRunStatus.SUCCESS],
            timeout=240,
        )
        retry = run_key("a.jsonl", fingerprint(pulse_home.drops / "a.jsonl"), 1)
        _wait_for(
            "the sensor to request drop a again",
            lambda: [r for r in _ingest_runs(instance, "a.jsonl") if r.tags.get("dagster/run_key") == retry],
            timeout=45,
        )
    finally:
        for daemon in daemons:
            _kill_group(daemon)
