"""The offline annotator: deterministic keyword, regex and VADER rules, one per rubric ``heuristic`` name.

Why: every session must get rubric answers without a network or an LLM, reproducibly (same transcript, same
answer), fast enough for a whole export, and each answer must say why: its explanation cites the evidence
(the message quoted, the command repeated, the count).

Each rubric feature names a rule in ``RULES``; ``HeuristicAnnotator`` checks the names when it is built and
raises ``UnknownRuleError`` naming the rubric entry and the known rules. A new rule is a function
``(SessionTranscript, RubricFeature) -> Answer`` registered with ``@rule("name")`` and a row in the table below.

How the rules read a session
----------------------------
- Caps: a user message, step text or written code longer than 40 000 characters is read as its first and last
  20 000 (``HEAD_CHARS``/``TAIL_CHARS``); VADER reads each message's first and last 1 000 (``VADER_CHARS``), as
  its cost grows faster than the text. A session with a capped text gets status ``truncated`` and a note.
- Words and phrases match case-insensitively on whole words, curly apostrophes read as ``'``, and every phrase
  with an apostrophe also matches without it (``didn't``/``didnt``). The lists are the constants below the table.
- "Later messages" are the user's messages after the first: the first is the request, reactions come later.
- Steps: an *edit* is an ``edit``/``write`` step or a ``run`` writing a file from the shell (``cat >``, ``cat <<``,
  ``tee``, ``sed -i``); a *read* is a ``read`` step or a ``run`` of cat, ls, tree, grep, rg, ag, find, fd, head,
  tail, less, wc, awk, ``sed -n``, git grep/log/show/diff/status/blame/ls-files; a *test run* is a ``run`` of
  pytest, python -m pytest/unittest, npm/yarn/pnpm/bun test, jest, vitest, mocha, go test, cargo test, mvn/gradle
  test, make test/check, tox, nox, phpunit, rspec, ctest, dotnet test, or ``python <...test...>.py``; a step
  *fails* when its exit code is non-zero or its observation is an error. A transcript does not interleave steps
  with user messages, so a rule needing their order (instruction, then violation) looks at the whole session.
- No user message (or only blank ones): every feature gets value ``""`` and explanation "no user message", and the
  session status ``skipped``. Non-English text is read as is: VADER gives ~0 (Neutral), keywords rarely match, so
  the no-match fallbacks below apply, each saying so.

Rules (rule → signal → answer)
------------------------------
vader_sentiment
    VADER compound of each user message (vaderSentiment 3.3.2's lexicon and rules, re-implemented here without
    its per-word re-lowercasing; the tests check it equals ``polarity_scores`` on a corpus), averaged.
    → Positive if mean ≥ +0.05, Negative if ≤ −0.05, else Neutral; cites the mean and the most positive and most
    negative message.
task_type_keywords
    Keywords of the paper's 8 task types (``TASK_KEYWORDS``): a strong keyword scores 3, a weak one 1, each once.
    The first message decides; later messages only when it matches nothing. Tokens that look like paths (a ``/``
    with a ``.`` or a second ``/``, or a leading ``/``; URLs) are skipped, so ``.github/workflows/ci.yml`` is not
    CI. "create/build/write/make/... a <up to 3 words> app/script/service/tool/..." is a strong from-scratch
    keyword. → the top-scoring type; ties go to the first in ``TASK_PRIORITY`` (specific before generic: merge
    conflicts, CI, deployments, documentation, data analysis, from scratch, bugs, features); no keyword →
    "Implement Features", "no keyword matched".
development_cluster_keywords
    Keywords of the 9 development clusters over all user messages (``CLUSTER_KEYWORDS``, paths skipped as above;
    also ``.py``/``.ipynb`` → python, ``.java``/``.jar`` → Java, an http(s) URL → web research, the from-scratch
    phrase above), one point per distinct keyword; "Fix underspecified issues" scores 1 when the first message
    is at most 12 words and names no file, path, function (``name(``, snake_case, camelCase) or error (error,
    exception, traceback, fail). → up to ``max_choices`` clusters with the highest scores (ties:
    ``CLUSTER_PRIORITY``), joined by ``|`` in the rubric's option order; nothing → "None of the above",
    "no keyword matched".
user_correction (misunderstood_intention)
    A later message with a correction phrase (``CORRECTION_PHRASES``: "no I meant", "not what I asked",
    "that's not what", "I said", "wrong file", "I didn't ask", "you misunderstood", ...). → YES citing it, else NO.
instruction_repeated (did_not_follow_instruction)
    A later message repeating an instruction (``INSTRUCTION_PHRASES``: "I told you", "as I said", "please don't",
    "stop doing", "how many times", ...; or one starting a sentence with "again,"), or a "don't/do not/never
    push|commit|merge|create/open a PR" in any user message while the agent runs that command (git push, git
    commit, git merge, gh pr create, hub pull-request, a ``/pulls`` API call, or a ``push``/``send_pr`` step;
    "... to <branch>" then needs the branch named in the command). → YES citing both, else NO.
edits_before_reading (insufficient_analysis)
    The first edit comes before any read step (or there is no read at all), or a later message points at
    existing material (``ANALYSIS_PHRASES``: "there is already", "already exists", "use the existing",
    "reinvent", ...). → YES citing the step or message; a session without edits and such messages → NO.
edits_without_tests (insufficient_testing)
    Edits, and after the first edit no test run and no run of an edited file (its name in the command,
    ``python src/app.py``, or its module imported, ``python -c "from src.app import f"``, ``-m app``,
    ``require('./app')``). Trivial sessions are NO: at most one edit whose written code is under 5 lines or not
    in the transcript (None or ""), or edits to documentation files only (.md, .rst, .txt, .adoc). → YES citing
    the edits and lines written, else NO citing the test run or the reason.
repeated_failing_command (insufficient_debugging)
    The same command (``run``/``run_ipython`` text, whitespace-normalized) failing twice with no edit between,
    or the session's last test run failing. → YES citing the command and the count, else NO.
todo_left_or_unfinished (incomplete_implementation)
    Written code with a commented TODO/FIXME/XXX, ``raise NotImplementedError``, ``pass  # stub|todo|
    placeholder``, a ``def ...:`` whose body is ``...`` (not in .pyi files), ``todo!()``/``unimplemented!()`` or
    ``throw new Error("not implemented")``; or a later message saying it is unfinished (``UNFINISHED_PHRASES``:
    "not finished", "incomplete", "you didn't finish", "still missing", ...). → YES citing the line, else NO.
unrequested_additions (scope_creep)
    A later message objecting (``SCOPE_PHRASES``: "I didn't ask for", "why did you add", "unnecessary changes",
    "remove the extra", "too many changes", ...); or, conservatively, the task (``task_type_keywords``) is a fix
    (bugs, CI, merge conflicts) and the agent wrote two or more new files (``write`` steps to paths not read or
    edited before; test files excepted) whose names share no word with the user's messages. → YES citing it.
loop_behavior (not in the default rubric)
    The same failing action (same step name and text, failing) three or more times in the session (the
    critic-rubrics definition). → YES citing the action and count, else NO.
frustration (not in the default rubric)
    Any user message with irritation: profanity or irritation words/phrases (``FRUSTRATION_PHRASES``:
    "seriously", "ugh", "come on", "why is this so hard", "wtf", ...), "!!!" or "?!", three or more ALL-CAPS
    words in one message (2+ letters; ``CAPS_EXCEPTIONS`` excepted: acronyms, SQL and log words, and the emphasis
    of an instruction, NOT/DO/DON'T/NEVER/ONLY/MUST), or a VADER compound ≤ −0.5.
    → YES citing the message, else NO.

``task_description`` is the first user message's first sentence, at most 200 characters. ``prompt_version`` is
``heuristic-<HEURISTIC_VERSION>-<rubric version>-<rubric digest>``: bump ``HEURISTIC_VERSION`` when a rule changes.
"""

