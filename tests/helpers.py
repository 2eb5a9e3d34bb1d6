"""Helpers that several test modules import. Real trajectories are read from ../shared/samples (never copied
into the repo); tests that need them are skipped, with the reason, where the folder is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulse_pipeline import staging
from pulse_pipeline.ingest.load import load_drop
from pulse_pipeline.paths import PROJECT_ROOT
from pulse_pipeline.warehouse import Warehouse

SAMPLES = PROJECT_ROOT.parent / "shared" / "samples"
FIXTURES = Path(__file__).parent / "fixtures"

needs_samples = pytest.mark.skipif(
    not SAMPLES.is_dir(),
    reason=f"real trajectories not found at {SAMPLES} (they live beside the repo, in shared/samples)",
)


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
