"""No traceback reaches a user of the CLI: bad input or a bad environment ends in one line, `pulse <command>: ...`.

The walk covers every subcommand ``build_parser`` knows, so a command added later is walked too: its required
arguments are filled from their types with values that cannot work (paths that do not exist), each number option
gets a non-number, a negative number and NaN, and each command runs in broken environments (PULSE_HOME a file, a
bad PULSE_* value, a broken settings file). Issue 33, items 3, 4 and 9.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pulse_pipeline import cli
from pulse_pipeline.paths import PulseHome

# imported where used, so that the walk also runs (and fails) on code without them:
# settings_files.SettingsFileError, experiments.experiments_config, benchmarks.load_benchmarks

BROKEN_EXPERIMENTS = '[experiments.llm-backbone\ncontrol = "claude-4-sonnet"\n'  # the issue's file: no ']'
EXPECTED_TOML_ERROR = "line 1: not valid TOML: Expected ']' at the end of a table declaration (column 26)"


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _takes(action: argparse.Action) -> bool:
    return not isinstance(action, argparse._HelpAction) and action.nargs != 0


def _bad_value(action: argparse.Action, path: Path) -> str:
    """A value of the right type that cannot work: a number too small, or (text) ``path``: a path that does not
    exist, or, for the environment cases, an empty file, so that the environment is what the command meets."""
    if action.choices:
        return str(next(iter(action.choices)))
    if action.type in (int, float):
        return "1"
    return str(path if path.is_file() else path / action.dest)


def _base_args(command: str, parser: argparse.ArgumentParser, path: Path) -> list[str]:
    """The command with its required arguments filled by :func:`_bad_value`."""
    args = [command]
    for action in parser._actions:
        if not _takes(action):
            continue
        if not action.option_strings:
            args.append(_bad_value(action, path))
        elif action.required:
            args += [action.option_strings[0], _bad_value(action, path)]
    return args


def _number_cases() -> list[tuple[str, list[str], str, str]]:
    """(command, option, value, why) for every number option of every command."""
    cases = []
    for command, parser in _subcommands().items():
        for action in parser._actions:
            if action.option_strings and action.type in (int, float) and _takes(action):
                values = ["abc", "-1"] + (["nan"] if action.type is float else [])
                cases += [(command, action.option_strings[0], value) for value in values]
    return cases


ACCEPTS_NEGATIVE = {("power", "--rho"), ("power", "--effect")}  # legitimate values; the base args still fail


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_one_line(command: str, code: int, out: str, err: str, codes=(1, 2)) -> str:
    assert "Traceback" not in out + err, err
    assert code in codes, f"exit {code}; stderr: {err}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "no message on stderr"
    assert lines[-1].startswith(f"pulse {command}:"), err
    assert "bug in PULSE" not in err, err
    return lines[-1]


@pytest.fixture
def empty_home(tmp_path, monkeypatch) -> PulseHome:
    root = tmp_path / "home"
    monkeypatch.setenv("PULSE_HOME", str(root))
    for name in [n for n in os.environ if n.startswith("PULSE_") and n != "PULSE_HOME"]:
        monkeypatch.delenv(name)
    return PulseHome(root)


# ------------------------------------------------------------------------------------------ the walk


@pytest.mark.parametrize(("command", "option", "value"), _number_cases())
def test_every_number_option_refuses_a_bad_value_in_one_line(command, option, value, empty_home, tmp_path, capsys):
    argv = _base_args(command, _subcommands()[command], tmp_path / "missing") + [option, value]
    code, out, err = _run(argv, capsys)
    _assert_one_line(command, code, out, err)
    assert not empty_home.root.exists() or command not in cli.READS_SETTINGS  # refused before any work


ENVIRONMENTS = ("home_is_a_file", "bad_setting", "broken_experiments", "broken_benchmarks", "missing_rubric")


def _environment(kind: str, home: PulseHome, tmp_path: Path, monkeypatch) -> str:
    """Set up a broken environment; returns what the refusal must name."""
    if kind == "home_is_a_file":
        home.root.parent.mkdir(parents=True, exist_ok=True)
        home.root.write_text("not a folder")
        return f"PULSE_HOME={home.root} is a file"
    if kind == "bad_setting":
        monkeypatch.setenv("PULSE_CV_SEEDS", "zero")
        return "PULSE_CV_SEEDS='zero' is not a whole number"
    home.root.mkdir(parents=True)
    if kind == "broken_experiments":
        (home.root / "experiments.toml").write_text(BROKEN_EXPERIMENTS)
        return f"{home.root / 'experiments.toml'}, {EXPECTED_TOML_ERROR}"
    if kind == "broken_benchmarks":
        (home.root / "benchmarks.csv").write_text(
            "treatment,control,cluster,benchmark,delta_b\ngpt-5,claude-4-sonnet,Testing code,SWT,lots\n"
        )
        return f"{home.root / 'benchmarks.csv'}, line 2: delta_b 'lots' is not a number"
    monkeypatch.setenv("PULSE_RUBRIC", str(tmp_path / "no-rubric.toml"))
    return f"{tmp_path / 'no-rubric.toml'}: the rubric cannot be read (No such file or directory)"


@pytest.mark.parametrize("kind", ENVIRONMENTS)
@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_command_in_a_broken_environment_says_one_line(command, kind, empty_home, tmp_path, monkeypatch, capsys):
    named = _environment(kind, empty_home, tmp_path, monkeypatch)
    existing = tmp_path / "input.jsonl"
    existing.write_text("{}\n")
    code, out, err = _run(_base_args(command, _subcommands()[command], existing), capsys)
    assert "Traceback" not in out + err, err
    refuses = command in cli.READS_SETTINGS or (kind == "home_is_a_file" and command not in cli.HOME_FREE)
    if refuses or code != 0:
        line = _assert_one_line(command, code, out, err)
        if command in cli.READS_SETTINGS:
            assert code == 2 and named in line, line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes any folder")
@pytest.mark.parametrize("command", sorted(cli.WRITES_HOME))
def test_an_unwritable_home_is_refused_in_one_line(command, empty_home, tmp_path, capsys):
    empty_home.root.mkdir()
    empty_home.root.chmod(0o500)
    try:
        code, out, err = _run(_base_args(command, _subcommands()[command], tmp_path / "missing"), capsys)
    finally:
        empty_home.root.chmod(0o700)
    assert "cannot be written" in _assert_one_line(command, code, out, err)


def test_a_home_this_user_cannot_write_is_refused_before_any_work(empty_home, monkeypatch, capsys):
    """The same refusal as the test above, for a run as root (which writes any folder): os.access says no."""
    empty_home.root.mkdir()
    monkeypatch.setattr(cli.os, "access", lambda path, mode: Path(path) != empty_home.root)
    code, out, err = _run(["materialize"], capsys)
    line = _assert_one_line("materialize", code, out, err)
    root = empty_home.root
    assert line == f"pulse materialize: PULSE_HOME={root}: {root} cannot be written by this user (permission denied)"
    assert list(empty_home.root.iterdir()) == []


def test_a_bug_is_one_line_and_its_traceback_goes_to_a_log(empty_home, monkeypatch, capsys):
    def broken(args):
        return 1 / 0

    monkeypatch.setattr(cli, "cmd_power", broken)
    code, out, err = _run(["power", "--n", "10", "--sd", "1"], capsys)
    line = err.strip()
    assert code == cli.INTERNAL_ERROR and "\n" not in line and "Traceback" not in line
    assert line.startswith("pulse power: internal error (a bug in PULSE), ZeroDivisionError: division by zero")
    log = Path(line.split("the full traceback is in ")[1].split(", please report")[0])
    assert log.parent == empty_home.root / ".work" / "logs"
    assert "Traceback" in log.read_text() and "1 / 0" in log.read_text()


# ------------------------------------------------------------------------------- item 3: settings files


def test_the_issues_broken_experiments_file_is_named_with_its_line(tmp_path):
    from pulse_pipeline.estimates.experiments import experiments_config
    from pulse_pipeline.settings_files import SettingsFileError

    path = tmp_path / "experiments.toml"
    path.write_text(BROKEN_EXPERIMENTS)
    with pytest.raises(SettingsFileError) as error:
        experiments_config(path)
    assert str(error.value) == f"{path}, {EXPECTED_TOML_ERROR}"


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        (
            '[experiments.x]\ncontol = "a"\n',
            2,
            "experiments.x: unknown key 'contol' (known: control, split, unit, arms_from, arms, strata, guardrails)",
        ),
        ("[experiments.x]\nsplit = {}\n", 2, "experiments.x.split must name the arms and their weights, got {}"),
        (
            '# two arms\n[experiments.x]\ncontrol = "a"\nsplit = { b = 1, c = 1 }\n',
            3,
            "experiments.x: control 'a' is not an arm of its split (b, c)",
        ),
        ('[experiments.x]\nunit = "users"\n', 2, "experiments.x.unit must be one of session, user, got 'users'"),
        ('[experiments.x]\nsplit = { a = "half" }\n', 2, "experiments.x.split.a must be a positive number, got 'half'"),
        ("[experiments.x]\ncontrol = 3\n", 2, "experiments.x.control must be an arm's name (text), got 3"),
        ('[experiment.x]\ncontrol = "a"\n', None, "unknown table or key 'experiment'"),
    ],
)
def test_an_experiments_file_the_stages_cannot_use_is_refused(tmp_path, text, line, what):
    from pulse_pipeline.estimates.experiments import experiments_config
    from pulse_pipeline.settings_files import SettingsFileError

    path = tmp_path / "experiments.toml"
    path.write_text(text)
    with pytest.raises(SettingsFileError) as error:
        experiments_config(path)
    assert (error.value.path, error.value.line) == (path, line)
    assert error.value.what.startswith(what)


def test_a_bad_benchmarks_line_is_refused_with_its_number(tmp_path):
    from pulse_pipeline.estimates.benchmarks import load_benchmarks
    from pulse_pipeline.settings_files import SettingsFileError

    path = tmp_path / "benchmarks.csv"
    header = "treatment,control,cluster,benchmark,delta_b\n"
    path.write_text(header + "b,a,Testing code,SWT,12\nb,a,Fix python issues,SWE,abc\nb,a,testing code,SWT,3\n")
    with pytest.raises(SettingsFileError) as error:
        load_benchmarks(path)
    assert str(error.value) == f"{path}, line 3: delta_b 'abc' is not a number (and 1 more bad line(s))"
    path.write_text(header + "b,a,Testing code,SWT,12\nb,a,testing code,SWT,3\n")
    with pytest.raises(SettingsFileError, match=r"line 3: repeats treatment, control and cluster of line 2"):
        load_benchmarks(path)


def test_human_labels_and_rubric_are_refused_with_the_file_and_line(tmp_path):
    from pulse_pipeline.features.agreement import read_human_labels
    from pulse_pipeline.features.rubric import RubricError, load_rubric
    from pulse_pipeline.settings_files import SettingsFileError

    labels = tmp_path / "labels.csv"
    labels.write_text("session_id,mood\ns1,happy\n")
    with pytest.raises(SettingsFileError, match=r"labels.csv, line 1: no column names a rubric feature \(sentiment"):
        read_human_labels(labels)
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('[[feature]]\nname = "a"\ndefinition = "d"\nvalue_type = "yes_no"\nprompt = "analysis"\nx = \n')
    with pytest.raises(RubricError, match=r"rubric.toml, line 6: not valid TOML: Invalid value \(column 5\)"):
        load_rubric(rubric)
    rubric.write_text('[[feature]]\nname = "a"\n\n[[feature]]\nname = "b"\ndefinition = "d"\nvalue_type = "yes_no"\n')
    with pytest.raises(RubricError, match=r"rubric.toml, line 1: feature #1 \(a\) lacks definition, value_type"):
        load_rubric(rubric)


def test_a_missing_human_labels_file_is_named(empty_home, tmp_path):
    from pulse_pipeline.preflight import check_settings
    from pulse_pipeline.settings_files import SettingsFileError

    with pytest.raises(SettingsFileError, match=r"nope.csv: PULSE_HUMAN_LABELS names no file"):
        check_settings(empty_home, {"PULSE_HUMAN_LABELS": str(tmp_path / "nope.csv")})


def test_the_dagster_definitions_refuse_a_broken_file_with_the_same_line(empty_home):
    from pulse_pipeline.definitions import build_definitions
    from pulse_pipeline.settings_files import SettingsFileError

    empty_home.root.mkdir()
    (empty_home.root / "experiments.toml").write_text(BROKEN_EXPERIMENTS)
    with pytest.raises(SettingsFileError) as error:
        build_definitions(empty_home)
    assert str(error.value) == f"{empty_home.root / 'experiments.toml'}, {EXPECTED_TOML_ERROR}"


# --------------------------------------------------------------------- as a user runs them: subprocesses


def _pulse(args: list[str], home: Path, *, code: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULSE_")} | {"PULSE_HOME": str(home)}
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "pulse_pipeline.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def test_a_missing_drop_is_refused_before_dagster_is_imported(tmp_path):
    """Item 9: `pulse ingest /nonexistent` took 11.5 s (Dagster and the stages imported) to say it does not exist."""
    probe = (
        "import sys; from pulse_pipeline.cli import main; code = main(sys.argv[1:]);"
        " print(sorted(m for m in ('dagster', 'polars', 'duckdb') if m in sys.modules)); sys.exit(code)"
    )
    done = _pulse(["ingest", str(tmp_path / "nonexistent")], tmp_path / "home", code=probe)
    assert done.returncode == 2 and done.stdout.strip() == "[]", done.stdout + done.stderr
    assert (
        done.stderr
        == f"pulse ingest: {tmp_path / 'nonexistent'} does not exist (give a file or folder of trajectories)\n"
    )
    assert not (tmp_path / "home").exists()


def test_a_broken_experiments_file_stops_an_ingest_before_it_registers_anything(tmp_path):
    """Item 3: the issue's file let an ingest run ~45 s, then printed 253 lines that never named it."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "experiments.toml").write_text(BROKEN_EXPERIMENTS)
    drop = tmp_path / "drop.jsonl"
    drop.write_text("{}\n")
    done = _pulse(["ingest", str(drop)], home)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"pulse ingest: {home / 'experiments.toml'}, {EXPECTED_TOML_ERROR}\n"
    assert sorted(p.name for p in home.iterdir()) == ["experiments.toml"]  # no drop, no Dagster instance


