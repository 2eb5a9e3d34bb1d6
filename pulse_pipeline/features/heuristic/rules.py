"""The offline annotator: deterministic keyword, regex and VADER rules, one per rubric ``heuristic`` name.

Every session gets rubric answers without a network or an LLM, reproducibly and fast enough for a whole export, and
each answer says why: its explanation cites the evidence (the message quoted, the command, the count) or the reason
for a NO. Each rubric feature names a rule in ``RULES``; ``HeuristicAnnotator`` checks the names when it is built
and raises ``UnknownRuleError`` naming the rubric entry and the known rules. A new rule is a function
``(SessionTranscript, RubricFeature) -> Answer`` registered with ``@rule("name")``, and a row in the table below.

How the rules read a session
----------------------------
- Texts over 40 000 characters (user message, step text, written code) are read as their first and last 20 000
  (status ``truncated``, with a note); VADER reads each message's first and last 1 000 (``VADER_CHARS``).
- Phrases (the tables below this docstring) match case-insensitively on whole words, ``’`` read as ``'``, and
  without their apostrophes too (``didnt``). At each word the longest phrase is found; it also counts as the
  shorter phrases it starts with ("i didn't ask for" is also "i didn't ask"). Path-like tokens (a ``/`` with a
  ``.``, a second ``/`` or a leading ``/``: ``.github/workflows/ci.yml``, URLs) hold no task or cluster keyword.
- "Later messages" are the user's messages after the first (the request). No non-blank user message: every
  feature gets ``""``, "no user message", status ``skipped``. Non-English text gets the no-match fallbacks.
- Steps: shell commands are parsed by ``shell.py`` (a ``run_ipython`` cell: its shell lines); the programs a line
  runs are ``shell.program_argvs``'s (past keywords, ``VAR=value`` and wrappers with their options, inside
  ``sh -c``/``eval``, by base name), the same the git and test counts use. An *edit* is an ``edit``/``write`` step
  or a shell write (``cat >``, ``cat <<``, ``tee``, ``sed -i``, ``perl -pi``). A *read* is a ``read`` step, a
  program cat, ls, tree, grep, rg, ag, ack, find, fd, head, tail, less, more, wc, stat, awk or ``sed -n``, a git
  grep/log/show/diff/status/blame/ls-files, or a cell reading files (``.read(``, ``os.listdir(``, ``glob(``,
  ``os.walk(``). A *test run* is what ``is_test_command`` accepts, or a Python interpreter (``shell.is_python``)
  running ``<...test...>.py``. A step *fails* on a non-zero exit code or an error. Steps and messages are not
  interleaved, so rules needing their order read the whole session.

Rules (rule (default rubric feature): signal → answer)
-------------------------------------------------------
vader_sentiment (sentiment)
    Mean of vaderSentiment's ``polarity_scores(message)["compound"]`` → Positive if ≥ +0.05, Negative if ≤ −0.05,
    else Neutral; cites the most positive and most negative message.
task_type_keywords (task_type)
    ``TASK_KEYWORDS`` in the first message (in later ones if it has none): strong 3, weak 1, each once; "create/
    build/write/make/... a <up to 3 words> app/script/tool/..." is strong from-scratch → the top type, ties by
    ``TASK_PRIORITY`` (specific first); no keyword → Implement Features.
development_cluster_keywords (development_cluster)
    One point per distinct ``CLUSTER_KEYWORDS`` keyword in all messages; also ``.py``/``.ipynb`` → python,
    ``.java``/``.jar`` → Java, an http(s) URL → web research, the from-scratch phrase; a first message of at most 12
    words naming no file, path, ``function(``, snake_case, camelCase or error → underspecified → the
    ``max_choices`` top clusters (ties by ``CLUSTER_PRIORITY``) in the rubric's order; none → None of the above.
user_correction (misunderstood_intention)
    A ``CORRECTION_PHRASES`` phrase ("no I meant", "not what I asked", "wrong file", ...) in a later message → YES.
instruction_repeated (did_not_follow_instruction)
    An ``INSTRUCTION_PHRASES`` phrase ("I told you", "as I said", ...) or a sentence starting "again," in a later
    message; or "don't/do not/never push|commit|merge|open a PR (to <branch>)" in any message and a step doing it
    (git push/commit/merge, gh pr merge/create, hub pull-request, a ``/pulls`` call, a push/send_pr step) → YES.
edits_before_reading (insufficient_analysis)
    An ``ANALYSIS_PHRASES`` phrase ("already exists", "use the existing", ...) in a later message, or the first edit
    before any read (or no read at all) → YES; no edit → NO.
edits_without_tests (insufficient_testing)
    Edits, and after the first one no test run and no run of an edited file (named in the command, or its module
    imported: ``python -c "from src.app import f"``, ``-m app``, ``require('./app')``) → YES. Trivial sessions are
    NO: a single edit under 5 lines or of unknown code (None or ""), or documentation files only (.md, .rst, ...).
repeated_failing_command (insufficient_debugging)
    The same command (whitespace-normalized) failing twice with no edit between, or the last test run failing → YES.
todo_left_or_unfinished (incomplete_implementation)
    Written code with a TODO/FIXME/XXX comment, ``raise NotImplementedError``, ``pass  # stub``, a ``def`` whose body
    is ``...`` (not in .pyi), ``todo!()``, ``unimplemented!()`` or ``throw new Error("not implemented")``; or an
    ``UNFINISHED_PHRASES`` phrase ("you didn't finish", "still missing", ...) in a later message → YES.
unrequested_additions (scope_creep)
    A ``SCOPE_PHRASES`` phrase ("I didn't ask for", "why did you add", ...) in a later message; or a fix task (bugs,
    CI, merge conflicts) where the agent wrote two or more new non-test files (not read or edited before) whose
    names share no word with the user's messages → YES.
loop_behavior (not in the default rubric)
    The same failing action (step name and text) three or more times → YES.
frustration (not in the default rubric)
    In any user message: a ``FRUSTRATION_PHRASES`` phrase ("ugh", "come on", "wtf", ...), "!!!", "?!" or "!?",
    three ALL-CAPS words (``CAPS_EXCEPTIONS`` excepted), or a VADER compound ≤ −0.5 → YES.

``task_description`` is the first message's first sentence (at most 200 characters). ``prompt_version`` is
``heuristic-<HEURISTIC_VERSION>-<rubric version>-<rubric digest>``: bump ``HEURISTIC_VERSION`` when a rule changes.

Version 3 (was 2): reads and ``python <...test...>.py`` runs find a line's programs with ``shell.program_argvs``
instead of a private list that skipped only ``VAR=value``, sudo, env, time and nohup. So these are now reads or
test runs too: a program after a shell keyword (``if grep -q x f; then ...``, ``! grep``, ``{ cat f; }``), after a
wrapper's options or another wrapper (``sudo -u me cat f``, ``timeout 5 cat f``, ``nice``, ``command``, ``exec``,
``doas``, ``stdbuf``, ``ionice``), inside ``sh -c '...'``/``bash -lc '...'``/``eval``, or named by its path
(``/bin/cat f``, ``/usr/bin/python3 test_x.py``); and a Python interpreter is also ``pypy``/``pypy3`` or
``python3.11.4``. Nothing stops being a read or a test run but on odd words: a program named ``python.3``, or an
assignment whose name has a non-ASCII letter (``naïve=1 cat f``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from functools import cache, cached_property, lru_cache, wraps
from typing import NamedTuple

from .annotation import AgentStep, Annotation, Answer, SessionTranscript
from .rubric import Rubric, RubricError, RubricFeature, load_rubric
from .shell import git_subcommands, is_python, is_test_command, program_argvs, program_name, python_shell_commands

HEURISTIC_VERSION = "3"

HEAD_CHARS = 20_000
TAIL_CHARS = 20_000
VADER_CHARS = 1_000  # VADER reads a message's first and last VADER_CHARS characters
POSITIVE_AT = 0.05
NEGATIVE_AT = -0.05
FRUSTRATED_AT = -0.5
QUOTE_CHARS = 80

Rule = Callable[[SessionTranscript, RubricFeature], Answer]
RULES: dict[str, Rule] = {}

YES, NO = "YES", "NO"
NO_USER = Answer("", "no user message")


class UnknownRuleError(RubricError):
    """A rubric feature names a heuristic rule that ``RULES`` does not have."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# ---------------------------------------------------------------------------------------------------------------
