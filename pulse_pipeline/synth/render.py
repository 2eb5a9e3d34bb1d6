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
from functools import lru_cache
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
    mood_location: float  # words_tone * sentiment_score: the mean mood of the user's follow-ups


@dataclass(frozen=True)
class RenderedSession:
    history: list[dict[str, Any]]
    close_ids: list[int]  # per segment: id of its closing agent message / finish (the rated event)
    close_times: list[str]  # per segment: timestamp of that event


def session_specs(table: SessionTable, seed: int, params: GeneratorParams | None = None) -> list[SessionSpec]:
    """One ``SessionSpec`` per session. The rendered-only filler is drawn vectorized:
    reads ~ Poisson(read_rate * n_segments), succeeding other commands ~ Poisson(other_cmd_rate * n_segments).
    ``mood_location = words_tone * sentiment_score`` sets how much the user's words say (see ``_user_text``).
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
        p.words_tone * table.sentiment_score,
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

# A follow-up's mood level: -2 (very unhappy) .. +2 (very happy); 0 says nothing about satisfaction.
# Each level has many phrasings, and the cue words overlap across levels (``thanks, but``, ``not bad``,
# ``still``), so no single word gives the label away: the signal is in how the levels mix over a session.
_REACTIONS: dict[int, tuple[str, ...]] = {
    2: (
        "perfect, exactly what I needed!",
        "awesome, works great",
        "great job, that's exactly right.",
        "excellent, the tests pass on my side too.",
        "love it, much cleaner than before.",
        "wow, that was fast. works perfectly",
        "brilliant, merged it already.",
        "super helpful, thank you!",
        "this is excellent.",
    ),
    1: (
        "ok, that works.",
        "looks good.",
        "nice, the build is green now.",
        "good, that fixed it.",
        "better, thanks.",
        "fine, works for me.",
        "cool, that's it.",
        "not bad, the output looks right now.",
        "yep, confirmed on my side.",
    ),
    0: (
        "ok.",
        "I see.",
        "hmm, let me check.",
        "got it.",
        "alright.",
        "one more thing.",
        "noted.",
    ),
    -1: (
        "hmm, not quite.",
        "it still fails on my side.",
        "that didn't fix it.",
        "not what I expected, the output looks off.",
        "close, but the edge case is still broken.",
        "thanks, but the tests are red again.",
        "I don't think that's right.",
        "the same error is back.",
        "it works locally but not in CI.",
        "meh, the numbers look off.",
        "hmm, {sym} gives a different result now.",
        "that only half works.",
        "I expected something simpler.",
    ),
    -2: (
        "no, wrong approach.",
        "this is not what I asked for.",
        "you broke the build.",
        "why did you delete the tests?? put them back",
        "ugh, it's worse now.",
        "please leave the files I didn't mention alone.",
        "that's useless, revert it.",
        "you forgot what I said earlier: don't touch {file}.",
        "seriously? the same bug again.",
        "makes no sense to me.",
        "terrible, nothing runs anymore.",
        "do you even read my messages?",
        "I give up on this approach, undo everything.",
        "you ignored the requirement about {sym}.",
    ),
}
_INSTRUCTIONS = (  # mood-free: what the user asks next
    "{follow}",
    "can you {follow}",
    "next, {follow}",
    "also {follow}",
    "now {follow}",
    "run the tests again",
    "show me the diff",
    "what does {sym} do exactly",
    "check {file} as well",
    "why does {sym} take a list",
    "didn't we have a helper for this in {file}",
    "run it again with -v",
    "add this to the changelog",
    "why is {file} so slow to import",
)
_POLITE_INSTRUCTIONS = (  # mood-free, from a polite user
    "please {follow}",
    "could you please {follow}",
    "would you {follow}",
    "when you get a chance, please {follow}",
    "could you run the tests again",
    "please show me the diff",
)
_POLITE_THANKS = ("thanks.", "thank you!", "thx", "appreciate it.")
_VERBOSE_CONTEXT = (  # mood-free context a verbose user adds
    "For context, this runs in our nightly job.",
    "I'm on macOS with Python 3.11, if that matters.",
    "The team lead wants this before Friday's release.",
    "I tried it on a clean checkout of main.",
    "Keep the public API the same, other services import it.",
    "We use pytest and ruff in CI.",
    "The config lives in config/settings.py.",
)
_INTERJECTIONS: dict[int, tuple[str, ...]] = {  # typed while the agent runs: mood-free unless the mood is strong
    1: ("nice, keep going", "looks promising so far", "good direction", "oh nice, that's quick", "yes, like that"),
    0: (
        "also, keep the old function signature.",
        "wait, use the staging branch.",
        "btw the config is in .env",
        "don't forget the tests",
        "fyi {file} is generated, don't edit it by hand",
        "the API key is in the vault, not in the repo",
        "use the existing helper in {file}",
        "I'll be back in 10 min",
    ),
    -1: (
        "hold on, that's the wrong file",
        "wait, that's not what I meant",
        "you're reinstalling packages for nothing",
        "hurry please, the release waits on it",
        "not this again",
        "careful, you're about to break {file}",
        "that looks like a dead end",
        "taking forever...",
    ),
}
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
_FOREIGN: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # (task opener, positive, neutral, negative follow-up) by language
    "es": (
        ("Hay un error en {file}, ¿puedes arreglarlo?", "Necesito que implementes {sym} en {file}."),
        ("gracias, funciona!", "perfecto, eso era.", "bien, ya pasan las pruebas."),
        ("ok, ahora agrega pruebas por favor.", "¿qué hace {sym} exactamente?", "revisa también {file}."),
        ("no, eso no es lo que pedí.", "sigue fallando, revisa {file}.", "ahora está peor, deshazlo."),
    ),
    "de": (
        ("In {file} ist ein Fehler, kannst du ihn beheben?", "Bitte implementiere {sym} in {file}."),
        ("danke, das funktioniert!", "super, genau so.", "sieht gut aus."),
        ("ok, bitte noch Tests hinzufügen.", "was macht {sym} genau?", "schau dir auch {file} an."),
        ("nein, das habe ich nicht gemeint.", "es schlägt immer noch fehl.", "das ist falsch, mach das rückgängig."),
    ),
    "zh": (
        ("{file} 里有个bug，帮我修一下。", "请在 {file} 中实现 {sym}。"),
        ("谢谢，可以了！", "很好，就是这样。", "不错，测试通过了。"),
        ("好的，再加几个测试。", "{sym} 具体是做什么的？", "也看一下 {file}。"),
        ("不对，我不是这个意思。", "还是失败，请再检查一下 {file}。", "更糟了，请撤销。"),
    ),
    "pt": (
        ("Tem um bug em {file}, pode corrigir?", "Implemente {sym} em {file}, por favor."),
        ("valeu, funcionou!", "perfeito, era isso.", "ótimo, os testes passam."),
        ("ok, agora adicione testes.", "o que {sym} faz exatamente?", "veja também {file}."),
        ("não, não foi isso que eu pedi.", "ainda está falhando.", "piorou, desfaça isso."),
    ),
    "fr": (
        ("Il y a un bug dans {file}, tu peux le corriger ?", "Implémente {sym} dans {file} s'il te plaît."),
        ("merci, ça marche !", "parfait, c'est exactement ça.", "bien, les tests passent."),
        ("ok, ajoute des tests maintenant.", "que fait {sym} exactement ?", "regarde aussi {file}."),
        ("non, ce n'est pas ce que je voulais.", "ça échoue toujours.", "c'est pire, annule ça."),
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


class UserStyle(NamedTuple):
    """How one user writes, whatever their mood (drawn from the user id alone, so it carries no satisfaction)."""

    verbosity: int  # 0 terse (reaction or instruction, rarely both), 1 plain, 2 verbose (adds context)
    politeness: int  # 0 blunt, 1 plain, 2 polite ("please", "thanks" even when unhappy)
    typo_rate: float  # per-word probability of a typo
    lowercase: bool  # writes everything in lower case


@lru_cache(maxsize=65536)
def user_style(user_id: str) -> UserStyle:
    """The user's style, from ``random.Random("style/" + user_id)``: verbosity 0/1/2 with probabilities
    .3/.45/.25, politeness 0/1/2 with .3/.4/.3, typo rate 0 (60 %), .02, .05 or .1 per word, lower case 30 %."""
    rnd = random.Random(f"style/{user_id}")
    return UserStyle(
        verbosity=rnd.choices((0, 1, 2), (0.3, 0.45, 0.25))[0],
        politeness=rnd.choices((0, 1, 2), (0.3, 0.4, 0.3))[0],
        typo_rate=rnd.choice((0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.02, 0.02, 0.05, 0.1)),
        lowercase=rnd.random() < 0.3,
    )


def _typos(text: str, rate: float, rnd: random.Random) -> str:
    """Each word of 4+ letters gets, with probability ``rate``, one typo: two neighbouring letters swapped,
    a letter dropped or a letter doubled."""
    words = text.split(" ")
    for k, word in enumerate(words):
        if len(word) >= 4 and word.isalpha() and rnd.random() < rate:
            j = rnd.randrange(1, len(word) - 1)
            kind = rnd.randrange(3)
            if kind == 0:
                words[k] = word[: j - 1] + word[j] + word[j - 1] + word[j + 1 :]
            elif kind == 1:
                words[k] = word[:j] + word[j + 1 :]
            else:
                words[k] = word[: j + 1] + word[j:]
    return " ".join(words)


def mood_level(mood: float) -> int:
    """The mood's level: -2 below -1.5, -1 below -0.5, 0 up to 0.5, +1 up to 1.5, +2 above."""
    return -2 if mood < -1.5 else -1 if mood < -0.5 else 0 if mood <= 0.5 else 1 if mood <= 1.5 else 2


