"""Write a synthetic corpus folder: what a real OpenHands export would hand PULSE, plus the truth beside it.

Why: the pipeline's end-to-end tests and the paper-scale benchmark need a drop whose every count and every
arm effect is known. Files written into ``out_dir``:

- ``sessions-0000.jsonl``, ... one session a line: ``{"session_id", "user_id", "synthetic", "history": [V0 events]}``;
  ``synthetic`` (:data:`SYNTHETIC_KEY`: the generator, its seed and scenario) lands in the session's
  ``metadata_json`` like any key a real export adds, so the warehouse itself says which sessions are made up (the
  report's banner counts them), whatever command ingested them;
- ``ratings.jsonl``      one row per rated segment, shaped like OpenHands' ``conversation_feedback`` table;
  ``event_id`` is the id of the segment's closing agent message / finish, and the mean of a session's rows is
  exactly its ``label``. With ``ask_log_share`` > 0, sessions that start in that last share of the time span also
  log every rating widget shown (the ask rows of docs/statistics.md): the widget shows at every segment's close (so
  ``ask_probability`` 1), a rated segment's row carries its rating, every other segment gets an unanswered ask;
  who rates is unchanged. With ``malformed`` > 0, that many deliberately broken records follow the good ones
  (:data:`MALFORMED`): an ingest quarantines each, and no label changes;
- ``assignments.csv``    ``session_id,experiment,variant,user_id``, one row per session;
- ``_truth.json``        params, seed, true arm means and effects, realized arm means, selection diagnostics;
- ``_sessions_truth.csv`` the session-level truth (label, true_mean_rating, rated, p_rated, counts).

Files starting with ``_`` are not data: an ingest must skip them.

**Ids are unique per corpus**: session ids are ``<prefix>-s000001``.., rating ids ``<prefix>-r000001``.. and user
ids ``<user prefix>-u000001``..; the prefix defaults to :func:`corpus_prefix`, a digest of everything that decides
the sessions drawn (their number, seed, users, scenario, rated share, generator parameters), and the user prefix to
the prefix. Why: the generator numbers sessions and users from 1 in every corpus, and a later
drop wins a session id over an earlier one (``staging/sql.py``), so a second corpus dropped beside the demo silently
replaced 200 of its sessions (issue 33). The same arguments still give the same prefix, so re-running a command
writes byte-identical files (a re-delivery, not a new corpus); two corpora that differ in any of them get
different prefixes. Users are per corpus too: two corpora's ``u000071`` are unrelated people drawn independently,
and sharing the id would make one "user" of them, in both arms of an experiment for the user-level analysis
(``estimates/experiments.py`` leaves switching users out) and one cluster for the cluster-robust intervals.
Returning users across corpora are asked for explicitly, with the same ``user_prefix`` (``bench/scale.py`` does).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import orjson
import polars as pl

from ..stars import stars_to_label
from ..stats.two_sample import rank_biserial_correlation
from .model import (
    CONTROLS,
    EXPERIMENTS,
    FEEDBACK_REASONS,
    GeneratorParams,
    SessionTable,
    default_n_users,
    direct_share,
    simulate_sessions,
    true_arm_means,
)
from .render import BASE_TIME, SPAN_SECONDS, render_session, session_specs

SYNTHETIC_KEY = "synthetic"  # a session record's key naming its generator: staging.sessions.metadata_json $.synthetic
GENERATOR = "pulse_pipeline.synth"

TRUTH_COLUMNS: tuple[str, ...] = (
    "session_id",
    "user_id",
    "experiment",
    "variant",
    "task_type",
    "language",
    "label",
    "true_mean_rating",
    "rated",
    "p_rated",
    "n_rated_segments",
    "n_label_segments",
    "user_messages",
    "n_segments",
    "git_commit",
    "git_push",
    "git_pull",
    "git_reset",
    "git_rebase",
    "test_runs",
    "test_failures",
    "failed_commands",
    "file_edits",
    "finished",
    "sentiment_score",
    "quality",
    "work_quality",
)


MALFORMED: tuple[tuple[str, str], ...] = (
    ("ratings.jsonl", "{not json"),
    ("ratings.jsonl", '{"id": "bad-rating", "conversation_id": "s000000", "rating": 7}'),
    ("ratings.jsonl", '{"id": "bad-session", "conversation_id": "no-such-session", "rating": 4}'),
    ("ratings.jsonl", '{"id": "bad-ask", "conversation_id": "s000000", "ask_probability": 0}'),
    ("sessions", '{"session_id": "bad-history", "user_id": "u", "history": "not a list"}'),
)
"""Broken records ``write_corpus(malformed=k)`` appends, cycling (file, line); "sessions" is the last sessions file:
a line that is not JSON, a rating of 7, a rating of a session no drop has, an ask with probability 0, a session
whose history is no list of events. Each is one quarantine row with its reason; the labels are untouched."""


PREFIX_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
"""A prefix: letters, digits, ``.``, ``_`` and ``-`` (ids go into a CSV file and file-safe drop keys), at most 40."""


def corpus_prefix(
    n_sessions: int, seed: int, n_users: int, scenario: str, rated_fraction: float, params: GeneratorParams
) -> str:
    """``c`` + 8 hex digits of the SHA-1 of the arguments that decide the sessions drawn (``simulate_sessions`` is
    deterministic in them). Not the file split, the ask log or the broken records: those write the same sessions,
    users and ratings otherwise around the same draw. Two different draws share a prefix with probability 2**-32."""
    doc = {
        "n_sessions": n_sessions,
        "seed": seed,
        "n_users": n_users,
        "scenario": scenario,
        "rated_fraction": rated_fraction,
        "params": params.as_dict(),
    }
    return "c" + hashlib.sha1(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()[:8]


def check_prefix(prefix: str, what: str = "prefix") -> str:
    """``prefix`` if it is one (:data:`PREFIX_PATTERN`), else ValueError saying what a prefix may hold."""
    if not PREFIX_PATTERN.fullmatch(prefix):
        raise ValueError(
            f"{what} {prefix!r} is not usable in ids: use 1 to 40 letters, digits, '.', '_' or '-', starting with a"
            " letter or digit"
        )
    return prefix


@dataclass(frozen=True)
class CorpusSummary:
    out_dir: Path
    n_sessions: int
    n_users: int
    n_rated: int  # rated sessions
    n_events: int
    bytes_written: int  # all files written, sidecars included
    files: tuple[Path, ...]
    n_ratings: int = 0  # rating rows (rated segments), answered asks included
    n_unanswered_asks: int = 0  # ask rows without a rating (``ask_log_share``)
    n_malformed: int = 0  # deliberately broken records (``malformed``)
    prefix: str = ""  # of the session and rating ids (``<prefix>-s000001``)
    user_prefix: str = ""  # of the user ids (``<user_prefix>-u000001``)


def _reason(rating: int, finished: bool, rnd: random.Random) -> str | None:
    """Reasons only for ratings <= 3 (as OpenHands asks), 15 % left empty; unfinished sessions blame that."""
    if rating > 3 or rnd.random() < 0.15:
        return None
    if not finished and rnd.random() < 0.4:
        return "didn't finish the job"
    return rnd.choice(FEEDBACK_REASONS)


def _iso(ts: str, plus_seconds: float) -> str:
    return (datetime.fromisoformat(ts) + timedelta(seconds=plus_seconds)).isoformat(timespec="microseconds")


def _arm_stats(table: SessionTable, experiment: str) -> dict[str, dict[str, float | int | None]]:
    out: dict[str, dict[str, float | int | None]] = {}
    for arm in EXPERIMENTS[experiment]:
        mask = table.variant == arm
        rated = mask & table.rated
        mean = float(table.label[mask].mean()) if mask.any() else None
        rated_mean = float(table.label[rated].mean()) if rated.any() else None
        out[arm] = {
            "n": int(mask.sum()),
            "stars": mean,
            "normalized": None if mean is None else float(stars_to_label(mean)),
            "n_rated": int(rated.sum()),
            "rated_stars": rated_mean,
            "rated_normalized": None if rated_mean is None else float(stars_to_label(rated_mean)),
        }
    return out


def truth_document(
    table: SessionTable,
    params: GeneratorParams,
    *,
    seed: int,
    scenario: str,
    n_users: int,
    rated_fraction: float,
    prefix: str = "",
    user_prefix: str = "",
) -> dict[str, object]:
    """The ``_truth.json`` content: true arm means/effects (Monte Carlo, see ``true_arm_means``) and what the
    sample realized, so an estimate can be scored against both the population and the sample truth."""
    experiments: dict[str, object] = {}
    for name, arms in EXPERIMENTS.items():
        control = CONTROLS[name]
        means = true_arm_means(params, name)
        experiments[name] = {
            "arms": list(arms),
            "control": control,
            "true_arm_means": {a: {"stars": m, "normalized": float(stars_to_label(m))} for a, m in means.items()},
            "true_effects": {
                a: {"stars": means[a] - means[control], "normalized": (means[a] - means[control]) / 4.0}
                for a in arms
                if a != control
            },
            "direct_share": {a: direct_share(params, a) for a in arms if a != control},
            "sample_arm_means": _arm_stats(table, name),
        }
    rated = table.rated
    return {
        "generator": GENERATOR,
        "seed": seed,
        "id_prefix": prefix,
        "user_prefix": user_prefix,
        "scenario": scenario,
        "n_sessions": len(table),
        "n_users": n_users,
        "n_active_users": int(np.unique(table.user_id).size),
        "rated_fraction_target": rated_fraction,
        "rated_fraction": float(rated.mean()),
        "n_rated_sessions": int(rated.sum()),
        "n_ratings": int(table.n_rated_segments.sum()),
        "rank_biserial_user_messages": rank_biserial_correlation(
            table.user_messages[rated], table.user_messages[~rated]
        ),
        "mean_label_all": float(table.label.mean()),
        "mean_label_rated": float(table.label[rated].mean()) if rated.any() else None,
        "label_scale": "stars 1..5; normalized = (stars - 1) / 4",
        "experiments": experiments,
        "params": params.as_dict(),
    }


def write_corpus(
    out_dir: Path,
    n_sessions: int,
    seed: int = 0,
    n_users: int | None = None,
    scenario: str = "self_selected",
    sessions_per_file: int = 2000,
    *,
    rated_fraction: float = 0.05,
    params: GeneratorParams | None = None,
    advance: Callable[[int, int], None] | None = None,
    ask_log_share: float = 0.0,
    malformed: int = 0,
    prefix: str | None = None,
    user_prefix: str | None = None,
) -> CorpusSummary:
    """Simulate ``n_sessions`` sessions and write the corpus folder (see the module docstring).

    ``ask_log_share`` in [0, 1]: the last share of the time span in which asks are logged; ``malformed``: how many
    broken records to append (:data:`MALFORMED`). Both default to none. ``prefix`` (default :func:`corpus_prefix`)
    starts every session and rating id, ``user_prefix`` (default ``prefix``) every user id.

    ``advance(1, n_sessions)`` is called as each session is rendered (a progress bar: ``progress.py``).

    Deterministic: the same arguments give byte-identical files. Each session is rendered with its own
    ``random.Random(f"{seed}/{index}")``, so a session's events do not depend on the file split. Stale
    ``sessions-NNNN.jsonl`` files of an earlier, larger corpus in ``out_dir`` are removed.
    """
    if sessions_per_file < 1:
        raise ValueError("sessions_per_file must be >= 1")
    p = params or GeneratorParams()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nu = default_n_users(n_sessions, p) if n_users is None else int(n_users)
    if prefix is None:
        prefix = corpus_prefix(n_sessions, seed, nu, scenario, rated_fraction, p)
    check_prefix(prefix)
    user_prefix = check_prefix(prefix if user_prefix is None else user_prefix, "user prefix")
    table = simulate_sessions(
        n_sessions,
        seed,
        nu,
        scenario,
        rated_fraction,
        params=p,
        session_prefix=f"{prefix}-",
        user_prefix=f"{user_prefix}-",
    )
    specs = session_specs(table, seed, p)
    rated = table.rated.tolist()
    k_rated = table.n_rated_segments.tolist()
    stars = table.segment_ratings.tolist()

    marker = {"generator": GENERATOR, "seed": seed, "scenario": scenario}
    files: list[Path] = []
    n_events = 0
    total_bytes = 0
    rating_lines: list[bytes] = []
    n_answered = 0
    asks_from = BASE_TIME + timedelta(seconds=SPAN_SECONDS * (1.0 - ask_log_share))
    n_files = (n_sessions + sessions_per_file - 1) // sessions_per_file
    for f in range(n_files):
        lines: list[bytes] = []
        for i in range(f * sessions_per_file, min(n_sessions, (f + 1) * sessions_per_file)):
            spec = specs[i]
            rnd = random.Random(f"{seed}/{i}")
            rendered = render_session(spec, rnd)
            n_events += len(rendered.history)
            if advance is not None:
                advance(1, n_sessions)
            lines.append(
                orjson.dumps(
                    {
                        "session_id": spec.session_id,
                        "user_id": spec.user_id,
                        SYNTHETIC_KEY: marker,
                        "history": rendered.history,
                    }
                )
            )
            logs_asks = ask_log_share > 0 and datetime.fromisoformat(rendered.history[0]["timestamp"]) >= asks_from
            answered: dict[int, dict] = {}
            if rated[i]:
                segments = sorted(rnd.sample(range(spec.n_segments), k_rated[i]))
                for j, seg in enumerate(segments):
                    rating = stars[i][j]
                    answered[seg] = {
                        "conversation_id": spec.session_id,
                        "event_id": rendered.close_ids[seg],
                        "rating": rating,
                        "reason": _reason(rating, spec.finished, rnd),
                        "created_at": _iso(rendered.close_times[seg], rnd.uniform(3.0, 300.0)),
                    }
            n_answered += len(answered)
            # without ask logging only the answers are rows; with it every segment's close is an ask (probability 1)
            for seg in range(spec.n_segments) if logs_asks else sorted(answered):
                row = answered.get(seg) or {
                    "conversation_id": spec.session_id,
                    "event_id": rendered.close_ids[seg],
                    "created_at": _iso(rendered.close_times[seg], 1.0),
                }
                if logs_asks:
                    row = {**row, "ask_probability": 1.0}
                rating_lines.append(orjson.dumps({"id": f"{prefix}-r{len(rating_lines) + 1:06d}", **row}))
        path = out / f"sessions-{f:04d}.jsonl"
        data = b"\n".join(lines) + b"\n"
        path.write_bytes(data)
        files.append(path)
        total_bytes += len(data)
    for stale in out.glob("sessions-*.jsonl"):
        if stale not in files and stale.stem[len("sessions-") :].isdigit():
            stale.unlink()

    def put(name: str, data: bytes) -> None:
        nonlocal total_bytes
        path = out / name
        path.write_bytes(data)
        files.append(path)
        total_bytes += len(data)

    broken = [MALFORMED[k % len(MALFORMED)] for k in range(malformed)]
    rating_lines += [line.encode() for name, line in broken if name == "ratings.jsonl"]
    if any(name == "sessions" for name, _ in broken):  # appended to the last sessions file
        extra = b"".join(line.encode() + b"\n" for name, line in broken if name == "sessions")
        with files[-1].open("ab") as fh:
            fh.write(extra)
        total_bytes += len(extra)
    put("ratings.jsonl", b"".join(line + b"\n" for line in rating_lines))
    assignment_rows = zip(
        table.session_id.tolist(),
        table.experiment.tolist(),
        table.variant.tolist(),
        table.user_id.tolist(),
        strict=True,
    )
    put(
        "assignments.csv",
        (
            "session_id,experiment,variant,user_id\n" + "".join(f"{s},{e},{v},{u}\n" for s, e, v, u in assignment_rows)
        ).encode(),
    )
    cols = table.columns()
    put("_sessions_truth.csv", pl.DataFrame({c: cols[c] for c in TRUTH_COLUMNS}).write_csv().encode())
    doc = truth_document(
        table,
        p,
        seed=seed,
        scenario=scenario,
        n_users=nu,
        rated_fraction=rated_fraction,
        prefix=prefix,
        user_prefix=user_prefix,
    )
    put("_truth.json", orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))

    return CorpusSummary(
        out_dir=out,
        n_sessions=n_sessions,
        n_users=nu,
        n_rated=int(table.rated.sum()),
        n_events=n_events,
        bytes_written=total_bytes,
        files=tuple(files),
        n_ratings=n_answered,
        n_unanswered_asks=len(rating_lines) - n_answered - sum(name == "ratings.jsonl" for name, _ in broken),
        n_malformed=malformed,
        prefix=prefix,
        user_prefix=user_prefix,
    )