# keyword and phrase tables (comma-separated, so no phrase holds a comma; lower case; whole words)

TASK_DEFAULT = "Implement Features"
STRONG, WEAK = 3, 1
# task type -> (strong keywords, weak keywords); ties go to the first type, so specific types come before generic
TASK_KEYWORDS: dict[str, tuple[str, str]] = {
    "Fix Merge Conflicts": (
        "merge conflict, merge conflicts, rebase conflict, rebase conflicts, conflict marker, conflict markers, "
        "resolve the conflict, resolve the conflicts, resolve conflicts, resolve the merge, merge conflicted",
        "conflict, conflicts, conflicting, rebase, rebasing, cherry-pick",
    ),
    "Fix Failing Continuous Integration": (
        "ci, github actions, github action, gh actions, continuous integration, jenkins, circleci, travis, "
        "gitlab ci, gitlab-ci, buildkite, ci pipeline, pipeline failing, pipeline is failing, failing pipeline, "
        "build is failing, build failing, failing build, checks are failing, failing checks",
        "workflow, workflows, pipeline, pipelines, lint job, test job, pre-commit",
    ),
    "Perform Deployments": (
        "deploy, deploys, deployed, deploying, deployment, deployments, redeploy, docker, dockerfile, "
        "docker-compose, kubernetes, k8s, kubectl, helm, heroku, vercel, netlify, fly.io, terraform, cloud run",
        "staging, production, prod, release, rollout, nginx, hosting, ec2, server",
    ),
    "Write Documentation": (
        "readme, docstring, docstrings, documentation, api docs, write docs, jsdoc, javadoc, sphinx, mkdocs",
        "doc, docs, document, documenting, comments, tutorial, guide, changelog, wiki, usage examples",
    ),
    "Perform Data Analysis": (
        "analyze, analyse, analyzing, analysing, analysis, plot, plots, plotting, dataset, datasets, data set, "
        "pandas, jupyter, statistics, statistical, correlation, visualize, visualise, visualization, histogram",
        "csv, chart, charts, graph, graphs, metrics, trend, trends, aggregate, average, median, distribution, "
        "excel, spreadsheet, dataframe",
    ),
    "Create Programs from Scratch": (
        "from scratch, new project, new app, new application, new repo, new repository, boilerplate, scaffold, "
        "greenfield",
        "prototype, starter, mvp",
    ),
    "Fix Bugs": (
        "bug, bugs, buggy, traceback, stack trace, stacktrace, crash, crashes, crashing, crashed, doesn't work, "
        "does not work, not working, isn't working, stopped working, off-by-one, off by one, segfault, broken",
        "error, errors, fix, fixes, fixed, fixing, wrong, incorrect, fails, failing, failure, failed, issue, "
        "issues, exception, exceptions, regression, problem, unexpected",
    ),
    "Implement Features": (
        "implement, implementing, implementation, feature, features, new feature, add support",
        "add, adds, adding, added, support, supports, enable, allow, option, flag, endpoint, extend, integrate, "
        "integration, export, toggle",
    ),
}
TASK_PRIORITY = tuple(TASK_KEYWORDS)
# "<verb> a/an <up to 3 words> <thing>" counts as a strong from-scratch keyword
SCRATCH_VERBS = (
    "create a, create an, build a, build an, build me a, write a, write an, write me a, make a, make an, make me a, "
    "develop a, develop an, scaffold a, generate a, start a, set up a new, code a"
)
SCRATCH_TAIL = re.compile(
    r" (?:[\w+#.-]+ ){0,3}?(?:app|apps|application|program|script|tool|cli|service|website|site|web app|api|bot|"
    r"game|scraper|crawler|server|project|library|package|extension|plugin|backend|frontend|microservice)\b"
)

