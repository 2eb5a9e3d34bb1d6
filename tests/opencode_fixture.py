"""A small OpenCode history written both ways OpenCode keeps one: the SQLite database and the older storage/ tree.

Shapes from anomalyco/opencode: the tables of ``packages/opencode/src/session/session.sql.ts`` at
063e8306d9895af9bdd175306cfa4fa3291fd83a (``session``, ``message``, ``part``, with ``Timestamps`` of
``storage/schema.sql.ts``) and the ``project`` columns its ``storage/json-migration.ts`` fills (at
062aa8c024a00b7348dd3160c0b4fbbfce074ee2), as Drizzle creates them (text, integer, real; ``data`` a JSON text
column); the tree's paths from the same ``json-migration.ts`` (``project/<id>.json``,
``session/<projectID>/<id>.json``, ``message/<sessionID>/<id>.json``, ``part/<messageID>/<id>.json``); message
and part bodies from ``session/message-v2.ts`` at 007a9409bafea06d6b9084ff1f6d1fe9f5e3a803 (``User``,
``Assistant``, ``TextPart`` with ``synthetic``, ``ReasoningPart``, ``FilePart``, ``ToolPart`` with its
``ToolState``, ``StepStartPart``, ``StepFinishPart``); ``revert`` from ``session/revert.ts``; a bash call's exit
code in its state's ``metadata.exit`` (``tool/bash.ts``).

The history (times in epoch milliseconds; T = 2026-01-01T10:00:00Z = 1767261600000):

- project ``prj_calc`` (worktree ``/work/calc``, name ``calc``);
- session ``ses_A001`` "Fix add" (T), ``revert`` at ``msg_A06``:
  ``msg_A01`` user (T+1 s): text "Fix the add function in calc.py", a synthetic text (the file OpenCode read for
  the ``@calc.py``), a file part;
  ``msg_A02`` assistant claude-sonnet-4-5 (T+2 s, finish ``tool-calls``, cost 0.0123, tokens input 1200, output
  80, reasoning 20, cache read 3000, write 500): step-start, reasoning, bash ``pytest -q`` (exit 1), edit
  ``calc.py``, step-finish;
  ``msg_A03`` assistant claude-sonnet-4-5 (T+5 s, finish ``stop``, 0.0050, 300/40/0/4000/0): bash ``pytest -q &&
  git commit -am 'Fix add'`` (exit 0), text "Fixed: add used a minus sign.", step-finish;
  ``msg_A04`` user (T+60 s) "Now push it";
  ``msg_A05`` assistant gpt-5 / openai (T+61 s, ``tool-calls``, 0.0020, 100/10/50/0/0): bash ``git push origin
  main`` failed (status ``error``, no exit code), a ``question`` call still ``pending``;
  ``msg_A06`` user (T+100 s) "undo that" and ``msg_A07`` assistant claude-sonnet-4-5 (T+101 s, 0.0010,
  50/5/0/0/0): taken back by the ``revert``;
- session ``ses_B001`` "Explore" (T+50 s), child of ``ses_A001`` (a ``task`` sub-agent): ``msg_B01`` user "Find
  where add() is defined" (the parent agent's prompt); ``msg_B02`` assistant claude-haiku-4-5 (``stop``, 0.0010,
  500/20/0/0/0): grep ``def add``, text "add() is in calc.py, line 1.";
- session ``ses_C001`` "Empty" (T+200 s) with no message;
- and the bad input: a part of ``msg_A03`` whose data is not JSON, a part naming a message ``msg_ghost`` that no
  message row or file has; in the tree also ``todo/ses_A001.json``, a file PULSE does not read.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

T = 1767261600000
S = 1000

SCHEMA = """
CREATE TABLE `project` (
  `id` text PRIMARY KEY, `worktree` text NOT NULL, `vcs` text, `name` text, `icon_url` text, `icon_color` text,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `time_initialized` integer,
  `sandboxes` text NOT NULL
);
CREATE TABLE `session` (
  `id` text PRIMARY KEY, `project_id` text NOT NULL REFERENCES `project`(`id`) ON DELETE cascade,
  `workspace_id` text, `parent_id` text, `slug` text NOT NULL, `directory` text NOT NULL, `path` text,
  `title` text NOT NULL, `version` text NOT NULL, `share_url` text, `summary_additions` integer,
  `summary_deletions` integer, `summary_files` integer, `summary_diffs` text, `cost` real DEFAULT 0 NOT NULL,
  `tokens_input` integer DEFAULT 0 NOT NULL, `tokens_output` integer DEFAULT 0 NOT NULL,
  `tokens_reasoning` integer DEFAULT 0 NOT NULL, `tokens_cache_read` integer DEFAULT 0 NOT NULL,
  `tokens_cache_write` integer DEFAULT 0 NOT NULL, `revert` text, `permission` text, `goal` text, `agent` text,
  `model` text, `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `time_compacting` integer,
  `time_archived` integer
);
CREATE TABLE `message` (
  `id` text PRIMARY KEY, `session_id` text NOT NULL REFERENCES `session`(`id`) ON DELETE cascade,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL
);
CREATE TABLE `part` (
  `id` text PRIMARY KEY, `message_id` text NOT NULL REFERENCES `message`(`id`) ON DELETE cascade,
  `session_id` text NOT NULL, `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `data` text NOT NULL
);
CREATE INDEX `message_session_time_created_id_idx` ON `message` (`session_id`, `time_created`, `id`);
CREATE INDEX `part_message_id_id_idx` ON `part` (`message_id`, `id`);
CREATE INDEX `part_session_idx` ON `part` (`session_id`);
"""

PROJECT = {"id": "prj_calc", "worktree": "/work/calc", "vcs": "git", "name": "calc", "time": {"created": T}}

SESSIONS = [
    {
        "id": "ses_A001",
        "projectID": "prj_calc",
        "slug": "fix-add",
        "directory": "/work/calc",
        "title": "Fix add",
        "version": "1.0.150",
        "time": {"created": T, "updated": T + 101 * S},
        "revert": {"messageID": "msg_A06"},
    },
    {
        "id": "ses_B001",
        "projectID": "prj_calc",
        "parentID": "ses_A001",
        "slug": "explore",
        "directory": "/work/calc",
        "title": "Explore",
        "version": "1.0.150",
        "time": {"created": T + 50 * S, "updated": T + 52 * S},
    },
    {
        "id": "ses_C001",
        "projectID": "prj_calc",
        "slug": "empty",
        "directory": "/work/calc",
        "title": "Empty",
        "version": "1.0.150",
        "time": {"created": T + 200 * S, "updated": T + 200 * S},
    },
]


def _user(message_id: str, session_id: str, at: int) -> dict:
    return {
        "id": message_id,
        "sessionID": session_id,
        "role": "user",
        "time": {"created": at},
        "agent": "build",
        "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"},
    }


def _assistant(message_id, session_id, at, model, provider, finish, cost, tokens, parent) -> dict:
    i, o, r, cr, cw = tokens
    return {
        "id": message_id,
        "sessionID": session_id,
        "role": "assistant",
        "time": {"created": at, "completed": at + 900},
        "parentID": parent,
        "modelID": model,
        "providerID": provider,
        "mode": "build",
        "agent": "build",
        "path": {"cwd": "/work/calc", "root": "/work/calc"},
        "cost": cost,
        "tokens": {"input": i, "output": o, "reasoning": r, "cache": {"read": cr, "write": cw}},
        "finish": finish,
    }


def _text(part_id, text, **extra) -> dict:
    return {"id": part_id, "type": "text", "text": text, **extra}


def _bash(part_id, call_id, command, status, start, **state) -> dict:
    body = {"status": status, "input": {"command": command, "description": "run"}, "time": {"start": start}}
    if status in ("completed", "error"):
        body["time"]["end"] = start + S
    body.update(state)
    return {"id": part_id, "type": "tool", "callID": call_id, "tool": "bash", "state": body}


def _step_finish(part_id, cost, tokens) -> dict:
    i, o, r, cr, cw = tokens
    tokens_object = {"input": i, "output": o, "reasoning": r, "cache": {"read": cr, "write": cw}}
    return {"id": part_id, "type": "step-finish", "reason": "stop", "cost": cost, "tokens": tokens_object}


A02 = (1200, 80, 20, 3000, 500)
A03 = (300, 40, 0, 4000, 0)
MESSAGES = [  # (message, its parts)
    (
        _user("msg_A01", "ses_A001", T + 1 * S),
        [
            _text("prt_A01a", "Fix the add function in calc.py"),
            _text("prt_A01b", 'Called the Read tool with the following input: {"filePath":"calc.py"}', synthetic=True),
            {"id": "prt_A01c", "type": "file", "mime": "text/plain", "filename": "calc.py", "url": "file:///calc.py"},
        ],
    ),
    (
        _assistant(
            "msg_A02", "ses_A001", T + 2 * S, "claude-sonnet-4-5", "anthropic", "tool-calls", 0.0123, A02, "msg_A01"
        ),
        [
            {"id": "prt_A02a", "type": "step-start"},
            {"id": "prt_A02b", "type": "reasoning", "text": "Run the tests first.", "time": {"start": T + 2 * S}},
            _bash(
                "prt_A02c",
                "toolu_01",
                "pytest -q",
                "completed",
                T + 3 * S,
                output="1 failed",
                title="Run tests",
                metadata={"exit": 1, "output": "1 failed"},
            ),  # fmt: skip
            {
                "id": "prt_A02d",
                "type": "tool",
                "callID": "toolu_02",
                "tool": "edit",
                "state": {
                    "status": "completed",
                    "input": {"filePath": "/work/calc/calc.py", "oldString": "a - b", "newString": "a + b"},
                    "output": "Edit applied successfully.",
                    "title": "calc.py",
                    "metadata": {},
                    "time": {"start": T + 4 * S, "end": T + 4 * S + 200},
                },
            },
            _step_finish("prt_A02e", 0.0123, A02),
        ],
    ),
    (
        _assistant("msg_A03", "ses_A001", T + 5 * S, "claude-sonnet-4-5", "anthropic", "stop", 0.0050, A03, "msg_A01"),
        [
            _bash(
                "prt_A03a",
                "toolu_03",
                "pytest -q && git commit -am 'Fix add'",
                "completed",
                T + 5 * S,
                output="1 passed",
                title="Commit",
                metadata={"exit": 0},
            ),  # fmt: skip
            _text("prt_A03b", "Fixed: add used a minus sign.", time={"start": T + 7 * S, "end": T + 8 * S}),
            _step_finish("prt_A03c", 0.0050, A03),
        ],
    ),
    (_user("msg_A04", "ses_A001", T + 60 * S), [_text("prt_A04a", "Now push it")]),
    (
        _assistant(
            "msg_A05", "ses_A001", T + 61 * S, "gpt-5", "openai", "tool-calls", 0.0020, (100, 10, 50, 0, 0), "msg_A04"
        ),
        [
            _bash("prt_A05a", "toolu_04", "git push origin main", "error", T + 62 * S, error="Command failed"),
            {
                "id": "prt_A05b",
                "type": "tool",
                "callID": "toolu_05",
                "tool": "question",
                "state": {"status": "pending", "input": {}, "raw": ""},
            },  # fmt: skip
        ],
    ),
    (_user("msg_A06", "ses_A001", T + 100 * S), [_text("prt_A06a", "undo that")]),
    (
        _assistant(
            "msg_A07",
            "ses_A001",
            T + 101 * S,
            "claude-sonnet-4-5",
            "anthropic",
            "stop",
            0.0010,
            (50, 5, 0, 0, 0),
            "msg_A06",
        ),
        [_text("prt_A07a", "Undoing.")],
    ),
    (_user("msg_B01", "ses_B001", T + 50 * S), [_text("prt_B01a", "Find where add() is defined")]),
    (
        _assistant(
            "msg_B02",
            "ses_B001",
            T + 51 * S,
            "claude-haiku-4-5",
            "anthropic",
            "stop",
            0.0010,
            (500, 20, 0, 0, 0),
            "msg_B01",
        ),
        [
            {
                "id": "prt_B02a",
                "type": "tool",
                "callID": "toolu_10",
                "tool": "grep",
                "state": {
                    "status": "completed",
                    "input": {"pattern": "def add"},
                    "output": "calc.py:1: def add(a, b):",
                    "title": "def add",
                    "metadata": {},
                    "time": {"start": T + 51 * S, "end": T + 51 * S + 100},
                },
            },
            _text("prt_B02b", "add() is in calc.py, line 1."),
        ],
    ),
]
BAD_PART = ("prt_A99z", "msg_A03", "ses_A001", "{not json")  # (id, message, session, data)
GHOST_PART = {"id": "prt_G001", "sessionID": "ses_A001", "messageID": "msg_ghost", "type": "text", "text": "lost"}


def write_database(path: Path) -> Path:
    """The history as an ``opencode.db``: each row's ``data`` is its record without the ids the row holds."""
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.execute(
        "INSERT INTO project VALUES (?, ?, ?, ?, NULL, NULL, ?, ?, NULL, '[]')",
        (PROJECT["id"], PROJECT["worktree"], PROJECT["vcs"], PROJECT["name"], T, T),
    )
    for s in SESSIONS:
        con.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, revert, time_created,"
            " time_updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                s["id"],
                s["projectID"],
                s.get("parentID"),
                s["slug"],
                s["directory"],
                s["title"],
                s["version"],
                json.dumps(s["revert"]) if "revert" in s else None,
                s["time"]["created"],
                s["time"]["updated"],
            ),
        )
    for message, parts in MESSAGES:
        data = {k: v for k, v in message.items() if k not in ("id", "sessionID")}
        at = message["time"]["created"]
        con.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
            (message["id"], message["sessionID"], at, at, json.dumps(data)),
        )
        for part in parts:
            body = {k: v for k, v in part.items() if k != "id"}
            con.execute(
                "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                (part["id"], message["id"], message["sessionID"], at, at, json.dumps(body)),
            )
    bad_id, bad_message, bad_session, bad_data = BAD_PART
    con.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", (bad_id, bad_message, bad_session, T, T, bad_data))
    ghost = {k: v for k, v in GHOST_PART.items() if k not in ("id", "sessionID", "messageID")}
    con.execute(
        "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
        (GHOST_PART["id"], GHOST_PART["messageID"], GHOST_PART["sessionID"], T, T, json.dumps(ghost)),
    )
    con.commit()
    con.close()
    return path


def write_storage(folder: Path) -> Path:
    """The history as the older ``storage/`` tree: one JSON file per project, session, message and part, each the
    whole record as OpenCode wrote it (ids included)."""

    def put(relative: str, value) -> None:
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value if isinstance(value, str) else json.dumps(value, indent=2))

    put(f"project/{PROJECT['id']}.json", PROJECT)
    for s in SESSIONS:
        put(f"session/{s['projectID']}/{s['id']}.json", s)
    for message, parts in MESSAGES:
        put(f"message/{message['sessionID']}/{message['id']}.json", message)
        for part in parts:
            body = {"sessionID": message["sessionID"], "messageID": message["id"], **part}
            put(f"part/{message['id']}/{part['id']}.json", body)
    bad_id, bad_message, _, bad_data = BAD_PART
    put(f"part/{bad_message}/{bad_id}.json", bad_data)
    put(f"part/{GHOST_PART['messageID']}/{GHOST_PART['id']}.json", GHOST_PART)
    put("todo/ses_A001.json", [{"id": "1", "content": "push", "status": "pending", "priority": "high"}])
    return folder
