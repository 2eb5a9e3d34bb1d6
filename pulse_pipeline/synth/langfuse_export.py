"""A synthetic Langfuse blob-storage export with a known truth, for the Langfuse reader's tests and its benchmark.

It writes what Langfuse's export writes (``<folder>/traces/``, ``observations_v2/``, ``scores/``, snake_case
columns as langfuse/langfuse's ``build*ForBlobStorageExportQuery`` and ``event-query-builder.ts`` select them at
62751446149b702b419a9292ddfc2280cdf74b8c), in one of its four file kinds: JSON lines, a JSON array, CSV (JSON
columns as JSON text) or Parquet (``usage_details``/``cost_details`` as maps, times as timestamps). Each trace has a
root span, a generation whose input is a chat conversation (a system prompt, the session's earlier turns, the new
user message), a tool call and a second generation; traces are grouped into sessions (a few without a session).

The truth (``ExportTruth``) is what a correct reader must find: each session's traces in order, each trace's user
words, the session's model, cost and tokens, and the rating each user-feedback score gives.
"""

from __future__ import annotations

import csv
import io
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

FORMATS = ("jsonl", "json", "csv", "parquet")
MODELS = ("gpt-4o-mini", "claude-sonnet-4", "gpt-5")
OBSERVATIONS_PER_TRACE = 4
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass
class SessionTruth:
    session_id: str  # the sessionId, or the trace id of a trace without one
    user_id: str | None
    trace_ids: list[str] = field(default_factory=list)
    user_words: list[str] = field(default_factory=list)  # per trace, in order
    model: str = ""
    cost: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    release: str | None = None


@dataclass
class ExportTruth:
    sessions: dict[str, SessionTruth] = field(default_factory=dict)
    ratings: dict[str, tuple[float, str]] = field(default_factory=dict)  # trace id -> (rating, scale)
    evals: dict[str, float] = field(default_factory=dict)  # trace id -> its EVAL score
    observations: int = 0
    scores: int = 0


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")  # the export's timestamps (UTC, no zone)


def export_rows(traces: int, seed: int = 0) -> tuple[dict[str, list[dict[str, Any]]], ExportTruth]:
    """The rows of each export table for ``traces`` traces, and the truth."""
    rng = random.Random(seed)
    truth = ExportTruth()
    tables: dict[str, list[dict[str, Any]]] = {"traces": [], "observations_v2": [], "scores": []}
    t = START
    i = 0
    n_session = 0
    while i < traces:
        n_session += 1
        length = min(rng.randint(1, 4), traces - i)
        has_session = n_session % 7 != 0  # every 7th conversation is one trace without a session id
        length = length if has_session else 1
        session_key = f"sess-{seed}-{n_session:06d}" if has_session else None
        user = f"user-{rng.randint(1, 50):03d}" if n_session % 5 else None
        model = MODELS[n_session % len(MODELS)]
        release = f"v{1 + n_session % 2}.0"
        history: list[dict[str, str]] = []
        session: SessionTruth | None = None
        for turn in range(length):
            trace_id = f"{rng.getrandbits(128):032x}"  # a W3C trace id, as Langfuse's SDKs make them
            words = f"please fix issue {i} in module {rng.randint(1, 99)} (turn {turn + 1})"
            if session is None:
                session = SessionTruth(session_key or trace_id, user, release=release, model=model)
                truth.sessions[session.session_id] = session
            session.trace_ids.append(trace_id)
            session.user_words.append(words)
            t += timedelta(seconds=rng.randint(30, 600))
            tables["traces"].append(
                {
                    "id": trace_id,
                    "timestamp": t,
                    "name": "agent-turn",
                    "environment": "production",
                    "project_id": "proj-synth",
                    "metadata": json.dumps({"team": "core"}),
                    "user_id": user,
                    "session_id": session_key,
                    "release": release,
                    "version": "2",
                    "public": False,
                    "bookmarked": False,
                    "tags": ["synthetic"],
                    "input": json.dumps({"messages": [*history, {"role": "user", "content": words}]}),
                    "output": json.dumps({"role": "assistant", "content": f"done with {i}"}),
                    "created_at": t,
                    "updated_at": t,
                }
            )
            conversation = [{"role": "system", "content": "You are a coding agent."}, *history]
            conversation.append({"role": "user", "content": words})
            root = f"{rng.getrandbits(64):016x}"
            for k, (kind, name) in enumerate(
                (("SPAN", "agent-run"), ("GENERATION", "plan"), ("TOOL", "run_tests"), ("GENERATION", "answer"))
            ):
                start = t + timedelta(milliseconds=10 * k)
                prompt, completion = rng.randint(100, 3000), rng.randint(10, 500)
                cost = round((prompt * 2 + completion * 8) / 1e6, 8)
                row: dict[str, Any] = {
                    "id": root if k == 0 else f"{rng.getrandbits(64):016x}",
                    "trace_id": trace_id,
                    "project_id": "proj-synth",
                    "environment": "production",
                    "type": kind,
                    "parent_observation_id": None if k == 0 else root,
                    "is_root_observation": k == 0,
                    "name": name,
                    "level": "DEFAULT",
                    "status_message": None,
                    "version": "2",
                    "user_id": user,
                    "session_id": session_key,
                    "trace_name": "agent-turn",
                    "start_time": start,
                    "end_time": start + timedelta(milliseconds=8),
                    "provided_model_name": model if kind == "GENERATION" else None,
                    "usage_details": {"input": prompt, "output": completion, "total": prompt + completion}
                    if kind == "GENERATION"
                    else {},
                    "cost_details": {"total": cost} if kind == "GENERATION" else {},
                    "total_cost": cost if kind == "GENERATION" else None,
                    "input": json.dumps(conversation)
                    if kind == "GENERATION"
                    else json.dumps({"path": "tests/"})
                    if kind == "TOOL"
                    else json.dumps({"messages": [*history, {"role": "user", "content": words}]}),
                    "output": json.dumps({"role": "assistant", "content": f"step {k} of {i}"}),
                    "metadata": "{}",
                    "tags": ["synthetic"],
                    "release": release,
                }
                if kind == "GENERATION":
                    session.cost += cost
                    session.prompt_tokens += prompt
                    session.completion_tokens += completion
                tables["observations_v2"].append(row)
                truth.observations += 1
            history += [{"role": "user", "content": words}, {"role": "assistant", "content": f"done with {i}"}]
            if i % 3 == 0:
                stars = float(rng.randint(1, 5))
                tables["scores"].append(_score(f"fb-{i}", trace_id, "user-feedback", stars, "NUMERIC", "API", t))
                truth.ratings[trace_id] = (stars, "stars_1_5")
            elif i % 3 == 1:
                thumb = float(rng.randint(0, 1))
                tables["scores"].append(_score(f"th-{i}", trace_id, "thumbs", thumb, "BOOLEAN", "ANNOTATION", t))
                truth.ratings[trace_id] = (thumb, "thumbs")
            value = round(rng.random(), 3)
            tables["scores"].append(_score(f"ev-{i}", trace_id, "hallucination", value, "NUMERIC", "EVAL", t))
            truth.evals[trace_id] = value
            i += 1
    truth.scores = len(tables["scores"])
    return tables, truth


