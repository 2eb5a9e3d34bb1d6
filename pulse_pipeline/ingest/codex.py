"""OpenAI Codex CLI rollouts: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`` (``CODEX_HOME`` defaults
to ``~/.codex``), one JSON object per line: ``{timestamp, type, payload}`` with ``type`` one of ``session_meta``,
``response_item``, ``event_msg``, ``turn_context``, ``compacted`` (openai/codex ``codex-rs/protocol/src/protocol.rs``
``RolloutLine``; the response items are ``models.rs`` ``ResponseItem``). A file is one session. Newer versions add
variants, so everything is read tolerantly.

Rules (each stated once, here):

- **Messages are the ``response_item`` ``message`` lines** (the model's history, in every version). Role
  ``assistant`` is the agent's ``message``; it waits for the user (closing the work segment by the no-state rule
  of ``segments.py``) when it has ``end_turn: true`` or ``phase: final_answer``, not with ``phase: commentary``, and
  is unknown otherwise (older versions: the segment then closes before the next user message). Role ``user`` is the
  user's ``message``, so it counts and opens a segment, unless it is context Codex injects (Codex's own rule: a
  text part starting with ``<environment_context>``, ``<user_instructions>``, ``# AGENTS.md instructions for``,
  ``<turn_aborted>``, ``<context_update>``, ``<tool_context>``, ``<reasoning_context>``, ``<pinned_notes>``,
  ``<subagent_notification>``, ``<user_shell_command>`` or ``<skill>``); that, and roles ``developer`` and
  ``system``, are ``system`` actions from the ``environment``. The ``event_msg`` echoes of the same text
  (``user_message``, ``agent_message``) are ``state`` events, so nothing counts twice.
  A user message that is a whole rating prompt (``rate N`` or ``rate N: comment``, ``claude_code.RATING_PROMPT``),
  typed for ``pulse hook codex`` and kept from the model by its ``UserPromptSubmit`` hook, is a ``rating_prompt``
  ``state``: not work, so it opens no segment, should Codex log it.
- **Tool calls.** ``function_call`` (arguments a JSON string) and ``custom_tool_call`` are agent actions named by
  their tool: ``shell`` and ``container.exec`` (``command`` an argv), ``shell_command`` (``command`` a string),
  ``exec_command`` (``cmd``) and ``local_shell_call`` (``action.command``) are ``run``, with ``command`` the
  string, or the argv joined as a shell would read it (``bash -lc 'git push'``, which ``features/shell.py`` looks
  into); ``apply_patch`` is ``edit``, ``update_plan`` ``task_tracking``, ``view_image`` ``read``; any other tool
  is ``other`` with its name as ``original_name``. ``web_search_call`` is ``browse``, ``reasoning`` is ``think``
  (its summary as text). A call's ``call_id`` is its event id.
- **Tool results** (``function_call_output``, ``custom_tool_call_output``) answer the call of their ``call_id``
  (their ``cause``) and are named like it. A shell result's exit code is read from its output: the JSON
  ``{"output", "metadata": {"exit_code"}}`` of the structured shell tool, else a line ``Exit code: N`` or
  ``Process exited with code N``; else the ``exit_code`` of an earlier ``event_msg`` ``exec_command_end`` of the
  same call; else unknown. A result whose call never appeared earlier in the file is kept as an ``other``
  observation (``original_name`` its payload type) with no cause.
- **Other lines.** ``compacted`` is a ``condensation`` action (its text the summary; the ``event_msg``
  ``context_compacted`` that echoes it is a ``state``). ``session_meta`` and ``turn_context`` are ``state``
  events. ``event_msg`` ``error`` is an ``error`` observation; ``exec_command_end`` a ``state`` carrying its exit
  code; the other runtime records Codex persists (``task_started``, ``task_complete``, ``turn_aborted``,
  ``token_count``, ...) are ``state`` events named by their type. A line of another ``type``, a payload that is not
  an object, and a ``response_item`` or ``event_msg`` of a type not listed here are kept as ``other`` events
  (``original_name`` their type).
- **Sub-agents** run in a rollout of their own whose ``session_meta.source`` is a sub-agent: there, user-role
  messages are the parent agent's prompts, so every message is source ``subagent`` and none counts as the user's.
- **Session id**: ``session_meta.payload.id`` (the first). **Usage**: the last ``token_count`` with
  ``info.total_token_usage`` (cumulative) gives prompt tokens ``input_tokens`` (cached ones included) and
  completion tokens ``output_tokens``; older rollouts whose ``token_count`` carries ``input_tokens``/
  ``output_tokens`` directly (one response each) are summed. Codex records no cost (None). The model is the
  ``turn_context`` ``model`` of the most turns. These, with ``cwd``, ``git.branch`` and ``cli_version``, are the
  session's metadata.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson

from .adapter import Adapter, EventFields
from .claude_code import RATING_PROMPT
from .events import OBSERVATION_NAMES, as_int, as_text, llm_usage, read_id

_LINE_TYPES = frozenset(["session_meta", "response_item", "event_msg", "turn_context", "compacted"])
_SHELL_TOOLS = frozenset(["shell", "container.exec", "shell_command", "exec_command", "local_shell"])
_TOOLS = {"apply_patch": "edit", "update_plan": "task_tracking", "view_image": "read"}
_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# agents.md instructions for",
    "<turn_aborted>",
    "<context_update>",
    "<tool_context>",
    "<reasoning_context>",
    "<pinned_notes>",
    "<subagent_notification>",
    "<user_shell_command>",
    "<skill>",
)
_STATE_EVENTS = frozenset(
    [
        "task_started",
        "turn_started",
        "task_complete",
        "turn_complete",
        "turn_aborted",
        "user_message",
        "agent_message",
        "agent_reasoning",
        "agent_reasoning_raw_content",
        "agent_reasoning_section_break",
        "token_count",
        "context_compacted",
        "thread_name_updated",
        "thread_rolled_back",
        "thread_goal_updated",
        "thread_settings_applied",
        "entered_review_mode",
        "exited_review_mode",
        "item_completed",
        "plan_update",
        "patch_apply_end",
        "mcp_tool_call_end",
        "web_search_end",
        "view_image_tool_call",
        "image_generation_end",
        "undo_completed",
        "stream_error",
    ]
)
_STATE_TEXT_KEYS = ("message", "text", "last_agent_message", "reason")
_EXIT_CODE = re.compile(r"^(?:Exit code:|Process exited with code) (-?\d+)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class _Call:
    name: str  # canonical action name
    tool: str | None
    command: str | None


def _known(value: Any, names: frozenset[str]) -> bool:
    """Whether a ``type`` is one of ``names``; a hostile one may be a list or an object, which no set can hold."""
    return isinstance(value, str) and value in names


def _other(original: Any) -> EventFields:
    return EventFields("unknown", "other", "other", original_name=as_text(original))


def _json_object(value: Any) -> dict[str, Any]:
    """A JSON object given as a string (function-call arguments, structured shell output), else {}."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return {}
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _command_text(value: Any) -> str | None:
    """A shell command as one line: a string as it is, an argv joined with shell quoting."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(w, str) for w in value):
        return shlex.join(value)
    return None


def _output(value: Any) -> tuple[str | None, int | None]:
    """A tool output's text and, where it says, the command's exit code."""
    structured = _json_object(value)
    if isinstance(structured.get("metadata"), dict) and "output" in structured:
        return as_text(structured.get("output")), as_int(structured["metadata"].get("exit_code"))
    if isinstance(value, dict):  # an old ``{content, success}`` payload
        value = value.get("content")
    text = as_text(value)
    found = _EXIT_CODE.search(text or "")
    return text, as_int(found.group(1)) if found else None


def _is_context(content: Any) -> bool:
    """A user-role message Codex injected (its ``is_contextual_user_message`` rule), not the user's words."""
    parts = content if isinstance(content, list) else [{"text": content}]
    for part in parts:
        text = part.get("text") if isinstance(part, dict) else None
        if isinstance(text, str) and text.lstrip().lower().startswith(_CONTEXT_PREFIXES):
            return True
    return False