CLUSTER_NONE = "None of the above"
# cluster -> keywords; ties go to the first cluster
CLUSTER_KEYWORDS: dict[str, str] = {
    "Fix python issues": (
        "python, python3, pip, pip3, pytest, django, flask, fastapi, pydantic, numpy, pandas, venv, virtualenv, "
        "conda, poetry, pyproject, requirements.txt, importerror, modulenotfounderror, typeerror, attributeerror, "
        "keyerror, valueerror, indentationerror, jupyter"
    ),
    "Fix Java issues": (
        "java, maven, mvn, gradle, gradlew, spring, spring boot, jvm, jdk, junit, nullpointerexception, pom.xml, "
        "classpath"
    ),
    "Fix continuous integration issues": (
        "ci, github actions, github action, workflow, workflows, pipeline, pipelines, jenkins, circleci, travis, "
        "gitlab ci, gitlab-ci, continuous integration, buildkite"
    ),
    "Testing code": (
        "test, tests, testing, unit test, unit tests, pytest, jest, vitest, mocha, junit, coverage, test case, "
        "test cases, tdd, e2e, playwright, cypress"
    ),
    "Write code from scratch": "from scratch, new project, new app, new application, boilerplate, scaffold",
    "Web browsing and research": (
        "browse, browsing, search the web, search online, web search, google, look up, lookup, research, "
        "researching, find out, stack overflow, stackoverflow, documentation for, docs for"
    ),
    "Administrative tasks": (
        "deploy, deploys, deployed, deploying, deployment, config, configure, configuration, configuring, "
        "permission, permissions, chmod, chown, sudo, setup, set up, install, installing, installation, docker, "
        "dockerfile, kubernetes, environment variable, environment variables, env var, env vars, ssh, dns, nginx, "
        "cron, crontab, credentials, api key, secrets, ssl, certificate, firewall"
    ),
}
CLUSTER_PRIORITY = (*CLUSTER_KEYWORDS, "Fix underspecified issues")
CORRECTION_PHRASES = (
    "no i meant, i meant, what i meant, what i want is, not what i asked, not what i wanted, "
    "not what i meant, not what i requested, not what i had in mind, that's not what, that is not what, i said, "
    "wrong file, wrong function, wrong place, wrong branch, wrong thing, wrong one, wrong repo, i didn't ask, "
    "i did not ask, you misunderstood, misunderstood, misunderstanding, that's not it, that is not it, "
    "i was asking, i asked you to, i asked for, you got it wrong"
)
INSTRUCTION_PHRASES = (
    "i told you, i already told you, i already said, i already asked, as i said, as i told you, as i mentioned, "
    "like i said, like i told you, i said not to, i said don't, i asked you not to, please don't, please do not, "
    "stop doing, stop changing, stop adding, stop editing, stop touching, stop deleting, stop creating, "
    "stop running, stop pushing, stop committing, how many times, you forgot what i said, you ignored, "
    "you didn't listen, i repeat, once again"
)
ANALYSIS_PHRASES = (
    "there is already, there's already, there are already, already exists, already exist, already implemented, "
    "already defined, already written, we already have, you already have, use the existing, using the existing, "
    "look at the existing, check the existing, reinvent, reinventing, reinvented, duplicate code, duplicated code, "
    "read the code first, look at the code first, didn't look at, did not look at"
)
UNFINISHED_PHRASES = (
    "not finished, isn't finished, is not finished, unfinished, incomplete, you didn't finish, didn't finish, "
    "did not finish, still missing, half done, half-done, not complete, isn't complete, not completed, "
    "left a todo, left todos, still a placeholder, just a placeholder, still a stub, just a stub, only a stub, "
    "not implemented, didn't implement, did not implement, you stopped"
)
SCOPE_PHRASES = (
    "i didn't ask for, i did not ask for, didn't ask you to, did not ask you to, i never asked, nobody asked, "
    "no one asked, not asked for, why did you add, why did you create, why did you change, unnecessary change, "
    "unnecessary changes, unnecessary files, remove the extra, revert the extra, too many changes, out of scope, "
    "only asked, just asked, unrelated changes, unrelated files, don't need that, don't need this"
)
FRUSTRATION_PHRASES = (
    "fuck, fucking, fucked, wtf, shit, shitty, damn, dammit, goddamn, crap, crappy, bullshit, stupid, idiot, "
    "idiotic, useless, garbage, ridiculous, pathetic, what the hell, the hell, seriously, ugh, argh, come on, "
    "why is this so hard, for god's sake, are you kidding, you're kidding, how many times, waste of time, "
    "i give up, fed up, sick of, so frustrating, frustrating, annoying"
)
CAPS_EXCEPTIONS = _words(
    "NOT DO DON'T NEVER ONLY MUST API CSV JSON HTTP HTTPS URL SQL README TODO FIXME XXX CLI CI CD PR AWS GCP "
    "YAML YML HTML CSS XML JWT SSH DNS UI UX ENV PATH OK CPU GPU RAM SDK IDE NPM PIP GIT MVP EOF UTF ASCII "
    "PDF PNG SVG JPG CRUD REST TCP UDP IP LLM AI ID UUID DB JS TS IO OS VM QA ML PHP AST URI RPC SSL TLS "
    "SELECT FROM WHERE JOIN AND OR INSERT INTO UPDATE DELETE CREATE TABLE VALUES SET NULL ORDER BY GROUP LIMIT "
    "ERROR ERR WARN WARNING INFO DEBUG FATAL FAILED FAIL PASS PASSED GET POST PUT PATCH HEAD"
)
DOC_SUFFIXES = (".md", ".rst", ".txt", ".adoc")

