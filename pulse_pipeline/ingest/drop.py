"""A drop: one file, or one folder of files, delivered to the drop folder. Each is read file by file.

In a folder, files and folders whose names start with ``_`` are sidecars (a generator's ground truth, notes), and
those whose names start with ``.`` are hidden (locks, partial copies, ``.DS_Store``): neither is read nor counted
(:func:`is_sidecar`). A hidden file named like data (``.json``, ``.jsonl``, ``.ndjson``, ``.csv``, as
``..dotdot..json``) is the exception: it is not read either, but becomes a quarantine row saying why, so it is
never skipped silently. aider's chat history is read though hidden: ``.aider.chat.history.md`` is the name aider
itself gives it (:func:`is_read_hidden`; a copy named ``myrepo.aider.chat.history.md`` is read too, ``aider.py``).

A folder that holds one session, one event per file, is read as one unit: OpenHands V0's
``sessions/<sid>/events/<n>.json``, an OpenHands SDK conversation folder (``base_state.json`` +
``events/event-<idx>-<id>.json``) and the OpenHands app server's event folder (``folders.py`` has the layouts).

Only the drop is read: an entry that is not a regular file or folder (a symbolic link, whether it points inside the
drop, outside it, to nothing or to itself; a FIFO, socket or device) is never followed or opened. Each is a unit of
its own (``DropUnit.skipped``) that becomes one ``raw.quarantine`` row saying why, counted as a record read, so the
drop still reconciles. Why: a link to ``/etc/passwd`` put its text into the warehouse, ``ln -s . loop`` was
followed 40 levels deep, and opening a FIFO blocks until someone writes to it.

A drop with nothing to read is no drop: an empty file (or one of only white space), or a folder with no entry
but sidecars and empty files (:func:`why_empty`). ``pulse ingest`` refuses one (``register.py``), and the drop
folder's listing leaves one out (:func:`list_drops`), so the sensor neither makes it a partition nor runs it; a
folder still being filled is taken once a file in it holds data. Why: an empty folder became a permanent empty drop
and a full pipeline run (issue 33). A folder holding only a link, a FIFO or a file that is not JSON is not empty:
each becomes a quarantine row saying why, which an ingest prints.

Every OpenTelemetry Collector export file of a drop (OTLP/JSON, ``otlp.starts_as_otlp``) is one unit together
(``otlp_export``): the Collector's rotation cuts a trace's spans and a conversation's traces between files.

Each unit gets the session id its location gives (``name_id``; ``records.py`` has the whole precedence). When two
units of a drop would get the same one, each takes its path within the drop instead: files with the same stem in
different sub-folders stay distinct sessions.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from .. import tables
from .aider import is_aider_history, read_aider_history
from .batch import RECORD_TYPES, ArrowBatch, Batch
from .cline import EXTENSION_STATE, extension_state
from .events import BOM
from .files import jsonl_mode, read_file, read_otlp_files, read_record_lines
from .folders import folder_layout, folder_name_id, read_session_folder, session_files
from .langfuse_files import is_langfuse_file, read_langfuse_unit
from .limits import bounded_lines, record_limits
from .opencode import (
    STORAGE_LAYOUT,
    database_companions,
    is_sqlite,
    is_storage_root,
    read_database,
    read_storage,
    storage_files,
)
from .otlp import starts_as_otlp
from .records import file_name_id

log = logging.getLogger(__name__)

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def drop_key(name: str) -> str:
    """The partition key of a drop named ``name`` (letters, digits, ``.``, ``_`` and ``-`` only)."""
    return _KEY_UNSAFE.sub("_", name).strip("_") or "drop"


def skip_reason(path: Path, mode: int) -> str | None:
    """Why an entry of mode ``mode`` (from ``lstat``) is not read, for the operator; None for a file or folder.

    Reading a link's target is the one thing done with it: the reason says where it points."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISLNK(mode):
        return (
            f"symlink not followed (points to {os.readlink(path)}): only what is inside a drop is read; copy the"
            " file or folder itself into the drop"
        )
    if stat.S_ISFIFO(mode):
        return "FIFO skipped: a named pipe is not a file and is never opened; write its data to a file in the drop"
    if stat.S_ISSOCK(mode):
        return "socket skipped: a socket is not a file and is never opened; remove it from the drop"
    return "device skipped: a device file is not data and is never opened; remove it from the drop"


DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv")
LANGFUSE_UNIT = "langfuse"  # a DropUnit's layout: the drop's Langfuse files (``langfuse_files.py``)
HIDDEN_DATA = (
    "hidden file not read: its name starts with '.', which marks a hidden or partial file, yet it is named like"
    " data; rename it without the leading '.' (then deliver the drop again under another name) if it holds sessions"
    " or ratings"
)


def is_sidecar(name: str) -> bool:
    """Whether an entry of a drop is not part of it, and left out without a quarantine row: a sidecar (``_``: a
    generator's ground truth, notes) or a hidden entry (``.``: a lock, a partial copy, ``.DS_Store``, ``.git``)
    that is not named like data. A hidden file named like data (``..dotdot..json``) is no sidecar: it becomes a
    quarantine row (``HIDDEN_DATA``), so no file that looks like data leaves a drop unaccounted for. aider's chat
    history, ``.aider.chat.history.md``, is hidden by its tool's choice and read like any file (``is_read_hidden``)."""
    if name.startswith("_"):
        return True
    return name.startswith(".") and not name.lower().endswith(DATA_SUFFIXES) and not is_read_hidden(name)


def is_read_hidden(name: str) -> bool:
    """Whether a name starting with ``.`` is read all the same: aider's ``.aider.chat.history.md`` (``aider.py``),
    which aider writes at a repository's root under that hidden name. Every other hidden name keeps the rule."""
    return is_aider_history(name)


def _file_holds_data(path: Path, block: int = 1 << 16) -> bool:
    """Whether a regular file holds more than white space (a UTF-8 byte order mark aside), read until it does."""
    with path.open("rb") as f:
        chunk = f.read(block).removeprefix(BOM)
        while chunk:
            if chunk.strip():
                return True
            chunk = f.read(block)
    return False


def _holds_data(folder: Path) -> bool:
    """Whether any entry below ``folder`` but sidecars is read or quarantined: a file with data, or an entry that
    is not a file or folder (a link, FIFO, socket, device: a quarantine row). Stops at the first one found."""
    pending = [folder]
    while pending:
        with os.scandir(pending.pop()) as scan:
            for entry in scan:
                if is_sidecar(entry.name):
                    continue
                if entry.name.startswith("."):  # a hidden file named like data: a quarantine row
                    return True
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif not entry.is_file(follow_symlinks=False) or _file_holds_data(Path(entry.path)):
                    return True
    return False


def why_empty(path: Path) -> str | None:
    """Why the file or folder ``path`` is no drop because it holds nothing to read, in one line; None when it holds
    something (data, or an entry a quarantine row will explain)."""
    if path.is_file():
        if _file_holds_data(path):
            return None
        return f"{path} is empty (0 bytes or only white space): a drop is a file or folder of sessions or ratings"
    if not path.is_dir() or _holds_data(path):
        return None
    return (
        f"{path} holds no file with data (it is empty, or holds only empty files and sidecars: names starting with"
        " '_' or '.' are not read): put the sessions or ratings files in it"
    )


@dataclass(frozen=True)
class DropUnit:
    """One thing read as a unit: a file, a folder holding one session (``layout`` says which kind), or an entry
    that is not read (``skipped``: why, the reason of its quarantine row)."""

    path: Path
    source_file: str
    is_session_dir: bool
    layout: str | None = None  # a folder: v0_events_dir | sdk_conversation | app_server_events | cline_task |
    # opencode_storage
    name_id: str | None = None  # the session id the unit's location gives (records.py)
    skipped: str | None = None
    # a unit of many files read as one (layout ``otlp_export``, ``langfuse``): each file and its name in the drop
    members: tuple[tuple[Path, str], ...] = ()


def _entries(folder: Path) -> tuple[list[str], list[str], list[str], list[str]]:
    """The folders, regular files, other entries (links, FIFOs, sockets, devices) and hidden entries named like
    data directly in ``folder``, each sorted, without sidecars (:func:`is_sidecar`). Never follows a link: a link
    to a folder is an other entry, not a folder."""
    folders: list[str] = []
    files: list[str] = []
    others: list[str] = []
    hidden: list[str] = []
    with os.scandir(folder) as scan:
        for entry in scan:
            if is_sidecar(entry.name):
                continue
            if entry.name.startswith(".") and not (is_read_hidden(entry.name) and entry.is_file(follow_symlinks=False)):
                hidden.append(entry.name)
            elif entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            elif entry.is_file(follow_symlinks=False):
                files.append(entry.name)
            else:
                others.append(entry.name)
    return sorted(folders), sorted(files), sorted(others), sorted(hidden)


