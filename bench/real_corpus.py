"""PULSE on real human ratings: the ConvAI2 dialogues, rated 1-5 by the people who had them (issue 37).

The corpus is not in the repository (other people's text): name its folder with ``--corpus``. It is the ConvAI2
competition's human evaluation data (github.com/DeepPavlov/convai, ``2018/data/*.json``; no license stated, released
by the organizers for research): people chatted with competing chatbots and rated each dialogue 1-5
(``eval_score``). The files are JSON arrays of ``{dialog: [{sender, text}], eval_score, [participant1_id,
participant2_id]}``; ``participant1`` is the human. ``/work/wt/CORPUS37.md`` says where a copy is and what it holds.

What the bench does, for each sampling setting (a fraction of the dialogues, or a count) and seed:

1. the corpus as a PULSE drop, written once under ``--workdir``: each rated dialogue with at least one human
   message is a session in OpenHands evaluation output (``{instance_id, instruction, user_id, history}``; the
   human's lines user messages, the bot's agent messages that wait for a reply), its user the participant's id
   where the corpus has one (``data_volunteers``, ``data_intermediate``), else a stable id of its own; assignments
   from the natural splits, in ``experiments.toml``:

   - ``hackathon_day``: the paid Toloka workers' dialogues by day of the DeepHack.Chat hackathon (files
     ``export_2018-07-0D_train.json``), control the first day;
   - ``final_bot``: the volunteers' dialogues (``data_volunteers``, ``data_intermediate``) with the bots of the final
     round (the bots of ``data_volunteers``), control the first bot by name;

2. the truth of each comparison: the difference of the full corpus's mean ratings between the arms, on the label
   scale ``(stars - 1) / 4`` (``stars.py``);
3. ratings kept for a simple random sample of the sessions (the rest unrated), as a drop of their own, ingested
   into a copy of a home that already holds the sessions (``pulse ingest``: every stage runs, as for a user);
4. read back from the published warehouse: the chosen model and its out-of-fold r (``modeling.cv_metrics``, mean over
   the CV seeds), its seed-42 cross-fit r (``modeling.predictions``), and on the same rated sessions and the same
   folds (``modeling.predictions.fold``) the obvious baselines: (a) a ridge (alpha 1) on TF-IDF word 1-2 grams of
   the user's messages, (b) a ridge (alpha 1, standardized) on VADER's compound, pos, neg and neu of the user's
   messages, (c) the plain average of (a) and (b); each method's interval width over the naive (Welch) width
   (``estimates.experiment_effects.width_vs_naive``) and whether its interval covered the truth.

The summary over runs, per setting: mean r of the chosen model against the best baseline (and the worst run's gap),
the worst width / naive per method (all comparisons, and those not flagged and valid), and each method's coverage.
Everything is also written to ``<workdir>/results.json``.

    .venv/bin/python bench/real_corpus.py --corpus /work/corpus37/convai2             # 5 settings x 3 seeds
    .venv/bin/python bench/real_corpus.py --corpus /work/corpus37/convai2 --quick     # ~230 and ~1 000, one seed
    .venv/bin/python bench/real_corpus.py --corpus DIR --fractions 0.1 --counts "" --seeds 2

The pipeline's own settings apply (``PULSE_MODEL_FAMILIES``, ``PULSE_CV_SEEDS``, ...): set them in the environment
to measure a variant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

ROOT = Path(__file__).resolve().parent.parent
PULSE = [sys.executable, "-m", "pulse_pipeline.cli"]

DAY_FILE = re.compile(r"^export_(\d{4}-\d{2}-\d{2})_train$")
"""The Toloka workers' dialogues of one hackathon day (the arm is the day)."""
FINAL_ROUND = "data_volunteers"
"""The volunteers' final ("wild") round: its bots are the finalists."""
VOLUNTEER_FILES = ("data_volunteers", "data_intermediate")
"""The files whose dialogues carry real user and bot ids."""
HUMAN = "participant1"
DAY_EXPERIMENT = "hackathon_day"
BOT_EXPERIMENT = "final_bot"
METHOD_ORDER = ("naive_welch", "naive_bootstrap", "ppi", "crossppi", "aipw", "ppi_insample")
BASELINES = ("tfidf_ridge", "vader_ridge", "average")


