"""Shared fixtures (helpers that tests import live in ``helpers.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline.fake_llm import FakeLLM, running_fake_llm
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.warehouse import Warehouse

from .hook_helpers import fake_service, hook_env  # noqa: F401 (the hooks' fixtures: a fake rating service, its env)


@pytest.fixture
def pulse_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PulseHome:
    """An empty PULSE_HOME (warehouse, drop folder, Dagster instance) for one test."""
    monkeypatch.setenv("PULSE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home" / "dagster"))
    return PulseHome.from_env().ensure()


@pytest.fixture
def wh() -> Warehouse:
    """An in-memory warehouse, for reading drops without Dagster."""
    con = duckdb.connect()
    yield Warehouse(con)
    con.close()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A scripted OpenAI-compatible server on loopback (``pulse_pipeline/fake_llm.py``), stopped after the test."""
    with running_fake_llm() as fake:
        yield fake
