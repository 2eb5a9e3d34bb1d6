"""OpenCode sessions (anomalyco/opencode, formerly sst/opencode), from its SQLite database or its older JSON tree.

Where OpenCode writes: ``~/.local/share/opencode/opencode.db`` (``$XDG_DATA_HOME/opencode``), and, before the
database, ``~/.local/share/opencode/storage/``. Sources (anomalyco/opencode): the tables are
``packages/opencode/src/session/session.sql.ts`` at 063e8306d9895af9bdd175306cfa4fa3291fd83a (``session``,
``message``, ``part``; ``Timestamps`` in ``storage/schema.sql.ts``: ``time_created``, ``time_updated`` in epoch
milliseconds), the records ``session/message-v2.ts`` at 007a9409bafea06d6b9084ff1f6d1fe9f5e3a803 (``User``,
``Assistant``, the ``Part`` union; a row is hydrated as ``{...data, id, sessionID[, messageID]}``, as its
``info``/``part`` functions do), the tree ``storage/json-migration.ts`` at
062aa8c024a00b7348dd3160c0b4fbbfce074ee2 (``project/<id>.json``, ``session/<projectID>/<id>.json``,
``message/<sessionID>/<id>.json``, ``part/<messageID>/<id>.json``; ids from the paths, not the content) and the
undo state ``session/revert.ts`` at 089ee8d0e6acc3225e52064e1906714e7f1bc52c.

**The database** (a drop's file whose first bytes are SQLite's header, whatever its name) is opened read-only
(``sqlite3``, a ``mode=ro`` URI) and never written: with ``immutable=1``, so SQLite creates no ``-shm`` or
``-wal`` file in the drop; when a non-empty write-ahead log sits beside it (``opencode.db-wal``, which holds the
latest transactions until SQLite checkpoints them), the database and its log are copied to a temporary folder
and the copy is read instead. The ``-wal``, ``-shm`` and ``-journal`` files beside a database are part of it,
not files of their own (``database_companions``). A SQLite file without the tables ``session``, ``message`` and
``part``, or one SQLite cannot read, is one quarantined record saying why. A session whose history is only in the
newer ``session_message`` table (OpenCode's next message store, still changing upstream) is quarantined saying
so, not read.

**The JSON tree** is a folder holding the folders ``session`` and ``message`` (OpenCode's ``storage/``), read as
one unit (``is_storage_root``): every regular file below it is read by this module; ``project``, ``session``,
``message`` and ``part`` files as above; any other file (``todo/``, ``session_diff/``, ...) is one quarantined
record saying it is not part of a conversation.

**What becomes what.** Each session (a ``session`` row or file, or a session id that only messages name) is one
PULSE session, id the OpenCode session id, ``source_format`` ``opencode``; its messages in order of creation
(``time.created``, then id, as OpenCode lists them), each followed by its parts in id order:

- a ``user`` message is the user's ``message`` (it counts and opens a work segment); its text is the message's
  text parts that are neither ``synthetic`` (text OpenCode adds: a file's content for an ``@file``, a command's
  expansion) nor ``ignored``, joined (as OpenCode's own ``mapUser`` takes them:
  ``packages/core/src/session/message-backfill.ts`` at 9a7198e6144d8f72aea4015434173ce5a7b94555). A user
  message without such text (only a compaction request, a sub-task or synthetic text) is a ``system`` action from
  the ``environment`` (``condensation_request`` for a compaction). Its parts are ``state`` events named by their
  type (their text is in the message). Tool results are parts of the assistant's messages, never user messages.
- an ``assistant`` message is a ``state`` event ``assistant_message`` (an ``error`` observation when it carries
  an ``error``); its ``text`` parts are the agent's ``message`` (``condensation`` in a ``summary`` message), the
  last of a message whose ``finish`` is neither ``tool-calls`` nor ``unknown`` waiting for the user;
  ``reasoning`` is ``think``; a ``tool`` part is an action (its ``callID`` the id) and, once ``completed`` or
  ``error``, the observation answering it (``<callID>:result``): ``bash`` is ``run`` (``command`` its
  ``input.command``, exit code its ``metadata.exit``, -1 for an error without one), ``edit``, ``multiedit``,
  ``patch``, ``apply_patch`` ``edit``, ``write`` ``write``, ``read``, ``glob``, ``grep``, ``list``,
  ``codesearch`` ``read``, ``webfetch``, ``websearch`` ``browse``, ``task`` ``delegate``, ``todowrite``,
  ``todoread`` ``task_tracking`` (``packages/opencode/src/tool/``); any other tool is ``other`` with its name, a
  failed one's result ``error``. A ``retry`` part is an ``error`` observation; ``step-start``, ``step-finish``,
  ``snapshot``, ``patch`` and ``agent`` parts are ``state`` events named by their type.
- A child session (``parent_id``: a ``task`` tool's sub-agent) has no user: its user-role messages are the parent
  agent's prompts, so every message is source ``subagent`` and none counts as the user's.
- **Undone messages.** A session whose ``revert`` is set (``/undo``, not yet cleaned up or redone) shows its
  messages only up to ``revert.messageID``: that message (from its part ``revert.partID`` on, when given) and
  every later one are left out, as OpenCode's cleanup removes them; how many is ``reverted_messages``.
- Event times: a message's ``time.created``, a part's ``time.start`` (a tool's ``state.time.start``, its result's
  ``state.time.end``), in epoch milliseconds, as ISO text.

**Usage** (session metadata, ``events.llm_usage``): over every assistant message, undone ones included (they were
spent), the sum of ``cost`` (US dollars, as OpenCode priced it; None when no message has one), prompt tokens
``tokens.input + tokens.cache.read + tokens.cache.write`` (OpenCode's ``input`` leaves the cached ones out) and
completion tokens ``tokens.output + tokens.reasoning`` (OpenCode prices reasoning apart from output, at the output
rate). ``model`` is the ``modelID`` of the most assistant messages, ``provider`` its ``providerID``; with the
session's ``title``, ``directory``, ``agent_version`` (OpenCode's ``version``), ``project_id``, ``parent_id`` and
the project's ``worktree``.

Bad input, each quarantined with the reason and counted (read = accepted + quarantined): a message or part whose
JSON does not parse or is not an object (an event), a part whose message the session does not have (an event), a
session with no readable message (``adapter.add_session``), a file of the tree that is none of the above.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from .. import tables
from .adapter import Adapter, EventFields, add_session
from .batch import Batch
from .events import OBSERVATION_NAMES, NotAnId, as_id, as_int, as_text, dump, llm_usage, parse_json, read_id
from .limits import EXCERPT_BYTES

SQLITE_MAGIC = b"SQLite format 3\x00"
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")
REQUIRED_TABLES = ("session", "message", "part")
STORAGE_LAYOUT = "opencode_storage"
SOURCE_FORMAT = "opencode"
CHUNK_EVENTS = 50_000  # a batch is handed on once it holds this many events (as ``files.CHUNK_EVENTS``)

_TOOLS = {
    "bash": "run",
    "edit": "edit",
    "multiedit": "edit",
    "patch": "edit",
    "apply_patch": "edit",
    "write": "write",
    "read": "read",
    "glob": "read",
    "grep": "read",
    "list": "read",
    "codesearch": "read",
    "webfetch": "browse",
    "websearch": "browse",
    "task": "delegate",
    "todowrite": "task_tracking",
    "todoread": "task_tracking",
}
_TOOL_TEXT_KEYS = ("filePath", "path", "pattern", "url", "query", "description", "prompt")
_STATE_PARTS = frozenset(["step-start", "step-finish", "snapshot", "patch", "agent", "file", "subtask", "compaction"])


# --- the adapter: one session's messages and parts -> canonical events --------------------------------------------


@dataclass
class Message:
    """One OpenCode message as OpenCode hydrates it: its info (``{...data, id, sessionID}``) and its parts."""

    info: dict[str, Any]
    parts: list[dict[str, Any]] = field(default_factory=list)


def _iso(ms: Any) -> str | None:
    """Epoch milliseconds as ISO text (UTC), None when not a number."""
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None


def _time(record: dict[str, Any], key: str) -> Any:
    time = record.get("time")
    return time.get(key) if isinstance(time, dict) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class OpenCode(Adapter):
    """One OpenCode session: its messages (``Message``), in order, given to ``add_session`` as the raw events."""

    format = SOURCE_FORMAT

    def __init__(self, subagent: bool = False, revert: dict[str, Any] | None = None) -> None:
        self.subagent = subagent
        self.revert = revert if isinstance(revert, dict) else {}
        self.user_text: dict[str, str | None] = {}  # user message id -> the user's words
        self.finish: dict[str, Any] = {}  # assistant message id -> its finish reason
        self.last_text: set[str] = set()  # id of each assistant message's last text part
        self.summary: set[str] = set()  # ids of assistant messages that are summaries
        self.message_time: dict[str, str | None] = {}
        self.assistants: list[dict[str, Any]] = []
        self.reverted = 0

    def events(self, raw_events: Iterable[Any]) -> Iterator[Any]:
        """Each message's info, then its parts; what ``/undo`` took back left out (module docstring)."""
        messages = [m for m in raw_events if isinstance(m, Message)]
        self.assistants = [m.info for m in messages if m.info.get("role") == "assistant"]
        kept = self._without_reverted(messages)
        for message in kept:
            info = message.info
            message_id = as_id(info.get("id")) or ""
            self.message_time[message_id] = _iso(_time(info, "created"))
            if info.get("role") == "user":
                words = [
                    p["text"]
                    for p in message.parts
                    if p.get("type") == "text"
                    and isinstance(p.get("text"), str)
                    and not p.get("synthetic")
                    and not p.get("ignored")
                ]
                self.user_text[message_id] = "\n".join(words) if any(w.strip() for w in words) else None
            elif info.get("role") == "assistant":
                self.finish[message_id] = info.get("finish")
                if info.get("summary") is True:
                    self.summary.add(message_id)
                texts = [as_id(p.get("id")) for p in message.parts if p.get("type") == "text"]
                if texts and texts[-1]:
                    self.last_text.add(texts[-1])
        for message in kept:
            yield message.info
            yield from message.parts

    def _without_reverted(self, messages: list[Message]) -> list[Message]:
        target, part_id = as_id(self.revert.get("messageID")), as_id(self.revert.get("partID"))
        ids = [as_id(m.info.get("id")) for m in messages]
        if target is None or target not in ids:
            return messages
        at = ids.index(target)
        kept = messages[:at]
        if part_id is not None:
            parts = messages[at].parts
            part_ids = [as_id(p.get("id")) for p in parts]
            cut = part_ids.index(part_id) if part_id in part_ids else len(parts)
            kept.append(Message(messages[at].info, parts[:cut]))
        self.reverted = len(messages) - len(kept)
        return kept

    def parse_all(self, event: dict[str, Any]) -> list[EventFields]:
        if "role" in event and "messageID" not in event:
            return [self._message(event)]
        return self._part(event)

    def _message(self, info: dict[str, Any]) -> EventFields:
        message_id = as_id(info.get("id")) or ""
        when = self.message_time.get(message_id)
        role = info.get("role")
        if role == "user":
            text = self.user_text.get(message_id)
            if text is not None:
                return EventFields(
                    "subagent" if self.subagent else "user", "action", "message", text=text, timestamp=when
                )
            return EventFields("environment", "action", "system", timestamp=when)
        if role == "assistant":
            error = info.get("error")
            if error:
                data = error.get("data") if isinstance(error, dict) else None
                text = as_text(data.get("message")) if isinstance(data, dict) else None
                return EventFields("environment", "observation", "error", text=text or as_text(error), timestamp=when)
            return EventFields("environment", "state", "assistant_message", timestamp=when)
        return EventFields("unknown", "other", "other", original_name=as_text(role), timestamp=when)

    def _part(self, part: dict[str, Any]) -> list[EventFields]:
        part_type = part.get("type")
        message_id = as_id(part.get("messageID")) or ""
        when = _iso(_time(part, "start")) or self.message_time.get(message_id)
        in_user = message_id in self.user_text
        source = "subagent" if self.subagent else "agent"
        if part_type == "text" and not in_user:
            name = "condensation" if message_id in self.summary else "message"
            fields = EventFields(source, "action", name, text=as_text(part.get("text")), timestamp=when)
            finish = self.finish.get(message_id)
            if name == "message" and finish is not None:
                ends = finish not in ("tool-calls", "unknown") and as_id(part.get("id")) in self.last_text
                fields.wait_for_response = ends
            return [fields]
        if part_type == "reasoning":
            return [EventFields(source, "action", "think", text=as_text(part.get("text")), timestamp=when)]
        if part_type == "tool":
            return self._tool(part, source)
        if part_type == "retry":
            error = part.get("error")
            data = error.get("data") if isinstance(error, dict) else None
            text = as_text(data.get("message")) if isinstance(data, dict) else as_text(error)
            return [EventFields("environment", "observation", "error", text=text, timestamp=when)]
        if part_type == "compaction" and in_user and self.user_text.get(message_id) is None:
            return [EventFields("environment", "action", "condensation_request", timestamp=when)]
        if part_type == "text" or (isinstance(part_type, str) and part_type in _STATE_PARTS):
            who = ("subagent" if self.subagent else "user") if in_user else "environment"
            return [EventFields(who, "state", part_type.replace("-", "_"), timestamp=when)]
        return [EventFields("unknown", "other", "other", original_name=as_text(part_type), timestamp=when)]

    def _tool(self, part: dict[str, Any], source: str) -> list[EventFields]:
        tool = part.get("tool") if isinstance(part.get("tool"), str) else None
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        args = state.get("input") if isinstance(state.get("input"), dict) else {}
        call_id = as_id(part.get("callID")) or as_id(part.get("id"))
        name = _TOOLS.get(tool or "", "other")
        when = _iso(_time(state, "start")) or self.message_time.get(as_id(part.get("messageID")) or "")
        action = EventFields(source, "action", name, event_id=call_id, timestamp=when)
        if name == "other":
            action.original_name = tool
        if name == "run":
            action.command = args.get("command") if isinstance(args.get("command"), str) else None
            action.text = action.command
        else:
            action.text = next((args[k] for k in _TOOL_TEXT_KEYS if isinstance(args.get(k), str)), None)
        status = state.get("status")
        if status not in ("completed", "error"):
            return [action]  # pending or running: interrupted before it answered
        metadata = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
        text = as_text(state.get("output") if status == "completed" else state.get("error"))
        result = EventFields(
            "environment",
            "observation",
            "other",
            text=text,
            cause=call_id,
            event_id=f"{call_id}:result" if call_id else None,
            timestamp=_iso(_time(state, "end")) or action.timestamp,
        )
        if name == "run":
            result.name, result.command = "run", action.command
            exit_code = as_int(metadata.get("exit"))
            result.exit_code = exit_code if exit_code is not None else (-1 if status == "error" else None)
        elif status == "error":
            result.name = "error"
        elif name in OBSERVATION_NAMES:
            result.name = name
        else:
            result.original_name = tool
        return [action, result]

    def session_info(self) -> dict[str, Any]:
        costs = [c for c in (_number(m.get("cost")) for m in self.assistants) if c is not None]
        prompt = completion = 0
        counted = False
        for message in self.assistants:
            tokens = message.get("tokens")
            if not isinstance(tokens, dict):
                continue
            counted = True
            cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
            prompt += sum(as_int(v) or 0 for v in (tokens.get("input"), cache.get("read"), cache.get("write")))
            completion += sum(as_int(v) or 0 for v in (tokens.get("output"), tokens.get("reasoning")))
        models = Counter(
            (m["modelID"], m.get("providerID") if isinstance(m.get("providerID"), str) else None)
            for m in self.assistants
            if isinstance(m.get("modelID"), str) and m["modelID"]
        )
        info: dict[str, Any] = llm_usage(
            sum(costs) if costs else None, prompt if counted else None, completion if counted else None
        )
        (model, provider), _ = models.most_common(1)[0] if models else ((None, None), 0)
        info["model"] = model
        info["provider"] = provider
        if self.reverted:
            info["reverted_messages"] = self.reverted
        return info


