"""How large one record may be, checked before it is parsed, and reading lines without holding one that is larger.

Why (issue 34): reading a record takes its bytes several times over (the line, the parsed values, each event's
``raw_json`` and text, Arrow's copy, DuckDB's write), and a record of many small values far more, a Python object
per value: a 200 MB line of nested arrays took 5.7 GB and 73 s. So every record (a JSON line, or a file that is one
JSON document) is measured before it is parsed, and one that is too large is quarantined, the rest of the drop loads:

- more bytes than ``PULSE_MAX_RECORD_MB`` (default 64 MiB): it is never read whole, only skipped to its line's end
  (``bounded_lines``);
- more JSON values than ``PULSE_MAX_RECORD_VALUES`` (default 4 000 000), counted as its commas and opening brackets
  plus one (every value but the first of a list or object follows a comma; commas inside strings count too, so the
  count can only be too high): it is not parsed. Only records of more bytes than the limit on values are counted
  (a record cannot hold more values than bytes), so ordinary lines cost nothing.

The quarantine row's reason names the size and the setting; its ``raw_text`` is the record's first ``EXCERPT_BYTES``
(the whole record stays in its file in the drop folder, at the row's ``source_file`` and ``record_index``). Within
the limits a record loads: the loader gives DuckDB memory in proportion to the batch it inserts (``load.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from ..settings import MAX_RECORD_MB, MAX_RECORD_VALUES, ingest_settings

EXCERPT_BYTES = 64 << 10  # what a quarantine row keeps of a record too large to read
_SKIP_BYTES = 1 << 20  # an oversized line is skipped this much at a time


@dataclass(frozen=True)
class RecordLimits:
    max_bytes: int
    max_values: int

    def why_too_large(self, raw: bytes) -> str | None:
        """Why the record ``raw`` is not parsed, or None when it is within both limits."""
        if len(raw) > self.max_bytes:
            return self.too_many_bytes(len(raw))
        if len(raw) > self.max_values:
            values = raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1
            if values > self.max_values:
                return (
                    f"record of {len(raw):,} bytes holds up to {values:,} JSON values (its commas and brackets),"
                    f" more than {MAX_RECORD_VALUES}={self.max_values}: it was not parsed (a value takes a Python"
                    f" object, ~100 bytes); raise {MAX_RECORD_VALUES} to read it. {_KEPT}"
                )
        return None

    def too_many_bytes(self, size: int, what: str = "record") -> str:
        mib = round(self.max_bytes / (1 << 20), 3)
        return (
            f"{what} is {size:,} bytes, more than {MAX_RECORD_MB}={mib:g} ({self.max_bytes:,} bytes): it was not"
            f" read (reading takes several times its size in memory); raise {MAX_RECORD_MB} to read it. {_KEPT}"
        )


_KEPT = f"raw_text keeps its first {EXCERPT_BYTES >> 10} KiB; the whole of it is still in the drop's file."


def record_limits() -> RecordLimits:
    """The limits ``PULSE_MAX_RECORD_MB`` and ``PULSE_MAX_RECORD_VALUES`` set (read once per file or piece)."""
    settings = ingest_settings()
    return RecordLimits(settings.max_record_bytes, settings.max_record_values)


@dataclass(frozen=True)
class Oversized:
    """A line longer than the limit, in place of its bytes: its length and its first ``EXCERPT_BYTES``."""

    size: int
    excerpt: bytes

    def text(self) -> str:
        return excerpt_text(self.excerpt)


def excerpt_text(raw: bytes) -> str:
    """The first ``EXCERPT_BYTES`` of ``raw`` as text (a character cut in two becomes U+FFFD)."""
    return raw[:EXCERPT_BYTES].decode("utf-8", "replace")


def bounded_lines(f: BinaryIO, limit: int, end: int | None = None) -> Iterator[bytes | Oversized]:
    """Every line of the binary file ``f`` from its position to byte ``end`` (None: its end), without its ``\\n``.

    A line longer than ``limit`` bytes is never held whole: it is read ``_SKIP_BYTES`` at a time to its end and
    given as ``Oversized``. So memory is bounded by ``limit``, whatever the file holds (one 200 MB line)."""
    pos = f.tell()
    while end is None or pos < end:
        want = limit + 1 if end is None else min(limit + 1, end - pos)
        line = f.readline(want)
        if not line:
            return
        pos += len(line)
        if len(line) <= limit or line.endswith(b"\n"):
            yield line[:-1] if line.endswith(b"\n") else line
            continue
        size, excerpt, ended = len(line), line[:EXCERPT_BYTES], False
        del line
        while not ended and (end is None or pos < end):
            chunk = f.readline(_SKIP_BYTES if end is None else min(_SKIP_BYTES, end - pos))
            if not chunk:
                break
            pos += len(chunk)
            ended = chunk.endswith(b"\n")
            size += len(chunk) - ended
            if len(excerpt) < EXCERPT_BYTES:  # a limit below EXCERPT_BYTES: the excerpt is still that long
                excerpt += chunk[: EXCERPT_BYTES - len(excerpt)].removesuffix(b"\n")
        yield Oversized(size, excerpt)