def _score(score_id: str, trace_id: str, name: str, value: float, data_type: str, source: str, t: datetime) -> dict:
    return {
        "id": score_id,
        "timestamp": t + timedelta(seconds=5),
        "project_id": "proj-synth",
        "environment": "production",
        "trace_id": trace_id,
        "observation_id": None,
        "session_id": None,
        "dataset_run_id": None,
        "name": name,
        "value": value,
        "source": source,
        "comment": None,
        "data_type": data_type,
        "string_value": ("True" if value else "False") if data_type == "BOOLEAN" else None,
        "created_at": t + timedelta(seconds=5),
        "updated_at": t + timedelta(seconds=5),
    }


def write_export(
    folder: Path, traces: int, fmt: str = "jsonl", seed: int = 0, tables: tuple[str, ...] | None = None
) -> ExportTruth:
    """Write an export of ``traces`` traces (``OBSERVATIONS_PER_TRACE`` observations each) under ``folder`` in
    the file kind ``fmt`` (``FORMATS``); ``tables`` limits which folders are written (a later drop of scores
    alone). Returns the truth."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: expected one of {', '.join(FORMATS)}")
    rows, truth = export_rows(traces, seed)
    for table, table_rows in rows.items():
        if tables is not None and table not in tables:
            continue
        out = folder / "proj-synth" / table / f"2026-01-05T09-00-00.{fmt}"
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "parquet":
            _write_parquet(out, table_rows)
        else:
            out.write_bytes(_text(table_rows, fmt))
    return truth


def _plain(value: Any) -> Any:
    return _stamp(value) if isinstance(value, datetime) else value


def _text(rows: list[dict[str, Any]], fmt: str) -> bytes:
    if fmt == "jsonl":
        return "".join(json.dumps({k: _plain(v) for k, v in r.items()}) + "\n" for r in rows).encode()
    if fmt == "json":
        return json.dumps([{k: _plain(v) for k, v in r.items()} for r in rows]).encode()
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    names = list(rows[0]) if rows else []
    writer.writerow(names)
    for r in rows:
        cells = []
        for name in names:
            v = _plain(r[name])
            cells.append(
                ""
                if v is None
                else json.dumps(v)
                if isinstance(v, dict | list)
                else str(v).lower()
                if isinstance(v, bool)
                else v
            )
        writer.writerow(cells)
    return buffer.getvalue().encode()


def _write_parquet(out: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = list(rows[0]) if rows else []
    arrays = {}
    for name in names:
        values = [r[name] for r in rows]
        if name in ("usage_details", "cost_details"):
            arrays[name] = pa.array([list(v.items()) for v in values], type=pa.map_(pa.string(), pa.float64()))
        elif name in ("metadata", "input", "output") and any(isinstance(v, dict | list) for v in values):
            arrays[name] = pa.array([json.dumps(v) if v is not None else None for v in values], type=pa.string())
        elif name == "tags":
            arrays[name] = pa.array(values, type=pa.list_(pa.string()))
        else:
            arrays[name] = pa.array(values)
    pq.write_table(pa.table(arrays), out)
