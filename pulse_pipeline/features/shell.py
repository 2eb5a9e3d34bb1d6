"""The shell lexer: which programs a shell command line really runs (its git subcommands, its test runs), and the
shell lines inside Python.

Why: the paper's strongest behavioural signals are "the agent committed / pushed" and "tests failed". Matching
``"git push" in command`` counts ``echo "git push"``, ``git log --grep=push`` and ``cat git-push.sh``, and misses
``git -C repo push``; so a command line is tokenized like a shell would and only the *program* of each simple
command is looked at. ``program_argvs`` is that one answer to "which programs does this line run", shared by
``git_subcommands``, ``is_test_command`` and the heuristic annotator's reads and test runs.

Rules (each stated once, here):

- **Tokens.** Shell-style: ``'...'`` is literal, ``"..."`` keeps its content (``\\`` escapes ``"``, ``$``, `````
  and ``\\``), a backslash escapes the next character and a backslash-newline joins lines. ``$( )``, ``${ }`` and
  backticks stay inside the word they belong to (what runs inside them is not looked at). A ``#`` that starts a
  word starts a comment to the end of the line. Here-document bodies (``<<EOF`` ... ``EOF``) are data, skipped.
- **Simple commands** are separated by ``&&``, ``||``, ``;``, ``|``, ``&``, ``(``, ``)`` and newlines.
  Redirections (``>f``, ``2>&1``, ``<f``, ``<<<s``) and their targets are dropped wherever they are.
- **The program** of a simple command is its first word after: shell keywords that precede a command (``if``,
  ``then``, ``else``, ``elif``, ``do``, ``while``, ``until``, ``!``, ``{``, ``time``), environment assignments
  (``GIT_TRACE=1``), and wrappers with their options (``sudo``, ``doas``, ``env``, ``timeout DURATION``,
  ``nice``, ``nohup``, ``command``, ``exec``, ``builtin``, ``stdbuf``, ``ionice``); ``command -v|-V NAME`` runs
  nothing. It is compared by its base name (``program_name``), so ``/usr/bin/git`` is ``git``.
  ``sh``/``bash``/``zsh``/``dash``/``ksh`` ``-c STRING`` and ``eval ARGS`` run their argument as a command line: it
  is parsed the same way (three levels deep at most). ``program_argvs`` gives these programs with their arguments.
- **Git subcommand**: for program ``git``, the first word that is not a global option. Global options taking a
  value (``-C <path>``, ``-c <name=value>``, ``--git-dir``, ``--work-tree``, ``--namespace``, ``--config-env``,
  ``--super-prefix``, ``--attr-source``; as ``--opt value`` or ``--opt=value``) skip their value; every other word
  starting with ``-`` (``--no-pager``, ``-P``, ``--bare``, ...) is a flag. So ``git log --grep=push`` is a ``log``.
  ``GIT_OPERATIONS`` are the ones the features count; each occurrence counts (``git push; git push`` is two).
- **Test run**: a simple command whose program is ``pytest``/``py.test``, ``tox``, ``nox``, ``ctest``, ``rspec``,
  ``phpunit``, ``jest``, ``vitest``, ``mocha`` or ``nosetests``; ``python* -m pytest|unittest|tox|nox|nose`` (also
  ``coverage run -m ...`` and ``python manage.py test``); ``npm``/``yarn``/``pnpm``/``bun`` ``test`` (``t``, or
  ``run test``/``run test:*``), ``yarn|pnpm jest|vitest``, ``npx``/``bunx``/``pnpm exec|dlx`` ``jest|vitest``;
  ``go|cargo|dotnet|deno|bun test`` (``cargo nextest``); ``mvn``/``mvnw`` or ``gradle``/``gradlew`` with a ``test``
  (or ``*:test``) goal; ``make test|tests|check``. Runners ``uv run``, ``poetry run``, ``pipenv run``, ``pdm run``,
  ``hatch run``, ``rye run`` and ``bundle exec`` are looked through. ``echo pytest`` and ``pip install pytest`` are
  not test runs.
- **Unparseable shell** (an unbalanced quote or backtick) falls back to splitting on whitespace, with ``;``,
  ``&&``, ``||``, ``|`` and ``&`` words (or a trailing ``;``) still separating commands and quote characters
  dropped from words: never an exception.
- **Python code** (``run_ipython``): IPython shell escapes (a line ``!cmd`` or ``var = !cmd``, ``%sx cmd``,
  ``%system cmd``) and shell cell magics (``%%bash``, ``%%sh``, ``%%sx``, ``%%system``, ``%%script bash|sh|zsh``:
  the whole cell body) are shell lines. The rest is parsed with ``ast``: calls of ``subprocess.run``, ``call``,
  ``check_call``, ``check_output``, ``Popen`` and ``asyncio.create_subprocess_exec`` (an argv list or tuple, or a
  string: a shell line with ``shell=True``, otherwise a single program name) and of ``os.system``, ``os.popen``,
  ``subprocess.getoutput``/``getstatusoutput``, ``asyncio.create_subprocess_shell`` and
  ``get_ipython().system``/``getoutput`` (a shell string). Modules are recognised through their import aliases
  (``import subprocess as sp``, ``from subprocess import run``). Arguments may be literals, f-strings (a
  placeholder ``_`` for each ``{...}``), ``"...".split()``, or a name assigned one such literal in the cell;
  anything else becomes ``_``. When the code does not parse, a regex finds ``subprocess.*([...])`` argv lists,
  ``subprocess.*("...", ..., shell=True)`` and ``os.system("...")``/``os.popen("...")`` literals.
"""

