"""The many-machine configurations of docs/scaling.md load: each file under docs/scaling/ is validated against the
config schema of the Dagster class it configures (dagster-k8s, dagster-celery), without a cluster or a broker."""

from __future__ import annotations

import importlib

import dagster as dg
import pytest
import yaml
from dagster._config import process_config  # Dagster's own validation of a config value against a schema
from dagster._core.instance.config import dagster_instance_config

from pulse_pipeline.definitions import build_definitions
from pulse_pipeline.paths import PROJECT_ROOT, PulseHome

SCALING = PROJECT_ROOT / "docs" / "scaling"
dagster_k8s = pytest.importorskip("dagster_k8s", reason="dagster-k8s is a test extra (pip install -e '.[test]')")
dagster_celery = pytest.importorskip("dagster_celery", reason="dagster-celery is a test extra")


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> list[dg.JobDefinition]:
    """Every job of the project's code location (the drop's ingest, the downstream rebuild, the asset job)."""
    defs = build_definitions(PulseHome(tmp_path_factory.mktemp("home")))
    return list(defs.resolve_all_job_defs())


def test_the_kubernetes_instance_is_the_projects_with_postgres_and_the_k8s_launcher():
    folder = SCALING / "k8s"
    config, _ = dagster_instance_config(str(folder))  # the instance schema (raises on an unknown or bad key)
    ours = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text())
    assert {k: v for k, v in config.items() if k not in ("storage", "run_launcher")} == {
        k: v for k, v in ours.items() if k != "run_launcher"
    }
    assert config["storage"] == {"postgres": {"postgres_url": {"env": "PULSE_DAGSTER_POSTGRES_URL"}}}

    launcher = config["run_launcher"]
    cls = getattr(importlib.import_module(launcher["module"]), launcher["class"])
    assert cls is dagster_k8s.K8sRunLauncher
    checked = process_config(cls.config_type(), launcher["config"])
    assert checked.success, checked.errors
    assert checked.value["env_secrets"] == ["pulse-dagster-postgres"]  # the URL's password comes from a Secret


BROKER = "pyamqp://pulse@broker:5672//"


@pytest.mark.parametrize(
    ("path", "executor", "field", "value"),
    [
        ("k8s/run_config.yaml", "k8s_job_executor", "max_concurrent", 4),
        ("celery/run_config.yaml", "celery_executor", "broker", BROKER),  # read from CELERY_BROKER_URL
    ],
)
def test_each_executor_config_is_valid_for_every_job(path, executor, field, value, jobs, monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", BROKER)
    run_config = yaml.safe_load((SCALING / path).read_text())
    executor_def = getattr(dagster_k8s if executor.startswith("k8s") else dagster_celery, executor)
    assert {job.name for job in jobs} >= {"ingest_drop", "refresh_downstream"}
    for job in jobs:
        resolved = dg.validate_run_config(job.with_executor_def(executor_def), run_config)
        assert resolved["execution"][executor_def.name][field] == value
    # and the project's own executor (in-process, one DuckDB writer) refuses it: the file is not a no-op
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(jobs[0], run_config)
