"""Shared fixtures. Real trajectories are read from ../shared/samples (never copied into the repo)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from pulse_pipeline import staging
from pulse_pipeline.ingest.load import load_drop
from pulse_pipeline.paths import PROJECT_ROOT, PulseHome
from pulse_pipeline.warehouse import Warehouse

SAMPLES = PROJECT_ROOT.parent / "shared" / "samples"
FIXTURES = Path(__file__).parent / "fixtures"

needs_samples = pytest.mark.skipif(
    not SAMPLES.is_dir(),
    reason=f"real trajectories not found at {SAMPLES} (they live beside the repo, in shared/samples)",
)


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


def ingest_paths(wh: Warehouse, *paths: Path) -> None:
    """Load drops (each path one drop, keyed by its name) and rebuild staging, as the pipeline does."""
    for p in paths:
        load_drop(wh, p.name, p)
    rebuild_staging(wh)


def rebuild_staging(wh: Warehouse) -> None:
    staging.build_sessions(wh)
    staging.build_work_segments(wh)
    staging.build_segment_ratings(wh)
    staging.build_session_labels(wh)
    staging.build_assignments(wh)
