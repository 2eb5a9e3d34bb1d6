"""The corpus ``pulse demo`` writes: the generator at a size and rating rate that fill every table of the warehouse.

Why not the paper's ~5 % rated: the demo is a tour of every table, not a benchmark. The paper's headline analysis
(Table 3: per development cluster, the rating difference between two LLMs against a benchmark difference) needs
``PULSE_BENCHMARK_MIN_RATINGS`` (35) ratings per arm in each cluster. At 5 % of 4 000 sessions the llm-backbone
arms get about 35 rated sessions each in all, so no cluster qualifies. Rating more sessions everywhere would do, but
every rated session costs cross-validation time (five seeds, six model families), so the demo, and only the demo,
spends its ratings where the benchmark comparison needs them:

- 15 % of sessions rated (still self-selected: chattier sessions rate more, as in the paper);
- llm-backbone, the comparison the shipped ``benchmarks.csv`` covers (gpt-5 vs claude-4-sonnet), gets two thirds of
  the sessions (``experiment_weights`` 4:1:1);
- more "Fix Failing Continuous Integration" (30 % instead of 8 %) and "Perform Deployments" (15 % instead of 5 %)
  tasks, the other tasks keeping their proportions: the heuristic annotator puts ~64 % of the first in the
  continuous integration cluster and ~82 % of the second in the administrative one, so that besides the python and
  testing clusters these two reach 35 ratings per arm (about 600 rated sessions in all, ~400 in llm-backbone).

The generator's arm effects do not depend on the cluster, so the demo's true ΔH is the same in every cluster and the
correlation with ΔB it shows is noise around 0: the table is there to be read, not a finding.

Besides the sessions, ratings and assignments (``corpus.write_corpus``), the demo's drop holds:

- asks: sessions that start in the last quarter of the time span log every widget shown (``ask_log_share``);
- a few broken records (``corpus.MALFORMED``), so ``raw.quarantine`` shows what quarantine does;
- ``_human_labels.csv``: the true task type of a sample of sessions, the format ``features.agreement`` reads, as a
  stand-in for human annotators (``features.annotator_agreement`` measures the heuristic annotator against it).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from .. import tables
from .corpus import MALFORMED, CorpusSummary, write_corpus
from .model import TASK_TYPES, GeneratorParams

DEMO_SESSIONS = 4000
DEMO_RATED_FRACTION = 0.15
DEMO_ASK_LOG_SHARE = 0.25
DEMO_MALFORMED = len(MALFORMED)  # one of each kind
DEMO_HUMAN_LABELS = 400  # sessions the stand-in human annotators label
DEMO_TASK_SHARES = {"Fix Failing Continuous Integration": 0.30, "Perform Deployments": 0.15}
HUMAN_LABELS_FILE = "_human_labels.csv"  # in the drop; "_": not data, the ingest skips it


def demo_params() -> GeneratorParams:
    """The generator's defaults, with llm-backbone four times as likely as each other experiment and more
    continuous-integration and deployment tasks (see the module docstring)."""
    probs = dict(zip(TASK_TYPES, GeneratorParams().task_probs, strict=True))
    others = 1.0 - sum(DEMO_TASK_SHARES.values())
    rest = sum(p for t, p in probs.items() if t not in DEMO_TASK_SHARES)
    shares = {t: DEMO_TASK_SHARES.get(t, others * p / rest) for t, p in probs.items()}
    return GeneratorParams(experiment_weights=(4.0, 1.0, 1.0), task_probs=tuple(shares.values()))


def write_human_labels(drop: Path, n: int = DEMO_HUMAN_LABELS, seed: int = 0) -> Path:
    """``_human_labels.csv`` in ``drop``: session_id and the generator's true task_type for ``n`` sessions drawn
    without replacement (seeded), from the drop's ``_sessions_truth.csv``."""
    truth = pl.read_csv(drop / "_sessions_truth.csv", columns=["session_id", "task_type"])
    rows = np.sort(np.random.default_rng(seed).choice(truth.height, size=min(n, truth.height), replace=False))
    path = drop / HUMAN_LABELS_FILE
    truth[rows].write_csv(path)
    return path


def write_demo_corpus(
    drop: Path, n_sessions: int = DEMO_SESSIONS, seed: int = 0, advance: Callable[[int, int], None] | None = None
) -> CorpusSummary:
    """The demo's drop (see the module docstring); ``advance`` is ``write_corpus``'s progress callback."""
    summary = write_corpus(
        drop,
        n_sessions,
        seed=seed,
        rated_fraction=DEMO_RATED_FRACTION,
        params=demo_params(),
        advance=advance,
        ask_log_share=DEMO_ASK_LOG_SHARE,
        malformed=DEMO_MALFORMED,
    )
    write_human_labels(drop, seed=seed)
    return summary


def install_human_labels(drop: Path, home_file: Path) -> str:
    """Copy the drop's stand-in human labels to ``home_file`` (``PULSE_HOME/human_labels.csv``, where the annotator
    looks) unless a file is there already; returns one line saying which file the agreement uses."""
    if home_file.exists():
        return f"human labels: {home_file} (already there, kept)"
    shutil.copyfile(drop / HUMAN_LABELS_FILE, home_file)
    return f"human labels: {home_file} (true task types of {DEMO_HUMAN_LABELS} demo sessions, standing in for people)"


DEMO_VALIDATION = {"replications": 5, "seed": 0, "workers": 1, "scenarios": ["random", "self_selected"]}
"""``estimates.coverage_validation``'s config in the demo: a small run (seconds), not ``pulse validate``'s 500."""


def demo_notes(llm_configured: bool) -> list[str]:
    """What ``pulse demo`` prints about its own choices, and why the LLM tables are empty when no LLM is set."""
    notes = [
        f"the demo rates {DEMO_RATED_FRACTION * 100:.0f} % of sessions (the paper saw ~5 %), gives llm-backbone two "
        "thirds of them and draws more CI and deployment tasks, so that four development clusters reach 35 ratings "
        "per arm for the benchmark correlation (synth/demo.py says why)",
        f"coverage validation: a small run ({DEMO_VALIDATION['replications']} replications each of "
        f"{' and '.join(DEMO_VALIDATION['scenarios'])}: its coverages are rough); `pulse validate` runs the full one",
    ]
    if not llm_configured:
        notes.append(
            f"{tables.JUDGE_SCORES.qualified} and {tables.LLM_CACHE.qualified} stay empty:"
            " no LLM is configured (PULSE_LLM_MODEL)"
        )
    return notes