def drop_units(path: Path) -> list[DropUnit]:
    """The drop's units: session folders first, then every other file, each in path order, with their name ids,
    then the entries that are not read. ``path`` itself is followed (whoever names a drop means it)."""
    mode = path.stat().st_mode
    if not stat.S_ISDIR(mode):
        reason = skip_reason(path, mode)
        if reason is None and is_langfuse_file(path, PurePosixPath(path.name)):
            return [DropUnit(path, path.name, True, LANGFUSE_UNIT, members=((path, path.name),))]
        return [DropUnit(path, path.name, False, name_id=None if reason else file_name_id(path.name), skipped=reason)]
    folders: list[DropUnit] = []
    files: list[Path] = []
    others: list[Path] = []
    hidden: list[Path] = []
    claimed: set[Path] = set()
    extension_entries: list[Path] = []
    pending = [path]
    while pending:  # depth first, each folder's sub-folders in name order
        folder = pending.pop()
        subfolders, names, other_names, hidden_names = _entries(folder)
        state = extension_state(folder, subfolders, names)  # a Cline globalStorage: its tasks/ alone is read
        if state:
            extension_entries.extend(folder / n for n in state)
            subfolders, names = [d for d in subfolders if d not in state], [n for n in names if n not in state]
        layout = folder_layout(folder, names, is_root=folder == path)
        if layout is None and is_storage_root(subfolders):  # OpenCode's storage/: one unit of many sessions
            layout = STORAGE_LAYOUT
        if layout is not None:
            claimed.update(unit_files(folder, layout))
            source_file = path.name if folder == path else folder.relative_to(path).as_posix()
            folders.append(DropUnit(folder, source_file, True, layout, folder_name_id(folder, layout)))
        files.extend(folder / n for n in names)
        others.extend(folder / n for n in other_names)
        hidden.extend(folder / n for n in hidden_names)
        pending.extend(folder / d for d in reversed(subfolders))
    claimed.update(database_companions(files))  # a SQLite database's -wal, -shm, -journal: read with it
    unclaimed = [f for f in sorted(files) if f not in claimed]
    langfuse = [f for f in unclaimed if is_langfuse_file(f, PurePosixPath(path.name) / f.relative_to(path))]
    if langfuse:  # one unit: a Langfuse session's traces, observations and scores may be in different files
        members = tuple((f, f.relative_to(path).as_posix()) for f in langfuse)
        folders.append(DropUnit(path, path.name, True, LANGFUSE_UNIT, members=members))
        unclaimed = [f for f in unclaimed if f not in set(langfuse)]
    units = folders + [
        DropUnit(f, f.relative_to(path).as_posix(), False, name_id=file_name_id(f.relative_to(path).as_posix()))
        for f in unclaimed
    ]
    units = otlp_export(units)
    repeated = {n for n, count in Counter(u.name_id for u in units).items() if count > 1}
    # a session folder's hidden files are its format's own (the SDK's lock); OpenCode's storage/ has none
    sessions = [u.path for u in folders if u.layout != STORAGE_LAYOUT]
    hidden = [p for p in hidden if not any(s == p.parent or s in p.parents for s in sessions)]
    skipped = [
        DropUnit(p, p.relative_to(path).as_posix(), False, skipped=skip_reason(p, p.lstat().st_mode) or HIDDEN_DATA)
        for p in sorted(others + hidden)
    ] + [DropUnit(p, p.relative_to(path).as_posix(), False, skipped=EXTENSION_STATE) for p in extension_entries]
    return [replace(u, name_id=u.source_file) if u.name_id in repeated else u for u in units] + skipped


def otlp_export(units: list[DropUnit]) -> list[DropUnit]:
    """The drop's units with its OTLP/JSON trace files (``otlp.starts_as_otlp``) made one unit, in the place of the
    first: a Collector's rotated export is many files, and one trace's spans may be in two of them (``otel.py``)."""
    files = [u for u in units if not u.is_session_dir and starts_as_otlp(u.path)]
    if len(files) < 2:
        return units
    first = files[0]
    export = replace(first, name_id=None, layout="otlp_export", members=tuple((u.path, u.source_file) for u in files))
    kept = {id(u) for u in files[1:]}
    return [export if u is first else u for u in units if id(u) not in kept]


