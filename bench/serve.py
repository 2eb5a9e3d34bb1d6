"""Rating-service benchmark: `pulse serve` on loopback under bounded clients, then SIGKILLed and restarted.

    .venv/bin/python bench/serve.py                       # 10 s a phase, 16 connections in 2 client processes
    .venv/bin/python bench/serve.py --seconds 3 --connections 8 --client-processes 1 --ingest load

A real `pulse serve` (a subprocess, the defaults of PULSE_SERVE_ROLL_*, no rate limit) on a fresh PULSE_HOME. The
clients are raw asyncio HTTP/1.1 keep-alive connections (uvloop), in ``--client-processes`` processes so that the
clients are not what limits the rate on a small machine; each connection sends one request, waits for its answer,
sends the next (a closed loop: ``--connections`` requests at most under way), and every phase stops by itself after
``--seconds``. Why 16 connections by default: in a closed loop the latency is the requests under way over the rate
(Little's law), so on two cores shared by server and clients 64 connections measure mostly their own queue (at
5 300 ratings/s: p50 8 ms, p99 157 ms), while 16 keep the server busy (4 800/s) and measure its latency.

It prints, per phase, the acknowledged requests a second and the p50 and p99 latency seen by the clients (request
written to answer read):

1. **asks**: ``POST /v1/asks`` for a new session each (each a coin flipped and journaled before the answer);
2. **ratings**: ``POST /v1/ratings``, each with its own idempotency key;
3. **kill-restart**: ratings again while the server is SIGKILLed and restarted ``--kills`` times; a rating whose
   answer did not come is sent again with the same key until it is acknowledged (as any client must), then the
   server is stopped (SIGTERM: its last roll), the day's drop folder is ingested into a fresh PULSE_HOME
   (``--ingest pulse``: `pulse ingest`, which publishes ``pulse.duckdb``, read back as analysts read it;
   ``--ingest load``: ingest's ``load_drop`` into an in-memory warehouse, the same reader without Dagster, for a
   quick run), and ``raw.ratings`` must hold exactly the ratings the clients saw acknowledged: none missing, none
   twice, the stars sent. Exit 1 when it does not.

The machine's load average is printed before and after: the figures are only as good as the cores were free.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATE, TARGET_P99_MS = 2000.0, 50.0

LIVE = """--live: the published warehouse's lag behind the acknowledged ratings (issue 35, "Live freshness").

    .venv/bin/python bench/serve.py --live --home /tmp/live-home --minutes 10      # a `pulse demo --sessions 36000`

