"""aider chat histories (``ingest/aider.py``) on fixtures written from aider's own source, Aider-AI/aider at
5dc9490bb35f9729ef2c95d00a19ccd30c26339c:

- ``aider/io.py``: ``InputOutput.__init__`` appends ``\\n# aider chat started at {%Y-%m-%d %H:%M:%S}\\n\\n``;
  ``user_input`` writes each line of the user's input as ``#### <line>`` ending with two spaces (a Markdown line
  break); ``ai_output`` writes the reply between blank lines; ``tool_output``/``_tool_message`` write aider's own
  output as ``> <text>  `` (a multi-line ``tool_output`` message is one ``> `` line and plain lines after it);
- ``aider/coders/base_coder.py``: ``get_announcements`` (``Aider vX``, ``Model: X with ... edit format`` or ``Main
  model: X ...`` and ``Weak model: Y``), ``calculate_and_show_tokens_and_cost`` (``Tokens: 9.0k sent, 1.2k cache
  write, 8.1k cache hit, 612 received.``, then `` Cost: $0.0016 message, $0.0016 session.`` on the same line, or on
  the next when the report names both cache writes and hits), ``show_usage_report`` (each report covers the
  messages since the last); ``aider/utils.py`` ``format_tokens``.

Fixture ``tests/fixtures/aider/myrepo/.aider.chat.history.md`` (lines numbered from 1; aider's own
``.aider.input.history`` and ``.aider.tags.cache.v4/`` beside it are hidden and not read), three sessions:

- started 2026-01-02 09:15:04 (line 2): the announcements (4-9, Main model ``anthropic/claude-sonnet-4-20250514``),
  user messages at 11, 29-30 (two ``####`` lines, one message), 46 (``/run pytest -q``) and 51; replies at 13, 32,
  53; aider output at 25-27, 41-44 (its ``Cost:`` line without ``> ``), 48-49, 67-69: 12 events, 4 user messages, 4
  segments. Usage: sent 9.0k + 9.6k + 10k = 28600, received 489 + 612 + 95 = 1196, cost 0.0016 + 0.0041 + 0.0019 =
  0.0076; cache write 1.2k, hit 8.1k.
- started 2026-01-02 14:40:11 (line 71): ``Model: gpt-4.1``, then ``/model o3`` re-announces ``Model: o3``: 9
  events, 3 user messages (78, 84, 90), 3 segments; sent 2.3k + 12k = 14300, received 150 + 1.0k = 1150, cost
  0.0058 + 0.03 = 0.0358 (the last ``session`` figure, 0.04, kept beside it); model ``o3``, models [gpt-4.1, o3].
- started 2026-01-03 08:00:00 (line 96): announcements only (aider started and quit): 1 event, no user message, no
  segment, no usage.

The malformed files are written by the test itself (one is not UTF-8, which no fixture of the repository may be:
``ruff format`` reads Markdown): ``broken.aider.chat.history.md`` (a user line and a reply with no start line
before them, then a session whose user line holds a Latin-1 byte) and ``empty.aider.chat.history.md`` (0 bytes).
"""

from __future__ import annotations

import shutil

import orjson
import pytest

from pulse_pipeline import tables
from pulse_pipeline.ingest import aider
from pulse_pipeline.ingest.drop import drop_units, is_sidecar
from pulse_pipeline.ingest.drop_names import aider_drop_name, why_bad_drop_name
from pulse_pipeline.ingest.register import register_drop

from .helpers import FIXTURES, assert_reconciled, ingest_paths, rows

FIX = FIXTURES / "aider"
REPO = FIX / "myrepo"
HISTORY = REPO / ".aider.chat.history.md"
FIRST, SECOND, THIRD = (
    ".aider.chat.history.md@2026-01-02T09:15:04",
    ".aider.chat.history.md@2026-01-02T14:40:11",
    ".aider.chat.history.md@2026-01-03T08:00:00",
)


def _sessions(wh) -> dict[str, tuple]:
    got = {}
    for sid, index, fmt, n, users, segs, meta in rows(
        wh,
        "SELECT session_id, record_index, source_format, n_events, n_user_messages, n_segments, metadata_json"
        " FROM raw.sessions",
    ):
        meta = orjson.loads(meta)
        got[sid] = (index, fmt, n, users, segs, meta.get("model"), meta["llm_usage"])
    return got