def test_a_selection_that_names_nothing_is_one_line_and_creates_nothing(tmp_path):
    """Item 4: `--select nonsense` printed a Dagster traceback and created folders in an empty home."""
    home = tmp_path / "home"
    done = _pulse(["materialize", "--select", "nonsense"], home)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("pulse materialize: --select 'nonsense': no asset nonsense; groups: estimates,")
    assert "staging" in done.stderr and "key:staging/sessions" in done.stderr
    assert not home.exists()
    typo = _pulse(["materialize", "--select", "key:staging/sesions"], home)
    assert typo.returncode == 2 and "did you mean staging/sessions" in typo.stderr and not home.exists()


@pytest.mark.slow
def test_a_group_on_an_empty_home_warns_nothing_and_says_nothing_was_published(tmp_path):
    """Item 4: every group: selection printed a BetaWarning, and on an empty home the last line named a
    pulse.duckdb that does not exist."""
    home = tmp_path / "home"
    done = _pulse(["materialize", "--select", "group:staging"], home)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (home / "pulse.duckdb").exists()
    [line] = [x for x in done.stdout.splitlines() if x.startswith("materialized")]
    # the staging group: sessions, work_segments, segment_ratings, session_labels, session_asks, assignments,
    # replaced_sessions
    assert line == (
        f"materialized 7 assets over no drop, so {home / 'pulse.duckdb'} was not replaced (nothing is published"
        " yet): run `pulse ingest PATH` (your trajectories) or `pulse demo` first"
    )
