"""Smoke tests of the benchmark scripts at a tiny scale: they run and print their figures (no timing asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pulse_pipeline.synth import write_corpus

from .helpers import SMALL_HOME_SETTINGS

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str, timeout: float = 300) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    # the head says why a bench gave up (its SystemExit); the tail what it was doing
    assert done.returncode == 0, done.stderr[:600] + "\n[...]\n" + done.stderr[-1400:]
    return done.stdout


def test_estimation_bench_times_the_stage():
    out = _run("bench/estimation.py", "--stage-only", "--sessions", "3000")
    assert "Estimation stage: 3,000 sessions" in out
    assert "every method of 4 comparisons" in out and "estimation stage (sum)" in out


def test_modeling_bench_runs_one_family():
    out = _run("bench/modeling.py", "--sessions", "3000", "--seeds", "1", "--families", "hist_gbm")
    assert "hist_gbm" in out and "20 features" in out


# The ingest bench rebuilds every derived table after each ingest; its smoke tests check the bench's output, not
# the models, so one cheap family and one CV seed keep them quick.
QUICK_MODELS = {"PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_CV_SEEDS": "1"}


@pytest.fixture
def quick_models(monkeypatch):
    for name, value in QUICK_MODELS.items():
        monkeypatch.setenv(name, value)


@pytest.mark.slow
def test_ingest_bench_reads_and_rebuilds(tmp_path, quick_models):
    out = _run("bench/ingest.py", "--sessions", "100", "--drops", "2", "--workdir", str(tmp_path))
    assert "pulse ingest      :" in out and "then every derived table rebuilt" in out
    assert "drop 1/2: 50 sessions" in out and "drop 2/2: 50 sessions" in out  # 100 sessions, a file per drop


@pytest.mark.slow
def test_ingest_bench_compares_small_files_with_one_jsonl_file(tmp_path, quick_models):
    out = _run("bench/ingest.py", "--sessions", "100", "--layout", "both", "--workdir", str(tmp_path))
    # 100 session files, ratings.csv and assignments.csv; or sessions.jsonl and the same two
    assert "files layout (102 files" in out and "jsonl layout (3 files" in out
    assert out.count("100 sessions,") == 2 and out.count("reconciled=True") == 2  # one summary per layout
    assert "files/jsonl: reading takes" in out


@pytest.mark.slow
def test_ingest_memory_bench_loads_a_large_message_and_quarantines_a_line_over_the_limit(tmp_path):
    out = _run(
        "bench/ingest_memory.py",
        *("--message-mb", "0.5", "--line-mb", "1", "--file-mb", "2", "--max-record-mb", "0.8"),
        *("--workdir", str(tmp_path)),
    )
    # the message case: 200 ordinary sessions and the large one, all accepted
    assert "message (0.5 MB case" in out and "201 records read, 201 accepted, 0 quarantined, reconciled=True" in out
    # the line case: its 1 MB line is over the 0.8 MB limit, quarantined with its size and the setting
    assert "line    (1 MB case" in out and "201 records read, 200 accepted, 1 quarantined, reconciled=True" in out
    assert "more than PULSE_MAX_RECORD_MB=0.8 (838,860 bytes)" in out
    assert "file    (2 MB case" in out and "MiB process tree" in out and "largest process-tree peak:" in out


def test_features_bench_times_each_part_and_the_llm_annotator_cold_and_warm(tmp_path):
    out = _run("bench/features.py", "--sessions", "300", "--llm-sessions", "4", "--workdir", str(tmp_path))
    for part in ("event features (SQL + git parsing)", "read transcripts", "heuristic annotator"):
        assert next(line for line in out.splitlines() if line.startswith(part)).endswith("sessions/s")
    # 4 sessions x the paper's two prompts (analysis, issues): 8 calls at either concurrency; the warm run asks none
    calls = [line.strip() for line in out.splitlines() if line.strip().endswith(" calls")]
    assert calls == ["8 calls", "8 calls", "0 calls"]
    assert re.search(r"speed-up from concurrency 16: \S+x \(target >= 10x\)", out)
    assert re.search(r"warm cache against a cold run at concurrency 16: \d+x faster \(target >= 50x\)", out)


def test_stack_bench_prints_each_rows_r_and_the_stacks_weights():
    out = _run(
        "bench/stack.py", "--sessions", "1500", "--seeds", "1", "--folds", "3", "--families", "hist_gbm,ordinal_logit"
    )
    r = {
        name: float(re.search(rf"^{name} +MSE \S+ ± \S+ +r (\S+)", out, re.M)[1])
        for name in ("hist_gbm", "ordinal_logit", "stack")
    }
    best = max(("hist_gbm", "ordinal_logit"), key=r.get)
    gain = re.search(r"stack r - best family \((\w+)\) r: (\S+)", out)
    assert gain[1] == best and abs(float(gain[2]) - (r["stack"] - r[best])) <= 1.5e-4  # three figures to 4 places
    folds = re.findall(r"fold (\d): b \S+  hist_gbm (\S+)  ordinal_logit (\S+)", out)
    assert [f[0] for f in folds] == ["0", "1", "2"]
    assert all(float(w) >= 0 for f in folds for w in f[1:])  # non-negative least squares
    assert "CV of 2 families x 1 seeds" in out and "peak RSS" in out


@pytest.mark.slow
def test_stack_gain_bench_pairs_the_stack_with_the_best_family_over_seeds(tmp_path):
    out = _run("bench/stack_gain.py", "--sessions", "400", "--seeds", "2", "--folds", "3", "--workdir", str(tmp_path))
    assert "400 sessions," in out and "3 folds x 2 seeds" in out
    rows = {line[:32].strip(): line.split() for line in out.splitlines() if line.startswith(("before: ", "after: "))}
    mean = {name: float(cells[-2]) for name, cells in rows.items()}
    best_before = max((n for n in mean if n.startswith("before: ") and n != "before: constant"), key=mean.get)
    pair = re.search(r"stack \(after\) - (\w+) \(before\), paired over 2 seeds: (\S+) ± \S+ .* wins (\d) of 2", out)
    assert pair[1] == best_before.removeprefix("before: ")
    # the mean of the paired differences is the difference of the means (each printed to 3 places)
    assert abs(float(pair[2]) - (mean["after: stack"] - mean[best_before])) <= 0.0015
    assert 0 <= int(pair[3]) <= 2


def test_concurrent_fits_bench_times_one_process_alone_and_two_at_once():
    out = _run("bench/concurrent_fits.py", "--sessions", "2000", "--families", "ordinal_logit", "--folds", "2")
    # simulate_sessions(2000, seed=7) rates 88 sessions; one family x 2 folds x 1 seed
    assert "88 rated sessions x 20 features" in out and "(2 folds x 1 CV seeds = 2 fits" in out
    total = next(line for line in out.splitlines() if line.startswith("total")).split()
    assert len(total) == 7  # alone, two at once and their ratio, for each of the two limits
    # each limit's verdict quotes the ratio of its "total" row
    assert f"threads=1 (default): two at once / alone = {total[3]} (" in out
    assert f"(no limit): two at once / alone = {total[6]} (" in out
    assert "one process alone, default / no limit = " in out


def test_text_signal_bench_prints_the_baselines_and_true_giveaways(tmp_path):
    import csv
    import re

    import numpy as np
    import orjson

    write_corpus(tmp_path, 200, seed=4)
    out = _run("bench/text_signal.py", "--corpus", str(tmp_path), "--labels", "1000")  # more than 200: every session
    assert "200 labelled sessions of a 200-session corpus" in out
    for prefix in ("(a) ridge on TF-IDF", "(b) random forest on 7 VADER", "(c) average of (a) and (b)"):
        line = next(line for line in out.splitlines() if line.startswith(prefix))
        assert -1.0 <= float(line.split("r = ")[1]) <= 1.0
    words = [line.split() for line in out.splitlines() if line.startswith("    ")]
    assert len(words) == 5
    # the top word's r and count, recomputed from the files: presence in the user's messages vs the label
    with open(tmp_path / "_sessions_truth.csv") as fh:
        label = {r["session_id"]: float(r["label"]) for r in csv.DictReader(fh)}
    tokens = {}
    for line in (tmp_path / "sessions-0000.jsonl").read_bytes().splitlines():
        row = orjson.loads(line)
        text = " ".join(e["args"]["content"] for e in row["history"] if e["source"] == "user")
        tokens[row["session_id"]] = set(re.findall(r"\b\w\w+\b", text.lower()))
    word, r, n = words[0][0], float(words[0][3]), int(words[0][5])
    ids = sorted(tokens)
    x = np.array([word in tokens[s] for s in ids], dtype=np.float64)
    assert n == int(x.sum())
    assert abs(r - np.corrcoef(x, [label[s] for s in ids])[0, 1]) < 1e-3
    assert all(abs(float(w[3])) <= abs(r) for w in words)


@pytest.mark.slow
def test_scale_bench_times_each_stage_and_the_small_drop(tmp_path, quick_models):
    """The backlog mode (the ratio's): the two drops in one `pulse materialize`, then the small drop's `pulse
    ingest`, the path every drop takes in the other mode."""
    out = _run("bench/scale.py", "--quick", "--backlog", "--workdir", str(tmp_path))
    assert "== 2x: 2 drops of 300 sessions, at once, one pulse materialize ==" in out
    figures = re.compile(
        r"read (\S+) s \| staging (\S+) s  features (\S+) s  modeling (\S+) s  estimates (\S+) s  report (\S+) s "
        r"\| other (\S+) s \| total (\S+) s \| peak RSS (\d+) MiB with its children \((\d+) MiB alone\)"
    )
    rows = {line.split(":")[0].strip(): figures.search(line) for line in out.splitlines() if " | total " in line}
    assert set(rows) == {"2 drops at once", "2x all drops", "that drop"} and all(rows.values())
    for match in rows.values():
        *parts, other, total, tree_rss, rss = (float(x) for x in match.groups())
        assert all(p >= 0 for p in parts) and sum(parts) <= total + 0.4  # 8 figures, each rounded to 0.1 s
        assert abs(sum(parts) + other - total) <= 0.4
        assert 0 < rss <= tree_rss
    assert rows["2 drops at once"].groups() == rows["2x all drops"].groups()  # one command: the scale's sum
    for name, match in rows.items():  # the sampled peak per stage: the run's peak is one of them
        line = next(x for x in out.splitlines() if x.strip().startswith(f"{name}:"))
        by_stage = dict(re.findall(r"(\w+) (\d+)", line.split("| by stage: ")[1]))
        assert {"read", "modeling", "estimates"} <= set(by_stage), line
        assert max(int(v) for v in by_stage.values()) <= float(match.groups()[8]), line
    # 2 x 300 sessions and 100 more, all distinct ids: each per-session stage touches the new drop's 100 only
    touched = re.search(r"per-session stages touched (\d+) of 700 sessions \(the drop holds 100\): (.+)", out)
    assert touched and int(touched[1]) == 100
    assert "staging/work_segments 100" in touched[2] and "features/event_features 100" in touched[2]
    small = re.search(  # 600: the command read both drops
        r"one 100-session drop added to the largest warehouse \(2x, 600 sessions\): refreshed in (\S+) s", out
    )
    assert small and float(small[1]) == float(rows["that drop"].groups()[7])
    assert "2x disk: PULSE_HOME " in out and "time ratio: one scale measured" in out


def test_scale_bench_gives_each_sample_to_the_stage_running_then():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from scale import stage_peaks
    finally:
        sys.path.remove(str(ROOT / "bench"))
    spans = [(10.0, 20.0, "ingest"), (30.0, 40.0, "staging"), (40.5, 60.0, "modeling"), (45.0, 50.0, "report")]
    samples = [(1.0, 300.0), (15.0, 900.0), (25.0, 700.0), (35.0, 500.0), (40.2, 800.0), (47.0, 1200.0), (70.0, 400.0)]
    # before the first derived step (30 s): read, 900; between steps (40.2 s) and after them: other, 800;
    # at 47 s modeling and report both run: the first listed, modeling
    assert stage_peaks(samples, spans) == {"read": 900.0, "staging": 500.0, "modeling": 1200.0, "other": 800.0}


def test_published_views_bench_reads_the_same_rows_both_ways(tmp_path):
    out = _run(
        "bench/published_views.py", "--rows", "20000", "--files", "2", "--repeats", "1", "--workdir", str(tmp_path)
    )
    assert "published 20,000 rows in 2 files" in out
    assert out.count("published views") == 3 and out.count("before (absolute, no check)") == 3


def _free_port_in(ports: range) -> int:
    """A free port of ``ports`` (`pulse ui` in tests keeps to a range of its own)."""
    import socket

    for port in ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip(f"no free port in {ports.start}-{ports.stop - 1}")


@pytest.mark.slow
def test_ui_freshness_bench_times_a_drop_to_the_analysts(tmp_path, small_built_home, monkeypatch):
    """The whole path under `pulse ui` (daemon, drop sensor, its run, publish sensor) on a small home: nothing runs
    for the drop already loaded, the new drop's sessions reach the published file, the UI stops on SIGINT. The
    home is the run's small built one (``conftest.small_built_home``: the bench copies it, so it stays as it is),
    with the settings it was built with."""
    for name, value in SMALL_HOME_SETTINGS.items():
        monkeypatch.setenv(name, value)
    home = small_built_home.home
    port = _free_port_in(range(3100, 3200))
    out = _run(
        "bench/ui_freshness.py",
        "--home",
        str(home),
        "--port",
        str(port),
        "--sessions",
        "20",
        "--timeout",
        "400",  # the wait ends as soon as the sessions are published; under a full suite a run took over 200 s
        timeout=600,
    )
    assert "runs started on the home as found: 0 []" in out
    assert "(ingest_drop_and_refresh)" in out and "run: " in out and "(SUCCESS)" in out
    assert "other runs started after the drop: 0 []" in out
    figure = r"^drop of 20 sessions to analysts: [\d.]+ s \((under|OVER) the 60 s target; 20 sessions visible\)"
    assert re.search(figure, out, re.M)
    assert "pulse ui stopped (exit 130)" in out


def test_hooks_bench_times_the_import_and_a_stop_call():
    out = _run("bench/hooks.py", "--runs", "1", "--turns", "20")
    assert "heavy modules imported: none" in out  # the hooks load no polars, pyarrow, DuckDB, Dagster or numpy
    assert "import of pulse hook's modules: median" in out and "transcript of 40 lines" in out


@pytest.mark.slow
def test_serve_bench_measures_both_routes_and_finds_the_acknowledged_ratings_after_a_kill(tmp_path):
    out = _run(
        "bench/serve.py",
        *("--seconds", "1", "--connections", "4", "--client-processes", "1", "--kills", "1"),
        *("--ingest", "load", "--workdir", str(tmp_path)),
    )
    for phase in ("asks     :", "ratings  :"):
        assert next(x for x in out.splitlines() if x.startswith(phase)).endswith("/s on one free core)")
    assert "1 SIGKILL + restart cycles" in out
    assert "0 missing, 0 twice, 0 not acknowledged, 0 with other stars" in out  # exit 0 says the same


@pytest.mark.slow
def test_serve_live_bench_publishes_the_acknowledged_ratings_and_says_whether_it_keeps_up(
    tmp_path, small_built_home, monkeypatch
):
    """`bench/serve.py --live` on a small home: a real `pulse serve` rolling every 2 s under paced clients, the
    daemon's drop sensor and its runs of the day's drop (fewer runs than rolls: rolls that came during a run are
    taken together), every acknowledged rating published in the end, and the lag and the verdicts printed. The
    home is the run's small built one (``conftest.small_built_home``, 40 sessions, 37 never rated: more than the
    clients ask; the bench copies it), with the settings it was built with."""
    for name, value in SMALL_HOME_SETTINGS.items():
        monkeypatch.setenv(name, value)
    home = small_built_home.home
    args = ("--minutes", "0.25", "--roll-seconds", "2", "--asks-per-second", "1", "--ratings-per-second", "0.5")
    bench = [
        "bench/serve.py",
        "--live",
        "--home",
        str(home),
        *args,
        "--drain-seconds",
        "480",  # the bench stops waiting as soon as every rating is published; under a full suite a run takes minutes
        "--workdir",
        str(tmp_path),
    ]
    # the daemon's start, 15 s of clients and the last run: more than _run's 300 s on a loaded machine
    done = subprocess.run([sys.executable, *bench], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    said = f"the bench printed:\n{out[-4000:]}"
    assert re.search(
        r"^home .*: \d+ sessions never rated nor asked; pulse serve on port \d+, rolling every 2 s", out, re.M
    )
    found = re.search(
        r"^clients stopped: (\d+) asks \(\d+ asked to rate\), (\d+) ratings acknowledged, 0 answers", out, re.M
    )
    asks, ratings = int(found.group(1)), int(found.group(2))
    assert asks >= 12 and ratings >= 6  # 15 s at one ask and half a rating a second
    rolls = len(list((tmp_path / "home" / "drops").glob("serve-*/roll-*.jsonl")))
    runs = int(re.search(r"^runs of the day's drop: (\d+)$", out, re.M).group(1))
    assert 1 <= runs < rolls, said
    published = [int(n) for n in re.findall(r"published: \d+ new ratings \((\d+) in all\)", out)]
    assert published and published[-1] == ratings, said  # every acknowledged rating, each once (ids are the keys)
    assert re.search(r"longest wait of a rating: [\d.]+ s \((under|OVER) the 180 s target\)", out)
    assert "ratings left unpublished: 0" in out and re.search(r"^keeps up: (yes|NO|not told)", out, re.M)


def test_user_features_bench_prints_both_densities_and_the_real_corpus_check(tmp_path):
    import json
    from dataclasses import replace

    import numpy as np

    from pulse_pipeline.synth.model import GeneratorParams, simulate_sessions

    # a ConvAI2-shaped folder: 4 users, 40 dialogues, 30 rated (10 unrated), the human is participant1
    rng = np.random.default_rng(0)
    for name in ("data_intermediate.json", "data_volunteers.json"):
        dialogues = [
            {
                "dialog": [
                    {"sender": "participant1", "text": str(rng.choice(["hi there", "you are great", "bad bot"]))},
                    {"sender": "participant2", "text": "hello"},
                ],
                "eval_score": int(1 + i % 5) if i < 15 else None,
                "participant1_id": {"class": "User", "user_id": f"User {i % 4}"},
                "participant2_id": {"class": "Bot", "user_id": f"Bot {i % 2}"},
            }
            for i in range(20)
        ]
        (tmp_path / name).write_text(json.dumps(dialogues))
    args = ("--sessions", "3000", "--replications", "2", "--fold-seeds", "2", "--convai2", str(tmp_path))
    out = _run("bench/user_features.py", *args)
    assert "ConvAI2 volunteers: 30 rated dialogues with a human message, 10 unrated, 4 raters (4 rated twice" in out
    assert re.search(r"hist_gbm +r without -?\d\.\d{3} +with -?\d\.\d{3} +gain", out)
    for density, per_user in (("paper", 36_000 / 15_000), ("heavy", 40.0)):
        line = next(line for line in out.splitlines() if line.startswith(density))
        params = replace(GeneratorParams(), users_per_session=1 / per_user)
        rated = [simulate_sessions(3000, seed=s, scenario="random", params=params).rated.sum() for s in (0, 1)]
        assert line.split()[2] == f"{np.mean(rated):.0f}"  # the ratings per replication, from the generator
        assert "->" in line


def test_recalibration_bench_prints_each_familys_widths_raw_and_calibrated():
    out = _run("bench/recalibration.py", "--sessions", "1500", "--draws", "1", "--families", "ordinal_logit")
    rows = re.findall(r"^ordinal_logit +0\.\d\d +[01]/1 +([\d.]+)/[\d.]+ ([\d.]+) ([\d.]+)/[\d.]+ ([\d.]+)", out, re.M)
    assert len(rows) == 3, out  # one row per rated share
    assert all(float(cell) > 0 for row in rows for cell in row)


def test_otel_export_bench_reads_its_export():
    out = _run("bench/otel_export.py", "--traces", "200")
    # 200 traces of 4 spans, 5 traces a conversation; per trace a user message, 2 chat calls, a tool call and its
    # result, the root: 6 events
    assert "OTLP export: 800 spans, 200 traces" in out
    assert "40 sessions, 1,200 events" in out and "peak memory:" in out


def test_langfuse_export_bench_reads_each_file_kind(tmp_path):
    out = _run(
        "bench/langfuse_export.py", "--observations", "400", "--formats", "parquet", "jsonl", "--workdir", str(tmp_path)
    )
    assert "100 traces, 400 observations" in out
    assert out.count("read:") == 2 and out.count("reconciled=True") == 2
    assert "orjson parse alone" in out