def test_a_repository_folder_gives_one_session_per_start_line(wh):
    ingest_paths(wh, REPO)
    got = _sessions(wh)
    assert set(got) == {FIRST, SECOND, THIRD}
    assert got[FIRST][:6] == (1, "aider", 12, 4, 4, "anthropic/claude-sonnet-4-20250514")
    assert got[SECOND][:6] == (70, "aider", 9, 3, 3, "o3")
    assert got[THIRD][:6] == (95, "aider", 1, 0, 0, "anthropic/claude-sonnet-4-20250514")
    usage = got[FIRST][6]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (28600, 1196)
    assert usage["cost_usd"] == pytest.approx(0.0076)
    usage = got[SECOND][6]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (14300, 1150)
    assert usage["cost_usd"] == pytest.approx(0.0358)
    assert got[THIRD][6] == {"cost_usd": None, "prompt_tokens": None, "completion_tokens": None}
    (meta,) = rows(wh, "SELECT metadata_json FROM raw.sessions WHERE session_id = ?", [SECOND])[0]
    meta = orjson.loads(meta)
    assert meta["aider_models"] == ["gpt-4.1", "o3"]
    assert meta["aider_usage"]["last_session_cost"] == 0.04
    assert meta["agent_version"] == "0.86.1"
    (meta,) = rows(wh, "SELECT metadata_json FROM raw.sessions WHERE session_id = ?", [FIRST])[0]
    assert {k: orjson.loads(meta)["aider_usage"][k] for k in ("cache_write", "cache_hit")} == {
        "cache_write": 1200,
        "cache_hit": 8100,
    }
    # aider's other hidden files are not read: three records, all sessions
    (drop,) = rows(wh, "SELECT records_read, records_accepted, records_quarantined FROM raw.drops")
    assert drop == (3, 3, 0)
    assert_reconciled(wh, "myrepo")


def test_user_messages_are_the_hash_lines_never_aiders_output(wh):
    ingest_paths(wh, REPO)
    users = rows(
        wh,
        "SELECT event_id, text FROM raw.events WHERE session_id = ? AND source = 'user' ORDER BY seq",
        [FIRST],
    )
    assert users == [
        ("L11", "Add a --verbose flag to cli.py"),
        ("L29", "also add a test\nput it in tests/test_cli.py"),
        ("L46", "/run pytest -q"),
        ("L51", "the test fails, fix it"),
    ]
    got = rows(
        wh,
        "SELECT event_id, source, name, segment_index, segment_close FROM raw.events WHERE session_id = ? ORDER BY seq",
        [FIRST],
    )
    assert [(e, s, n) for e, s, n, _, _ in got] == [
        ("L4", "environment", "other"),
        ("L11", "user", "message"),
        ("L13", "agent", "message"),
        ("L25", "environment", "edit"),
        ("L29", "user", "message"),
        ("L32", "agent", "message"),
        ("L41", "environment", "edit"),
        ("L46", "user", "message"),
        ("L48", "environment", "other"),
        ("L51", "user", "message"),
        ("L53", "agent", "message"),
        ("L67", "environment", "edit"),
    ]
    # each user message opens a segment; the announcements before the first are outside every segment
    assert [s for *_, s, _ in got] == [None, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3]
    (cost_line,) = rows(wh, "SELECT text FROM raw.events WHERE event_id = 'L41' AND session_id = ?", [FIRST])
    assert "612 received.\nCost: $0.0041 message, $0.0057 session.\nApplied edit to" in cost_line[0]


def test_ids_stay_when_the_file_grows(wh, tmp_path):
    """Delivered again with a fourth session appended (and a start time repeated), the first three keep their ids
    and record indexes, so the later drop replaces them; a repeated start time gets ``#2``."""
    ingest_paths(wh, REPO)
    before = sorted(rows(wh, "SELECT session_id, record_index FROM raw.sessions"))
    grown = tmp_path / "myrepo-again"
    grown.mkdir()
    text = HISTORY.read_text() + "\n# aider chat started at 2026-01-03 08:00:00\n\n#### hello  \n\nHi.\n"
    (grown / HISTORY.name).write_text(text)
    ingest_paths(wh, grown)
    after = sorted(rows(wh, "SELECT session_id, record_index FROM raw.sessions WHERE drop_id = 'myrepo-again'"))
    assert after[:3] == before
    assert after[3] == (THIRD + "#2", 103)  # the file's 102 lines, a blank one, then the start line (from 0: 103)


def test_the_history_file_name_is_read_and_other_hidden_names_are_not(wh, tmp_path):
    drop = tmp_path / "drop"
    (drop / "a").mkdir(parents=True)
    shutil.copy(HISTORY, drop / "a" / ".aider.chat.history.md")
    shutil.copy(HISTORY, drop / "otherrepo.aider.chat.history.md")
    (drop / "a" / ".notes.md").write_text("# private notes\n")
    (drop / "a" / ".aider.input.history").write_text("+hello\n")
    (drop / ".partial.json").write_text('{"rating": 5}')
    assert not is_sidecar(".aider.chat.history.md")
    assert is_sidecar(".notes.md") and is_sidecar(".aider.input.history")
    names = sorted((u.source_file, u.skipped is not None) for u in drop_units(drop))
    assert names == [
        (".partial.json", True),
        ("a/.aider.chat.history.md", False),
        ("otherrepo.aider.chat.history.md", False),
    ]
    ingest_paths(wh, drop)
    ids = sorted(sid for (sid,) in rows(wh, "SELECT session_id FROM raw.sessions"))
    assert ids == sorted([f"a/{s}" for s in (FIRST, SECOND, THIRD)] + [f"otherrepo{s}" for s in (FIRST, SECOND, THIRD)])
    (reason,) = rows(wh, "SELECT reason FROM raw.quarantine")[0]
    assert reason.startswith("hidden file not read")
    assert_reconciled(wh, "drop")


