"""ARCHITECTURE.md's one import rule, checked over the whole source of ``pulse_pipeline``.

The rule's data lives in one place: the ranked table under "## The import rule" in ARCHITECTURE.md. This module
reads that table (it holds no copy of it) and walks every module's syntax tree (``ast``: nothing is imported or
run), so the map and the check cannot drift apart. What it checks:

- a module imports only its own package, and packages ranked below it (or beside it, when its rank says its members
  import each other); every ``import`` counts: absolute or relative, at module level, inside a function, under
  ``TYPE_CHECKING``, and a ``"pulse_pipeline.x:function"`` string or ``importlib.import_module("pulse_pipeline.x")``
  imported later;
- every module belongs to exactly one rank (a new package gets its row in ARCHITECTURE.md first);
- no import cycle between modules;
- no name starting with ``_`` is imported from another module of ours (``from .x import _y``, or ``x._y`` on a
  module ``x`` imported whole);
- no contract table is named literally (``"raw.events"``) in Python source outside ``tables.py``: code names it as
  ``tables.X.qualified``; docstrings are prose and may name tables.

Each check lists every offender (``file:line`` and what) in its failure message. The checkers are plain functions
over a package folder, so ``test_checkers_*`` below run them on small trees whose offenders are known by
construction.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pulse_pipeline"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
RULE_HEADING = "## The import rule"
CONTRACT_FILE = "tables.py"
# A contract table whose columns follow the rubric, so tables.py declares no Table for it (features/wide.py).
UNDECLARED_TABLES = ("features.session_features",)
# "pulse_pipeline.estimates.peeking:replicate_peeking": a function named by a string and imported at its first call
MODULE_REFERENCE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+:[A-Za-z_]\w*")


# --- the rule's data, read from ARCHITECTURE.md ----------------------------------------------------------------


@dataclass(frozen=True)
class Rank:
    """One row of ARCHITECTURE.md's import rule: its number (1 is the top), the layer's name, its members (a module
    ``x.py`` or a package ``x/``, relative to ``pulse_pipeline/``), whether members of this rank import each
    other (entry points and the foundation do; the tools over the stages do not), and whether its modules may
    import Dagster (the entry points alone)."""

    number: int
    layer: str
    members: tuple[str, ...]
    shared: bool
    dagster: bool = False


def read_ranks(text: str) -> list[Rank]:
    """The ranks of the table under ``RULE_HEADING`` in ``text`` (ARCHITECTURE.md): rows ``| n | layer | `a/`,
    `b.py` | yes | no |`` (members share; imports Dagster), numbered 1, 2, ... from the top."""
    if RULE_HEADING not in text:
        raise AssertionError(f"ARCHITECTURE.md has no section {RULE_HEADING!r}: the import rule's ranks live there")
    section = text.split(RULE_HEADING, 1)[1].split("\n## ", 1)[0]
    ranks = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].isdigit():
            # members are the `x.py` and `x/` in backticks; other backticked words are notes (`Warehouse`)
            members = tuple(m for m in re.findall(r"`([^`]+)`", cells[2]) if m.endswith((".py", "/")))
            yes = [cell.lower().startswith("yes") for cell in cells[3:5]]
            ranks.append(Rank(int(cells[0]), cells[1], members, yes[0], len(yes) > 1 and yes[1]))
    if [r.number for r in ranks] != list(range(1, len(ranks) + 1)):
        raise AssertionError(f"ARCHITECTURE.md's ranks must be numbered 1, 2, ... from the top; read {ranks}")
    return ranks


# --- the source: modules and their imports ---------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    name: str  # pulse_pipeline.features.redact; a package's __init__.py is the package's name
    path: Path
    relative: str  # features/redact.py, relative to the package folder
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package a relative import of this module starts from."""
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