# ---------------------------------------------------------------------------------------------------------------
# matchers (built once at import)


def _phrase_entries() -> dict[str, list[tuple[str, str, str, int]]]:
    """phrase -> [(table, key, label, weight)]: its own entries, then those of the shorter phrases it starts with."""
    own: dict[str, list[tuple[str, str, str, int]]] = {}

    def add(table: str, key: str, phrases: str, weight: int = 1) -> None:
        for p in (p.strip() for p in phrases.split(",")):
            for variant in dict.fromkeys((p, p.replace("'", ""))):
                assert variant[0].isalnum() and variant[-1].isalnum(), variant  # \b must hold at both ends
                own.setdefault(variant, []).append((table, key, p, weight))

    for category, (strong, weak) in TASK_KEYWORDS.items():
        add("task", category, strong, STRONG)
        add("task", category, weak, WEAK)
    for cluster, words in CLUSTER_KEYWORDS.items():
        add("cluster", cluster, words)
    add("scratch", "", SCRATCH_VERBS)
    add("correction", "", CORRECTION_PHRASES)
    add("instruction", "", INSTRUCTION_PHRASES)
    add("analysis", "", ANALYSIS_PHRASES)
    add("unfinished", "", UNFINISHED_PHRASES)
    add("scope", "", SCOPE_PHRASES)
    add("frustration", "", FRUSTRATION_PHRASES)
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


_ENTRIES = _phrase_entries()
# the longest phrase at each word start; a lookahead, so that matches may overlap ("gitlab-ci" also holds "ci")
_PHRASES = re.compile(r"\b(?=(" + _alternation(list(_ENTRIES)) + r")\b)")
_SLASHED = re.compile(r"(?<![^ \n\t])[^ \n\t]*/[^ \n\t]*")  # a whitespace-separated token with a /
_EXTENSIONS = re.compile(r"\.(?<=\w\.)(py|ipynb|java|jar)\b")  # after a word character
_PY, _JAVA = "Fix python issues", "Fix Java issues"
_EXT_CLUSTER = {"py": _PY, "ipynb": _PY, "java": _JAVA, "jar": _JAVA}
_AGAIN = re.compile(r"(?:^|[.!?]\s+)again,", re.M)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")
_IDENTIFIER = re.compile(r"\w\(|\b[a-z]+_[a-z0-9_]+\b|\b[a-z]+[A-Z]\w*|\w\.[a-z]{1,5}\b|/")
_ERROR_WORDS = ("error", "exception", "traceback", "fail")
_CAPS_WORD = re.compile(r"(?<![\w'])[A-Z][A-Z']*[A-Z](?![\w'])")
_DONT_GIT = re.compile(  # a literal first, for a fast scan; the word start is checked where used
    r"(?:don't|dont|do not|never)\s+(?:(?!forget\b)\w+\s+){0,2}?"
    r"(push|commit|merge|(?:create|open|make|submit|raise)\s+(?:a\s+|an\s+|the\s+|any\s+)?(?:pr|prs|pull requests?))\b"
    r"(?:\s+(?:\w+\s+)?(?:to|into|on)\s+(?:the\s+)?([\w./-]+))?"
)
_GENERIC_TARGETS = _words("it this that anything github origin remote upstream repo repository branch")
_PR_COMMAND = re.compile(r"\bgh\s+pr\s+create\b|\bhub\s+pull-request\b|/pulls\b")
_GH_MERGE = re.compile(r"\bgh\s+pr\s+merge\b")
_STEP_NAMES = frozenset({"run", "run_ipython", "edit", "write", "read", "push", "send_pr"})
_SHELL_WRITE = re.compile(r"\bcat\s*>|\bcat\s+<<|\btee\s|\bsed\s+(?:-[a-z]*\s+)*-i|\bperl\s+-pi")
_READ_PROGRAMS = _words("cat ls ll tree grep egrep fgrep rg ag ack find fd head tail less more wc stat awk")
_GIT_READS = _words("grep log show diff status blame ls-files")
_IPY_READ = re.compile(r"\.read\(|\bos\.listdir\(|\bglob\(|\bos\.walk\(|\bprint\(open\(")
_TODO = re.compile(
    r"(?:#|//|/\*|<!--|--|\*|;)\s*(?:TODO|FIXME|XXX)\b|\braise\s+NotImplementedError\b|"
    r"\bpass\s*#\s*(?i:stub|todo|placeholder|implement)|\b(?:todo|unimplemented)!\(|"
    r"throw\s+new\s+Error\(\s*['\"`](?i:not\s+implemented)"
)
_TODO_HINTS = re.compile(r"TODO|FIXME|XXX|NotImplementedError|pass|!\(|Error\(")  # a fast first look for _TODO
_ELLIPSIS_BODY = re.compile(r"^[ \t]*(?:async\s+)?def\s[^\n]*:[ \t]*(?:\n[ \t]*)?\.\.\.[ \t]*$", re.M)
_WORD = re.compile(r"[a-z0-9]+")
_IMPORTED = r"(?:\bimport\s+|\bfrom\s+|-m\s+|require\(\s*['\"][^'\"]*?)(?:[\w/.]*[./])?{}\b"  # stem of an edited file
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