from __future__ import annotations

import math
import re
import string
import threading
from collections.abc import Callable, Mapping
from functools import cached_property, lru_cache

from .annotation import AgentStep, Annotation, Answer, SessionTranscript
from .rubric import Rubric, RubricError, RubricFeature, load_rubric

HEURISTIC_VERSION = "1"

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

TASK_PRIORITY = (
    "Fix Merge Conflicts",
    "Fix Failing Continuous Integration",
    "Perform Deployments",
    "Write Documentation",
    "Perform Data Analysis",
    "Create Programs from Scratch",
    "Fix Bugs",
    "Implement Features",
)
TASK_DEFAULT = "Implement Features"
STRONG, WEAK = 3, 1
# task type -> (strong keywords, weak keywords)
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
# "<verb> a/an <up to 3 words> <thing>" counts as a strong from-scratch keyword
SCRATCH_VERBS = (
    "create a, create an, build a, build an, build me a, write a, write an, write me a, make a, make an, make me a, "
    "develop a, develop an, scaffold a, generate a, start a, set up a new, code a"
)
SCRATCH_TAIL = re.compile(
    r" (?:[\w+#.-]+ ){0,3}?(?:app|apps|application|program|script|tool|cli|service|website|site|web app|api|bot|"
    r"game|scraper|crawler|server|project|library|package|extension|plugin|backend|frontend|microservice)\b"
)