def _tree(path: Path) -> list[tuple[Path, os.stat_result]]:
    """Every entry below ``path`` but folders (sidecars included), in path order, as ``lstat`` sees it: a link is
    an entry of its own, never followed, and nothing is opened."""
    found: list[tuple[Path, os.stat_result]] = []
    pending = [path]
    while pending:
        with os.scandir(pending.pop()) as scan:
            for entry in scan:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                else:
                    found.append((Path(entry.path), entry.stat(follow_symlinks=False)))
    return sorted(found, key=lambda e: e[0])


def _regular_files(path: Path) -> list[tuple[Path, os.stat_result]]:
    """The drop's regular files with their status: the drop itself when it is a file."""
    if not path.is_dir():
        return [(path, path.stat())]
    return [(f, st) for f, st in _tree(path) if stat.S_ISREG(st.st_mode)]


def fingerprint(path: Path) -> str:
    """Changes when any file of the drop is rewritten (size or modification time), without reading them.

    Links and special files count by their own status (a link changes when it is made to point elsewhere), never
    by what they point to or hold."""
    h = hashlib.sha1()
    entries = [(path, path.stat())] if not path.is_dir() else _tree(path)
    for f, st in entries:
        line = f"{f.relative_to(path) if f != path else f.name}\0{st.st_size}\0{st.st_mtime_ns}\n"
        h.update(line.encode("utf-8", "surrogateescape"))  # a name's bytes as they are, UTF-8 or not
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
    """The unit's size on disk: the file's, the sum of the files a session folder's reader reads, 0 if not read."""
    if unit.skipped:
        return 0
    if unit.members:
        return sum(path.stat().st_size for path, _ in unit.members)
    if not unit.is_session_dir:
        return unit.path.stat().st_size
    return sum(f.lstat().st_size for f in unit_files(unit.path, unit.layout))


def unit_files(folder: Path, layout: str | None) -> list[Path]:
    """The files a folder unit's reader reads: a session folder's (``folders.session_files``), or every file of
    OpenCode's ``storage/`` tree (``opencode.storage_files``)."""
    return storage_files(folder) if layout == STORAGE_LAYOUT else session_files(folder, layout)


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
    if unit.is_session_dir or unit.skipped or unit.members or unit.path.stat().st_size <= split_bytes:
        return [Piece(unit)]
    size = unit.path.stat().st_size
    pieces: list[Piece] = []
    with unit.path.open("rb") as f:
        if jsonl_mode(f.read(1 << 20).split(b"\n")[:-1]) != "records":
            return [Piece(unit)]
        start, line = 0, 0
        while start < size:
            f.seek(start + split_bytes)
            end = min(size, start + split_bytes + _line_rest(f))  # just past the next line end
            pieces.append(Piece(unit, start, end, line))
            line += _count_newlines(f, start, end)
            start = end
    return pieces


def _line_rest(f, block: int = 1 << 20) -> int:
    """Bytes from ``f``'s position to just past its line's end, read a block at a time (a line may be 200 MB)."""
    count = 0
    while chunk := f.readline(block):
        count += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return count


def read_piece(drop_id: str, piece: Piece) -> Iterator[Batch]:
    unit = piece.unit
    if unit.skipped:
        batch = Batch(drop_id)
        batch.read["unknown"] += 1
        batch.quarantine(unit.source_file, None, "unknown", unit.skipped, "")
        yield batch
    elif unit.layout == STORAGE_LAYOUT:
        yield from read_storage(drop_id, unit.path, unit.source_file)
    elif unit.layout == LANGFUSE_UNIT:
        yield from read_langfuse_unit(drop_id, unit.path, tuple(f for f, _ in unit.members))
    elif unit.members:
        yield from read_otlp_files(drop_id, unit.members)
    elif unit.is_session_dir:
        yield from read_session_folder(drop_id, unit.path, unit.source_file, unit.layout, unit.name_id)
    elif piece.end is None and is_sqlite(unit.path):  # an OpenCode database, whatever its name
        yield from read_database(drop_id, unit.path, unit.source_file)
    elif is_aider_history(unit.path.name):
        yield from read_aider_history(drop_id, unit.path, unit.source_file)
    elif piece.end is None:
        yield from read_file(drop_id, unit.path, unit.source_file, unit.name_id)
    else:
        limits = record_limits()
        with unit.path.open("rb") as f:
            f.seek(piece.start)
            lines = bounded_lines(f, limits.max_bytes, piece.end)  # a line too large is never held (limits.py)
            yield from read_record_lines(drop_id, enumerate(lines, start=piece.first_line), unit.source_file, limits)


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
        accepted = (tables.SESSIONS, tables.RATINGS, tables.ASKS, tables.ASSIGNMENTS, tables.EVAL_SCORES)
        self.records_accepted += sum(batch.count(t) for t in accepted)
        self.records_quarantined += sum(batch.quarantined[t] for t in RECORD_TYPES)
        self.events_read += batch.read["event"]
        self.events_accepted += batch.count(tables.EVENTS)
        self.events_quarantined += batch.quarantined["event"]