@dataclass(frozen=True)
class Dialogue:
    """One rated dialogue of the corpus, as the bench uses it."""

    session_id: str
    source: str  # the file's stem
    stars: int
    user_id: str
    bot: str | None
    start: datetime
    turns: tuple[tuple[bool, str], ...]  # (said by the human, text), in order

    @property
    def user_text(self) -> list[str]:
        return [text for human, text in self.turns if human]


@dataclass
class Corpus:
    dialogues: list[Dialogue]
    assignments: dict[str, dict[str, str]]  # experiment -> session id -> arm
    controls: dict[str, str]
    files: dict[str, tuple[int, int, int]]  # source -> (records, rated, kept)


def arm_of_day(stem: str) -> str | None:
    match = DAY_FILE.match(stem)
    return match[1] if match else None


def read_corpus(folder: Path) -> Corpus:
    """Every rated dialogue (``eval_score`` 1-5) with at least one human message, from the JSON arrays in
    ``folder``, and the two experiments' arms (see the module's docstring)."""
    every = sorted(folder.glob("*.json"))
    paths = [p for p in every if arm_of_day(p.stem) or p.stem in VOLUNTEER_FILES]
    for path in sorted(set(every) - set(paths)):
        # summer_wild_evaluation_dialogs.json and data_tolokers.json repeat the dialogues of the files read
        print(f"  not read: {path.name} (the bench reads export_<day>_train.json, {', '.join(VOLUNTEER_FILES)})")
    if not paths:
        raise SystemExit(
            f"real_corpus: no export_<day>_train.json or data_volunteers.json in {folder}: name ConvAI2's 2018/data "
            "folder with --corpus"
        )
    dialogues: list[Dialogue] = []
    files: dict[str, tuple[int, int, int]] = {}
    for path in paths:
        try:
            records = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"real_corpus: {path} is not a JSON file ({exc}): remove it from --corpus") from None
        if not isinstance(records, list):
            raise SystemExit(f"real_corpus: {path} holds no JSON array of dialogues: remove it from --corpus")
        day = arm_of_day(path.stem)
        base = datetime.fromisoformat(day) if day else datetime(2018, 7, 9)
        rated = kept = 0
        for i, rec in enumerate(records):
            score = rec.get("eval_score") if isinstance(rec, dict) else None
            if not isinstance(score, int) or isinstance(score, bool) or not 1 <= score <= 5:
                continue
            rated += 1
            turns = tuple(
                (m.get("sender") == HUMAN, m["text"].strip())
                for m in rec.get("dialog") or []
                if isinstance(m, dict) and isinstance(m.get("text"), str) and m["text"].strip()
            )
            if not any(human for human, _ in turns):
                continue  # rated without a word typed: no user message opens a work segment
            kept += 1
            sid = f"convai2-{path.stem}-{i:05d}"
            user = (rec.get("participant1_id") or {}).get("user_id")
            bot = (rec.get("participant2_id") or {}).get("user_id")
            start = base + timedelta(minutes=i)
            if isinstance(rec.get("start_time"), str):
                with contextlib.suppress(ValueError):
                    start = datetime.fromisoformat(rec["start_time"])
            dialogues.append(
                Dialogue(
                    session_id=sid,
                    source=path.stem,
                    stars=score,
                    user_id=f"convai2-{user.replace(' ', '-').lower()}" if isinstance(user, str) else f"{sid}-user",
                    bot=bot.replace(" ", "").lower() if isinstance(bot, str) else None,
                    start=start,
                    turns=turns,
                )
            )
        files[path.stem] = (len(records), rated, kept)
    if not dialogues:
        raise SystemExit(f"real_corpus: no rated dialogue with a human message in {folder}")
    days = {d.session_id: arm_of_day(d.source) for d in dialogues if arm_of_day(d.source)}
    finalists = {d.bot for d in dialogues if d.source == FINAL_ROUND and d.bot}
    bots = {d.session_id: d.bot for d in dialogues if d.source in VOLUNTEER_FILES and d.bot in finalists}
    assignments = {DAY_EXPERIMENT: days, BOT_EXPERIMENT: bots}
    assignments = {e: a for e, a in assignments.items() if len(set(a.values())) >= 2}
    controls = {e: min(a.values()) for e, a in assignments.items()}
    return Corpus(dialogues, assignments, controls, files)