CLUSTER_PRIORITY = (
    "Fix python issues",
    "Fix Java issues",
    "Fix continuous integration issues",
    "Testing code",
    "Write code from scratch",
    "Web browsing and research",
    "Administrative tasks",
    "Fix underspecified issues",
)
CLUSTER_NONE = "None of the above"
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
    "Testing code": (
        "test, tests, testing, unit test, unit tests, pytest, jest, vitest, mocha, junit, coverage, test case, "
        "test cases, tdd, e2e, playwright, cypress"
    ),
    "Fix continuous integration issues": (
        "ci, github actions, github action, workflow, workflows, pipeline, pipelines, jenkins, circleci, travis, "
        "gitlab ci, gitlab-ci, continuous integration, buildkite"
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
# compiled matchers (built once at import)


def _split(items: str) -> list[str]:
    return [p.strip() for p in items.split(",") if p.strip()]


def _entries() -> dict[str, list[tuple[str, str, str, int]]]:
    """phrase -> [(table, key, label, weight)], every phrase also carrying the entries of the known phrases it
    starts with (the scan reports the longest phrase at each word: "i didn't ask for" is also "i didn't ask")."""
    own: dict[str, list[tuple[str, str, str, int]]] = {}

    def add(table: str, key: str, phrases: str, weight: int = 1) -> None:
        for p in _split(phrases):
            for variant in {p, p.replace("'", "")}:
                assert variant[0].isalnum() and variant[-1].isalnum(), variant
                own.setdefault(variant, []).append((table, key, p, weight))

    for category, (strong, weak) in TASK_KEYWORDS.items():
        add("task", category, strong, STRONG)
        add("task", category, weak, WEAK)
    for cluster, words in CLUSTER_KEYWORDS.items():
        add("cluster", cluster, words)
    add("scratch", "", SCRATCH_VERBS)
    for table, phrases in (
        ("correction", CORRECTION_PHRASES),
        ("instruction", INSTRUCTION_PHRASES),
        ("analysis", ANALYSIS_PHRASES),
        ("unfinished", UNFINISHED_PHRASES),
        ("scope", SCOPE_PHRASES),
        ("frustration", FRUSTRATION_PHRASES),
    ):
        add(table, "", phrases)
    out: dict[str, list[tuple[str, str, str, int]]] = {}
    for phrase in own:
        words = phrase.split(" ")
        found = []
        for j in range(len(words), 0, -1):
            found.extend(own.get(" ".join(words[:j]), ()))
        out[phrase] = list(dict.fromkeys(found))
    return out


def _trie_pattern(words: list[str]) -> str:
    """A regex alternation of ``words`` as a prefix trie: one branch per first character, so a scan costs about
    the same for 500 phrases as for 5; the greedy optional tails prefer the longest phrase."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        ends = "" in node
        alts = [re.escape(ch) + build(node[ch]) for ch in sorted(node) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 and len(alts[0]) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if ends else body

    return build(trie)


_ENTRIES = _entries()
_PHRASES = re.compile(r"\b(?:" + _trie_pattern(sorted(_ENTRIES)) + r")\b")
_INNER_WORD = re.compile(r"(?<=[^\w])\w")  # word starts inside a match, where an overlapping phrase may begin
_EXTENSIONS = re.compile(r"\.(py|ipynb|java|jar)\b")  # after a word character (checked where used)
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
_GIT_VERB = {
    "push": re.compile(r"\bgit\s+(?:-\S+\s+)*push\b"),
    "commit": re.compile(r"\bgit\s+(?:-\S+\s+)*commit\b"),
    "merge": re.compile(r"\bgit\s+(?:-\S+\s+)*merge\b|\bgh\s+pr\s+merge\b"),
    "pr": re.compile(r"\bgh\s+pr\s+create\b|\bhub\s+pull-request\b|/pulls\b"),
}
_STEP_VERB = {"push": "push", "send_pr": "pr"}
_STEP_NAMES = frozenset({"run", "run_ipython", "edit", "write", "read", *_STEP_VERB})

_EDIT_NAMES = frozenset({"edit", "write"})
_RUN_NAMES = frozenset({"run", "run_ipython"})
_SHELL_WRITE = re.compile(r"\bcat\s*>|\bcat\s+<<|\btee\s|\bsed\s+(?:-[a-z]*\s+)*-i|\bperl\s+-pi")
_READ_WORDS = _words("cat ls ll tree grep egrep fgrep rg ag ack find fd head tail less more wc stat awk")
_GIT_READS = _words("grep log show diff status blame ls-files")
_SEPARATORS = frozenset(";&|\n(")
_SEGMENT = re.compile(r"&&|\|\||[;|\n(]|\$\(")
_TEST_HINTS = re.compile("test|jest|tox|nox|spec|check|mocha|verify")
_IPY_READ = re.compile(r"\.read\(|\bos\.listdir\(|\bglob\(|\bos\.walk\(|\bprint\(open\(")
_TEST_CMD = re.compile(
    r"\b(?:py\.test|pytest|python\d?(?:\.\d+)?\s+-m\s+(?:pytest|unittest)|(?:npm|yarn|pnpm|bun)\s+(?:run\s+)?test|"
    r"jest|vitest|mocha|go\s+test|cargo\s+test|mvnw?\b[^\n;&|]*\b(?:test|verify)|gradlew?\b[^\n;&|]*\b(?:test|check)|"
    r"make\s+(?:test|check)|tox|nox|phpunit|rspec|ctest|dotnet\s+test|deno\s+test|"
    r"python\d?(?:\.\d+)?\s+\S*test\S*\.py)\b"
)
_TODO = re.compile(
    r"(?:#|//|/\*|<!--|--|\*|;)\s*(?:TODO|FIXME|XXX)\b|\braise\s+NotImplementedError\b|"
    r"\bpass\s*#\s*(?i:stub|todo|placeholder|implement)|\b(?:todo|unimplemented)!\(|"
    r"throw\s+new\s+Error\(\s*['\"`](?i:not\s+implemented)"
)
_TODO_HINTS = re.compile(r"TODO|FIXME|XXX|NotImplementedError|pass|!\(|Error\(")
_ELLIPSIS_BODY = re.compile(r"^[ \t]*(?:async\s+)?def\s[^\n]*:[ \t]*(?:\n[ \t]*)?\.\.\.[ \t]*$", re.M)
_WORD = re.compile(r"[a-z0-9]+")
_IMPORTED = r"(?:\bimport\s+|\bfrom\s+|-m\s+|require\(\s*['\"][^'\"]*?)(?:[\w/.]*[./])?{}\b"  # stem of an edited file
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _classify_command(cmd: str) -> tuple[bool, bool]:
    """(reads, tests) of a shell command: a part (split at ``;``, ``&&``, ``||``, ``|``) starting with a read word
    reads; a part that does not read and matches ``_TEST_CMD`` runs tests (``grep pytest`` is no test run)."""
    hinted = _TEST_HINTS.search(cmd) is not None
    reads = tests = False
    for part in _SEGMENT.split(cmd) if not _SEPARATORS.isdisjoint(cmd) else (cmd,):
        words = part.split(None, 3)
        if words and words[0] == "sudo":
            words = words[1:]
        if not words:
            continue
        if (
            words[0] in _READ_WORDS
            or (len(words) > 1 and words[0] == "sed" and words[1] == "-n")
            or (len(words) > 1 and words[0] == "git" and words[1] in _GIT_READS)
        ):
            reads = True
        elif hinted and not tests and _TEST_CMD.search(part):
            tests = True
    return reads, tests


# ---------------------------------------------------------------------------------------------------------------
# VADER


class Vader:
    """VADER's compound score (vaderSentiment 3.3.2), computed the same way with less work per word.

    ``SentimentIntensityAnalyzer.polarity_scores`` lower-cases the whole message again for every sentiment word
    it looks at (quadratic in the words), which made it the bottleneck of this annotator. This class reads the
    library's lexicon and constants and follows its steps one by one (emoji descriptions, punctuation stripping,
    boosters, ALL-CAPS emphasis, negation, "but", idioms, "least", ! and ? emphasis, normalization), lower-casing
    once and skipping the idiom look-ups when no idiom word is near; the tests check it returns exactly
    ``polarity_scores(text)["compound"]`` on several thousand texts.
    """

    def __init__(self) -> None:
        from vaderSentiment import vaderSentiment as vs

        sia = vs.SentimentIntensityAnalyzer()
        self.lexicon: dict[str, float] = sia.lexicon
        self.emojis: dict[str, str] = sia.emojis
        self.emoji_chars = frozenset(k for k in sia.emojis if len(k) == 1)
        self.booster: dict[str, float] = vs.BOOSTER_DICT
        self.negate = frozenset(vs.NEGATE)
        self.special: dict[str, float] = vs.SPECIAL_CASES
        self.n_scalar: float = vs.N_SCALAR
        self.c_incr: float = vs.C_INCR
        # words of the multi-word special cases and boosters: without one near a word, its idiom check is a no-op
        self.idiom_words = frozenset(w for k in (*vs.SPECIAL_CASES, *vs.BOOSTER_DICT) if " " in k for w in k.split())

    def compound(self, text: str) -> float:
        if not text.isascii() and not self.emoji_chars.isdisjoint(text):
            out = ""
            prev_space = True
            for ch in text:
                if ch in self.emojis:
                    if not prev_space:
                        out += " "
                    out += self.emojis[ch]
                    prev_space = False
                else:
                    out += ch
                    prev_space = ch == " "
            text = out
        text = text.strip()
        punct = string.punctuation
        lexicon = self.lexicon
        words = text.split()
        if text.isascii():  # lower-casing ASCII keeps lengths and punctuation: strip the lower-cased tokens
            lower = [s if len(s := t.strip(punct)) > 2 else t for t in text.lower().split()]
        else:
            words = [s if len(s := t.strip(punct)) > 2 else t for t in words]
            lower = [w.lower() for w in words]
        hits = [i for i, w in enumerate(lower) if w in lexicon]
        if not hits:
            return 0.0
        n = len(lower)
        n_caps = sum(map(str.isupper, words))  # a token and its stripped word are upper-case alike
        is_cap_diff = 0 < n - n_caps < n
        booster = self.booster
        sentiments: list[float] = [0] * n
        for i in hits:
            item = lower[i]
            if item in booster or (item == "kind" and i < n - 1 and lower[i + 1] == "of"):
                continue
            sentiments[i] = self._valence(words, lower, i, is_cap_diff)
        if "but" in lower:
            bi = lower.index("but")
            for sentiment in sentiments:  # vaderSentiment's loop, quirks included (index finds the first equal)
                si = sentiments.index(sentiment)
                if si < bi:
                    sentiments.pop(si)
                    sentiments.insert(si, sentiment * 0.5)
                elif si > bi:
                    sentiments.pop(si)
                    sentiments.insert(si, sentiment * 1.5)
        total = float(sum(sentiments))
        ep = min(text.count("!"), 4) * 0.292
        qm = text.count("?")
        amplifier = ep + ((qm * 0.18 if qm <= 3 else 0.96) if qm > 1 else 0)
        if total > 0:
            total += amplifier
        elif total < 0:
            total -= amplifier
        score = total / math.sqrt(total * total + 15)
        return round(max(-1.0, min(1.0, score)), 4)

    def _valence(self, words: list[str], lower: list[str], i: int, is_cap_diff: bool) -> float:
        """vaderSentiment's ``sentiment_valence`` for a lexicon word, its three look-backs unrolled."""
        lexicon, booster, negate = self.lexicon, self.booster, self.negate
        n_scalar, c_incr = self.n_scalar, self.c_incr
        item = lower[i]
        valence = lexicon[item]
        if item == "no" and i != len(lower) - 1 and lower[i + 1] in lexicon:
            valence = 0.0
        if (
            (i > 0 and lower[i - 1] == "no")
            or (i > 1 and lower[i - 2] == "no")
            or (i > 2 and lower[i - 3] == "no" and lower[i - 1] in ("or", "nor"))
        ):
            valence = lexicon[item] * n_scalar
        if is_cap_diff and words[i].isupper():
            valence += c_incr if valence > 0 else -c_incr
        if i > 0 and (w := lower[i - 1]) not in lexicon:  # one word back
            s = 0.0
            if w in booster:
                s = booster[w] * (-1 if valence < 0 else 1)
                if is_cap_diff and words[i - 1].isupper():
                    s += c_incr if valence > 0 else -c_incr
            valence = valence + s
            if w in negate or "n't" in w:
                valence = valence * n_scalar
        if i > 1 and (w := lower[i - 2]) not in lexicon:  # two words back
            s = 0.0
            if w in booster:
                s = booster[w] * (-1 if valence < 0 else 1)
                if is_cap_diff and words[i - 2].isupper():
                    s += c_incr if valence > 0 else -c_incr
                s = s * 0.95 if s != 0 else s
            valence = valence + s
            if w == "never" and lower[i - 1] in ("so", "this"):
                valence = valence * 1.25
            elif w == "without" and lower[i - 1] == "doubt":
                pass
            elif w in negate or "n't" in w:
                valence = valence * n_scalar
        if i > 2 and (w := lower[i - 3]) not in lexicon:  # three words back, then idioms
            s = 0.0
            if w in booster:
                s = booster[w] * (-1 if valence < 0 else 1)
                if is_cap_diff and words[i - 3].isupper():
                    s += c_incr if valence > 0 else -c_incr
                s = s * 0.9 if s != 0 else s
            valence = valence + s
            if (w == "never" and lower[i - 2] in ("so", "this")) or lower[i - 1] in ("so", "this"):
                valence = valence * 1.25
            elif w == "without" and (lower[i - 2] == "doubt" or lower[i - 1] == "doubt"):
                pass
            elif w in negate or "n't" in w:
                valence = valence * n_scalar
            if not self.idiom_words.isdisjoint(lower[i - 3 : i + 3]):
                valence = self._idioms(valence, lower, i)
        if i > 1 and lower[i - 1] not in lexicon and lower[i - 1] == "least":
            if lower[i - 2] != "at" and lower[i - 2] != "very":
                valence = valence * n_scalar
        elif i > 0 and lower[i - 1] not in lexicon and lower[i - 1] == "least":
            valence = valence * n_scalar
        return valence

    def _idioms(self, valence: float, lower: list[str], i: int) -> float:
        special = self.special
        onezero = f"{lower[i - 1]} {lower[i]}"
        twoonezero = f"{lower[i - 2]} {lower[i - 1]} {lower[i]}"
        twoone = f"{lower[i - 2]} {lower[i - 1]}"
        threetwoone = f"{lower[i - 3]} {lower[i - 2]} {lower[i - 1]}"
        threetwo = f"{lower[i - 3]} {lower[i - 2]}"
        for seq in (onezero, twoonezero, twoone, threetwoone, threetwo):
            if seq in special:
                valence = special[seq]
                break
        if len(lower) - 1 > i:
            zeroone = f"{lower[i]} {lower[i + 1]}"
            if zeroone in special:
                valence = special[zeroone]
        if len(lower) - 1 > i + 1:
            zeroonetwo = f"{lower[i]} {lower[i + 1]} {lower[i + 2]}"
            if zeroonetwo in special:
                valence = special[zeroonetwo]
        for n_gram in (threetwoone, threetwo, twoone):
            if n_gram in self.booster:
                valence = valence + self.booster[n_gram]
        return valence


