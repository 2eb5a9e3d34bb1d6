"""`pulse sql`: read-only queries on the published warehouse, and a clear message (no traceback) for a bad one."""

import duckdb

from pulse_pipeline.cli import main


def _warehouse(pulse_home) -> None:
    with duckdb.connect(str(pulse_home.warehouse)) as con:
        con.execute("CREATE SCHEMA staging; CREATE TABLE staging.sessions AS SELECT range AS n FROM range(3)")


def test_sql_prints_the_result_as_csv(pulse_home, capfd):
    _warehouse(pulse_home)
    assert main(["sql", "--csv", "SELECT sum(n) AS total FROM staging.sessions"]) == 0
    assert capfd.readouterr().out.split() == ["total", "3"]  # 0 + 1 + 2, written by DuckDB to the stdout file


def test_a_bad_query_says_what_duckdb_said_and_exits_2(pulse_home, capsys):
    _warehouse(pulse_home)
    assert main(["sql", "SELECT nonexistent FROM staging.sessions"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("pulse sql: query failed: Binder Error")
        and err.count("\n") == 1
        and '"nonexistent" not found' in err
    ), err


def test_the_warehouse_is_opened_read_only(pulse_home, capsys):
    _warehouse(pulse_home)
    assert main(["sql", "DROP TABLE staging.sessions"]) == 2
    assert "read-only" in capsys.readouterr().err
    with duckdb.connect(str(pulse_home.warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM staging.sessions").fetchone()[0] == 3


def test_no_warehouse_yet_says_how_to_make_one(pulse_home, capsys):
    assert main(["sql", "SELECT 1"]) == 2
    assert "run `pulse ingest PATH` or `pulse demo` first" in capsys.readouterr().err
