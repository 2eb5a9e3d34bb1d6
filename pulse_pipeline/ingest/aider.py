"""aider chat histories: ``.aider.chat.history.md`` at a repository's root (``--chat-history-file``), Markdown.

aider appends to one file per repository, every run of aider a session (Aider-AI/aider at
5dc9490bb35f9729ef2c95d00a19ccd30c26339c: ``aider/io.py`` ``InputOutput.__init__``, ``user_input``, ``ai_output``,
``append_chat_history``, ``_tool_message``, ``tool_output``; ``aider/coders/base_coder.py`` ``get_announcements``,
``calculate_and_show_tokens_and_cost``, ``show_usage_report``; ``aider/utils.py`` ``format_tokens``):

- ``# aider chat started at YYYY-MM-DD HH:MM:SS`` (local time, no zone) opens a session;
- the user's input is written as lines starting ``#### `` (one per line of input, each ending with a Markdown line
  break of two spaces): a run of such lines is one user message, which opens a work segment (slash commands such
  as ``/add`` or ``/run`` included, as Claude Code's reader counts them);
- aider's own output (announcements, confirmations, ``Applied edit to ...``, commits, warnings, errors and the usage
  report) is written as lines starting ``> ``: a run of them is one ``environment`` observation (``edit`` when it
  says ``Applied edit to``, ``error`` when a line says ``Error`` first, else ``other`` named ``aider_output``); the
  usage report's ``Cost:`` part is on a line of its own without ``> `` when the report names both cache writes and
  hits (``show_usage_report`` prints it as one message with a line break, which ``tool_output`` does not split);
- any other text is the model's reply: the agent's ``message``.

What the output says about the session, kept in its metadata: ``model`` is the last ``Model:`` (or ``Main model:``)
announcement's model (``aider_models`` lists each in order, a change of model re-announces it), ``agent_version``
the ``Aider vX`` line's version, ``llm_usage`` the sums of every usage report (``Tokens: 9.0k sent, [1.2k cache
write, ][3.4k cache hit, ]489 received. Cost: $0.0016 message, $0.01 session.``): prompt tokens the ``sent``
figures (aider counts cache reads in them, and adds cache writes), completion tokens the ``received`` ones, cost
the ``message`` figures (each report covers the messages since the last, so the sum is the session's). The figures
are as rounded as aider prints them: tokens to 0.1k below 10k and to 1k above, cost to two significant decimals.
``aider_usage`` keeps the sums, the cache figures and the last ``session`` cost aider printed.

A session has no id in the file, so it gets one from where it is: ``<path within the drop>@<its start time>``
(``myrepo/.aider.chat.history.md@2026-01-01T10:00:00``), with ``#2``, ``#3`` added for a start time repeated in
the file; its record index is its start line's number (from 0). Both stay the same when the file is delivered again
with more sessions appended, so a later drop replaces the session rather than adding a copy.

Each event keeps, as its original JSON, ``{"line": <number from 1>, "type": "user" | "assistant" | "aider",
"text": ...}``; the session's first event carries its start time (the file has no other time).

Bad input, each quarantined with the reason: a file (or the text before its first session) with no ``# aider chat
started at`` line; a session that is not UTF-8 text; a session larger than ``PULSE_MAX_RECORD_MB``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .. import tables
from .adapter import Adapter, EventFields, add_session
from .batch import Batch
from .drop_names import AIDER_HISTORY
from .events import BOM
from .files import CHUNK_BYTES, CHUNK_EVENTS
from .limits import Oversized, bounded_lines, excerpt_text, record_limits

HISTORY_NAME = AIDER_HISTORY  # aider's default --chat-history-file (aider/args.py)
START = re.compile(rb"^# aider chat started at (\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})\s*$")
_USER = re.compile(r"^####(?: |$)")
_OUTPUT = re.compile(r"^>(?: |$)")
_MODEL = re.compile(r"^(?:Main model|Model): (\S+)")
_VERSION = re.compile(r"^Aider v(\S+)")
_TOKENS = re.compile(
    r"Tokens: ([\d.]+k?) sent(?:, ([\d.]+k?) cache write)?(?:, ([\d.]+k?) cache hit)?, ([\d.]+k?) received\."
)
_COST = re.compile(r"Cost: \$([\d.]+) message, \$([\d.]+) session\.")


def is_aider_history(name: str) -> bool:
    """Whether a file is an aider chat history by its name: ``.aider.chat.history.md``, or a copy named
    ``<anything>.aider.chat.history.md`` (``myrepo.aider.chat.history.md``)."""
    return name.endswith(HISTORY_NAME)


def _tokens(text: str | None) -> int | None:
    """aider's ``format_tokens`` read back: ``489``, ``9.0k`` (9000), ``12k`` (12000)."""
    if not text:
        return None
    try:
        return round(float(text[:-1]) * 1000) if text.endswith("k") else int(text)
    except ValueError:
        return None