_VADER_LOCK = threading.Lock()
_VADER: list[Vader] = []


def vader() -> Vader:
    """The one VADER instance (its lexicon is read on first use)."""
    if not _VADER:
        with _VADER_LOCK:
            if not _VADER:
                _VADER.append(Vader())
    return _VADER[0]


def compound(message: str) -> float:
    """VADER compound of one message, read as its first and last ``VADER_CHARS`` characters."""
    if len(message) > 2 * VADER_CHARS:
        message = message[:VADER_CHARS] + " ... " + message[-VADER_CHARS:]
    return _compound(message)


@lru_cache(maxsize=16_384)  # repeated messages ("continue", "thanks") are common; keys are at most ~2 000 chars
def _compound(message: str) -> float:
    return vader().compound(message)


# ---------------------------------------------------------------------------------------------------------------
# text helpers


def cap(text: str) -> str:
    """``text``, or its first ``HEAD_CHARS`` and last ``TAIL_CHARS`` characters when longer than both."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text
    return text[:HEAD_CHARS] + " ... " + text[-TAIL_CHARS:]


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters, in double quotes."""
    text = " ".join(text[: limit * 4].split())
    return '"' + (text if len(text) <= limit else text[: limit - 1] + "…") + '"'


def _cmd(text: str, limit: int = 60) -> str:
    text = " ".join(text[: limit * 4].split())
    return "`" + (text if len(text) <= limit else text[: limit - 1] + "…") + "`"