def truths(corpus: Corpus) -> dict[tuple[str, str], float]:
    """(experiment, treatment) -> mean label of the treatment arm minus the control's, over the full corpus."""
    stars = {d.session_id: d.stars for d in corpus.dialogues}
    out = {}
    for experiment, arms in corpus.assignments.items():
        by_arm: dict[str, list[int]] = defaultdict(list)
        for sid, arm in arms.items():
            by_arm[arm].append(stars[sid])
        control = np.mean(by_arm[corpus.controls[experiment]])
        for arm, values in sorted(by_arm.items()):
            if arm != corpus.controls[experiment]:
                out[experiment, arm] = float((np.mean(values) - control) / 4)
    return out


def session_line(d: Dialogue) -> dict:
    """The dialogue as one line of OpenHands evaluation output: the human's lines user messages, the bot's agent
    messages waiting for a reply (each closes the human's work segment), 5 s apart."""
    history = []
    for j, (human, text) in enumerate(d.turns):
        history.append(
            {
                "id": j,
                "timestamp": (d.start + timedelta(seconds=5 * j)).isoformat(),
                "source": "user" if human else "agent",
                "message": text,
                "action": "message",
                "args": {"content": text, "image_urls": None, "wait_for_response": not human},
            }
        )
    return {"instance_id": d.session_id, "instruction": d.user_text[0], "user_id": d.user_id, "history": history}


