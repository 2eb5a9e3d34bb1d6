"""A drop's Langfuse files, found by their content and read together (``langfuse.py`` has the mapping).

A Langfuse session is spread over files: one trace per file when traces are fetched one by one
(``GET /api/public/traces/{id}``), and traces, observations and scores in separate folders in the blob-storage
export and in ``pulse pull langfuse``'s drops. So the drop's Langfuse files are one unit (``drop.drop_units``),
read by one reader that gathers every trace, observation and score before it builds the sessions; every other
file of the drop is read as before.

Which files (``is_langfuse_file``, looking at no more than a file's first 4 KiB):

- a file under a folder named ``traces``, ``observations``, ``observations_v2`` or ``scores`` (the export's
  ``<project>/<table>/<timestamp>.<ext>``, and the pull's drops) whose name ends ``.jsonl``, ``.json``, ``.csv`` or
  ``.parquet`` (each optionally ``.gz``, as the export compresses them), and whose head names a Langfuse project
  (``project_id`` / ``projectId``: every export row and API object has one) or, for Parquet, whose columns do;
- elsewhere, a ``.json``, ``.jsonl`` or ``.ndjson`` file whose head holds ``"projectId"`` or ``"project_id"`` (a
  trace fetched from the API, ``{"trace": ..., "observations": [...]}``, a page of API objects).

The head only chooses the reader: each record is then recognized by its content (``langfuse.row_kind``; in an export
folder the folder says the kind). A record in such a file that is no Langfuse record is read as any record is
(``records.add_record``), and a file that holds none is read as any file is (``files.read_file``).

Formats: JSON lines; a JSON document (one object, an array, or an API page ``{"data": [...]}``); CSV with a header
(empty cells are null; JSON columns such as ``input``, ``usage_details`` decoded where read); Parquet (maps as
objects, timestamps as ISO text). A line or document that is not JSON, a file that is not Parquet, a CSV row of the
wrong width is quarantined (record type ``unknown``) with the reason; the rest is read.
"""

from __future__ import annotations

import csv
import gc
import gzip
import io
import zlib
from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from ..settings import SettingsError
from .batch import Batch
from .events import BOM, dump, lines_with_long_integers, parse_json
from .files import read_file, why_unparseable
from .langfuse import EXPORT_TABLES, TABLE_KINDS, Where, collect, row_kind, session_batches
from .records import add_record
from .scores import score_rules

HEAD_BYTES = 4096
TEXT_SUFFIXES = (".json", ".jsonl", ".ndjson")
EXPORT_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".parquet")
PROJECT_MARKS = (b'"projectId"', b'"project_id"', b"project_id")


def table_of(relative: PurePosixPath) -> str | None:
    """The export table a file belongs to: its nearest folder named like one (``traces``, ``observations``,
    ``observations_v2``, ``scores``), or None."""
    for folder in reversed(relative.parts[:-1]):
        if folder in EXPORT_TABLES:
            return folder
    return None


def _inner_name(name: str) -> str:
    return name[:-3] if name.lower().endswith(".gz") else name


def _head(path: Path) -> bytes:
    """The file's first bytes (decompressed when it is gzip)."""
    with path.open("rb") as f:
        head = f.read(HEAD_BYTES)
    if path.name.lower().endswith(".gz"):
        try:
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, HEAD_BYTES)
        except zlib.error:
            return b""
    return head


def is_langfuse_file(path: Path, relative: PurePosixPath) -> bool:
    """Whether the drop's file ``path`` (``relative`` to the drop, with the drop's own name first when the drop is
    a folder) is read by the Langfuse reader (module docstring)."""
    name = _inner_name(path.name.lower())
    in_table = table_of(relative) is not None
    if not name.endswith(EXPORT_SUFFIXES if in_table else TEXT_SUFFIXES):
        return False
    try:
        if name.endswith(".parquet"):
            return _parquet_is_langfuse(path)
        head = _head(path)
    except OSError:
        return False
    return any(mark in head for mark in PROJECT_MARKS)


def _parquet_is_langfuse(path: Path) -> bool:
    import pyarrow.parquet as pq

    try:
        if path.name.lower().endswith(".gz"):
            names = pq.read_schema(io.BytesIO(gzip.decompress(path.read_bytes()))).names
        else:
            names = pq.read_schema(path).names
    except Exception:  # noqa: BLE001 - pyarrow raises many kinds for a file that is not Parquet
        return False
    return "project_id" in names or "projectId" in names