def _lower(text: str) -> str:
    text = text.lower()
    return text.replace("’", "'") if "’" in text else text


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


class _Step:
    __slots__ = (
        "i",
        "name",
        "text",
        "exit_code",
        "written",
        "error",
        "edit",
        "read",
        "test",
        "run",
        "failed",
        "capped",
    )

    def __init__(self, i: int, step: AgentStep) -> None:
        self.i = i
        self.name = name = step.name if isinstance(step.name, str) else ""
        text, written = step.text, step.written
        self.capped = 0
        if not isinstance(text, str):
            text = ""
        elif len(text) > HEAD_CHARS + TAIL_CHARS:
            text, self.capped = cap(text), 1
        if not isinstance(written, str) or not written:
            written = None  # "" too: a transcript without the written code says so with ""
        elif len(written) > HEAD_CHARS + TAIL_CHARS:
            written, self.capped = cap(written), self.capped + 1
        self.text = text
        self.written = written
        self.exit_code = step.exit_code
        self.error = bool(step.error)
        self.failed = (self.exit_code is not None and self.exit_code != 0) or self.error
        self.run = run = name in _RUN_NAMES
        self.edit = name in _EDIT_NAMES
        self.read = name == "read"
        self.test = False
        if run and text:
            if name == "run":
                if (">" in text or "tee" in text or "sed" in text or "perl" in text) and _SHELL_WRITE.search(text):
                    self.edit = True
                else:
                    self.read, self.test = _classify_command(text)
            else:
                self.read = _IPY_READ.search(text) is not None
                self.test = _TEST_HINTS.search(text) is not None and _TEST_CMD.search(text) is not None

    @property
    def path(self) -> str:
        """The file an edit/write step touched ("" for a shell write)."""
        return self.text if self.name in _EDIT_NAMES else ""

    def label(self) -> str:
        return f"step {self.i + 1} ({self.name} {_cmd(self.text) if self.text else ''})".replace(" )", ")")


class _View:
    def __init__(self, t: SessionTranscript) -> None:
        self.t = t
        self.originals = [m for m in (t.user_messages or ()) if isinstance(m, str) and m.strip()]
        self.users = [cap(m) for m in self.originals]
        self.n_capped = sum(1 for a, b in zip(self.originals, self.users, strict=True) if a is not b)

    @cached_property
    def lows(self) -> list[str]:
        return [_lower(m) for m in self.users]

    @cached_property
    def joined(self) -> str:
        return "\n".join(self.lows)

    @cached_property
    def tables(self) -> dict[str, list[tuple[int, int, int, str, str, int]]]:
        """Every phrase of every table in the user's messages: table -> [(message, start, end, key, label, weight)];
        one scan per message (``_PHRASES``, overlapping phrases included)."""
        out: dict[str, list[tuple[int, int, int, str, str, int]]] = {}
        for k, low in enumerate(self.lows):
            for m in _PHRASES.finditer(low):
                found = [m]
                phrase = m.group()
                if not phrase.isalnum():  # "i didn't ask you to" also holds "didn't ask you to"
                    for inner in _INNER_WORD.finditer(phrase):
                        m2 = _PHRASES.match(low, m.start() + inner.start())
                        if m2:
                            found.append(m2)
                for hit in found:
                    start, end = hit.span()
                    for table, key, label, weight in _ENTRIES[hit.group()]:
                        out.setdefault(table, []).append((k, start, end, key, label, weight))
        return out

    def found(self, table: str, later: bool = True) -> list[tuple[int, int, int, str, str, int]]:
        """Hits of one table: (message, start, end, key, label, weight), later messages only unless told."""
        hits = self.tables.get(table, [])
        return [h for h in hits if h[0] > 0] if later else hits

    def snippet(self, k: int, start: int, end: int) -> str:
        """A quoted window of message ``k`` around [start, end), from the original text when it lines up."""
        text = self.users[k] if len(self.users[k]) == len(self.lows[k]) else self.lows[k]
        if len(text) <= QUOTE_CHARS:
            return quote(text)
        lo = max(0, min(start - 30, end - QUOTE_CHARS + 10))
        piece = quote(text[lo : lo + QUOTE_CHARS - 2], QUOTE_CHARS - 2)
        return piece if lo == 0 else '"…' + piece[1:]

    @cached_property
    def path_spans(self) -> list[list[tuple[int, int]]]:
        """Per message, the spans of its path-like tokens (``_path_spans``)."""
        return [_path_spans(low) if "/" in low else [] for low in self.lows]

    def in_path(self, k: int, start: int) -> bool:
        return any(lo <= start < hi for lo, hi in self.path_spans[k])

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
    def n_capped_steps(self) -> int:
        return sum(s.capped for s in self.steps)

    @cached_property
    def compounds(self) -> list[float]:
        return [_compound(m) if len(m) <= 2 * VADER_CHARS else compound(m) for m in self.users]

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
    if last is not None and last[0] is t:
        return last[1]
    v = _View(t)
    _LOCAL.last = (t, v)
    return v


