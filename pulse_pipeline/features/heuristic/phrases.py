"""The phrase and keyword tables (``features/heuristic_phrases.toml``) and the one regex that finds them in a message.

Why a data file: the tables are the annotator's vocabulary, reviewed and extended by people who do not read the
rules; a phrase is a line of TOML, not a code change. They are read once, at import.

How a message is matched (the regex is built here once): case-insensitively (the caller lowers the text and reads
``’`` as ``'``), on whole words, each phrase also without its apostrophes (``didnt``). At each word start the
longest phrase is found; it also counts as the shorter phrases it starts with ("i didn't ask for" is also "i didn't
ask"), so ``ENTRIES[phrase]`` lists its own entries, then those of its prefixes. Matches may overlap ("gitlab-ci"
also holds "ci").
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

PHRASES_FILE = Path(__file__).resolve().parent.parent / "heuristic_phrases.toml"
PHRASE_TABLES = ("correction", "instruction", "analysis", "unfinished", "scope", "frustration")
STRONG, WEAK = 3, 1  # points of a strong and a weak task keyword


class PhraseTableError(ValueError):
    """The phrase file is not what the annotator can read; the message names the file, the entry and the fix."""


@dataclass(frozen=True)
class PhraseTables:
    """The tables of ``heuristic_phrases.toml``, in the file's order (the order breaks ties)."""

    task_keywords: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]  # task type -> (strong, weak keywords)
    scratch_verbs: tuple[str, ...]  # "create a", "build me a", ...
    scratch_things: tuple[str, ...]  # "app", "script", ...
    cluster_keywords: dict[str, tuple[str, ...]]  # development cluster -> keywords
    phrases: dict[str, tuple[str, ...]]  # one of PHRASE_TABLES -> phrases
    not_shouting: frozenset[str]  # ALL-CAPS words that are not shouting


def _strings(path: Path, where: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise PhraseTableError(f"{path}: {where} must be a non-empty list of strings")
    return tuple(value)


def load_phrase_tables(path: Path = PHRASES_FILE) -> PhraseTables:
    """The tables at ``path``; raises ``PhraseTableError`` naming the entry that is missing or malformed."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PhraseTableError(f"{path}: not a readable TOML phrase file ({exc})") from exc
    task_keywords = {
        str(t.get("name")): (
            _strings(path, f"[[task_type]] {t.get('name')!r} strong", t.get("strong")),
            _strings(path, f"[[task_type]] {t.get('name')!r} weak", t.get("weak")),
        )
        for t in doc.get("task_type", [])
    }
    cluster_keywords = {
        str(c.get("name")): _strings(path, f"[[cluster]] {c.get('name')!r} keywords", c.get("keywords"))
        for c in doc.get("cluster", [])
    }
    if not task_keywords or not cluster_keywords:
        raise PhraseTableError(f"{path}: needs [[task_type]] and [[cluster]] entries")
    scratch, phrases = doc.get("scratch", {}), doc.get("phrases", {})
    tables = PhraseTables(
        task_keywords=task_keywords,
        scratch_verbs=_strings(path, "[scratch] verbs", scratch.get("verbs")),
        scratch_things=_strings(path, "[scratch] things", scratch.get("things")),
        cluster_keywords=cluster_keywords,
        phrases={name: _strings(path, f"[phrases] {name}", phrases.get(name)) for name in PHRASE_TABLES},
        not_shouting=frozenset(_strings(path, "[shouting] not_shouting", doc.get("shouting", {}).get("not_shouting"))),
    )
    for table, key, phrase, _weight in _own_entries(tables):
        if not (phrase[0].isalnum() and phrase[-1].isalnum()) or phrase != phrase.lower():
            where = f"{table} {key!r}" if key else table
            raise PhraseTableError(
                f"{path}: {where} phrase {phrase!r} must be lower case and start and end with a letter or digit "
                "(it is matched on whole words)"
            )
    return tables


class PhraseEntry(NamedTuple):
    table: str  # "task", "cluster", "scratch" or one of PHRASE_TABLES
    key: str  # the task type or cluster; "" in the other tables
    label: str  # the phrase as listed
    weight: int  # STRONG or WEAK for task keywords, else 1


def _own_entries(tables: PhraseTables) -> Iterator[PhraseEntry]:
    """Every phrase of every table, as listed."""
    for task_type, (strong, weak) in tables.task_keywords.items():
        yield from (PhraseEntry("task", task_type, p, STRONG) for p in strong)
        yield from (PhraseEntry("task", task_type, p, WEAK) for p in weak)
    for cluster, keywords in tables.cluster_keywords.items():
        yield from (PhraseEntry("cluster", cluster, p, 1) for p in keywords)
    yield from (PhraseEntry("scratch", "", p, 1) for p in tables.scratch_verbs)
    for table in PHRASE_TABLES:
        yield from (PhraseEntry(table, "", p, 1) for p in tables.phrases[table])


def phrase_entries(tables: PhraseTables) -> dict[str, list[PhraseEntry]]:
    """phrase (and its apostrophe-less spelling) -> its own entries, then those of the shorter phrases it starts
    with."""
    own: dict[str, list[PhraseEntry]] = {}
    for entry in _own_entries(tables):
        for spelling in dict.fromkeys((entry.label, entry.label.replace("'", ""))):
            own.setdefault(spelling, []).append(entry)
    out = {}
    for phrase in own:
        words = phrase.split(" ")
        prefixes = [" ".join(words[:j]) for j in range(len(words), 0, -1)]
        out[phrase] = list(dict.fromkeys(e for p in prefixes for e in own.get(p, ())))
    return out


def _alternation(phrases: list[str]) -> str:
    """``phrase|phrase|...``, longest first, grouped by first character (so a scan tries a few phrases at each word,
    not all: 10 times faster)."""
    by_first: dict[str, list[str]] = {}
    for p in sorted(phrases, key=lambda p: (-len(p), p)):
        by_first.setdefault(p[0], []).append(re.escape(p[1:]))
    return "|".join(re.escape(c) + "(?:" + "|".join(rest) + ")" for c, rest in sorted(by_first.items()))


TABLES = load_phrase_tables()
ENTRIES = phrase_entries(TABLES)
TASK_PRIORITY = tuple(TABLES.task_keywords)  # ties go to the first
CLUSTER_PRIORITY = (*TABLES.cluster_keywords, "Fix underspecified issues")
# the longest phrase at each word start; a lookahead, so that matches may overlap ("gitlab-ci" also holds "ci")
_PHRASES = re.compile(r"\b(?=(" + _alternation(list(ENTRIES)) + r")\b)")
# what follows a scratch verb: " <up to 3 words> <thing>" ("create a" + " small flask app")
SCRATCH_TAIL = re.compile(r" (?:[\w+#.-]+ ){0,3}?(?:" + "|".join(map(re.escape, TABLES.scratch_things)) + r")\b")


def find_phrases(lowered: str) -> Iterator[tuple[int, int, PhraseEntry]]:
    """(start, end, entry) of every table entry found in a lowered message, in order of position."""
    for m in _PHRASES.finditer(lowered):
        for entry in ENTRIES[m.group(1)]:
            yield m.start(1), m.end(1), entry
