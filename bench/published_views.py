"""What reading the analysts' file costs now that its views find their home (``lake.home_of_file``) and check it
(``lake.guard_where``): the same queries through the published views and through the views as they were before
(the same Parquet files by absolute path, no check), in one connection, interleaved, best and median of
``--repeats``.

The table is ``--rows`` rows of three columns in ``--files`` Parquet files (one insert each), a thousandth of the
rows deleted (a delete file per data file), published by ``publish.publish`` into a home under --workdir.

    .venv/bin/python bench/published_views.py                       # 20 M rows in 20 files
    .venv/bin/python bench/published_views.py --rows 2000000 --files 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUERIES = {
    "count": "SELECT count(*) FROM {}",
    "group by": "SELECT s, avg(x) FROM {} GROUP BY s ORDER BY s LIMIT 1",
    "point filter": "SELECT * FROM {} WHERE i = 7777",
}


def build(home: Path, rows: int, files: int) -> Path:
    """A home whose lake holds raw.t, published; returns its pulse.duckdb."""
    os.environ["PULSE_LAKE_CATALOG"] = "sqlite"
    from pulse_pipeline.connections import connect
    from pulse_pipeline.paths import PulseHome
    from pulse_pipeline.publish import publish

    where = PulseHome(home)
    con = connect(where.work_db)
    con.execute("CREATE SCHEMA raw")
    con.execute("CREATE TABLE raw.t (i BIGINT, s VARCHAR, x DOUBLE)")
    per_file = rows // files
    for k in range(files):
        con.execute(
            f"INSERT INTO raw.t SELECT range + {k * per_file}, 'v' || (range % 100), random() FROM range(?)", [per_file]
        )
    con.execute("DELETE FROM raw.t WHERE i % 1000 = 0")
    con.close()
    started = time.perf_counter()
    assert publish(where.work_db, where.warehouse) is None
    print(f"published {rows:,} rows in {files} files in {time.perf_counter() - started:.2f} s")
    return where.warehouse


def before(home: Path) -> str:
    """raw.t's view as PULSE wrote it before: the same files of the same snapshot by absolute path, no check."""
    from pulse_pipeline.connections import connect
    from pulse_pipeline.paths import PulseHome

    con = connect(PulseHome(home).work_db)
    files = con.execute(
        "SELECT data_file, delete_file FROM ducklake_list_files('lake', 't', schema => 'raw')"
    ).fetchall()
    con.close()
    select = 'SELECT "i"::BIGINT AS "i", "s"::VARCHAR AS "s", "x"::DOUBLE AS "x"'
    whole = ", ".join(f"'{data}'" for data, deletes in files if not deletes)
    parts = [f"{select} FROM read_parquet([{whole}])"] if whole else []
    parts += [
        f"{select} FROM read_parquet('{data}', file_row_number = true)"
        f" WHERE file_row_number NOT IN (SELECT pos FROM read_parquet('{deletes}'))"
        for data, deletes in files
        if deletes
    ]
    return "(" + " UNION ALL ".join(parts) + ")"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pulse-views-"))
    published = build(workdir / "home", args.rows, args.files)
    con = duckdb.connect(str(published), read_only=True)
    sources = {"published views": "raw.t", "before (absolute, no check)": before(published.parent)}
    assert len({con.execute(f"SELECT count(*), sum(i) FROM {s}").fetchone() for s in sources.values()}) == 1
    print(f"{'query':<14} {'views':<28} {'best s':>8} {'median s':>9}")
    for name, query in QUERIES.items():
        times: dict[str, list[float]] = {label: [] for label in sources}
        for _ in range(args.repeats):
            for label, source in sources.items():
                started = time.perf_counter()
                con.execute(query.format(source)).fetchall()
                times[label].append(time.perf_counter() - started)
        for label, seconds in times.items():
            print(f"{name:<14} {label:<28} {min(seconds):>8.3f} {statistics.median(seconds):>9.3f}")
    con.close()


if __name__ == "__main__":
    main()
