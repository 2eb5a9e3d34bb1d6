"""Cline, Roo Code and Kilo Code task folders: ``<globalStorage>/<extension id>/tasks/<taskId>/``.

The three VS Code extensions share one layout (Roo Code forked Cline, Kilo Code forked Roo Code). A task folder
holds ``ui_messages.json`` (what the chat panel shows: a JSON array of ``ClineMessage``),
``api_conversation_history.json`` (the messages sent to the model, Anthropic-style) and, in Cline,
``task_metadata.json`` (``files_in_context``, ``model_usage``, ``environment_history``); Roo and Kilo add
``history_item.json``. A folder is a task folder when it holds ``ui_messages.json`` or
``api_conversation_history.json`` (``is_task_folder``), so a drop may be one task folder, a ``tasks/`` folder of
many, or a whole globalStorage folder (``drop.py`` walks it; ``folders.py`` names the layout ``cline_task``).

Sources read for this module: cline/cline ``src/shared/ExtensionMessage.ts``, ``src/core/task/index.ts``,
``src/core/task/tools/handlers/AskFollowupQuestionToolHandler.ts``,
``src/core/context/context-tracking/ModelContextTracker.ts``, ``src/shared/getApiMetrics.ts`` (commits
24dcd9ea7c5b037e96080ec56c56b5dc9bca201e and 9ee618111d58630fea30b27439216448225458e0; the newest,
21cb8d2525bcedf1f4b6890b27a74a14fe7451e4, moved them under ``apps/vscode/``); RooCodeInc/Roo-Code
``packages/types/src/message.ts``, ``src/shared/globalFileNames.ts``,
``src/core/environment/getEnvironmentDetails.ts`` (cb836567180a3ff1da6d082f3178b90c3bd22a70); Kilo-Org/kilocode
``packages/types/src/message.ts`` (0fc86cec2299b333cb21da87b649003b19319ecc).

Rules (each stated once, here):

- **One event per ``ui_messages.json`` item**, in order; its id is its ``ts`` (milliseconds since 1970, Cline's own
  identity of a message), its timestamp that instant in UTC.
- **The user's words** are user ``message`` events, and each opens a work segment: the task (the first message
  when it is ``say: text``, as Cline wrote it until February 2026 and Roo and Kilo still do; ``say: task``, as Cline
  writes it since its commit 6cff60b5), every ``say: user_feedback`` (what the user typed in answer to an ask:
  a followup, a completion, a tool approval), and an option the user picked in answer to an ``ask: followup`` or
  ``ask: plan_mode_respond`` (Cline then writes no ``user_feedback`` but puts the choice in the ask's JSON as
  ``selected``: a second event ``<ts>:selected`` after the question). ``say: user_feedback_diff`` (the user edited
  a proposed diff) is the user's action, not a message. A Roo Code or Kilo Code **subtask** (its
  ``history_item.json`` names a ``parentTaskId``: the parent's agent opened it with the ``new_task`` tool,
  ``Task.startSubtask``) has a task the parent agent wrote, so its first message is an agent message
  (``original_name`` ``subtask``), not the user's; the parent and root task ids are kept in the metadata.
- **Never the user's words**: tool results and command output (``command_output``, ``browser_action_result``,
  ``mcp_server_response``) are observations from the environment; ``api_conversation_history.json``'s ``user``
  turns after the first are mostly tool results, so it is not read for messages.
- **The agent**: ``say: text`` after the first message is its message; an ``ask: followup`` / ``plan_mode_respond``
  question waits for the user (closing the segment by the no-state rule of ``segments.py``); ``completion_result``
  (say) is ``finish``; ``command`` is ``run`` with its command; ``tool`` is named by its JSON ``tool``
  (``_TOOLS``); ``reasoning`` is ``think``; browser and MCP messages are ``browse`` / ``call_tool_mcp``.
  Errors (``error``, ``diff_error``, ``api_req_failed``, ...) are ``error`` observations; any other type is a
  ``state`` (bookkeeping such as ``checkpoint_created``) or ``other`` event named by its type.
- **Usage**: every ``say: api_req_started`` (and the older ``api_req_finished``, and ``deleted_api_reqs``, which
  Cline's ``getApiMetrics`` counts too) holds ``ClineApiReqInfo`` JSON: ``tokensIn, tokensOut, cacheWrites,
  cacheReads, cost``, summed over the task. Prompt tokens are ``tokensIn + cacheWrites + cacheReads`` (every token
  the model read: Cline's Anthropic handler reports ``tokensIn`` without the cache, as Claude Code's reader counts
  them), completion tokens ``tokensOut``; the four sums and the number of requests are kept as ``cline_usage``. An
  ``api_req_started`` whose text is not a JSON object is quarantined with that reason (its tokens and cost unread).
- **Model**: the last ``model_usage`` entry of ``task_metadata.json`` (Cline appends one whenever the model, its
  provider or the mode changes, so the last is the one the task ended with), the whole list kept as
  ``model_usage``; else the last ``modelInfo.modelId`` of a message (Cline since 2025); else the last
  ``<model>...</model>`` of the environment details in ``api_conversation_history.json`` (Roo and Kilo write no
  model anywhere else). ``environment_history``'s last ``cline_version`` is ``agent_version``.
- **Which tool**: the extension id in the folder's path within the drop, or the drop's name
  (``saoudrizwan.claude-dev`` cline, ``rooveterinaryinc.roo-cline`` roo_code, ``kilocode.kilo-code`` kilo_code; any
  case), else the messages: a Kilo Code ask or say type or its ``metadata.kiloCode``, else a Roo Code one
  (``_ROO_ONLY``, ``_ROO_KEYS``, an ``apiProtocol`` in an ``api_req_started``) or ``history_item.json``, else
  cline.
- **Session id**: the task id, which is the folder's name.

Bad input, quarantined with the file's name in the reason: ``ui_messages.json`` missing, not JSON or not a JSON
array (the task is quarantined as a session, with the reason); an item that is not an object, or an
``api_req_started`` whose text is not JSON (an event); ``task_metadata.json`` or ``api_conversation_history.json``
or ``history_item.json`` not JSON or not of its shape (one ``unknown`` record each: the task is still read,
without what it would give).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from .adapter import Adapter, EventFields, UnreadableEvent, add_session
from .batch import Batch
from .events import as_id, as_int, as_text, llm_usage, parse_json, read_id
from .files import why_unparseable
from .limits import EXCERPT_BYTES, record_limits

UI_MESSAGES = "ui_messages.json"
API_HISTORY = "api_conversation_history.json"
TASK_METADATA = "task_metadata.json"
HISTORY_ITEM = "history_item.json"
# the task folder's own files besides those read: Cline's context-window bookkeeping and per-task settings, and
# its focus-chain checklist; part of the task, not sessions of their own
OWN_FILES = (UI_MESSAGES, API_HISTORY, TASK_METADATA, HISTORY_ITEM, "context_history.json", "settings.json")
FOCUS_CHAIN = re.compile(r"^focus_chain_taskid_.+\.md$")

EXTENSIONS = {
    "saoudrizwan.claude-dev": "cline",
    "rooveterinaryinc.roo-cline": "roo_code",
    "kilocode.kilo-code": "kilo_code",
}

_USAGE_SAYS = ("api_req_started", "api_req_finished", "deleted_api_reqs")
_USAGE_KEYS = ("tokensIn", "tokensOut", "cacheWrites", "cacheReads")
# say and ask types, and message keys, only Roo Code (and Kilo Code, its fork) write (Roo-Code message.ts)
_ROO_ONLY = frozenset(
    [
        "api_req_retry_delayed",
        "api_req_rate_limit_wait",
        "api_req_deleted",
        "image",
        "subtask_result",
        "checkpoint_saved",
        "rooignore_error",
        "condense_context",
        "condense_context_error",
        "sliding_window_truncation",
        "codebase_search_result",
        "user_edit_todos",
        "too_many_tools_warning",
        "auto_approval_max_req_reached",
    ]
)
_ROO_KEYS = ("apiProtocol", "isProtected", "isAnswered", "progressStatus", "contextCondense", "contextTruncation")
_KILO_ONLY = frozenset(["payment_required_prompt", "invalid_model", "checkpoint_restore", "browser_session_status"])

_TOOLS = {
    "editedExistingFile": "edit",
    "appliedDiff": "edit",
    "newFileCreated": "write",
    "readFile": "read",
    "readCommandOutput": "read",
    "listFilesTopLevel": "read",
    "listFilesRecursive": "read",
    "listCodeDefinitionNames": "read",
    "searchFiles": "read",
    "codebaseSearch": "read",
    "webFetch": "browse",
    "webSearch": "browse",
    "newTask": "delegate",
    "updateTodoList": "task_tracking",
}
_ERRORS = frozenset(
    ["error", "diff_error", "clineignore_error", "rooignore_error", "condense_context_error", "api_req_failed"]
)
_MODEL_TAG = re.compile(r"<model>([^<\n]{1,200})</model>")


def is_task_folder(file_names: list[str]) -> bool:
    """Whether a folder holding these files is a task folder (its messages, or at least its API history)."""
    return UI_MESSAGES in file_names or API_HISTORY in file_names


def task_files(folder: Path) -> list[Path]:
    """The task folder's own files (read, or bookkeeping of the task): the drop reads none of them again."""
    found = []
    for name in sorted(OWN_FILES):
        path = folder / name
        if _is_file(path):
            found.append(path)
    with contextlib.suppress(OSError):  # not a readable folder: its files are found by no one else either
        found += sorted(p for p in folder.iterdir() if FOCUS_CHAIN.match(p.name) and _is_file(p))
    return found


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except FileNotFoundError:
        return False