# --- one session's rows --------------------------------------------------------------------------------------------


def _session_metadata(session: dict[str, Any], project: dict[str, Any] | None) -> dict[str, Any]:
    """What the session (a row, or a file: camelCase) and its project say, kept in the session's metadata."""

    def first(*keys: str) -> Any:
        return next((session[k] for k in keys if session.get(k) not in (None, "")), None)

    time = session.get("time") if isinstance(session.get("time"), dict) else {}
    found = {
        "title": first("title"),
        "directory": first("directory"),
        "agent_version": first("version"),
        "project_id": first("project_id", "projectID"),
        "parent_id": first("parent_id", "parentID"),
        "slug": first("slug"),
        "time_created": first("time_created") or time.get("created"),
        "time_updated": first("time_updated") or time.get("updated"),
    }
    if project:
        found["worktree"] = project.get("worktree")
        found["project_name"] = project.get("name")
    return {k: v for k, v in found.items() if v not in (None, "")}


def _add_session(
    batch: Batch,
    source_file: str,
    record_index: int,
    session_id: Any,
    session: dict[str, Any],
    project: dict[str, Any] | None,
    messages: list[Message],
) -> None:
    """One OpenCode session's rows (``adapter.add_session``), or its quarantine when its id is no id."""
    try:
        session_id = read_id(session_id, "session id")
    except NotAnId as error:
        batch.read["session"] += 1
        batch.quarantine(source_file, record_index, "session", str(error), dump(session))
        return
    if session_id is None:
        batch.read["session"] += 1
        batch.quarantine(source_file, record_index, "session", "session has no id", dump(session))
        return
    revert = session.get("revert")
    if isinstance(revert, str):
        revert = _json_object(revert)
    parent = session.get("parent_id") or session.get("parentID")
    adapter = OpenCode(subagent=bool(parent), revert=revert if isinstance(revert, dict) else None)
    info = _session_metadata(session, project)
    add_session(batch, source_file, record_index, session_id, SOURCE_FORMAT, adapter, messages, info)


