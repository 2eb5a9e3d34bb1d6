"""Shared fixtures (helpers that tests import live in ``helpers.py``)."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import duckdb
import pytest

from pulse_pipeline.paths import PulseHome
from pulse_pipeline.warehouse import Warehouse

from .fake_llm import FakeLLM, running_fake_llm
from .helpers import SMALL_HOME_SEED, SMALL_HOME_SESSIONS, SMALL_HOME_SETTINGS
from .hook_helpers import fake_service, hook_env  # noqa: F401 (the hooks' fixtures: a fake rating service, its env)


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist (``--dist loadfile``), hand out the modules in the order ``pytest_collection_modifyitems``
    gives them, not by number of tests (xdist's default): the few modules of whole-pipeline tests hold few tests
    each, so that order started them last and one worker ran them alone at the end of the run."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules with most slow tests (``@pytest.mark.slow``: more than ~10 s each) first, the others after
    in their usual order: the longest work starts first and the short modules fill both workers at the end
    (longest processing time first). The order of tests within a module is kept; every worker computes the same
    order, as xdist requires."""
    slow: dict[str, int] = {}
    for item in items:
        slow[_module(item)] = slow.get(_module(item), 0) + (item.get_closest_marker("slow") is not None)
    usual = {module: i for i, module in enumerate(slow)}  # dicts keep the collection order
    items.sort(key=lambda item: (-slow[_module(item)], usual[_module(item)]))


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


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
    """A scripted OpenAI-compatible server on loopback (``tests/fake_llm.py``), stopped after the test."""
    with running_fake_llm() as fake:
        yield fake


class BuiltHome(NamedTuple):
    home: Path  # the home's folder: copy it (``shutil.copytree(home, dest, symlinks=True)``), never write into it
    sessions: int  # the sessions the generator wrote into its one drop, ``a``


@pytest.fixture(scope="session")
def small_built_home(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> BuiltHome:
    """A small home made by the pipeline: drop ``a`` of 40 synthetic sessions (seed 1) ingested and published, with
    ``SMALL_HOME_SETTINGS`` (one cheap model family, one CV seed, a SQLite lake). Built once for the whole run: under
    xdist every worker shares one copy, in the run's common temporary folder, the first to ask builds it under a
    lock and the others wait for it. Homes are relocatable (docs/moving-a-home.md), so each test copies it and
    works on its copy; tests must never write into this folder (the other workers read it)."""
    from pulse_pipeline import runs
    from pulse_pipeline.synth import write_corpus

    base = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):  # an xdist worker: the folder all workers of this run share
        base = base.parent
    root = base / "small-built-home"
    ready = root / "sessions"  # written last: the home is whole
    with open(base / "small-built-home.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            shutil.rmtree(root, ignore_errors=True)  # a build that died half-way
            with pytest.MonkeyPatch.context() as env:
                for name, value in {**SMALL_HOME_SETTINGS, "PULSE_HOME": str(root / "home")}.items():
                    env.setenv(name, value)
                env.setenv("DAGSTER_HOME", str(root / "home" / "dagster"))
                corpus = write_corpus(root / "corpus" / "a", SMALL_HOME_SESSIONS, seed=SMALL_HOME_SEED)
                runs.ingest(PulseHome.from_env(), root / "corpus" / "a", say=lambda _: None)
            ready.write_text(str(corpus.n_sessions))
    return BuiltHome(root / "home", int(ready.read_text()))