from __future__ import annotations

import ast
import os.path
import re
import shlex
from collections.abc import Iterator

GIT_OPERATIONS = ("commit", "push", "pull", "reset", "rebase")

# --------------------------------------------------------------------------------------------------------
# tokenizing

_LEX = re.compile(
    r"""
      (?P<ws>[ \t\r\f\v]+|\\\r?\n)
    | (?P<nl>\n)
    | (?P<comment>\#[^\n]*)
    | (?P<heredoc><<-?)[ \t]*(?P<delim>'[^'\n]*'|"[^"\n]*"|[^\s;&|()<>]+)
    | (?P<redir>(?:\d+|&)?(?:>>|>&|<&|<>|>\||<<<|>|<))
    | (?P<op>&&|\|\||;;&?|;&|\|&|[;|&()])
    | (?P<word>(?:
          [^\s'"\\;|&()<>`$]+
        | '[^']*'
        | "(?:[^"\\]|\\.)*"
        | \\.
        | \$\((?:[^()]|\([^()]*\))*\)
        | \$\{[^}]*\}
        | `(?:[^`\\]|\\.)*`
        | \$
      )+)
    """,
    re.X | re.S,
)
_PIECE = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)|([^'"\\]+)""", re.S)
_DQ_ESCAPE = re.compile(r"""\\([$`"\\\n])""")
_FALLBACK_SEPARATORS = frozenset([";", "&&", "||", "|", "&", "|&", "(", ")"])
_QUOTE_CHARS = str.maketrans("", "", "'\"`")


class _Unparseable(ValueError):
    pass


def _unquote(word: str) -> str:
    """The word as the program receives it: quotes removed, escapes resolved."""
    if "'" not in word and '"' not in word and "\\" not in word:
        return word
    out = []
    for single, double, escaped, plain in _PIECE.findall(word):
        if plain:
            out.append(plain)
        elif escaped:
            out.append("" if escaped == "\n" else escaped)
        elif double:
            out.append(_DQ_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), double))
        else:
            out.append(single)
    return "".join(out)


def _heredoc_end(text: str, pos: int, delim: str) -> int:
    """Position just after the line that ends a here-document whose body starts at ``pos`` (the end if none)."""
    # ``<<-`` allows leading tabs; agents also indent the delimiter of ``<<``, so both accept leading blanks
    end = re.compile(rf"^[ \t]*{re.escape(delim)}[ \t]*$", re.M).search(text, pos)
    if end is None:
        return len(text)
    return end.end() + 1 if end.end() < len(text) else end.end()


