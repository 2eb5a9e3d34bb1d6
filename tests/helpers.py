"""Helpers that several test modules import. Real trajectories are read from ../shared/samples (never copied
into the repo); tests that need them are skipped, with the reason, where the folder is absent."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from pulse_pipeline import staging
from pulse_pipeline.ingest.load import load_drop, reconcile_drop
from pulse_pipeline.paths import PROJECT_ROOT
from pulse_pipeline.warehouse import Warehouse

SAMPLES = PROJECT_ROOT.parent / "shared" / "samples"
FIXTURES = Path(__file__).parent / "fixtures"

# The small built home (conftest.small_built_home): what several modules need (a home the pipeline made, to copy
# and then read, move, write), built once per test session instead of once per module. Each build is a whole
# `pulse ingest` (every stage, ~60-80 s on the shared 2-core machine); a copy of the folder takes under a second.
SMALL_HOME_SETTINGS = {
    "PULSE_CV_SEEDS": "1",
    "PULSE_MODEL_FAMILIES": "ordinal_logit",
    "PULSE_INGEST_WORKERS": "1",
    "PULSE_LAKE_CATALOG": "sqlite",
}
SMALL_HOME_SESSIONS, SMALL_HOME_SEED = 40, 1

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
    staging.build_replaced_sessions(wh)
    staging.build_work_segments(wh)
    staging.build_segment_ratings(wh)
    staging.build_session_labels(wh)
    staging.build_assignments(wh)


def rows(wh, sql: str, params: list | None = None) -> list[tuple]:
    return wh.con.execute(sql, params or []).fetchall()


def session(wh) -> dict:
    """The one session row of the warehouse, with its metadata parsed."""
    (row,) = wh.frame("SELECT * FROM raw.sessions").to_dicts()
    row["metadata"] = orjson.loads(row["metadata_json"])
    return row


def events(wh, columns: str) -> list[tuple]:
    return rows(wh, f"SELECT {columns} FROM raw.events ORDER BY seq")


def assert_reconciled(wh, *drop_ids: str) -> None:
    for drop_id in drop_ids:
        ok, facts = reconcile_drop(wh, drop_id)
        assert ok, (drop_id, facts)
