"""Sessions stored as a folder, one event per file. Three layouts, each found by its file names (``folder_layout``):

=====================  ===================================================================================
``v0_events_dir``      OpenHands V0 file store: ``sessions/<sid>/events/<n>.json``, read in the order of ``n``
``sdk_conversation``   OpenHands SDK (software-agent-sdk) persisted conversation: ``<conversation>/base_state.json``
                       and ``<conversation>/events/event-{idx:05d}-{event_id}.json`` (five or more digits), read in
                       the order of ``idx`` (``openhands/sdk/conversation/persistence_const.py``)
``app_server_events``  OpenHands V1 app server: ``<conversation_id>/<YYYYMMDDHHMMSS>_<Kind>_<event id hex>``, no
                       suffix, one pretty-printed event each (``openhands/app_server/event/``), read in the order
                       of each event's own ``timestamp`` (microseconds), then file name. The name has whole seconds
                       and sorts ``Kind`` alphabetically within a second, which would put a ``MessageEvent`` after
                       the ``ObservationEvent`` it caused.
``cline_task``         Cline, Roo Code or Kilo Code task: ``<extension id>/tasks/<taskId>/`` with ``ui_messages.json``
                       (and ``api_conversation_history.json``, ``task_metadata.json``); ``cline.py`` reads it
=====================  ===================================================================================

Names starting with ``.`` or ``_`` are not read (the SDK's ``.eventlog.lock`` and count markers). Other files in a
session folder (notes, a ratings CSV) are not part of the session and are read as files of their own. An SDK
conversation that forked (its events carry ``parent_id``) is read as one stream in index order, every branch
included; ``parent_id`` stays in each event's ``raw_json``.

Only regular files and real folders are part of a session: a link (an ``events`` folder, a ``base_state.json`` or
an event file linking elsewhere), a FIFO, socket or device is never followed or opened; the drop quarantines each
as an entry of its own (``drop.py``).

The session is named by the folder (``v0_events_dir``: the folder above ``events``), except that an SDK
conversation's ``base_state.json`` ``id`` wins (``records.py`` has the whole precedence). ``base_state.json`` also
gives the session's metadata (``sdk_session_info``): model, agent, tools, condenser, workspace, stats.

Bad input, each kept or quarantined with the file's name in the reason (``raw.quarantine.event_index`` is the
event's index: ``idx`` for the SDK, the position in name order otherwise):

- an event file that is not JSON, not UTF-8, empty or not a JSON object: quarantined as an event;
- an SDK index with no file (a gap: ``event-00002-…`` then ``event-00004-…``): one quarantine row (record type
  ``event``, empty raw text) per missing index, counted as an event read, so ``raw.drops`` shows the conversation
  lost events; the events after the gap are kept in order (the SDK itself stops reading at a gap, which would
  drop real events);
- a file in an SDK ``events/`` folder not named ``event-<idx>-<id>.json``: quarantined (record type ``unknown``);
- a ``base_state.json`` that is not a JSON object: quarantined (record type ``unknown``); the events are still
  read, named by the folder, without metadata;
- an SDK folder with no readable event at all (``events/`` missing or empty): the session is quarantined with
  ``base_state.json``'s metadata as its raw text (``adapter.add_session``).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from .adapter import add_session
from .batch import Batch
from .cline import is_task_folder, read_task_folder, task_files
from .events import NotAnId, as_id, as_int, llm_usage, parse_json, read_id
from .files import why_unparseable
from .limits import EXCERPT_BYTES, record_limits
from .records import adapter_for, with_location

SDK_EVENT_NAME = re.compile(r"^event-(?P<idx>\d{5,})-(?P<event_id>[0-9a-fA-F-]{8,})\.json$")
APP_EVENT_NAME = re.compile(r"^(?P<stamp>\d{14})_(?P<kind>[A-Za-z][A-Za-z0-9_]*)_(?P<event_id>[0-9a-fA-F]{32})$")
BASE_STATE = "base_state.json"
_CREDENTIAL = re.compile(r"api_?key|secret|passw|(^|_)token$", re.IGNORECASE)


def _visible(names: list[str]) -> list[str]:
    return sorted(n for n in names if not n.startswith((".", "_")))


def _is_file(path: Path) -> bool:
    """A regular file, not a link to one."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except FileNotFoundError:
        return False