# ---------------------------------------------------------------------------------------------------------------
# VADER and text helpers


@cache  # one analyzer, built on first use (threads racing to build it may each build one; one is kept)
def _analyzer():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


@lru_cache(maxsize=65_536)  # repeated messages ("continue", "thanks") are common
def _compound(message: str) -> float:
    return _analyzer().polarity_scores(message)["compound"]


def compound(message: str) -> float:
    """VADER compound of one message, read as its first and last ``VADER_CHARS`` characters."""
    if len(message) > 2 * VADER_CHARS:
        message = message[:VADER_CHARS] + " ... " + message[-VADER_CHARS:]
    return _compound(message)


def cap(text: str) -> str:
    """``text``, or its first ``HEAD_CHARS`` and last ``TAIL_CHARS`` characters when longer than both."""
    return text if len(text) <= HEAD_CHARS + TAIL_CHARS else text[:HEAD_CHARS] + " ... " + text[-TAIL_CHARS:]


def quote(text: str, limit: int = QUOTE_CHARS, mark: str = '"') -> str:
    """``text`` on one line, cut to ``limit`` characters, between ``mark``s."""
    text = " ".join(text[: limit * 4].split())
    return mark + (text if len(text) <= limit else text[: limit - 1] + "…") + mark


def _cmd(text: str) -> str:
    return quote(text, 60, "`")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}es" if word.endswith(("ch", "sh", "s", "x")) else f"{n} {word}s"


def task_description(first_message: str) -> str:
    """The first sentence of the first user message, at most 200 characters."""
    head = first_message[:2000].strip()
    m = _SENTENCE_END.search(head)
    sentence = " ".join((head[: m.start()] if m else head).split())
    return sentence if len(sentence) <= 200 else sentence[:199] + "…"


# ---------------------------------------------------------------------------------------------------------------
# what the rules read: one view per transcript, computed once and shared by the rules


def _is_path(token: str) -> bool:
    token = token.strip("()[]{}<>\"'`,;:!?")
    return "." in token or token.count("/") > 1 or token.startswith("/")


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
    """What one shell line does, lexed once per distinct line (``ls``, ``git status`` and ``pytest`` recur in
    nearly every session; ``event_features`` parses each distinct command once for the same reason)."""
    argvs = tuple(tuple(argv) for argv in program_argvs(line))
    return _LineFacts(argvs, tuple(git_subcommands(line)), is_test_command(line))


def _is_read(argv: list[str]) -> bool:
    """Whether a program's argv reads files: cat, ls, grep, ... or ``sed -n``."""
    program = program_name(argv)
    return program in _READ_PROGRAMS or (program == "sed" and argv[1:2] == ["-n"])


class _Step:
    """One step as the rules see it: its (capped) text and written code, and what it does (worked out when asked)."""

    def __init__(self, i: int, step: AgentStep) -> None:
        self.i = i
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
        return f"step {self.i + 1} ({self.name} {_cmd(self.text) if self.text else ''})".replace(" )", ")")


class _Hit(NamedTuple):
    k: int  # the message
    start: int  # where the (longest) phrase found there starts and ends
    end: int
    key: str  # task type or cluster, "" in the other tables
    label: str  # the phrase as listed
    weight: int