The home is copied (``--workdir``; default a temporary folder), `dagster-daemon run` starts on the copy (the drop,
publish and automation sensors and the run queue, as `pulse ui` runs them), and a real `pulse serve` on it rolls its
journal into the day's drop every ``--roll-seconds`` (PULSE_SERVE_ROLL_SECONDS). Bounded clients at a team's pace
(``--asks-per-second``, ``--ratings-per-second``, one keep-alive connection, paced, stopping after ``--minutes``)
ask for sessions the home holds and never rated (each its last work segment, with its
``features.event_features`` as a hook sends them), and rate the asked ones, those the
policy chose first, each rating with its own idempotency key (its rating id). Every second the published
`pulse.duckdb` is read as an analyst reads it; for each published state the bench prints the lag, from a rating's
acknowledgement (the 2xx) to its first appearance there, largest and median over the ratings it shows first. At
the end: the drop's runs and their steps by stage, the longest lag against the 3-minute target, and whether it
keeps up (the states' longest lags not growing, and every acknowledged rating published after the clients stop).
"""


# --- the server ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(home: Path, port: int, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`pulse serve` on loopback, as a user starts it; returns once /healthz answers."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PULSE_SERVE")}
    environ |= {"PULSE_HOME": str(home), "PULSE_SERVE_RATE_LIMIT": "0"} | (env or {})
    with open(log, "a") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pulse_pipeline.cli", "serve", "--port", str(port)],
            cwd=ROOT,
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"pulse serve exited {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return process
        except OSError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"pulse serve did not answer within 180 s:\n{log.read_text()[-3000:]}")


# --- the clients --------------------------------------------------------------------------------------------


def request_bytes(path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes) -> int:
    """Send one request, read its whole answer; its status."""
    writer.write(data)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return status


async def connection(port: int, kind: str, prefix: str, stop_at: float, stop, out: dict) -> None:
    """One keep-alive connection's closed loop until ``stop_at`` (or ``stop``, an Event, is set); a request that
    got no answer is sent again, same body, after reconnecting."""
    reader = writer = None
    i = 0
    while time.monotonic() < stop_at and not (stop is not None and stop.is_set()):
        key = f"{prefix}-{i:07d}"
        stars = 1 + i % 5
        if kind == "asks":
            path, body = "/v1/asks", orjson.dumps({"session_id": key, "segment_index": 0})
        else:
            path, body = "/v1/ratings", orjson.dumps({"session_id": f"s-{key}", "stars": stars, "idempotency_key": key})
        data = request_bytes(path, body)
        i += 1
        while True:
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                started = time.perf_counter()
                status = await exchange(reader, writer, data)
                out["latency"].append(time.perf_counter() - started)
                if status in (200, 201):
                    if kind == "ratings":
                        out["acknowledged"][key] = stars
                    break
                out["errors"] += 1
                break
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                out["retried"] += 1  # the server is down (killed): reconnect and send it again
                if writer is not None:
                    writer.close()
                reader = writer = None
                if time.monotonic() > stop_at + 120:
                    raise RuntimeError(f"{key}: no answer for 2 minutes after the phase") from None
                await asyncio.sleep(0.05)
    if writer is not None:
        writer.close()


def client_process(port: int, kind: str, connections: int, seconds: float, name: str, stop, results) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    out = {"latency": [], "acknowledged": {}, "errors": 0, "retried": 0}
    stop_at = time.monotonic() + seconds

    async def main() -> None:
        run = uuid.uuid4().hex[:6]
        await asyncio.gather(
            *(connection(port, kind, f"{name}{run}c{c}", stop_at, stop, out) for c in range(connections))
        )

    asyncio.run(main())
    results.put(out)


def run_clients(port: int, kind: str, connections: int, processes: int, seconds: float, during=None) -> dict:
    """``connections`` closed-loop connections in ``processes`` processes for ``seconds`` (or, with ``during``,
    until ``during(stop)`` returns: it sets nothing itself, the clients stop when it returns). Their figures,
    merged, and the wall time."""
    ctx = multiprocessing.get_context("spawn")
    results, stop = ctx.Queue(), ctx.Event()
    per = [connections // processes + (1 if i < connections % processes else 0) for i in range(processes)]
    limit = seconds if during is None else 86400.0
    workers = [
        ctx.Process(target=client_process, args=(port, kind, n, limit, f"p{i}", stop, results))
        for i, n in enumerate(per)
        if n
    ]
    started = time.perf_counter()
    for w in workers:
        w.start()
    if during is not None:
        during()
        stop.set()
    outs = [results.get(timeout=seconds + 600) for _ in workers]
    for w in workers:
        w.join()
    wall = time.perf_counter() - started
    merged = {"latency": [], "acknowledged": {}, "errors": 0, "retried": 0, "seconds": wall}
    for out in outs:
        merged["latency"] += out["latency"]
        merged["acknowledged"] |= out["acknowledged"]
        merged["errors"] += out["errors"]
        merged["retried"] += out["retried"]
    return merged


def gauges(port: int) -> dict[str, float]:
    """The service's gauges from /metrics (``pulse_serve_<name>``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        text = b""
        while chunk := s.recv(65536):
            text += chunk
    found = {}
    for row in text.decode().splitlines():
        if row.startswith("pulse_serve_") and "{" not in row and "_total" not in row:
            name, value = row.split(" ")
            found[name.removeprefix("pulse_serve_")] = float(value)
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def line(name: str, figures: dict, seconds: float, server_cpu: float) -> tuple[float, float]:
    """Print a phase's figures; the server's CPU per request says what a free core would carry, whatever the load."""
    ms = np.array(figures["latency"]) * 1000
    rate = len(ms) / seconds
    p50, p99 = (np.percentile(ms, 50), np.percentile(ms, 99)) if len(ms) else (float("nan"),) * 2
    per = server_cpu / max(1, len(ms)) * 1000
    print(
        f"{name:<9}: {len(ms):>8,} answered in {seconds:5.1f} s = {rate:7,.0f}/s; p50 {p50:6.2f} ms, p99 {p99:6.2f} ms;"
        f" {figures['errors']} refused; server CPU {per:.3f} ms a request ({1000 / per:,.0f}/s on one free core)"
    )
    return rate, p99


# --- reading the drops back ---------------------------------------------------------------------------------


def ingested_ratings(home: Path, how: str, workdir: Path) -> list[tuple[str, float]]:
    """(rating_id, rating) of every rating the service's drop folders hold, as ingest reads them."""
    folders = sorted(p for p in (home / "drops").iterdir() if p.name.startswith("serve-"))
    if how == "load":
        import duckdb

        from pulse_pipeline.ingest.load import load_drop
        from pulse_pipeline.warehouse import Warehouse

        wh = Warehouse(duckdb.connect())
        for folder in folders:
            load_drop(wh, folder.name, folder)
        return wh.con.execute("SELECT rating_id, rating FROM raw.ratings").fetchall()
    target = workdir / "warehouse-home"
    env = {**os.environ, "PULSE_HOME": str(target), "PULSE_MODEL_FAMILIES": "ordinal_logit", "PULSE_CV_SEEDS": "1"}
    for folder in folders:
        done = subprocess.run(
            [sys.executable, "-m", "pulse_pipeline.cli", "ingest", str(folder), "--json"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pulse ingest {folder} failed:\n{done.stderr[-3000:]}")
    import duckdb

    with duckdb.connect(str(target / "pulse.duckdb"), read_only=True) as con:
        return con.execute("SELECT rating_id, rating FROM raw.ratings").fetchall()


# --- live freshness ----------------------------------------------------------------------------------------


class PacedClients:
    """Asks and ratings at a steady pace over one keep-alive connection to a running `pulse serve` (a thread):
    ``asks_per_second`` asks, each for the next session of ``sessions`` (its last segment), and
    ``ratings_per_second`` ratings of sessions already asked (those the policy chose to ask first, then the others),
    each with its own idempotency key ``live-<n>``. ``acknowledged``: rating id -> wall time of its 2xx."""

    prefix = "live-"

    def __init__(
        self,
        port: int,
        sessions: list[tuple[str, int]],
        asks_per_second: float,
        ratings_per_second: float,
        every: float,
        start: Callable[[], subprocess.Popen],
    ):
        self.port, self.sessions = port, list(sessions)
        self.features: dict[str, dict[str, float]] = {}
        self.asks_per_second, self.ratings_per_second, self.every = asks_per_second, ratings_per_second, every
        self.start_server = start
        self.server: subprocess.Popen | None = None
        self.acknowledged: dict[str, float] = {}
        self.asked = {True: 0, False: 0}
        self.errors = 0
        self.halt = threading.Event()
        self.thread: threading.Thread | None = None

    def describe(self) -> str:
        return (
            f"pulse serve on port {self.port}, rolling every {self.every:g} s; clients: {self.asks_per_second:g} asks"
            f" and {self.ratings_per_second:g} ratings a second"
        )

    def start(self) -> None:
        self.server = self.start_server()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.halt.set()
        if self.thread is not None:
            self.thread.join()

    def close(self) -> None:
        self.stop()
        if self.server is not None and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            self.server.wait(timeout=120)

    def summary(self) -> str:
        return (
            f"clients stopped: {sum(self.asked.values())} asks ({self.asked[True]} asked to rate),"
            f" {len(self.acknowledged)} ratings acknowledged, {self.errors} answers not 2xx"
        )

    def post(self, conn: http.client.HTTPConnection, path: str, body: dict) -> dict | None:
        """One POST; its JSON answer when 2xx, None (counted, the reason printed once) otherwise."""
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            answer = conn.getresponse()
            data = answer.read()
        except (OSError, http.client.HTTPException) as error:
            conn.close()  # reconnects at the next request
            data, answer = str(error).encode(), None
        if answer is None or answer.status not in (200, 201):
            if not self.errors:
                print(f"{path}: {answer and answer.status} {data[:300]!r}", flush=True)
            self.errors += 1
            return None
        return json.loads(data)

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        chosen: list[tuple[str, int]] = []  # asked, the policy said ask: rated first
        skipped: list[tuple[str, int]] = []
        started = time.monotonic()
        asks = ratings = 0
        while not self.halt.is_set():
            elapsed = time.monotonic() - started
            due_ask = asks / self.asks_per_second if self.asks_per_second > 0 else float("inf")
            due_rating = ratings / self.ratings_per_second if self.ratings_per_second > 0 else float("inf")
            wait = min(due_ask, due_rating) - elapsed
            if wait > 0:
                self.halt.wait(wait)
                continue
            if due_ask <= due_rating:
                asks += 1
                if not self.sessions:
                    continue
                session, segment = self.sessions.pop()
                body = {"session_id": session, "segment_index": segment, "features": self.features.get(session, {})}
                answer = self.post(conn, "/v1/asks", body)
                if answer is not None:
                    self.asked[bool(answer["ask"])] += 1
                    (chosen if answer["ask"] else skipped).append((session, segment))
                continue
            ratings += 1
            queue = chosen or skipped
            if not queue:
                continue
            session, segment = queue.pop(0)
            key = f"{self.prefix}{ratings:07d}"
            stars = 1 + ratings % 5
            body = {"session_id": session, "segment_index": segment, "stars": stars, "idempotency_key": key}
            if self.post(conn, "/v1/ratings", body) is not None:
                self.acknowledged[key] = time.time()
        conn.close()


def event_features(published: Path) -> dict[str, dict[str, float]]:
    """Each session's ``features.event_features`` (its numbers, NULLs left out): what a hook sends with its ask
    (``pulse_pipeline/hooks``: the same features, computed from the session's log)."""
    import duckdb

    with duckdb.connect(str(published), read_only=True) as con:
        cursor = con.execute("SELECT * FROM features.event_features")
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    found = {}
    for row in rows:
        values = dict(zip(names, row, strict=True))
        session = values.pop("session_id")
        found[session] = {k: float(v) for k, v in values.items() if isinstance(v, int | float)}
    return found


def live_main(args: argparse.Namespace) -> int:
    """``--live``: the service, the daemon and the paced clients on a copy of ``--home`` (serve_live.live)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from serve_live import run_live

    if args.home is None or not (args.home / "drops").is_dir():
        raise SystemExit("--live needs --home, a PULSE_HOME with sessions (after `pulse demo --sessions 36000`)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a background job ignores SIGINT: end through cleanup
    port = free_port()
    env = {"PULSE_SERVE_ROLL_SECONDS": str(args.roll_seconds)}

    def served(home, sessions) -> PacedClients:
        log = home.root / "serve.log"
        clients = PacedClients(
            port,
            sessions,
            args.asks_per_second,
            args.ratings_per_second,
            args.roll_seconds,
            lambda: start_server(home.root, port, log, env),
        )
        clients.features = event_features(home.warehouse)
        return clients

    workdir = Path(args.workdir) if args.workdir else None
    figures = run_live(args.home, workdir, args.in_place, args.minutes, served, args.drain_seconds, seed=0)
    return 0 if figures["ratings"] else 1


# --- main ---------------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="each phase (default 10)")
    ap.add_argument("--connections", type=int, default=16, help="requests under way at most (default 16)")
    ap.add_argument("--client-processes", type=int, default=2, help="processes the connections are spread over")
    ap.add_argument("--kills", type=int, default=3, help="SIGKILL + restart cycles in the last phase (default 3)")
    ap.add_argument("--ingest", choices=["pulse", "load"], default="pulse", help="how the drops are read back")
    ap.add_argument("--workdir", help="keep the homes here (default: a temporary folder, removed)")
    live = ap.add_argument_group("live freshness", LIVE)
    live.add_argument("--live", action="store_true", help="measure the published warehouse's lag instead")
    live.add_argument("--home", type=Path, help="a PULSE_HOME with sessions, copied (after `pulse demo`)")
    live.add_argument("--minutes", type=float, default=10.0, help="how long the clients send (default 10)")
    live.add_argument("--roll-seconds", type=float, default=5.0, help="PULSE_SERVE_ROLL_SECONDS (default 5)")
    live.add_argument("--asks-per-second", type=float, default=2.0, help="(default 2)")
    live.add_argument("--ratings-per-second", type=float, default=0.5, help="(default 0.5)")
    live.add_argument("--drain-seconds", type=float, default=600.0, help="after the clients stop, wait at most")
    live.add_argument("--in-place", action="store_true", help="use --home itself, not a copy")
    args = ap.parse_args()
    if args.live:
        return live_main(args)

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="pulse-bench-serve-"))
    home, log, port = workdir / "serve-home", workdir / "serve.log", free_port()
    home.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    print(
        f"pulse serve bench: {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in load_before)} at"
        f" start; {args.connections} connections in {args.client_processes} client processes; {args.seconds:g} s a"
        f" phase; server log {log}"
    )
    server = start_server(home, port, log)
    try:
        cpu = cpu_seconds(server.pid)
        figures = run_clients(port, "asks", args.connections, args.client_processes, args.seconds)
        line("asks", figures, args.seconds, cpu_seconds(server.pid) - cpu)
        cpu, before = cpu_seconds(server.pid), gauges(port)
        figures = run_clients(port, "ratings", args.connections, args.client_processes, args.seconds)
        rate, p99 = line("ratings", figures, args.seconds, cpu_seconds(server.pid) - cpu)
        after = gauges(port)
        fsyncs = after["journal_fsyncs"] - before["journal_fsyncs"]
        records = after["journal_seq"] - before["journal_seq"]
        per = records / max(1.0, fsyncs)
        print(f"{'':<9}  group commit: {records:,.0f} ratings in {fsyncs:,.0f} fsyncs, {per:.1f} a fsync")
        acknowledged = dict(figures["acknowledged"])

        cycles = []

        def kill_and_restart() -> None:
            nonlocal server
            for _ in range(args.kills):
                time.sleep(args.seconds / (args.kills + 1))
                server.send_signal(signal.SIGKILL)
                server.wait()
                started = time.perf_counter()
                server = start_server(home, port, log)
                cycles.append(time.perf_counter() - started)
            time.sleep(args.seconds / (args.kills + 1))

        figures = run_clients(port, "ratings", args.connections, args.client_processes, 0, kill_and_restart)
        acknowledged |= figures["acknowledged"]
        print(
            f"kill     : {args.kills} SIGKILL + restart cycles (restart to first answer"
            f" {np.mean(cycles) if cycles else 0:.1f} s each);"
            f" {len(figures['acknowledged']):,} ratings acknowledged meanwhile; {figures['retried']} attempts found the"
            " server down and were sent again"
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    started = time.perf_counter()
    found = ingested_ratings(home, args.ingest, workdir)
    ids = [rating_id for rating_id, _ in found]
    stored = dict(found)
    missing = set(acknowledged) - set(stored)
    extra = set(stored) - set(acknowledged)
    twice = len(ids) - len(set(ids))
    wrong = sum(1 for k, v in acknowledged.items() if k in stored and stored[k] != v)
    how = "pulse ingest, published pulse.duckdb" if args.ingest == "pulse" else "load_drop, in memory"
    rolls = sum(1 for _ in (home / "drops").glob("serve-*/roll-*.jsonl"))
    print(
        f"warehouse: {len(found):,} ratings in raw.ratings from {rolls} roll files ({how},"
        f" {time.perf_counter() - started:.0f} s);"
        f" acknowledged {len(acknowledged):,}: {len(missing)} missing, {twice} twice, {len(extra)} not acknowledged,"
        f" {wrong} with other stars"
    )
    ok = not (missing or twice or extra or wrong)
    print(
        f"targets  : >= {TARGET_RATE:,.0f} acknowledged ratings/s: {'met' if rate >= TARGET_RATE else 'NOT met'}"
        f" ({rate:,.0f}); p99 < {TARGET_P99_MS:g} ms: {'met' if p99 < TARGET_P99_MS else 'NOT met'} ({p99:.1f} ms);"
        f" the warehouse equals the acknowledged ratings: {'yes' if ok else 'NO'}"
    )
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