def read_langfuse_unit(drop_id: str, root: Path, files: tuple[Path, ...]) -> Iterator[Batch]:
    """Every Langfuse file of a drop (``root``: the drop), as one batch of sessions and scores; a file that holds
    no Langfuse record is read as any file is."""
    try:
        rules = score_rules()
    except SettingsError as error:  # checked before any work by the preflight; a stage never crashes on it
        raise SettingsError(f"reading Langfuse scores: {error}") from None
    batch = Batch(drop_id)
    delegated: list[tuple[Path, str]] = []

    def records() -> Iterator[tuple[Any, Where, str | None]]:
        for path in files:
            source_file = path.relative_to(root).as_posix() if root.is_dir() else path.name
            relative = PurePosixPath(root.name) / source_file if root.is_dir() else PurePosixPath(source_file)
            table = table_of(relative)
            kind = TABLE_KINDS.get(table) if table else None
            scratch = Batch(drop_id)  # the file's unreadable lines, kept only if the file is read here
            rows = list(_rows(scratch, path, source_file))
            if kind is None and not any(row_kind(obj) for obj, _ in rows):
                delegated.append((path, source_file))  # no Langfuse record at all: an ordinary file
                continue
            batch.absorb(scratch)
            batch.bytes_read += path.stat().st_size
            for obj, index in rows:
                yield obj, Where(source_file, index), kind

    def other(obj: Any, where: Where) -> None:
        add_record(batch, where.source_file, where.record_index, obj, dump(obj).encode())

    # Every record is held until the sessions are built: hundreds of thousands of dicts that the cyclic garbage
    # collector would walk again and again as more are made, finding nothing (no cycle is made here). Paused (not
    # while a batch is with the caller), the read of a 100 000-observation export took a third less time. While a
    # batch is with the caller the collector runs, but the records held are frozen (``gc.freeze``: left out of its
    # walks), unless the process froze objects of its own, which ``gc.unfreeze`` would release too: the caller's
    # first allocations after the pause otherwise set off full walks of them (with the collector off throughout,
    # the read took up to a tenth less).
    collecting = gc.isenabled()
    freezing = gc.get_freeze_count() == 0
    gc.disable()
    try:
        collected = collect(batch, records(), other)
        for done in session_batches(batch, collected, rules):
            if freezing:
                gc.freeze()
            if collecting:
                gc.enable()
            yield done
            gc.disable()
    finally:
        if freezing:
            gc.unfreeze()
        if collecting:
            gc.enable()
    for path, source_file in delegated:
        yield from read_file(drop_id, path, source_file)


def _rows(batch: Batch, path: Path, source_file: str) -> Iterator[tuple[Any, int]]:
    """``(record, index)`` of each record of one file; what cannot be read is quarantined here."""
    raw = path.read_bytes()
    name = path.name.lower()
    if name.endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as error:
            _unreadable(batch, source_file, None, f"not a gzip file ({error})", "")
            return
        name = name[:-3]
    if name.endswith(".parquet"):
        yield from _parquet_rows(batch, raw, source_file)
    elif name.endswith(".csv"):
        yield from _csv_rows(batch, raw, source_file)
    else:
        yield from _json_rows(batch, raw, source_file)


def _unreadable(batch: Batch, source_file: str, index: int | None, reason: str, text: str) -> None:
    batch.read["unknown"] += 1
    batch.quarantine(source_file, index, "unknown", reason, text)


def _json_rows(batch: Batch, raw: bytes, source_file: str) -> Iterator[tuple[Any, int]]:
    raw = raw.removeprefix(BOM)
    if not raw.strip():
        _unreadable(batch, source_file, None, "file is empty", "")
        return
    if _is_json_lines(raw):
        yield from _json_lines(batch, raw, source_file)
        return
    try:
        whole = parse_json(raw)
    except orjson.JSONDecodeError:
        yield from _json_lines(batch, raw, source_file)
        return
    if isinstance(whole, dict) and isinstance(whole.get("data"), list) and "meta" in whole:
        whole = whole["data"]  # a page of the API: {"data": [...], "meta": {...}}
    items = whole if isinstance(whole, list) else [whole]
    yield from ((obj, i) for i, obj in enumerate(items))


def _is_json_lines(raw: bytes) -> bool:
    """Whether ``raw`` is surely JSON lines, not one document: its first line is a whole JSON document and more
    follows, so the whole cannot be one. Reading a large export file as one document first only to be refused at
    its first line's end cost a tenth of a second for the benchmark's 120 MB file of observations."""
    end = raw.find(b"\n")
    if end == -1 or not raw[end : end + 65536].strip():  # (a file of one line and a blank tail: one document)
        return False
    try:
        orjson.loads(raw[:end])
    except orjson.JSONDecodeError:
        return False  # read as before: the whole is tried as one document (it may be one, spread over lines)
    return True


