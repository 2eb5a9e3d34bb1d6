"""The run launcher named in dagster.yaml: Dagster's default one, plus a health check so a dead run cannot block.

Every run writes the one DuckDB file, so the instance runs one at a time (``run_queue: max_concurrent_runs: 1``).
A run whose process was killed (``kill -9``, a closed terminal, a reboot, ``pulse ingest`` interrupted) stays
STARTED for ever, and the queue then waits for it for ever. Dagster's run monitoring can fail such runs, but
only through the launcher's ``check_run_worker_health``, which ``DefaultRunLauncher`` does not implement
(``supports_check_run_worker_health`` is False): with it alone, monitoring only times out runs stuck while
starting or cancelling, and a ``max_runtime_seconds`` would kill long healthy runs too.

So this launcher answers the health check from the process that executes the run: the RUN_START event records
its pid (the run worker the code server spawned, or the ``pulse ingest``/``pulse materialize`` process for runs
executed in-process), and ``processes.process_alive`` tells whether that process still lives. Runs only ever
execute on this machine (the warehouse is a local file), so a pid is meaningful here.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.events import DagsterEventType
from dagster._core.launcher import CheckRunHealthResult, DefaultRunLauncher, WorkerStatus

from ..processes import process_alive


class PulseRunLauncher(DefaultRunLauncher):
    """Launches runs as ``DefaultRunLauncher`` does, and reports a run as failed once its process is gone."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        records = self._instance.get_records_for_run(
            run.run_id, of_type=DagsterEventType.RUN_START, limit=1, ascending=False
        ).records
        started = records[0].event_log_entry if records else None
        pid = started.dagster_event.pid if started and started.dagster_event else None
        if started is None or pid is None:
            # Nothing to check against: never fail a run that may be alive.
            return CheckRunHealthResult(WorkerStatus.RUNNING, "no RUN_START event with a pid")
        if process_alive(pid, started.timestamp):
            return CheckRunHealthResult(WorkerStatus.RUNNING, f"process {pid} is running")
        return CheckRunHealthResult(
            WorkerStatus.FAILED,
            f"the process that executed this run (pid {pid}) is gone: it was killed, or the machine restarted. "
            "Marked failed so that queued runs can start; the drop sensor requests a failed drop's run again.",
        )
