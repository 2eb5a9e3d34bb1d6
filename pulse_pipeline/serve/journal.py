"""The service's journal: every decision and rating, appended and fsynced before its request is acknowledged.

Layout: ``PULSE_HOME/serve/journal/journal-<first seq, 12 digits>.jsonl``, one JSON object a line, each with its
``seq`` (1, 2, 3, ... over all segments, in file order). A segment is closed and a new one opened past
``SEGMENT_BYTES``; segments are never rewritten, and the journal is kept whole: it is the service's memory of which
sessions it decided and which idempotency keys it stored (``memory.py``), replayed at every start.

**Group commit.** Requests hand their records to ``append`` and wait; one writer thread takes every record waiting,
writes them with one ``write``, calls ``fdatasync`` once, and only then wakes the requests, which answer 2xx. While
one fsync runs the next batch gathers, so the fsyncs a second stay about the disk's rate whatever the request rate.

**Torn tails.** A process killed mid-``write`` leaves a last line without its newline (or cut inside its JSON). No
request waiting on it was acknowledged (the fsync had not returned), so ``replay`` cuts the file back to the last
whole line before anything is appended. A bad line *before* the last one is not a torn write but a damaged file:
replay refuses it (``JournalError``, naming the file and line) rather than drop acknowledged records silently.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ..atomic_write import fsync_folder

SEGMENT_BYTES = 64 << 20
PREFIX, SUFFIX = "journal-", ".jsonl"


class JournalError(RuntimeError):
    """The journal cannot be read or written; the message names the file and what to do."""


def segments(folder: Path) -> list[Path]:
    """The journal's segment files in seq order."""
    found = [p for p in folder.glob(f"{PREFIX}*{SUFFIX}") if p.name[len(PREFIX) : -len(SUFFIX)].isdigit()]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX) : -len(SUFFIX)]))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Journal:
    """Append-only, fsynced, replayable. ``replay()`` first (it repairs a torn tail and sets the next seq), then
    ``start()``; ``append`` from the event loop; ``close()`` writes what waits and stops the writer.

    ``on_durable(records)`` is called in the writer thread after each fsync with the records it made durable, in
    seq order (the roller takes them from there)."""

    def __init__(self, folder: Path, on_durable: Callable[[list[dict[str, Any]]], None] | None = None):
        self.folder = folder
        self.on_durable = on_durable or (lambda records: None)
        self.last_seq = 0
        self.fsyncs = 0
        self._fd: int | None = None
        self._size = 0
        self._waiting: list[tuple[dict[str, Any], asyncio.Future, asyncio.AbstractEventLoop]] = []
        self._wake = threading.Condition()
        self._closing = False
        self._failed: str | None = None
        self._thread: threading.Thread | None = None

    # --- start: replay ---------------------------------------------------------------------------------------

    def replay(self) -> Iterator[dict[str, Any]]:
        """Every record of the journal in seq order; a torn last line is cut off the file (never acknowledged)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        files = segments(self.folder)
        for i, path in enumerate(files):
            yield from self._read_segment(path, last=i == len(files) - 1)

    def _read_segment(self, path: Path, last: bool) -> Iterator[dict[str, Any]]:
        data = path.read_bytes()
        good = 0  # bytes of whole, parsed lines
        lines = data.split(b"\n")
        for number, line in enumerate(lines[:-1], 1):  # the part after the last newline is never whole
            try:
                record = orjson.loads(line)
                seq = record["seq"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                if last and number == len(lines) - 1:  # the last line of the last segment: a torn write
                    break
                raise JournalError(
                    f"{path}, line {number}: not a journal record (the file is damaged); move that file aside to"
                    " start without the records from it on, or restore it"
                ) from None
            if seq != self.last_seq + 1:
                raise JournalError(f"{path}, line {number}: seq {seq} follows {self.last_seq} (a segment is missing)")
            self.last_seq = seq
            good += len(line) + 1
            yield record
        if good < len(data):
            if not last:
                raise JournalError(f"{path}: ends inside a record but is not the last segment (the file is damaged)")
            with open(path, "r+b") as f:  # the torn tail: no request waiting on it was answered
                f.truncate(good)
                os.fsync(f.fileno())

    # --- running ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        files = segments(self.folder)
        path = files[-1] if files else self.folder / f"{PREFIX}{1:012d}{SUFFIX}"
        self._open(path)
        self._thread = threading.Thread(target=self._writer, name="pulse-journal", daemon=True)
        self._thread.start()

    def _open(self, path: Path) -> None:
        if self._fd is not None:
            os.close(self._fd)
        new = not path.exists()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._size = os.fstat(self._fd).st_size
        if new:
            fsync_folder(self.folder)

    @property
    def failed(self) -> str | None:
        """Why the journal stopped taking records (a disk error), or None."""
        return self._failed

    async def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Journal ``record`` (its ``seq`` is set) and return it once it is on disk; JournalError when the disk
        failed (the request must not be acknowledged)."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        with self._wake:
            if self._failed or self._closing:
                raise JournalError(self._failed or "the service is stopping")
            self._waiting.append((record, done, loop))
            self._wake.notify()
        return await done

    def _writer(self) -> None:
        while True:
            with self._wake:
                while not self._waiting and not self._closing:
                    self._wake.wait()
                batch, self._waiting = self._waiting, []
                if not batch and self._closing:
                    return
            error = None
            try:
                self._write(batch)
            except OSError as failure:  # the disk: nothing of this batch is acknowledged, nor anything later
                error = JournalError(f"writing the journal in {self.folder} failed: {failure}")
                with self._wake:
                    self._failed = str(error)
            for loop in {loop for _, _, loop in batch}:
                mine = [(r, f) for r, f, lp in batch if lp is loop]
                loop.call_soon_threadsafe(_resolve, mine, error)

    def _write(self, batch: list) -> None:
        assert self._fd is not None
        if self._size >= SEGMENT_BYTES:
            self._open(self.folder / f"{PREFIX}{self.last_seq + 1:012d}{SUFFIX}")
        lines = []
        for record, _, _ in batch:
            self.last_seq += 1
            record["seq"] = self.last_seq
            lines.append(orjson.dumps(record))
        data = b"\n".join(lines) + b"\n"
        _write_all(self._fd, data)
        os.fdatasync(self._fd)
        self._size += len(data)
        self.fsyncs += 1
        self.on_durable([record for record, _, _ in batch])

    def close(self) -> None:
        """Write what waits, stop the writer thread, close the file."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _resolve(batch: list[tuple[dict[str, Any], asyncio.Future]], error: BaseException | None) -> None:
    for record, done in batch:
        if not done.done():
            done.set_exception(error) if error else done.set_result(record)