def write_sessions_drop(corpus: Corpus, folder: Path) -> None:
    """sessions.jsonl and assignments.csv (every session, rated or not in a run: the ratings come later)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "sessions.jsonl").open("w", encoding="utf-8") as fh:
        for d in corpus.dialogues:
            fh.write(json.dumps(session_line(d), ensure_ascii=False) + "\n")
    users = {d.session_id: d.user_id for d in corpus.dialogues}
    with (folder / "assignments.csv").open("w", encoding="utf-8") as fh:
        fh.write("session_id,experiment,variant,user_id\n")
        for experiment, arms in corpus.assignments.items():
            for sid, arm in sorted(arms.items()):
                fh.write(f"{sid},{experiment},{arm},{users[sid]}\n")


def experiments_toml(corpus: Corpus) -> str:
    """Each experiment's control; the unit is the session (ConvAI2 drew a bot for each conversation, and a day's
    workers are not followed across days)."""
    return "".join(
        f'[experiments.{e}]\ncontrol = "{corpus.controls[e]}"\nunit = "session"\n\n' for e in sorted(corpus.assignments)
    )


def pulse(home: Path, *args: str) -> str:
    env = {**os.environ, "PULSE_HOME": str(home)}
    done = subprocess.run([*PULSE, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"real_corpus: `pulse {' '.join(args)}` in {home} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def base_home(corpus: Corpus, workdir: Path) -> Path:
    """A home holding every session and the assignments, no rating (built once, copied for each run)."""
    home = workdir / "base-home"
    stamp = workdir / "base-home.done"
    made_of = f"{len(corpus.dialogues)} sessions, {sum(len(a) for a in corpus.assignments.values())} assignments\n"
    if stamp.exists() and stamp.read_text() == made_of:
        return home  # built by an earlier run on this corpus (delete the stamp to rebuild it with other code)
    shutil.rmtree(home, ignore_errors=True)
    drop = workdir / "convai2-sessions"
    shutil.rmtree(drop, ignore_errors=True)
    write_sessions_drop(corpus, drop)
    home.mkdir(parents=True)
    (home / "experiments.toml").write_text(experiments_toml(corpus), encoding="utf-8")
    started = time.perf_counter()
    said = pulse(home, "ingest", str(drop), "--name", "convai2-sessions")
    print(f"pulse ingest: {said.splitlines()[0] if said else '(nothing said)'}")
    print(
        f"base home: {len(corpus.dialogues):,} sessions ingested in {time.perf_counter() - started:.0f} s", flush=True
    )
    stamp.write_text(made_of)
    return home


@dataclass(frozen=True)
class Setting:
    name: str
    fraction: float | None = None
    count: int | None = None

    def size(self, n: int) -> int:
        return min(n, self.count if self.count is not None else round(self.fraction * n))


def settings_of(fractions: str, counts: str) -> list[Setting]:
    out = [Setting(f"{float(f):.0%} rated", fraction=float(f)) for f in fractions.split(",") if f.strip()]
    out += [Setting(f"{int(c)} ratings", count=int(c)) for c in counts.split(",") if c.strip()]
    if not out:
        raise SystemExit("real_corpus: give at least one of --fractions, --counts")
    return out


def pearson(y: np.ndarray, f: np.ndarray) -> float:
    if len(y) < 3 or y.std() == 0 or f.std() == 0:
        return float("nan")
    return float(np.corrcoef(y, f)[0, 1])


def vader_columns(corpus: Corpus) -> dict[str, list[float]]:
    analyzer = SentimentIntensityAnalyzer()
    out = {}
    for d in corpus.dialogues:
        s = analyzer.polarity_scores("\n".join(d.user_text))
        out[d.session_id] = [s["compound"], s["pos"], s["neg"], s["neu"]]
    return out


def baseline_predictions(docs: list[str], vader: np.ndarray, y: np.ndarray, fold: np.ndarray) -> dict[str, np.ndarray]:
    """Out-of-fold predictions of the three baselines on the given folds (TF-IDF fitted on the training rows)."""
    out = {name: np.full(len(y), np.nan) for name in BASELINES[:2]}
    for k in np.unique(fold):
        train, test = fold != k, fold == k
        if train.sum() < 2:
            continue
        tfidf = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)
        try:
            x_train = tfidf.fit_transform([docs[i] for i in np.flatnonzero(train)])
        except ValueError:  # no term in two training documents
            tfidf = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
            x_train = tfidf.fit_transform([docs[i] for i in np.flatnonzero(train)])
        ridge = Ridge(alpha=1.0).fit(x_train, y[train])
        out["tfidf_ridge"][test] = ridge.predict(tfidf.transform([docs[i] for i in np.flatnonzero(test)]))
        model = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(vader[train], y[train])
        out["vader_ridge"][test] = model.predict(vader[test])
    out["average"] = (out["tfidf_ridge"] + out["vader_ridge"]) / 2
    return out


@dataclass
class Run:
    setting: str
    seed: int
    n_rated: int
    chosen: str | None = None
    chosen_r_cv: float = float("nan")
    chosen_r_seed42: float = float("nan")
    families_r: dict[str, float] = field(default_factory=dict)
    baselines_r: dict[str, float] = field(default_factory=dict)
    comparisons: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    ingest_summary: str = ""


def rated_sample(corpus: Corpus, size: int, seed: int) -> list[Dialogue]:
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(corpus.dialogues), size=size, replace=False)
    return [corpus.dialogues[i] for i in sorted(pick)]


def read_run(home: Path, run: Run, corpus: Corpus, vader: dict[str, list[float]], truth: dict) -> None:
    con = duckdb.connect(str(home / "pulse.duckdb"), read_only=True)
    try:
        metrics = con.execute(
            "SELECT model, mean, chosen FROM modeling.cv_metrics WHERE metric = 'pearson' ORDER BY model"
        ).fetchall()
        preds = con.execute(
            "SELECT session_id, label, prediction, fold FROM modeling.predictions WHERE labeled ORDER BY session_id"
        ).fetchall()
        effects = con.execute(
            "SELECT experiment, treatment, method, effect, ci_low, ci_high, width_vs_naive, valid, flags "
            "FROM estimates.experiment_effects WHERE method <> 'none'"
        ).fetchall()
    finally:
        con.close()
    run.families_r = {model: float(mean) for model, mean, _ in metrics if mean is not None}
    chosen = [model for model, _, is_chosen in metrics if is_chosen]
    run.chosen = chosen[0] if chosen else None
    if run.chosen is not None:
        run.chosen_r_cv = run.families_r.get(run.chosen, float("nan"))
    if preds:
        text = {d.session_id: "\n".join(d.user_text) for d in corpus.dialogues}
        ids = [p[0] for p in preds]
        y = np.array([p[1] for p in preds], dtype=float)
        f = np.array([p[2] for p in preds], dtype=float)
        fold = np.array([-1 if p[3] is None else p[3] for p in preds])
        run.chosen_r_seed42 = pearson(y, f)
        base = baseline_predictions([text[s] for s in ids], np.array([vader[s] for s in ids]), y, fold)
        run.baselines_r = {name: pearson(y, base[name]) for name in BASELINES}
    for experiment, treatment, method, effect, lo, hi, ratio, valid, flags in effects:
        true = truth.get((experiment, treatment))
        run.comparisons.append(
            {
                "experiment": experiment,
                "treatment": treatment,
                "method": method,
                "effect": effect,
                "ci_low": lo,
                "ci_high": hi,
                "truth": true,
                "width_vs_naive": ratio,
                "valid": bool(valid),
                "flags": flags or "",
                "covered": None if true is None or lo is None or hi is None else bool(lo <= true <= hi),
            }
        )


def one_run(corpus: Corpus, base: Path, workdir: Path, setting: Setting, seed: int, vader, truth, keep: bool) -> Run:
    size = setting.size(len(corpus.dialogues))
    run = Run(setting.name, seed, size)
    tag = f"{setting.name.replace(' ', '-').replace('%', 'pct')}-seed{seed}"
    home, drop = workdir / f"home-{tag}", workdir / f"ratings-{tag}"
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(drop, ignore_errors=True)
    shutil.copytree(base, home, symlinks=True)
    drop.mkdir(parents=True)
    with (drop / "ratings.jsonl").open("w", encoding="utf-8") as fh:
        for d in rated_sample(corpus, size, seed):
            fh.write(json.dumps({"id": f"{d.session_id}-rating", "conversation_id": d.session_id, "rating": d.stars}))
            fh.write("\n")
    started = time.perf_counter()
    said = pulse(home, "ingest", str(drop), "--name", f"ratings-{tag}")
    run.seconds = time.perf_counter() - started
    run.ingest_summary = said.splitlines()[0] if said else ""
    read_run(home, run, corpus, vader, truth)
    if not keep:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(drop, ignore_errors=True)
    return run


def fmt(x: float | None, spec: str = ".3f") -> str:
    return "   -  " if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def print_run(run: Run) -> None:
    best = max(BASELINES, key=lambda b: -np.inf if np.isnan(run.baselines_r.get(b, np.nan)) else run.baselines_r[b])
    print(
        f"\n== {run.setting}, seed {run.seed}: {run.n_rated} rated sessions, pulse ingest {run.seconds:.0f} s ==\n"
        f"pulse ingest: {run.ingest_summary}\n"
        f"chosen model {run.chosen}: out-of-fold r {fmt(run.chosen_r_cv)} (cv_metrics, mean over CV seeds), "
        f"{fmt(run.chosen_r_seed42)} (seed-42 cross-fit)\n"
        f"families (cv_metrics r): "
        + "  ".join(f"{m} {fmt(r)}" for m, r in sorted(run.families_r.items(), key=lambda kv: -kv[1]))
    )
    print(
        "baselines on the same rated sessions and folds (seed 42): "
        + "  ".join(f"{b} {fmt(run.baselines_r.get(b))}" for b in BASELINES)
        + f"   chosen (seed 42) - best baseline ({best}): "
        + fmt(run.chosen_r_seed42 - run.baselines_r.get(best, np.nan), "+.3f")
    )
    print(f"{'comparison':<28} {'truth':>7} " + " ".join(f"{m:>16}" for m in METHOD_ORDER))
    keys = sorted({(c["experiment"], c["treatment"]) for c in run.comparisons})
    for key in keys:
        rows = {c["method"]: c for c in run.comparisons if (c["experiment"], c["treatment"]) == key}
        cells = []
        for m in METHOD_ORDER:
            c = rows.get(m)
            if c is None:
                cells.append(f"{'':>16}")
                continue
            mark = "ok" if c["covered"] else "MISS" if c["covered"] is False else "?"
            mark += "" if c["valid"] and not c["flags"] else "*"
            cells.append(f"{fmt(c['width_vs_naive'], '.2f'):>10}x {mark:<5}")
        truth = next(iter(rows.values()))["truth"]
        print(f"{key[0] + '/' + key[1]:<28} {fmt(truth, '+.3f'):>7} " + " ".join(cells))
    print("(each method: interval width / naive width, ok|MISS whether it covered the truth; * invalid or flagged)")


def summary(runs: list[Run]) -> None:
    print("\n== summary over runs ==")
    header = f"{'setting':<14} {'runs':>4} {'chosen r':>9} {'seed42 r':>9} " + " ".join(f"{b:>12}" for b in BASELINES)
    print(header + f" {'chosen-best':>12} {'worst run':>10}")
    for name in dict.fromkeys(r.setting for r in runs):
        rs = [r for r in runs if r.setting == name]
        gaps = []
        for r in rs:
            vals = [v for v in r.baselines_r.values() if not np.isnan(v)]
            if vals and not np.isnan(r.chosen_r_seed42):
                gaps.append(r.chosen_r_seed42 - max(vals))
        row = f"{name:<14} {len(rs):>4} {fmt(np.nanmean([r.chosen_r_cv for r in rs])):>9} "
        row += f"{fmt(np.nanmean([r.chosen_r_seed42 for r in rs])):>9} "
        row += " ".join(f"{fmt(np.nanmean([r.baselines_r.get(b, np.nan) for r in rs])):>12}" for b in BASELINES)
        row += f" {fmt(np.mean(gaps) if gaps else None, '+.3f'):>12} {fmt(min(gaps) if gaps else None, '+.3f'):>10}"
        print(row)
    print("chosen-best: the chosen model's seed-42 r minus the best baseline's on the same folds (mean; worst run)")
    chosen = defaultdict(int)
    for r in runs:
        chosen[r.chosen] += 1
    print("models chosen: " + ", ".join(f"{m} {n}" for m, n in sorted(chosen.items(), key=lambda kv: -kv[1])))
    print(
        f"\n{'method':<16} {'comparisons':>11} {'worst width/naive':>18} {'mean':>6} "
        f"{'worst (valid, unflagged)':>25} {'coverage':>14}"
    )
    all_rows = [c for r in runs for c in r.comparisons]
    for m in METHOD_ORDER:
        rows = [c for c in all_rows if c["method"] == m and c["width_vs_naive"] is not None]
        if not rows:
            continue
        ratios = [c["width_vs_naive"] for c in rows]
        clean = [c["width_vs_naive"] for c in rows if c["valid"] and not c["flags"]]
        judged = [c["covered"] for c in rows if c["covered"] is not None]
        print(
            f"{m:<16} {len(rows):>11} {max(ratios):>18.3f} {np.mean(ratios):>6.3f} "
            f"{fmt(max(clean) if clean else None):>25} "
            f"{f'{sum(judged)}/{len(judged)} = {sum(judged) / len(judged):.0%}' if judged else '-':>14}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, required=True, help="the folder of ConvAI2 *.json files")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "real_corpus")
    parser.add_argument("--fractions", default="0.06,0.10,0.30", help="shares of the sessions rated (comma-separated)")
    parser.add_argument("--counts", default="230,1000", help="numbers of rated sessions (comma-separated)")
    parser.add_argument("--seeds", type=int, default=3, help="sampling seeds per setting (0, 1, ...)")
    parser.add_argument("--quick", action="store_true", help="only ~230 and ~1 000 ratings, one seed")
    parser.add_argument("--keep-homes", action="store_true", help="keep each run's PULSE_HOME under --workdir")
    parser.add_argument(
        "--resume", action="store_true", help="reuse the runs <workdir>/results.json already holds (same corpus)"
    )
    args = parser.parse_args()
    if args.quick:
        args.fractions, args.counts, args.seeds = "", "230,1000", 1
    settings = settings_of(args.fractions, args.counts)

    corpus = read_corpus(args.corpus)
    truth = truths(corpus)
    stars = np.array([d.stars for d in corpus.dialogues])
    print(f"Real corpus: {args.corpus}")
    for source, (n, rated, kept) in corpus.files.items():
        print(f"  {source:<28} {n:>5} dialogues, {rated:>5} rated, {kept:>5} with a human message (kept)")
    counts = " ".join(f"{s}: {int((stars == s).sum())}" for s in range(1, 6))
    print(f"{len(stars):,} sessions; stars {counts}; mean {stars.mean():.3f}")
    for experiment, arms in corpus.assignments.items():
        sizes = defaultdict(int)
        for arm in arms.values():
            sizes[arm] += 1
        arms_text = ", ".join(f"{a} {n}" for a, n in sorted(sizes.items()))
        print(f"experiment {experiment} (control {corpus.controls[experiment]}): {arms_text}")
    for (experiment, arm), t in sorted(truth.items()):
        print(f"  truth {experiment}/{arm}: {t:+.4f} (label scale), {4 * t:+.3f} stars")
    print(f"settings: {', '.join(s.name for s in settings)}; seeds 0..{args.seeds - 1}", flush=True)

    args.workdir.mkdir(parents=True, exist_ok=True)
    results = args.workdir / "results.json"
    (args.workdir / "truth.json").write_text(
        json.dumps({f"{e}/{a}": t for (e, a), t in sorted(truth.items())}, indent=2)
    )
    base = base_home(corpus, args.workdir)
    vader = vader_columns(corpus)
    done: dict[tuple[str, int], Run] = {}
    if args.resume and (args.workdir / "results.json").exists():
        done = {(d["setting"], d["seed"]): Run(**d) for d in json.loads(results.read_text())}
        print(f"resuming: {len(done)} runs read from {results}")
    runs = []
    for setting in settings:
        for seed in range(args.seeds):
            run = done.pop((setting.name, seed), None)
            if run is None:
                run = one_run(corpus, base, args.workdir, setting, seed, vader, truth, args.keep_homes)
            print_run(run)
            runs.append(run)
            kept = [*runs, *done.values()]  # runs of other settings stay in the file
            results.write_text(json.dumps([asdict(r) for r in kept], indent=1, default=str))
    summary(runs)
    print(f"\nresults: {results}")


if __name__ == "__main__":
    main()
