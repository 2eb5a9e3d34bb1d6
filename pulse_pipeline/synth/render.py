"""Turn one session-level row into an OpenHands V0 event stream (``history``).

Why: the pipeline must be tested on what it will really read, event streams, not on the tidy session table,
so the counts it extracts (user messages, segments, git pushes, test failures, ...) can be checked against the
generator's truth. Rendering is exact on every count in ``SessionTable``: ``user_messages`` user ``message``
actions in ``n_segments`` work segments, one ``run`` action per git operation / test run / failing or
succeeding command, with exit codes (test failures exit 1; ``failed_commands`` = every ``run`` observation with a
non-zero exit code), ``file_edits`` ``edit`` actions, and a final ``finish`` iff ``finished``.

Shape of a session (ids 0, 1, ... and timestamps strictly increasing)::

    state loading, state init,
    per segment: user message, state running, [actions + observations, extra user messages typed meanwhile],
                 agent message (wait_for_response) -> state awaiting_user_input
                 | on the last segment of a finished session: finish -> state finished

The rated event of a segment (what ``conversation_feedback.event_id`` points at) is its closing agent message or
``finish``: ``RenderedSession.close_ids``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import numpy as np

from .model import GeneratorParams, SessionTable

BASE_TIME = datetime(2025, 6, 1)
SPAN_SECONDS = 92 * 86400.0  # sessions start uniformly in June-August 2025


class SessionSpec(NamedTuple):
    """Plain-Python scalars of one session (numpy scalars are slow in a per-event loop)."""

    session_id: str
    user_id: str
    task_type: str
    language: str
    user_messages: int
    n_segments: int
    git_commit: int
    git_push: int
    git_pull: int
    git_reset: int
    git_rebase: int
    test_runs: int
    test_failures: int
    failed_commands: int
    file_edits: int
    finished: bool
    sentiment_score: float
    n_reads: int  # rendered-only filler: file reads
    n_ok_commands: int  # rendered-only filler: succeeding other commands


@dataclass(frozen=True)
class RenderedSession:
    history: list[dict[str, Any]]
    close_ids: list[int]  # per segment: id of its closing agent message / finish (the rated event)
    close_times: list[str]  # per segment: timestamp of that event


def session_specs(table: SessionTable, seed: int, params: GeneratorParams | None = None) -> list[SessionSpec]:
    """One ``SessionSpec`` per session. The rendered-only filler is drawn vectorized:
    reads ~ Poisson(read_rate * n_segments), succeeding other commands ~ Poisson(other_cmd_rate * n_segments).
    """
    p = params or GeneratorParams()
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5E55]))
    seg = table.n_segments.astype(np.float64)
    reads = rng.poisson(p.read_rate * seg)
    ok = rng.poisson(p.other_cmd_rate * seg)
    cols = [
        table.session_id,
        table.user_id,
        table.task_type,
        table.language,
        table.user_messages,
        table.n_segments,
        table.git_commit,
        table.git_push,
        table.git_pull,
        table.git_reset,
        table.git_rebase,
        table.test_runs,
        table.test_failures,
        table.failed_commands,
        table.file_edits,
        table.finished,
        table.sentiment_score,
        reads,
        ok,
    ]
    return [SessionSpec(*row) for row in zip(*(c.tolist() for c in cols), strict=True)]


# --------------------------------------------------------------------------------------------------------
# text

_TASK_REQUESTS: dict[str, tuple[str, ...]] = {
    "Fix Bugs": (
        "There's a bug in {file}: {sym}() returns None when the input list is empty. Can you fix it?",
        "Users report a crash when they submit the form twice. The traceback points at {file}. Please fix.",
        "{sym} gives wrong totals for negative amounts, see {file}. Fix it and add a regression test.",
        "Fix the off-by-one error in the pagination logic in {file}.",
    ),
    "Implement Features": (
        "Add a --dry-run flag to the CLI in {file} that prints what would change without writing anything.",
        "Please implement CSV export for the reports page; the data comes from {sym}() in {file}.",
        "Add retry with exponential backoff to {sym} in {file}, max 5 attempts.",
        "Implement dark mode toggle in the settings page and persist it in local storage.",
    ),
    "Create Programs from Scratch": (
        "Write a small Python script that watches a folder and uploads new files to S3.",
        "Create a FastAPI service with a /health endpoint and a /items CRUD API backed by SQLite.",
        "Build a command-line todo app in Node with add/list/done commands and tests.",
        "Create a scraper that collects job postings from a page and saves them as JSON.",
    ),
    "Fix Failing Continuous Integration": (
        "CI is red on main: the test job fails on {file}. Can you make it pass?",
        "The GitHub Actions lint step fails after the last merge, please fix the workflow and the code.",
        "Our CI started failing with an import error in {file} after the dependency bump. Fix it.",
    ),
    "Fix Merge Conflicts": (
        "I have merge conflicts in {file} after rebasing on main. Please resolve them, keep both features.",
        "Resolve the conflicts on branch feature/{sym} against main and make sure the tests still pass.",
    ),
    "Write Documentation": (
        "Write a README section explaining how to configure {sym}, with an example.",
        "Add docstrings to all public functions in {file}.",
        "Document the REST API endpoints in docs/api.md, with request and response examples.",
    ),
    "Perform Deployments": (
        "Deploy the current main branch to staging and check that the health check passes.",
        "Set up a Dockerfile and deploy the service to our Kubernetes cluster (manifests in deploy/).",
        "Push the release tag and run the deploy script for production.",
    ),
    "Perform Data Analysis": (
        "Load data/sales.csv and tell me which region grew the most month over month, with a chart.",
        "Analyze the logs in logs/ and find the endpoints with the highest p95 latency.",
        "Compute churn by signup cohort from the users table and plot it.",
    ),
}

_POSITIVE = (
    "thanks, that works!",
    "Perfect, exactly what I needed.",
    "great, tests pass on my side too.",
    "Nice work. Now can you also {follow}?",
    "looks good, thank you! next: {follow}",
    "awesome, merged. Can you {follow}?",
    "that's it, thanks!",
)
_NEUTRAL = (
    "ok. Next, {follow}.",
    "Can you {follow}?",
    "Please also {follow}.",
    "what does {sym} do exactly?",
    "ok, and {follow}",
    "run the tests again please",
    "Can you show me the diff?",
)
_NEGATIVE = (
    "no, I meant {follow}, not that.",
    "that's still failing: {sym} raises the same error.",
    "this is wrong, you changed files I didn't ask you to touch.",
    "It still doesn't work. Please {follow}.",
    "why did you delete the tests?? put them back",
    "you forgot what I said earlier: don't touch {file}.",
    "no no no. revert that and {follow}.",
    "This is not what I asked for.",
)
_INTERJECTIONS = (  # typed while the agent runs: calm ...
    "also, keep the old function signature.",
    "wait, use the staging branch.",
    "btw the config is in .env",
    "don't forget the tests",
)
_INTERJECTIONS_NEGATIVE = (  # ... or not
    "stop, that's the wrong file",
    "hurry please, this is blocking a release",
    "no wait, that's not what I asked",
    "why are you reinstalling everything again?",
)
_FOLLOWS = (
    "add a test for the empty case",
    "update the changelog",
    "rename {sym} to something clearer",
    "handle the timeout error",
    "make it work on Python 3.10",
    "add logging",
    "clean up the imports",
    "fix the lint warnings",
    "write a short summary in the PR description",
)
_FOREIGN: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # (task opener, positive/neutral follow-up, negative follow-up) by language
    "es": (
        ("Hay un error en {file}, ¿puedes arreglarlo?", "Necesito que implementes {sym} en {file}."),
        ("gracias, funciona!", "ok, ahora agrega pruebas por favor."),
        ("no, eso no es lo que pedí.", "sigue fallando, revisa {file}."),
    ),
    "de": (
        ("In {file} ist ein Fehler, kannst du ihn beheben?", "Bitte implementiere {sym} in {file}."),
        ("danke, das funktioniert!", "ok, bitte noch Tests hinzufügen."),
        ("nein, das habe ich nicht gemeint.", "es schlägt immer noch fehl."),
    ),
    "zh": (
        ("{file} 里有个bug，帮我修一下。", "请在 {file} 中实现 {sym}。"),
        ("谢谢，可以了！", "好的，再加几个测试。"),
        ("不对，我不是这个意思。", "还是失败，请再检查一下 {file}。"),
    ),
    "pt": (
        ("Tem um bug em {file}, pode corrigir?", "Implemente {sym} em {file}, por favor."),
        ("valeu, funcionou!", "ok, agora adicione testes."),
        ("não, não foi isso que eu pedi.", "ainda está falhando."),
    ),
    "fr": (
        ("Il y a un bug dans {file}, tu peux le corriger ?", "Implémente {sym} dans {file} s'il te plaît."),
        ("merci, ça marche !", "ok, ajoute des tests maintenant."),
        ("non, ce n'est pas ce que je voulais.", "ça échoue toujours."),
    ),
}
_AGENT_DONE = (
    "I've updated {file}; the change is small and the tests pass. Let me know if you want anything else.",
    "Done. I changed {sym} in {file} and added a test for it.",
    "I've made the requested changes to {file}. Summary: fixed the edge case and cleaned up the imports.",
)
_AGENT_STUCK = (
    "I changed {file}, but {n} command(s) still fail. Should I keep trying a different approach?",
    "The tests are still failing in {file}. I need more information: which behaviour do you expect?",
    "I couldn't get {sym} to work yet; the last run failed. How would you like to proceed?",
)
_FINISH = (
    "All done: {file} is updated and the tests pass.",
    "The task is complete. I changed {sym} in {file} and verified it.",
    "I've finished the task and pushed the changes.",
)
_FILES = (
    "src/app.py",
    "src/utils.py",
    "src/api/routes.py",
    "src/models/user.py",
    "lib/parser.js",
    "lib/index.js",
    "app/services/billing.py",
    "cli/main.py",
    "tests/test_utils.py",
    "src/components/Form.tsx",
    "README.md",
    "scripts/deploy.sh",
    "analysis/report.py",
    "config/settings.py",
    ".github/workflows/ci.yml",
)
_SYMS = (
    "parse_items",
    "get_total",
    "load_config",
    "UserService",
    "retry_request",
    "render_table",
    "sync_files",
    "compute_churn",
    "handleSubmit",
    "normalize_path",
)
_REPOS = ("webapp", "billing-service", "data-tools", "cli", "frontend", "infra", "analytics", "api")
_BRANCHES = ("main", "main", "main", "develop", "feature/update")
_COMMIT_MSGS = (
    "Fix empty input handling",
    "Add retry logic",
    "Update docs",
    "Resolve merge conflicts",
    "Fix failing test",
    "Add CSV export",
    "Refactor config loading",
    "WIP",
)


def _fill(template: str, rnd: random.Random) -> str:
    if "{" not in template:
        return template
    return template.format(
        file=rnd.choice(_FILES),
        sym=rnd.choice(_SYMS),
        follow=rnd.choice(_FOLLOWS).format(sym=rnd.choice(_SYMS)),
        n=rnd.randint(1, 3),
    )


def _user_text(spec: SessionSpec, kind: str, rnd: random.Random) -> str:
    """A user message: the opening request by task type (``kind="first"``), a follow-up opening a later
    segment (``"next"``) or a message typed while the agent runs (``"interject"``). The tone follows the
    session's sentiment: mood = sentiment_score + N(0, 0.35); negative below -0.15, positive above 0.35.
    Users of another language write in it 80 % of the time."""
    foreign = _FOREIGN.get(spec.language)
    if kind == "first":
        pool = foreign[0] if foreign and rnd.random() < 0.8 else _TASK_REQUESTS[spec.task_type]
        return _fill(rnd.choice(pool), rnd)
    mood = spec.sentiment_score + rnd.gauss(0.0, 0.35)
    if foreign and rnd.random() < 0.8:
        return _fill(rnd.choice(foreign[2] if mood < -0.15 else foreign[1]), rnd)
    if kind == "interject":
        return rnd.choice(_INTERJECTIONS_NEGATIVE if mood < -0.15 else _INTERJECTIONS)
    pool = _NEGATIVE if mood < -0.15 else _POSITIVE if mood > 0.35 else _NEUTRAL
    return _fill(rnd.choice(pool), rnd)


# --------------------------------------------------------------------------------------------------------
# commands: (command, exit code, output)


def _git(kind: str, repo: str, rnd: random.Random) -> tuple[str, str]:
    branch = rnd.choice(_BRANCHES)
    sha1, sha2 = f"{rnd.getrandbits(28):07x}", f"{rnd.getrandbits(28):07x}"
    if kind == "commit":
        msg = rnd.choice(_COMMIT_MSGS)
        cmd = f'git commit -am "{msg}"' if rnd.random() < 0.6 else f'git add -A && git commit -m "{msg}"'
        return cmd, f"[{branch} {sha1}] {msg}\n {rnd.randint(1, 6)} files changed, {rnd.randint(1, 80)} insertions(+)"
    if kind == "push":
        cmd = f"cd {repo} && git push origin {branch}" if rnd.random() < 0.5 else f"git push origin {branch}"
        return cmd, f"To github.com:acme/{repo}.git\n   {sha1}..{sha2}  {branch} -> {branch}"
    if kind == "pull":
        cmd = "git pull --rebase" if rnd.random() < 0.5 else "git pull origin main"
        return cmd, f"Updating {sha1}..{sha2}\nFast-forward\n {rnd.choice(_FILES)} | 4 ++--"
    if kind == "reset":
        cmd = "git reset --hard HEAD~1" if rnd.random() < 0.6 else "git reset --hard origin/main"
        return cmd, f"HEAD is now at {sha1} {rnd.choice(_COMMIT_MSGS)}"
    cmd = "git rebase main" if rnd.random() < 0.6 else "git rebase origin/main"
    return cmd, f"Successfully rebased and updated refs/heads/{branch}."


_TEST_CMDS = ("pytest -q", "python -m pytest tests/", "npm test", "pytest -q tests/test_utils.py")


def _test(passed: bool, rnd: random.Random) -> tuple[str, str]:
    cmd = rnd.choice(_TEST_CMDS)
    n = rnd.randint(3, 40)
    if cmd == "npm test":
        if passed:
            return cmd, f"> jest\n\nTests:       {n} passed, {n} total\nTime:        {rnd.uniform(0.5, 9):.2f} s"
        return cmd, (
            f"> jest\n\nFAIL src/{rnd.choice(_SYMS)}.test.js\n  expected 3, received undefined\n"
            f"Tests:       1 failed, {n} passed, {n + 1} total"
        )
    if passed:
        return cmd, f"{'.' * min(n, 20)} [100%]\n{n} passed in {rnd.uniform(0.1, 12):.2f}s"
    sym = rnd.choice(_SYMS)
    return cmd, (
        f"..F. [100%]\nFAILED tests/test_{sym.lower()}.py::test_{sym.lower()}_edge - "
        f"AssertionError: assert None == []\n1 failed, {n} passed in {rnd.uniform(0.1, 12):.2f}s"
    )


_FAILING = (
    (
        "python scripts/migrate.py",
        1,
        'Traceback (most recent call last):\n  File "scripts/migrate.py", line 3\n'
        "ModuleNotFoundError: No module named 'alembic'",
    ),
    ("cat config/local.yaml", 1, "cat: config/local.yaml: No such file or directory"),
    ("npm run build", 1, "ERROR in ./src/index.tsx\nTS2322: Type 'string' is not assignable to type 'number'."),
    ("make build", 2, "make: *** [Makefile:12: build] Error 1"),
    ("poetry install", 127, "bash: poetry: command not found"),
    ("pip install torch==99.0", 1, "ERROR: No matching distribution found for torch==99.0"),
    (
        "python src/app.py",
        1,
        "Traceback (most recent call last):\n  File \"src/app.py\", line 42, in <module>\nKeyError: 'DATABASE_URL'",
    ),
    (
        "docker build -t app .",
        1,
        'ERROR: failed to solve: process "/bin/sh -c pip install -r req.txt" '
        "did not complete successfully: exit code: 1",
    ),
)
_SUCCEEDING = (
    (
        "ls -la",
        "total 48\ndrwxr-xr-x  8 user user 4096 .\n-rw-r--r--  1 user user 1523 README.md\n"
        "drwxr-xr-x  4 user user 4096 src\ndrwxr-xr-x  2 user user 4096 tests",
    ),
    ("git status", "On branch main\nChanges not staged for commit:\n\tmodified:   src/app.py"),
    ("git diff --stat", " src/app.py | 12 +++++++-----\n 1 file changed, 7 insertions(+), 5 deletions(-)"),
    (
        'grep -rn "load_config" src/',
        "src/app.py:12:from config import load_config\nsrc/cli.py:8:    cfg = load_config()",
    ),
    ("pip install -r requirements.txt", "Successfully installed requests-2.32.3 pydantic-2.8.2"),
    ("npm install", "added 214 packages, and audited 215 packages in 6s"),
    ("find . -name '*.py' | head", "./src/app.py\n./src/utils.py\n./tests/test_utils.py"),
    ("python scripts/check.py", "OK: 12 records checked"),
    ("cat README.md", "# Project\n\nRun `make dev` to start the server."),
)


# --------------------------------------------------------------------------------------------------------
# the event stream


def render_session(spec: SessionSpec, rnd: random.Random) -> RenderedSession:
    """The OpenHands V0 ``history`` of one session (see the module docstring for the shape)."""
    n_seg = spec.n_segments
    # every rendered unit goes to a uniformly random segment; extra user messages too
    tokens: list[list[str]] = [[] for _ in range(n_seg)]
    for kind, count in (
        ("edit", spec.file_edits),
        ("read", spec.n_reads),
        ("ok", spec.n_ok_commands),
        ("tpass", spec.test_runs - spec.test_failures),
        ("tfail", spec.test_failures),
        ("fail", spec.failed_commands - spec.test_failures),
        ("pull", spec.git_pull),
        ("reset", spec.git_reset),
        ("rebase", spec.git_rebase),
        ("commit", spec.git_commit),
        ("push", spec.git_push),
        ("user", spec.user_messages - n_seg),
    ):
        for _ in range(count):
            tokens[rnd.randrange(n_seg)].append(kind)

    repo = rnd.choice(_REPOS)
    history: list[dict[str, Any]] = []
    close_ids: list[int] = []
    close_times: list[str] = []
    clock = [rnd.uniform(0.0, SPAN_SECONDS)]
    cost = [0.0, 0, 0]  # accumulated cost, prompt tokens, completion tokens

    def ts(step_lo: float, step_hi: float) -> str:
        clock[0] += rnd.uniform(step_lo, step_hi)
        return (BASE_TIME + timedelta(seconds=clock[0])).isoformat(timespec="microseconds")

    def state(value: str) -> None:
        history.append(
            {
                "id": len(history),
                "timestamp": ts(0.01, 0.3),
                "source": "environment",
                "message": "",
                "observation": "agent_state_changed",
                "content": "",
                "extras": {"agent_state": value},
            }
        )

    def user(text: str, step: tuple[float, float]) -> None:
        history.append(
            {
                "id": len(history),
                "timestamp": ts(*step),
                "source": "user",
                "message": text,
                "action": "message",
                "args": {"content": text, "image_urls": None, "wait_for_response": False},
            }
        )

    def run(cmd: str, code: int, output: str) -> None:
        aid = len(history)
        cost[0] += rnd.uniform(0.005, 0.04)
        cost[1] += rnd.randint(2000, 9000)
        cost[2] += rnd.randint(50, 400)
        history.append(
            {
                "id": aid,
                "timestamp": ts(1.0, 15.0),
                "source": "agent",
                "message": f"Running command: {cmd}",
                "action": "run",
                "args": {"command": cmd, "is_input": False, "thought": ""},
                "llm_metrics": {
                    "accumulated_cost": round(cost[0], 6),
                    "accumulated_token_usage": {"prompt_tokens": cost[1], "completion_tokens": cost[2]},
                },
            }
        )
        history.append(
            {
                "id": aid + 1,
                "timestamp": ts(0.1, 20.0),
                "source": "agent",
                "message": f"Command `{cmd}` executed with exit code {code}.",
                "cause": aid,
                "observation": "run",
                "content": output,
                "extras": {"command": cmd, "metadata": {"exit_code": code}},
                "success": code == 0,
            }
        )

    def file_op(kind: str) -> None:
        path = rnd.choice(_FILES)
        aid = len(history)
        if kind == "edit":
            sym = rnd.choice(_SYMS)
            history.append(
                {
                    "id": aid,
                    "timestamp": ts(2.0, 20.0),
                    "source": "agent",
                    "message": f"Editing {path}",
                    "action": "edit",
                    "args": {
                        "path": path,
                        "content": f"def {sym}(items):\n    return [i for i in items if i]\n",
                        "thought": "",
                    },
                }
            )
            history.append(
                {
                    "id": aid + 1,
                    "timestamp": ts(0.05, 0.5),
                    "source": "agent",
                    "message": f"I edited the file {path}.",
                    "cause": aid,
                    "observation": "edit",
                    "content": f"--- a/{path}\n+++ b/{path}\n@@ -10,3 +10,3 @@\n-    return None\n"
                    "+    return [i for i in items if i]\n",
                    "extras": {"path": path},
                }
            )
        else:
            history.append(
                {
                    "id": aid,
                    "timestamp": ts(1.0, 8.0),
                    "source": "agent",
                    "message": f"Reading {path}",
                    "action": "read",
                    "args": {"path": path, "content": "", "thought": ""},
                }
            )
            history.append(
                {
                    "id": aid + 1,
                    "timestamp": ts(0.05, 0.5),
                    "source": "agent",
                    "message": f"I read the file {path}.",
                    "cause": aid,
                    "observation": "read",
                    "content": "import os\n\n\ndef main():\n    ...\n",
                    "extras": {"path": path},
                }
            )

    state("loading")
    state("init")
    last = n_seg - 1
    for s, units in enumerate(tokens):
        user(_user_text(spec, "first" if s == 0 else "next", rnd), (0.5, 3.0) if s == 0 else (15.0, 600.0))
        state("running")
        # reads first, then the work in random order, commits and pushes last (commit before push)
        body = [u for u in units if u not in ("read", "commit", "push")]
        rnd.shuffle(body)
        ordered = (
            ["read"] * units.count("read") + body + ["commit"] * units.count("commit") + ["push"] * units.count("push")
        )
        failures = 0
        for u in ordered:
            if u == "edit" or u == "read":
                file_op(u)
            elif u == "user":
                user(_user_text(spec, "interject", rnd), (1.0, 30.0))
            elif u == "ok":
                cmd, out = rnd.choice(_SUCCEEDING)
                run(cmd, 0, out)
            elif u == "fail":
                failures += 1
                run(*rnd.choice(_FAILING))
            elif u == "tpass" or u == "tfail":
                cmd, out = _test(u == "tpass", rnd)
                failures += u == "tfail"
                run(cmd, 0 if u == "tpass" else 1, out)
            else:
                cmd, out = _git(u, repo, rnd)
                run(cmd, 0, out)
        cid = len(history)
        if s == last and spec.finished:
            text = _fill(rnd.choice(_FINISH), rnd)
            history.append(
                {
                    "id": cid,
                    "timestamp": ts(1.0, 10.0),
                    "source": "agent",
                    "message": text,
                    "action": "finish",
                    "args": {"outputs": {}, "thought": text},
                }
            )
            close_times.append(history[-1]["timestamp"])
            state("finished")
        else:
            text = _fill(rnd.choice(_AGENT_STUCK if failures and rnd.random() < 0.7 else _AGENT_DONE), rnd)
            history.append(
                {
                    "id": cid,
                    "timestamp": ts(1.0, 10.0),
                    "source": "agent",
                    "message": text,
                    "action": "message",
                    "args": {"content": text, "image_urls": None, "wait_for_response": True},
                }
            )
            close_times.append(history[-1]["timestamp"])
            state("awaiting_user_input")
        close_ids.append(cid)
    return RenderedSession(history, close_ids, close_times)