def load_modules(package_dir: Path) -> dict[str, Module]:
    """Every ``.py`` file under ``package_dir`` (the top package's folder), parsed, by module name."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        relative = path.relative_to(package_dir)
        if "__pycache__" in relative.parts:
            continue
        parts = [package_dir.name, *relative.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        modules[name] = Module(name, path, relative.as_posix(), ast.parse(path.read_text(), filename=str(path)))
    return modules


@dataclass(frozen=True)
class Import:
    """``source`` imports ``target`` (one of our modules) at ``line``; ``name`` is what it takes from ``target``
    (None when it takes the module itself)."""

    source: Module
    target: Module
    line: int
    name: str | None

    def said(self) -> str:
        return self.target.name + (f":{self.name}" if self.name else "")


def _ours(dotted: str, modules: dict[str, Module]) -> Module | None:
    """The longest prefix of ``dotted`` that is one of our modules (``import a.b.c`` runs ``a.b.c``)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return modules[".".join(parts[:end])]
    return None


def _from_base(module: Module, node: ast.ImportFrom) -> str:
    """The absolute module ``from <base> import ...`` names (``from ..x import y`` resolved)."""
    if not node.level:
        return node.module or ""
    parts = module.package.split(".")
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def imports_of(module: Module, modules: dict[str, Module]) -> list[Import]:
    """Every import of one of our modules anywhere in ``module`` (module level, in functions, under
    ``TYPE_CHECKING``), plus ``"module:function"`` strings and ``import_module("...")`` calls naming ours."""
    found: list[Import] = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if target := _ours(alias.name, modules):
                    found.append(Import(module, target, node.lineno, None))
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(module, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:  # from a.b import c, c a module
                    found.append(Import(module, modules[f"{base}.{alias.name}"], node.lineno, None))
                elif base in modules:
                    found.append(Import(module, modules[base], node.lineno, alias.name))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_REFERENCE.fullmatch(node.value):
            dotted, _, name = node.value.partition(":")
            if dotted in modules:
                found.append(Import(module, modules[dotted], node.lineno, name))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in modules
        ):
            found.append(Import(module, modules[node.args[0].value], node.lineno, None))
    return [i for i in found if i.target is not module]


def all_imports(modules: dict[str, Module]) -> list[Import]:
    return [i for module in modules.values() for i in imports_of(module, modules)]


def at(module: Module, line: int | None = None) -> str:
    """``pulse_pipeline/features/redact.py:12``: where an offender is."""
    top = module.name.split(".")[0]
    return f"{top}/{module.relative}" + (f":{line}" if line is not None else "")


# --- the checkers: each returns every offender, one line each --------------------------------------------------


def places_of(module: Module, ranks: list[Rank]) -> list[tuple[Rank, str]]:
    """The (rank, member) rows ``module`` falls in: a member ``x/`` holds every module under ``x/``."""
    return [
        (rank, member)
        for rank in ranks
        for member in rank.members
        if (module.relative.startswith(member) if member.endswith("/") else module.relative == member)
    ]


def unranked_modules(modules: dict[str, Module], ranks: list[Rank]) -> list[str]:
    """Modules in no rank, or in several."""
    offenders = []
    for module in modules.values():
        places = places_of(module, ranks)
        if not places:
            offenders.append(f"{at(module)}: in no rank (give it a place in ARCHITECTURE.md's import rule)")
        elif len(places) > 1:
            offenders.append(f"{at(module)}: in several ranks ({', '.join(m for _, m in places)})")
    return offenders


def missing_members(ranks: list[Rank], package_dir: Path) -> list[str]:
    """Members the rule names that are not in the tree (a stale row)."""
    return [
        f"rank {rank.number} ({rank.layer}): `{member}` is not in {package_dir.name}/"
        for rank in ranks
        for member in rank.members
        if not (package_dir / member.rstrip("/")).exists()
    ]


