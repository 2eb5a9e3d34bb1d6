"""The README is a front door that stays true: short, its links resolve, the commands it names exist, the tables it
names are in the analysts' file, what it tells an analyst to run runs on what the setup installs, and its two
commands are what CI runs. The longer text lives under docs/, whose links are checked too.

Each check is a function of the text, so a test also feeds it a known-bad snippet and sees it complain: a check that
cannot fail is no check.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline import tables
from pulse_pipeline.cli import build_parser
from pulse_pipeline.connections import connect
from pulse_pipeline.features.rubric import load_rubric
from pulse_pipeline.features.wide import build_session_features
from pulse_pipeline.paths import PROJECT_ROOT, PulseHome
from pulse_pipeline.publish import publish
from pulse_pipeline.warehouse import Warehouse

README = PROJECT_ROOT / "README.md"
DOCS = sorted((PROJECT_ROOT / "docs").rglob("*.md"))  # docs/sources/ too
TABLES_PAGE = PROJECT_ROOT / "docs" / "tables.md"
CI = PROJECT_ROOT / ".ci" / "run"
MAX_README_LINES = 300
SCHEMAS = ("raw", "staging", "features", "modeling", "estimates")

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
PULSE_COMMAND = re.compile(r"^(?:\w+=\S*\s+)*(?:\.venv/bin/)?pulse ([a-z][a-z-]*)")  # env settings may come first
TABLE_NAME = re.compile(r"(?<![\w/])(" + "|".join(SCHEMAS) + r")\.(?!md\b|py\b)([a-z_]+)\b")
TABLES_PAGE_ROW = re.compile(r"^\| `(\w+\.\w+)` \|", re.M)


def blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of ``text`` in ``language``."""
    return [body for lang, body in FENCE.findall(text) if lang == language]


def code_lines(text: str) -> list[str]:
    """Every piece of code in ``text``: each line of its fenced blocks, and each inline span."""
    lines = [line.strip() for _, body in FENCE.findall(text) for line in body.splitlines()]
    return lines + INLINE_CODE.findall(FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in a markdown text; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path, text: str) -> list[str]:
    """The relative links of ``text`` (a page at ``page``) whose file, or whose heading anchor, does not exist."""
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto: are not ours to check offline
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    return broken


def unknown_commands(text: str) -> list[str]:
    """The ``pulse <command>`` names in the code of ``text`` that the CLI does not have."""
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    named = {m.group(1) for line in code_lines(text) if (m := PULSE_COMMAND.match(line))}
    return sorted(named - set(commands))