class _View:
    def __init__(self, t: SessionTranscript) -> None:
        self.t = t
        originals = [m for m in (t.user_messages or ()) if isinstance(m, str) and m.strip()]
        self.users = [cap(m) for m in originals]
        self.n_capped = sum(1 for a, b in zip(originals, self.users, strict=True) if a is not b)
        self.lows = [m.lower().replace("’", "'") for m in self.users]
        self.joined = "\n".join(self.lows)

    @cached_property
    def hits(self) -> dict[str, list[_Hit]]:
        """Every phrase of every table in the user's messages, by table."""
        out: dict[str, list[_Hit]] = {}
        for k, low in enumerate(self.lows):
            for m in _PHRASES.finditer(low):
                for table, key, label, weight in _ENTRIES[m.group(1)]:
                    out.setdefault(table, []).append(_Hit(k, m.start(1), m.end(1), key, label, weight))
        return out

    def found(self, table: str, later: bool = True) -> list[_Hit]:
        """Hits of one table, in later messages only unless told."""
        return [h for h in self.hits.get(table, []) if h.k > 0 or not later]

    def snippet(self, k: int, start: int, end: int) -> str:
        """A quoted window of message ``k`` around [start, end), from the original text when it lines up."""
        text = self.users[k] if len(self.users[k]) == len(self.lows[k]) else self.lows[k]
        if len(text) <= QUOTE_CHARS:
            return quote(text)
        lo = max(0, min(start - 30, end - QUOTE_CHARS + 10))
        piece = quote(text[lo : lo + QUOTE_CHARS - 2], QUOTE_CHARS - 2)
        return piece if lo == 0 else '"…' + piece[1:]

    def says(self, h: _Hit) -> str:
        return f'message {h.k + 1} says {self.snippet(h.k, h.start, h.end)} ("{h.label}")'

    @cached_property
    def path_spans(self) -> list[list[tuple[int, int]]]:
        """Per message, the spans of its path-like tokens (see the module docstring)."""
        return [
            [m.span() for m in _SLASHED.finditer(low) if _is_path(m.group())] if "/" in low else [] for low in self.lows
        ]

    def in_path(self, h: _Hit) -> bool:
        return any(lo <= h.start < hi for lo, hi in self.path_spans[h.k])

    @cached_property
    def steps(self) -> list[_Step]:
        """The steps some rule reads (by name, or failing), with their index in the transcript."""
        return [
            _Step(i, s)
            for i, s in enumerate(self.t.steps or ())
            if isinstance(s, AgentStep)
            and (s.name in _STEP_NAMES or s.error or (s.exit_code is not None and s.exit_code != 0))
        ]

    @cached_property
    def compounds(self) -> list[float]:
        return [compound(m) for m in self.users]

    @cached_property
    def task(self) -> tuple[str, str]:
        return _task_type(self)

    @cached_property
    def user_words(self) -> frozenset[str]:
        return frozenset(w for w in _WORD.findall(self.joined) if len(w) >= 3)


_LOCAL = threading.local()


def _view(t: SessionTranscript) -> _View:
    """The view of ``t``; the rules of one session share it (a one-entry cache by identity, per thread)."""
    last = getattr(_LOCAL, "last", None)
    if last is None or last[0] is not t:
        last = _LOCAL.last = (t, _View(t))
    return last[1]


# ---------------------------------------------------------------------------------------------------------------
# rules


def rule(name: str) -> Callable[[Rule], Rule]:
    """Register a rule under ``name``; a session without user messages answers ``NO_USER`` before it runs."""

    def register(fn: Rule) -> Rule:
        @wraps(fn)
        def guarded(t: SessionTranscript, feature: RubricFeature) -> Answer:
            return fn(t, feature) if _view(t).users else NO_USER

        RULES[name] = guarded
        return guarded

    return register


def _option(feature: RubricFeature, wanted: str) -> str:
    """``wanted`` as the rubric spells it (case-insensitive), or as is when the rubric has no such option."""
    return next((o for o in feature.options if o.lower() == wanted.lower()), wanted)


