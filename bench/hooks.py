"""How long `pulse hook` makes an agent wait: the import, and a whole Stop hook call against a fake service.

Prints, over --runs fresh interpreters each:
- the import of `pulse_pipeline.cli` with `pulse_pipeline.hooks.claude_code` (what `pulse hook` loads), in ms;
- whether polars, pyarrow, duckdb or dagster were imported (they must not be);
- a whole `pulse hook claude-code` Stop call on a generated Claude Code transcript of --turns turns, the service
  a loopback server answering `ask: true` at once, in ms.

    .venv/bin/python bench/hooks.py [--runs 5] [--turns 200]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

IMPORT_CODE = """
import sys, time
t = time.perf_counter()
import pulse_pipeline.cli, pulse_pipeline.hooks.claude_code, pulse_pipeline.hooks.codex, pulse_pipeline.hooks.openhands
ms = (time.perf_counter() - t) * 1000
heavy = sorted(m for m in ("polars", "pyarrow", "duckdb", "dagster", "numpy") if m in sys.modules)
print(ms, ",".join(heavy) or "-")
"""


class _Answer(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"ask": True, "probability": 0.5, "policy_version": "bench", "rate_url": "http://x/rate/s"})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _transcript(folder: Path, turns: int) -> Path:
    path = folder / "generated.jsonl"
    with path.open("w") as f:
        for i in range(turns):
            stamp = f"2025-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z"
            f.write(json.dumps({"type": "user", "sessionId": "bench", "uuid": f"u{i}", "timestamp": stamp,
                                "message": {"role": "user", "content": f"do step {i}"}}) + "\n")  # fmt: skip
            f.write(json.dumps({"type": "assistant", "sessionId": "bench", "uuid": f"a{i}", "timestamp": stamp,
                                "message": {"role": "assistant", "id": f"m{i}", "stop_reason": "end_turn",
                                            "content": [{"type": "text", "text": "done"}]}}) + "\n")  # fmt: skip
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=500)
    args = parser.parse_args()
    imports, heavy = [], set()
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", IMPORT_CODE], capture_output=True, text=True, check=True).stdout
        ms, loaded = out.split()
        imports.append(float(ms))
        heavy.update(m for m in loaded.split(",") if m != "-")
    print(f"import of pulse hook's modules: median {statistics.median(imports):.0f} ms over {args.runs} runs")
    print(f"heavy modules imported: {', '.join(sorted(heavy)) or 'none'}")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    pulse = Path(sys.executable).with_name("pulse")
    with tempfile.TemporaryDirectory() as tmp:
        transcript = _transcript(Path(tmp), args.turns)
        lines = sum(1 for _ in transcript.open())
        calls, cpu = [], []
        for i in range(args.runs):
            env = dict(os.environ, PULSE_HOOK_URL=f"http://127.0.0.1:{server.server_port}",
                       PULSE_HOOK_STATE=str(Path(tmp) / f"state{i}"))  # fmt: skip
            payload = json.dumps({"session_id": f"bench-{i}", "hook_event_name": "Stop",
                                  "transcript_path": str(transcript), "stop_hook_active": False})  # fmt: skip
            start, used = time.perf_counter(), _children_cpu()
            done = subprocess.run([str(pulse), "hook", "claude-code"], input=payload, env=env, capture_output=True,
                                  text=True)  # fmt: skip
            calls.append((time.perf_counter() - start) * 1000)
            cpu.append((_children_cpu() - used) * 1000)
            assert done.returncode == 0 and "systemMessage" in done.stdout, done.stderr
    server.shutdown()
    print(
        f"whole `pulse hook claude-code` Stop call, transcript of {lines} lines ({transcript.name}): "
        f"median {statistics.median(calls):.0f} ms, max {max(calls):.0f} ms over {args.runs} runs; CPU time (user +"
        f" system, what the machine's load does not inflate) median {statistics.median(cpu):.0f} ms"
    )


if __name__ == "__main__":
    main()
