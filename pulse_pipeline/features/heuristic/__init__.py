"""The offline annotator: deterministic keyword, regex and VADER rules, one per rubric ``heuristic`` name.

Every session gets rubric answers without a network or an LLM, reproducibly and fast enough for a whole export, and
each answer says why: its explanation cites the evidence (the message quoted, the command, the count) or the reason
for a NO. Each rubric feature names a rule in ``RULES``; ``HeuristicAnnotator`` checks the names when it is built
and raises ``UnknownRuleError`` naming the rubric entry and the known rules. A new rule is a function
``(SessionView, RubricFeature) -> Answer`` registered with ``@rule("name")`` in ``rules.py``, and a row in the
table below.

Where things are
----------------
- ``features/heuristic_phrases.toml``: the phrase and keyword tables (data), read once by ``phrases.py``, which
  also builds the one regex that finds them.
- ``view.py``: ``SessionView``, what the rules read off one transcript (messages, phrases found, steps and what each
  runs), built once per session by the annotator and passed to every rule.
- ``rules.py``: the rules, ``RULES`` and ``HEURISTIC_VERSION``. ``annotator.py``: ``HeuristicAnnotator``.
  ``text.py``: VADER, capping and quoting. Shell lines are lexed by ``features/shell.py``.

How the rules read a session
----------------------------
- Texts over 40 000 characters (user message, step text, written code) are read as their first and last 20 000
  (status ``truncated``, with a note); VADER reads each message's first and last 1 000 (``VADER_CHARS``).
- Phrases (the tables of ``heuristic_phrases.toml``) match case-insensitively on whole words, ``’`` read as ``'``, and
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
    ``[[task_type]]`` keywords in the first message (in later ones if it has none): strong 3, weak 1, each once;
    "create/build/write/make/... a <up to 3 words> app/script/tool/..." (``[scratch]``) is strong from-scratch →
    the top type, ties by the file's order (specific first); no keyword → Implement Features.
development_cluster_keywords (development_cluster)
    One point per distinct ``[[cluster]]`` keyword in all messages; also ``.py``/``.ipynb`` → python,
    ``.java``/``.jar`` → Java, an http(s) URL → web research, the from-scratch phrase; a first message of at most 12
    words naming no file, path, ``function(``, snake_case, camelCase or error → underspecified → the
    ``max_choices`` top clusters (ties by the file's order) in the rubric's order; none → None of the above.
user_correction (misunderstood_intention)
    A ``phrases.correction`` phrase ("no I meant", "not what I asked", "wrong file", ...) in a later message → YES.
instruction_repeated (did_not_follow_instruction)
    A ``phrases.instruction`` phrase ("I told you", "as I said", ...) or a sentence starting "again," in a later
    message; or "don't/do not/never push|commit|merge|open a PR (to <branch>)" in any message and a step doing it
    (git push/commit/merge, gh pr merge/create, hub pull-request, a ``/pulls`` call, a push/send_pr step) → YES.
edits_before_reading (insufficient_analysis)
    A ``phrases.analysis`` phrase ("already exists", "use the existing", ...) in a later message, or the first edit
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
    ``phrases.unfinished`` phrase ("you didn't finish", "still missing", ...) in a later message → YES.
unrequested_additions (scope_creep)
    A ``phrases.scope`` phrase ("I didn't ask for", "why did you add", ...) in a later message; or a fix task (bugs,
    CI, merge conflicts) where the agent wrote two or more new non-test files (not read or edited before) whose
    names share no word with the user's messages → YES.
loop_behavior (not in the default rubric)
    The same failing action (step name and text) three or more times → YES.
frustration (not in the default rubric)
    In any user message: a ``phrases.frustration`` phrase ("ugh", "come on", "wtf", ...), "!!!", "?!" or "!?",
    three ALL-CAPS words (``shouting.not_shouting`` excepted), or a VADER compound ≤ −0.5 → YES.

``task_description`` is the first message's first sentence (at most 200 characters). ``prompt_version`` is
``heuristic-<HEURISTIC_VERSION>-<rubric version>-<rubric digest>``: bump ``HEURISTIC_VERSION`` when a rule or a
phrase table changes.

Version 3 (was 2): reads and ``python <...test...>.py`` runs find a line's programs with ``shell.program_argvs``
instead of a private list that skipped only ``VAR=value``, sudo, env, time and nohup. So these are now reads or
test runs too: a program after a shell keyword (``if grep -q x f; then ...``, ``! grep``, ``{ cat f; }``), after a
wrapper's options or another wrapper (``sudo -u me cat f``, ``timeout 5 cat f``, ``nice``, ``command``, ``exec``,
``doas``, ``stdbuf``, ``ionice``), inside ``sh -c '...'``/``bash -lc '...'``/``eval``, or named by its path
(``/bin/cat f``, ``/usr/bin/python3 test_x.py``); and a Python interpreter is also ``pypy``/``pypy3`` or
``python3.11.4``. Nothing stops being a read or a test run but on odd words: a program named ``python.3``, or an
assignment whose name has a non-ASCII letter (``naïve=1 cat f``).
"""

from .annotator import HeuristicAnnotator, UnknownRuleError
from .rules import HEURISTIC_VERSION, RULES, Rule, rule
from .view import SessionView

__all__ = ["HEURISTIC_VERSION", "RULES", "HeuristicAnnotator", "Rule", "SessionView", "UnknownRuleError", "rule"]