# ---------------------------------------------------------------------------------------------------------------
# rules


def rule(name: str) -> Callable[[Rule], Rule]:
    """Register a rule under ``name``; a session without user messages answers ``NO_USER`` before it runs."""

    def register(fn: Rule) -> Rule:
        def guarded(t: SessionTranscript, feature: RubricFeature) -> Answer:
            if not _view(t).users:
                return NO_USER
            return fn(t, feature)

        guarded.__name__ = guarded.__qualname__ = fn.__name__
        guarded.__doc__ = fn.__doc__
        RULES[name] = guarded
        return guarded

    return register


def _option(feature: RubricFeature, wanted: str) -> str:
    """``wanted`` as the rubric spells it (case-insensitive), or as is when the rubric has no such option."""
    for o in feature.options:
        if o.lower() == wanted.lower():
            return o
    return wanted


@rule("vader_sentiment")
def vader_sentiment(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    scores = v.compounds
    mean = sum(scores) / len(scores)
    value = "Positive" if mean >= POSITIVE_AT else "Negative" if mean <= NEGATIVE_AT else "Neutral"
    why = f"mean VADER compound {mean:+.2f} over {_plural(len(scores), 'message')}"
    if not any(scores):
        return Answer(_option(feature, value), why + ": no sentiment words")
    hi = max(range(len(scores)), key=scores.__getitem__)
    lo = min(range(len(scores)), key=scores.__getitem__)
    parts = []
    if scores[hi] > 0:
        parts.append(f"most positive {scores[hi]:+.2f}: {quote(v.users[hi], 60)}")
    if scores[lo] < 0:
        parts.append(f"most negative {scores[lo]:+.2f}: {quote(v.users[lo], 60)}")
    return Answer(_option(feature, value), why + "; " + "; ".join(parts))


def _path_spans(text: str) -> list[tuple[int, int]]:
    """The spans of the whitespace-separated tokens of ``text`` that are paths or URLs: a ``/`` and a ``.``, two
    ``/`` or a leading ``/`` (after opening brackets and quotes)."""
    spans: list[tuple[int, int]] = []
    j = text.find("/")
    while j != -1:
        lo = max(text.rfind(" ", 0, j), text.rfind("\n", 0, j), text.rfind("\t", 0, j)) + 1
        hi = len(text)
        for sep in (" ", "\n", "\t"):
            e = text.find(sep, j)
            if e != -1 and e < hi:
                hi = e
        token = text[lo:hi].strip("()[]{}<>\"'`,;:!?")
        if "." in token or token.count("/") > 1 or token.startswith("/"):
            spans.append((lo, hi))
        j = text.find("/", hi)
    return spans


def _scratch_hits(v: _View, later: bool | None) -> list[tuple[int, str]]:
    """(message, phrase) of every "create a ... app"-like phrase; ``later`` None means every message."""
    out = []
    for k, start, end, _key, _label, _w in v.found("scratch", later=False):
        if later is not None and (k > 0) != later:
            continue
        m = SCRATCH_TAIL.match(v.lows[k], end)
        if m:
            out.append((k, v.lows[k][start : m.end()]))
    return out


def _task_type(v: _View) -> tuple[str, str]:
    """(task type, explanation) by ``TASK_KEYWORDS``; see the module docstring."""
    for later, where in ((False, "first message"), (True, "later messages")):
        scores: dict[str, int] = {}
        labels: dict[str, list[str]] = {}
        for k, start, _end, key, label, weight in v.found("task", later=later):
            if (k > 0) != later or v.in_path(k, start) or label in labels.get(key, ()):
                continue
            scores[key] = scores.get(key, 0) + weight
            labels.setdefault(key, []).append(label)
        for _k, phrase in _scratch_hits(v, later):
            key = "Create Programs from Scratch"
            if phrase not in labels.get(key, ()):
                scores[key] = scores.get(key, 0) + STRONG
                labels.setdefault(key, []).append(phrase)
        if scores:
            ranked = sorted(scores, key=lambda c: (-scores[c], TASK_PRIORITY.index(c)))
            best = ranked[0]
            why = f"{where}: " + ", ".join(f'"{w}"' for w in labels[best][:4]) + f" ({best} {scores[best]}"
            if len(ranked) > 1:
                why += f"; next {ranked[1]} {scores[ranked[1]]}"
            return best, why + ")"
    return TASK_DEFAULT, f"no keyword matched; default {TASK_DEFAULT}"


@rule("task_type_keywords")
def task_type_keywords(t: SessionTranscript, feature: RubricFeature) -> Answer:
    value, why = _view(t).task
    return Answer(_option(feature, value), why)


def _underspecified(first: str) -> bool:
    if len(first.split()) > 12:
        return False
    low = _lower(first)
    return not _IDENTIFIER.search(first) and not any(w in low for w in _ERROR_WORDS)


@rule("development_cluster_keywords")
def development_cluster_keywords(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    labels: dict[str, list[str]] = {}

    def add(cluster: str, label: str) -> None:
        if label not in labels.setdefault(cluster, []):
            labels[cluster].append(label)

    for k, start, _end, key, label, _w in v.found("cluster", later=False):
        if not v.in_path(k, start):
            add(key, label)
    joined = v.joined
    for m in _EXTENSIONS.finditer(joined):
        if m.start() > 0 and (joined[m.start() - 1].isalnum() or joined[m.start() - 1] == "_"):
            add(_EXT_CLUSTER[m.group(1)], "." + m.group(1))
    if "http://" in v.joined or "https://" in v.joined:
        add("Web browsing and research", "a URL")
    for _k, phrase in _scratch_hits(v, None):
        add("Write code from scratch", phrase)
    if _underspecified(v.users[0]):
        add("Fix underspecified issues", f"short first message without file, function or error: {quote(v.users[0])}")
    allowed = [c for c in CLUSTER_PRIORITY if c in labels and _option(feature, c) in feature.options]
    if not allowed:
        return Answer(_option(feature, CLUSTER_NONE), "no keyword matched")
    ranked = sorted(allowed, key=lambda c: (-len(labels[c]), CLUSTER_PRIORITY.index(c)))
    chosen = ranked[: max(1, feature.max_choices)]
    chosen_options = [_option(feature, c) for c in chosen]
    value = "|".join(o for o in feature.options if o in chosen_options)
    why = "; ".join(
        f"{c}: " + ", ".join(w if w.startswith(("short", "a URL", ".")) else f'"{w}"' for w in labels[c][:3])
        for c in chosen
    )
    if len(ranked) > len(chosen):
        why += f" (also matched: {', '.join(ranked[len(chosen) :])})"
    return Answer(value, why)


def _first_phrase(v: _View, table: str) -> str | None:
    hits = v.found(table)
    if not hits:
        return None
    k, start, end, _key, label, _w = hits[0]
    more = f" (+{_plural(len(hits) - 1, 'more match')})" if len(hits) > 1 else ""
    return f'message {k + 1} says {v.snippet(k, start, end)} ("{label}"){more}'


@rule("user_correction")
def user_correction(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    said = _first_phrase(v, "correction")
    if said:
        return Answer(YES, said)
    if len(v.users) == 1:
        return Answer(NO, "no later message")
    return Answer(NO, f"no correction phrase in {_plural(len(v.users) - 1, 'later message')}")


def _git_violation(v: _View) -> str | None:
    for k, low in enumerate(v.lows):
        if "not" not in low and "n't" not in low and "dont" not in low and "never" not in low:
            continue
        for m in _DONT_GIT.finditer(low):
            if m.start() > 0 and (low[m.start() - 1].isalnum() or low[m.start() - 1] == "_"):
                continue
            verb = m.group(1).split()[0]
            verb = verb if verb in _GIT_VERB else "pr"
            target = (m.group(2) or "").strip(".,;:!?")
            if target in _GENERIC_TARGETS:
                target = ""
            pattern = _GIT_VERB[verb]
            for s in v.steps:
                hit = _STEP_VERB.get(s.name) == verb or (s.run and pattern.search(s.text) is not None)
                if hit and (not target or re.search(rf"(?<![\w/.-]){re.escape(target)}(?![\w/-])", s.text)):
                    action = _cmd(s.text) if s.text else f"a {s.name} step"
                    return f"message {k + 1} says {v.snippet(k, m.start(), m.end())} and step {s.i + 1} ran {action}"
    return None


@rule("instruction_repeated")
def instruction_repeated(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    said = _first_phrase(v, "instruction")
    if said:
        return Answer(YES, said)
    for k in range(1, len(v.lows)):
        if "again," in v.lows[k]:
            m = _AGAIN.search(v.lows[k])
            if m:
                return Answer(YES, f'message {k + 1} says {v.snippet(k, m.start(), m.end())} ("again,")')
    broke = _git_violation(v)
    if broke:
        return Answer(YES, broke)
    return Answer(NO, "no repeated instruction, no don't-push/commit/PR instruction broken by a git command")


@rule("edits_before_reading")
def edits_before_reading(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    said = _first_phrase(v, "analysis")
    if said:
        return Answer(YES, said)
    first_edit = next((s for s in v.steps if s.edit), None)
    if first_edit is None:
        return Answer(NO, "no file edits")
    first_read = next((s for s in v.steps if s.read), None)
    if first_read is None:
        return Answer(YES, f"no read or search step; first edit is {first_edit.label()}")
    if first_edit.i < first_read.i:
        return Answer(YES, f"first edit {first_edit.label()} comes before the first read {first_read.label()}")
    return Answer(NO, f"read before editing: {first_read.label()} precedes the first edit {first_edit.label()}")


def _lines(written: str | None) -> int:
    return len(written.splitlines()) if written else 0


def _runs_edited(s: _Step, edited: list[str]) -> bool:
    if not s.run or s.read or s.edit or "git " in s.text:
        return False
    for path in edited:
        base = path.rstrip("/").rsplit("/", 1)[-1]
        if len(base) >= 4 and base in s.text:
            return True
        stem = base.rsplit(".", 1)[0]
        if len(stem) >= 3 and stem in s.text and re.search(_IMPORTED.format(re.escape(stem)), s.text):
            return True
    return False


@rule("edits_without_tests")
def edits_without_tests(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    edits = [s for s in v.steps if s.edit]
    if not edits:
        return Answer(NO, "no file edits")
    lines = sum(_lines(s.written) for s in edits)
    if len(edits) == 1 and (edits[0].written is None or lines < 5):
        size = "unknown size" if edits[0].written is None else _plural(lines, "line")
        return Answer(NO, f"trivial: one edit ({size})")
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
    why = (
        f"{_plural(len(edits), 'edit')} ({files}), {written}; no test run or run of an edited file after the first edit"
    )
    return Answer(YES, why)


@rule("repeated_failing_command")
def repeated_failing_command(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    failing: dict[str, int] = {}
    repeated: tuple[str, int, int | None] | None = None
    n_failed = 0
    for s in v.steps:
        if s.edit:
            failing.clear()
            continue
        if not (s.run and s.failed and s.text):
            continue
        n_failed += 1
        key = " ".join(s.text.split())
        failing[key] = failing.get(key, 0) + 1
        if failing[key] >= 2 and (repeated is None or failing[key] > repeated[1]):
            repeated = (key, failing[key], s.exit_code)
    if repeated:
        code = f", exit {repeated[2]}" if repeated[2] is not None else ""
        return Answer(YES, f"{_cmd(repeated[0])} failed {repeated[1]} times{code} with no edit in between")
    last_test = next((s for s in reversed(v.steps) if s.test and (s.exit_code is not None or s.error)), None)
    if last_test is not None and last_test.failed:
        code = f"exit {last_test.exit_code}" if last_test.exit_code is not None else "error"
        return Answer(YES, f"the last test run {last_test.label()} failed ({code}) and nothing followed it")
    tail = f"; last test run passed: {last_test.label()}" if last_test else "; no test run"
    if not n_failed:
        return Answer(NO, "no failing command" + tail)
    return Answer(NO, f"{_plural(n_failed, 'failing command')}, none repeated without an edit between{tail}")


def _todo_in(s: _Step) -> str | None:
    w = s.written
    if not w:
        return None
    m = _TODO.search(w) if _TODO_HINTS.search(w) else None
    if m is None and "..." in w and not s.path.endswith(".pyi"):
        m = _ELLIPSIS_BODY.search(w)
    if m is None:
        return None
    lo = w.rfind("\n", 0, m.start()) + 1
    hi = w.find("\n", m.end())
    line = w[lo : hi if hi != -1 else len(w)].strip()
    if not line or line == "...":
        line = " ".join(w[lo : m.end() + 5].split())
    return line


@rule("todo_left_or_unfinished")
def todo_left_or_unfinished(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    for s in v.steps:
        if s.edit:
            line = _todo_in(s)
            if line:
                return Answer(YES, f"{s.label()} wrote {quote(line, 60)}")
    said = _first_phrase(v, "unfinished")
    if said:
        return Answer(YES, said)
    n_written = sum(1 for s in v.steps if s.edit and s.written)
    code = f"no TODO/FIXME/stub in {_plural(n_written, 'written block')}" if n_written else "no written code to check"
    return Answer(NO, f"{code}; no 'unfinished' message")


def _name_words(path: str) -> set[str]:
    base = path.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return {w.lower() for w in _NAME_WORD.findall(base) if len(w) >= 3}


@rule("unrequested_additions")
def unrequested_additions(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    said = _first_phrase(v, "scope")
    if said:
        return Answer(YES, said)
    task, _ = v.task
    if task not in ("Fix Bugs", "Fix Failing Continuous Integration", "Fix Merge Conflicts"):
        return Answer(NO, f"no objection to extra changes; task is {task}, not a fix")
    seen: set[str] = set()
    unrelated: list[str] = []
    for s in v.steps:
        path = s.text if s.name in ("read", "edit", "write") else ""
        if not path:
            continue
        if s.name == "write" and path not in seen and "test" not in path.lower():
            words = _name_words(path)
            if words and not (words & v.user_words) and path not in unrelated:
                unrelated.append(path)
        seen.add(path)
    if len(unrelated) >= 2:
        return Answer(YES, f"task is {task}; new files unrelated to the request: {', '.join(unrelated[:4])}")
    return Answer(NO, f"no objection to extra changes; {_plural(len(unrelated), 'unrelated new file')}")


@rule("loop_behavior")
def loop_behavior(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    counts: dict[tuple[str, str], int] = {}
    for s in v.steps:
        if s.failed:
            key = (s.name, " ".join(s.text.split()))
            counts[key] = counts.get(key, 0) + 1
    if counts:
        (name, text), n = max(counts.items(), key=lambda kv: kv[1])
        if n >= 3:
            return Answer(YES, f"the same failing {name} {_cmd(text) if text else ''} ran {n} times".replace("  ", " "))
        return Answer(NO, f"no failing action repeated 3 times (most: {n})")
    return Answer(NO, "no failing action")


@rule("frustration")
def frustration(t: SessionTranscript, feature: RubricFeature) -> Answer:
    v = _view(t)
    hits = v.found("frustration", later=False)
    if hits:
        k, start, end, _key, label, _w = hits[0]
        return Answer(YES, f'message {k + 1} says {v.snippet(k, start, end)} ("{label}")')
    for k, m in enumerate(v.users):
        for mark in ("!!!", "?!", "!?"):
            j = m.find(mark)
            if j != -1:
                return Answer(YES, f'message {k + 1} says {v.snippet(k, j, j + len(mark))} ("{mark}")')
        if sum(map(str.isupper, m)) >= 6:  # three 2-letter words at least
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
        self._checked = {self.rubric.digest}

    def prompt_version(self, rubric: Rubric) -> str:
        return f"heuristic-{HEURISTIC_VERSION}-{rubric.version}-{rubric.digest}"

    def annotate(self, transcripts: list[SessionTranscript], rubric: Rubric | None = None) -> list[Annotation]:
        rubric = rubric or self.rubric
        if rubric.digest not in self._checked:
            check_rules(rubric, self.rules)
            self._checked.add(rubric.digest)
        version = self.prompt_version(rubric)
        return [self._one(t, rubric, version) for t in transcripts]

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
                sid, self.name, version, "", answers, status="skipped", notes={"skipped": NO_USER.explanation}
            )
        answers: dict[str, Answer] = {}
        errors = []
        for f in rubric.features:
            try:
                answers[f.name] = self.rules[f.heuristic](t, f)
            except Exception as exc:  # one broken rule fails the session, not the run
                errors.append(f"{f.name} ({f.heuristic}): {exc!r}")
        notes: dict[str, str] = {}
        capped = v.n_capped + v.n_capped_steps
        if capped:
            notes["truncated"] = (
                f"read the first {HEAD_CHARS} and last {TAIL_CHARS} characters of {_plural(capped, 'text')} "
                f"longer than {HEAD_CHARS + TAIL_CHARS}"
            )
        status = "failed" if errors else "truncated" if capped else "ok"
        return Annotation(
            sid,
            self.name,
            version,
            task_description(v.users[0]),
            answers,
            status=status,
            error="; ".join(errors) or None,
            notes=notes,
        )
