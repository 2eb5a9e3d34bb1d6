"""Reading an OpenTelemetry Collector's file export (``ingest/otel.py``): spans per second and peak memory.

Writes an export of ``--traces`` agent runs in the GenAI conventions (per trace: an ``invoke_agent`` root with the
user's question, two ``chat`` calls carrying the history and usage, one ``execute_tool``; five traces a
conversation), as the Collector writes it (compact JSON, 100 traces a line, random trace ids), then reads it as a
drop is read (``drop.drop_units`` -> ``plan_reads`` -> ``read_piece``, one process) and prints the figures. The
whole export is held until its sessions are known (a trace's spans may be on any line), so memory grows with it:
the figure to read is the peak against the file's size.

    .venv/bin/python bench/otel_export.py --traces 25000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pulse_pipeline.ingest.drop import drop_units, plan_reads, read_piece  # noqa: E402

T0 = 1_796_032_800  # 2026-11-30 10:00 UTC


def _value(v: object) -> dict:
    if isinstance(v, int):
        return {"intValue": str(v)}
    return {"stringValue": v}


def _span(trace: str, span: str, parent: str, name: str, start: float, end: float, attributes: dict) -> dict:
    return {
        "traceId": trace,
        "spanId": span,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(int((T0 + start) * 1e9)),
        "endTimeUnixNano": str(int((T0 + end) * 1e9)),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
        "status": {},
    }


def _text(role: str, content: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def write_export(path: Path, traces: int, seed: int = 0) -> int:
    """The export, 100 traces a line; returns the number of spans."""
    rng = random.Random(seed)
    spans_written = 0
    with path.open("w") as f:
        for first in range(0, traces, 100):
            spans = []
            for t in range(first, min(first + 100, traces)):
                trace, root = f"{rng.getrandbits(128):032x}", f"{rng.getrandbits(64):016x}"
                conversation = f"conv-{t // 5}"
                question = f"question {t}: why does the build fail?"
                spans.append(
                    _span(trace, root, "", "invoke_agent", t, t + 10, {
                        "gen_ai.operation.name": "invoke_agent",
                        "gen_ai.conversation.id": conversation,
                        "gen_ai.input.messages": json.dumps([_text("user", question)]),
                    })
                )  # fmt: skip
                history = [_text("system", "Be brief."), _text("user", question)]
                for k in range(2):
                    spans.append(
                        _span(trace, f"{rng.getrandbits(64):016x}", root, "chat", t + 1 + 3 * k, t + 3 + 3 * k, {
                            "gen_ai.operation.name": "chat",
                            "gen_ai.conversation.id": conversation,
                            "gen_ai.request.model": "gpt-4o",
                            "gen_ai.input.messages": json.dumps(history),
                            "gen_ai.output.messages": json.dumps([_text("assistant", "An answer. " * 12)]),
                            "gen_ai.usage.input_tokens": 100,
                            "gen_ai.usage.output_tokens": 20,
                        })
                    )  # fmt: skip
                spans.append(
                    _span(trace, f"{rng.getrandbits(64):016x}", root, "execute_tool", t + 4, t + 5, {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "run_tests",
                        "gen_ai.tool.call.arguments": "{}",
                        "gen_ai.tool.call.result": "1 failed",
                    })
                )  # fmt: skip
            document = {
                "resourceSpans": [
                    {
                        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "bench"}}]},
                        "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}],
                    }
                ]
            }
            f.write(json.dumps(document, separators=(",", ":")) + "\n")
            spans_written += len(spans)
    return spans_written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=25_000, help="agent runs (4 spans each; default 25 000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pulse-otel-bench-") as folder:
        drop = Path(folder) / "export"
        drop.mkdir()
        n_spans = write_export(drop / "traces.json", args.traces)
        size = (drop / "traces.json").stat().st_size
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        sessions = events = 0
        for read in plan_reads(drop_units(drop)):
            for piece in read:
                for batch in read_piece("bench", piece):
                    sessions += len(batch.columns["raw.sessions"]["session_id"])
                    events += len(batch.columns["raw.events"]["event_id"])
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"OTLP export: {n_spans:,} spans, {args.traces:,} traces, {size / 1e6:.0f} MB in one file")
    print(f"read: {seconds:.1f} s, {n_spans / seconds:,.0f} spans/s; {sessions:,} sessions, {events:,} events")
    print(f"peak memory: {peak / 1024:.0f} MB (before reading {before / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
