"""Sessions in batches by where their events are stored (``features/batches.py``), and what reads through them."""

from types import SimpleNamespace

import duckdb

from pulse_pipeline.features.batches import Batch, session_batches
from pulse_pipeline.features.transcripts import iter_transcripts
from pulse_pipeline.features.user_text import build_user_text

from .helpers import FIXTURES, ingest_paths


def _toy():
    """Events stored as rows 0-4: b, b, a, c, a (session a's events are split by c's); session d has none."""
    con = duckdb.connect()
    con.execute("CREATE TABLE ev (record_key VARCHAR, seq INTEGER)")
    con.execute("INSERT INTO ev VALUES ('b', 0), ('b', 1), ('a', 0), ('c', 0), ('a', 1)")
    con.execute("CREATE TABLE s (session_id VARCHAR, record_key VARCHAR)")
    con.execute("INSERT INTO s VALUES ('sa', 'a'), ('sb', 'b'), ('sc', 'c'), ('sd', 'd')")
    return SimpleNamespace(con=con)


def test_batches_follow_the_stored_order_and_span_every_event_of_their_sessions():
    wh = _toy()
    # by first row: sd (no event), sb (rows 0-1), sa (rows 2-4), sc (row 3)
    assert list(session_batches(wh, "s", 2, events="ev")) == [
        Batch(["sb", "sd"], 0, 1),
        Batch(["sa", "sc"], 2, 4),
    ]
    # a batch of sessions without events spans no row
    assert list(session_batches(wh, "s", 1, events="ev"))[0] == Batch(["sd"], 0, -1)
    # the sessions' relation may take parameters
    chosen = "(SELECT * FROM s WHERE session_id IN (SELECT unnest($ids)))"
    assert list(session_batches(wh, chosen, 10, events="ev", params={"ids": ["sc", "sa"]})) == [
        Batch(["sa", "sc"], 2, 4)
    ]


def test_transcripts_are_the_same_whatever_the_batches(wh):
    ingest_paths(wh, FIXTURES / "transcripts" / "v0_session.json", FIXTURES / "reconcile.jsonl")
    build_user_text(wh)
    one_by_one = {t.session_id: t for batch in iter_transcripts(wh, batch_size=1) for t in batch}
    together = {t.session_id: t for batch in iter_transcripts(wh) for t in batch}
    assert len(together) == 2
    assert one_by_one == together