def _lex(command: str) -> list[list[str]]:
    """Words of each simple command (redirections, comments and here-document bodies removed)."""
    commands: list[list[str]] = []
    current: list[str] = []
    pending_heredocs: list[str] = []
    skip_next_word = False
    pos, n = 0, len(command)
    while pos < n:
        m = _LEX.match(command, pos)
        if m is None:
            raise _Unparseable(command[pos : pos + 20])
        kind = m.lastgroup if m.lastgroup != "delim" else "heredoc"
        pos = m.end()
        if kind == "ws" or kind == "comment":
            continue
        if kind == "word":
            if skip_next_word:
                skip_next_word = False
            else:
                current.append(_unquote(m.group("word")))
            continue
        if kind == "redir":
            skip_next_word = True
            continue
        if kind == "heredoc":
            pending_heredocs.append(_unquote(m.group("delim")))
            continue
        # an operator or a newline ends the simple command
        skip_next_word = False
        if current:
            commands.append(current)
            current = []
        if kind == "nl" and pending_heredocs:
            for delim in pending_heredocs:
                pos = _heredoc_end(command, pos, delim)
            pending_heredocs = []
    if current:
        commands.append(current)
    return commands


def _split_fallback(command: str) -> list[list[str]]:
    commands: list[list[str]] = []
    current: list[str] = []
    for word in command.split():
        if word in _FALLBACK_SEPARATORS:
            if current:
                commands.append(current)
            current = []
            continue
        end = word.endswith(";") and len(word) > 1
        current.append(word.rstrip(";").translate(_QUOTE_CHARS) if end else word.translate(_QUOTE_CHARS))
        if end:
            commands.append(current)
            current = []
    if current:
        commands.append(current)
    return commands


def simple_commands(command: str) -> list[list[str]]:
    """The words of every simple command of a shell command line (see the module rules); never raises."""
    try:
        return _lex(command)
    except _Unparseable:
        return _split_fallback(command)


# --------------------------------------------------------------------------------------------------------
# finding the program

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_LEADING_KEYWORDS = frozenset(["if", "then", "else", "elif", "do", "while", "until", "!", "{", "time"])
# wrapper -> (options that take a separate value, number of positional words before the wrapped program)
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset(["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group"]), 0),
    "doas": (frozenset(["-u", "-C"]), 0),
    "env": (frozenset(["-u", "--unset", "-C", "--chdir", "-S", "--split-string"]), 0),
    "timeout": (frozenset(["-s", "--signal", "-k", "--kill-after"]), 1),
    "nice": (frozenset(["-n", "--adjustment"]), 0),
    "nohup": (frozenset(), 0),
    "command": (frozenset(), 0),
    "exec": (frozenset(["-a"]), 0),
    "builtin": (frozenset(), 0),
    "stdbuf": (frozenset(["-i", "-o", "-e"]), 0),
    "ionice": (frozenset(["-c", "-n", "-p"]), 0),
    "time": (frozenset(), 0),
}
_SHELLS = frozenset(["sh", "bash", "zsh", "dash", "ksh", "ash"])
_PYTHON = re.compile(r"^(?:python(?:\d+(?:\.\d+)*)?|pypy3?)$")
_MAX_DEPTH = 3


def _base(word: str) -> str:
    return os.path.basename(word) if "/" in word else word


def _resolve(words: list[str]) -> list[str]:
    """The argv that runs: keywords, assignments and wrappers (with their options) stripped."""
    i, n = 0, len(words)
    while i < n:
        w = words[i]
        if w in _LEADING_KEYWORDS:
            i += 1
            if w == "time" and i < n and words[i] == "-p":
                i += 1
            continue
        if _ASSIGNMENT.match(w):
            i += 1
            continue
        wrapper = _WRAPPERS.get(_base(w))
        if wrapper is None:
            break
        if _base(w) == "command" and any(a in ("-v", "-V") for a in words[i + 1 : i + 3]):
            return []  # ``command -v git`` only looks the program up
        with_value, positional = wrapper
        i += 1
        while i < n and words[i].startswith("-") and words[i] != "-":
            opt = words[i]
            i += 1
            if opt == "--":
                break
            if opt in with_value:
                i += 1
        i += positional
    return words[i:] if i < n else []


