"""From the journal to the drop folder: each roll a new file of ratings and ask rows, written whole, never twice.

Where: ``PULSE_HOME/drops/serve-YYYY-MM-DD/roll-<n, 8 digits>.jsonl`` (the UTC day of the roll; ``n`` counts the
rolls of this home from 1). The rows are the journal records' ``row``s in seq order, in the shapes ingest reads
(``ingest/records.py`` ``add_rating``): a rating, or an ask shown (``ask_probability``, no ``rating``). A decision
not to ask has no row; records without rows still move the watermark.

**Exactly once.** The watermark, ``PULSE_HOME/serve/rolled.json``, says through which journal seq records are in
drop files. A roll:

1. writes its rows to ``.roll-<n>.jsonl.partial`` in the day's folder (hidden: the drop sensor and ingest skip it)
   and fsyncs it;
2. writes the watermark ``{rolled_through: last seq, rolls: n, pending: {partial, final}}`` (temporary file, fsync,
   rename, fsync of the folder): **the commit point**;
3. renames the partial file to ``roll-<n>.jsonl`` and fsyncs the folder;
4. writes the watermark again without ``pending``.

A crash before 2 leaves a partial file and the old watermark: ``recover`` deletes the partial file and the records
are rolled again from the journal. A crash after 2 leaves the new watermark with ``pending``: ``recover`` finishes
the rename if it has not happened (the partial file is whole: it was fsynced before 2), so the records are in the
drop exactly once, and the journal, read from the new watermark, never rolls them again. The kill between the
rename (3) and the watermark's update cannot lose or repeat anything: the watermark moved first, and the rename is
redone or found done.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..atomic_write import fsync_folder, write_whole

log = logging.getLogger("pulse.serve")

FOLDER_PREFIX = "serve-"
ROLL_PREFIX, ROLL_SUFFIX, PARTIAL_SUFFIX = "roll-", ".jsonl", ".partial"


@dataclass
class RollState:
    rolled_through: int = 0  # every journal record up to this seq is in a drop file (or has no row)
    rolls: int = 0  # roll files written so far (the next is rolls + 1)
    pending: dict[str, str] | None = None  # {"partial": path, "final": path} between the commit and the rename


def day_folder(drops: Path, now: datetime) -> Path:
    return drops / f"{FOLDER_PREFIX}{now.astimezone(UTC):%Y-%m-%d}"


def roll_files(drops: Path) -> list[Path]:
    """Every roll file of every day's folder, in roll order."""
    files = drops.glob(f"{FOLDER_PREFIX}*/{ROLL_PREFIX}*{ROLL_SUFFIX}")
    return sorted(files, key=lambda p: p.name)