EXTENSION_STATE = (
    "the extension's own state, settings or cache (Cline, Roo Code or Kilo Code), not a task: not read; each task"
    " under tasks/<taskId>/ is read as a session. Drop the tasks/ folder alone to leave this out"
)


# what the extensions keep in their globalStorage folder beside tasks/ (Cline: state/taskHistory.json, settings/,
# cache/, checkpoints/, puppeteer/; Roo Code and Kilo Code: settings/, cache/)
STATE_NAMES = frozenset(["state", "settings", "cache", "checkpoints", "puppeteer"])


def extension_state(folder: Path, subfolders: list[str], file_names: list[str]) -> list[str]:
    """The entries of ``folder`` that are an extension's own state rather than tasks: in a folder named by its
    extension id, every entry but ``tasks``; in a folder holding a ``tasks/`` folder with a task folder in it (a
    copy of the extension's folder under another name), the entries named like the extensions' own
    (``STATE_NAMES``), and nothing else, since such a folder may be a drop holding other sources beside. Empty for
    any other folder."""
    others = sorted(n for n in (*subfolders, *file_names) if n != "tasks")
    if folder.name.lower() in EXTENSIONS:
        return others
    if "tasks" in subfolders and _holds_task(folder / "tasks"):
        return [n for n in others if n in STATE_NAMES]
    return []