def _nested(argv: list[str]) -> str | None:
    """The command string that ``sh -c STRING`` or ``eval ARGS`` runs, if this argv is one."""
    program = _base(argv[0])
    if program == "eval":
        return " ".join(argv[1:]) or None
    if program not in _SHELLS:
        return None
    run_string = False
    for arg in argv[1:]:
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            run_string = run_string or "c" in arg[1:]
            continue
        if arg.startswith("--"):
            continue
        return arg if run_string else None
    return None


def _argvs(command: str, depth: int = 0) -> Iterator[list[str]]:
    """Every argv a command line runs, looking into ``sh -c`` and ``eval``."""
    for words in simple_commands(command):
        argv = _resolve(words)
        if not argv:
            continue
        nested = _nested(argv) if depth < _MAX_DEPTH else None
        if nested is not None:
            yield from _argvs(nested, depth + 1)
        else:
            yield argv


def program_argvs(command: str) -> list[list[str]]:
    """The argv of every program a shell command line runs, in order, each starting at its program (keywords,
    assignments and wrappers stripped; ``sh -c`` and ``eval`` looked into): ``cd r && sudo -u me git push`` ->
    ``[["cd", "r"], ["git", "push"]]``. See "The program" in the module rules."""
    return list(_argvs(command))


def program_name(argv: list[str]) -> str:
    """The program an argv of ``program_argvs`` runs, by its base name (``/usr/bin/git`` -> ``git``)."""
    return _base(argv[0])


def is_python(program: str) -> bool:
    """Whether a program name (``program_name``) is a Python interpreter: ``python``, ``python3``, ``python3.11``,
    ``pypy3``."""
    return _PYTHON.match(program) is not None


# --------------------------------------------------------------------------------------------------------
# git

_GIT_VALUE_OPTIONS = frozenset(
    ["-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--attr-source"]
)


def _git_subcommand(argv: list[str]) -> str | None:
    i, n = 1, len(argv)
    while i < n:
        w = argv[i]
        if w in _GIT_VALUE_OPTIONS:
            i += 2
        elif w.startswith("-"):
            i += 1
        else:
            return w
    return None


def git_subcommands(command: str) -> list[str]:
    """The git subcommands a shell command line runs, in order (``cd r && git push`` -> ``["push"]``)."""
    if not command or "git" not in command:
        return []
    out = []
    for argv in _argvs(command):
        if _base(argv[0]) == "git":
            sub = _git_subcommand(argv)
            if sub is not None:
                out.append(sub)
    return out


# --------------------------------------------------------------------------------------------------------
# tests

_TEST_PROGRAMS = frozenset(
    ["pytest", "py.test", "tox", "nox", "ctest", "rspec", "phpunit", "jest", "vitest", "nosetests", "mocha"]
)
_TEST_MODULES = frozenset(["pytest", "unittest", "tox", "nox", "nose"])
_JS_TEST_BINS = frozenset(["jest", "vitest", "mocha"])
_RUNNERS = {"uv": "run", "poetry": "run", "pipenv": "run", "pdm": "run", "hatch": "run", "rye": "run", "bundle": "exec"}
_RUNNER_VALUE_OPTIONS = frozenset(["--with", "--python", "-p", "--extra", "--group", "--package", "--directory"])
_TEST_KEYWORDS = re.compile(r"test|tox|nox|jest|rspec|phpunit|check|npm|mocha")  # a cheap pre-filter


def _positionals(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith(("-", "+"))]


def _python_module(args: list[str]) -> str | None:
    for i, a in enumerate(args):
        if a == "-m" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("-m") and len(a) > 2:
            return a[2:]
        if not a.startswith("-"):
            return None  # a script: what follows are its arguments
    return None


