"""Gemini CLI chat recordings: ``~/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl`` (a
sub-agent's: ``chats/<parent session id>/<session id>.jsonl``), and the older one-JSON-per-session
``session-*.json``. Source: google-gemini/gemini-cli ``packages/core/src/services/chatRecordingTypes.ts`` and
``chatRecordingService.ts`` (``loadConversationRecord``) at 5411f113cafae26161b4969b0237b8e1e024e2c2; the legacy
file is ``ConversationRecord`` in ``chatRecordingService.ts`` at 45100f7c0e4e972555a613bb2279af385327fc01, the
commit before "migrate chat recording to JSONL streaming" (f7449135).

**The file.** The current file is a log of records, one JSON object per line, that Gemini CLI folds into the
conversation when it resumes a session; PULSE folds it the same way (``GeminiCli.events``):

- a metadata record ``{sessionId, projectHash, startTime, lastUpdated, kind}`` (``kind`` ``main`` or
  ``subagent``) opens the file; a record with a string ``sessionId`` and ``projectHash`` is metadata wherever it
  is (a legacy record is one with ``messages[]``, which are read as if they followed it);
- a message ``{id, timestamp, type, content, displayContent?}`` (``type`` ``user``, ``gemini``, ``info``,
  ``error``, ``warning``; a ``gemini`` message adds ``thoughts``, ``tokens``, ``model``, ``toolCalls``): a message
  whose ``id`` was seen before **replaces** it in place (Gemini CLI appends a message again each time it adds its
  tokens or tool calls);
- ``{"$set": {...}}`` updates the metadata; a ``$set`` with ``messages`` is a checkpoint the CLI writes when it
  rewrites the model's history (``updateMessagesFromHistory``: a compression, masked tool output). Gemini CLI's
  loader makes that list the whole conversation; PULSE only takes the list's messages (new versions of known ids
  in place, new ones such as the compression's summary at the end) and keeps the earlier ones: a compression
  changes what the model is shown, not what the user said, and dropping them lost the user's first messages;
- ``{"$rewindTo": id}`` **drops the message ``id`` and every message after it** (``/rewind``: Gemini CLI's
  ``rewindTo`` keeps the messages before the target; the user took them back); an id not in the conversation
  drops them all, as Gemini CLI's loader does. How many messages rewinds dropped is kept in the metadata
  (``rewound_messages``).

Any other object (a record type this module does not know) is kept at its place as an ``other`` event; a line
that is not JSON is quarantined by the file reader, with its line number.

**Events** (in the order of the folded conversation; a message's first event takes the message's ``id``, a later
one ``<id>:<k>``; a tool call its own ``id``, its result ``<call id>:result``):

- ``user``: its text parts are the user's ``message`` (text: the ``displayContent``'s text where the CLI shows
  something else than it sent, e.g. ``/init`` for the prompt it expands to; else the content's text), so it
  counts and opens a work segment, except text the CLI itself sent: the continuation prompts ``Please
  continue.``, ``System: Please continue.`` (``core/client.ts``; the second before 9380e13f) and ``[Continuing
  from previous AI thoughts...]`` (``utils/historyHardening.ts``), and text starting with ``<session_context>`` or
  ``<hook_context>`` (``utils/sessionUtils.ts``, ``isIgnoredUserContent``): ``system`` actions from the
  ``environment``; a compression's summary (text starting ``<state_snapshot>``,
  ``context/chatCompressionService.ts``) is a ``condensation``. Its ``functionResponse`` parts are tool results
  (newer versions record them as ``user`` messages too): an observation answering the call they name, or, when
  that call's result was already read off its ``toolCalls`` record, a ``state`` ``function_response``: **never a
  user message**.
- ``gemini``: each thought (``thoughts[]``: ``**subject** description``, as Gemini CLI renders them) is a
  ``think``; its text the agent's ``message``; each ``toolCalls[]`` entry an action and, once it has a
  ``result`` or a final ``status``, the observation answering it. ``run_shell_command`` is ``run`` (``command``
  its ``args.command``; exit code the ``N`` of an ``Exit Code: N`` line of the result, else 0 on ``success`` and
  -1 on ``error`` or ``cancelled``: ``tools/shell.ts`` writes the line only for a non-zero code);
  ``replace``/``edit`` are ``edit``, ``write_file`` ``write``, ``read_file``, ``read_many_files``,
  ``list_directory``, ``glob``, ``grep_search``, ``search_file_content`` ``read``, ``web_fetch`` and
  ``google_web_search`` ``browse``, ``write_todos`` and ``tracker_*`` ``task_tracking``, ``invoke_agent``
  ``delegate``, ``mcp_*`` ``call_tool_mcp`` (``tools/tool-names.ts``, ``tools/mcp-tool.ts``); any other tool is
  ``other`` with its name. A failed call's observation is ``error``, a cancelled one ``user_rejected``.
  Gemini CLI records no finish reason, so an agent message never says it waits: a segment runs from a user
  message to the event before the next one (``segments.py``), one segment per user turn.
- ``info`` and ``warning`` are ``state`` events of that name, ``error`` an ``error`` observation, from the
  ``environment``.
- A sub-agent's file (``kind: subagent``): its user-role messages are the parent agent's prompts, so every
  message is source ``subagent`` and none counts as the user's.

**Session id**: the metadata's ``sessionId`` (the last one set). **Usage**: every ``gemini`` message's
``tokens`` once per message id (its last version), rewound ones included (they were spent): prompt tokens
``input + tool`` (``promptTokenCount``, cached tokens included, plus ``toolUsePromptTokenCount``), completion
tokens ``output + thoughts`` (``candidatesTokenCount`` + ``thoughtsTokenCount``), so the two add up to the
message's ``total``. Gemini CLI records no cost (None). The model is the one of the most ``gemini`` messages.
These, with ``projectHash``, ``startTime``, ``lastUpdated``, ``kind``, ``summary`` and ``directories``, are the
session's metadata (``events.llm_usage``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from .adapter import Adapter, EventFields, number_events
from .events import OBSERVATION_NAMES, as_id, as_int, as_text, dump, llm_usage

_MESSAGE_TYPES = frozenset(["user", "gemini", "info", "error", "warning"])
_CONTINUATIONS = frozenset(
    ["Please continue.", "System: Please continue.", "[Continuing from previous AI thoughts...]"]
)
_INJECTED_PREFIXES = ("<session_context>", "<hook_context>")
_SNAPSHOT = "<state_snapshot>"  # the summary a compression puts in the history as a user turn
_TOOLS = {
    "run_shell_command": "run",
    "replace": "edit",
    "edit": "edit",
    "write_file": "write",
    "read_file": "read",
    "read_many_files": "read",
    "list_directory": "read",
    "glob": "read",
    "grep_search": "read",
    "search_file_content": "read",
    "web_fetch": "browse",
    "google_web_search": "browse",
    "write_todos": "task_tracking",
    "invoke_agent": "delegate",
}
_OBSERVATION_OF = {"call_tool_mcp": "mcp"}
_TOOL_TEXT_KEYS = ("file_path", "absolute_path", "dir_path", "path", "pattern", "url", "query", "prompt", "description")
_FINAL_STATUSES = frozenset(["success", "error", "cancelled"])
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)
_METADATA_KEYS = {
    "projectHash": "project_hash",
    "startTime": "start_time",
    "lastUpdated": "last_updated",
    "kind": "kind",
    "summary": "summary",
    "directories": "directories",
}


PROMPT_LOG = (
    "Gemini CLI's prompt log (logs.json: each prompt the user typed, kept for the CLI's up-arrow history), not a"
    " session: the sessions, these prompts included, are read from the chats/ folder beside it"
)


def is_prompt_log_entry(record: Any) -> bool:
    """An entry of Gemini CLI's ``logs.json`` (``core/logger.ts``, ``LogEntry``: ``{sessionId, messageId: number,
    timestamp, type: "user", message}``). It names a ``sessionId`` and has a ``type``, as a Claude Code line does,
    so ``records.classify`` asks this first: read as a Claude Code session it duplicated the Gemini session's user
    messages under the same id."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("sessionId"), str)
        and type(record.get("messageId")) is int
        and isinstance(record.get("message"), str)
        and "projectHash" not in record
    )