@rule("vader_sentiment")
def vader_sentiment(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    scores = v.compounds
    mean = sum(scores) / len(scores)
    value = _option(feature, "Positive" if mean >= POSITIVE_AT else "Negative" if mean <= NEGATIVE_AT else "Neutral")
    why = f"mean VADER compound {mean:+.2f} over {_plural(len(scores), 'message')}"
    if not any(scores):
        return Answer(value, why + ": no sentiment words")
    hi = max(range(len(scores)), key=scores.__getitem__)
    lo = min(range(len(scores)), key=scores.__getitem__)
    parts = [f"most positive {scores[hi]:+.2f}: {quote(v.users[hi], 60)}"] if scores[hi] > 0 else []
    parts += [f"most negative {scores[lo]:+.2f}: {quote(v.users[lo], 60)}"] if scores[lo] < 0 else []
    return Answer(value, why + "; " + "; ".join(parts))


def _scratch_phrases(v: _View) -> list[tuple[int, str]]:
    """(message, phrase) of every "create a ... app"-like phrase."""
    matches = ((h, SCRATCH_TAIL.match(v.lows[h.k], h.end)) for h in v.found("scratch", later=False))
    return [(h.k, v.lows[h.k][h.start : m.end()]) for h, m in matches if m]


def _task_type(v: _View) -> tuple[str, str]:
    """(task type, explanation) by ``TASK_KEYWORDS``; see the module docstring."""
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
def task_type_keywords(t: SessionTranscript, feature: RubricFeature) -> Answer:
    value, why = _view(t).task
    return Answer(_option(feature, value), why)


@rule("development_cluster_keywords")
def development_cluster_keywords(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    found = [(h.key, h.label) for h in v.found("cluster", later=False) if not v.in_path(h)]
    found += [(_EXT_CLUSTER[m.group(1)], "." + m.group(1)) for m in _EXTENSIONS.finditer(v.joined)]
    if "http://" in v.joined or "https://" in v.joined:
        found.append(("Web browsing and research", "a URL"))
    found += [("Write code from scratch", phrase) for _k, phrase in _scratch_phrases(v)]
    first = v.users[0]
    if len(first.split()) <= 12 and not _IDENTIFIER.search(first) and not any(w in v.lows[0] for w in _ERROR_WORDS):
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


def _said(v: _View, table: str) -> str | None:
    """'message k says "..." ("phrase")' for the first phrase of ``table`` in a later message, if any."""
    hits = v.found(table)
    more = f" (+{_plural(len(hits) - 1, 'more match')})" if len(hits) > 1 else ""
    return v.says(hits[0]) + more if hits else None


@rule("user_correction")
def user_correction(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    said = _said(v, "correction")
    if said:
        return Answer(YES, said)
    if len(v.users) == 1:
        return Answer(NO, "no later message")
    return Answer(NO, f"no correction phrase in {_plural(len(v.users) - 1, 'later message')}")


def _does(s: _Step, verb: str) -> bool:
    """Whether step ``s`` does ``verb``: push, commit, merge or pr (open a pull request)."""
    if (s.name, verb) in (("push", "push"), ("send_pr", "pr")):
        return True
    if not s.run:
        return False
    if verb == "pr":
        return _PR_COMMAND.search(s.text) is not None
    return verb in s.git or (verb == "merge" and _GH_MERGE.search(s.text) is not None)


def _git_violation(v: _View) -> str | None:
    """A "don't push/commit/merge/open a PR (to <branch>)" in a user message, and a step doing it."""
    for k, low in enumerate(v.lows):
        for m in _DONT_GIT.finditer(low):
            if m.start() > 0 and (low[m.start() - 1].isalnum() or low[m.start() - 1] == "_"):
                continue
            verb = m.group(1).split()[0]
            verb = verb if verb in ("push", "commit", "merge") else "pr"
            target = (m.group(2) or "").strip(".,;:!?")
            target = "" if target in _GENERIC_TARGETS else target
            for s in v.steps:
                if _does(s, verb) and (not target or re.search(rf"(?<![\w/.-]){re.escape(target)}(?![\w/-])", s.text)):
                    action = _cmd(s.text) if s.text else f"a {s.name} step"
                    return f"message {k + 1} says {v.snippet(k, m.start(), m.end())} and step {s.i + 1} ran {action}"
    return None


@rule("instruction_repeated")
def instruction_repeated(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    said = _said(v, "instruction")
    if said:
        return Answer(YES, said)
    for k in range(1, len(v.lows)):
        m = _AGAIN.search(v.lows[k]) if "again," in v.lows[k] else None
        if m:
            return Answer(YES, f'message {k + 1} says {v.snippet(k, m.start(), m.end())} ("again,")')
    broke = _git_violation(v)
    if broke:
        return Answer(YES, broke)
    return Answer(NO, "no repeated instruction, no don't-push/commit/PR instruction broken by a git command")


@rule("edits_before_reading")
def edits_before_reading(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
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


def _runs_edited(s: _Step, edited: list[str]) -> bool:
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
def edits_without_tests(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    edits = [s for s in v.steps if s.edit]
    if not edits:
        return Answer(NO, "no file edits")
    lines = sum(len(s.written.splitlines()) for s in edits if s.written)
    if len(edits) == 1 and (edits[0].written is None or lines < 5):
        return Answer(
            NO, f"trivial: one edit ({'unknown size' if edits[0].written is None else _plural(lines, 'line')})"
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
    files = f"{_plural(len(paths), 'file')}: {shown}" if paths else "from the shell"
    written = f"{_plural(lines, 'line')} written" if any(s.written for s in edits) else "written code not known"
    what = f"{_plural(len(edits), 'edit')} ({files}), {written}"
    return Answer(YES, what + "; no test run or run of an edited file after the first edit")


@rule("repeated_failing_command")
def repeated_failing_command(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
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
        return Answer(YES, f"{_cmd(repeated[0])} failed {repeated[1]} times{code} with no edit in between")
    last = next((s for s in reversed(v.steps) if s.test and (s.exit_code is not None or s.failed)), None)
    if last is not None and last.failed:
        code = f"exit {last.exit_code}" if last.exit_code is not None else "error"
        return Answer(YES, f"the last test run {last.label()} failed ({code}) and nothing followed it")
    tail = f"; last test run passed: {last.label()}" if last else "; no test run"
    if not n_failed:
        return Answer(NO, "no failing command" + tail)
    return Answer(NO, f"{_plural(n_failed, 'failing command')}, none repeated without an edit between{tail}")


def _todo_line(s: _Step) -> str | None:
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
def todo_left_or_unfinished(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    for s in v.steps:
        line = _todo_line(s) if s.edit else None
        if line:
            return Answer(YES, f"{s.label()} wrote {quote(line, 60)}")
    said = _said(v, "unfinished")
    if said:
        return Answer(YES, said)
    n_written = sum(1 for s in v.steps if s.edit and s.written)
    code = f"no TODO/FIXME/stub in {_plural(n_written, 'written block')}" if n_written else "no written code to check"
    return Answer(NO, f"{code}; no 'unfinished' message")


@rule("unrequested_additions")
def unrequested_additions(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    said = _said(v, "scope")
    if said:
        return Answer(YES, said)
    task, _ = v.task
    if task not in ("Fix Bugs", "Fix Failing Continuous Integration", "Fix Merge Conflicts"):
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
    return Answer(NO, f"no objection to extra changes; {_plural(len(unrelated), 'unrelated new file')}")


@rule("loop_behavior")
def loop_behavior(t: SessionTranscript, feature: RubricFeature) -> Answer:
    counts: dict[tuple[str, str], int] = {}
    for s in _view(t).steps:
        if s.failed:
            key = (s.name, " ".join(s.text.split()))
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return Answer(NO, "no failing action")
    (name, text), n = max(counts.items(), key=lambda kv: kv[1])
    if n >= 3:
        return Answer(YES, f"the same failing {name} {_cmd(text) if text else ''} ran {n} times".replace("  ", " "))
    return Answer(NO, f"no failing action repeated 3 times (most: {n})")


@rule("frustration")
def frustration(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    hits = v.found("frustration", later=False)
    if hits:
        return Answer(YES, v.says(hits[0]))
    for k, m in enumerate(v.users):
        for mark in ("!!!", "?!", "!?"):
            j = m.find(mark)
            if j != -1:
                return Answer(YES, f'message {k + 1} says {v.snippet(k, j, j + len(mark))} ("{mark}")')
        caps = [w for w in _CAPS_WORD.findall(m) if w not in CAPS_EXCEPTIONS]
        if len(caps) >= 3:
            return Answer(YES, f"message {k + 1} shouts {' '.join(caps[:5])}: {quote(m, 60)}")
    k = min(range(len(v.users)), key=v.compounds.__getitem__)
    if v.compounds[k] <= FRUSTRATED_AT:
        return Answer(YES, f"message {k + 1} has VADER compound {v.compounds[k]:+.2f}: {quote(v.users[k], 60)}")
    return Answer(NO, f"no irritation words, shouting or strongly negative message (lowest {v.compounds[k]:+.2f})")


# ---------------------------------------------------------------------------------------------------------------
# the annotator


def check_rules(rubric: Rubric, rules: Mapping[str, Rule]) -> None:
    """Raise ``UnknownRuleError`` if a rubric feature names a rule ``rules`` lacks."""
    for i, f in enumerate(rubric.features):
        if f.heuristic not in rules:
            raise UnknownRuleError(
                f"rubric {rubric.version!r} feature #{i + 1} {f.name!r} names heuristic rule {f.heuristic!r}, "
                f"which the heuristic annotator does not have; known rules: {', '.join(sorted(rules))}"
            )


class HeuristicAnnotator:
    """Answers every rubric feature with the rule its ``heuristic`` key names (see the module docstring).

    ``rules`` adds or replaces rules (name -> rule) on top of ``RULES``. Deterministic, offline, no state.
    """

    name = "heuristic"

    def __init__(self, rubric: Rubric | None = None, rules: Mapping[str, Rule] | None = None) -> None:
        self.rules: dict[str, Rule] = {**RULES, **(rules or {})}
        self.rubric = rubric or load_rubric()
        check_rules(self.rubric, self.rules)

    def prompt_version(self, rubric: Rubric) -> str:
        return f"heuristic-{HEURISTIC_VERSION}-{rubric.version}-{rubric.digest}"

    def annotate(self, transcripts: list[SessionTranscript], rubric: Rubric | None = None) -> list[Annotation]:
        rubric = rubric or self.rubric
        if rubric is not self.rubric:
            check_rules(rubric, self.rules)
        return [self._one(t, rubric, self.prompt_version(rubric)) for t in transcripts]

    def _one(self, t: SessionTranscript, rubric: Rubric, version: str) -> Annotation:
        sid = getattr(t, "session_id", None)
        sid = sid if isinstance(sid, str) else str(sid)
        try:
            v = _view(t)
        except Exception as exc:  # a malformed transcript: say so, never raise
            return Annotation(sid, self.name, version, "", {}, status="failed", error=f"transcript: {exc!r}")
        if not v.users:
            answers = {f.name: NO_USER for f in rubric.features}
            return Annotation(
                sid, self.name, version, "", answers, status="skipped", notes={"skipped": "no user message"}
            )
        answers, errors = {}, []
        for f in rubric.features:
            try:
                answers[f.name] = self.rules[f.heuristic](t, f)
            except Exception as exc:  # one broken rule fails the session, not the run
                errors.append(f"{f.name} ({f.heuristic}): {exc!r}")
        capped = v.n_capped + sum(s.capped for s in v.steps)
        notes = {}
        if capped:
            what = f"{_plural(capped, 'text')} longer than {HEAD_CHARS + TAIL_CHARS}"
            notes["truncated"] = f"read the first {HEAD_CHARS} and last {TAIL_CHARS} characters of {what}"
        status = "failed" if errors else "truncated" if capped else "ok"
        error = "; ".join(errors) or None
        description = task_description(v.users[0])
        return Annotation(sid, self.name, version, description, answers, status=status, error=error, notes=notes)