def _holds_task(tasks: Path) -> bool:
    """Whether a ``tasks`` folder holds a task folder (stops at the first)."""
    with contextlib.suppress(OSError), os.scandir(tasks) as scan:
        for entry in scan:
            if entry.is_dir(follow_symlinks=False) and (
                _is_file(Path(entry.path) / UI_MESSAGES) or _is_file(Path(entry.path) / API_HISTORY)
            ):
                return True
    return False


def format_from_path(parts: tuple[str, ...]) -> tuple[str | None, str | None]:
    """The source format and extension id a path names (its nearest extension folder), else (None, None)."""
    for part in reversed(parts):
        fmt = EXTENSIONS.get(part.lower())
        if fmt:
            return fmt, part.lower()
    return None, None


def format_from_messages(messages: list[Any], has_history_item: bool) -> str:
    """kilo_code, roo_code or cline from what the messages hold (the module docstring's rule)."""
    roo = has_history_item
    for m in messages:
        if not isinstance(m, dict):
            continue
        kind = m.get("say") if m.get("type") == "say" else m.get("ask")
        meta = m.get("metadata")
        if kind in _KILO_ONLY or (isinstance(meta, dict) and "kiloCode" in meta):
            return "kilo_code"
        text = m.get("text")
        in_request = kind == "api_req_started" and isinstance(text, str) and '"apiProtocol"' in text
        roo = roo or kind in _ROO_ONLY or in_request or any(k in m for k in _ROO_KEYS)
    return "roo_code" if roo else "cline"