class AiderLines(Adapter):
    """The blocks of one aider session (built by ``session_blocks``), one event each."""

    format = "aider"

    def __init__(self, started: str) -> None:
        self.started = started
        self.models: list[str] = []
        self.version: str | None = None
        self.sums = {"sent": 0, "received": 0, "cache_write": 0, "cache_hit": 0, "cost": 0.0}
        self.reports = 0
        self.costs = 0
        self.session_cost: float | None = None
        self.first = True

    def parse(self, event: dict[str, Any]) -> EventFields:
        kind, text = event.get("type"), event.get("text")
        text = text if isinstance(text, str) else None
        if kind == "user":
            fields = EventFields("user", "action", "message", text=text)
        elif kind == "assistant":
            fields = EventFields("agent", "action", "message", text=text)
        else:
            fields = self._output(text or "")
        fields.event_id = f"L{event.get('line')}"
        if self.first:
            fields.timestamp, self.first = self.started, False
        return fields

    def _output(self, text: str) -> EventFields:
        lines = text.split("\n")
        for line in lines:
            if found := _MODEL.match(line):
                if not self.models or self.models[-1] != found[1]:
                    self.models.append(found[1])
            elif found := _VERSION.match(line):
                self.version = self.version or found[1]
            if found := _TOKENS.search(line):
                self.reports += 1
                for key, value in zip(("sent", "cache_write", "cache_hit", "received"), found.groups(), strict=True):
                    self.sums[key] += _tokens(value) or 0
            if found := _COST.search(line):
                self.costs += 1
                self.sums["cost"] += float(found[1])
                self.session_cost = float(found[2])
        if any(line.startswith("Applied edit to") for line in lines):
            return EventFields("environment", "observation", "edit", text=text)
        if any(line.startswith("Error") for line in lines):
            return EventFields("environment", "observation", "error", text=text)
        return EventFields("environment", "observation", "other", original_name="aider_output", text=text)

    def session_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "llm_usage": {
                "cost_usd": round(self.sums["cost"], 10) if self.costs else None,
                "prompt_tokens": self.sums["sent"] if self.reports else None,
                "completion_tokens": self.sums["received"] if self.reports else None,
            }
        }
        if self.models:
            info["model"] = self.models[-1]
            info["aider_models"] = self.models
        if self.version:
            info["agent_version"] = self.version
        if self.reports:
            info["aider_usage"] = {**self.sums, "reports": self.reports, "last_session_cost": self.session_cost}
        return info


def session_blocks(lines: list[str], first_line: int) -> list[dict[str, Any]]:
    """A session's lines (after its start line; ``first_line`` numbers the first of them from 1) as blocks: runs of
    ``#### `` lines (user), runs of ``> `` lines (aider), and the text between (assistant), each with its first
    line's number."""
    blocks: list[dict[str, Any]] = []
    kind: str | None = None
    start = 0
    held: list[str] = []

    def close() -> None:
        if kind is not None:
            text = "\n".join(held).strip("\n") if kind != "assistant" else "\n".join(held).strip()
            if text or kind == "user":
                blocks.append({"line": start, "type": kind, "text": text})

    for i, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        if _USER.match(line):
            this, content = "user", line[5:].rstrip()
        elif _OUTPUT.match(line) or (kind == "aider" and line.startswith("Cost: $")):
            this, content = "aider", (line[2:] if line.startswith(">") else line).rstrip()
        elif not line.strip() and kind in ("user", "aider"):
            close()
            kind, held = None, []
            continue
        else:
            this, content = "assistant", line.rstrip()
        if this != kind:
            close()
            kind, start, held = this, first_line + i, []
        held.append(content)
    close()
    return blocks


