"""Progress bars: the callbacks count the work done; bars are drawn only on a terminal, never under --json."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline import cli, progress, tables
from pulse_pipeline.ingest import drop as drop_module
from pulse_pipeline.ingest.load import load_drop
from pulse_pipeline.studies.coverage import validate
from pulse_pipeline.synth import write_corpus
from pulse_pipeline.warehouse import Warehouse

N_SESSIONS = 30


class FakeTTY(io.StringIO):
    """A stream that says it is a terminal, and keeps what is written to it."""

    def isatty(self) -> bool:
        return True


class Recorder:
    """An advance callback that keeps its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, str | None]] = []

    def __call__(self, done: int, total: int, note: str | None = None) -> None:
        self.calls.append((done, total, note))

    @property
    def done(self) -> int:
        return sum(c[0] for c in self.calls)

    @property
    def totals(self) -> set[int]:
        return {c[1] for c in self.calls}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Recorder]:
    recorder = Recorder()
    out = tmp_path_factory.mktemp("corpus") / "corpus"
    write_corpus(out, N_SESSIONS, seed=4, sessions_per_file=10, advance=recorder)
    return out, recorder


def test_synth_reports_each_session_once(corpus: tuple[Path, Recorder]) -> None:
    _, recorder = corpus
    assert recorder.calls == [(1, N_SESSIONS, None)] * N_SESSIONS


def _drop_bytes(folder: Path) -> int:
    """What a load reads: every file but the sidecars (names starting with _ or .)."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.name.startswith(("_", ".")))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_load_reports_every_byte_of_the_drop(
    corpus: tuple[Path, Recorder], monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    path, _ = corpus
    monkeypatch.setattr(drop_module, "SPLIT_BYTES", 100_000)  # several reads, split files: counted in the parent
    monkeypatch.setenv("PULSE_INGEST_WORKERS", workers)
    recorder = Recorder()
    load_drop(Warehouse(duckdb.connect()), "d", path, advance=recorder)
    expected = _drop_bytes(path)
    assert recorder.done == expected
    assert recorder.totals == {expected}
    assert len(recorder.calls) > 3  # it advanced as it went, not once at the end


def test_validation_reports_each_replication() -> None:
    recorder = Recorder()
    validate(2, ["random", "self_selected"], seed=1, workers=1, n_per_arm=200, advance=recorder)
    assert recorder.calls == [(1, 4, None)] * 4  # 2 scenarios x 2 replications


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    with progress.showing(True), progress.bar("sessions") as advance:
        assert advance is None
        print("a log line", file=sys.stderr)
    assert pipe.getvalue() == "a log line\n"


def test_no_bar_when_not_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = FakeTTY()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress.showing(False), progress.bar("sessions") as advance:
        assert advance is None
    assert terminal.getvalue() == ""


def test_bar_on_a_terminal_shows_count_and_rate_with_log_lines_above_it(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = FakeTTY()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress.showing(True), progress.bar("sessions", unit="session") as advance:
        for i in range(5):
            advance(1, 5, f"s{i}")
            if i == 2:
                print("a log line", file=sys.stderr)
    shown = terminal.getvalue()
    last = shown.replace("\r", "\n").split("\n")
    assert any("5/5" in line and "session/s" in line and "s4" in line for line in last), shown
    assert "\na log line\n" in shown.replace("\r", "\n")  # on a line of its own, not glued to the bar
    # nothing leaks out of the command: stderr is back, and an asset run later gets no bar
    assert sys.stderr is terminal
    with progress.bar("later") as advance:
        assert advance is None


def test_showing_ends_even_when_the_command_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = FakeTTY()
    monkeypatch.setattr(sys, "stderr", terminal)
    with pytest.raises(RuntimeError), progress.showing(True):
        raise RuntimeError("boom")
    assert sys.stderr is terminal
    with progress.bar("later") as advance:
        assert advance is None


@pytest.fixture(scope="module")
def ingested(corpus: tuple[Path, Recorder], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """`pulse ingest --json` of the corpus into a new PULSE_HOME, stderr a terminal: what it printed."""
    path, _ = corpus
    home = tmp_path_factory.mktemp("home")
    out, err = io.StringIO(), FakeTTY()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PULSE_HOME", str(home))
        mp.setenv("DAGSTER_HOME", str(home / "dagster"))
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        code = cli.main(["ingest", str(path), "--json"])
        yield {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(), "home": home, "mp": mp}


@pytest.mark.slow  # the ingest rebuilds every derived table: ~35 s
def test_ingest_json_prints_json_and_no_bar(ingested: dict) -> None:
    assert ingested["code"] == 0
    summary = json.loads(ingested["stdout"])
    assert summary["sessions"] == N_SESSIONS and summary["reconciled"] is True
    for stream in ("stdout", "stderr"):
        text = ingested[stream]
        assert "\r" not in text and "asset/s" not in text and "B/s" not in text, stream


@pytest.mark.slow  # shares the ingest above
def test_materialize_on_a_terminal_counts_the_assets_materialized(ingested: dict) -> None:
    out, err = io.StringIO(), FakeTTY()
    mp: pytest.MonkeyPatch = ingested["mp"]
    mp.setattr(sys, "stdout", out)
    mp.setattr(sys, "stderr", err)
    code = cli.main(["materialize", "--select", "group:ingest"])
    shown = err.getvalue().replace("\r", "\n")
    raw = len(tables.RAW_TABLES)  # one drop: each raw table is one asset materialized
    assert code == 0 and f"materialized {raw} assets" in out.getvalue()
    assert any(f"{raw}/{raw}" in line and "asset/s" in line for line in shown.split("\n")), shown
    assert any(line.startswith("reading corpus") and "B/s" in line for line in shown.split("\n")), shown