def _json_object(text: Any) -> Any:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        return text
    try:
        return parse_json(text.encode())
    except orjson.JSONDecodeError:
        return None


def _record(raw: Any, what: str) -> tuple[dict[str, Any] | None, str | None]:
    """A JSON ``data`` column or file's object, or None and the reason it is none."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if not isinstance(raw, bytes):
        return None, f"{what}: data is {type(raw).__name__}, not JSON text"
    try:
        value = parse_json(raw)
    except orjson.JSONDecodeError as error:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, f"{what}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        return None, f"{what}: not valid JSON ({error})" if raw.strip() else f"{what}: empty"
    if not isinstance(value, dict):
        return None, f"{what}: not a JSON object ({_json_type(value)})"
    return value, None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {list: "an array", str: "a string"}.get(type(value), "a number")


def _bad_event(batch: Batch, source_file: str, record_index: int | None, reason: str, raw: Any, position: int) -> None:
    batch.read["event"] += 1
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else as_text(raw) or ""
    batch.quarantine(source_file, record_index, "event", reason, text[:EXCERPT_BYTES], event_index=position)


# --- the database ----------------------------------------------------------------------------------------------------


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts with SQLite's header."""
    try:
        with path.open("rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def database_companions(files: Iterable[Path]) -> set[Path]:
    """The ``-wal``, ``-shm`` and ``-journal`` files among ``files`` that sit beside a SQLite database among them:
    parts of that database (its reader reads the log), not files of their own."""
    present = set(files)
    found = set()
    for f in present:
        if f.name.endswith(COMPANION_SUFFIXES):
            database = f.with_name(f.name.rsplit("-", 1)[0])
            if database in present and is_sqlite(database):
                found.add(f)
    return found


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


@contextmanager
def open_read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the database at ``path`` that writes nothing beside it (module docstring)."""
    log = path.with_name(path.name + "-wal")
    if _regular(log) and log.stat().st_size > 0:
        with tempfile.TemporaryDirectory(prefix="pulse-opencode-") as folder:
            copy = Path(folder) / "opencode.db"
            shutil.copyfile(path, copy)
            shutil.copyfile(log, Path(folder) / "opencode.db-wal")
            con = sqlite3.connect(f"{copy.as_uri()}?mode=ro", uri=True)
            try:
                yield con
            finally:
                con.close()
        return
    con = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        yield con
    finally:
        con.close()


def _why_not_opencode(con: sqlite3.Connection) -> str | None:
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = [t for t in REQUIRED_TABLES if t not in names]
    if not missing:
        return None
    has = ", ".join(sorted(names)[:12]) or "none"
    return (
        f"a SQLite database without the table(s) {', '.join(missing)} of an OpenCode database (its tables: {has}):"
        " point PULSE at OpenCode's opencode.db (~/.local/share/opencode/opencode.db)"
    )


def _rows(con: sqlite3.Connection, sql: str, params: tuple = ()) -> Iterator[dict[str, Any]]:
    cursor = con.execute(sql, params)
    names = [d[0] for d in cursor.description]
    for row in cursor:
        yield dict(zip(names, row, strict=True))


def read_database(drop_id: str, path: Path, source_file: str) -> Iterator[Batch]:
    """Every session of an OpenCode database, in batches of about ``CHUNK_EVENTS`` events; a file that is no
    readable OpenCode database is one quarantined record with the reason."""
    batch = Batch(drop_id)
    index = 0
    try:
        with open_read_only(path) as con:
            why = _why_not_opencode(con)
            if why is not None:
                batch.read["unknown"] += 1
                batch.quarantine(source_file, None, "unknown", why, "")
                yield batch
                return
            present = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            projects = {r["id"]: r for r in _rows(con, "SELECT * FROM project")} if "project" in present else {}
            sessions = list(_rows(con, "SELECT * FROM session ORDER BY time_created, id"))
            named = {s["id"] for s in sessions}
            for (session_id,) in con.execute("SELECT DISTINCT session_id FROM message ORDER BY session_id"):
                if session_id not in named:
                    sessions.append({"id": session_id})
                    named.add(session_id)
            newer = "session_message" in present
            for index, session in enumerate(sessions):
                messages = _database_messages(batch, con, source_file, index, session["id"])
                project = projects.get(session.get("project_id"))
                if not messages and newer and _newer_history(batch, con, source_file, index, session):
                    continue
                _add_session(batch, source_file, index, session["id"], session, project, messages)
                if batch.count(tables.EVENTS) >= CHUNK_EVENTS:
                    yield batch
                    batch = Batch(drop_id)
            _orphan_parts(batch, con, source_file)
    except sqlite3.Error as error:
        batch.read["unknown"] += 1
        where = f" (after {index} sessions were read)" if index else ""
        batch.quarantine(
            source_file,
            None,
            "unknown",
            f"SQLite cannot read this database{where}: {error}. Copy opencode.db again (with opencode.db-wal beside"
            " it) while OpenCode is not writing it",
            "",
        )
    yield batch


def _newer_history(batch: Batch, con: sqlite3.Connection, source_file: str, index: int, session: dict) -> bool:
    """Quarantine a session whose history is only in the ``session_message`` table (OpenCode's newer message
    store, ``SessionMessageTable`` in ``session.sql.ts``, whose shape is still changing upstream), saying so;
    False when that table holds none of it either."""
    (count,) = con.execute("SELECT count(*) FROM session_message WHERE session_id = ?", (session["id"],)).fetchone()
    if not count:
        return False
    batch.read["session"] += 1
    reason = (
        f"session {session['id']}: its history is in OpenCode's newer session_message table ({count} rows), which"
        " PULSE does not read yet; the message and part tables hold none of it"
    )
    batch.quarantine(source_file, index, "session", reason, dump({k: v for k, v in session.items() if k != "revert"}))
    return True


def _database_messages(
    batch: Batch, con: sqlite3.Connection, source_file: str, index: int, session_id: Any
) -> list[Message]:
    """A session's messages with their parts, as OpenCode hydrates the rows; bad rows quarantined."""
    messages: dict[Any, Message] = {}
    unreadable: set[Any] = set()
    position = 0
    rows = _rows(con, "SELECT * FROM message WHERE session_id = ? ORDER BY time_created, id", (session_id,))
    for row in rows:
        data, why = _record(row.get("data"), f"message {row.get('id')}")
        if data is None:
            unreadable.add(row["id"])
            _bad_event(batch, source_file, index, why or "", row.get("data"), position)
        else:
            messages[row["id"]] = Message({**data, "id": row["id"], "sessionID": row["session_id"]})
        position += 1
    for row in _rows(con, "SELECT * FROM part WHERE session_id = ? ORDER BY message_id, id", (session_id,)):
        data, why = _record(row.get("data"), f"part {row.get('id')}")
        message = messages.get(row.get("message_id"))
        if data is not None and message is None:
            why = f"part {row.get('id')}: its message {row.get('message_id')} is not one of session {session_id}'s"
            if row.get("message_id") in unreadable:
                why = f"part {row.get('id')}: its message {row.get('message_id')} cannot be read"
        if data is None or message is None:
            _bad_event(batch, source_file, index, why or "", row.get("data"), position)
        else:
            message.parts.append(
                {**data, "id": row["id"], "sessionID": row["session_id"], "messageID": row["message_id"]}
            )
        position += 1
    return _in_order(messages.values())


def _in_order(messages: Iterable[Message]) -> list[Message]:
    """Messages by creation time, then id; each one's parts by id (OpenCode's ids ascend with time)."""
    ordered = sorted(messages, key=lambda m: (_number(_time(m.info, "created")) or 0.0, str(m.info.get("id"))))
    for m in ordered:
        m.parts.sort(key=lambda p: str(p.get("id")))
    return ordered


_ORPHAN_PARTS = (
    "SELECT id, session_id, data FROM part"
    " WHERE session_id NOT IN (SELECT id FROM session UNION SELECT session_id FROM message) ORDER BY id"
)


def _orphan_parts(batch: Batch, con: sqlite3.Connection, source_file: str) -> None:
    """Parts naming a session the database has no session or message row of: quarantined, so they are counted."""
    for row in _rows(con, _ORPHAN_PARTS):
        reason = f"part {row['id']}: its session {row['session_id']} has no session or message row"
        _bad_event(batch, source_file, None, reason, row.get("data"), 0)


# --- the JSON tree (storage/) ----------------------------------------------------------------------------------------


def is_storage_root(subfolders: Iterable[str]) -> bool:
    """Whether a folder with these sub-folders is OpenCode's ``storage/`` (it holds ``session`` and ``message``)."""
    names = set(subfolders)
    return "session" in names and "message" in names


def _visible_files(folder: Path) -> Iterator[Path]:
    """The regular files below ``folder`` (links never followed; names starting ``.`` or ``_`` left to the drop)."""
    pending = [folder]
    while pending:
        with os.scandir(pending.pop()) as scan:
            for entry in scan:
                if entry.name.startswith((".", "_")):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    yield Path(entry.path)


def storage_files(folder: Path) -> list[Path]:
    """Every file the tree's reader reads (so the drop does not read them again as files of their own)."""
    return sorted(_visible_files(folder))


def read_storage(drop_id: str, folder: Path, source_file: str) -> Iterator[Batch]:
    """Every session of an OpenCode ``storage/`` tree, in batches of about ``CHUNK_EVENTS`` events."""
    batch = Batch(drop_id)
    projects: dict[str, dict[str, Any]] = {}
    session_files: dict[str, Path] = {}
    message_files: dict[str, list[Path]] = defaultdict(list)
    part_files: dict[str, list[Path]] = defaultdict(list)
    for path in storage_files(folder):
        relative = path.relative_to(folder).as_posix()
        parts = relative.split("/")
        kind = parts[0]
        if len(parts) == 3 and path.suffix == ".json" and kind == "session":
            session_files[path.stem] = path
        elif len(parts) == 3 and path.suffix == ".json" and kind == "message":
            message_files[parts[1]].append(path)
        elif len(parts) == 3 and path.suffix == ".json" and kind == "part":
            part_files[parts[1]].append(path)
        elif len(parts) == 2 and path.suffix == ".json" and kind == "project":
            data, why = _record(path.read_bytes(), relative)
            if data is None:
                batch.read["unknown"] += 1
                batch.quarantine(f"{source_file}/{relative}", None, "unknown", why or "", _excerpt(path))
            else:
                projects[path.stem] = data
        else:
            batch.read["unknown"] += 1
            batch.quarantine(
                f"{source_file}/{relative}",
                None,
                "unknown",
                f"{relative}: an OpenCode storage file that is not part of a conversation (PULSE reads project/,"
                " session/<project>/, message/<session>/ and part/<message>/ JSON files); not read",
                _excerpt(path),
            )
    sessions: dict[str, tuple[dict[str, Any], str | None]] = {}
    for session_id, path in sorted(session_files.items()):
        relative = path.relative_to(folder).as_posix()
        data, why = _record(path.read_bytes(), relative)
        if data is None:  # its messages are still read, under the id its path gives
            batch.read["unknown"] += 1
            batch.quarantine(f"{source_file}/{relative}", None, "unknown", why or "", _excerpt(path))
            data = {}
        sessions[session_id] = ({**data, "id": session_id, "projectID": path.parent.name}, path.parent.name)
    order = sorted(sessions, key=lambda s: (_number(_time(sessions[s][0], "created")) or 0.0, s))
    order += sorted(s for s in message_files if s not in sessions)
    for index, session_id in enumerate(order):
        session, project_id = sessions.get(session_id, ({"id": session_id}, None))
        messages = _storage_messages(
            batch, folder, source_file, index, session_id, message_files.get(session_id, []), part_files
        )
        _add_session(batch, source_file, index, session_id, session, projects.get(project_id or ""), messages)
        if batch.count(tables.EVENTS) >= CHUNK_EVENTS:
            yield batch
            batch = Batch(drop_id)
    with_file = {p.stem for paths in message_files.values() for p in paths}
    for message_id in sorted(set(part_files) - with_file):
        for path in part_files[message_id]:
            relative = path.relative_to(folder).as_posix()
            reason = f"{relative}: its message {message_id} has no message file"
            _bad_event(batch, source_file, None, reason, path.read_bytes()[:EXCERPT_BYTES], 0)
    yield batch


def _excerpt(path: Path) -> str:
    with path.open("rb") as f:
        return f.read(EXCERPT_BYTES).decode("utf-8", "replace")


def _storage_messages(
    batch: Batch,
    folder: Path,
    source_file: str,
    index: int,
    session_id: str,
    paths: list[Path],
    part_files: dict[str, list[Path]],
) -> list[Message]:
    """A session's messages with their parts; ids from the paths (as OpenCode's migration takes them)."""
    messages: list[Message] = []
    position = 0
    for path in sorted(paths):
        relative = path.relative_to(folder).as_posix()
        raw = path.read_bytes()
        data, why = _record(raw, relative)
        position += 1
        if data is None:
            _bad_event(batch, source_file, index, why or "", raw, position - 1)
        message = Message({**(data or {}), "id": path.stem, "sessionID": session_id})
        for part_path in sorted(part_files.get(path.stem, [])):
            part_raw = part_path.read_bytes()
            part_relative = part_path.relative_to(folder).as_posix()
            part, why = _record(part_raw, part_relative)
            if data is None:
                why = f"{part_relative}: its message file {relative} cannot be read"
            if part is None or data is None:
                _bad_event(batch, source_file, index, why or "", part_raw, position)
            else:
                message.parts.append({**part, "id": part_path.stem, "sessionID": session_id, "messageID": path.stem})
            position += 1
        if data is not None:
            messages.append(message)
    return _in_order(messages)
