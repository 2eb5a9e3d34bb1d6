"""Timestamps without a zone mean UTC on every machine: the same drop gives the same raw tables whatever the
machine's time zone (``TZ``). DuckDB's ``TimeZone`` setting follows the machine's by default, and the raw tables'
timestamps are cast through a zone-aware type, so ``warehouse.connect`` sets it to UTC."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from pathlib import Path
import pyarrow as pa
from pulse_pipeline import tables, warehouse
t = tables.Table("raw", "tz_probe", (("ts", tables.TIMESTAMP),), "a zone-less and a zoned timestamp")
con = warehouse.connect(Path(sys.argv[1]))
warehouse.ensure_tables(con, [t])
warehouse.insert_arrow(con, t, pa.table({"ts": ["2025-07-07T20:54:42.5", "2025-07-07T20:54:42.5+02:00"]}))
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
