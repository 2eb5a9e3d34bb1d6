"""Names that carry meaning (issue 36, item 4): the methods as one enumeration with their stored values unchanged,
and the estimates stage and the report naming tables through the contract, not by literal strings."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import polars as pl

from pulse_pipeline import tables
from pulse_pipeline.estimates.methods import LABELS, REPORT_ORDER, Method, method_label, stored

PACKAGE = Path(__file__).resolve().parents[1] / "pulse_pipeline"
# what the warehouse has always stored in its method columns (estimates.experiment_effects, effect_history, ...)
STORED = ("naive_welch", "naive_bootstrap", "ppi", "crossppi", "aipw", "ppi_stratified", "ppi_insample")


def test_each_method_is_its_stored_string():
    assert [m.value for m in Method] == list(STORED) == list(REPORT_ORDER)
    assert Method.PPI == "ppi" and f"{Method.CROSSPPI}" == "crossppi" and json.dumps(Method.AIPW) == '"aipw"'
    assert Method("naive_welch") is Method.NAIVE_WELCH  # a value read back from the warehouse
    assert set(LABELS) == set(Method) and method_label("ppi") == "PPI++" and method_label("classical") == "classical"
    # polars gets plain strings: a list of members would become a polars Enum refusing every other value
    frame = pl.DataFrame({"method": ["ppi", "none", "aipw"]})
    assert frame.filter(pl.col("method").is_in(stored([Method.PPI, Method.AIPW])))["method"].to_list() == [
        "ppi",
        "aipw",
    ]


def _constants(path: Path) -> list[ast.Constant]:
    """The string constants of a module that are not docstrings (a string statement on its own)."""
    tree = ast.parse(path.read_text())
    documented = {
        id(statement.value)
        for node in ast.walk(tree)
        if isinstance(getattr(node, "body", None), list)
        for statement in node.body
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documented
    ]


def test_no_method_is_named_by_a_bare_string():
    """Outside ``estimates/methods.py`` and ``stats/`` (which imports nothing of the package but itself, and names
    its own ``ArmMean.method``), a method is ``Method.X``, never ``"ppi"``."""
    offenders = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "methods.py" and "stats" not in path.relative_to(PACKAGE).parts
        for node in _constants(path)
        if node.value in STORED
    ]
    assert offenders == []


OWN_ROOMS = ("estimates", "report", "defs/estimates", "defs/report")
QUALIFIED = re.compile(
    r"(?<![\w.])(" + "|".join(re.escape(t.qualified) for t in tables.ALL_TABLES) + r")(?!\w)"
)  # fmt: skip


def test_the_estimates_stage_and_the_report_name_tables_through_the_contract():
    """SQL and table arguments in these rooms say ``tables.X.qualified``: a renamed table cannot be missed."""
    offenders = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}: {found}"
        for room in OWN_ROOMS
        for path in sorted((PACKAGE / room).rglob("*.py"))
        for node in _constants(path)
        for found in QUALIFIED.findall(node.value)
    ]
    assert offenders == []
