"""What the rules read: one ``SessionView`` per transcript, built once by the annotator and passed to every rule.

Why a view: every rule reads the same few things (the user's messages lowered, the phrases found in them, the
steps with what each runs), and lexing shell lines and matching phrases is most of the annotator's time; the view
works each out once, when a rule first asks (``cached_property``). Distinct shell lines and IPython cells are
lexed once per process (``lru_cache``): ``ls``, ``git status`` and ``pytest`` recur in nearly every session.

The rules for reading a session (what a read, an edit, a test run is) are in the package docstring.
"""

from __future__ import annotations

import re
from functools import cached_property, lru_cache
from typing import NamedTuple

from ..annotation import AgentStep, SessionTranscript
from ..shell import git_subcommands, is_python, is_test_command, program_argvs, program_name, python_shell_commands
from .phrases import find_phrases
from .text import QUOTE_CHARS, cap, compound, quote, quote_command

_STEP_NAMES = frozenset({"run", "run_ipython", "edit", "write", "read", "push", "send_pr"})
_SHELL_WRITE = re.compile(r"\bcat\s*>|\bcat\s+<<|\btee\s|\bsed\s+(?:-[a-z]*\s+)*-i|\bperl\s+-pi")
_READ_PROGRAMS = frozenset(
    "cat ls ll tree grep egrep fgrep rg ag ack find fd head tail less more wc stat awk".split()  # noqa: SIM905
)
_GIT_READS = frozenset(["grep", "log", "show", "diff", "status", "blame", "ls-files"])
_IPY_READ = re.compile(r"\.read\(|\bos\.listdir\(|\bglob\(|\bos\.walk\(|\bprint\(open\(")
_SLASHED = re.compile(r"(?<![^ \n\t])[^ \n\t]*/[^ \n\t]*")  # a whitespace-separated token with a /
_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=8192)
def _cell_lines(code: str) -> tuple[str, ...]:
    """The shell lines an IPython cell runs, parsed once per distinct cell (agents repeat their cells)."""
    return tuple(python_shell_commands(code))


class _LineFacts(NamedTuple):
    argvs: tuple[tuple[str, ...], ...]  # the argv of each program it runs (``shell.program_argvs``)
    git: tuple[str, ...]  # the git subcommands it runs
    test: bool  # a test command


@lru_cache(maxsize=65536)
def _line_facts(line: str) -> _LineFacts:
    """What one shell line does, lexed once per distinct line (``event_features`` parses each distinct command once
    for the same reason)."""
    argvs = tuple(tuple(argv) for argv in program_argvs(line))
    return _LineFacts(argvs, tuple(git_subcommands(line)), is_test_command(line))


def _is_read(argv: list[str]) -> bool:
    """Whether a program's argv reads files: cat, ls, grep, ... or ``sed -n``."""
    program = program_name(argv)
    return program in _READ_PROGRAMS or (program == "sed" and argv[1:2] == ["-n"])


class Step:
    """One step as the rules see it: its (capped) text and written code, and what it does (worked out when asked)."""

    def __init__(self, i: int, step: AgentStep) -> None:
        self.i = i  # its index in the transcript
        self.name = step.name if isinstance(step.name, str) else ""
        text = step.text if isinstance(step.text, str) else ""
        written = step.written if isinstance(step.written, str) and step.written else None  # "": not known
        self.text, self.written = cap(text), written and cap(written)
        self.capped = (self.text is not text) + (written is not self.written)
        self.exit_code = step.exit_code
        self.failed = (self.exit_code is not None and self.exit_code != 0) or bool(step.error)
        self.run = self.name in ("run", "run_ipython")
        if self.name == "run_ipython":
            self.lines = list(_cell_lines(self.text))  # the shell lines it runs
        else:
            self.lines = [self.text] if self.name == "run" and self.text else []
        self.edit = self.name in ("edit", "write") or any(map(_SHELL_WRITE.search, self.lines))
        self.path = self.text if self.name in ("edit", "write") else ""  # the file an edit/write step touched

    @cached_property
    def argvs(self) -> list[list[str]]:
        """The argv of every program its shell lines run."""
        return [list(a) for line in self.lines for a in _line_facts(line).argvs]

    @cached_property
    def git(self) -> list[str]:
        """The git subcommands it runs."""
        return [sub for line in self.lines for sub in _line_facts(line).git]

    @cached_property
    def read(self) -> bool:
        if self.edit or not self.run:
            return self.name == "read"
        reads = any(_is_read(a) for a in self.argvs)
        ipython_reads = self.name == "run_ipython" and _IPY_READ.search(self.text) is not None
        return reads or ipython_reads or not _GIT_READS.isdisjoint(self.git)

    @cached_property
    def test(self) -> bool:
        if self.edit or not self.run:
            return False
        test_file = any(
            len(a) > 1 and is_python(program_name(a)) and "test" in a[1] and a[1].endswith(".py") for a in self.argvs
        )
        return test_file or any(_line_facts(line).test for line in self.lines)

    def label(self) -> str:
        return f"step {self.i + 1} ({self.name} {quote_command(self.text) if self.text else ''})".replace(" )", ")")


