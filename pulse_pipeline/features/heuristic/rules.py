"""The rules: one function per rubric ``heuristic`` name, registered in ``RULES`` (each is documented in the package
docstring, where a rule and its signal are one row).

A rule is ``(SessionView, RubricFeature) -> Answer``: it reads the view the annotator built for the session and
answers with the rubric's spelling of the option, plus the evidence. ``@rule("name")`` registers it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps

from ..annotation import Answer
from ..rubric import RubricFeature
from .phrases import CLUSTER_PRIORITY, SCRATCH_TAIL, STRONG, TABLES, TASK_PRIORITY
from .text import plural, quote, quote_command
from .view import SessionView, Step

HEURISTIC_VERSION = "3"  # part of every annotation's prompt_version: bump it when a rule or a phrase table changes

POSITIVE_AT = 0.05
NEGATIVE_AT = -0.05
FRUSTRATED_AT = -0.5

Rule = Callable[[SessionView, RubricFeature], Answer]
RULES: dict[str, Rule] = {}

YES, NO = "YES", "NO"
NO_USER = Answer("", "no user message")
TASK_DEFAULT = "Implement Features"
CLUSTER_NONE = "None of the above"
FIX_TASKS = ("Fix Bugs", "Fix Failing Continuous Integration", "Fix Merge Conflicts")
DOC_SUFFIXES = (".md", ".rst", ".txt", ".adoc")

_EXTENSIONS = re.compile(r"\.(?<=\w\.)(py|ipynb|java|jar)\b")  # after a word character
_PY, _JAVA = "Fix python issues", "Fix Java issues"
_EXT_CLUSTER = {"py": _PY, "ipynb": _PY, "java": _JAVA, "jar": _JAVA}
_AGAIN = re.compile(r"(?:^|[.!?]\s+)again,", re.M)
_IDENTIFIER = re.compile(r"\w\(|\b[a-z]+_[a-z0-9_]+\b|\b[a-z]+[A-Z]\w*|\w\.[a-z]{1,5}\b|/")
_ERROR_WORDS = ("error", "exception", "traceback", "fail")
_CAPS_WORD = re.compile(r"(?<![\w'])[A-Z][A-Z']*[A-Z](?![\w'])")
_DONT_GIT = re.compile(  # a literal first, for a fast scan; the word start is checked where used
    r"(?:don't|dont|do not|never)\s+(?:(?!forget\b)\w+\s+){0,2}?"
    r"(push|commit|merge|(?:create|open|make|submit|raise)\s+(?:a\s+|an\s+|the\s+|any\s+)?(?:pr|prs|pull requests?))\b"
    r"(?:\s+(?:\w+\s+)?(?:to|into|on)\s+(?:the\s+)?([\w./-]+))?"
)
_GENERIC_TARGETS = frozenset(
    ["it", "this", "that", "anything", "github", "origin", "remote", "upstream", "repo", "repository", "branch"]
)
_PR_COMMAND = re.compile(r"\bgh\s+pr\s+create\b|\bhub\s+pull-request\b|/pulls\b")
_GH_MERGE = re.compile(r"\bgh\s+pr\s+merge\b")
_TODO = re.compile(
    r"(?:#|//|/\*|<!--|--|\*|;)\s*(?:TODO|FIXME|XXX)\b|\braise\s+NotImplementedError\b|"
    r"\bpass\s*#\s*(?i:stub|todo|placeholder|implement)|\b(?:todo|unimplemented)!\(|"
    r"throw\s+new\s+Error\(\s*['\"`](?i:not\s+implemented)"
)
_TODO_HINTS = re.compile(r"TODO|FIXME|XXX|NotImplementedError|pass|!\(|Error\(")  # a fast first look for _TODO
_ELLIPSIS_BODY = re.compile(r"^[ \t]*(?:async\s+)?def\s[^\n]*:[ \t]*(?:\n[ \t]*)?\.\.\.[ \t]*$", re.M)
_IMPORTED = r"(?:\bimport\s+|\bfrom\s+|-m\s+|require\(\s*['\"][^'\"]*?)(?:[\w/.]*[./])?{}\b"  # stem of an edited file
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def rule(name: str) -> Callable[[Rule], Rule]:
    """Register a rule under ``name``; a session without user messages answers ``NO_USER`` before it runs."""

    def register(fn: Rule) -> Rule:
        @wraps(fn)
        def guarded(v: SessionView, feature: RubricFeature) -> Answer:
            return fn(v, feature) if v.users else NO_USER

        RULES[name] = guarded
        return guarded

    return register


def _option(feature: RubricFeature, wanted: str) -> str:
    """``wanted`` as the rubric spells it (case-insensitive), or as is when the rubric has no such option."""
    return next((o for o in feature.options if o.lower() == wanted.lower()), wanted)


@rule("vader_sentiment")
def vader_sentiment(v: SessionView, feature: RubricFeature) -> Answer:
    scores = v.compounds
    mean = sum(scores) / len(scores)
    value = _option(feature, "Positive" if mean >= POSITIVE_AT else "Negative" if mean <= NEGATIVE_AT else "Neutral")
    why = f"mean VADER compound {mean:+.2f} over {plural(len(scores), 'message')}"
    if not any(scores):
        return Answer(value, why + ": no sentiment words")
    hi = max(range(len(scores)), key=scores.__getitem__)
    lo = min(range(len(scores)), key=scores.__getitem__)
    parts = [f"most positive {scores[hi]:+.2f}: {quote(v.users[hi], 60)}"] if scores[hi] > 0 else []
    parts += [f"most negative {scores[lo]:+.2f}: {quote(v.users[lo], 60)}"] if scores[lo] < 0 else []
    return Answer(value, why + "; " + "; ".join(parts))


def _scratch_phrases(v: SessionView) -> list[tuple[int, str]]:
    """(message, phrase) of every "create a ... app"-like phrase."""
    matches = ((h, SCRATCH_TAIL.match(v.lowered[h.k], h.end)) for h in v.found("scratch", later=False))
    return [(h.k, v.lowered[h.k][h.start : m.end()]) for h, m in matches if m]


def task_type(v: SessionView) -> tuple[str, str]:
    """(task type, explanation) by the ``[[task_type]]`` keywords of the phrase file; see the package docstring."""
    for later, where in ((False, "first message"), (True, "later messages")):
        found = [(h.key, h.label, h.weight) for h in v.found("task", False) if (h.k > 0) == later and not v.in_path(h)]
        found += [("Create Programs from Scratch", p, STRONG) for k, p in _scratch_phrases(v) if (k > 0) == later]
        scores: dict[str, int] = {}
        labels: dict[str, list[str]] = {}
        for key, label, weight in found:
            if label not in labels.setdefault(key, []):
                scores[key] = scores.get(key, 0) + weight
                labels[key].append(label)
        if scores:
            ranked = sorted(scores, key=lambda c: (-scores[c], TASK_PRIORITY.index(c)))
            best = ranked[0]
            why = f"{where}: " + ", ".join(f'"{w}"' for w in labels[best][:4]) + f" ({best} {scores[best]}"
            return best, why + (f"; next {ranked[1]} {scores[ranked[1]]})" if len(ranked) > 1 else ")")
    return TASK_DEFAULT, f"no keyword matched; default {TASK_DEFAULT}"


@rule("task_type_keywords")
def task_type_keywords(v: SessionView, feature: RubricFeature) -> Answer:
    value, why = task_type(v)
    return Answer(_option(feature, value), why)


@rule("development_cluster_keywords")
def development_cluster_keywords(v: SessionView, feature: RubricFeature) -> Answer:
    found = [(h.key, h.label) for h in v.found("cluster", later=False) if not v.in_path(h)]
    found += [(_EXT_CLUSTER[m.group(1)], "." + m.group(1)) for m in _EXTENSIONS.finditer(v.joined)]
    if "http://" in v.joined or "https://" in v.joined:
        found.append(("Web browsing and research", "a URL"))
    found += [("Write code from scratch", phrase) for _k, phrase in _scratch_phrases(v)]
    first = v.users[0]
    if len(first.split()) <= 12 and not _IDENTIFIER.search(first) and not any(w in v.lowered[0] for w in _ERROR_WORDS):
        found.append(
            ("Fix underspecified issues", f"short first message without file, function or error: {quote(first)}")
        )
    labels: dict[str, list[str]] = {}
    for cluster, label in found:
        if label not in labels.setdefault(cluster, []):
            labels[cluster].append(label)
    allowed = [c for c in CLUSTER_PRIORITY if c in labels and _option(feature, c) in feature.options]
    if not allowed:
        return Answer(_option(feature, CLUSTER_NONE), "no keyword matched")
    ranked = sorted(allowed, key=lambda c: (-len(labels[c]), CLUSTER_PRIORITY.index(c)))
    chosen = ranked[: max(1, feature.max_choices)]
    chosen_options = [_option(feature, c) for c in chosen]
    quoted = {c: [w if w.startswith(("short", "a URL", ".")) else f'"{w}"' for w in labels[c][:3]] for c in chosen}
    why = "; ".join(f"{c}: " + ", ".join(quoted[c]) for c in chosen)
    if len(ranked) > len(chosen):
        why += f" (also matched: {', '.join(ranked[len(chosen) :])})"
    return Answer("|".join(o for o in feature.options if o in chosen_options), why)


def _said(v: SessionView, table: str) -> str | None:
    """'message k says "..." ("phrase")' for the first phrase of ``table`` in a later message, if any."""
    hits = v.found(table)
    more = f" (+{plural(len(hits) - 1, 'more match')})" if len(hits) > 1 else ""
    return v.says(hits[0]) + more if hits else None


@rule("user_correction")
def user_correction(v: SessionView, feature: RubricFeature) -> Answer:
    said = _said(v, "correction")
    if said:
        return Answer(YES, said)
    if len(v.users) == 1:
        return Answer(NO, "no later message")
    return Answer(NO, f"no correction phrase in {plural(len(v.users) - 1, 'later message')}")


def _does(s: Step, verb: str) -> bool:
    """Whether step ``s`` does ``verb``: push, commit, merge or pr (open a pull request)."""
    if (s.name, verb) in (("push", "push"), ("send_pr", "pr")):
        return True
    if not s.run:
        return False
    if verb == "pr":
        return _PR_COMMAND.search(s.text) is not None
    return verb in s.git or (verb == "merge" and _GH_MERGE.search(s.text) is not None)


def _git_violation(v: SessionView) -> str | None:
    """A "don't push/commit/merge/open a PR (to <branch>)" in a user message, and a step doing it."""
    for k, low in enumerate(v.lowered):
        for m in _DONT_GIT.finditer(low):
            if m.start() > 0 and (low[m.start() - 1].isalnum() or low[m.start() - 1] == "_"):
                continue
            verb = m.group(1).split()[0]
            verb = verb if verb in ("push", "commit", "merge") else "pr"
            target = (m.group(2) or "").strip(".,;:!?")
            target = "" if target in _GENERIC_TARGETS else target
            for s in v.steps:
                if _does(s, verb) and (not target or re.search(rf"(?<![\w/.-]){re.escape(target)}(?![\w/-])", s.text)):
                    action = quote_command(s.text) if s.text else f"a {s.name} step"
                    return f"message {k + 1} says {v.snippet(k, m.start(), m.end())} and step {s.i + 1} ran {action}"
    return None


@rule("instruction_repeated")
def instruction_repeated(v: SessionView, feature: RubricFeature) -> Answer:
    said = _said(v, "instruction")
    if said:
        return Answer(YES, said)
    for k in range(1, len(v.lowered)):
        m = _AGAIN.search(v.lowered[k]) if "again," in v.lowered[k] else None
        if m:
            return Answer(YES, f'message {k + 1} says {v.snippet(k, m.start(), m.end())} ("again,")')
    broke = _git_violation(v)
    if broke:
        return Answer(YES, broke)
    return Answer(NO, "no repeated instruction, no don't-push/commit/PR instruction broken by a git command")


@rule("edits_before_reading")
def edits_before_reading(v: SessionView, feature: RubricFeature) -> Answer:
    said = _said(v, "analysis")
    if said:
        return Answer(YES, said)
    edit = next((s for s in v.steps if s.edit), None)
    if edit is None:
        return Answer(NO, "no file edits")
    read = next((s for s in v.steps if s.read), None)
    if read is None:
        return Answer(YES, f"no read or search step; first edit is {edit.label()}")
    if edit.i < read.i:
        return Answer(YES, f"first edit {edit.label()} comes before the first read {read.label()}")
    return Answer(NO, f"read before editing: {read.label()} precedes the first edit {edit.label()}")


def _runs_edited(s: Step, edited: list[str]) -> bool:
    """Whether a shell step runs one of the ``edited`` files: its name in the command, or its module imported."""
    if not s.run or s.read or s.edit or "git " in s.text:
        return False
    for path in edited:
        base = path.rstrip("/").rsplit("/", 1)[-1]
        stem = base.rsplit(".", 1)[0]
        if len(base) >= 4 and base in s.text:
            return True
        if len(stem) >= 3 and stem in s.text and re.search(_IMPORTED.format(re.escape(stem)), s.text):
            return True
    return False


@rule("edits_without_tests")
def edits_without_tests(v: SessionView, feature: RubricFeature) -> Answer:
    edits = [s for s in v.steps if s.edit]
    if not edits:
        return Answer(NO, "no file edits")
    lines = sum(len(s.written.splitlines()) for s in edits if s.written)
    if len(edits) == 1 and (edits[0].written is None or lines < 5):
        return Answer(
            NO, f"trivial: one edit ({'unknown size' if edits[0].written is None else plural(lines, 'line')})"
        )
    paths = list(dict.fromkeys(s.path for s in edits if s.path))
    if all(s.path for s in edits) and all(p.lower().endswith(DOC_SUFFIXES) for p in paths):
        return Answer(NO, f"documentation only: {', '.join(paths[:3])}")
    after = [s for s in v.steps if s.i > edits[0].i]
    test = next((s for s in after if s.test), None)
    if test:
        return Answer(NO, f"{test.label()} runs tests after the first edit")
    ran = next((s for s in after if _runs_edited(s, paths)), None)
    if ran:
        return Answer(NO, f"{ran.label()} runs an edited file")
    shown = ", ".join(paths[:3]) + (f" +{len(paths) - 3}" if len(paths) > 3 else "")
    files = f"{plural(len(paths), 'file')}: {shown}" if paths else "from the shell"
    written = f"{plural(lines, 'line')} written" if any(s.written for s in edits) else "written code not known"
    what = f"{plural(len(edits), 'edit')} ({files}), {written}"
    return Answer(YES, what + "; no test run or run of an edited file after the first edit")


@rule("repeated_failing_command")
def repeated_failing_command(v: SessionView, feature: RubricFeature) -> Answer:
    failing: dict[str, int] = {}  # command -> failures since the last edit
    repeated: tuple[str, int, int | None] | None = None
    n_failed = 0
    for s in v.steps:
        if s.edit:
            failing.clear()
        elif s.run and s.failed and s.text:
            n_failed += 1
            key = " ".join(s.text.split())
            failing[key] = failing.get(key, 0) + 1
            if failing[key] >= 2 and (repeated is None or failing[key] > repeated[1]):
                repeated = (key, failing[key], s.exit_code)
    if repeated:
        code = f", exit {repeated[2]}" if repeated[2] is not None else ""
        return Answer(YES, f"{quote_command(repeated[0])} failed {repeated[1]} times{code} with no edit in between")
    last = next((s for s in reversed(v.steps) if s.test and (s.exit_code is not None or s.failed)), None)
    if last is not None and last.failed:
        code = f"exit {last.exit_code}" if last.exit_code is not None else "error"
        return Answer(YES, f"the last test run {last.label()} failed ({code}) and nothing followed it")
    tail = f"; last test run passed: {last.label()}" if last else "; no test run"
    if not n_failed:
        return Answer(NO, "no failing command" + tail)
    return Answer(NO, f"{plural(n_failed, 'failing command')}, none repeated without an edit between{tail}")


def _todo_line(s: Step) -> str | None:
    """The line of ``s``'s written code with a TODO/FIXME/stub marker, if any."""
    w = s.written or ""
    m = _TODO.search(w) if _TODO_HINTS.search(w) else None
    if m is None and "..." in w and not s.path.endswith(".pyi"):
        m = _ELLIPSIS_BODY.search(w)
    if m is None:
        return None
    lo, hi = w.rfind("\n", 0, m.start()) + 1, w.find("\n", m.end())
    line = w[lo : hi if hi != -1 else len(w)].strip()
    return line if line and line != "..." else " ".join(w[lo : m.end() + 5].split())


