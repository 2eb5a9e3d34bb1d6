"""`pulse diff`: two warehouses compared table for table, whatever the row order."""

from __future__ import annotations

import duckdb

from pulse_pipeline.cli import main
from pulse_pipeline.warehouse_diff import diff_warehouses


def _db(path, rows, extra_table: bool = False):
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA s")
    con.execute("CREATE TABLE s.t (id VARCHAR, x DOUBLE, version VARCHAR)")
    con.executemany("INSERT INTO s.t VALUES (?, ?, ?)", rows)
    if extra_table:
        con.execute("CREATE TABLE s.only_here (a INTEGER)")
    con.close()
    return path


def test_same_rows_in_another_order_are_the_same(tmp_path):
    a = _db(tmp_path / "a.duckdb", [("a", 1.0, "v1"), ("b", 2.0, "v1")])
    b = _db(tmp_path / "b.duckdb", [("b", 2.0, "v1"), ("a", 1.0, "v1")])
    assert diff_warehouses(a, b) == []
    assert main(["diff", str(a), str(b)]) == 0


def test_a_changed_value_a_missing_row_and_a_missing_table_are_found(tmp_path):
    a = _db(tmp_path / "a.duckdb", [("a", 1.0, "v1"), ("b", 2.0, "v1"), ("b", 2.0, "v1")], extra_table=True)
    b = _db(tmp_path / "b.duckdb", [("a", 1.5, "v1"), ("b", 2.0, "v1")])
    diffs = {d.table: d.problem for d in diff_warehouses(a, b)}
    assert diffs["s.only_here"] == f"only in {a}"
    # ("a", 1.0) and the second ("b", 2.0) are only in a; ("a", 1.5) only in b
    assert diffs["s.t"] == "3 vs 2 rows; 2 only in the first, 1 in the second"
    assert main(["diff", str(a), str(b)]) == 1


def test_digits_tell_rounding_from_a_change_and_ignored_columns_are_left_out(tmp_path):
    a = _db(tmp_path / "a.duckdb", [("a", 0.123456789012345, "v1"), ("z", 0.0, "v1")])
    b = _db(tmp_path / "b.duckdb", [("a", 0.123456789012399, "v2"), ("z", 3e-17, "v2")])
    assert [d.table for d in diff_warehouses(a, b, digits=10)] == ["s.t"]  # the version differs
    assert diff_warehouses(a, b, digits=10, ignore=["s.t.version"]) == []
    assert [d.table for d in diff_warehouses(a, b, digits=15, ignore=["s.t.version"])] == ["s.t"]


def test_bookkeeping_rows_of_a_table_in_one_warehouse_only_are_that_tables(tmp_path, capsys):
    """A new per-session table brings its own ``staging.computed_versions`` rows: they are the new table's, which
    the diff names already ("only in"), not a difference of the bookkeeping; its rows of common tables still count."""

    def home(path, versions, new_table: bool):
        con = duckdb.connect(str(path))
        con.execute("CREATE SCHEMA staging; CREATE SCHEMA features")
        con.execute("CREATE TABLE staging.computed_versions (table_name VARCHAR, session_id VARCHAR, version VARCHAR)")
        con.execute("CREATE TABLE features.event_features (session_id VARCHAR)")
        con.executemany("INSERT INTO staging.computed_versions VALUES (?, ?, 'v')", versions)
        if new_table:
            con.execute("CREATE TABLE features.user_text (session_id VARCHAR)")
        con.close()
        return path

    old = home(tmp_path / "old.duckdb", [("features.event_features", "s1")], new_table=False)
    new_rows = [("features.event_features", "s1"), ("features.user_text", "s1"), ("features.user_text", "s2")]
    new = home(tmp_path / "new.duckdb", new_rows, new_table=True)
    assert [str(d) for d in diff_warehouses(old, new)] == [f"features.user_text: only in {new}"]
    assert main(["diff", str(old), str(new)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"features.user_text: only in {new}",
        "every table is the same apart from 1 table(s) in one warehouse only",
    ]
    moved = home(tmp_path / "moved.duckdb", [("features.event_features", "s2")] + new_rows[1:], new_table=True)
    assert {d.table: d.problem for d in diff_warehouses(new, moved)} == {
        "staging.computed_versions": "3 vs 3 rows; 1 only in the first, 1 in the second"
    }