def _files(folder: Path) -> list[str]:
    """The regular files directly in ``folder`` (nothing when it is not a real folder: a link is not followed)."""
    try:
        if not stat.S_ISDIR(folder.lstat().st_mode):
            return []
    except FileNotFoundError:
        return []
    return _visible([e.name for e in os.scandir(folder) if e.is_file(follow_symlinks=False)])


def folder_layout(folder: Path, file_names: list[str], is_root: bool) -> str | None:
    """Which session layout ``folder`` is (``file_names``: the files directly in it), or None.

    An SDK conversation has a ``base_state.json`` or SDK-named files in ``events/``; its ``events`` folder is not a
    layout of its own, whatever its files are named (the conversation's reader quarantines misnamed ones). A V0
    ``events`` folder holds ``.json`` files and is never the drop itself (its parent names the session). An
    app-server folder holds at least one file named like ``20250601120000_MessageEvent_<hex>``.
    """
    if BASE_STATE in file_names or any(SDK_EVENT_NAME.match(n) for n in _files(folder / "events")):
        return "sdk_conversation"
    if folder.name == "events" and not is_root and any(n.endswith(".json") for n in file_names):
        in_sdk_conversation = _is_file(folder.parent / BASE_STATE) or any(SDK_EVENT_NAME.match(n) for n in file_names)
        return None if in_sdk_conversation else "v0_events_dir"
    if any(APP_EVENT_NAME.match(n) for n in file_names):
        return "app_server_events"
    if is_task_folder(file_names):
        return "cline_task"
    return None


def session_files(folder: Path, layout: str) -> list[Path]:
    """The files a session folder's reader reads (so the drop does not read them again as files of their own)."""
    if layout == "v0_events_dir":
        return [folder / n for n in _files(folder) if n.endswith(".json")]
    if layout == "sdk_conversation":
        base = [folder / BASE_STATE] if _is_file(folder / BASE_STATE) else []
        return base + [folder / "events" / n for n in _files(folder / "events")]
    if layout == "app_server_events":
        return [folder / n for n in _files(folder) if APP_EVENT_NAME.match(n)]
    if layout == "cline_task":
        return task_files(folder)
    raise ValueError(f"unknown session folder layout {layout!r}")


def folder_name_id(folder: Path, layout: str) -> str:
    """The session id a session folder's location gives: its name (a V0 ``events`` folder: its parent's)."""
    return folder.parent.name if layout == "v0_events_dir" else folder.name


def read_session_folder(
    drop_id: str, folder: Path, source_file: str, layout: str | None, name_id: str | None
) -> Iterator[Batch]:
    """One session stored as a folder of ``layout`` (a V0 ``events`` folder when not given); ``name_id`` is the id
    its location gives (the folder's name when not given)."""
    layout = layout or "v0_events_dir"
    name_id = name_id or folder_name_id(folder, layout)
    batch = Batch(drop_id)
    if layout == "sdk_conversation":
        _read_sdk_conversation(batch, folder, source_file, name_id)
    elif layout == "app_server_events":
        _read_app_server_events(batch, folder, source_file, name_id)
    elif layout == "cline_task":
        read_task_folder(batch, folder, source_file, name_id)
    else:
        _read_v0_events_dir(batch, folder, source_file, name_id)
    yield batch