@rule("todo_left_or_unfinished")
def todo_left_or_unfinished(v: SessionView, feature: RubricFeature) -> Answer:
    for s in v.steps:
        line = _todo_line(s) if s.edit else None
        if line:
            return Answer(YES, f"{s.label()} wrote {quote(line, 60)}")
    said = _said(v, "unfinished")
    if said:
        return Answer(YES, said)
    n_written = sum(1 for s in v.steps if s.edit and s.written)
    code = f"no TODO/FIXME/stub in {plural(n_written, 'written block')}" if n_written else "no written code to check"
    return Answer(NO, f"{code}; no 'unfinished' message")


@rule("unrequested_additions")
def unrequested_additions(v: SessionView, feature: RubricFeature) -> Answer:
    said = _said(v, "scope")
    if said:
        return Answer(YES, said)
    task, _ = task_type(v)
    if task not in FIX_TASKS:
        return Answer(NO, f"no objection to extra changes; task is {task}, not a fix")
    seen: set[str] = set()
    unrelated: list[str] = []
    for s in v.steps:
        path = s.text if s.name in ("read", "edit", "write") else ""
        if s.name == "write" and path and path not in seen and "test" not in path.lower() and path not in unrelated:
            base = path.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
            words = {w.lower() for w in _NAME_WORD.findall(base) if len(w) >= 3}
            if words and not (words & v.user_words):
                unrelated.append(path)
        seen.add(path)
    if len(unrelated) >= 2:
        return Answer(YES, f"task is {task}; new files unrelated to the request: {', '.join(unrelated[:4])}")
    return Answer(NO, f"no objection to extra changes; {plural(len(unrelated), 'unrelated new file')}")