def rank_offenders(imports: Iterable[Import], ranks: list[Rank]) -> list[str]:
    """Imports of a module ranked above the importer, or beside it in a rank whose members do not share."""
    offenders: dict[tuple[str, str], list[str]] = {}  # one line per import statement and module: its names
    for imp in imports:
        source, target = places_of(imp.source, ranks), places_of(imp.target, ranks)
        if len(source) != 1 or len(target) != 1:
            continue  # unranked_modules reports it
        (rank, member), (target_rank, target_member) = source[0], target[0]
        if member == target_member or target_rank.number > rank.number:
            continue
        if target_rank.number == rank.number and rank.shared:
            continue
        where = "above it" if target_rank.number < rank.number else "beside it (members of its rank do not share)"
        head = f"{at(imp.source, imp.line)}: `{member}` (rank {rank.number}, {rank.layer}) imports {imp.target.name}"
        tail = f"of `{target_member}` (rank {target_rank.number}, {target_rank.layer}): {where}"
        offenders.setdefault((head, tail), []).extend([imp.name] if imp.name else [])
    return sorted(
        (
            f"{head} ({', '.join(names)}) {tail}" if names else f"{head} {tail}"
            for (head, tail), names in offenders.items()
        ),
        key=_by_place,
    )


def dagster_offenders(modules: dict[str, Module], ranks: list[Rank]) -> list[str]:
    """Imports of Dagster (``dagster``, ``dagster_*``) by modules of a rank that may not import it."""
    offenders = []
    for module in modules.values():
        places = places_of(module, ranks)
        if len(places) != 1 or places[0][0].dagster:
            continue  # unranked_modules reports it
        for node in ast.walk(module.tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            for name in names:
                if re.match(r"dagster(_\w+)?(\.|$)", name):
                    offenders.append(
                        f"{at(module, node.lineno)}: imports {name} (rank {places[0][0].number}, "
                        f"{places[0][0].layer}: only the entry points import Dagster)"
                    )
    return sorted(offenders, key=_by_place)


def cycle_offenders(imports: Iterable[Import]) -> list[str]:
    """Each import cycle between modules (a strongly connected set of more than one module), with every import
    that closes it: ``a.py:3 imports b``."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in sorted(imports, key=lambda imp: imp.line):  # the first import of a module names the edge
        edges.setdefault(imp.source.name, {}).setdefault(imp.target.name, imp)
    offenders = []
    for component in strongly_connected(edges):
        if len(component) < 2:
            continue
        inside = sorted(
            (imp for name in component for target, imp in edges.get(name, {}).items() if target in component),
            key=lambda imp: (imp.source.name, imp.line),
        )
        offenders.append(
            f"cycle between {', '.join(sorted(component))}:"
            + "".join(f"\n    {at(imp.source, imp.line)} imports {imp.said()}" for imp in inside)
        )
    return sorted(offenders)


def strongly_connected(edges: dict[str, dict[str, Import]]) -> list[set[str]]:
    """Tarjan's strongly connected components of the graph ``edges`` (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    nodes = sorted(set(edges) | {t for targets in edges.values() for t in targets})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def _private(name: str | None) -> bool:
    return bool(name) and name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_offenders(modules: dict[str, Module], imports: Iterable[Import]) -> list[str]:
    """Names starting with ``_`` taken from another module of ours: ``from .x import _y``, and ``x._y`` where ``x``
    is a module of ours imported whole (``from . import x``, ``import a.x as x``)."""
    offenders = [
        f"{at(imp.source, imp.line)}: imports {imp.name} from {imp.target.name}"
        for imp in imports
        if _private(imp.name) and imp.target is not imp.source
    ]
    for module in modules.values():
        bound: dict[str, Module] = {}
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in modules:
                        bound[alias.asname] = modules[alias.name]
            elif isinstance(node, ast.ImportFrom):
                base = _from_base(module, node)
                for alias in node.names:
                    if f"{base}.{alias.name}" in modules:
                        bound[alias.asname or alias.name] = modules[f"{base}.{alias.name}"]
        for node in ast.walk(module.tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and _private(node.attr)
                and bound[node.value.id] is not module
            ):
                offenders.append(
                    f"{at(module, node.lineno)}: uses {node.value.id}.{node.attr} of {bound[node.value.id].name}"
                )
    return sorted(set(offenders), key=_by_place)


def _by_place(offender: str) -> tuple[str, int, str]:
    """Offenders in file order, then line order (then as written)."""
    path, line, _ = (offender.split(":", 2) + ["0", ""])[:3]
    return path, int(line) if line.isdigit() else 0, offender


def _strings(tree: ast.Module) -> Iterable[ast.Constant | ast.JoinedStr]:
    """The string literals of ``tree`` that are code, not docstrings: a string standing alone as a statement
    (a module's, class's or function's docstring, or one under a constant) is prose. An f-string counts once, as a
    whole."""
    prose: set[int] = set()
    parts: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant | ast.JoinedStr):
            prose.add(id(node.value))
        if isinstance(node, ast.JoinedStr):
            parts.update(id(value) for value in node.values)
    for node in ast.walk(tree):
        if id(node) in prose or id(node) in parts:
            continue
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            yield node


