"""Issue 39: one drop of every format teams already keep, read in one ingest.

The drop holds an OpenTelemetry export (GenAI, OpenLLMetry and OpenInference spans, with HUMAN and LLM
annotations), Cline / Roo Code / Kilo Code task folders, an aider chat history, Gemini CLI chats, an OpenCode
database and a Langfuse blob-storage export (``synth/langfuse_export.py``, with its users' ``user-feedback`` scores
and judges' EVAL scores), each the fixture its own test checks against the tool's source. Read together, every
format gives exactly the sessions, events and quarantine rows it gives read alone (no reader takes another's files,
none is lost), the drop reconciles, and the whole pipeline runs on it without failing a stage: a drop of only these
formats, with a few ratings from scores, reaches the models and the report.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline import tables
from pulse_pipeline.ingest.load import load_drop
from pulse_pipeline.synth.langfuse_export import write_export
from pulse_pipeline.warehouse import Warehouse

from .helpers import assert_reconciled
from .opencode_fixture import write_database

FIXTURES = Path(__file__).parent / "fixtures"
LANGFUSE_TRACES = 120


def _parts(root: Path) -> dict[str, Path]:
    """Each format's part in a folder of its own under ``root``."""
    parts = {
        "otel": FIXTURES / "otel",
        "cline": FIXTURES / "cline" / "globalStorage",
        "aider": FIXTURES / "aider" / "myrepo",
        "gemini_cli": FIXTURES / "gemini_cli",
    }
    made = {}
    for name, source in parts.items():
        shutil.copytree(source, root / name)
        made[name] = root / name
    (root / "opencode").mkdir()
    write_database(root / "opencode" / "opencode.db")
    made["opencode"] = root / "opencode"
    write_export(root / "langfuse", LANGFUSE_TRACES, "jsonl", seed=3)
    made["langfuse"] = root / "langfuse"
    return made


def _read(path: Path) -> tuple[dict[str, tuple[int, int]], int, int, int]:
    """A drop read alone into a new warehouse: sessions and events by source format, quarantine rows, ratings
    and eval scores."""
    wh = Warehouse(duckdb.connect())
    try:
        load_drop(wh, path.name, path)
        assert_reconciled(wh, path.name)
        by_format = {
            fmt: (n, events)
            for fmt, n, events in wh.con.execute(
                f"SELECT source_format, count(*), sum(n_events) FROM {tables.SESSIONS.qualified} GROUP BY 1"
            ).fetchall()
        }
        (quarantined,) = wh.con.execute(f"SELECT count(*) FROM {tables.QUARANTINE.qualified}").fetchone()
        (ratings,) = wh.con.execute(f"SELECT count(*) FROM {tables.RATINGS.qualified}").fetchone()
        (evals,) = wh.con.execute(f"SELECT count(*) FROM {tables.EVAL_SCORES.qualified}").fetchone()
    finally:
        wh.con.close()
    return by_format, quarantined, ratings, evals


def test_every_format_read_in_one_drop_gives_what_each_gives_alone(tmp_path):
    parts = _parts(tmp_path / "everything")
    alone = {name: _read(path) for name, path in parts.items()}
    together, quarantined, ratings, evals = _read(tmp_path / "everything")
    want: dict[str, tuple[int, int]] = {}
    for by_format, *_ in alone.values():
        for fmt, (n, events) in by_format.items():
            assert fmt not in want, f"{fmt} came from two parts"
            want[fmt] = (n, events)
    assert together == want
    assert quarantined == sum(q for _, q, _, _ in alone.values())
    assert (ratings, evals) == (sum(r for *_, r, _ in alone.values()), sum(e for *_, e in alone.values()))
    # each reader found its own: the formats the issue names, each with sessions
    expected = {"otel", "cline", "roo_code", "kilo_code", "aider", "gemini_cli", "opencode", "langfuse"}
    assert expected <= set(together) and all(n > 0 for n, _ in together.values())
    assert ratings > 10 and evals > 0  # the Langfuse users' scores and the OTel HUMAN annotations


@pytest.mark.slow
def test_a_drop_of_only_these_formats_runs_every_stage(pulse_home, tmp_path, monkeypatch):
    """`pulse ingest` of the mixed drop: every stage runs (none fails), the labels come from scores only, and the
    report is written; with arms declared from a session field (the source format) the comparison is marked
    observational."""
    from pulse_pipeline.runs import ingest

    monkeypatch.setenv("PULSE_CV_SEEDS", "2")
    monkeypatch.setenv("PULSE_MODEL_FAMILIES", "lightgbm,text")
    drop = tmp_path / "everything"
    _parts(drop)
    (pulse_home.root / "experiments.toml").write_text(
        '[experiments.tool]\narms_from = "source_format"\narms = ["langfuse", "otel"]\ncontrol = "langfuse"\n'
    )
    summary = ingest(pulse_home, drop, say=lambda _: None)
    assert summary.reconciled and summary.sessions > LANGFUSE_TRACES / 10
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        scales = dict(con.execute("SELECT scale, count(*) FROM staging.session_labels GROUP BY 1").fetchall())
        predicted = con.execute("SELECT count(*) FROM modeling.predictions").fetchone()[0]
        staged = con.execute("SELECT count(*) FROM staging.sessions").fetchone()[0]
        designs = {d for (d,) in con.execute("SELECT DISTINCT design FROM estimates.experiment_effects").fetchall()}
    assert sum(scales.values()) >= 10  # enough labels to cross-validate, all from scores
    assert predicted == staged  # a cross-fit prediction for every session of every format
    assert designs <= {"observational"}
    assert (pulse_home.root / "report" / "index.html").exists()