def _is_test_argv(argv: list[str], depth: int = 0) -> bool:
    program, args = _base(argv[0]), argv[1:]
    if program in _TEST_PROGRAMS:
        return True
    if is_python(program):
        if _python_module(args) in _TEST_MODULES:
            return True
        pos = _positionals(args)
        return len(pos) >= 2 and _base(pos[0]) == "manage.py" and pos[1] == "test"
    if program == "coverage":
        return bool(args) and args[0] == "run" and _python_module(args[1:]) in _TEST_MODULES
    if program in _RUNNERS and depth < _MAX_DEPTH:
        if not args or args[0] != _RUNNERS[program]:
            return False
        i = 1
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in _RUNNER_VALUE_OPTIONS else 1
        return i < len(args) and _is_test_argv(args[i:], depth + 1)
    pos = _positionals(args)
    if program in ("npm", "yarn", "pnpm", "bun"):
        if not pos:
            return False
        if pos[0] in ("test", "t", "tst") or (program != "npm" and pos[0] in _JS_TEST_BINS):
            return True
        if pos[0] in ("run", "run-script") and len(pos) > 1:
            return pos[1] == "test" or pos[1].startswith("test:")
        return program == "pnpm" and pos[0] in ("exec", "dlx") and len(pos) > 1 and _base(pos[1]) in _JS_TEST_BINS
    if program in ("npx", "bunx"):
        return bool(pos) and _base(pos[0]) in _JS_TEST_BINS
    if program in ("go", "dotnet", "deno"):
        return bool(pos) and pos[0] == "test"
    if program == "cargo":
        return bool(pos) and pos[0] in ("test", "nextest")
    if program in ("mvn", "mvnw", "gradle", "gradlew"):
        return any(p == "test" or p.endswith(":test") for p in pos)
    if program in ("make", "gmake"):
        return any(p in ("test", "tests", "check") for p in pos)
    return False


def is_test_command(command: str) -> bool:
    """Whether a shell command line runs a test suite (``cd x && pytest -q`` yes; ``pip install pytest`` no)."""
    if not command or _TEST_KEYWORDS.search(command) is None:
        return False
    return any(_is_test_argv(argv) for argv in _argvs(command))


# --------------------------------------------------------------------------------------------------------
# shell lines inside Python (IPython cells)

_LINE_ESCAPE = re.compile(r"^(\s*)(?:[A-Za-z_][\w.]*\s*=\s*)?(?:!(?!=)|%(?:sx|system)\b)(.*)$")
_MAGIC_LINE = re.compile(r"^(\s*)[%!]")
_CELL_MAGIC = re.compile(r"^\s*%%(?:bash|sh|sx|system|script\s+(?:\S*/)?(?:bash|sh|zsh))\b[^\n]*\n?")
_ARGV_FUNCS = frozenset(["run", "call", "check_call", "check_output", "Popen", "create_subprocess_exec"])
_SHELL_FUNCS = frozenset(["system", "popen", "getoutput", "getstatusoutput", "create_subprocess_shell"])
_MODULES = frozenset(["subprocess", "os", "asyncio", "commands"])
_CODE_HINTS = re.compile(r"subprocess|system|popen|getoutput|create_subprocess|[!%]")
_RE_ARGV = re.compile(r"subprocess\s*\.\s*\w+\s*\(\s*[\[(]([^\])]*)[\])]")
_RE_SHELL = re.compile(
    r"""(?:\bos\s*\.\s*(?:system|popen)\s*\(\s*[rbuf]?(?P<q1>['"])(?P<s1>(?:\\.|(?!(?P=q1)).)*)(?P=q1))"""
    r"""|(?:subprocess\s*\.\s*\w+\s*\(\s*[rbuf]?(?P<q2>['"])(?P<s2>(?:\\.|(?!(?P=q2)).)*)(?P=q2)[^)]*"""
    r"""shell\s*=\s*True)""",
    re.S,
)
_RE_STRING = re.compile(r"""(['"])((?:\\.|(?!\1).)*)\1""", re.S)
_PLACEHOLDER = "_"


def _literal_words(node: ast.AST, names: dict[str, ast.AST]) -> list[str] | None:
    """An argv from a list/tuple literal, ``"...".split()`` or a name bound to one (None if it is not one)."""
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal_text(e, names) for e in node.elts]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "split"
        and not node.args
        and isinstance(node.func.value, ast.Constant | ast.JoinedStr)
    ):
        return _literal_text(node.func.value, names).split()
    return None


def _literal_text(node: ast.AST, names: dict[str, ast.AST]) -> str:
    """A string literal or f-string (``_`` for each ``{...}``); ``_`` for anything else."""
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else _PLACEHOLDER for v in node.values
        )
    return _PLACEHOLDER