class Roller:
    """Takes durable journal records (``add``, from the journal's writer thread) and rolls them into drop files
    every ``roll_records`` records or ``roll_seconds`` seconds (a thread started by ``start``), and at ``close``."""

    def __init__(
        self,
        drops: Path,
        state_path: Path,
        roll_records: int = 5000,
        roll_seconds: float = 30.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self.drops, self.state_path = drops, state_path
        self.roll_records, self.roll_seconds = roll_records, roll_seconds
        self.clock = clock
        self.state = RollState()
        self._waiting: list[dict[str, Any]] = []
        self._oldest: float | None = None  # monotonic time the oldest waiting record arrived
        self._wake = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._rolling = threading.Lock()
        self.last_roll: str | None = None
        self.last_error: str | None = None

    # --- start ---------------------------------------------------------------------------------------------

    def recover(self) -> RollState:
        """Read the watermark and finish what a crash left: the pending rename, stale partial files."""
        if self.state_path.exists():
            saved = orjson.loads(self.state_path.read_bytes())
            self.state = RollState(saved["rolled_through"], saved["rolls"], saved.get("pending"))
        pending = self.state.pending
        if pending:
            partial, final = Path(pending["partial"]), Path(pending["final"])
            if partial.exists():
                os.replace(partial, final)
                fsync_folder(final.parent)
                log.info("finished the roll %s a stop interrupted", final)
            elif not final.exists():
                log.warning("the roll %s is gone from the drop folder (removed by hand?)", final)
            self._save(RollState(self.state.rolled_through, self.state.rolls, None))
        for stale in self.drops.glob(f"{FOLDER_PREFIX}*/.{ROLL_PREFIX}*{PARTIAL_SUFFIX}"):
            stale.unlink()  # written before its commit point: its records are rolled again from the journal
        for stale in self.state_path.parent.glob(f".{self.state_path.name}.*.tmp"):
            stale.unlink()  # a watermark whose write was killed before its rename: the old one holds
        return self.state

    def add(self, records: list[dict[str, Any]]) -> None:
        """Records made durable, in seq order; only those past the watermark are kept (replay hands every one)."""
        fresh = [r for r in records if r["seq"] > self.state.rolled_through]
        if not fresh:
            return
        with self._wake:
            first = not self._waiting
            if first:
                self._oldest = time.monotonic()
            self._waiting.extend(fresh)
            if first or len(self._waiting) >= self.roll_records:  # the clock starts, or a roll is due
                self._wake.notify()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    # --- rolling -------------------------------------------------------------------------------------------

    def roll(self) -> Path | None:
        """Roll every record waiting now; the file written, or None (nothing waited, or no record had a row)."""
        with self._rolling:
            with self._wake:
                batch = list(self._waiting)
            if not batch:
                return None
            written = self._roll(batch)
            with self._wake:
                del self._waiting[: len(batch)]
                self._oldest = time.monotonic() if self._waiting else None
            return written

    def _roll(self, batch: list[dict[str, Any]]) -> Path | None:
        through = batch[-1]["seq"]
        rows = [r["row"] for r in batch if r.get("row") is not None]
        if not rows:
            self._save(RollState(through, self.state.rolls, None))
            return None
        n = self.state.rolls + 1
        folder = day_folder(self.drops, self.clock())
        if not folder.is_dir():
            folder.mkdir(parents=True)
            fsync_folder(folder.parent)
        final = folder / f"{ROLL_PREFIX}{n:08d}{ROLL_SUFFIX}"
        partial = folder / f".{final.name}{PARTIAL_SUFFIX}"
        with open(partial, "wb") as f:  # 1. the rows, durable under a hidden name
            f.write(b"".join(orjson.dumps(row) + b"\n" for row in rows))
            f.flush()
            os.fsync(f.fileno())
        self._save(RollState(through, n, {"partial": str(partial), "final": str(final)}))  # 2. the commit point
        os.replace(partial, final)  # 3.
        fsync_folder(folder)
        self._save(RollState(through, n, None))  # 4.
        ratings = sum(1 for row in rows if "ask_probability" not in row)
        self.last_roll = str(final)
        log.info("rolled %d records (%d ratings, %d asks) into %s", len(batch), ratings, len(rows) - ratings, final)
        return final

    def _save(self, state: RollState) -> None:
        write_whole(self.state_path, orjson.dumps(vars(state)))
        self.state = state

    # --- the thread ----------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pulse-roller", daemon=True)
        self._thread.start()

    def _due(self) -> float | None:
        """Seconds until the next roll is due (0: now), None when nothing waits."""
        if not self._waiting:
            return None
        if len(self._waiting) >= self.roll_records:
            return 0.0
        return max(0.0, self.roll_seconds - (time.monotonic() - (self._oldest or time.monotonic())))

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closing and (due := self._due()) != 0.0:
                    self._wake.wait(timeout=due)
                if self._closing:
                    return
            try:
                self.roll()
                self.last_error = None
            except Exception as error:  # a full disk (or a bug): the records stay in the journal, rolled later
                self.last_error = f"rolling into {self.drops} failed: {error}"
                log.error("%s; retrying in %.0f s", self.last_error, self.roll_seconds, exc_info=True)
                with self._wake:
                    self._oldest = time.monotonic()

    def close(self) -> None:
        """Stop the thread, then roll what waits (the journal was closed first, so nothing more comes)."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()
        self.roll()