def _load_events(batch: Batch, source_file: str, numbered: list[tuple[int, Path]], prefix: str = "") -> list:
    """``(value, path)`` of every event file that holds a JSON object; the others are quarantined by number (one
    too large to read, ``limits.py``, with its first bytes only)."""
    events: list[tuple[dict[str, Any], Path]] = []
    limits = record_limits()
    for number, path in numbered:
        size = path.stat().st_size
        with path.open("rb") as f:
            data = f.read(EXCERPT_BYTES if size > limits.max_bytes else -1)
        too_large = limits.too_many_bytes(size, "event file") if size > limits.max_bytes else None
        too_large = too_large or limits.why_too_large(data)
        try:
            if too_large:
                data = data[:EXCERPT_BYTES]
                raise orjson.JSONDecodeError(too_large, "", 0)
            value = parse_json(data)
        except orjson.JSONDecodeError as error:
            reason = too_large or ("empty file" if not data.strip() else why_unparseable(data, error))
        else:
            if isinstance(value, dict):
                events.append((value, path))
                continue
            reason = f"event is not a JSON object (a JSON {type(value).__name__})"
        batch.read["event"] += 1
        batch.quarantine(
            source_file,
            0,
            "event",
            f"{prefix}{path.name}: {reason}",
            data.decode("utf-8", "replace"),
            event_index=number,
        )
    return events


def _add(batch: Batch, source_file: str, session_id: str, layout: str, events: list, info: dict[str, Any]) -> None:
    raw_events = [value for value, _ in events]
    adapter = adapter_for(raw_events)
    suffix = {"v0_events_dir": "session_dir", "sdk_conversation": "sdk_conversation"}.get(layout, "app_server")
    add_session(batch, source_file, 0, session_id, f"{adapter.format}_{suffix}", adapter, raw_events, info)


def _read_v0_events_dir(batch: Batch, folder: Path, source_file: str, name_id: str) -> None:
    files = sorted(
        session_files(folder, "v0_events_dir"),
        key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit() else 0, p.name),
    )
    events = _load_events(batch, source_file, list(enumerate(files)))
    _add(batch, source_file, name_id, "v0_events_dir", events, {})


def _read_app_server_events(batch: Batch, folder: Path, source_file: str, name_id: str) -> None:
    files = session_files(folder, "app_server_events")  # in name order: the app server's own
    events = _load_events(batch, source_file, list(enumerate(files)))
    events.sort(key=lambda e: (_app_event_time(e[0], e[1].name), e[1].name))
    _add(batch, source_file, name_id, "app_server_events", events, {})


def _app_event_time(event: dict[str, Any], name: str) -> str:
    """The event's ISO timestamp, else the whole seconds of its file name in the same form."""
    if isinstance(event.get("timestamp"), str):
        return event["timestamp"]
    s = name[:14]
    return f"{s[:4]}-{s[4:6]}-{s[6:8]}T{s[8:10]}:{s[10:12]}:{s[12:14]}"


def _read_sdk_conversation(batch: Batch, folder: Path, source_file: str, name_id: str) -> None:
    info, content_id = _base_state(batch, folder, source_file)
    numbered: list[tuple[int, Path]] = []
    for path in session_files(folder, "sdk_conversation"):
        if path.name == BASE_STATE and path.parent == folder:
            continue
        match = SDK_EVENT_NAME.match(path.name)
        if match:
            numbered.append((int(match["idx"]), path))
            continue
        batch.read["unknown"] += 1
        batch.quarantine(
            source_file,
            None,
            "unknown",
            f"events/{path.name}: not an SDK event file (named event-<index>-<event id>.json); not read",
            path.read_bytes().decode("utf-8", "replace"),
        )
    numbered.sort(key=lambda n: (n[0], n[1].name))
    present = {idx for idx, _ in numbered}
    for idx in sorted(set(range(max(present, default=-1) + 1)) - present):
        batch.read["event"] += 1
        batch.quarantine(
            source_file,
            0,
            "event",
            f"events/: no event file with index {idx:05d} (a gap in the index); the events after it are kept in order",
            "",
            event_index=idx,
        )
    events = _load_events(batch, source_file, numbered, prefix="events/")
    session_id = content_id or name_id
    _add(batch, source_file, session_id, "sdk_conversation", events, with_location(info, session_id, name_id))


