"""Memory of reading one drop, by the shape of its largest record (issue 34, item 4): the target is 1.5 GiB peak.

    .venv/bin/python bench/ingest_memory.py                       # 50 MB message, 200 MB line, 1 GB file
    .venv/bin/python bench/ingest_memory.py --cases message --message-mb 60
    .venv/bin/python bench/ingest_memory.py --message-mb 1 --line-mb 1 --file-mb 2 --max-record-mb 0.5  # a smoke run

Each case is a drop written into a temporary folder, beside a file of 200 ordinary sessions:

- ``message``: one session whose user message is ``--message-mb`` MB (one JSON document, ``big.json``);
- ``line``: one line of ``--line-mb`` MB of nested arrays in a session's event (``nested.jsonl``), the shape that
  took 5.7 GB before; beyond ``PULSE_MAX_RECORD_MB`` it is quarantined unread;
- ``file``: ``--file-mb`` MB of ordinary sessions in one JSONL file (``sessions.jsonl``), about 2 KB each.

The drop is loaded (``load_drop``, the reading stage of ``pulse ingest``: the reader processes and the append) into
a fresh home's warehouse, on the configured storage (the DuckLake by default), in a fresh interpreter. It prints the
seconds, what was read, accepted and quarantined (and why), the peak RSS of that process and of its process tree
(the reader processes; sampled every 0.2 s by ``_measure.tree_rss_mib``), and whether the tree stayed under
1.5 GiB. ``--max-record-mb`` sets ``PULSE_MAX_RECORD_MB`` for the run (default: the setting's own default).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import orjson
from _measure import _timed

TARGET_MIB = 1.5 * 1024
CASES = ("message", "line", "file")

# Loads the drop argv[1] into the home's warehouse and prints its tally, then this process's peak RSS (MiB) last.
_LOAD_CHILD = """
import json, resource, sys, time
from dataclasses import asdict
from pathlib import Path
from pulse_pipeline.ingest.load import load_drop, reconcile_drop
from pulse_pipeline.paths import PulseHome
from pulse_pipeline.connections import connect
from pulse_pipeline.warehouse import Warehouse

if __name__ == "__main__":
    home = PulseHome.from_env().ensure()
    con = connect(home.warehouse)
    wh = Warehouse(con)
    started = time.perf_counter()
    tally = load_drop(wh, "bench", Path(sys.argv[1]))
    seconds = time.perf_counter() - started
    ok, _ = reconcile_drop(wh, "bench")
    reasons = [r[0] for r in con.execute("SELECT reason FROM raw.quarantine ORDER BY source_file").fetchall()]
    con.close()
    print(json.dumps({**asdict(tally), "load_seconds": seconds, "reconciled": ok, "reasons": reasons}))
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def session(session_id: str, message: str, turns: int = 1) -> dict:
    """A canonical session: per turn a user message, an agent command with its output, an agent reply."""
    events = []
    for t in range(turns):
        events += [
            {"id": f"{t}u", "source": "user", "type": "message", "text": message},
            {"id": f"{t}c", "source": "agent", "type": "run", "command": f"pytest tests/test_{t}.py -q"},
            {"id": f"{t}o", "source": "environment", "type": "run", "text": "3 passed in 0.41s", "exit_code": 0},
            {"id": f"{t}a", "source": "agent", "type": "message", "text": "Done: the tests pass.",
             "wait_for_response": True},
        ]  # fmt: skip
    return {"session_id": session_id, "events": events}


def write_good(folder: Path, n: int = 200) -> None:
    with (folder / "good.jsonl").open("wb") as out:
        for i in range(n):
            out.write(orjson.dumps(session(f"good-{i}", f"please fix bug {i} in the parser")) + b"\n")