def test_the_history_file_alone_is_a_drop(wh):
    ingest_paths(wh, HISTORY)
    assert len(rows(wh, "SELECT session_id FROM raw.sessions")) == 3
    assert_reconciled(wh, HISTORY.name)


BROKEN = (
    b"#### orphan question, pasted without its session\n\nsome reply\n\n"
    b"# aider chat started at 2026-01-04 10:00:00\n\n#### caf\xe9 in Latin-1  \n\nA reply.\n"
)


def test_text_without_a_start_line_and_bad_sessions_are_quarantined(wh, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "broken.aider.chat.history.md").write_bytes(BROKEN)
    (bad / "empty.aider.chat.history.md").write_bytes(b"")
    ingest_paths(wh, bad)
    assert rows(wh, "SELECT count(*) FROM raw.sessions") == [(0,)]
    got = rows(wh, "SELECT source_file, record_index, record_type, reason FROM raw.quarantine ORDER BY 1, 2")
    assert [(f, i, t) for f, i, t, _ in got] == [
        ("broken.aider.chat.history.md", 0, "unknown"),
        ("broken.aider.chat.history.md", 4, "session"),
        ("empty.aider.chat.history.md", None, "unknown"),
    ]
    assert got[0][3].startswith("not an aider session: no '# aider chat started at YYYY-MM-DD HH:MM:SS' line")
    assert got[1][3].startswith("aider session not UTF-8 text")
    assert got[2][3] == "file is empty"
    assert rows(wh, "SELECT records_read, records_accepted, records_quarantined FROM raw.drops") == [(3, 0, 3)]
    assert_reconciled(wh, "bad")


def test_the_hidden_history_given_alone_is_registered_under_its_folders_name(pulse_home, tmp_path):
    """``pulse ingest ~/myrepo/.aider.chat.history.md``: no drop may be named with a leading '.', so the file goes
    into a drop named ``myrepo-aider-history``, keeping its own name (its sessions' ids start with it)."""
    repo = tmp_path / "myrepo"
    repo.mkdir()
    shutil.copy(HISTORY, repo / HISTORY.name)
    key, target = register_drop(pulse_home, repo / HISTORY.name)
    assert (key, target) == ("myrepo-aider-history", pulse_home.drops / "myrepo-aider-history")
    assert sorted(p.name for p in target.iterdir()) == [HISTORY.name]
    # the name the CLI checks before anything is copied (it refused the file's own name before)
    assert why_bad_drop_name(aider_drop_name(repo / HISTORY.name)) is None
    assert aider_drop_name(repo / "myrepo.aider.chat.history.md") is None  # a visible copy keeps its own name


def test_a_session_larger_than_the_record_limit_is_quarantined_unread(wh, tmp_path, monkeypatch):
    """``PULSE_MAX_RECORD_MB`` at 0.001 (1 048 bytes): a session holding a 5 000-byte reply is quarantined with its
    size, never held whole; the small session after it is read."""
    monkeypatch.setenv("PULSE_MAX_RECORD_MB", "0.001")
    drop = tmp_path / "limits"
    drop.mkdir()
    big = "# aider chat started at 2026-01-05 10:00:00\n\n#### go  \n\n" + "x" * 5000 + "\n"
    small = "\n# aider chat started at 2026-01-05 11:00:00\n\n#### hi  \n\nHello.\n"
    (drop / HISTORY.name).write_text(big + small)
    ingest_paths(wh, drop)
    assert rows(wh, "SELECT session_id, n_user_messages FROM raw.sessions") == [
        (".aider.chat.history.md@2026-01-05T11:00:00", 1)
    ]
    ((index, kind, reason),) = rows(wh, "SELECT record_index, record_type, reason FROM raw.quarantine")
    assert (index, kind) == (0, "session")
    assert reason.startswith("an aider session is 5,058 bytes, more than PULSE_MAX_RECORD_MB")
    assert_reconciled(wh, "limits")


def test_a_long_history_is_handed_on_in_batches(monkeypatch):
    """With batches of at most 2 events, the fixture's three sessions (12, 9 and 1 events) come in three batches, one
    per session, and together hold every row (memory is bounded by a session, not by the file)."""
    monkeypatch.setattr(aider, "CHUNK_EVENTS", 2)
    batches = list(aider.read_aider_history("d", HISTORY, HISTORY.name))
    assert [b.count(tables.SESSIONS) for b in batches] == [1, 1, 1]
    assert [b.count(tables.EVENTS) for b in batches] == [12, 9, 1]
