"""Ingestion benchmark: a paper-scale synthetic corpus through `pulse ingest`, against orjson's parse-only floor.

    .venv/bin/python bench/ingest.py                # 36 000 sessions, 15 000 users (the paper's scale)
    .venv/bin/python bench/ingest.py --sessions 5000 --drops 4
    .venv/bin/python bench/ingest.py --sessions 100000 --layout both --workdir /tmp/bench

Prints sessions/s, events/s, MB/s of reading the drop into the raw tables, then the time `pulse ingest` takes to
rebuild every derived table after it, and the command's peak RSS (a child process, so its RSS is its own) once the
drop is read and over the whole command, the rate at which orjson merely parses the same files, and the ratio of
the two. With --drops K the corpus is also split into K drops ingested one after another into one PULSE_HOME,
printing each one's peak RSS: reading a drop must not take more memory as drops accumulate (the rebuild works on
every drop ingested so far, so its memory grows with them).

With --load-only only `load_drop` runs, in this process, into a fresh warehouse of the configured storage (one
file, or the DuckLake PULSE_LAKE_CATALOG selects): the reader processes and the append, without the command's
start-up (imports, Dagster, copying the drop), which does not grow with the drop. It prints its wall time, MB/s and
ratio to orjson's rate, and the CPU seconds of this process (the append, and how much of the wall time went to it)
and of the reader processes: the figure issue 16's target (a third of orjson's rate) is measured on.

With --layout the corpus's sessions are ingested as a folder of small files instead, the shape of per-session
downloads: ``files`` writes one OpenHands V0 event array per session (``<session_id>.json``), ``jsonl`` the same
sessions as one JSONL file, both beside the same ratings.csv and assignments.csv; ``both`` runs the two and prints
their ratio (the files layout must stay within 2x of the JSONL one, in time and in memory). For each it prints
sessions/s, events/s, MB/s and the peak RSS of the `pulse ingest` process while it reads the drop and over the whole
command (the reader processes it starts for a large drop are apart). The layouts are written once into --workdir
and kept.
"""

from __future__ import annotations

import argparse
import csv
import resource
import shutil
import tempfile
import time
from pathlib import Path

import orjson
from _measure import pulse_ingest

from pulse_pipeline.connections import connect
from pulse_pipeline.ingest.load import load_drop
from pulse_pipeline.settings import lake_settings
from pulse_pipeline.synth import write_corpus
from pulse_pipeline.warehouse import Warehouse

ROOT = Path(__file__).resolve().parent.parent


def parse_only(folder: Path) -> tuple[float, int]:
    """Seconds for orjson to parse every data file of the corpus (line by line for JSONL), and bytes read."""
    files = [p for p in sorted(folder.iterdir()) if p.suffix in (".jsonl", ".json") and not p.name.startswith("_")]
    started = time.perf_counter()
    total = 0
    for f in files:
        data = f.read_bytes()
        total += len(data)
        if f.suffix == ".jsonl":
            for line in data.split(b"\n"):
                if line:
                    orjson.loads(line)
        else:
            orjson.loads(data)
    return time.perf_counter() - started, total


def data_bytes(folder: Path) -> int:
    """Bytes of the files an ingest reads (names starting with ``_`` or ``.`` are sidecars)."""
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file() and not f.name.startswith(("_", ".")))


