"""The package root and the studies keep one concern per module (issue 36, item 3), checked on the source.

Each test reads the code (AST, or the import system's view), so it fails the moment a room is mixed again: the
write contract, connections and publishing out of ``warehouse.py``; staging a package; the scripted LLM server out
of the runtime package; the simulation studies apart from the estimators with no import loop among them; no loop
between the LLM budget and request modules, nor between the settings files and the stages' readers; no private name
imported across ``stats/``; and tables named through the contract (``tables.X.qualified``) in the files of the
package root, staging, ingest and their Dagster shell.
(``tests/test_architecture.py`` checks the same rules over the whole package once every part has landed.)
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from pulse_pipeline import tables

PACKAGE = Path(__file__).resolve().parent.parent / "pulse_pipeline"


def _tree(relative: str) -> ast.Module:
    return ast.parse((PACKAGE / relative).read_text(), filename=relative)


def _imported_modules(relative: str) -> set[str]:
    """Every module of ours that ``relative`` imports from, anywhere in it (function level and TYPE_CHECKING too),
    as a dotted name under ``pulse_pipeline``."""
    package = ["pulse_pipeline", *Path(relative).with_suffix("").parts[:-1]]
    found = set()
    for node in ast.walk(_tree(relative)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            found.add(".".join([*base, node.module] if node.module else base))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pulse_pipeline"):
            found.add(node.module)
    return found


def test_warehouse_py_holds_the_warehouse_handle_only():
    """The write contract, connections and publishing each have a module; ``warehouse.py`` keeps ``Warehouse``."""
    defined = [n.name for n in _tree("warehouse.py").body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert defined == ["Warehouse"]
    for module, names in {
        "contract": ("ContractError", "ensure_tables", "insert_arrow", "to_frame", "check_schema", "nan_to_null"),
        "connections": ("connect", "one_instance", "cursor", "exists", "release_duckdb_memory", "duckdb_config"),
        "publish": ("publish", "written_since_published", "fingerprint", "wal_of"),
    }.items():
        top = {n.name for n in _tree(f"{module}.py").body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        assert set(names) <= top, f"{module}.py lacks {set(names) - top}"


def test_staging_is_a_package_and_the_fake_llm_is_not_in_the_runtime_package():
    assert importlib.util.find_spec("pulse_pipeline.staging").submodule_search_locations is not None
    assert importlib.util.find_spec("pulse_pipeline.fake_llm") is None
    assert importlib.util.find_spec("tests.fake_llm") is not None


def test_no_import_loop_among_the_studies_nor_between_the_llm_budget_and_request():
    """Before: ``estimates/validation`` imported ``peeking`` and ``active`` (inside functions), which imported it
    at module level; ``features/llm/budget`` imported ``request``, which imported it under TYPE_CHECKING."""
    studies = {m: _imported_modules(f"studies/{m}.py") for m in ("scenario", "coverage", "peeking", "active")}
    assert "pulse_pipeline.studies.coverage" not in studies["peeking"] | studies["active"] | studies["scenario"]
    assert not {f"pulse_pipeline.studies.{m}" for m in ("coverage", "peeking", "active")} & studies["scenario"]
    budget, request = _imported_modules("features/llm/budget.py"), _imported_modules("features/llm/request.py")
    assert not ("pulse_pipeline.features.llm.request" in budget and "pulse_pipeline.features.llm.budget" in request)


def test_the_settings_files_module_imports_no_stage():
    """Before: ``settings_files.check_settings`` imported the stages' readers, which import ``settings_files``
    (``SettingsFileError``); the preflight that calls the readers is ``preflight.py`` now."""
    stages = ("ingest", "staging", "features", "modeling", "estimates")
    imported = _imported_modules("settings_files.py")
    assert [m for m in imported if m.removeprefix("pulse_pipeline.").split(".")[0] in stages] == []
    assert "pulse_pipeline.settings_files" in _imported_modules("preflight.py")


def test_no_private_name_is_imported_across_the_stats_modules():
    offenders = [
        f"stats/{path.name}:{node.lineno} {alias.name}"
        for path in sorted((PACKAGE / "stats").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("pulse_pipeline"))
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert offenders == []


ROOMS_FILES = (
    "cli.py",
    "runs.py",
    "quarantine.py",
    "drops.py",
    "warehouse_diff.py",
    "contract.py",
    "connections.py",
    "publish.py",
    "warehouse.py",
    "synth/demo.py",
    "staging/sql.py",
    "staging/build.py",
    "ingest/load.py",
    "defs/ingest/assets.py",
    "defs/ingest/sensors.py",
    "defs/staging/assets.py",
    "defs/staging/checks.py",
    "defs/staging/asks.py",
)
"""The files whose SQL names tables through the contract since issue 36 (the others' owners convert theirs)."""


def _literal_table_names(relative: str) -> list[str]:
    """``file:line name`` for each contract table named literally in a string of ``relative`` that is not a
    docstring (a docstring may name a table in words)."""
    names = sorted((t.qualified for t in tables.ALL_TABLES), key=len, reverse=True)
    pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in names) + r")(?!\w)")
    tree = _tree(relative)
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        for statement in body if isinstance(body, list) else []:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                docstrings.add(id(statement.value))
    return [
        f"{relative}:{node.lineno} {match.group(1)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        for match in pattern.finditer(node.value)
    ]


def test_the_package_root_staging_and_ingest_name_tables_through_the_contract():
    offenders = [
        hit for relative in ROOMS_FILES if (PACKAGE / relative).exists() for hit in _literal_table_names(relative)
    ]
    assert offenders == []
