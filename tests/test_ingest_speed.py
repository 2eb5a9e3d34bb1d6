"""The reading path's shortcuts (issue 16 item 3) give what the plain code gave: ids read without ``read_id``, JSON
written without ``dump``, batches absorbed without a copy, DuckDB on one thread while readers run."""

from __future__ import annotations

import duckdb
import pytest

from pulse_pipeline import tables
from pulse_pipeline.ingest.adapter import read_events
from pulse_pipeline.ingest.batch import Batch
from pulse_pipeline.ingest.events import NotAnId, dump, read_id
from pulse_pipeline.ingest.load import one_thread
from pulse_pipeline.ingest.openhands_v0 import OpenHandsV0


@pytest.mark.parametrize("raw_id", ["e7", 5, -3, 2**70, 12.0, "", None])
def test_an_event_id_is_read_as_read_id_reads_it(raw_id):
    event = {"id": raw_id, "source": "agent", "action": "think", "args": {"thought": "hm"}}
    events, bad = read_events(OpenHandsV0(), [event])
    assert bad == []
    assert events[0].event_id == (read_id(raw_id, "event id") or "#0")
    assert events[0].event_id == {"e7": "e7", 5: "5", -3: "-3", 2**70: str(2**70), 12.0: "12"}.get(raw_id, "#0")
    assert events[0].raw_json == dump(event)


@pytest.mark.parametrize("raw_id", [True, 1.5, {"a": 1}, [1]])
def test_an_id_that_is_no_id_quarantines_the_event_with_read_ids_reason(raw_id):
    event = {"id": raw_id, "source": "agent", "action": "think", "args": {}}
    events, bad = read_events(OpenHandsV0(), [event])
    with pytest.raises(NotAnId) as expected:
        read_id(raw_id, "event id")
    assert events == [] and [(b.position, b.reason) for b in bad] == [(0, str(expected.value))]


def test_json_orjson_cannot_write_is_kept_by_dump():
    deep: dict = {"id": "d", "source": "agent", "action": "think", "args": {}}
    node = deep["args"]
    for _ in range(300):  # orjson writes 254 levels at most
        node["x"] = {}
        node = node["x"]
    long = {"id": "l", "source": "agent", "action": "think", "args": {"n": 2**70}}  # beyond 64 bits
    events, bad = read_events(OpenHandsV0(), [deep, long])
    assert bad == []
    assert events[0].raw_json.count("{") == 302 and events[1].raw_json.endswith('"n":1180591620717411303424}}')


def test_absorbing_into_an_empty_batch_takes_the_rows_and_later_ones_are_appended():
    def one(session: str) -> Batch:
        b = Batch("d")
        b.add(tables.ASSIGNMENTS, {c: None for c in tables.ASSIGNMENTS.column_names} | {"session_id": session})
        b.read["assignment"] += 1
        b.bytes_read = 10
        return b

    merged = Batch("d")
    for session in ("a", "b", "c"):
        merged.absorb(one(session))
    assert merged.columns[tables.ASSIGNMENTS.qualified]["session_id"] == ["a", "b", "c"]
    assert merged.count(tables.ASSIGNMENTS) == 3 and merged.count(tables.EVENTS) == 0
    assert merged.read["assignment"] == 3 and merged.bytes_read == 30


def test_duckdb_runs_on_one_thread_while_readers_run_and_on_its_setting_after():
    con = duckdb.connect(config={"threads": "3"})
    threads = "SELECT current_setting('threads')"
    with one_thread(con):
        assert con.execute(threads).fetchone()[0] == 1
    assert con.execute(threads).fetchone()[0] == 3
    with pytest.raises(RuntimeError), one_thread(con):
        raise RuntimeError("a load that fails")
    assert con.execute(threads).fetchone()[0] == 3
