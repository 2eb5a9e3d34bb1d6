"""A drop: one file, or one folder of files, delivered to the drop folder. Each is read file by file.

In a folder, files and folders whose names start with ``_`` or ``.`` are sidecars (a generator's ground truth,
notes) and are not read. A folder that holds one session, one event per file, is read as one unit: OpenHands V0's
``sessions/<sid>/events/<n>.json``, an OpenHands SDK conversation folder (``base_state.json`` +
``events/event-<idx>-<id>.json``) and the OpenHands app server's event folder (``folders.py`` has the layouts).

Each unit gets the session id its location gives (``name_id``; ``records.py`` has the whole precedence). When two
units of a drop would get the same one, each takes its path within the drop instead: files with the same stem in
different sub-folders stay distinct sessions.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import tables
from .batch import RECORD_TYPES, ArrowBatch, Batch
from .files import jsonl_mode, read_file, read_record_lines
from .folders import folder_layout, folder_name_id, read_session_folder, session_files
from .records import file_name_id

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def drop_key(name: str) -> str:
    """The partition key of a drop named ``name`` (letters, digits, ``.``, ``_`` and ``-`` only)."""
    return _KEY_UNSAFE.sub("_", name).strip("_") or "drop"


@dataclass(frozen=True)
class DropUnit:
    """One thing read as a unit: a file, or a folder holding one session (``layout`` says which kind)."""

    path: Path
    source_file: str
    is_session_dir: bool
    layout: str | None = None  # for a session folder: v0_events_dir | sdk_conversation | app_server_events
    name_id: str | None = None  # the session id the unit's location gives (records.py)


def drop_units(path: Path) -> list[DropUnit]:
    """The drop's units: session folders first, then every other file, each in path order, with their name ids."""
    if path.is_file():
        return [DropUnit(path, path.name, False, name_id=file_name_id(path.name))]
    folders: list[DropUnit] = []
    files: list[Path] = []
    claimed: set[Path] = set()
    for here, subfolders, file_names in os.walk(path):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(("_", ".")))
        folder = Path(here)
        visible = sorted(n for n in file_names if not n.startswith(("_", ".")))
        layout = folder_layout(folder, visible, is_root=folder == path)
        if layout is not None:
            claimed.update(session_files(folder, layout))
            source_file = path.name if folder == path else folder.relative_to(path).as_posix()
            folders.append(DropUnit(folder, source_file, True, layout, folder_name_id(folder, layout)))
        files.extend(folder / n for n in visible)
    units = folders + [
        DropUnit(f, f.relative_to(path).as_posix(), False, name_id=file_name_id(f.relative_to(path).as_posix()))
        for f in sorted(files)
        if f not in claimed
    ]
    repeated = {n for n, count in Counter(u.name_id for u in units).items() if count > 1}
    return [replace(u, name_id=u.source_file) if u.name_id in repeated else u for u in units]


def fingerprint(path: Path) -> str:
    """Changes when any file of the drop is rewritten (size or modification time), without reading them."""
    h = hashlib.sha1()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(path) if f != path else f.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


# JSON-lines files larger than this are read in pieces of about this size; smaller files are packed into reads of
# about this size
SPLIT_BYTES = 8 << 20


@dataclass(frozen=True)
class Piece:
    """Work for one reader: a whole unit, or a byte range of a JSON-lines file (``first_line`` numbers its lines)."""

    unit: DropUnit
    start: int = 0
    end: int | None = None
    first_line: int = 0


def unit_bytes(unit: DropUnit) -> int:
    """The unit's size on disk: the file's, or the sum of the files in a session folder."""
    if not unit.is_session_dir:
        return unit.path.stat().st_size
    return sum(f.stat().st_size for f in unit.path.rglob("*") if f.is_file())


def plan_reads(units: list[DropUnit], split_bytes: int | None = None) -> list[list[Piece]]:
    """The drop as reads, one task for a reader each: a piece of a large file alone, or small units packed together.

    Units up to ``split_bytes`` are packed, in order, into one read until the next would take it past
    ``split_bytes``, and the reader merges their rows (``load.read_pieces``). Why: a drop of 100 000 small session
    files was 100 000 tasks and 100 000 tiny inserts, and DuckDB holds memory for every insert of an open
    transaction, so memory grew with the number of files. Packed, it depends on the largest piece.
    """
    split_bytes = split_bytes or SPLIT_BYTES
    reads: list[list[Piece]] = []
    packed: list[Piece] = []
    packed_bytes = 0
    for unit in units:
        size = unit_bytes(unit)
        if packed and packed_bytes + size > split_bytes:
            reads.append(packed)
            packed, packed_bytes = [], 0
        if size > split_bytes:
            reads.extend([piece] for piece in plan(unit, split_bytes))
        else:
            packed.append(Piece(unit))
            packed_bytes += size
    if packed:
        reads.append(packed)
    return reads