def literal_table_offenders(modules: dict[str, Module], names: dict[str, str], exempt: str) -> list[str]:
    """Contract table names written out in code (``"... FROM raw.events"``) outside ``exempt`` (tables.py).
    ``names`` maps each qualified name to how the contract spells it (``tables.EVENTS.qualified``)."""
    pattern = re.compile(
        r"(?<![\w.])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?!\w)"
    )
    offenders = []
    for module in modules.values():
        if module.relative == exempt:
            continue
        lines = _without_comments(module.path.read_text())
        for node in _strings(module.tree):
            last = node.end_lineno or node.lineno
            for number in range(node.lineno, last + 1):
                # the string's own columns (ast counts them in UTF-8 bytes): nothing else on its first and last line
                line = lines[number - 1].encode()
                start = node.col_offset if number == node.lineno else 0
                end = node.end_col_offset if number == last and node.end_col_offset is not None else len(line)
                for match in pattern.finditer(line[start:end].decode(errors="replace")):
                    offenders.append(f"{at(module, number)}: '{match[1]}' written out; name it as {names[match[1]]}")
    return sorted(set(offenders), key=_by_place)


def _without_comments(source: str) -> list[str]:
    """``source``'s lines with every comment blanked (a comment between the parts of a string split over lines
    lies inside the string's span, but is prose)."""
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            (row, col), (_, end) = token.start, token.end
            lines[row - 1] = lines[row - 1][:col] + " " * (end - col) + lines[row - 1][end:]
    return lines


def contract_names() -> dict[str, str]:
    """Each contract table's qualified name, and how code spells it: ``tables.EVENTS.qualified`` for a ``Table``,
    ``tables.X`` for a qualified name tables.py declares as a string (the rubric-shaped wide table's)."""
    from pulse_pipeline import tables

    names = {t.qualified: f"tables.{name}.qualified" for name, t in vars(tables).items() if isinstance(t, tables.Table)}
    schemas = {qualified.split(".")[0] for qualified in names}
    for name, value in vars(tables).items():
        if isinstance(value, str) and name.isupper() and value.split(".")[0] in schemas and value.count(".") == 1:
            names.setdefault(value, f"tables.{name}")
    for qualified in UNDECLARED_TABLES:
        names.setdefault(qualified, "a name declared in tables.py")
    return names


# --- the rule over pulse_pipeline ------------------------------------------------------------------------------


def _fail(offenders: list[str], what: str, fix: str) -> str:
    return f"{len(offenders)} {what} ({fix}; the rule: ARCHITECTURE.md, {RULE_HEADING[3:]!r}):\n" + "\n".join(offenders)


@functools.cache
def source() -> tuple[list[Rank], dict[str, Module], list[Import]]:
    """ARCHITECTURE.md's ranks, pulse_pipeline's modules, and their imports (read once per test run)."""
    modules = load_modules(PACKAGE)
    return read_ranks(ARCHITECTURE.read_text()), modules, all_imports(modules)


def test_every_module_has_one_rank():
    ranks, modules, _ = source()
    offenders = unranked_modules(modules, ranks)
    assert not offenders, _fail(offenders, "modules outside the ranks", "add the package to its rank's row")


def test_every_ranked_member_exists():
    offenders = missing_members(source()[0], PACKAGE)
    assert not offenders, _fail(offenders, "rows name what is not there", "correct the row")