def drop_state(path: Path) -> dict[str, Any]:
    """The drop as it is now, by ``raw.drops`` column: where it is, its fingerprint, size and newest file (regular
    files only). Taken before the drop is listed for reading (``load.load_drop``): a drop that grows while it is read
    (the rating service adds a roll file every few seconds) is then recorded as it was before the files it gained,
    which the drop sensor finds not loaded as it is and loads again. Taken after the read, it vouched for files the
    read never saw, and their ratings were lost until the next roll."""
    drop_fingerprint = fingerprint(path)  # first: a file added after it is at worst read twice, never missed
    files = _regular_files(path)
    mtime = max((st.st_mtime for _, st in files), default=0.0)
    return {
        "path": str(path),
        "fingerprint": drop_fingerprint,
        "n_files": len(files),
        "bytes": sum(st.st_size for _, st in files),
        "mtime": datetime.fromtimestamp(mtime, UTC).replace(tzinfo=None).isoformat(),
    }


def drop_row(drop_id: str, state: dict[str, Any], tally: DropTally) -> dict[str, Any]:
    """The drop's raw.drops row, by column: its state before it was read (``drop_state``) and its counts."""
    return {"drop_id": drop_id, **state, **asdict(tally)}


def _drop_folder(drops_dir: Path) -> tuple[list[tuple[Path, float]], dict[str, tuple[Path, str]]]:
    """The drops (path, modification time) and, by key, the entries that are not drops with why: a link (never
    followed, even to a folder: the drop folder holds what it reads), a FIFO, socket or device. Names starting
    with ``.`` or ``_`` are neither (a registration's staging copy, sidecars)."""
    drops: list[tuple[Path, float]] = []
    not_drops: dict[str, tuple[Path, str]] = {}
    with os.scandir(drops_dir) as scan:
        for entry in scan:
            if entry.name.startswith((".", "_")):
                continue
            path = Path(entry.path)
            try:
                st = entry.stat(follow_symlinks=False)
                reason = skip_reason(path, st.st_mode)
            except FileNotFoundError:  # removed while being listed
                continue
            if reason is None:
                drops.append((path, st.st_mtime))
            elif stat.S_ISLNK(st.st_mode):
                not_drops[drop_key(entry.name)] = (
                    path,
                    f"a symbolic link (to {os.readlink(path)}), not followed: copy the drop in with `pulse ingest"
                    " PATH` (which copies what a link names)",
                )
            else:
                not_drops[drop_key(entry.name)] = (path, f"not a file or folder: {reason}")
    return drops, not_drops


def _by_key(drops: list[tuple[Path, float]]) -> dict[str, Path]:
    return {drop_key(p.name): p for p, _ in sorted(drops, key=lambda d: (d[1], d[0].name))}


def list_drops(drops_dir: Path) -> dict[str, Path]:
    """Drops in the drop folder by partition key, oldest first (by modification time, then name); each entry
    that is not a drop (a link, FIFO, socket or device) is logged with why and left alone, and so is a file or
    folder with nothing to read (:func:`why_empty`: not a drop until it holds data)."""
    if not drops_dir.exists():
        return {}
    drops, not_drops = _drop_folder(drops_dir)
    for path, reason in not_drops.values():
        log.warning("%s is not read as a drop: %s", path, reason)
    kept = []
    for path, mtime in drops:
        try:
            empty = why_empty(path)
        except FileNotFoundError:  # removed while being looked at
            continue
        if empty is None:
            kept.append((path, mtime))
        else:
            log.info("not a drop yet: %s", empty)
    return _by_key(kept)


def find_drop(drops_dir: Path, key: str) -> Path:
    drops, not_drops = _drop_folder(drops_dir) if drops_dir.exists() else ([], {})
    path = _by_key(drops).get(key)
    if path is not None:
        return path
    if key in not_drops:
        entry, reason = not_drops[key]
        raise FileNotFoundError(f"drop {key!r}: {entry} is not read as a drop: {reason}")
    raise FileNotFoundError(
        f"no drop with key {key!r} in {drops_dir}: the file or folder was removed or renamed after it was"
        f" registered. Put it back, or remove the drop: pulse drop rm {key}"
    )