def is_metadata(record: Any) -> bool:
    """Gemini CLI's own test (``isPartialMetadataRecord``): a string ``sessionId`` and ``projectHash``."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("sessionId"), str)
        and isinstance(record.get("projectHash"), str)
    )


def _is_message(record: Any) -> bool:
    """Gemini CLI's ``isMessageRecord``: an object with a string ``id``."""
    return isinstance(record, dict) and isinstance(record.get("id"), str)


def _parts(content: Any) -> list[Any]:
    """A ``PartListUnion`` as a list of parts: a string is one text part, a part alone a list of one."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if isinstance(content, list):
        return [{"text": p} if isinstance(p, str) else p for p in content]
    return [content]


def _texts(parts: list[Any]) -> list[str]:
    """The text of the parts that are text (not thoughts)."""
    return [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")]


def _response(part: Any) -> dict[str, Any] | None:
    if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
        return part["functionResponse"]
    return None


def _result_text(result: Any) -> str | None:
    """A tool call's result as text: each ``functionResponse``'s ``output`` (else its ``error``, else its whole
    ``response``), and any text parts."""
    texts: list[str] = []
    for part in _parts(result):
        response = _response(part)
        if response is not None:
            body = response.get("response")
            if isinstance(body, dict) and isinstance(body.get("output"), str):
                texts.append(body["output"])
            elif isinstance(body, dict) and isinstance(body.get("error"), str):
                texts.append(body["error"])
            elif body is not None:
                texts.append(dump(body))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(texts) if texts else None


def _thought_text(thought: Any) -> str | None:
    """``**subject** description``, as Gemini CLI renders a thought summary (``convertSessionToClientHistory``)."""
    if not isinstance(thought, dict):
        return as_text(thought)
    subject, description = as_text(thought.get("subject")), as_text(thought.get("description")) or ""
    return f"**{subject}** {description}" if subject else description


def _other(source: str, original: Any) -> EventFields:
    return EventFields(source, "other", "other", original_name=as_text(original))


class GeminiCli(Adapter):
    """One Gemini CLI session file (JSONL, or the legacy one JSON document)."""

    format = "gemini_cli"
    file_format = "gemini_cli"  # raw.sessions.source_format of a file of its records (no ``_events`` suffix)

    def __init__(self) -> None:
        self.metadata: dict[str, Any] = {}
        self.spent: dict[str, dict[str, Any]] = {}  # gemini message id -> its last version (tokens, model)
        self.rewound = 0
        self.answered: set[str] = set()  # tool call ids whose result was read
        self.calls: dict[str, str] = {}  # tool call id -> canonical action name

    @staticmethod
    def recognizes(event: Any) -> bool:
        return is_metadata(event)

    def events(self, raw_events: Iterable[Any]) -> Iterator[Any]:
        """The conversation as Gemini CLI's ``loadConversationRecord`` folds the records (module docstring): the
        messages in their first place, each in its last version, without those rewound; records this module does
        not know (and values that are not objects, which ``read_events`` quarantines) at their place."""
        conversation: dict[Any, Any] = {}
        for position, record in enumerate(raw_events):
            if isinstance(record, dict) and isinstance(record.get("$rewindTo"), str):
                self._rewind(conversation, record["$rewindTo"])
            elif _is_message(record):
                self._put(conversation, record)
            elif isinstance(record, dict) and isinstance(record.get("$set"), dict):
                update = record["$set"]
                if isinstance(update.get("messages"), list):  # a checkpoint: its messages' versions, and new ones
                    for message in update["messages"]:
                        if _is_message(message):
                            self._put(conversation, message)
                self.metadata.update({k: v for k, v in update.items() if k != "messages"})
            elif is_metadata(record):
                self.metadata.update({k: v for k, v in record.items() if k != "messages"})
                for message in record.get("messages") if isinstance(record.get("messages"), list) else []:
                    if _is_message(message):
                        self._put(conversation, message)
            else:
                conversation[("#", position)] = record
        return iter(list(conversation.values()))

    def _put(self, conversation: dict[Any, Any], message: dict[str, Any]) -> None:
        conversation[message["id"]] = message  # a known id keeps its place: Map.set in Gemini CLI
        if message.get("type") == "gemini":
            self.spent[message["id"]] = message

    def _rewind(self, conversation: dict[Any, Any], target: str) -> None:
        """Drop the message ``target`` and every message after it; all messages when it is not there."""
        messages = [k for k in conversation if isinstance(k, str)]
        dropped = messages[messages.index(target) :] if target in messages else messages
        for key in dropped:
            del conversation[key]
        self.rewound += len(dropped)

    def parse_all(self, event: dict[str, Any]) -> list[EventFields]:
        message_type = event.get("type")
        subagent = self.metadata.get("kind") == "subagent"
        if message_type == "user":
            events = self._user(event, subagent)
        elif message_type == "gemini":
            events = self._gemini(event, subagent)
        elif message_type in ("info", "warning"):
            events = [EventFields("environment", "state", message_type, text=_joined(event.get("content")))]
        elif message_type == "error":
            events = [EventFields("environment", "observation", "error", text=_joined(event.get("content")))]
        else:
            events = [_other("unknown", message_type if isinstance(message_type, str) else "record")]
        return number_events(events, as_id(event.get("id")))

    def _user(self, message: dict[str, Any], subagent: bool) -> list[EventFields]:
        parts = _parts(message.get("content"))
        shown = _texts(_parts(message.get("displayContent")))
        texts = _texts(parts)
        events: list[EventFields] = []
        said = False
        for part in parts:
            response = _response(part)
            if response is not None:
                events.append(self._response(response))
            elif not said and isinstance(part, dict) and ("text" in part or "inlineData" in part or "fileData" in part):
                said = True
                events.append(_said("\n".join(shown or texts) or None, "\n".join(texts), subagent))
        return events or [_other("subagent" if subagent else "user", "empty_user_message")]

    def _response(self, response: dict[str, Any]) -> EventFields:
        call_id = as_id(response.get("id"))
        text = _result_text([{"functionResponse": response}])
        if call_id is not None and call_id in self.answered:
            return EventFields("environment", "state", "function_response", text=text, cause=call_id)
        name = self.calls.get(call_id or "")
        if name is None:
            return EventFields("environment", "observation", "other", original_name="function_response", text=text)
        if call_id is not None:
            self.answered.add(call_id)
        fields = EventFields("environment", "observation", "other", text=text, cause=call_id)
        _name_observation(fields, name, as_text(response.get("name")))
        return fields

    def _gemini(self, message: dict[str, Any], subagent: bool) -> list[EventFields]:
        source = "subagent" if subagent else "agent"
        events: list[EventFields] = []
        thoughts = message.get("thoughts")
        for thought in thoughts if isinstance(thoughts, list) else []:
            events.append(EventFields(source, "action", "think", text=_thought_text(thought)))
        parts = _parts(message.get("content"))
        for part in parts:
            if isinstance(part, dict) and part.get("thought") and isinstance(part.get("text"), str):
                events.append(EventFields(source, "action", "think", text=part["text"]))
        text = "\n".join(_texts(parts))
        if text.strip():
            events.append(EventFields(source, "action", "message", text=text))
        calls = message.get("toolCalls")
        listed = set()
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict):
                events.append(_other(source, "tool_call"))
                continue
            listed.add(as_id(call.get("id")))
            events.extend(self._tool_call(call, source))
        for part in parts:  # a call only in the content (a response recorded before its toolCalls)
            call = part.get("functionCall") if isinstance(part, dict) else None
            if isinstance(call, dict) and as_id(call.get("id")) not in listed:
                events.append(self._action(as_id(call.get("id")), call.get("name"), call.get("args"), source))
        return events or [_other(source, "empty_gemini_message")]

    def _action(self, call_id: str | None, tool: Any, args: Any, source: str) -> EventFields:
        tool = tool if isinstance(tool, str) else None
        name = _TOOLS.get(tool or "") or ("call_tool_mcp" if tool and tool.startswith("mcp_") else None)
        if name is None and tool and tool.startswith("tracker_"):
            name = "task_tracking"
        args = args if isinstance(args, dict) else {}
        fields = EventFields(source, "action", name or "other", event_id=call_id)
        if name is None:
            fields.original_name = tool
        if name == "run":
            fields.command = args.get("command") if isinstance(args.get("command"), str) else None
            fields.text = fields.command
        else:
            fields.text = next((args[k] for k in _TOOL_TEXT_KEYS if isinstance(args.get(k), str)), None)
        if call_id is not None:
            self.calls[call_id] = fields.name
        return fields

    def _tool_call(self, call: dict[str, Any], source: str) -> list[EventFields]:
        call_id = as_id(call.get("id"))
        action = self._action(call_id, call.get("name"), call.get("args"), source)
        status = call.get("status")
        if call.get("result") is None and status not in _FINAL_STATUSES:
            return [action]  # still running, or awaiting approval: nothing answered it
        text = _result_text(call.get("result"))
        result = EventFields(
            "environment",
            "observation",
            "other",
            text=text,
            cause=call_id,
            event_id=f"{call_id}:result" if call_id else None,
        )
        if action.name == "run":
            result.name, result.command = "run", action.command
            found = _EXIT_CODE.search(text or "")
            result.exit_code = as_int(found.group(1)) if found else (0 if status == "success" else -1)
        elif status == "error":
            result.name = "error"
        elif status == "cancelled":
            result.name = "user_rejected"
        else:
            _name_observation(result, action.name, action.original_name)
        if call_id is not None:
            self.answered.add(call_id)
        return [action, result]

    def session_id(self) -> str | None:
        return as_id(self.metadata.get("sessionId"))

    def session_info(self) -> dict[str, Any]:
        prompt = completion = 0
        counted = False
        models: Counter[str] = Counter()
        for message in self.spent.values():
            tokens = message.get("tokens")
            if isinstance(tokens, dict):
                counted = True
                prompt += (as_int(tokens.get("input")) or 0) + (as_int(tokens.get("tool")) or 0)
                completion += (as_int(tokens.get("output")) or 0) + (as_int(tokens.get("thoughts")) or 0)
            if isinstance(message.get("model"), str) and message["model"]:
                models[message["model"]] += 1
        info: dict[str, Any] = llm_usage(None, prompt if counted else None, completion if counted else None)
        info["model"] = models.most_common(1)[0][0] if models else None
        for key, name in _METADATA_KEYS.items():
            if self.metadata.get(key) is not None:
                info[name] = self.metadata[key]
        if self.rewound:
            info["rewound_messages"] = self.rewound
        return info


def _joined(content: Any) -> str | None:
    return "\n".join(_texts(_parts(content))) or as_text(content if isinstance(content, str) else None)


def _said(text: str | None, sent: str, subagent: bool) -> EventFields:
    """What a user message's text is: the CLI's own continuation or injected context (``system``), else the
    user's ``message`` (a sub-agent's prompt from its parent: source ``subagent``)."""
    head = sent.strip()
    if head.startswith(_SNAPSHOT):
        return EventFields("environment", "action", "condensation", text=sent)
    if head in _CONTINUATIONS or head.startswith(_INJECTED_PREFIXES):
        return EventFields("environment", "action", "system", text=sent or None)
    return EventFields("subagent" if subagent else "user", "action", "message", text=text)


def _name_observation(fields: EventFields, action: str, tool: str | None) -> None:
    """Name a tool result like its call (``mcp`` for an MCP call), or ``other`` with the tool's name."""
    name = _OBSERVATION_OF.get(action, action)
    if name in OBSERVATION_NAMES:
        fields.name = name
    else:
        fields.original_name = tool