def test_no_module_imports_above_its_rank():
    ranks, _, imports = source()
    offenders = rank_offenders(imports, ranks)
    assert not offenders, _fail(offenders, "imports against the ranks", "move the code down, or read a table")


def test_only_the_entry_points_import_dagster():
    ranks, modules, _ = source()
    offenders = dagster_offenders(modules, ranks)
    assert not offenders, _fail(offenders, "Dagster imports in plain Python", "move the Dagster part into defs/")


def test_no_import_cycle():
    offenders = cycle_offenders(source()[2])
    assert not offenders, _fail(offenders, "import cycles", "move what both need into a module of its own")


def test_no_private_name_crosses_modules():
    _, modules, imports = source()
    offenders = private_offenders(modules, imports)
    assert not offenders, _fail(
        offenders, "private names used across modules", "make it public with a docstring, or move it"
    )


def test_tables_are_named_through_the_contract():
    offenders = literal_table_offenders(source()[1], contract_names(), CONTRACT_FILE)
    assert not offenders, _fail(offenders, "table names written out", "use tables.X.qualified in an f-string")


# --- the checkers, on a small tree whose offenders are known by construction -----------------------------------

SMALL_RULE = """# a map

## The import rule

| rank | layer | packages and modules | members import each other | imports Dagster |
|---|---|---|---|---|
| 1 | top | `top.py` (the `Thing` maker) | yes | yes |
| 2 | middle | `stage/`, `other.py` | no | no |
| 3 | bottom | `__init__.py`, `low.py`, `gone.py` | yes | no |

## Next section

| 4 | not a rank | `low.py` | yes |
"""

SMALL_TREE = {
    "__init__.py": "",
    "top.py": "import dagster as dg\n\nfrom .low import helper\n\n\nclass Thing:\n    pass\n",
    "stage/__init__.py": "",
    "stage/a.py": '''"""Reads raw.events (a docstring is prose)."""
from typing import TYPE_CHECKING
from .. import low
from ..low import _hidden, helper
if TYPE_CHECKING:
    from pkg.top import Thing
def f():
    from ..top import Thing
    return low._secret, low.__name__, helper, _hidden, Thing
SQL = "SELECT * FROM raw.events JOIN staging.sessions"
OK = f"SELECT * FROM {tables.EVENTS.qualified}"
NOT_TABLES = ["raw.events_copy", "pkg.raw.events", "raw.eventsx"]
WRAPPED = (
    "SELECT 1"  # raw.events in a comment is prose
    f" FROM raw.events WHERE {OK}"
)
NOTE = "séance"  # staging.sessions: a comment after a string
WIDE = "é raw.events"
''',
    "stage/b.py": "def run():\n    from dagster_postgres import x\n    import dagster.x, dagsterish\n",
    "other.py": 'import importlib\nCALL = "pkg.stage.b:run"\nLATER = importlib.import_module("pkg.stage.b")\n',
    "low.py": "import pkg.stage.a as a_mod\n\n\ndef helper():\n    return a_mod._private\n",
    "stray.py": "",
}


def small_tree(tmp_path: Path) -> Path:
    package = tmp_path / "pkg"
    for relative, text in SMALL_TREE.items():
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text(text)
    return package


def test_checkers_read_the_ranks_of_the_rule_section_only():
    ranks = read_ranks(SMALL_RULE)
    assert ranks == [
        Rank(1, "top", ("top.py",), True, True),
        Rank(2, "middle", ("stage/", "other.py"), False, False),
        Rank(3, "bottom", ("__init__.py", "low.py", "gone.py"), True, False),
    ]


def test_checkers_refuse_a_rule_without_its_section_or_out_of_order():
    with pytest.raises(AssertionError, match="no section"):
        read_ranks("# a map\n")
    with pytest.raises(AssertionError, match="numbered 1, 2"):
        read_ranks(SMALL_RULE.replace("| 2 | middle", "| 5 | middle"))