def _json_lines(batch: Batch, raw: bytes, source_file: str) -> Iterator[tuple[Any, int]]:
    """Each line as ``parse_json`` reads it. Its check for integers orjson would read inexactly is made once on the
    whole file, and a line is given to ``parse_json`` only when it holds such digits or orjson refuses it
    (``parse_json`` on every line took half as long again as orjson alone)."""
    again = lines_with_long_integers(raw)  # the lines orjson alone may read inexactly
    loads = orjson.loads
    for i, line in enumerate(raw.split(b"\n")):
        if not line or line.isspace():  # (``strip`` would copy every line)
            continue
        try:
            obj = parse_json(line) if i in again else loads(line)
        except orjson.JSONDecodeError:
            try:
                obj = parse_json(line)  # a byte order mark, NaN, 1e400: read as ``parse_json`` reads them
            except orjson.JSONDecodeError as error:
                _unreadable(batch, source_file, i, why_unparseable(line, error), line.decode("utf-8", "replace"))
                continue
        yield obj, i


def _csv_rows(batch: Batch, raw: bytes, source_file: str) -> Iterator[tuple[Any, int]]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        _unreadable(batch, source_file, None, f"not UTF-8 text ({error.reason} at byte {error.start})", "")
        return
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        _unreadable(batch, source_file, None, "CSV file has no header", "")
        return
    header = [h.strip() for h in header]
    for number, row in enumerate(reader, start=1):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            reason = f"row has {len(row)} cells, the header has {len(header)}"
            _unreadable(batch, source_file, number, reason, dump(row))
            continue
        yield {k: (v if v != "" else None) for k, v in zip(header, row, strict=True)}, number


def _parquet_rows(batch: Batch, raw: bytes, source_file: str) -> Iterator[tuple[Any, int]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(raw))
    except Exception as error:  # noqa: BLE001 - pyarrow raises many kinds for a file that is not Parquet
        _unreadable(batch, source_file, None, f"not a Parquet file ({error})", "")
        return
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_timestamp(column.type):
            columns[name] = timestamp_texts(column)
            continue
        if pa.types.is_date(column.type):
            column = column.cast(pa.string())  # ISO text, in Arrow: three times faster than Python datetimes
        columns[name] = _plain_column(column.to_pylist())
    names = list(columns)
    values = [columns[n] for n in names]
    for i, row in enumerate(zip(*values, strict=True)):
        yield dict(zip(names, row, strict=True)), i


_TIME_TEXT = {"s": "%Y-%m-%d %H:%M:%S", "ms": "%Y-%m-%d %H:%M:%S%.3f", "us": "%Y-%m-%d %H:%M:%S%.6f"}
_TIME_TEXT["ns"] = "%Y-%m-%d %H:%M:%S%.9f"


def timestamp_texts(column: Any) -> list[str | None]:
    """A Parquet timestamp column as the text Arrow's cast to string writes (``2026-01-05 09:00:00.000000``, with
    ``Z`` when the column is in UTC), written by Polars where it writes the same (no zone or UTC, years 1000 to
    9999; checked value for value against Arrow's in the tests), more than twice as fast: a 100 000-observation
    export's five timestamp columns were a tenth of its read. Any other column is cast by Arrow."""
    import polars as pl
    import pyarrow as pa

    kind = column.type
    if kind.tz in (None, "UTC") and kind.unit in _TIME_TEXT:
        series = pl.from_arrow(column)
        years = series.dt.year()
        if series.null_count() == len(series) or (years.min() >= 1000 and years.max() <= 9999):
            return series.dt.to_string(_TIME_TEXT[kind.unit] + ("Z" if kind.tz else "")).to_list()
    return column.cast(pa.string()).to_pylist()


def _plain_column(values: list[Any]) -> list[Any]:
    """A Parquet column's values as JSON would give them: a map (a list of key-value pairs) an object, a timestamp
    ISO text, a decimal a float."""
    first = next((v for v in values if v is not None), None)
    if isinstance(first, datetime | date):
        return [v.isoformat() if v is not None else None for v in values]
    if isinstance(first, Decimal):
        return [float(v) if v is not None else None for v in values]
    if isinstance(first, bytes):
        return [v.decode("utf-8", "replace") if v is not None else None for v in values]
    if isinstance(first, list):
        pairs = next((v for v in values if v), None)  # a map column: the first non-empty one tells
        if pairs is not None and isinstance(pairs[0], tuple) and len(pairs[0]) == 2:
            return [dict(v) if v is not None else None for v in values]
    return values
