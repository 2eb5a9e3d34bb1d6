"""Nothing acknowledged is lost and nothing is stored twice (issue 35, item 1): idempotency keys, the roll's shape
read back by PULSE's own ingest, a crash at each step of a roll, a torn journal, and a real `pulse serve` killed
with SIGKILL mid-stream and restarted."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from pulse_pipeline import tables
from pulse_pipeline.ingest.load import load_drop, reconcile_drop
from pulse_pipeline.serve import roller as roller_module
from pulse_pipeline.serve.journal import Journal, JournalError
from pulse_pipeline.serve.roller import Roller, roll_files
from pulse_pipeline.serve.service import Service
from pulse_pipeline.serve.validation import RatingRequest

from .serve_helpers import FixedRandom, rolled_rows, serving, settings
from .test_serve_api import write_known_policy

# --- idempotency ---------------------------------------------------------------------------------------------


def test_a_repeated_idempotency_key_is_stored_once(tmp_path):
    body = {"session_id": "s1", "stars": 4, "comment": "ok", "idempotency_key": "k-1"}
    with serving(tmp_path) as (client, service):
        first = client.post("/v1/ratings", json=body)
        again = client.post("/v1/ratings", json=body)
        header = client.post("/v1/ratings", json={"session_id": "s1", "stars": 2}, headers={"Idempotency-Key": "k-2"})
        header_again = client.post(
            "/v1/ratings", json={"session_id": "s1", "stars": 2}, headers={"Idempotency-Key": "k-2"}
        )
        reused = client.post("/v1/ratings", json={**body, "stars": 1})
        both = client.post("/v1/ratings", json=body, headers={"Idempotency-Key": "k-9"})
        assert service.journal.last_seq == 2
    with serving(tmp_path) as (client, _):  # after a restart the key is still known
        after_restart = client.post("/v1/ratings", json=body)
    assert (first.status_code, again.status_code, header.status_code, header_again.status_code) == (201, 200, 201, 200)
    assert again.json() == {"stored": True, "duplicate": True, "unknown_session": True}
    assert reused.status_code == 409 and "stored with another rating" in reused.json()["error"]
    assert both.status_code == 400 and "differ" in both.json()["error"]
    assert after_restart.status_code == 200 and after_restart.json()["duplicate"] is True
    rows = rolled_rows(tmp_path)
    assert sorted((r["id"], r["rating"]) for r in rows) == [("k-1", 4), ("k-2", 2)]


def test_the_same_key_at_once_is_stored_once_and_one_session_flips_one_coin(tmp_path):
    async def race(service: Service):
        rating = RatingRequest(session_id="s1", stars=3, idempotency_key="same")
        answers = await asyncio.gather(*(service.rate(rating, "test") for _ in range(20)))
        from pulse_pipeline.serve.validation import AskRequest

        decisions = await asyncio.gather(*(service.ask(AskRequest("s9")) for _ in range(20)))
        return answers, decisions

    service = Service(tmp_path, settings(), "http://x", rng=FixedRandom(0.0, 0.999)).open()
    try:
        answers, decisions = asyncio.run(race(service))
    finally:
        service.close()
    assert sorted(a.duplicate for a in answers) == [False] + [True] * 19
    assert {d.ask for d in decisions} == {True}  # one coin (0.0): the second (0.999) was never drawn
    assert [r["id"] for r in rolled_rows(tmp_path) if "rating" in r] == ["same"]
    assert len([r for r in rolled_rows(tmp_path) if "ask_probability" in r]) == 1


# --- the roll, read back by ingest ---------------------------------------------------------------------------


def test_the_rolls_are_ratings_and_asks_as_ingest_reads_them(tmp_path, wh):
    version, q = write_known_policy(tmp_path)
    with serving(tmp_path, rng=FixedRandom(0.0, 0.999, 0.0), roll_records=3) as (client, _):
        features = {"file_edits": 2.718281828459045**3 - 1}
        a = client.post("/v1/asks", json={"session_id": "s1", "segment_index": 0, "features": features}).json()
        client.post("/v1/asks", json={"session_id": "s2", "features": features})  # 0.999: not asked
        client.post("/v1/ratings", json={"session_id": "s1", "segment_index": 0, "stars": 5, "idempotency_key": "r1"})
        client.post("/v1/asks", json={"session_id": "s3", "segment_index": 1, "features": {"file_edits": 0}})
        body = {"conversation_id": "s4", "event_id": 7, "rating": 1, "reason": "lost my work"}
        client.post("/v1/ratings", json=body)
    files = roll_files(tmp_path / "drops")
    assert [f.name for f in files] == ["roll-00000001.jsonl", "roll-00000002.jsonl"]  # 3 records, then the rest
    [folder] = {f.parent for f in files}
    assert folder.name.startswith("serve-") and sorted(p.name for p in folder.iterdir()) == [f.name for f in files]
    load_drop(wh, folder.name, folder)
    ok, facts = reconcile_drop(wh, folder.name)
    assert ok, facts
    ratings = wh.con.execute(
        "SELECT session_id, segment_index, rating, reason, event_id, rating_id FROM raw.ratings ORDER BY 1"
    ).fetchall()
    assert [r[:5] for r in ratings] == [("s1", 0, 5.0, None, None), ("s4", None, 1.0, "lost my work", "7")]
    assert ratings[0][5] == "r1" and len(ratings[1][5]) == 32  # the idempotency key, else a fresh uuid
    asks = wh.con.execute("SELECT session_id, segment_index, ask_probability, rating FROM raw.asks ORDER BY 1")
    assert asks.fetchall() == [
        ("s1", 0, pytest.approx(q, rel=1e-12), None),  # q = 0.3 exp(0.5), by hand in write_known_policy
        ("s3", 1, pytest.approx(0.3 * 2.718281828459045**-0.25, rel=1e-12), None),
    ]
    assert a["probability"] == pytest.approx(q, rel=1e-12) and a["policy_version"] == version
    assert wh.count(tables.QUARANTINE) == 0


def _wait_rolled(service: Service, through: int, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    roller = service.roller  # the watermark moves at a roll's commit, the waiting records leave when it ends
    while (roller.state.rolled_through < through or roller.waiting) and time.monotonic() < deadline:
        time.sleep(0.02)


def test_rolls_come_every_n_records_and_every_s_seconds(tmp_path):
    """By count: two records roll (the clock, an hour, cannot), a third alone waits. By the clock: one record of a
    thousand rolls after 0.3 s. (A roll takes every record waiting, so on a busy machine one roll may hold more
    than N: the test never posts more than N before it waits.)"""
    with serving(tmp_path / "count", roll_records=2, roll_seconds=3600) as (client, service):
        for i in range(2):
            client.post("/v1/ratings", json={"session_id": f"s{i}", "stars": 3})
        _wait_rolled(service, 2)
        assert service.roller.state.rolled_through == 2 and service.roller.waiting == 0
        client.post("/v1/ratings", json={"session_id": "s2", "stars": 3})
        time.sleep(0.5)
        assert service.roller.state.rolled_through == 2 and service.roller.waiting == 1
    with serving(tmp_path / "clock", roll_records=1000, roll_seconds=0.3) as (client, service):
        client.post("/v1/ratings", json={"session_id": "s0", "stars": 3})
        _wait_rolled(service, 1)
        assert service.roller.state.rolled_through == 1 and service.roller.waiting == 0
    assert len(roll_files(tmp_path / "count" / "drops")) == 2  # the third rolled at the stop
    assert len(roll_files(tmp_path / "clock" / "drops")) == 1


# --- a crash at each step of a roll --------------------------------------------------------------------------


def _records(n: int) -> list[dict]:
    return [
        {"seq": i, "kind": "rating", "row": {"id": f"r{i}", "session_id": "s", "rating": 1 + i % 5}}
        for i in range(1, n + 1)
    ]


class Crash(Exception):
    """The process stops here: whatever is on disk stays, nothing in memory does."""


@pytest.mark.parametrize(
    "step", ["before_commit", "inside_the_commit", "after_commit_before_rename", "after_rename_before_clear"]
)
def test_a_crash_at_any_step_of_a_roll_neither_loses_nor_repeats(tmp_path, monkeypatch, step):
    drops, state = tmp_path / "drops", tmp_path / "serve" / "rolled.json"
    state.parent.mkdir(parents=True)
    first = Roller(drops, state)
    first.recover()
    first.add(_records(5))
    first.roll()  # roll 1: records 1-5, whole
    first.add(_records(8)[5:])
    saves = []
    real_save, real_replace = Roller._save, os.replace

    def save(self, new_state):
        saves.append(new_state)
        if step == "before_commit" and len(saves) == 1:
            raise Crash
        if step == "after_rename_before_clear" and len(saves) == 2:
            raise Crash
        real_save(self, new_state)

    def replace(src, dst):
        if step == "after_commit_before_rename" and Path(dst).name.startswith("roll-"):
            raise Crash
        if step == "inside_the_commit" and Path(dst) == state:  # its temporary file written, not renamed
            raise Crash
        real_replace(src, dst)

    monkeypatch.setattr(Roller, "_save", save)
    monkeypatch.setattr(roller_module.os, "replace", replace)
    with pytest.raises(Crash):
        first.roll()  # roll 2: records 6-8, interrupted
    monkeypatch.undo()
    # what the crash left: a hidden partial file (before the rename), and the drop sensor sees only whole rolls
    visible = sorted(p.name for p in roll_files(drops))
    assert visible == (
        ["roll-00000001.jsonl", "roll-00000002.jsonl"]
        if step == "after_rename_before_clear"
        else ["roll-00000001.jsonl"]
    )
    # the restart: recover, then the journal's records past the watermark again, as Service.open hands them
    second = Roller(drops, state)
    second.recover()
    second.add(_records(8))
    second.roll()
    rows = [orjson.loads(line) for f in roll_files(drops) for line in f.read_bytes().splitlines()]
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(1, 9)]  # each once, in order
    assert second.state.rolled_through == 8 and second.state.pending is None
    assert not list(drops.glob("*/.*")) and not list(state.parent.glob(".*"))  # no partial file left behind


# --- the journal's torn tail ---------------------------------------------------------------------------------


def test_a_torn_last_line_is_cut_and_a_damaged_one_refused(tmp_path):
    folder = tmp_path / "journal"
    journal = Journal(folder)
    list(journal.replay())
    journal.start()

    async def write():
        for i in range(3):
            await journal.append({"kind": "rating", "row": {"id": str(i)}})

    asyncio.run(write())
    journal.close()
    [segment] = folder.iterdir()
    whole = segment.read_bytes()
    segment.write_bytes(whole + b'{"kind": "rating", "row": {"id": "torn"')  # killed inside write()
    again = Journal(folder)
    assert [r["row"]["id"] for r in again.replay()] == ["0", "1", "2"] and again.last_seq == 3
    assert segment.read_bytes() == whole  # cut back, so the next append starts on a line of its own
    lines = whole.splitlines(keepends=True)
    segment.write_bytes(lines[0] + b"garbage\n" + lines[2])
    with pytest.raises(JournalError, match=r"journal-000000000001.jsonl, line 2: not a journal record"):
        list(Journal(folder).replay())


# --- SIGKILL mid-stream, for real ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(home: Path, port: int, log: Path, **env: str) -> subprocess.Popen:
    """`pulse serve` as a user starts it; returns once /healthz answers."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PULSE_")} | {"PULSE_HOME": str(home)} | env
    with open(log, "a") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pulse_pipeline.cli", "serve", "--port", str(port)],
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"pulse serve exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return process
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"pulse serve did not answer: {log.read_text()[-2000:]}")