def _english(style: UserStyle, kind: str, level: int, task_type: str, rnd: random.Random) -> str:
    """The English text of a message at a mood level, in the user's style (see ``_user_text``)."""
    if kind == "first":
        text = rnd.choice(_TASK_REQUESTS[task_type])
        if style.politeness == 2:
            text = f"Hi! {text} Thanks in advance."
        elif style.verbosity == 2:
            text = f"{text} {rnd.choice(_VERBOSE_CONTEXT)}"
        return text
    if kind == "interject":
        return rnd.choice(_INTERJECTIONS[(level > 1) - (level < -1)])  # only a strong mood shows
    polite = style.politeness == 2 and rnd.random() < 0.6
    ask = rnd.choice(_POLITE_INSTRUCTIONS if polite else _INSTRUCTIONS)
    ask += "?" if ask.startswith(("can", "could", "would", "what", "why", "didn")) else "."
    react = rnd.choice(_REACTIONS[level])
    if style.verbosity == 0:  # terse: one of the two, the reaction only when there is one
        parts = [react] if level != 0 and rnd.random() < 0.6 else [ask]
    else:
        parts = [react, ask] if level != 0 or rnd.random() < 0.3 else [ask]
        if style.verbosity == 2:
            parts.insert(1, rnd.choice(_VERBOSE_CONTEXT))
    if style.politeness == 2 and rnd.random() < 0.4:
        parts.append(rnd.choice(_POLITE_THANKS))
    return " ".join(parts)


