"""A scripted OpenAI-compatible chat server on 127.0.0.1, for testing the LLM annotator without a network.

It serves ``POST /v1/chat/completions`` (and ``/chat/completions``) on a free port. By default it answers each of
PULSE's prompts (recognised by their wording) with a valid canned JSON answer for the default rubric, and the
discovery prompt (``pulse discover``) with ``DISCOVERY_ANSWER``. An analysis prompt that asks YES/NO or
one-category fields the canned answer lacks (a candidate rubric's) gets them answered deterministically from its
transcript (``candidate_answers``). Tests
change that by queueing replies (``push``), optionally for one kind of prompt only: malformed JSON, an unknown
category, HTTP errors (429, 500, 400), slow answers. It records every request body it received (``requests``: what
left the machine) and the most requests it had in flight at once (``max_in_flight``).

Tests use the ``fake_llm`` fixture (``tests/conftest.py``); benchmarks and a user trying the LLM path offline use
``running_fake_llm()``. The server stops when the block ends, and slow replies waiting at that moment are woken so no
thread outlives it for long. It lives with the tests, not in the package PULSE runs (nothing of the pipeline needs
it): a benchmark puts the repository root on ``sys.path`` and imports ``tests.fake_llm``, as a script run from a
checkout can.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANALYSIS_ANSWER: dict[str, Any] = {
    "task_description": "The user wants the failing parser test fixed.",
    "sentiment": {
        "classification": "Negative",
        "explanation": "The user is frustrated.",
        "example_messages": ["this is still broken"],
    },
    "task_type": "Fix Bugs",
    "development_cluster": ["Fix python issues", "Testing code"],
}
ISSUE_NAMES = (
    "misunderstood_intention",
    "did_not_follow_instruction",
    "insufficient_analysis",
    "insufficient_testing",
    "insufficient_debugging",
    "incomplete_implementation",
    "scope_creep",
)
ISSUES_ANSWER: dict[str, Any] = {
    name: {"answer": "YES" if name == "insufficient_testing" else "NO", "explanation": f"about {name}"}
    for name in ISSUE_NAMES
}
JUDGE_ANSWER: dict[str, Any] = {"binary_satisfied": False, "likert_score": 2, "explanation": "The user gave up."}
DISCOVERY_ANSWER: dict[str, Any] = {
    "features": [
        {
            "name": "user_thanked",
            "question": "Did the user thank the assistant or say the work was good?",
            "value_type": "yes_no",
            "why_predictive": "gratitude marks a satisfied user",
        },
        {
            "name": "message_length",
            "question": "the length of the user's longest message",
            "value_type": "category",
            "options": ["Short", "Medium", "Long"],
            "why_predictive": "long messages often restate a failed request",
        },
    ]
}
POSITIVE_WORDS = ("thank", "great", "perfect", "works", "nice", "awesome")
"""A candidate YES/NO question is answered YES when the transcript holds one of these (lower case)."""

_FIELD = re.compile(r'^"(\w+)": "(YES or NO|one of the categories)",?$', re.M)
_QUESTION = re.compile(r"^\d+\. (?:Answer YES or NO: .*|Classify .*: \[(.*)\])$", re.M)
_TRANSCRIPT = re.compile(
    r"Analyze the following user messages from a coding assistant session:\n\n(.*?)\n\nPlease", re.S
)


def candidate_answers(prompt: str) -> dict[str, Any]:
    """Answers to an analysis prompt's YES/NO and one-category fields, a function of the transcript only.

    YES/NO: YES when the transcript holds a ``POSITIVE_WORDS`` word. Category: option number
    ``sha256(transcript) mod len(options)`` of the inline option list of the field's question (fields and
    questions are matched in order, which holds when every analysis feature is yes_no or category).
    """
    found = _TRANSCRIPT.search(prompt)
    text = found.group(1) if found else ""
    digest = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    answers: dict[str, Any] = {}
    for (name, kind), question in zip(_FIELD.findall(prompt), _QUESTION.finditer(prompt), strict=False):
        if kind == "YES or NO":
            answers[name] = "YES" if any(w in text.lower() for w in POSITIVE_WORDS) else "NO"
        else:
            options = [o.strip() for o in (question.group(1) or "").split(",")]
            answers[name] = options[digest % len(options)]
    return answers


def kind_of(prompt: str) -> str:
    """Which of PULSE's prompts this is, by its wording."""
    if "Please provide the following analysis:" in prompt:
        return "analysis"
    if "For each issue item below" in prompt:
        return "issues"
    if "to determine user satisfaction" in prompt:
        return "judge"
    if "propose" in prompt and "HIGHEST-RATED SESSIONS" in prompt:
        return "discover"
    return "other"


@dataclass
class Reply:
    """One scripted reply: an HTTP status, the assistant's content (a string, or an object sent as JSON), a delay."""

    status: int = 200
    content: str | dict[str, Any] | None = None  # None: the canned answer for the prompt's kind
    delay_s: float = 0.0


@dataclass
class FakeLLM:
    """The server's script and what it saw. Thread-safe: handlers run on the server's threads."""

    answers: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            "analysis": ANALYSIS_ANSWER,
            "issues": ISSUES_ANSWER,
            "judge": JUDGE_ANSWER,
            "discover": DISCOVERY_ANSWER,
        }
    )
    usage: tuple[int, int] = (100, 20)  # prompt and completion tokens reported for every answer
    delay_s: float = 0.0  # added to every reply
    requests: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    port: int = 0
    _queue: deque[tuple[str | None, Reply]] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *replies: Reply, kind: str | None = None) -> None:
        """Queue replies, used in order by the next requests (of ``kind`` only, when given) before the default."""
        with self._lock:
            self._queue.extend((kind, r) for r in replies)

    def prompts(self, kind: str | None = None) -> list[str]:
        """The first user message of every request received (of ``kind``, when given)."""
        with self._lock:
            bodies = list(self.requests)
        out = [b["messages"][0]["content"] for b in bodies]
        return [p for p in out if kind is None or kind_of(p) == kind]

    def bodies_text(self) -> str:
        with self._lock:
            return "\n".join(json.dumps(b, ensure_ascii=False) for b in self.requests)

    def _next_reply(self, kind: str) -> Reply:
        with self._lock:
            for i, (k, r) in enumerate(self._queue):
                if k is None or k == kind:
                    del self._queue[i]
                    return r
        return Reply()

    def handle(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            kind = kind_of(body["messages"][0]["content"])
            reply = self._next_reply(kind)
            delay = reply.delay_s + self.delay_s
            if delay:
                self.stopping.wait(delay)
            if reply.status != 200:
                return reply.status, {"error": {"message": f"scripted {reply.status}", "type": "fake", "code": None}}
            content = reply.content if reply.content is not None else self.answers.get(kind, {})
            if reply.content is None and kind == "analysis":
                content = {**candidate_answers(body["messages"][0]["content"]), **content}
            text = content if isinstance(content, str) else json.dumps(content)
            p, c = self.usage
            return (
                200,
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "fake-model"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
                },
            )
        finally:
            with self._lock:
                self.in_flight -= 1


def _handler(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "body is not JSON"}})
                return
            status, payload = fake.handle(body)
            self._send(status, payload)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # do not wait for a slow reply whose client already left


@contextmanager
def running_fake_llm(**settings: Any) -> Iterator[FakeLLM]:
    """The server, running until the block ends; ``settings`` set FakeLLM fields."""
    fake = FakeLLM(**settings)
    server = _Server(("127.0.0.1", 0), _handler(fake))
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
