"""Hostile files in a drop (issue 12): only the drop is read, and registering a drop is atomic.

A symbolic link, FIFO, socket or device in a drop is never opened: each becomes one ``raw.quarantine`` row (record
type ``unknown``, empty raw text) counted as a record read, so a drop still reconciles. Registration
(``register_drop``) copies links as links and never follows them, and a copy killed half-way is never seen as a
drop. Each test builds its drop inline; the expected counts follow from it (a session file is one session of two
events: a user message and an agent message that waits for the user).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest

from pulse_pipeline.defs.ingest.sensors import drop_sensor
from pulse_pipeline.defs.resources import warehouse_resource
from pulse_pipeline.ingest.drop import find_drop, fingerprint, list_drops
from pulse_pipeline.ingest.load import load_drop, reconcile_drop
from pulse_pipeline.ingest.register import register_drop

from .helpers import FIXTURES, rebuild_staging

SECRET = "operator:x:1000:1000:s3cr3t-7f3a9c:/home/operator:/bin/sh"


def session_file(folder: Path, name: str, session_id: str) -> Path:
    """One session of two events (a user message, then an agent message that waits for the user)."""
    events = [
        {"id": "1", "source": "user", "type": "message", "text": f"task of {session_id}"},
        {"id": "2", "source": "agent", "type": "message", "text": "done?", "wait_for_response": True},
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps({"session_id": session_id, "events": events}) + "\n")
    return path


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail instead of hanging: opening a FIFO for reading blocks until a writer comes, which never happens."""

    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: something blocked (a FIFO opened for reading?)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def kinds(folder: Path) -> Counter:
    """What a folder holds, walked without following links: files, links, FIFOs and other entries."""
    found: Counter = Counter()
    for entry in os.scandir(folder):
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            found += kinds(Path(entry.path))
        elif stat.S_ISREG(mode):
            found["file"] += 1
        elif stat.S_ISLNK(mode):
            found["link"] += 1
        elif stat.S_ISFIFO(mode):
            found["fifo"] += 1
        else:
            found["other"] += 1
    return found


def where_text(con, needle: str) -> list[str]:
    """``schema.table.column`` of every column of every table holding ``needle`` in any row (as text)."""
    columns = con.execute(
        "SELECT table_schema, table_name, column_name FROM information_schema.columns"
        " WHERE table_catalog = current_database()"
    ).fetchall()
    found = []
    for schema, table, column in columns:
        sql = f'SELECT count(*) FROM "{schema}"."{table}" WHERE strpos(CAST("{column}" AS VARCHAR), ?) > 0'
        if con.execute(sql, [needle]).fetchone()[0]:
            found.append(f"{schema}.{table}.{column}")
    return found


def load(wh, drop_id: str, path: Path) -> dict[str, int]:
    """Load one drop (failing rather than hanging), rebuild staging, and return its reconciled counts."""
    with within(20):
        load_drop(wh, drop_id, path)
    rebuild_staging(wh)
    ok, facts = reconcile_drop(wh, drop_id)
    assert ok, facts
    return facts


def quarantined(wh) -> list[tuple]:
    return wh.con.execute(
        "SELECT source_file, record_type, reason, raw_text FROM raw.quarantine ORDER BY source_file"
    ).fetchall()


def counts(records: int, quarantined: int, events: int) -> dict[str, int]:
    """reconcile_drop's facts for a drop whose accepted records are sessions of two events each."""
    return {
        "records_read": records,
        "records_accepted": records - quarantined,
        "records_quarantined": quarantined,
        "events_read": events,
        "events_accepted": events,
        "events_quarantined": 0,
    }


