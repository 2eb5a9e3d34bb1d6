"""Do two warehouses hold the same tables? Table for table, row for row, whatever the row order.

Used to show that a refactoring changed no result (``pulse diff OLD NEW``), and by tests that compare a re-run
with a clean run. Two tables are equal when they have the same columns and the same multiset of rows; doubles
are compared after rounding to ``digits`` significant digits (default: exact), so a change in the order of a
floating-point sum can be told apart from a change of result: two runs of the same code on the same data differ
at about 1e-13 (threaded sums), so ``digits=10`` is the practical test of "the same result".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from . import tables

# columns whose value is the time a row was written, not a result
VOLATILE = {
    tables.ANNOTATIONS.qualified: ("annotated_at",),
    tables.LLM_CACHE.qualified: ("created_at",),
    tables.DROPS.qualified: ("path", "mtime", "fingerprint"),  # where and when the drop was copied, not what it holds
    tables.COMPUTED_VERSIONS.qualified: ("version",),  # a record key and its drop's fingerprint (above)
}
# bookkeeping tables whose rows each belong to a table (the column naming it): rows of a table found in one warehouse
# only are that table's, which the diff reports already ("only in"), so they are left out of the comparison
BOOKKEEPING = {tables.COMPUTED_VERSIONS.qualified: "table_name"}
ONLY_IN = "only in "
TINY = 1e-12  # doubles closer to zero than this compare as zero (a sum's rounding leaves ~1e-17 where 0 was)


@dataclass(frozen=True)
class TableDiff:
    table: str
    problem: str  # what differs, in words

    @property
    def only_in_one(self) -> bool:
        """The table is in one warehouse only (the other rows say how a table both hold differs)."""
        return self.problem.startswith(ONLY_IN)

    def __str__(self) -> str:
        return f"{self.table}: {self.problem}"


def _tables(con: duckdb.DuckDBPyConnection, alias: str) -> dict[str, list[tuple[str, str]]]:
    rows = con.execute(
        "SELECT schema_name || '.' || table_name, column_name, data_type FROM duckdb_columns()"
        " WHERE database_name = ? ORDER BY schema_name, table_name, column_index",
        [alias],
    ).fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        out.setdefault(table, []).append((column, kind))
    return out


def _select(table: str, columns: list[tuple[str, str]], digits: int | None, ignore: set[str]) -> str:
    parts = []
    for name, kind in columns:
        if name in VOLATILE.get(table, ()) or f"{table}.{name}" in ignore:
            continue
        if digits is not None and kind in ("DOUBLE", "FLOAT"):
            # round to significant digits; near zero, log10 is unbounded, so tiny values are zero
            parts.append(
                f'CASE WHEN NOT isfinite("{name}") THEN "{name}" WHEN abs("{name}") < {TINY} THEN 0 ELSE '
                f'round("{name}", {digits} - 1 - floor(log10(abs("{name}")))::INTEGER) END'
            )
        else:
            parts.append(f'"{name}"')
    return ", ".join(parts)


def diff_warehouses(a: Path, b: Path, digits: int | None = None, ignore: Iterable[str] = ()) -> list[TableDiff]:
    """Every table that differs between the DuckDB files ``a`` and ``b`` (opened read-only).

    ``ignore``: columns left out of the comparison, as ``schema.table.column`` (for a change that is meant, such as a
    new annotator version stamped on every row)."""
    ignore = set(ignore)
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    try:
        # ATTACH takes no parameter: each path is a quoted literal (a home named ``it's`` broke the statement)
        con.execute(f"ATTACH {_literal(str(a))} AS a (READ_ONLY)")
        con.execute(f"ATTACH {_literal(str(b))} AS b (READ_ONLY)")
        left, right = _tables(con, "a"), _tables(con, "b")
        out = [TableDiff(t, f"{ONLY_IN}{a}") for t in sorted(set(left) - set(right))]
        out += [TableDiff(t, f"{ONLY_IN}{b}") for t in sorted(set(right) - set(left))]
        for t in sorted(set(left) & set(right)):
            if left[t] != right[t]:
                out.append(TableDiff(t, f"columns differ: {left[t]} vs {right[t]}"))
                continue
            cols = _select(t, left[t], digits, ignore)
            where = ""
            if t in BOOKKEEPING:
                both = ", ".join(_literal(name) for name in sorted(set(left) & set(right)))
                where = f' WHERE "{BOOKKEEPING[t]}" IN ({both})'
            counts = con.execute(
                f"SELECT (SELECT count(*) FROM a.{t}{where}), (SELECT count(*) FROM b.{t}{where})"
            ).fetchone()
            only_a, only_b = con.execute(
                f"SELECT (SELECT count(*) FROM (SELECT {cols} FROM a.{t}{where} EXCEPT ALL SELECT {cols} FROM b.{t}"
                f"{where})), (SELECT count(*) FROM (SELECT {cols} FROM b.{t}{where} EXCEPT ALL SELECT {cols} FROM a.{t}"
                f"{where}))"
            ).fetchone()
            if counts[0] != counts[1] or only_a or only_b:
                out.append(
                    TableDiff(t, f"{counts[0]} vs {counts[1]} rows; {only_a} only in the first, {only_b} in the second")
                )
        return out
    finally:
        con.close()


def _literal(text: str) -> str:
    """``text`` as an SQL string literal, for the statements that take no parameter (ATTACH)."""
    return "'" + text.replace("'", "''") + "'"
