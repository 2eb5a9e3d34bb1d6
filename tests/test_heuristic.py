"""The offline annotator: each rule on hand-written sessions (answers worked out by hand), fallbacks, the rule
registry, and one direction check of VADER sentiment on a synthetic corpus."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from pulse_pipeline.features import heuristic as h
from pulse_pipeline.features.annotation import AgentStep, SessionTranscript
from pulse_pipeline.features.heuristic import RULES, HeuristicAnnotator, SessionView, UnknownRuleError
from pulse_pipeline.features.heuristic.phrases import PHRASES_FILE, PhraseTableError, load_phrase_tables
from pulse_pipeline.features.rubric import DEFAULT_RUBRIC, RubricFeature, load_rubric

RUBRIC = load_rubric(DEFAULT_RUBRIC)


def session(*users: str, steps: tuple[AgentStep, ...] = (), sid: str = "s1") -> SessionTranscript:
    return SessionTranscript(sid, tuple(users), tuple(steps))


def ask(t: SessionTranscript, name: str):
    if name in ("loop_behavior", "frustration"):
        f = RubricFeature(name, "an extension", "yes_no", "issues", name)
    else:
        f = RUBRIC.get(name)
    return RULES[f.heuristic](SessionView(t), f)


def run(cmd: str, exit_code: int | None = 0) -> AgentStep:
    return AgentStep("run", cmd, exit_code)


def edit(path: str, written: str | None = "x = 1\n" * 10) -> AgentStep:
    return AgentStep("edit", path, None, written)


def write(path: str, written: str = "x = 1\n" * 10) -> AgentStep:
    return AgentStep("write", path, None, written)


def read(path: str) -> AgentStep:
    return AgentStep("read", path)


# ------------------------------------------------------------------------------------------------------------
# VADER


def test_vader_sentiment_direction_and_evidence():
    pos = ask(session("Thanks, this works perfectly! Great job, I love it."), "sentiment")
    assert pos.value == "Positive"
    assert "most positive" in pos.explanation and '"Thanks, this works perfectly!' in pos.explanation
    neg = ask(session("This is terrible. It still fails and I hate this awful mess."), "sentiment")
    assert neg.value == "Negative" and "most negative" in neg.explanation
    flat = ask(session("Rename the function parse_items to parse_rows."), "sentiment")
    assert flat.value == "Neutral" and "no sentiment words" in flat.explanation
    # the mean over messages: +0.8 and -0.8 cancel out
    mixed = ask(session("great, perfect, thanks!", "awful, terrible, broken!"), "sentiment")
    assert mixed.value == "Neutral" and "most positive" in mixed.explanation and "most negative" in mixed.explanation


# ------------------------------------------------------------------------------------------------------------
# task type and development clusters


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("There's a bug in the parser: it crashes with a traceback on empty input. Please fix it.", "Fix Bugs"),
        ("Add a --dry-run flag to the CLI so it prints what would change.", "Implement Features"),
        (
            "Create a small Python script that watches a folder and uploads new files to S3.",
            "Create Programs from Scratch",
        ),
        (
            "Our CI is red since yesterday, the GitHub Actions test job fails. Fix it.",
            "Fix Failing Continuous Integration",
        ),
        (
            "I have merge conflicts after rebasing on main, please resolve them and keep both features.",
            "Fix Merge Conflicts",
        ),
        ("Write a README section explaining how to configure the service.", "Write Documentation"),
        ("Deploy the current main branch to staging with Docker.", "Perform Deployments"),
        ("Analyze the sales dataset and plot revenue by region.", "Perform Data Analysis"),
    ],
)
def test_task_type_clear_examples(message, expected):
    a = ask(session(message), "task_type")
    assert a.value == expected, a.explanation
    assert a.explanation.startswith("first message:")


def test_task_type_ties_paths_fallbacks():
    # "bug"(3)+"fix"(1)=4 against "ci"(3)+"workflow"(1)=4 would tie and CI would win by priority, but the CI words
    # are inside a path, which is skipped: Fix Bugs 4 alone
    a = ask(session("There's a bug in .github/workflows/ci.yml, can you fix it?"), "task_type")
    assert a.value == "Fix Bugs" and "Fix Failing" not in a.explanation
    # a tie: "merge conflicts"(3) vs "features"(3) -> merge conflicts come first in TASK_PRIORITY
    assert ask(session("merge conflicts between the two features"), "task_type").value == "Fix Merge Conflicts"
    # the first message matches nothing: the later ones decide
    a = ask(session("Hallo!", "the export crashes with a traceback"), "task_type")
    assert a.value == "Fix Bugs" and a.explanation.startswith("later messages:")
    # nothing matches at all
    a = ask(session("Bonjour, peux-tu regarder ça ?"), "task_type")
    assert (a.value, a.explanation) == ("Implement Features", "no keyword matched; default Implement Features")


def test_development_clusters():
    f = RUBRIC.get("development_cluster")
    a = ask(session("pytest fails in tests/test_api.py after the pip upgrade", "run the tests again"), f.name)
    # python: pytest, pip, .py (3); testing: pytest, tests (2) -> both, in the rubric's option order
    assert a.value == "Fix python issues|Testing code", a.explanation
    a = ask(session("The maven build of Main.java fails with a NullPointerException on startup today"), f.name)
    assert a.value.split("|")[0] == "Fix Java issues"
    a = ask(session("Build me a new app from scratch: a todo list in Node, with a small REST backend please"), f.name)
    assert a.value == "Write code from scratch", a.explanation
    a = ask(session("Look up the rate limits on https://docs.example.com and configure the client accordingly"), f.name)
    assert a.value == "Web browsing and research|Administrative tasks"
    a = ask(session("make it better"), f.name)
    assert a.value == "Fix underspecified issues" and "short first message" in a.explanation
    a = ask(
        session("Bitte ändere die Farbe der Schaltfläche auf der Startseite und prüfe das Ergebnis gründlich danach"),
        f.name,
    )
    assert (a.value, a.explanation) == ("None of the above", "no keyword matched")
    assert (
        len(ask(session("python pip pytest tests jest deploy config docker ci workflow"), f.name).value.split("|")) == 2
    )


# ------------------------------------------------------------------------------------------------------------
# failure modes


def test_user_correction():
    a = ask(
        session("Summarize the module.", "No, I meant a summary of the API, not a rewrite."), "misunderstood_intention"
    )
    assert (
        a.value == "YES" and 'message 2 says "No, I meant a summary' in a.explanation and '("i meant")' in a.explanation
    )
    assert ask(session("Wrong file again", "thanks"), "misunderstood_intention").value == "NO"  # first message only
    a = ask(session("Summarize the module.", "Great, thanks."), "misunderstood_intention")
    assert (a.value, a.explanation) == ("NO", "no correction phrase in 1 later message")
    assert ask(session("x", "That’s not what I asked for"), "misunderstood_intention").value == "YES"  # curly '


def test_instruction_repeated():
    f = "did_not_follow_instruction"
    assert ask(session("Fix the test.", "As I said, keep the old signature."), f).value == "YES"
    assert ask(session("Fix the test.", "ok. Again, use the staging branch."), f).value == "YES"
    assert ask(session("Fix the test.", "run the tests again, please"), f).value == "NO"  # not sentence-initial
    steps = (run("pytest"), run("git push origin main"))
    a = ask(session("Fix the flaky test. Do NOT push to main.", steps=steps), f)
    assert (
        a.value == "YES"
        and "`git push origin main`" in a.explanation
        and '"Fix the flaky test. Do NOT push to main."' in a.explanation
    )
    # pushing another branch does not break "don't push to main"; "don't forget to push" is no prohibition
    assert ask(session("Do NOT push to main.", steps=(run("git push origin fix/flaky"),)), f).value == "NO"
    assert ask(session("Fix it and don't forget to push.", steps=(run("git push"),)), f).value == "NO"
    a = ask(session("Please never open a pull request.", steps=(AgentStep("send_pr", "Fix flaky test"),)), f)
    assert a.value == "YES"
    a = ask(session("Fix it, but don't commit.", steps=(run('git commit -am "fix"'),)), f)
    assert a.value == "YES"
    assert ask(session("Fix it.", steps=(run('git commit -am "fix"'),)), f).value == "NO"


def test_edits_before_reading():
    f = "insufficient_analysis"
    a = ask(session("Fix it.", steps=(edit("src/app.py"), read("src/app.py"))), f)
    assert a.value == "YES" and "step 1 (edit `src/app.py`)" in a.explanation and "step 2" in a.explanation
    a = ask(session("Fix it.", steps=(run("cd repo && grep -rn parse src/"), edit("src/app.py"))), f)
    assert a.value == "NO" and "grep" in a.explanation
    assert ask(session("Fix it.", steps=(run("ls"), edit("src/app.py"))), f).value == "NO"
    assert ask(session("Fix it.", steps=(run("pytest"), edit("src/app.py"))), f).value == "YES"  # no read at all
    # a shell write is an edit, not a read
    assert ask(session("Fix it.", steps=(run("cat > a.py <<EOF\nx\nEOF"), read("a.py"))), f).value == "YES"
    a = ask(session("Add a helper.", "There is already a helper for that in utils.py"), f)
    assert a.value == "YES" and "there is already" in a.explanation
    assert ask(session("Explain the code."), f).explanation == "no file edits"


def test_edits_without_tests():
    f = "insufficient_testing"
    two_edits = (read("src/a.py"), edit("src/a.py"), edit("src/b.py"))
    a = ask(session("Refactor.", steps=two_edits), f)
    assert a.value == "YES" and "2 edits (2 files: src/a.py, src/b.py), 20 lines written" in a.explanation
    assert ask(session("Refactor.", steps=(*two_edits, run("python -m pytest -q", 0))), f).value == "NO"
    assert ask(session("Refactor.", steps=(*two_edits, run("npm test", 1))), f).value == "NO"  # a test ran
    assert ask(session("Refactor.", steps=(*two_edits, run("python src/b.py"))), f).value == "NO"  # ran an edit
    billing = (edit("src/app.py"), edit("src/billing.py"))
    assert ask(session("Refactor.", steps=(*billing, run('python -c "from src.billing import f"'))), f).value == "NO"
    assert ask(session("Refactor.", steps=(*billing, run("cd web-app && python3 -m http.server"))), f).value == "YES"
    a = ask(session("Refactor.", steps=(edit("src/a.py", ""), edit("src/a.py", None))), f)  # "" is "not known"
    assert a.value == "YES" and "(1 file: src/a.py), written code not known" in a.explanation
    assert ask(session("Refactor.", steps=(run("pytest"), *two_edits)), f).value == "YES"  # tests before edits
    assert ask(session("Refactor.", steps=(*two_edits, run("grep -rn pytest ."))), f).value == "YES"  # a search
    assert ask(session("Refactor.", steps=(*two_edits, run("cd repo && pytest -q | tail -5"))), f).value == "NO"
    a = ask(session("Typo.", steps=(edit("src/a.py", "x = 2\n"),)), f)
    assert a.value == "NO" and a.explanation == "trivial: one edit (1 line)"
    a = ask(session("Docs.", steps=(edit("README.md"), edit("docs/usage.md"))), f)
    assert a.value == "NO" and a.explanation.startswith("documentation only")
    assert ask(session("Read."), f).value == "NO"


def test_reads_and_test_runs_find_programs_as_the_shell_module_does():
    """Version 3: a read or a ``python test_*.py`` run is found past keywords, wrapper options and ``sh -c``."""
    f = "insufficient_analysis"
    for line in ("sudo -u me cat src/app.py", "if grep -q parse src/app.py; then echo y; fi", "sh -c 'ls src'"):
        assert ask(session("Fix it.", steps=(run(line), edit("src/app.py"))), f).value == "NO", line
    assert ask(session("Fix it.", steps=(run("command -v cat"), edit("src/app.py"))), f).value == "YES"
    two_edits = (read("src/a.py"), edit("src/a.py"), edit("src/b.py"))
    for line in ("/usr/bin/python3 tests/test_a.py", "pypy3 test_a.py"):
        assert ask(session("Refactor.", steps=(*two_edits, run(line))), "insufficient_testing").value == "NO", line


def test_repeated_failing_command():
    f = "insufficient_debugging"
    a = ask(session("Fix.", steps=(run("npm run build", 1), read("x"), run("npm  run build", 1))), f)
    assert a.value == "YES" and "`npm run build` failed 2 times, exit 1" in a.explanation
    steps = (run("npm run build", 1), edit("src/a.ts"), run("npm run build", 1), run("npm test", 0))
    assert ask(session("Fix.", steps=steps), f).value == "NO"  # an edit between the failures; tests pass at the end
    a = ask(session("Fix.", steps=(run("pytest -q", 0), edit("a.py"), run("pytest -q", 1))), f)
    assert a.value == "YES" and "the last test run" in a.explanation and "exit 1" in a.explanation
    a = ask(session("Fix.", steps=(run("pytest -q", 1), edit("a.py"), run("pytest -q", 0))), f)
    assert a.value == "NO" and "last test run passed" in a.explanation


def test_todo_left_or_unfinished():
    f = "incomplete_implementation"
    a = ask(session("Add it.", steps=(edit("a.py", "def f():\n    # TODO: handle the timeout\n    return 1\n"),)), f)
    assert a.value == "YES" and "# TODO: handle the timeout" in a.explanation
    assert ask(session("Add it.", steps=(edit("a.py", "def f():\n    raise NotImplementedError\n"),)), f).value == "YES"
    assert ask(session("Add it.", steps=(write("a.py", "def f(x: int) -> int:\n    ...\n"),)), f).value == "YES"
    assert ask(session("Add it.", steps=(write("a.pyi", "def f(x: int) -> int: ...\n"),)), f).value == "NO"
    assert ask(session("Add it.", steps=(edit("a.js", "// FIXME later\n"),)), f).value == "YES"
    todo_app = "todo_list = []\ndef add_todo(item):\n    todo_list.append(item)\n"  # the word, not a marker
    assert ask(session("Build a todo app.", steps=(write("todo.py", todo_app),)), f).value == "NO"
    a = ask(session("Add it.", "You didn't finish the export."), f)
    assert a.value == "YES" and "you didn't finish" in a.explanation


def test_unrequested_additions():
    f = "scope_creep"
    a = ask(session("Add a flag.", "Why did you add a dashboard? I didn't ask for that."), f)
    assert a.value == "YES" and "message 2" in a.explanation
    fix = "There's a bug in the invoice total, please fix it."
    extra = (
        read("billing/invoice.py"),
        edit("billing/invoice.py"),
        write("analytics/dashboard.py"),
        write("metrics.py"),
    )
    a = ask(session(fix, steps=extra), f)
    assert a.value == "YES" and "analytics/dashboard.py, metrics.py" in a.explanation
    one = (edit("billing/invoice.py"), write("analytics/dashboard.py"), write("tests/test_invoice_total.py"))
    assert ask(session(fix, steps=one), f).value == "NO"  # one unrelated file, and test files do not count
    assert ask(session(fix, steps=(write("invoice_total.py"), write("billing_fix.py"))), f).value == "NO"  # related
    assert ask(session("Add a CSV export feature.", steps=extra), f).value == "NO"  # not a fix


def test_loop_behavior_and_frustration_extensions():
    three = (run("make", 2), read("Makefile"), run("make", 2), edit("Makefile"), run("make", 2))
    a = ask(session("Build it.", steps=three), "loop_behavior")
    assert a.value == "YES" and "`make` ran 3 times" in a.explanation
    assert ask(session("Build it.", steps=three[:3]), "loop_behavior").value == "NO"
    assert ask(session("Build it."), "loop_behavior").explanation == "no failing action"
    assert ask(session("Fix it.", "ugh, still broken"), "frustration").value == "YES"
    assert ask(session("Fix it.", "why is it failing again???!!!"), "frustration").value == "YES"
    a = ask(session("WHY DID YOU DELETE THE TESTS"), "frustration")
    assert a.value == "YES" and "shouts" in a.explanation
    assert ask(session("Do NOT push, do NOT commit, just show me the diff."), "frustration").value == "NO"
    a = ask(session("This is horrible, terrible and awful."), "frustration")
    assert a.value == "YES" and "VADER compound" in a.explanation
    assert ask(session("Please add a unit test for the parser."), "frustration").value == "NO"


# ------------------------------------------------------------------------------------------------------------
# the annotator: fallbacks, caps, registry, versions


def test_no_user_message_is_skipped_with_fallbacks():
    ann = HeuristicAnnotator(RUBRIC)
    for t in (session(steps=(run("ls"),)), session("   ", "")):
        (a,) = ann.annotate([t], RUBRIC)
        assert a.status == "skipped" and a.task_description == ""
        assert set(a.answers) == {f.name for f in RUBRIC.features}
        assert all((x.value, x.explanation) == ("", "no user message") for x in a.answers.values())


def test_non_english_gets_explained_fallbacks():
    (a,) = HeuristicAnnotator(RUBRIC).annotate(
        [session("请帮我看看这个页面为什么这么慢，谢谢你的帮助和耐心。")], RUBRIC
    )
    assert a.status == "ok"
    assert a.answers["sentiment"].value == "Neutral"
    assert a.answers["task_type"].explanation.startswith("no keyword matched")
    assert a.answers["misunderstood_intention"].value == "NO"
    assert all(x.explanation for x in a.answers.values())


def test_one_megabyte_message_is_capped():
    rnd = random.Random(1)
    words = ["the", "parser", "fails", "again", "please", "fix", "thanks", "bug", "in", "module"]
    huge = " ".join(rnd.choice(words) for _ in range(200_000))[:1_000_000]
    t = session(huge + " thanks, great work!", "ok", steps=(edit("a.py", "y = 2\n" * 100_000), run("pytest", 0)))
    (a,) = HeuristicAnnotator(RUBRIC).annotate([t], RUBRIC)  # finishes in well under a second
    assert a.status == "truncated" and "20000" in a.notes["truncated"] and "2 texts" in a.notes["truncated"]
    assert a.answers["task_type"].value == "Fix Bugs"
    assert len(a.task_description) <= 200


def test_unknown_rule_is_named_at_construction(tmp_path: Path):
    text = DEFAULT_RUBRIC.read_text(encoding="utf-8") + (
        '\n[[feature]]\nname = "tone"\ndefinition = "d"\nvalue_type = "yes_no"\nprompt = "issues"\n'
        'heuristic = "no_such_rule"\n'
    )
    path = tmp_path / "rubric.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UnknownRuleError) as err:
        HeuristicAnnotator(load_rubric(path))
    message = str(err.value)
    assert "'tone'" in message and "'no_such_rule'" in message and "vader_sentiment" in message
    assert "frustration" in message and "loop_behavior" in message


def test_extension_rubric_and_versions(tmp_path: Path):
    text = DEFAULT_RUBRIC.read_text(encoding="utf-8") + "".join(
        f'\n[[feature]]\nname = "{n}"\ndefinition = "d"\nvalue_type = "yes_no"\nprompt = "issues"\nheuristic = "{n}"\n'
        for n in ("loop_behavior", "frustration")
    )
    path = tmp_path / "rubric.toml"
    path.write_text(text, encoding="utf-8")
    rubric = load_rubric(path)
    ann = HeuristicAnnotator(rubric)
    assert ann.name == "heuristic"
    t = session("Fix the crash in the importer. It happens on every run!", "ugh")
    (a,) = ann.annotate([t], rubric)
    assert a.prompt_version == f"heuristic-{h.HEURISTIC_VERSION}-paper-a2-{rubric.digest}"
    assert a.task_description == "Fix the crash in the importer."
    assert a.answers["frustration"].value == "YES" and a.answers["loop_behavior"].value == "NO"
    assert ann.annotate([t], rubric) == [a]  # deterministic


def test_phrase_file_errors_name_the_file_and_the_phrase(tmp_path: Path):
    assert load_phrase_tables().phrases["correction"][0] == "no i meant"
    bad = tmp_path / "phrases.toml"
    bad.write_text(PHRASES_FILE.read_text(encoding="utf-8").replace('"no i meant"', '"No I meant!"'), encoding="utf-8")
    with pytest.raises(PhraseTableError, match=r"phrases.toml: correction phrase 'No I meant!' must be lower case"):
        load_phrase_tables(bad)
    bad.write_text("[phrases]\ncorrection = []\n", encoding="utf-8")
    with pytest.raises(PhraseTableError, match=r"needs \[\[task_type\]\] and \[\[cluster\]\] entries"):
        load_phrase_tables(bad)


def test_a_failing_rule_fails_the_session_not_the_run():
    def broken(t, f):
        raise RuntimeError("boom")

    ann = HeuristicAnnotator(RUBRIC, rules={"vader_sentiment": broken})
    a, b = ann.annotate([session("hi"), session("thanks")], RUBRIC)
    assert a.status == b.status == "failed" and "sentiment (vader_sentiment): RuntimeError('boom')" in a.error
    assert "sentiment" not in a.answers and a.answers["task_type"].value


def test_every_rule_is_documented_in_the_module_docstring():
    for name in RULES:
        assert f"\n{name}" in h.__doc__, name


# ------------------------------------------------------------------------------------------------------------
# usefulness: on a synthetic corpus, VADER's Positive share follows the generator's sentiment


def _transcripts(folder: Path) -> list[SessionTranscript]:
    out = []
    for path in sorted(folder.glob("sessions-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            users = [
                e["args"]["content"]
                for e in record["history"]
                if e.get("source") == "user" and e.get("action") == "message"
            ]
            out.append(SessionTranscript(record["session_id"], tuple(users)))
    return out


def test_sentiment_follows_synthetic_truth(tmp_path: Path):
    from pulse_pipeline.synth import write_corpus

    write_corpus(tmp_path, 300, seed=1)
    with open(tmp_path / "_sessions_truth.csv", newline="") as fh:
        truth = {r["session_id"]: float(r["sentiment_score"]) for r in csv.DictReader(fh)}
    annotations = HeuristicAnnotator(RUBRIC).annotate(_transcripts(tmp_path), RUBRIC)
    happy = [a.answers["sentiment"].value == "Positive" for a in annotations if truth[a.session_id] > 0.3]
    unhappy = [a.answers["sentiment"].value == "Positive" for a in annotations if truth[a.session_id] < -0.3]
    assert len(happy) >= 30 and len(unhappy) >= 30
    # the generator's words carry tone only as weak, noisy cues (as real users' do; synth.render._user_text):
    # here 86 % vs 61 % Positive, s.e. of the difference ~0.06
    assert sum(happy) / len(happy) > sum(unhappy) / len(unhappy) + 0.1