def _is_subagent(source: Any) -> bool:
    """``session_meta.source`` of a sub-agent: ``{"subagent": ...}`` (``subAgent``/``sub_agent`` alike)."""
    return isinstance(source, dict) and any(str(k).replace("_", "").lower() == "subagent" for k in source)


class Codex(Adapter):
    """Codex CLI rollout lines (one file is one session)."""

    format = "codex"

    def __init__(self) -> None:
        self.calls: dict[str, _Call] = {}  # call_id -> the call, for its output
        self.exit_codes: dict[str, int] = {}  # call_id -> exit code from exec_command_end
        self.session: str | None = None
        self.subagent = False
        self.where: dict[str, str] = {}  # cwd, git_branch, agent_version
        self.models: Counter[str] = Counter()
        self.total: tuple[int | None, int | None] | None = None  # the last cumulative token_count
        self.summed: list[int] | None = None  # old per-response token_counts, summed

    @staticmethod
    def recognizes(event: Any) -> bool:
        return isinstance(event, dict) and _known(event.get("type"), _LINE_TYPES) and "payload" in event

    def parse(self, event: dict[str, Any]) -> EventFields:
        line_type = event.get("type")
        payload = event.get("payload")
        if not _known(line_type, _LINE_TYPES) or not isinstance(payload, dict):
            return _other(line_type)
        if line_type == "session_meta":
            self._session_meta(payload)
            return EventFields("environment", "state", "session_meta")
        if line_type == "turn_context":
            if isinstance(payload.get("model"), str):
                self.models[payload["model"]] += 1
            return EventFields("environment", "state", "turn_context")
        if line_type == "compacted":
            return EventFields("environment", "action", "condensation", text=as_text(payload.get("message")))
        if line_type == "response_item":
            return self._response_item(payload)
        return self._event_msg(payload)

    def session_id(self) -> str | None:
        return self.session

    def session_info(self) -> dict[str, Any]:
        prompt: int | None = None
        completion: int | None = None
        if self.total is not None:
            prompt, completion = self.total
        elif self.summed is not None:
            prompt, completion = self.summed
        info: dict[str, Any] = llm_usage(None, prompt, completion)
        info["model"] = self.models.most_common(1)[0][0] if self.models else None
        info.update(self.where)
        if self.subagent:
            info["subagent"] = True
        return info

    def _session_meta(self, meta: dict[str, Any]) -> None:
        if self.session is not None:
            return
        self.session = read_id(meta.get("id"), "session_meta id")
        self.subagent = _is_subagent(meta.get("source"))
        git = meta.get("git") if isinstance(meta.get("git"), dict) else {}
        where = {"cwd": meta.get("cwd"), "git_branch": git.get("branch"), "agent_version": meta.get("cli_version")}
        self.where = {name: value for name, value in where.items() if isinstance(value, str) and value}

    def _response_item(self, item: dict[str, Any]) -> EventFields:
        item_type = item.get("type")
        if item_type == "message":
            return self._message(item)
        if item_type in ("function_call", "custom_tool_call", "local_shell_call"):
            return self._call(item)
        if item_type in ("function_call_output", "custom_tool_call_output"):
            return self._result(item)
        source = "subagent" if self.subagent else "agent"
        if item_type == "reasoning":
            return EventFields(source, "action", "think", text=as_text(item.get("summary")) or None)
        if item_type == "web_search_call":
            action = item.get("action") if isinstance(item.get("action"), dict) else {}
            return EventFields(source, "action", "browse", text=as_text(action.get("query") or action.get("url")))
        if item_type in ("ghost_snapshot", "compaction", "compaction_summary"):
            return EventFields("environment", "state", str(item_type))
        return _other(item_type)

    def _message(self, item: dict[str, Any]) -> EventFields:
        role = item.get("role")
        text = as_text(item.get("content")) or None
        if role == "assistant":
            phase = item.get("phase")
            wait: bool | None = None
            if item.get("end_turn") is True or phase == "final_answer":
                wait = True
            elif phase == "commentary":
                wait = False
            source = "subagent" if self.subagent else "agent"
            return EventFields(source, "action", "message", text=text, wait_for_response=wait)
        if role == "user" and not _is_context(item.get("content")):
            if not self.subagent and RATING_PROMPT.fullmatch((text or "").strip()):
                return EventFields("user", "state", "rating_prompt", text=text)
            return EventFields("subagent" if self.subagent else "user", "action", "message", text=text)
        return EventFields("environment", "action", "system", text=text)

    def _call(self, item: dict[str, Any]) -> EventFields:
        call_id = read_id(item.get("call_id"), "call_id") or read_id(item.get("id"), "id")
        if item.get("type") == "local_shell_call":
            action = item.get("action") if isinstance(item.get("action"), dict) else {}
            tool, arguments = "local_shell", {"command": action.get("command")}
        else:
            tool = item.get("name") if isinstance(item.get("name"), str) else None
            arguments = item.get("arguments") if item.get("type") == "function_call" else item.get("input")
        fields = EventFields("subagent" if self.subagent else "agent", "action", "other", event_id=call_id)
        if tool in _SHELL_TOOLS:
            args = _json_object(arguments)
            fields.name = "run"
            fields.command = _command_text(args.get("command")) or _command_text(args.get("cmd"))
            fields.text = fields.command or as_text(arguments)
        elif tool in _TOOLS:
            fields.name = _TOOLS[tool]
            args = _json_object(arguments)
            fields.text = as_text(args.get("path") or args.get("input") or arguments)
        else:
            fields.original_name = tool
            fields.text = as_text(arguments)
        if call_id is not None:
            self.calls[call_id] = _Call(fields.name, tool, fields.command)
        return fields

    def _result(self, item: dict[str, Any]) -> EventFields:
        call_id = read_id(item.get("call_id"), "call_id")
        text, exit_code = _output(item.get("output"))
        call = self.calls.get(call_id or "")
        if call is None:
            return EventFields("environment", "observation", "other", original_name=item.get("type"), text=text)
        fields = EventFields("environment", "observation", "other", text=text, cause=call_id)
        if call.name == "run":
            fields.name, fields.command = "run", call.command
            fields.exit_code = exit_code if exit_code is not None else self.exit_codes.get(call_id or "")
        elif call.name in OBSERVATION_NAMES:
            fields.name = call.name
        else:
            fields.original_name = call.tool
        return fields

    def _event_msg(self, event: dict[str, Any]) -> EventFields:
        event_type = event.get("type")
        if event_type == "error":
            return EventFields("environment", "observation", "error", text=as_text(event.get("message")))
        if event_type == "exec_command_end":
            call_id, exit_code = read_id(event.get("call_id"), "call_id"), as_int(event.get("exit_code"))
            if call_id is not None and exit_code is not None:
                self.exit_codes[call_id] = exit_code
            return EventFields("environment", "state", "exec_command_end", exit_code=exit_code, cause=call_id)
        if not _known(event_type, _STATE_EVENTS):
            return _other(event_type)
        if event_type == "token_count":
            self._count_tokens(event)
        text = next(
            (event[k] for k in ("message", "text", "last_agent_message") if isinstance(event.get(k), str)), None
        )
        return EventFields("environment", "state", str(event_type), text=text)

    def _count_tokens(self, event: dict[str, Any]) -> None:
        info = event.get("info")
        if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
            total = info["total_token_usage"]
            self.total = (as_int(total.get("input_tokens")), as_int(total.get("output_tokens")))
        elif "input_tokens" in event or "output_tokens" in event:
            summed = self.summed or [0, 0]
            self.summed = [
                summed[0] + (as_int(event.get("input_tokens")) or 0),
                summed[1] + (as_int(event.get("output_tokens")) or 0),
            ]