@rule("loop_behavior")
def loop_behavior(v: SessionView, feature: RubricFeature) -> Answer:
    counts: dict[tuple[str, str], int] = {}
    for s in v.steps:
        if s.failed:
            key = (s.name, " ".join(s.text.split()))
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return Answer(NO, "no failing action")
    (name, text), n = max(counts.items(), key=lambda kv: kv[1])
    if n >= 3:
        return Answer(
            YES, f"the same failing {name} {quote_command(text) if text else ''} ran {n} times".replace("  ", " ")
        )
    return Answer(NO, f"no failing action repeated 3 times (most: {n})")


@rule("frustration")
def frustration(v: SessionView, feature: RubricFeature) -> Answer:
    hits = v.found("frustration", later=False)
    if hits:
        return Answer(YES, v.says(hits[0]))
    for k, m in enumerate(v.users):
        for mark in ("!!!", "?!", "!?"):
            j = m.find(mark)
            if j != -1:
                return Answer(YES, f'message {k + 1} says {v.snippet(k, j, j + len(mark))} ("{mark}")')
        caps = [w for w in _CAPS_WORD.findall(m) if w not in TABLES.not_shouting]
        if len(caps) >= 3:
            return Answer(YES, f"message {k + 1} shouts {' '.join(caps[:5])}: {quote(m, 60)}")
    k = min(range(len(v.users)), key=v.compounds.__getitem__)
    if v.compounds[k] <= FRUSTRATED_AT:
        return Answer(YES, f"message {k + 1} has VADER compound {v.compounds[k]:+.2f}: {quote(v.users[k], 60)}")
    return Answer(NO, f"no irritation words, shouting or strongly negative message (lowest {v.compounds[k]:+.2f})")