def published_tables(root: Path) -> set[str]:
    """The tables of the analysts' file, as publishing makes it: an empty home's tables written the way the
    pipeline writes them (the contract, and ``features.session_features`` built from the rubric), published, and
    read back from ``pulse.duckdb``."""
    home = PulseHome(root)
    home.work_db.parent.mkdir(parents=True, exist_ok=True)
    con = connect(home.work_db)
    try:
        build_session_features(Warehouse(con), load_rubric(), "heuristic", "v0")
    finally:
        con.close()
    assert publish(home.work_db, home.warehouse) is None
    with duckdb.connect(str(home.warehouse), read_only=True) as con:
        rows = con.execute(
            "SELECT schema_name || '.' || table_name FROM duckdb_tables()"
            " UNION ALL SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
    return {name for (name,) in rows}


def unpublished_tables(text: str, published: set[str]) -> list[str]:
    """The ``schema.table`` names in ``text`` that are not in the analysts' file."""
    named = {f"{schema}.{name}" for schema, name in TABLE_NAME.findall(text)}
    return sorted(named - published)


def commands_not_installed(text: str) -> list[str]:
    """The lines of the bash blocks of ``text`` that run a program the setup does not install: a line must start
    with ``python3.11`` (the setup itself) or run something from ``.venv/bin/``."""
    bad = []
    for body in blocks(text, "bash"):
        for line in body.splitlines():
            line = line.strip()
            if line and not line.startswith("#") and not line.startswith(("python3.11 ", ".venv/bin/")):
                bad.append(line)
    return bad


def imports_not_installed(text: str) -> list[str]:
    """The modules the python blocks of ``text`` import that are not installed."""
    missing = []
    for body in blocks(text, "python"):
        for node in ast.walk(ast.parse(body)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            missing += [n for n in names if importlib.util.find_spec(n.split(".")[0]) is None]
    return missing


def two_commands(text: str) -> list[str]:
    """The commands of the README's "Two commands" block, comments left out."""
    section = text.split("## Two commands", 1)[1]
    body = blocks(section, "bash")[0]
    return [line for line in body.splitlines() if line.strip() and not line.startswith("#")]


def ci_command() -> str:
    """The command .ci/run ends with: the set-up, lint and test chain."""
    return [line for line in CI.read_text().splitlines() if line.strip()][-1]


def analyst_commands(text: str) -> list[str]:
    """What the README has an analyst run against the warehouse: its ``pulse sql`` and ``python -c`` lines."""
    return [
        line.strip()
        for body in blocks(text, "bash")
        for line in body.splitlines()
        if line.strip().startswith((".venv/bin/pulse sql ", ".venv/bin/python -c "))
    ]


# --- the README and the docs as they are ---


def test_the_readme_is_a_front_door_of_at_most_300_lines():
    assert len(README.read_text().splitlines()) <= MAX_README_LINES


@pytest.mark.parametrize("page", [README, PROJECT_ROOT / "data" / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves_to_a_file_and_its_heading(page):
    assert broken_links(page, page.read_text()) == []


def test_every_pulse_command_the_readme_names_exists():
    assert unknown_commands(README.read_text()) == []


def test_every_table_the_readme_and_the_tables_page_name_is_in_the_analysts_file(tmp_path, monkeypatch):
    monkeypatch.delenv("PULSE_LAKE_CATALOG", raising=False)  # the default storage
    published = published_tables(tmp_path / "home")
    contract = {t.qualified for t in tables.ALL_TABLES} | {"features.session_features"}  # see tables.py's end
    assert published <= contract
    assert unpublished_tables(README.read_text(), published) == []
    listed = set(TABLES_PAGE_ROW.findall(TABLES_PAGE.read_text()))
    assert listed == published  # the page's table lists every table of the file, and no other


def test_the_readme_has_analysts_run_only_what_the_setup_installs():
    text = README.read_text()
    assert commands_not_installed(text) == []
    assert imports_not_installed(text) == []


def test_what_the_readme_tells_an_analyst_to_run_runs(tmp_path, monkeypatch):
    """Every ``pulse sql`` and ``python -c`` line and every python block of the README, run from a folder whose
    ``data/`` is a published home (empty tables: the queries must run, not find rows), as the README has them."""
    monkeypatch.delenv("PULSE_LAKE_CATALOG", raising=False)
    published_tables(tmp_path / "data")
    text = README.read_text()
    lines = analyst_commands(text)
    assert lines, "the README shows analysts no command"
    env = {k: v for k, v in os.environ.items() if k not in ("PULSE_HOME", "DAGSTER_HOME")}  # ./data, as documented
    venv_bin = Path(sys.executable).parent
    for line in lines:
        argv = shlex.split(line, comments=True)
        argv[0] = str(venv_bin / Path(argv[0]).name)
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
    for body in blocks(text, "python"):
        done = subprocess.run(
            [sys.executable, "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{body}\n{done.stderr}"


def test_the_readmes_two_commands_are_what_ci_runs():
    demo, suite = two_commands(README.read_text())
    assert suite == ci_command()
    setup = "python3.11 -m venv .venv && .venv/bin/pip install -q -e '.[test]'"
    assert suite.startswith(setup + " && ")
    assert demo == setup + " && .venv/bin/pulse demo"


# --- each check complains about what it is there to catch ---


def test_the_checks_catch_what_they_are_for(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A section, with `code`\n")
    assert broken_links(page, "[ok](other.md#a-section-with-code) [web](https://example.org/x)") == []
    assert len(broken_links(page, "[gone](missing.md) [no heading](other.md#nowhere)")) == 2
    named = "run `pulse demo`, `PULSE_X=1 pulse ui`, `dbname=pulse host=db`, then `.venv/bin/pulse frobnicate --all`"
    assert unknown_commands(named) == ["frobnicate"]
    published = {"raw.drops", "staging.sessions"}
    assert unpublished_tables("`raw.drops` and `features.llm_cache`", published) == ["features.llm_cache"]
    assert commands_not_installed("```bash\nduckdb -readonly data/pulse.duckdb\n.venv/bin/pulse sql 'x'\n```\n") == [
        "duckdb -readonly data/pulse.duckdb"
    ]
    assert imports_not_installed("```python\nimport duckdb\nfrom no_such_module_here import x\n```\n") == [
        "no_such_module_here"
    ]
    text = "## Two commands\n\n```bash\n# 1. demo\npython3.11 demo\n# 2. tests\npytest -x\n```\n"
    assert two_commands(text) == ["python3.11 demo", "pytest -x"]
    assert slug("`pulse discover`: let an LLM propose features, and measure each one") == (
        "pulse-discover-let-an-llm-propose-features-and-measure-each-one"
    )
