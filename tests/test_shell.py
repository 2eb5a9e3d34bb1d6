"""Shell and Python command parsing (``features/shell.py``): each rule of its docstring, one row per case."""

from __future__ import annotations

import json

import pytest

from pulse_pipeline.features.shell import (
    GIT_OPERATIONS,
    git_subcommands,
    is_python,
    is_test_command,
    program_argvs,
    program_name,
    python_shell_commands,
    simple_commands,
)

from .helpers import SAMPLES, needs_samples

GIT_CASES = [
    # counted
    ("cd repo && git push origin main", ["push"]),
    ('git -C repo commit -am "x"', ["commit"]),
    ("git -c user.name=bot commit -m x", ["commit"]),
    ("git --git-dir=.git push", ["push"]),
    ("git --git-dir .git --work-tree /w pull", ["pull"]),
    ("git --work-tree=/w reset --hard", ["reset"]),
    ("git --no-pager log", ["log"]),
    ("git -P rebase main", ["rebase"]),
    ('git -C "my repo" -c core.pager=cat --no-pager -P push', ["push"]),
    ("GIT_TRACE=1 git pull", ["pull"]),
    ('FOO="a b" GIT_SSH_COMMAND=ssh git push', ["push"]),
    ("git push; git log", ["push", "log"]),
    ("git push || git pull", ["push", "pull"]),
    ("git log | grep x", ["log"]),
    ("git add .\ngit commit -m x", ["add", "commit"]),
    ("sudo git push", ["push"]),
    ("sudo -u bob env A=1 git push", ["push"]),
    ("/usr/bin/git push", ["push"]),
    ("timeout 60 git push", ["push"]),
    ("timeout -s KILL 60 nohup git push", ["push"]),
    ('git add -A && git commit -m "Fix empty input handling"', ["add", "commit"]),
    ("(cd sub; git push)", ["push"]),
    ("if git diff --quiet; then git commit -m x; fi", ["diff", "commit"]),
    ('bash -lc "cd r && git push"', ["push"]),
    ("sh -c 'git rebase -i HEAD~2'", ["rebase"]),
    ("cd x && \\\n  git push", ["push"]),
    ("git commit -m \"$(cat <<'EOF'\nfix\nEOF\n)\" && git push", ["commit", "push"]),
    ("git status 2>&1 | tail -n 5", ["status"]),
    ("git push >out.log 2>&1", ["push"]),
    ("git pull --rebase", ["pull"]),
    ("git reset --hard HEAD~1", ["reset"]),
    ("echo a#b; git push", ["push"]),
    # not counted
    ('echo "git push"', []),
    ("echo 'git commit -m x'", []),
    ("git log --grep=push", ["log"]),
    ("grep push file", []),
    ("# git push", []),
    ("ls  # git push", []),
    ("cat git-push.sh", []),
    ("command -v git", []),
    ("git --version", []),
    ("cat > s.sh <<EOF\ngit push\nEOF\nbash s.sh", []),
    ("cat <<-'END' > notes\n\tgit commit\n\tEND", []),
    ("echo $(git push)", []),
    ("xargs git push", []),
    ("", []),
    # unbalanced quotes: whitespace fallback, no exception
    ('echo "unbalanced git push', []),
    ("git commit -m 'it's done'", ["commit"]),
    ("git push; echo 'oops", ["push"]),
    ("cd r && git pull`", ["pull"]),
]


@pytest.mark.parametrize(("command", "expected"), GIT_CASES, ids=[c for c, _ in GIT_CASES])
def test_git_subcommands(command, expected):
    assert git_subcommands(command) == expected


def test_git_operations():
    assert GIT_OPERATIONS == ("commit", "push", "pull", "reset", "rebase")


TEST_CASES = [
    ("pytest", True),
    ("pytest -q tests/test_utils.py", True),
    ("py.test -x", True),
    ("python -m pytest tests/", True),
    ("python3.11 -m pytest -k slow", True),
    ("python -m unittest discover", True),
    ("cd app && python3 -m unittest", True),
    ("coverage run -m pytest", True),
    ("python manage.py test", True),
    ("tox", True),
    ("tox -e py311", True),
    ("nox -s tests", True),
    ("npm test", True),
    ("npm run test", True),
    ("npm t", True),
    ("yarn test", True),
    ("yarn run test:unit", True),
    ("pnpm test", True),
    ("pnpm exec vitest run", True),
    ("npx jest", True),
    ("npx vitest run", True),
    ("go test ./...", True),
    ("cargo test", True),
    ("cargo +nightly test --all", True),
    ("mvn test", True),
    ("mvn -q clean test", True),
    ("./mvnw test", True),
    ("gradle test", True),
    ("./gradlew :app:test", True),
    ("make test", True),
    ("make -C build check", True),
    ("ctest --output-on-failure", True),
    ("rspec spec/models", True),
    ("bundle exec rspec", True),
    ("phpunit", True),
    ("vendor/bin/phpunit tests", True),
    ("dotnet test", True),
    ("bun test", True),
    ("uv run pytest", True),
    ("poetry run pytest -q", True),
    ("CI=1 timeout 600 pytest", True),
    ("pip install -e . && pytest", True),
    ("pytest -q 2>&1 | tail -20", True),
    ("echo pytest", False),
    ("pip install pytest", False),
    ("pip install tox nox", False),
    ("cat test_utils.py", False),
    ("python test_utils.py", False),
    ("python -m pip install pytest", False),
    ("npm run build", False),
    ("npm install jest", False),
    ("make", False),
    ("make build", False),
    ("mvn package -DskipTests", False),
    ("go build ./...", False),
    ("grep -r test .", False),
    ("# pytest", False),
    ("ls tests/", False),
    ("git commit -m 'add tests'", False),
    ('echo "unbalanced pytest', False),
]