def write_layout(corpus: Path, layout: str, folder: Path) -> None:
    """The corpus's sessions as ``files`` (one V0 event array per session, named by its id) or ``jsonl`` (one
    JSONL file), each beside ratings.csv (the corpus's ratings.jsonl as CSV) and the corpus's assignments.csv.
    Written into a fresh folder; ``_complete`` marks it finished, so an interrupted write is redone."""
    if (folder / "_complete").exists():
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    started = time.perf_counter()
    session_files = sorted(p for p in corpus.iterdir() if p.name.startswith("sessions-"))
    if layout == "jsonl":
        with (folder / "sessions.jsonl").open("wb") as out:
            for f in session_files:
                out.write(f.read_bytes())
    else:
        for f in session_files:
            for line in f.read_bytes().splitlines():
                session = orjson.loads(line)
                (folder / f"{session['session_id']}.json").write_bytes(orjson.dumps(session["history"]))
    ratings = [orjson.loads(line) for line in (corpus / "ratings.jsonl").read_bytes().splitlines() if line]
    with (folder / "ratings.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=["id", "conversation_id", "event_id", "rating", "reason", "created_at"])
        writer.writeheader()
        writer.writerows(ratings)
    shutil.copy2(corpus / "assignments.csv", folder / "assignments.csv")
    (folder / "_complete").touch()
    n_files = sum(1 for _ in folder.iterdir()) - 1
    print(f"wrote the {layout} layout: {n_files} files in {time.perf_counter() - started:.1f} s ({folder})")


def compare_layouts(corpus: Path, layouts: list[str], workdir: Path) -> None:
    """`pulse ingest` of each layout into a fresh PULSE_HOME; prints its rates, its peak RSS, and the ratio."""
    read_seconds: dict[str, float] = {}
    read_rss: dict[str, float] = {}
    for layout in layouts:
        folder = workdir / f"{corpus.name}-{layout}"
        write_layout(corpus, layout, folder)
        mb = data_bytes(folder) / 1e6
        n_files = sum(1 for f in folder.iterdir() if not f.name.startswith(("_", ".")))
        with tempfile.TemporaryDirectory(prefix="pulse-bench-") as tmp:
            total, summary, rss = pulse_ingest(Path(tmp) / "home", folder)
        seconds = summary["read_seconds"]
        read_seconds[layout], read_rss[layout] = seconds, summary["read_rss_mib"]
        print(
            f"{layout:5} layout ({n_files} files, {mb:.0f} MB): {seconds:6.1f} s  {mb / seconds:6.1f} MB/s  "
            f"{summary['sessions'] / seconds:7.0f} sessions/s  {summary['events'] / seconds:8.0f} events/s  "
            f"peak RSS {summary['read_rss_mib']:.0f} MiB reading, {rss:.0f} MiB whole command"
        )
        print(
            f"  {summary['sessions']} sessions, {summary['events']} events, {summary['ratings']} ratings, "
            f"{summary['quarantined']} quarantined, reconciled={summary['reconciled']}; "
            f"{summary['setup_seconds']:.1f} s of the reading before the run starts (copying the drop into the drop "
            f"folder, Dagster); derived tables {summary['derived_seconds']:.1f} s, whole command {total:.1f} s"
        )
    if len(layouts) == 2:
        print(
            f"files/jsonl: reading takes {read_seconds['files'] / read_seconds['jsonl']:.2f}x the time "
            f"(throughput ratio jsonl/files), peak RSS reading {read_rss['files'] / read_rss['jsonl']:.2f}x"
        )


class _TimedWarehouse(Warehouse):
    """A warehouse that adds up the wall time its appends take (``load_drop`` appends through ``insert``)."""

    def __init__(self, con) -> None:
        super().__init__(con)
        self.append_seconds = 0.0

    def insert(self, t, data) -> None:
        started = time.perf_counter()
        super().insert(t, data)
        self.append_seconds += time.perf_counter() - started


def load_only(corpus: Path, workdir: Path, parse_s: float, mb: float) -> None:
    """`load_drop` of the corpus into a fresh warehouse: wall, MB/s, ratio to orjson, CPU of the append and readers.

    CPU seconds come from ``getrusage``: this process's own, and its children's once they have ended (the reader
    processes end with ``load_drop``)."""
    storage = "one file" if lake_settings() is None else f"DuckLake ({lake_settings().catalog} catalog)"
    workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pulse-bench-", dir=workdir) as tmp:
        con = connect(Path(tmp) / "work.duckdb")
        try:
            wh = _TimedWarehouse(con)
            me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            tally = load_drop(wh, "bench", corpus)
            seconds = time.perf_counter() - started
            me_after, children_after = (
                resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN),
            )
        finally:
            con.close()
    own = (me_after.ru_utime + me_after.ru_stime) - (me.ru_utime + me.ru_stime)
    readers = (children_after.ru_utime + children_after.ru_stime) - (children.ru_utime + children.ru_stime)
    print(
        f"load_drop alone   : {seconds:6.2f} s  {mb / seconds:7.1f} MB/s  ratio to orjson {parse_s / seconds:.2f}"
        f"  ({storage}; {tally.events_read} events, {tally.records_read} records)"
    )
    print(
        f"  CPU seconds: {own + readers:.1f} in all, {own:.1f} in this process (appending took"
        f" {wh.append_seconds:.1f} s of the wall time), {readers:.1f} in the reader processes"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=36_000)
    ap.add_argument("--users", type=int, default=None)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--drops", type=int, default=4, help="also ingest the corpus split into this many drops")
    ap.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    ap.add_argument(
        "--layout",
        choices=("files", "jsonl", "both"),
        help="ingest the sessions as one small file each, as one JSONL file, or both and compare (see above)",
    )
    ap.add_argument("--load-only", action="store_true", help="time load_drop alone (see above)")
    args = ap.parse_args()

    corpus = args.workdir / f"corpus-{args.sessions}-seed{args.seed}"
    if not (corpus / "_truth.json").exists():
        started = time.perf_counter()
        # at least one sessions file per drop of --drops (an empty drop is refused, and would measure nothing)
        per_file = min(2000, -(-args.sessions // max(args.drops, 1)))
        s = write_corpus(corpus, args.sessions, seed=args.seed, n_users=args.users, sessions_per_file=per_file)
        print(
            f"generated {s.n_sessions} sessions ({s.n_events} events, {s.bytes_written / 1e6:.0f} MB) "
            f"in {time.perf_counter() - started:.1f} s"
        )
    if args.layout:
        compare_layouts(corpus, ["jsonl", "files"] if args.layout == "both" else [args.layout], args.workdir)
        return

    parse_s, nbytes = parse_only(corpus)
    mb = nbytes / 1e6
    print(f"orjson parse only : {parse_s:6.2f} s  {mb / parse_s:7.1f} MB/s  ({mb:.0f} MB)")
    if args.load_only:
        load_only(corpus, args.workdir, parse_s, mb)
        return

    with tempfile.TemporaryDirectory(prefix="pulse-bench-") as tmp:
        total, summary, rss = pulse_ingest(Path(tmp) / "home", corpus)
    seconds = summary["read_seconds"]  # the drop into the raw tables; the rebuild of derived tables is apart
    print(
        f"pulse ingest      : {seconds:6.2f} s  {mb / seconds:7.1f} MB/s  "
        f"{summary['sessions'] / seconds:8.0f} sessions/s  {summary['events'] / seconds:9.0f} events/s  "
        f"peak RSS {summary['read_rss_mib']:.0f} MiB reading, {rss:.0f} MiB whole command"
    )
    print(
        f"  {summary['sessions']} sessions, {summary['events']} events, {summary['segments']} segments, "
        f"{summary['ratings']} ratings, {summary['quarantined']} quarantined, reconciled={summary['reconciled']}"
    )
    print(
        f"  then every derived table rebuilt (staging to estimates): {summary['derived_seconds']:.1f} s;"
        f" the whole command {total:.1f} s"
    )
    print(f"ratio ingest/parse-only throughput: {parse_s / seconds:.2f}")

    if args.drops > 1:
        files = sorted(p for p in corpus.iterdir() if p.name.startswith("sessions-"))
        with tempfile.TemporaryDirectory(prefix="pulse-bench-") as tmp:
            home = Path(tmp) / "home"
            chunks = [files[i :: args.drops] for i in range(args.drops)]
            for k, chunk in enumerate(chunks, start=1):
                drop = Path(tmp) / f"part-{k}"
                drop.mkdir()
                for f in chunk:
                    shutil.copy2(f, drop / f.name)
                seconds, summary, rss = pulse_ingest(home, drop)
                print(
                    f"drop {k}/{args.drops}: {summary['sessions']} sessions in {seconds:5.1f} s, peak RSS "
                    f"{summary['read_rss_mib']:.0f} MiB reading, {rss:.0f} MiB whole command"
                )


if __name__ == "__main__":
    main()