def _call_kind(func: ast.AST, aliases: dict[str, str]) -> str | None:
    """``"argv"`` or ``"shell"`` for a call that runs a process, else None."""
    if isinstance(func, ast.Attribute):
        attr, base = func.attr, func.value
        is_module = isinstance(base, ast.Name) and aliases.get(base.id) in _MODULES
        is_ipython = isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "get_ipython"
        if is_ipython and attr in ("system", "getoutput"):
            return "shell"
        if not is_module:
            return None
    elif isinstance(func, ast.Name) and "." in aliases.get(func.id, ""):
        module, attr = aliases[func.id].split(".", 1)
        if module not in _MODULES:
            return None
    else:
        return None
    if attr in _ARGV_FUNCS:
        return "argv"
    if attr in _SHELL_FUNCS:
        return "shell"
    return None


def _from_ast(tree: ast.AST) -> list[tuple[int, int, str]]:
    aliases: dict[str, str] = {m: m for m in _MODULES}
    assigned: dict[str, list[ast.AST]] = {}
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[(a.asname or a.name).split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module.split('.')[0]}.{a.name}"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.Call):
            calls.append(node)
    names = {k: v[0] for k, v in assigned.items() if len(v) == 1}
    out: list[tuple[int, int, str]] = []
    for call in calls:
        kind = _call_kind(call.func, aliases)
        if kind is None:
            continue
        arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("args", "cmd")), None)
        if arg is None:
            continue
        if kind == "argv" and isinstance(call.func, ast.Attribute | ast.Name) and _is_exec(call.func):
            argv = [_literal_text(a, names) for a in call.args]  # create_subprocess_exec(program, *args)
            line = shlex.join(argv)
        elif kind == "shell":
            line = _literal_text(arg, names)
        else:
            words = _literal_words(arg, names)
            if words is not None:
                line = shlex.join(words)
            else:
                text = _literal_text(arg, names)
                shell = any(
                    k.arg == "shell" and isinstance(k.value, ast.Constant) and k.value.value for k in call.keywords
                )
                line = text if shell else shlex.quote(text)
        if line.strip() and line != _PLACEHOLDER:
            out.append((call.lineno, call.col_offset, line))
    return out


def _is_exec(func: ast.Attribute | ast.Name) -> bool:
    return (func.attr if isinstance(func, ast.Attribute) else func.id) == "create_subprocess_exec"


def _from_regex(code: str) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    for m in _RE_ARGV.finditer(code):
        words = [s for _, s in _RE_STRING.findall(m.group(1))]
        if words:
            found.append((code.count("\n", 0, m.start()) + 1, m.start(), shlex.join(words)))
    for m in _RE_SHELL.finditer(code):
        line = m.group("s1") if m.group("s1") is not None else m.group("s2")
        found.append((code.count("\n", 0, m.start()) + 1, m.start(), line))
    return found


def python_shell_commands(code: str) -> list[str]:
    """The shell command lines a Python/IPython cell runs, in order of appearance (see the module rules)."""
    if not code or _CODE_HINTS.search(code) is None:
        return []
    cell = _CELL_MAGIC.match(code)
    if cell is not None:
        body = code[cell.end() :]
        return [body] if body.strip() else []
    found: list[tuple[int, int, str]] = []
    python_lines: list[str] = []
    changed = False
    for lineno, line in enumerate(code.split("\n"), start=1):
        escape = _LINE_ESCAPE.match(line)
        magic = _MAGIC_LINE.match(line) if escape is None else None
        if escape is not None and escape.group(2).strip():
            found.append((lineno, -1, escape.group(2).strip()))
        if escape is not None or magic is not None:  # %cd, %pip, ...: IPython, not shell; either way not Python
            python_lines.append(f"{(escape or magic).group(1)}pass")
            changed = True
        else:
            python_lines.append(line)
    source = "\n".join(python_lines) if changed else code
    try:
        found.extend(_from_ast(ast.parse(source)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        found.extend(_from_regex(source))
    return [line for _, _, line in sorted(found)]