def _iso(ts: Any) -> str | None:
    """A ``ts`` in milliseconds since 1970 as ISO text in UTC (``2026-05-01T10:00:00.123Z``), else None."""
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return None
    try:
        moment = datetime.fromtimestamp(ts / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _json_object(text: Any) -> dict[str, Any] | None:
    """``text`` parsed as a JSON object, else None."""
    if not isinstance(text, str):
        return None
    try:
        value = parse_json(text.encode("utf-8", "surrogatepass"))
    except (orjson.JSONDecodeError, UnicodeEncodeError):
        return None
    return value if isinstance(value, dict) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class ClineMessages(Adapter):
    """The ``ui_messages.json`` items of one task (Cline, Roo Code or Kilo Code)."""

    format = "cline"

    def __init__(self) -> None:
        self.position = 0
        self.sums = dict.fromkeys((*_USAGE_KEYS, "cost"), 0.0)
        self.seen = dict.fromkeys((*_USAGE_KEYS, "cost"), False)
        self.requests = 0
        self.model: str | None = None  # the last modelInfo.modelId
        self.known_model: str | None = None  # the model the task's other files name, which wins
        self.subtask = False  # a subtask's task was written by its parent's agent

    def parse_all(self, event: dict[str, Any]) -> list[EventFields]:
        first = self.position == 0
        self.position += 1
        event_id = read_id(event.get("ts"), "ts")
        stamp = _iso(event.get("ts"))
        info = event.get("modelInfo")
        if isinstance(info, dict) and as_id(info.get("modelId")):
            self.model = as_id(info.get("modelId"))
        kind = event.get("type")
        text = as_text(event.get("text"))
        if kind == "say":
            parsed = self._say(event.get("say"), text, first)
        elif kind == "ask":
            parsed = _ask(event.get("ask"), text, event_id)
        else:
            parsed = [EventFields("unknown", "other", "other", original_name=as_text(kind))]
        for k, fields in enumerate(parsed):
            fields.timestamp = stamp
            if fields.event_id is None and k == 0:
                fields.event_id = event_id
        return parsed

    def _say(self, say: Any, text: str | None, first: bool) -> list[EventFields]:
        if self.subtask and first and say in ("task", "text"):
            return [EventFields("agent", "action", "message", original_name="subtask", text=text)]
        if say == "task" or (say == "text" and first) or say == "user_feedback":
            return [EventFields("user", "action", "message", text=text)]
        if say in _USAGE_SAYS:
            self._count(say, text)
            return [EventFields("agent", "state", say)]
        if say == "text":
            return [EventFields("agent", "action", "message", text=text)]
        if say == "reasoning":
            return [EventFields("agent", "action", "think", text=text)]
        if say == "completion_result":
            return [EventFields("agent", "action", "finish", text=text)]
        if say == "user_feedback_diff":
            return [EventFields("user", "action", "other", original_name=say, text=text)]
        return [_shared(say, text)]

    def _count(self, say: str, text: str | None) -> None:
        """Add one request's ``ClineApiReqInfo`` to the task's sums; ``UnreadableEvent`` when it is no JSON object
        (an ``api_req_started`` with no text yet, a request still streaming, holds nothing to count)."""
        if text is None:
            return
        info = _json_object(text)
        if info is None:
            raise UnreadableEvent(
                f"{UI_MESSAGES}: say {say} text is not a JSON object ({text[:80]!r}): its tokens and cost are not"
                " counted"
            )
        counted = False
        for key in (*_USAGE_KEYS, "cost"):
            value = _number(info.get(key))
            if value is not None:
                self.sums[key] += value
                self.seen[key] = True
                counted = True
        self.requests += say == "api_req_started" or (counted and say == "api_req_finished")

    def session_info(self) -> dict[str, Any]:
        total = {key: (self.sums[key] if self.seen[key] else None) for key in self.sums}
        tokens = [as_int(total[k]) for k in _USAGE_KEYS]
        prompt_parts = [t for t in (tokens[0], tokens[2], tokens[3]) if t is not None]
        info = llm_usage(total["cost"], sum(prompt_parts) if prompt_parts else None, tokens[1])
        model = self.known_model or self.model
        if model is not None:
            info["model"] = model
        info["cline_usage"] = {
            "tokens_in": tokens[0],
            "tokens_out": tokens[1],
            "cache_writes": tokens[2],
            "cache_reads": tokens[3],
            "cost": total["cost"],
            "api_requests": self.requests,
        }
        return info


def _ask(ask: Any, text: str | None, event_id: str | None) -> list[EventFields]:
    """An ``ask`` message: the agent waiting on the user, and for a followup or plan the option they picked."""
    if ask in ("followup", "plan_mode_respond"):
        body = _json_object(text)
        question = text if body is None else as_text(body.get("question") or body.get("response"))
        asked = EventFields("agent", "action", "message", text=question, wait_for_response=True)
        picked = as_text(body.get("selected")) if body is not None else None
        if not picked:
            return [asked]
        answer_id = f"{event_id}:selected" if event_id is not None else None
        return [asked, EventFields("user", "action", "message", text=picked, event_id=answer_id)]
    if ask == "act_mode_respond":
        return [EventFields("agent", "action", "message", text=text)]
    if ask in ("completion_result", "resume_task", "resume_completed_task", "mistake_limit_reached"):
        return [EventFields("agent", "state", ask, text=text)]
    return [_shared(ask, text)]


def _shared(kind: Any, text: str | None) -> EventFields:
    """What a say or ask type both sides use means (a command, a tool, an error, ...)."""
    if kind == "command":
        return EventFields("agent", "action", "run", text=text, command=text)
    if kind == "command_output":
        return EventFields("environment", "observation", "run", text=text)
    if kind == "tool":
        return _tool(text)
    if kind in ("browser_action_launch", "browser_action"):
        return EventFields("agent", "action", "browse", text=text)
    if kind == "browser_action_result":
        return EventFields("environment", "observation", "browse", text=text)
    if kind in ("use_mcp_server", "mcp_server_request_started"):
        return EventFields("agent", "action", "call_tool_mcp", text=text)
    if kind == "mcp_server_response":
        return EventFields("environment", "observation", "mcp", text=text)
    if kind in _ERRORS:
        return EventFields("environment", "observation", "error", original_name=as_text(kind), text=text)
    if isinstance(kind, str) and kind:
        return EventFields("agent", "state", kind, text=text)
    return EventFields("unknown", "other", "other", original_name=as_text(kind), text=text)


def _tool(text: str | None) -> EventFields:
    """A ``tool`` message: ``ClineSayTool`` JSON, named by its ``tool`` (``_TOOLS``), its text the path."""
    body = _json_object(text) or {}
    tool = as_text(body.get("tool"))
    name = _TOOLS.get(tool or "", "other")
    path = as_text(body.get("path"))
    return EventFields("agent", "action", name, original_name=tool if name == "other" else None, text=path or text)


# --- the task folder ---------------------------------------------------------------------------------------------


def read_task_folder(batch: Batch, folder: Path, source_file: str, name_id: str) -> None:
    """One task folder as one session (or its quarantine), with the rows the module docstring describes."""
    messages, why_not = _load(folder / UI_MESSAGES, list, "a JSON array of messages")
    metadata, _ = _side_file(batch, folder, source_file, TASK_METADATA, dict, "a JSON object")
    history, _ = _side_file(batch, folder, source_file, API_HISTORY, list, "a JSON array of messages")
    item, _ = _side_file(batch, folder, source_file, HISTORY_ITEM, dict, "a JSON object")
    info = task_info(metadata, history)
    for key, name in (("parentTaskId", "parent_task_id"), ("rootTaskId", "root_task_id"), ("mode", "mode")):
        if item and as_id(item.get(key)):
            info[name] = as_id(item.get(key))
    # the folder's path within the drop and the drop's own name (a drop that is an extension folder is named by it)
    fmt, extension = format_from_path(folder.parts[-(len(PurePosixPath(source_file).parts) + 1) :])
    if extension:
        info["extension_id"] = extension
    if messages is None:
        batch.read["session"] += 1
        reason = f"{UI_MESSAGES}: {why_not}; the task's messages are the only record of what the user said"
        batch.quarantine(source_file, 0, "session", reason, _excerpt(folder / UI_MESSAGES))
        return
    fmt = fmt or format_from_messages(messages, item is not None)
    adapter = ClineMessages()
    adapter.format = fmt
    adapter.known_model = info.pop("model", None)
    adapter.subtask = "parent_task_id" in info
    add_session(batch, source_file, 0, name_id, fmt, adapter, messages, info)


def task_info(metadata: dict[str, Any] | None, history: list[Any] | None) -> dict[str, Any]:
    """The session metadata ``task_metadata.json`` and ``api_conversation_history.json`` give: ``model`` and
    ``model_usage``, ``agent_version``."""
    info: dict[str, Any] = {}
    usage = metadata.get("model_usage") if metadata else None
    if isinstance(usage, list):
        entries = [u for u in usage if isinstance(u, dict)]
        info["model_usage"] = entries
        models = [as_id(u.get("model_id")) for u in entries]
        models = [m for m in models if m]
        if models:
            info["model"] = models[-1]
    environments = metadata.get("environment_history") if metadata else None
    if isinstance(environments, list):
        versions = [as_id(e.get("cline_version")) for e in environments if isinstance(e, dict)]
        versions = [v for v in versions if v]
        if versions:
            info["agent_version"] = versions[-1]
    if "model" not in info and history:
        found = _history_model(history)
        if found:
            info["model"] = found
    return info


def _history_model(history: list[Any]) -> str | None:
    """The last ``<model>`` tag of the environment details Roo Code and Kilo Code add to the user turns."""
    for message in reversed(history):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [content] if isinstance(content, str) else content if isinstance(content, list) else []
        for block in reversed(blocks):
            text = block if isinstance(block, str) else block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str):
                found = _MODEL_TAG.findall(text)
                if found:
                    return found[-1].strip()
    return None