def _base_state(batch: Batch, folder: Path, source_file: str) -> tuple[dict[str, Any], str | None]:
    """The session metadata and id of an SDK conversation's ``base_state.json`` (empty and None without one)."""
    path = folder / BASE_STATE
    if not _is_file(path):
        return {}, None
    data = path.read_bytes()
    try:
        state = parse_json(data)
    except orjson.JSONDecodeError as error:
        reason = "empty file" if not data.strip() else why_unparseable(data, error)
    else:
        if isinstance(state, dict):
            try:
                return sdk_session_info(state), read_id(state.get("id"), f"{BASE_STATE} id")
            except NotAnId as error:
                reason = str(error)
        else:
            reason = f"not a JSON object (a JSON {type(state).__name__})"
    batch.read["unknown"] += 1
    batch.quarantine(
        source_file,
        None,
        "unknown",
        f"{BASE_STATE}: {reason}; the conversation's events are read without it (named by the folder, no model or"
        " agent metadata). Restore the file from the agent's persistence folder to get them.",
        data.decode("utf-8", "replace"),
    )
    return {}, None


def sdk_session_info(state: dict[str, Any]) -> dict[str, Any]:
    """What ``base_state.json`` says about the session, kept as its metadata (``raw.sessions.metadata_json``).

    Everything but ``id`` (it is the session id) and credentials (any key naming an API key, secret, password or
    token, at any depth: the SDK masks them, but a masked key is no use and an unmasked one must not be copied),
    plus ``model`` (``agent.llm.model``) and, when ``stats.usage_to_metrics`` has entries, ``llm_usage``: their
    summed cost and tokens (the convention ``features.event_features`` falls back to when the events carry no
    stats)."""
    info = _without_credentials({k: v for k, v in state.items() if k != "id"})
    agent = state.get("agent") if isinstance(state.get("agent"), dict) else {}
    llm = agent.get("llm") if isinstance(agent.get("llm"), dict) else {}
    if as_id(llm.get("model")):
        info["model"] = as_id(llm.get("model"))
    stats = state.get("stats") if isinstance(state.get("stats"), dict) else {}
    entries = stats.get("usage_to_metrics")
    if isinstance(entries, dict) and entries:
        metrics = [m for m in entries.values() if isinstance(m, dict)]
        usage = [
            m.get("accumulated_token_usage") if isinstance(m.get("accumulated_token_usage"), dict) else {}
            for m in metrics
        ]
        info.update(
            llm_usage(
                _sum(m.get("accumulated_cost") for m in metrics),
                as_int(_sum(u.get("prompt_tokens") for u in usage)),
                as_int(_sum(u.get("completion_tokens") for u in usage)),
            )
        )
    return info


def _sum(values) -> float | None:
    """The sum of the numbers among ``values``; None when there is none."""
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return sum(numbers) if numbers else None


def _without_credentials(value: Any) -> Any:
    """A copy of ``value`` without the keys that name credentials, at any depth. It keeps its own stack, since a
    base_state.json may nest up to 1 024 levels (what orjson reads), deeper than Python recursion goes."""
    root: dict[str, Any] = {}
    stack: list[tuple[Any, Any, Any]] = [(value, root, "value")]
    while stack:
        node, parent, key = stack.pop()
        if isinstance(node, dict):
            kept = {k: v for k, v in node.items() if not _CREDENTIAL.search(str(k))}
            parent[key] = dict.fromkeys(kept)
            stack.extend((v, parent[key], k) for k, v in kept.items())
        elif isinstance(node, list):
            parent[key] = [None] * len(node)
            stack.extend((v, parent[key], i) for i, v in enumerate(node))
        else:
            parent[key] = node
    return root["value"]
