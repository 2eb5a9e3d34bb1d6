"""Smoke test of bench/real_corpus.py on a fixture in the shape of ConvAI2's human evaluation files (no timing).

The fixture (tests/fixtures/convai2_like, written for this test) holds 48 dialogues: 44 rated with a human message
(12 + 12 on two hackathon days, 16 in the volunteers' final round with two bots, 4 intermediate), one rated without
a human line and two unrated, which the bench leaves out. Its truths, by hand from the stars written there:
day 2018-07-05 (mean 3.0) - day 2018-07-04 (mean 2.0) = 1 star = 0.25; bot009 (32 + 5 over 9 dialogues) - bot002
(20 + 1 over 9) = 16/9 stars = 0.4444 on the label scale.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "convai2_like"
# the bench's figures, not the models', are under test: one cheap family and one CV seed keep it quick
QUICK_MODELS = {"PULSE_MODEL_FAMILIES": "ordinal_logit,text", "PULSE_CV_SEEDS": "1"}


@pytest.mark.slow
def test_real_corpus_bench_prints_r_baselines_widths_and_coverage(tmp_path, monkeypatch):
    for name, value in QUICK_MODELS.items():
        monkeypatch.setenv(name, value)
    args = ("--corpus", str(FIXTURE), "--fractions", "0.5", "--counts", "", "--seeds", "1", "--workdir", str(tmp_path))
    done = subprocess.run(
        [sys.executable, "bench/real_corpus.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout

    assert "44 sessions; stars 1: 12 2: 8 3: 9 4: 9 5: 6; mean 2.750" in out
    assert "export_2018-07-04_train         14 dialogues,    13 rated,    12 with a human message (kept)" in out
    assert "truth hackathon_day/2018-07-05: +0.2500 (label scale), +1.000 stars" in out
    assert "truth final_bot/bot009: +0.4444 (label scale), +1.778 stars" in out
    # every session and its 42 assignments (24 days, 18 finalists' dialogues) read; nothing quarantined
    base = re.search(
        r"pulse ingest: drop convai2-sessions: (\d+) sessions, .* (\d+) assignments, (\d+) quarantined", out
    )
    assert base and base.groups() == ("44", "42", "0")
    # half the sessions rated, each with one rating that joins its session
    assert "== 50% rated, seed 0: 22 rated sessions" in out
    assert re.search(r"pulse ingest: drop ratings-50pct-rated-seed0: 0 sessions, .* 22 ratings, .* 0 quarantined", out)

    chosen = re.search(r"chosen model (\w+): out-of-fold r (\S+) \(cv_metrics.*\), (\S+) \(seed-42 cross-fit\)", out)
    assert chosen and chosen[1] in ("ordinal_logit", "text", "constant")
    base_r = dict(re.findall(r"(tfidf_ridge|vader_ridge|average) (-?\d\.\d{3})", out.split("baselines on")[1]))
    assert set(base_r) == {"tfidf_ridge", "vader_ridge", "average"}
    assert all(-1 <= float(r) <= 1 for r in base_r.values())
    gap = re.search(r"chosen \(seed 42\) - best baseline \((\w+)\): (\S+)", out)
    assert gap[1] == max(base_r, key=lambda b: float(base_r[b]))
    assert abs(float(gap[2]) - (float(chosen[3]) - float(base_r[gap[1]]))) <= 0.0015  # three figures to 3 places

    # one row per comparison, each method's width / naive and whether it covered the truth
    for comparison in ("final_bot/bot009", "hackathon_day/2018-07-05"):
        row = next(line for line in out.splitlines() if line.startswith(comparison))
        cells = re.findall(r"(\d+\.\d\d)x (ok|MISS|\?)", row)
        assert len(cells) >= 4, row  # naive (Welch, bootstrap), PPI++, cross-PPI, AIPW at least
    coverage = dict(re.findall(r"^(naive_welch|ppi|aipw)\s+2\s+.*\s(\d/2) = \d+%$", out, re.M))
    assert set(coverage) == {"naive_welch", "ppi", "aipw"}, out

    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results) == 1 and results[0]["n_rated"] == 22
    assert sorted({c["truth"] for c in results[0]["comparisons"]}) == pytest.approx([0.25, 16 / 36])