def _count_newlines(f, start: int, end: int, block: int = 1 << 20) -> int:
    f.seek(start)
    count = 0
    while start < end:
        chunk = f.read(min(block, end - start))
        if not chunk:
            break
        count += chunk.count(b"\n")
        start += len(chunk)
    return count


def plan(unit: DropUnit, split_bytes: int | None = None) -> list[Piece]:
    """Split a large file of JSON-lines records at line ends, so pieces can be read in parallel.

    Streams the file (1 MiB at a time) to find the cuts and number the lines: memory stays bounded whatever the
    file's size."""
    split_bytes = split_bytes or SPLIT_BYTES
    size = unit.path.stat().st_size
    if unit.is_session_dir or size <= split_bytes:
        return [Piece(unit)]
    pieces: list[Piece] = []
    with unit.path.open("rb") as f:
        if jsonl_mode(f.read(1 << 20).split(b"\n")[:-1]) != "records":
            return [Piece(unit)]
        start, line = 0, 0
        while start < size:
            f.seek(start + split_bytes)
            end = min(size, start + split_bytes + len(f.readline()))  # just past the next line end
            pieces.append(Piece(unit, start, end, line))
            line += _count_newlines(f, start, end)
            start = end
    return pieces


def read_piece(drop_id: str, piece: Piece) -> Iterator[Batch]:
    unit = piece.unit
    if unit.is_session_dir:
        yield from read_session_folder(drop_id, unit.path, unit.source_file, unit.layout, unit.name_id)
    elif piece.end is None:
        yield from read_file(drop_id, unit.path, unit.source_file, unit.name_id)
    else:
        with unit.path.open("rb") as f:
            f.seek(piece.start)
            lines = f.read(piece.end - piece.start).split(b"\n")
        yield from read_record_lines(drop_id, enumerate(lines, start=piece.first_line), unit.source_file)


@dataclass
class DropTally:
    """What was read from a drop and where it went (named as raw.drops' columns); the asset check tests that
    read = accepted + quarantined, for records and for events."""

    records_read: int = 0
    records_accepted: int = 0
    records_quarantined: int = 0
    events_read: int = 0
    events_accepted: int = 0
    events_quarantined: int = 0

    def add(self, batch: ArrowBatch) -> None:
        self.records_read += sum(batch.read[t] for t in RECORD_TYPES)
        self.records_accepted += sum(batch.count(t) for t in (tables.SESSIONS, tables.RATINGS, tables.ASSIGNMENTS))
        self.records_quarantined += sum(batch.quarantined[t] for t in RECORD_TYPES)
        self.events_read += batch.read["event"]
        self.events_accepted += batch.count(tables.EVENTS)
        self.events_quarantined += batch.quarantined["event"]


def drop_row(drop_id: str, path: Path, tally: DropTally) -> dict[str, Any]:
    """The drop's raw.drops row, by column: where it is, its fingerprint, size and newest file, and its counts."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    mtime = max((f.stat().st_mtime for f in files), default=0.0)
    return {
        "drop_id": drop_id,
        "path": str(path),
        "fingerprint": fingerprint(path),
        "n_files": len(files),
        "bytes": sum(f.stat().st_size for f in files),
        "mtime": datetime.fromtimestamp(mtime, UTC).replace(tzinfo=None).isoformat(),
        **asdict(tally),
    }


def list_drops(drops_dir: Path) -> dict[str, Path]:
    """Drops in the drop folder by partition key, oldest first (by modification time, then name)."""
    if not drops_dir.exists():
        return {}
    entries = [p for p in drops_dir.iterdir() if not p.name.startswith((".", "_"))]
    entries.sort(key=lambda p: (p.stat().st_mtime, p.name))
    return {drop_key(p.name): p for p in entries}


def find_drop(drops_dir: Path, key: str) -> Path:
    path = list_drops(drops_dir).get(key)
    if path is None:
        raise FileNotFoundError(
            f"no drop with key {key!r} in {drops_dir}: the file or folder was removed or renamed after it was"
            " registered. Put it back, or delete the partition in the Dagster UI."
        )
    return path
