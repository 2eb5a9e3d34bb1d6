"""Three properties of DuckDB that ``connections.py`` and ``contract.py`` guard against or uses.

Timestamps without a zone mean UTC on every machine: the same drop gives the same raw tables whatever the machine's
time zone (``TZ``). DuckDB's ``TimeZone`` setting follows the machine's by default, and the raw tables' timestamps
are cast through a zone-aware type, so ``connections.connect`` sets it to UTC. And a BEGIN inside an open transaction
aborts that transaction, so creating tables (one transaction of its own) inside one is refused, saying why. And
connections a process opens on one database share one instance while any is open: ``one_instance`` holds one, so a
run attaches the lake once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import pytest

from pulse_pipeline import connections, contract, tables

PROBE = """
import json, sys
from pathlib import Path
import pyarrow as pa
from pulse_pipeline import connections, contract, tables
t = tables.Table("raw", "tz_probe", (("ts", tables.TIMESTAMP),), "a zone-less and a zoned timestamp")
con = connections.connect(Path(sys.argv[1]))
contract.ensure_tables(con, [t])
contract.insert_arrow(con, t, pa.table({"ts": ["2025-07-07T20:54:42.5", "2025-07-07T20:54:42.5+02:00"]}))
rows = con.execute("SELECT CAST(ts AS VARCHAR) FROM raw.tz_probe ORDER BY ts").fetchall()
print(json.dumps([r[0] for r in rows]))
"""


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Kolkata"])
def test_zone_less_timestamps_are_utc_whatever_the_machines_zone(tmp_path, zone):
    env = {**os.environ, "TZ": zone}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / ".work" / "pulse-work.duckdb")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    # the zone-less one as written; the one at +02:00 two hours earlier in UTC
    assert json.loads(out.stdout) == ["2025-07-07 18:54:42.5", "2025-07-07 20:54:42.5"]


def test_creating_tables_inside_an_open_transaction_is_refused_with_the_reason(tmp_path):
    """DuckDB aborts an open transaction when a BEGIN is tried inside it, so ``ensure_tables`` (one transaction of
    its own) says so instead of returning with the caller's writes silently lost."""
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute("CREATE TABLE kept (a INTEGER)")
    con.begin()
    con.execute("INSERT INTO kept VALUES (1)")
    with pytest.raises(RuntimeError, match="must run outside a transaction"):
        contract.ensure_tables(con, [tables.DROPS])
    con.rollback()
    assert con.execute("SELECT count(*) FROM kept").fetchone() == (0,)
    contract.ensure_tables(con, [tables.DROPS])  # outside a transaction: made
    assert con.execute("SELECT count(*) FROM raw.drops").fetchone() == (0,)


def test_one_instance_attaches_the_lake_once_and_each_connection_keeps_its_transaction(tmp_path, monkeypatch):
    work = tmp_path / ".work" / "pulse-work.duckdb"
    attached = []
    real_attach = connections.lake.attach
    monkeypatch.setattr(connections.lake, "attach", lambda *a, **k: attached.append(1) or real_attach(*a, **k))
    count = "SELECT count(*) FROM raw.drops"
    with connections.one_instance(work):
        first, second = connections.connect(work), connections.connect(work)
        contract.ensure_tables(first, [tables.DROPS])
        # fetchall: a result left half read (fetchone) keeps its query's transaction open, and an open reader of
        # the SQLite catalog makes the other connection's commit fail ("database is locked")
        assert second.execute("SELECT current_database()").fetchall() == [("lake",)]
        first.begin()
        first.execute("INSERT INTO raw.drops (drop_id) VALUES ('a')")
        assert second.execute(count).fetchall() == [(0,)]  # not committed yet
        first.commit()
        assert second.execute(count).fetchall() == [(1,)]
        first.close(), second.close()
    assert len(attached) == 1
    connections.connect(work).close()  # the instance closed with the last connection: attached anew
    assert len(attached) == 2