def write_message(folder: Path, mb: float) -> None:
    """One session whose first user message is ``mb`` MB of text (words, so it compresses as text does)."""
    words = b"the parser fails on nested input again "
    text = (words * (int(mb * 1e6) // len(words) + 1))[: int(mb * 1e6)].decode()
    (folder / "big.json").write_bytes(orjson.dumps(session("big-message", text)))


def write_line(folder: Path, mb: float) -> None:
    """One JSON line of ``mb`` MB, most of it nested arrays inside an event, written a block at a time."""
    unit = b"[[1,2],[3,[4,5]],[[6]]],"
    total = int(mb * 1e6)
    with (folder / "nested.jsonl").open("wb") as out:
        out.write(b'{"session_id":"nested","events":[{"id":"1","source":"user","type":"message","text":"hi","x":[')
        block = unit * 40_000
        written = 0
        while written + len(block) < total:
            out.write(block)
            written += len(block)
        out.write(unit * max(0, (total - written) // len(unit)))
        out.write(b"0]}]}\n")


def write_file(folder: Path, mb: float) -> None:
    """``mb`` MB of ordinary sessions (three turns, ~2 KB each) in one JSONL file."""
    total = int(mb * 1e6)
    written = i = 0
    with (folder / "sessions.jsonl").open("wb") as out:
        while written < total:
            line = orjson.dumps(session(f"s-{i}", f"please fix bug {i}: the parser fails on input {i * 7}", 3))
            out.write(line + b"\n")
            written += len(line) + 1
            i += 1


WRITERS = {"message": write_message, "line": write_line, "file": write_file}


def run_case(case: str, mb: float, workdir: Path, max_record_mb: float | None) -> float:
    """Write the case's drop, load it in a fresh interpreter, print its figures; the tree's peak MiB."""
    drop = workdir / f"drop-{case}"
    drop.mkdir(parents=True)
    write_good(drop)
    WRITERS[case](drop, mb)
    size = sum(f.stat().st_size for f in drop.iterdir())
    if max_record_mb is not None:
        os.environ["PULSE_MAX_RECORD_MB"] = str(max_record_mb)
    seconds, summary, rss = _timed(workdir / f"home-{case}", _LOAD_CHILD, str(drop), f"loading the {case} drop")
    tree = summary["tree_rss_mib"]
    print(
        f"{case:7} ({mb:g} MB case, drop {size / 1e6:.0f} MB): load {summary['load_seconds']:.1f} s "
        f"(process {seconds:.1f} s); {summary['records_read']} records read, {summary['records_accepted']} "
        f"accepted, {summary['records_quarantined']} quarantined, reconciled={summary['reconciled']}; peak RSS "
        f"{rss:.0f} MiB process, {tree:.0f} MiB process tree ({'under' if tree < TARGET_MIB else 'OVER'} "
        f"{TARGET_MIB:.0f} MiB)"
    )
    for reason in summary["reasons"]:
        print(f"  quarantined: {reason[:160]}")
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: message, line, file")
    parser.add_argument("--message-mb", type=float, default=50.0)
    parser.add_argument("--line-mb", type=float, default=200.0)
    parser.add_argument("--file-mb", type=float, default=1000.0)
    parser.add_argument("--max-record-mb", type=float, default=None, help="PULSE_MAX_RECORD_MB for the run")
    parser.add_argument("--workdir", type=Path, default=None, help="where drops and homes go (default: a temp dir)")
    args = parser.parse_args()
    sizes = {"message": args.message_mb, "line": args.line_mb, "file": args.file_mb}
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown case(s) {', '.join(sorted(unknown))}: choose from {', '.join(CASES)}")
    with tempfile.TemporaryDirectory(prefix="pulse-bench-memory-", dir=args.workdir) as tmp:
        peaks = {case: run_case(case, sizes[case], Path(tmp), args.max_record_mb) for case in cases}
    worst = max(peaks, key=peaks.get)
    print(f"largest process-tree peak: {peaks[worst]:.0f} MiB ({worst}); target {TARGET_MIB:.0f} MiB")


if __name__ == "__main__":
    main()