class Hit(NamedTuple):
    k: int  # the message
    start: int  # where the (longest) phrase found there starts and ends
    end: int
    key: str  # task type or cluster, "" in the other tables
    label: str  # the phrase as listed
    weight: int


def _is_path(token: str) -> bool:
    token = token.strip("()[]{}<>\"'`,;:!?")
    return "." in token or token.count("/") > 1 or token.startswith("/")


class SessionView:
    """One transcript as the rules read it: its non-blank user messages (capped and lowered), the phrases in them,
    its steps, and VADER's scores."""

    def __init__(self, transcript: SessionTranscript) -> None:
        self.transcript = transcript
        originals = [m for m in (transcript.user_messages or ()) if isinstance(m, str) and m.strip()]
        self.users = [cap(m) for m in originals]
        self.n_capped = sum(1 for a, b in zip(originals, self.users, strict=True) if a is not b)
        self.lowered = [m.lower().replace("’", "'") for m in self.users]
        self.joined = "\n".join(self.lowered)  # every message, lowered, one per line

    @cached_property
    def hits(self) -> dict[str, list[Hit]]:
        """Every phrase of every table in the user's messages, by table."""
        out: dict[str, list[Hit]] = {}
        for k, low in enumerate(self.lowered):
            for start, end, (table, key, label, weight) in find_phrases(low):
                out.setdefault(table, []).append(Hit(k, start, end, key, label, weight))
        return out

    def found(self, table: str, later: bool = True) -> list[Hit]:
        """Hits of one table, in later messages only unless told."""
        return [h for h in self.hits.get(table, []) if h.k > 0 or not later]

    def snippet(self, k: int, start: int, end: int) -> str:
        """A quoted window of message ``k`` around [start, end), from the original text when it lines up."""
        text = self.users[k] if len(self.users[k]) == len(self.lowered[k]) else self.lowered[k]
        if len(text) <= QUOTE_CHARS:
            return quote(text)
        lo = max(0, min(start - 30, end - QUOTE_CHARS + 10))
        piece = quote(text[lo : lo + QUOTE_CHARS - 2], QUOTE_CHARS - 2)
        return piece if lo == 0 else '"…' + piece[1:]

    def says(self, h: Hit) -> str:
        return f'message {h.k + 1} says {self.snippet(h.k, h.start, h.end)} ("{h.label}")'

    @cached_property
    def path_spans(self) -> list[list[tuple[int, int]]]:
        """Per message, the spans of its path-like tokens (see the package docstring)."""
        return [
            [m.span() for m in _SLASHED.finditer(low) if _is_path(m.group())] if "/" in low else []
            for low in self.lowered
        ]

    def in_path(self, h: Hit) -> bool:
        return any(lo <= h.start < hi for lo, hi in self.path_spans[h.k])

    @cached_property
    def steps(self) -> list[Step]:
        """The steps some rule reads (by name, or failing), with their index in the transcript."""
        return [
            Step(i, s)
            for i, s in enumerate(self.transcript.steps or ())
            if isinstance(s, AgentStep)
            and (s.name in _STEP_NAMES or s.error or (s.exit_code is not None and s.exit_code != 0))
        ]

    @cached_property
    def compounds(self) -> list[float]:
        """VADER's compound score of each user message."""
        return [compound(m) for m in self.users]

    @cached_property
    def user_words(self) -> frozenset[str]:
        """The user's words of three or more letters and digits."""
        return frozenset(w for w in _WORD.findall(self.joined) if len(w) >= 3)