def test_checkers_find_every_offender_of_a_small_tree(tmp_path):
    package = small_tree(tmp_path)
    ranks = read_ranks(SMALL_RULE)
    modules = load_modules(package)
    imports = all_imports(modules)

    assert unranked_modules(modules, ranks) == [
        "pkg/stray.py: in no rank (give it a place in ARCHITECTURE.md's import rule)"
    ]
    assert missing_members(ranks, package) == ["rank 3 (bottom): `gone.py` is not in pkg/"]
    # a TYPE_CHECKING import (line 6) and a function-level one (line 8) of top.py, above stage/; low.py's absolute
    # import of stage/ above it; other.py's "module:function" string and import_module call beside it, in a rank
    # whose members do not share
    assert rank_offenders(imports, ranks) == [
        "pkg/low.py:1: `low.py` (rank 3, bottom) imports pkg.stage.a of `stage/` (rank 2, middle): above it",
        "pkg/other.py:2: `other.py` (rank 2, middle) imports pkg.stage.b (run) of `stage/` (rank 2, middle): "
        "beside it (members of its rank do not share)",
        "pkg/other.py:3: `other.py` (rank 2, middle) imports pkg.stage.b of `stage/` (rank 2, middle): "
        "beside it (members of its rank do not share)",
        "pkg/stage/a.py:6: `stage/` (rank 2, middle) imports pkg.top (Thing) of `top.py` (rank 1, top): above it",
        "pkg/stage/a.py:8: `stage/` (rank 2, middle) imports pkg.top (Thing) of `top.py` (rank 1, top): above it",
    ]
    # top -> low -> stage.a -> top, and stage.a -> low -> stage.a: one strongly connected set of three modules
    assert cycle_offenders(imports) == [
        "cycle between pkg.low, pkg.stage.a, pkg.top:\n    pkg/low.py:1 imports pkg.stage.a\n"
        "    pkg/stage/a.py:3 imports pkg.low\n    pkg/stage/a.py:6 imports pkg.top:Thing\n"
        "    pkg/top.py:3 imports pkg.low:helper"
    ]
    assert private_offenders(modules, imports) == [
        "pkg/low.py:5: uses a_mod._private of pkg.stage.a",
        "pkg/stage/a.py:4: imports _hidden from pkg.low",
        "pkg/stage/a.py:9: uses low._secret of pkg.low",
    ]
    assert dagster_offenders(modules, ranks) == [
        "pkg/stage/b.py:2: imports dagster_postgres (rank 2, middle: only the entry points import Dagster)",
        "pkg/stage/b.py:3: imports dagster.x (rank 2, middle: only the entry points import Dagster)",
    ]
    names = {"raw.events": "tables.EVENTS.qualified", "staging.sessions": "tables.STAGING_SESSIONS.qualified"}
    assert literal_table_offenders(modules, names, "low.py") == [
        "pkg/stage/a.py:10: 'raw.events' written out; name it as tables.EVENTS.qualified",
        "pkg/stage/a.py:10: 'staging.sessions' written out; name it as tables.STAGING_SESSIONS.qualified",
        "pkg/stage/a.py:15: 'raw.events' written out; name it as tables.EVENTS.qualified",
        "pkg/stage/a.py:18: 'raw.events' written out; name it as tables.EVENTS.qualified",
    ]


def test_checkers_see_a_cycle_through_a_package_and_a_lone_module_as_none(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from .x import X\n")
    (package / "sub" / "x.py").write_text("X = 1\n")
    (package / "y.py").write_text("from . import sub\n")
    modules = load_modules(package)
    assert cycle_offenders(all_imports(modules)) == []
    (package / "sub" / "x.py").write_text("X = 1\n\n\ndef later():\n    from ..y import sub\n")
    modules = load_modules(package)
    assert cycle_offenders(all_imports(modules)) == [
        "cycle between pkg.sub, pkg.sub.x, pkg.y:\n    pkg/sub/__init__.py:1 imports pkg.sub.x:X\n"
        "    pkg/sub/x.py:5 imports pkg.y:sub\n    pkg/y.py:1 imports pkg.sub"
    ]
