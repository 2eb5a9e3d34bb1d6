"""`pulse ui` opens as the README says: started as a user would (no activated virtualenv), its GraphQL endpoint
shows the asset graph, the checks, the sensors and the schedule of the definitions, and Ctrl-C stops it all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest

from pulse_pipeline.definitions import build_definitions
from pulse_pipeline.defs.ingest.sensors import drop_sensor
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.processes import environment_of, ui_command

from .test_ui_process import _free_port, kill_what_is_left, stop_and_check_gone

VENV_BIN = Path(sys.executable).parent
START_TIMEOUT_SECONDS = 90

# One query for the whole workspace: the code location's load status, every asset with its checks, and the
# location's sensors and schedules.
WORKSPACE_QUERY = """
{
  workspaceOrError {
    ... on Workspace {
      locationEntries { loadStatus locationOrLoadError { __typename ... on PythonError { message stack } } }
    }
  }
  assetNodes {
    assetKey { path }
    assetChecksOrError { __typename ... on AssetChecks { checks { name } } }
  }
  repositoriesOrError {
    __typename
    ... on RepositoryConnection {
      nodes {
        sensors { name sensorState { status } }
        schedules { name cronSchedule scheduleState { status } }
      }
    }
  }
}
"""


def _graphql(port: int, query: str) -> dict | None:
    """The query's ``data``, or None while the webserver (or its code location) does not answer yet."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = json.load(response)
    except OSError:
        return None
    assert "errors" not in answer, answer["errors"]
    return answer["data"]


def _loaded(data: dict | None) -> bool:
    """Whether the code location has loaded; a location that failed to load fails the test with its error."""
    if data is None:
        return False
    entries = data["workspaceOrError"]["locationEntries"]
    for entry in entries:
        error = entry["locationOrLoadError"] or {}
        assert error.get("__typename") != "PythonError", f"{error['message']}\n{''.join(error['stack'])}"
    return bool(entries) and all(entry["loadStatus"] == "LOADED" for entry in entries)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc (Linux)")
def test_pulse_ui_serves_the_definitions_and_stops_on_ctrl_c(tmp_path):
    home = tmp_path / "home"
    definitions = build_definitions(PulseHome(home))
    expected_assets = {tuple(key.path) for key in definitions.resolve_all_asset_keys()}
    expected_checks = {
        (tuple(key.asset_key.path), key.name) for key in definitions.resolve_asset_graph().asset_check_keys
    }
    expected_sensors = {sensor.name: sensor.default_status.value for sensor in definitions.sensors}
    expected_schedules = {
        schedule.name: (schedule.cron_schedule, schedule.default_status.value) for schedule in definitions.schedules
    }
    automation = [s.name for s in definitions.sensors if isinstance(s, dg.AutomationConditionSensorDefinition)]

    port = _free_port()
    # as from a shell that never activated the virtualenv: its bin folder is not on PATH
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != VENV_BIN)
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "VIRTUAL_ENV")}
    env.update(PULSE_HOME=str(home), PATH=path)
    log_path = tmp_path / "ui.log"
    with log_path.open("w") as log:
        ui = subprocess.Popen(
            [str(VENV_BIN / "pulse"), "ui", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            data = _graphql(port, WORKSPACE_QUERY)
            while not _loaded(data):
                assert ui.poll() is None, f"pulse ui exited with {ui.returncode}:\n{log_path.read_text()}"
                assert time.monotonic() < deadline, (
                    f"no asset graph at http://127.0.0.1:{port}/graphql within {START_TIMEOUT_SECONDS} s:\n"
                    f"{log_path.read_text()}"
                )
                time.sleep(1)
                data = _graphql(port, WORKSPACE_QUERY)

            nodes = data["assetNodes"]
            assert {tuple(n["assetKey"]["path"]) for n in nodes} == expected_assets
            checks = [
                (tuple(n["assetKey"]["path"]), check["name"])
                for n in nodes
                for check in n["assetChecksOrError"]["checks"]
            ]
            assert len(checks) == len(expected_checks) and set(checks) == expected_checks

            repositories = data["repositoriesOrError"]
            assert repositories["__typename"] == "RepositoryConnection", repositories
            (repository,) = repositories["nodes"]
            sensors = {s["name"]: s["sensorState"]["status"] for s in repository["sensors"]}
            assert sensors == expected_sensors
            # the drop sensor and the automation sensor start running with the UI, as the README says
            assert sensors[drop_sensor.name] == "RUNNING"
            assert len(automation) == 1 and sensors[automation[0]] == "RUNNING"
            schedules = {s["name"]: (s["cronSchedule"], s["scheduleState"]["status"]) for s in repository["schedules"]}
            assert schedules == expected_schedules

            stop_and_check_gone(ui, signal.SIGINT, 130)  # Ctrl-C
        finally:
            kill_what_is_left(ui)


def test_the_children_run_from_the_environment_of_the_python_given(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = venv / "bin" / "python"
    base = {"PATH": "/usr/bin:/bin", "VIRTUAL_ENV": "/elsewhere/.venv", "HOME": "/home/x"}

    env = environment_of(base, python=python)
    assert env == {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "VIRTUAL_ENV": str(venv), "HOME": "/home/x"}
    dg_dev = [str(venv / "bin" / "dg"), "dev", "--host", "0.0.0.0", "--port", "3001"]
    assert ui_command(port=3001, host="0.0.0.0", python=python) == dg_dev
    # a Python outside any virtualenv: its folder first, and the caller's virtualenv is not claimed
    system = tmp_path / "usr" / "bin" / "python3"
    assert environment_of(base, python=system) == {"PATH": f"{system.parent}:/usr/bin:/bin", "HOME": "/home/x"}
