"""The Dagster graph, kept as a snapshot: a change to it is seen in review, never made by accident.

``graph_snapshot`` writes down what the code location defines: every asset's key, group, dependencies, partitions,
automation condition, the step (op) that computes it and its kinds; every asset check and whether it blocks; every
job with the assets it selects, its partitions and executor; every sensor (kind, default status, interval, the jobs
or assets it targets, the resources it needs); every schedule. ``tests/defs_snapshot.json`` holds it for the
definitions as committed, and ``test_the_graph_is_the_snapshot`` compares, naming each change. When a change to
the graph is meant (a new table, a check made blocking), regenerate the file with one command and commit it with
the change, so the review shows what moved::

    .venv/bin/python -m tests.test_defs_snapshot

The idea is dagster-open-platform's ``test_defs.py`` (load the whole code location in a test), made a snapshot.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import dagster as dg

from pulse_pipeline.definitions import build_definitions
from pulse_pipeline.paths import PulseHome

SNAPSHOT = Path(__file__).with_name("defs_snapshot.json")
REGENERATE = ".venv/bin/python -m tests.test_defs_snapshot"
SHOWN_LINES = 100  # changes shown in a failure message


def _key(key: dg.AssetKey) -> str:
    return key.to_user_string()


def _partitions(partitions: dg.PartitionsDefinition | None) -> str | None:
    if partitions is None:
        return None
    if isinstance(partitions, dg.DynamicPartitionsDefinition):
        return f"dynamic:{partitions.name}"
    return str(partitions)


def _condition(condition: dg.AutomationCondition | None) -> str | None:
    """An automation condition by its label (``eager``), else by its operators and operands, so an unlabelled
    change (``eager().without(...)``) shows."""
    if condition is None:
        return None
    if condition.get_label():
        return condition.get_label()
    children = ", ".join(_condition(child) or "" for child in condition.children)
    return f"{condition.name}({children})" if children else condition.name


def graph_snapshot(defs: dg.Definitions) -> dict:
    """What ``defs`` defines, as plain sorted data (see the module's docstring for what is kept)."""
    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys()):
        node = graph.get(key)
        assets[_key(key)] = {
            "group": node.group_name,
            "deps": sorted(_key(parent) for parent in node.parent_keys),
            "partitions": _partitions(node.partitions_def),
            "partition_mappings": {_key(k): str(m) for k, m in sorted(node.partition_mappings.items())},
            "automation": _condition(node.automation_condition),
            "step": node.assets_def.node_def.name if node.is_executable else None,
            "kinds": sorted(node.kinds),
            "execution": node.execution_type.value,
        }
    checks = {}
    for check_key in sorted(graph.asset_check_keys, key=lambda k: (_key(k.asset_key), k.name)):
        spec = graph.get_check_spec(check_key)
        checks[f"{_key(check_key.asset_key)}:{check_key.name}"] = {
            "blocking": spec.blocking,
            "additional_deps": sorted(_key(dep.asset_key) for dep in spec.additional_deps),
            "automation": _condition(spec.automation_condition),
        }
    jobs = {}
    for job in sorted(defs.resolve_all_job_defs(), key=lambda j: j.name):
        if job.name.startswith("__"):  # Dagster's implicit job of every asset
            continue
        jobs[job.name] = {
            "assets": sorted(_key(k) for k in job.asset_layer.selected_asset_keys),
            "partitions": _partitions(job.partitions_def),
            "executor": job.executor_def.name,
        }
    sensors = {}
    for sensor in sorted(defs.sensors or [], key=lambda s: s.name):
        selection = sensor.asset_selection
        sensors[sensor.name] = {
            "type": sensor.sensor_type.value,
            "default_status": sensor.default_status.value,
            "minimum_interval_seconds": sensor.minimum_interval_seconds,
            "jobs": sorted(target.job_name for target in sensor.targets),
            "resources": sorted(sensor.required_resource_keys),
            "assets": sorted(_key(k) for k in selection.resolve(graph)) if selection is not None else None,
        }
    schedules = {
        schedule.name: {
            "cron": schedule.cron_schedule,
            "job": schedule.job_name,
            "default_status": schedule.default_status.value,
            "timezone": schedule.execution_timezone,
        }
        for schedule in sorted(defs.schedules or [], key=lambda s: s.name)
    }
    return {"assets": assets, "checks": checks, "jobs": jobs, "sensors": sensors, "schedules": schedules}


def dumped(snapshot: dict) -> str:
    return json.dumps(snapshot, indent=2, sort_keys=True) + "\n"