class Sender(threading.Thread):
    """Sends ratings one after another on a keep-alive connection until ``stop`` is set; a rating whose answer did
    not come (the server was killed) is sent again with the same idempotency key until it is acknowledged, as a
    client must."""

    def __init__(self, port: int, name: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.port, self.prefix, self.stop = port, name, stop
        self.acknowledged: dict[str, int] = {}
        self.failures = 0

    def run(self) -> None:
        connection, i = None, 0
        while not self.stop.is_set():
            key, stars = f"{self.prefix}-{i:06d}", 1 + i % 5
            i += 1
            body = json.dumps({"session_id": f"s-{key}", "stars": stars, "idempotency_key": key})
            while key not in self.acknowledged:
                try:
                    connection = connection or http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                    connection.request("POST", "/v1/ratings", body, {"Content-Type": "application/json"})
                    answer = connection.getresponse()
                    answer.read()
                    if answer.status in (200, 201):
                        self.acknowledged[key] = stars
                except (OSError, http.client.HTTPException):  # refused, reset, cut mid-answer: down; again
                    self.failures += 1
                    connection = None
                    time.sleep(0.05)


@pytest.mark.slow
def test_sigkill_mid_stream_loses_nothing_acknowledged_and_stores_nothing_twice(tmp_path):
    home, log, port = tmp_path / "home", tmp_path / "serve.log", free_port()
    env = {"PULSE_SERVE_ROLL_RECORDS": "50", "PULSE_SERVE_ROLL_SECONDS": "0.2", "PULSE_SERVE_RATE_LIMIT": "0"}
    stop = threading.Event()
    senders = [Sender(port, f"c{i}", stop) for i in range(4)]
    server = start_server(home, port, log, **env)
    for sender in senders:
        sender.start()
    rng, acknowledged_at_kills = random.Random(35), []
    for _ in range(4):
        time.sleep(rng.uniform(0.3, 1.0))
        server.send_signal(signal.SIGKILL)
        server.wait()
        acknowledged_at_kills.append(sum(len(s.acknowledged) for s in senders))
        server = start_server(home, port, log, **env)
    time.sleep(0.5)
    stop.set()
    for sender in senders:
        sender.join(timeout=120)
    server.send_signal(signal.SIGTERM)  # a graceful stop: the last roll, then the signal's own exit
    assert server.wait(timeout=60) == -signal.SIGTERM and "every record through seq" in log.read_text()
    acknowledged = {k: v for s in senders for k, v in s.acknowledged.items()}
    # the kills fell mid-stream: ratings were acknowledged before the first, between each two, and after the last
    assert acknowledged_at_kills[0] > 0 and acknowledged_at_kills == sorted(set(acknowledged_at_kills))
    assert acknowledged_at_kills[-1] < len(acknowledged)
    assert sum(s.failures for s in senders) > 0  # and requests were under way when they fell
    rows = [r for r in rolled_rows(home) if "rating" in r]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a rating was rolled twice"
    assert {r["id"]: r["rating"] for r in rows} == acknowledged  # none missing, none extra, the stars sent
    assert not list((home / "drops").glob("*/.*"))


# --- a failing disk ------------------------------------------------------------------------------------------


def test_a_failing_journal_answers_503_and_acknowledges_nothing(tmp_path, monkeypatch):
    from pulse_pipeline.serve import journal as journal_module

    with serving(tmp_path) as (client, service):
        assert (
            client.post("/v1/ratings", json={"session_id": "s", "stars": 3, "idempotency_key": "a"}).status_code == 201
        )

        def full(fd):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(journal_module.os, "fdatasync", full)
        failed = client.post("/v1/ratings", json={"session_id": "s", "stars": 4, "idempotency_key": "b"})
        later = client.post("/v1/asks", json={"session_id": "t"})
        health = client.get("/healthz")
        monkeypatch.undo()
    assert failed.status_code == 503 and "No space left on device" in failed.json()["error"]
    assert later.status_code == 503 and health.status_code == 503 and health.json()["ok"] is False
    assert "b" not in service.memory.ratings and "t" not in service.memory.decisions  # forgotten: not acknowledged
    # the restart replays what reached the file (the failed batch was written, its fsync failed: a client that
    # sends "b" again gets it stored once, "duplicate" or not)
    with serving(tmp_path) as (client, _):
        again = client.post("/v1/ratings", json={"session_id": "s", "stars": 4, "idempotency_key": "b"})
    assert again.status_code in (200, 201)
    assert sorted(r["id"] for r in rolled_rows(tmp_path) if "rating" in r) == ["a", "b"]


def test_a_roll_that_fails_is_retried_and_loses_nothing(tmp_path, monkeypatch):
    with serving(tmp_path, roll_records=1, roll_seconds=0.2) as (client, service):
        real_open = open
        failures = []

        def flaky_open(path, *args, **kwargs):
            if str(path).endswith(".partial") and len(failures) < 2:
                failures.append(path)
                raise OSError(28, "No space left on device")
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr("builtins.open", flaky_open)
        client.post("/v1/ratings", json={"session_id": "s", "stars": 5, "idempotency_key": "x"})
        deadline = time.monotonic() + 20
        # the roller clears last_error just after the roll returns: wait for both
        while (service.roller.state.rolled_through < 1 or service.roller.last_error) and time.monotonic() < deadline:
            time.sleep(0.05)
        monkeypatch.undo()
        assert len(failures) == 2 and service.roller.state.rolled_through == 1 and service.roller.last_error is None
    assert [r["id"] for r in rolled_rows(tmp_path)] == ["x"]