def _load(path: Path, shape: type, shape_text: str) -> tuple[Any, str]:
    """``(value, "")`` for a file of the expected JSON shape, else ``(None, why)``."""
    if not _is_file(path):
        return None, "missing from the task folder"
    limits = record_limits()
    size = path.stat().st_size
    if size > limits.max_bytes:
        return None, limits.too_many_bytes(size, path.name)
    data = path.read_bytes()
    too_large = limits.why_too_large(data)
    if too_large:
        return None, too_large
    try:
        value = parse_json(data)
    except orjson.JSONDecodeError as error:
        return None, "empty file" if not data.strip() else why_unparseable(data, error)
    if not isinstance(value, shape):
        kind = {dict: "an object", list: "an array"}.get(type(value), f"a {type(value).__name__}")
        return None, f"not {shape_text} (a JSON value that is {kind})"
    return value, ""


def _side_file(
    batch: Batch, folder: Path, source_file: str, name: str, shape: type, shape_text: str
) -> tuple[Any, str]:
    """A task file read beside the messages; when present but unreadable, one ``unknown`` record quarantined."""
    path = folder / name
    if not _is_file(path):
        return None, ""
    value, why = _load(path, shape, shape_text)
    if value is None:
        batch.read["unknown"] += 1
        reason = f"{name}: {why}; the task is read without it (nor what it says: model, parent task)"
        batch.quarantine(source_file, None, "unknown", reason, _excerpt(path))
    return value, why


def _excerpt(path: Path) -> str:
    """The file's first bytes as text, for a quarantine row ("" when there is no such file)."""
    if not _is_file(path):
        return ""
    with path.open("rb") as f:
        return f.read(EXCERPT_BYTES).decode("utf-8", "replace")