def read_aider_history(drop_id: str, path: Path, source_file: str) -> Iterator[Batch]:
    """Every session of one chat history file, read one session at a time, in batches of about ``CHUNK_EVENTS``
    events or ``CHUNK_BYTES`` bytes (memory stays bounded by a session, whatever the file's size)."""
    batch = Batch(drop_id)
    limits = record_limits()
    seen: dict[str, int] = {}
    with path.open("rb") as f:
        head = f.read(len(BOM))
        if head != BOM:
            f.seek(0)
        read = 0
        for start_index, match, lines, size in _chunks(f, limits.max_bytes):
            read += 1
            if match is None:
                _no_start(batch, source_file, lines, size, start_index)
                continue
            started = f"{match[1].decode()}T{match[2].decode()}"
            seen[started] = seen.get(started, 0) + 1
            session_id = f"{source_file}@{started}" + (f"#{seen[started]}" if seen[started] > 1 else "")
            if size > limits.max_bytes:
                batch.read["session"] += 1
                reason = limits.too_many_bytes(size, "an aider session")
                batch.quarantine(source_file, start_index, "session", reason, excerpt_text(b"\n".join(lines)))
                continue
            try:
                text = [line.decode("utf-8") for line in lines]
            except UnicodeDecodeError as error:
                batch.read["session"] += 1
                reason = f"aider session not UTF-8 text ({error.reason} at byte {error.start} of a line)"
                batch.quarantine(source_file, start_index, "session", reason, excerpt_text(b"\n".join(lines)))
                continue
            adapter = AiderLines(started)
            blocks = session_blocks(text[1:], start_index + 2)
            info = {"aider_started": started}
            add_session(batch, source_file, start_index, session_id, "aider", adapter, blocks, info)
            batch.held_bytes += size
            if batch.count(tables.EVENTS) >= CHUNK_EVENTS or batch.held_bytes >= CHUNK_BYTES:
                yield batch
                batch = Batch(drop_id)
    if not read:
        batch.read["unknown"] += 1
        batch.quarantine(source_file, None, "unknown", "file is empty", "")
    yield batch


def _chunks(f, max_bytes: int) -> Iterator[tuple[int, re.Match | None, list[bytes], int]]:
    """``(index of the first line, start match or None, lines without their line end, bytes)`` for the text before
    the first session (when it holds more than white space) and for each session. A session's lines stop being held
    past ``max_bytes`` (its size still counted), and a line longer than that is never held whole
    (``limits.bounded_lines``), so no session larger than ``max_bytes`` is held."""
    index, match, lines, size = 0, None, [], 0
    for number, line in enumerate(bounded_lines(f, max_bytes)):
        if isinstance(line, Oversized):
            size += line.size + 1
            continue
        found = START.match(line.rstrip(b"\r"))
        if found:
            if match is not None or any(x.strip() for x in lines):
                yield index, match, lines, size
            index, match, lines, size = number, found, [], 0
        size += len(line) + 1
        if size <= max_bytes:
            lines.append(line)
    if match is not None or any(x.strip() for x in lines):
        yield index, match, lines, size


def _no_start(batch: Batch, source_file: str, lines: list[bytes], size: int, index: int) -> None:
    """Text with no session start line before it: one record quarantined, with why."""
    batch.read["unknown"] += 1
    reason = (
        f"not an aider session: no '# aider chat started at YYYY-MM-DD HH:MM:SS' line before this text ({size} bytes;"
        " aider writes one each time it starts); restore the start line, or remove the text"
    )
    batch.quarantine(source_file, index, "unknown", reason, excerpt_text(b"\n".join(lines)))