@pytest.mark.parametrize(("command", "expected"), TEST_CASES, ids=[c for c, _ in TEST_CASES])
def test_is_test_command(command, expected):
    assert is_test_command(command) is expected


PYTHON_CASES = [
    ("!git push", ["git push"]),
    ("  !git push origin main", ["git push origin main"]),
    ('x = 1\n!git commit -m "a b"\nprint(x)', ['git commit -m "a b"']),
    ("out = !git status", ["git status"]),
    ("%sx git push", ["git push"]),
    ("%system git pull", ["git pull"]),
    ("%%bash\ngit push\ngit log", ["git push\ngit log"]),
    ("%%sh\ncd r && git rebase main", ["cd r && git rebase main"]),
    ('import subprocess\nsubprocess.run(["git", "push"])', ["git push"]),
    ('import subprocess\nsubprocess.check_call(["git","commit","-m","x"])', ["git commit -m x"]),
    ('import subprocess\nsubprocess.check_output(("git", "pull"), text=True)', ["git pull"]),
    ('import subprocess\nsubprocess.Popen(args=["git", "reset", "--hard"])', ["git reset --hard"]),
    ('import os\nos.system("git push")', ["git push"]),
    ('import os\nos.popen("git log -1").read()', ["git log -1"]),
    ('import subprocess\nsubprocess.run("git push", shell=True)', ["git push"]),
    ('import subprocess\nsubprocess.run("git push")', ["'git push'"]),  # no shell: a program named "git push"
    ('import subprocess as sp\nsp.run(["git", "push"])', ["git push"]),
    ('from subprocess import check_call as cc\ncc(["git", "push"])', ["git push"]),
    ('import subprocess\ncmd = ["git", "push"]\nsubprocess.run(cmd)', ["git push"]),
    ('import subprocess\nsubprocess.run("git commit -m x".split())', ["git commit -m x"]),
    ('import subprocess\nsubprocess.run(f"git commit -m {msg}", shell=True)', ["git commit -m _"]),
    ('import subprocess\nsubprocess.run(["git", "commit", "-m", msg])', ["git commit -m _"]),
    ('get_ipython().system("git push")', ["git push"]),
    ('for f in files:\n    !git add {f}\nimport os\nos.system("git commit -m x")', ["git add {f}", "git commit -m x"]),
    # does not parse as Python: the regex fallback
    ('import subprocess\nsubprocess.run(["git", "push"]\nprint(', ["git push"]),
    ('os.system("git push")\nfor', ["git push"]),
    ("subprocess.run('git pull', shell=True)\nif:", ["git pull"]),
    # no shell
    ("print('git push')", []),
    ("x != y", []),
    ("%cd repo\nprint(1)", []),
    ("app.run(debug=True)", []),
    ("", []),
]


@pytest.mark.parametrize(("code", "expected"), PYTHON_CASES, ids=[c for c, _ in PYTHON_CASES])
def test_python_shell_commands(code, expected):
    assert python_shell_commands(code) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ('import subprocess\nsubprocess.run(["git", "push"])', ["push"]),
        ("!git -C repo commit -am x", ["commit"]),
        ('import os\nos.system("echo git push")', []),
        ('import subprocess\nsubprocess.run(["git", "log", "--grep=push"])', ["log"]),
    ],
)
def test_git_subcommands_of_python_code(code, expected):
    assert [s for line in python_shell_commands(code) for s in git_subcommands(line)] == expected


def test_simple_commands_drop_redirections_and_quotes():
    assert simple_commands("FOO=1 git  -C 'a b' push >log 2>&1 && echo \"x y\"|tee f") == [
        ["FOO=1", "git", "-C", "a b", "push"],
        ["echo", "x y"],
        ["tee", "f"],
    ]


def test_program_argvs_start_at_the_program():
    line = "cd r && ! sudo -u me /bin/cat f || timeout 5 sh -c 'FOO=1 ls -la'; command -v git"
    assert program_argvs(line) == [["cd", "r"], ["/bin/cat", "f"], ["ls", "-la"]]
    assert [program_name(a) for a in program_argvs("env -i /usr/bin/python3 x.py")] == ["python3"]
    assert [p for p in ("python", "python3", "python3.11", "pypy3", "ipython", "python-config") if is_python(p)] == [
        "python",
        "python3",
        "python3.11",
        "pypy3",
    ]


@needs_samples
def test_ipython_cells_of_the_resolver_sample_run_no_shell():
    """The 21 ``run_ipython`` cells of resolver_mock_output.jsonl only open and edit files (read by hand)."""
    cells = []
    for line in (SAMPLES / "openhands_v0" / "resolver_mock_output.jsonl").read_text().splitlines():
        cells += [e["code"] for e in json.loads(line)["history"] if e.get("action") == "run_ipython"]
    assert len(cells) == 21
    assert [python_shell_commands(c) for c in cells] == [[]] * 21