@pytest.mark.parametrize("delivery", ["registered", "placed in the drop folder"])
def test_a_symlink_to_a_file_outside_the_drop_is_quarantined_never_read(delivery, pulse_home, wh, tmp_path):
    """The issue's reproduction: a link to a passwd-like file put its text into raw.quarantine.raw_text. Now the
    link is one quarantine row naming where it points, and the secret line is in no column of any table."""
    outside = tmp_path / "outside" / "passwd"
    outside.parent.mkdir()
    outside.write_text(f"root:x:0:0:root:/root:/bin/bash\n{SECRET}\n")
    corpus = tmp_path / "corpus"
    session_file(corpus, "s.jsonl", "s1")
    (corpus / "passwd").symlink_to(outside)
    if delivery == "registered":
        key, drop = register_drop(pulse_home, corpus)
        assert (key, drop) == ("corpus", pulse_home.drops / "corpus")
        assert kinds(drop) == {"file": 1, "link": 1}  # the link is copied as a link, not as the file it names
        assert os.readlink(drop / "passwd") == str(outside)
    else:
        key, drop = "corpus", shutil.move(corpus, pulse_home.drops / "corpus")

    facts = load(wh, key, drop)

    assert where_text(wh.con, "s3cr3t-7f3a9c") == []
    [(source_file, record_type, reason, raw_text)] = quarantined(wh)
    assert (source_file, record_type, raw_text) == ("passwd", "unknown", "")
    assert reason.startswith(f"symlink not followed (points to {outside})")
    assert facts == counts(records=2, quarantined=1, events=2)  # s1 and the link; s1's two events


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file systems refuse names that are not UTF-8")
def test_names_that_are_not_utf8_are_read_and_shown_with_their_bytes_escaped(pulse_home, wh, tmp_path):
    """A file named ``caf\\xe9.json`` (Latin-1, not UTF-8) crashed the ingest stage: Arrow refuses the text Python
    makes of such a name. Now the drop is registered and read, the name is shown with the byte escaped (as the
    session id it gives and as ``source_file``), and so is a link's target in its quarantine reason."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    events = [{"id": 0, "action": "message", "source": "user", "args": {"content": "fix the build"}}]
    (corpus / os.fsdecode(b"caf\xe9.json")).write_text(json.dumps(events))
    (corpus / os.fsdecode(b"gone\xff.json")).symlink_to(os.fsdecode(b"moved\xfe.json"))

    key, drop = register_drop(pulse_home, corpus)
    facts = load(wh, key, drop)

    assert wh.con.execute("SELECT session_id, source_file FROM raw.sessions").fetchall() == [
        ("caf\\xe9", "caf\\xe9.json")
    ]
    [(source_file, record_type, reason, raw_text)] = quarantined(wh)
    assert (source_file, record_type, raw_text) == ("gone\\xff.json", "unknown", "")
    assert reason.startswith("symlink not followed (points to moved\\xfe.json)")
    assert facts == {
        "records_read": 2,
        "records_accepted": 1,
        "records_quarantined": 1,
        "events_read": 1,
        "events_accepted": 1,
        "events_quarantined": 0,
    }


def test_a_link_loop_is_copied_as_one_link_and_quarantined(pulse_home, wh, tmp_path):
    """`ln -s . loop` in a 3-file drop was followed 40 levels deep at registration (11 453 files), then crashed."""
    corpus = tmp_path / "corpus"
    for n in range(3):
        session_file(corpus, f"s{n}.jsonl", f"s{n}")
    (corpus / "loop").symlink_to(".")

    key, drop = register_drop(pulse_home, corpus)

    assert kinds(drop) == {"file": 3, "link": 1}
    facts = load(wh, key, drop)
    [(source_file, record_type, reason, raw_text)] = quarantined(wh)
    assert (source_file, record_type, raw_text) == ("loop", "unknown", "")
    assert reason.startswith("symlink not followed (points to .)")
    assert facts == counts(records=4, quarantined=1, events=6)
    assert register_drop(pulse_home, corpus) == (key, drop)  # the same delivery again: the same drop


@pytest.mark.parametrize("delivery", ["registered", "placed in the drop folder"])
def test_a_fifo_and_a_dangling_link_are_quarantined_without_blocking(delivery, pulse_home, wh, tmp_path):
    """A FIFO crashed the copy (and reading it blocks forever); a dangling link crashed it too."""
    corpus = tmp_path / "corpus"
    session_file(corpus, "s.jsonl", "s1")
    os.mkfifo(corpus / "pipe")
    (corpus / "gone.jsonl").symlink_to("moved-away.jsonl")
    if delivery == "registered":
        with within(20):
            key, drop = register_drop(pulse_home, corpus)
        assert kinds(drop) == {"file": 1, "link": 1, "fifo": 1}  # the FIFO is made anew, never opened
    else:
        key, drop = "corpus", shutil.move(corpus, pulse_home.drops / "corpus")

    facts = load(wh, key, drop)

    rows = quarantined(wh)
    assert [(source_file, record_type, raw_text) for source_file, record_type, _, raw_text in rows] == [
        ("gone.jsonl", "unknown", ""),
        ("pipe", "unknown", ""),
    ]
    assert rows[0][2].startswith("symlink not followed (points to moved-away.jsonl)")
    assert rows[1][2].startswith("FIFO skipped")
    assert facts == counts(records=3, quarantined=2, events=2)


def test_a_socket_and_a_device_are_quarantined_and_the_device_not_copied(pulse_home, wh, tmp_path, monkeypatch, caplog):
    """A socket (opening one fails with ENXIO) and a device node (here /dev/null's) are never opened.
    Registration makes the socket anew but leaves the device out, with a warning: making device nodes takes
    privileges, and a copy of one would be as dangerous to open."""
    corpus = tmp_path / "corpus"
    session_file(corpus, "s.jsonl", "s1")
    monkeypatch.chdir(corpus)  # a relative name keeps the socket's address short
    listener = socket.socket(socket.AF_UNIX)
    listener.bind("sock")
    try:
        os.mknod(corpus / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    except PermissionError:
        pytest.skip("making a device node takes privileges this test does not have")
    try:
        facts = load(wh, "corpus", corpus)
        with within(20), caplog.at_level("WARNING"):
            key, drop = register_drop(pulse_home, corpus)
    finally:
        listener.close()

    reasons = {source_file: reason for source_file, _, reason, _ in quarantined(wh)}
    assert sorted(reasons) == ["null", "sock"]
    assert reasons["sock"].startswith("socket skipped")
    assert reasons["null"].startswith("device skipped")
    assert facts == counts(records=3, quarantined=2, events=2)
    assert sorted(p.name for p in drop.iterdir()) == ["s.jsonl", "sock"]
    assert stat.S_ISSOCK((drop / "sock").lstat().st_mode)
    assert "null" in caplog.text and "device" in caplog.text


def test_a_link_inside_a_session_folder_is_not_read_as_an_event(wh, tmp_path):
    """A V0 events folder holding a link named like an event file: its session keeps its 12 real events, and the
    link (to an event whose text is a secret) is one quarantine row of its own."""
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"id": 12, "source": "user", "action": "message", "args": {"content": SECRET}}))
    drop = tmp_path / "session_dir"
    shutil.copytree(FIXTURES / "session_dir", drop)
    (drop / "sessions" / "sess-dir-1" / "events" / "12.json").symlink_to(outside)

    facts = load(wh, "session_dir", drop)

    assert where_text(wh.con, "s3cr3t-7f3a9c") == []
    [(source_file, record_type, reason, raw_text)] = quarantined(wh)
    assert (source_file, record_type, raw_text) == ("sessions/sess-dir-1/events/12.json", "unknown", "")
    assert reason.startswith(f"symlink not followed (points to {outside})")
    assert wh.con.execute("SELECT count(*) FROM raw.events").fetchone()[0] == 12
    assert (facts["records_read"], facts["records_quarantined"], facts["events_read"]) == (2, 1, 12)


def test_the_sensor_skips_links_and_special_files_in_the_drop_folder(pulse_home, tmp_path, caplog):
    """Drops are what lies in the drop folder: a link there (to a folder elsewhere, or to nothing) and a FIFO are
    skipped with a logged reason; the sensor neither crashes nor follows them, and a drop's fingerprint does not
    change when a file a link inside it points to changes."""
    outside = tmp_path / "elsewhere"
    session_file(outside, "s.jsonl", "s-outside")
    real = pulse_home.drops / "real"
    session_file(real, "s.jsonl", "s1")
    (real / "notes").symlink_to(outside / "s.jsonl")
    (pulse_home.drops / "linked").symlink_to(outside)
    (pulse_home.drops / "dangling").symlink_to(tmp_path / "nothing")
    os.mkfifo(pulse_home.drops / "pipe")
    before = fingerprint(real)

    with within(20), caplog.at_level("WARNING"):
        assert list(list_drops(pulse_home.drops)) == ["real"]
        with dg.build_sensor_context(
            instance=dg.DagsterInstance.ephemeral(), resources={"warehouse": warehouse_resource(pulse_home)}
        ) as context:
            result = drop_sensor(context)

    assert [r.partition_key for r in result.run_requests] == ["real"]
    for name in ("linked", "dangling", "pipe"):
        assert f"{pulse_home.drops / name}" in caplog.text
    with pytest.raises(FileNotFoundError, match="symbolic link"):
        find_drop(pulse_home.drops, "linked")
    session_file(outside, "s.jsonl", "a longer session id than before")
    assert fingerprint(real) == before


KILLED_COPY = """
import sys
from pathlib import Path
from pulse_pipeline.ingest.register import register_drop
from pulse_pipeline.paths import PulseHome
register_drop(PulseHome(Path(sys.argv[1])), Path(sys.argv[2]))
"""


def test_a_killed_copy_is_never_a_drop_and_registering_again_completes_it(pulse_home, tmp_path):
    """The issue's reproduction: killed while copying a drop in, a partial folder stayed in drops/ under the drop's
    name, the sensor would have read it, and registering the drop again was refused. Here a process copying 4 000
    tiny files is killed (SIGKILL) as soon as its copy shows in the drop folder."""
    corpus = tmp_path / "corpus"
    for n in range(4000):
        folder = corpus / f"part{n // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"{n}\n")
    child = subprocess.Popen([sys.executable, "-c", KILLED_COPY, str(pulse_home.root), str(corpus)])
    deadline = time.monotonic() + 60
    while not any(p.is_dir() for p in pulse_home.drops.iterdir()):  # the copy has begun
        assert child.poll() is None and time.monotonic() < deadline, "the copy never began"
        time.sleep(0.001)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL  # killed, not finished

    assert list_drops(pulse_home.drops) == {}
    key, drop = register_drop(pulse_home, corpus)

    assert (key, drop) == ("corpus", pulse_home.drops / "corpus")
    assert [p.name for p in pulse_home.drops.iterdir() if p.is_dir()] == ["corpus"]  # the partial copy is gone
    copied = {p.relative_to(drop): p.read_text() for p in drop.rglob("*.txt")}
    assert copied == {p.relative_to(corpus): p.read_text() for p in corpus.rglob("*.txt")}
    assert len(copied) == 4000
    assert list(list_drops(pulse_home.drops)) == ["corpus"]