def _user_text(spec: SessionSpec, kind: str, rnd: random.Random) -> str:
    """A user message: the opening request by task type (``kind="first"``), a follow-up opening a later
    segment (``"next"``) or a message typed while the agent runs (``"interject"``).

    Why: a text model reads these words, and it should find in them about as much satisfaction as in real
    users' words (see ``GeneratorParams.words_tone``): many weak cues mixed with noise. A follow-up's mood is
    ``spec.mood_location + N(0, 1)`` (``mood_location = words_tone * sentiment_score``), cut into five levels
    (``mood_level``); a follow-up is a reaction of that level (several phrasings each) and/or a mood-free
    instruction. The opening request is written before any outcome and carries no mood. Around that, the
    user's style (``user_style``: terse or verbose, blunt or polite, typos, lower case) changes the wording but
    not the mood. Users of another language write in it 80 % of the time (a few phrases per mood sign)."""
    style = user_style(spec.user_id)
    level = 0 if kind == "first" else mood_level(spec.mood_location + rnd.gauss(0.0, 1.0))
    foreign = _FOREIGN.get(spec.language)
    if foreign and rnd.random() < 0.8:
        text = rnd.choice(foreign[0] if kind == "first" else foreign[2 - (level > 0) + (level < 0)])
    else:
        text = _english(style, kind, level, spec.task_type, rnd)
    text = _fill(text, rnd)
    if style.lowercase:
        text = text.lower().rstrip(".")
    return _typos(text, style.typo_rate, rnd) if style.typo_rate else text


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