def changes(expected: object, current: object, where: tuple[str, ...] = ()) -> list[str]:
    """Every difference between two snapshots, one line each, named by its place: ``assets > raw/events > deps:
    added staging/sessions``; ``checks > raw/drops:records_reconcile > blocking: false -> true``."""
    place = " > ".join(where)
    if isinstance(expected, dict) and isinstance(current, dict):
        found = []
        for key in sorted(set(expected) | set(current)):
            if key not in current:
                found.append(f"{place} > {key}: removed" if place else f"{key}: removed")
            elif key not in expected:
                found.append(f"{place} > {key}: added {json.dumps(current[key], sort_keys=True)}")
            else:
                found += changes(expected[key], current[key], (*where, key))
        return found
    if isinstance(expected, list) and isinstance(current, list) and expected != current:
        added = [item for item in current if item not in expected]
        removed = [item for item in expected if item not in current]
        parts = [f"added {', '.join(map(str, added))}"] * bool(added)
        parts += [f"removed {', '.join(map(str, removed))}"] * bool(removed)
        return [f"{place}: {'; '.join(parts) or 'reordered'}"]
    if expected != current:
        return [f"{place}: {json.dumps(expected)} -> {json.dumps(current)}"]
    return []


def difference(expected: dict, current: dict) -> str:
    """The failure message: every change (its first ``SHOWN_LINES``), and the one command that records them when
    they are meant."""
    found = changes(expected, current)
    more = f"\n... and {len(found) - SHOWN_LINES} more" if len(found) > SHOWN_LINES else ""
    return (
        f"the Dagster graph is not {SNAPSHOT.relative_to(SNAPSHOT.parents[1])} ({len(found)} changes); if they are "
        f"meant, regenerate it from the repository's root with `{REGENERATE}` and commit it with the change:\n"
        + "\n".join(found[:SHOWN_LINES])
        + more
    )


def test_the_graph_is_the_snapshot(pulse_home):
    current = graph_snapshot(build_definitions(pulse_home))
    assert SNAPSHOT.exists(), f"{SNAPSHOT} is missing: write it with `{REGENERATE}`"
    expected = json.loads(SNAPSHOT.read_text())
    assert current == expected, difference(expected, current)


def test_the_snapshot_sees_an_asset_its_deps_and_a_check_that_blocks(pulse_home):
    """A made-up asset and blocking check added to the real definitions appear in the snapshot exactly as written
    here, and the failure message names the command that regenerates the file."""

    @dg.asset(
        key=["estimates", "made_up"],
        deps=[dg.AssetKey(["raw", "events"]), dg.AssetKey(["modeling", "predictions"])],
        group_name="estimates",
        automation_condition=dg.AutomationCondition.eager(),
        kinds={"duckdb"},
    )
    def made_up() -> None: ...

    @dg.asset_check(asset=made_up, blocking=True)
    def made_up_is_fine() -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=True)

    real = build_definitions(pulse_home)
    before = graph_snapshot(real)
    after = graph_snapshot(dg.Definitions.merge(real, dg.Definitions(assets=[made_up], asset_checks=[made_up_is_fine])))

    assert after["assets"]["estimates/made_up"] == {
        "group": "estimates",
        "deps": ["modeling/predictions", "raw/events"],
        "partitions": None,
        "partition_mappings": {},
        "automation": "eager",
        "step": "estimates__made_up",
        "kinds": ["duckdb"],
        "execution": "MATERIALIZATION",
    }
    assert after["checks"]["estimates/made_up:made_up_is_fine"] == {
        "blocking": True,
        "additional_deps": [],
        "automation": None,
    }
    # the new asset and check are the only change: every other entry is the same
    assert {k: v for k, v in after["assets"].items() if k != "estimates/made_up"} == before["assets"]
    assert {k: v for k, v in after["checks"].items() if k != "estimates/made_up:made_up_is_fine"} == before["checks"]
    message = difference(before, after)
    assert REGENERATE in message
    # the jobs and the automation sensor that select "every asset but ..." (definitions.py) take it in too
    assert message.splitlines()[1:] == [
        "assets > estimates/made_up: added " + json.dumps(after["assets"]["estimates/made_up"], sort_keys=True),
        "checks > estimates/made_up:made_up_is_fine: added "
        '{"additional_deps": [], "automation": null, "blocking": true}',
        "jobs > ingest_drop_and_refresh > assets: added estimates/made_up",
        "jobs > refresh_downstream > assets: added estimates/made_up",
        "sensors > pulse_automation > assets: added estimates/made_up",
    ]


def test_changes_name_each_place_that_moved():
    before = {
        "assets": {"a/x": {"deps": ["a/y", "a/z"], "group": "a"}, "a/y": {}},
        "checks": {"a/x:c": {"blocking": True}},
    }
    after = {"assets": {"a/x": {"deps": ["a/w", "a/z"], "group": "b"}}, "checks": {"a/x:c": {"blocking": False}}}
    assert changes(before, after) == [
        "assets > a/x > deps: added a/w; removed a/y",
        'assets > a/x > group: "a" -> "b"',
        "assets > a/y: removed",
        "checks > a/x:c > blocking: true -> false",
    ]
    assert changes(after, after) == []


def main() -> None:
    """Write the snapshot of the definitions as they are now (``python -m tests.test_defs_snapshot``)."""
    with tempfile.TemporaryDirectory() as folder:
        snapshot = graph_snapshot(build_definitions(PulseHome(Path(folder) / "home").ensure()))
    SNAPSHOT.write_text(dumped(snapshot))
    print(f"wrote {SNAPSHOT}: {len(snapshot['assets'])} assets, {len(snapshot['checks'])} checks")


if __name__ == "__main__":
    main()
