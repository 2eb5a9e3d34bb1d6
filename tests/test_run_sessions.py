"""The assigned-sessions frame is read once a run (``defs/estimates/sessions.py``), and only where that is safe:
every asset that takes it depends on every table it is read from."""

from __future__ import annotations

import inspect
import re

import dagster as dg
import polars as pl

from pulse_pipeline import tables
from pulse_pipeline.definitions import build_definitions
from pulse_pipeline.defs.estimates.sessions import SESSIONS_DEPS, run_sessions
from pulse_pipeline.defs.specs import key
from pulse_pipeline.estimates.experiments import ArmsFrom
from pulse_pipeline.estimates.sessions import KEYS, assigned_sessions


def _dep_key(d) -> dg.AssetKey:
    return key(d) if isinstance(d, tables.Table) else d


class _RecordingWarehouse:
    """Answers ``assigned_sessions``' queries with nothing, keeping the SQL."""

    def __init__(self) -> None:
        self.sql: list[str] = []
        self.con = self

    def execute(self, sql: str, params=None):
        self.sql.append(sql)
        return self

    def fetchone(self):
        return (1,)  # features.session_features exists

    def fetchall(self):
        return []  # no experiment has assignments

    def register(self, name, frame) -> None:
        pass

    def unregister(self, name) -> None:
        pass

    def frame(self, sql: str, params=None) -> pl.DataFrame:
        self.sql.append(sql)
        return pl.DataFrame(schema={"session_id": pl.Utf8, "user_id": pl.Utf8, "value": pl.Utf8})


def test_the_deps_name_every_table_the_frame_reads():
    recorder = _RecordingWarehouse()
    assigned_sessions(recorder, arms_from={"model": ArmsFrom("metadata.model")})  # arms from a session field too
    read = {t for sql in recorder.sql for t in re.findall(r"(?:FROM|JOIN)\s+([a-z_]+\.[a-z_]+)", sql)}
    read.discard("information_schema.tables")  # whether features.session_features exists: DuckDB's catalog
    assert read == {".".join(_dep_key(d).path) for d in SESSIONS_DEPS}


def test_every_asset_that_takes_the_frame_depends_on_those_tables(pulse_home):
    graph = build_definitions(pulse_home).resolve_asset_graph()
    readers = []
    for asset in graph.assets_defs:
        if asset.is_executable and "run_sessions(" in inspect.getsource(asset.op.compute_fn.decorated_fn):
            readers.append(asset.op.name)
            for k in asset.keys:
                missing = {_dep_key(d) for d in SESSIONS_DEPS} - set(graph.get(k).parent_keys)
                assert not missing, f"{k.to_user_string()} reads the run's sessions but does not depend on {missing}"
    assert sorted(readers) == [  # the check of effect_history (no keys: it runs after its asset) among them
        "benchmark_tables",
        "estimates__ask_allocation",
        "estimates__effect_history",
        "estimates__effect_history_history_reconciles",
        "estimates__experiment_effects",
        "estimates__feature_comparisons",
        "estimates__guardrails",
        "estimates__guardrails_guardrails_reconcile",
        "estimates__label_shift",
        "estimates__power",
        "estimates__segment_effects",
    ]


def _assign(wh, *rows: tuple[str, str, str]) -> None:
    wh.append(
        tables.STAGING_ASSIGNMENTS,
        pl.DataFrame(
            [(s, e, v, "u1", "session_metadata") for s, e, v in rows],
            schema=tables.STAGING_ASSIGNMENTS.column_names,
            orient="row",
        ),
    )


def test_a_run_reads_the_frame_once_and_the_next_run_again(wh):
    _assign(wh, ("s1", "exp", "a"), ("s2", "exp", "b"))
    first = run_sessions("run-1", "home-a", wh, {})
    assert first["session_id"].to_list() == ["s1", "s2"]
    _assign(wh, ("s3", "exp", "a"))  # written after the run's first read: a run never does this to its inputs
    assert run_sessions("run-1", "home-a", wh, {}) is first
    keys_only = run_sessions("run-1", "home-a", wh, {}, with_features=False)
    assert keys_only.columns == list(KEYS) and keys_only.equals(first.select(KEYS))
    assert run_sessions("run-2", "home-a", wh, {})["session_id"].to_list() == ["s1", "s2", "s3"]
    assert run_sessions("run-2", "home-b", wh, {}) is not run_sessions("run-2", "home-a", wh, {})  # another warehouse
    # no frame kept for a run yet: the keys are read on their own, and not kept
    _assign(wh, ("s4", "exp", "b"))
    assert run_sessions("run-3", "home-a", wh, {}, with_features=False)["session_id"].to_list()[-1] == "s4"
    assert run_sessions("run-3", "home-a", wh, {})["session_id"].len() == 4
