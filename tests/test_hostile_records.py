"""Hostile records (issue 12): odd JSON never crashes a drop, and is kept or quarantined with the reason.

Each test writes its drop inline, so the bytes are visible here; expected values were worked out by hand from
them. Unless a test says otherwise, a session is a PULSE canonical line of two events, a user message (id ``1``)
and an agent message that waits for the user (id ``2``). What is kept and what is quarantined is decided in
``pulse_pipeline/ingest/events.py`` (``parse_json``, ``dump``, ``read_id``, ``as_int``).

The first tests are the issue's reproductions; the last ones are the crashes the fuzz tests (``test_fuzz.py``) and
a review of the adapters found, one regression test each. Every one of them failed on the code before the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson

from pulse_pipeline.ingest.load import load_drop, reconcile_drop

from .helpers import rebuild_staging, rows

BOM = b"\xef\xbb\xbf"
USER = {"id": "1", "source": "user", "type": "message", "text": "go"}
AGENT = {"id": "2", "source": "agent", "type": "message", "text": "done", "wait_for_response": True}
NOT_AN_ID = "expected a string or a whole number"


def session(session_id: Any, *events: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"session_id": session_id, **extra, "events": list(events or (USER, AGENT))}


def jsonl(*records: Any) -> str:
    """JSON lines; a record given as text is written as it is (what ``json.dumps`` cannot write: NaN, deep nests)."""
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def nest(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def drop(tmp_path: Path, files: dict[str, str | bytes], name: str = "d1") -> Path:
    folder = tmp_path / name
    for file_name, data in files.items():
        path = folder / file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
    return folder


def load(wh, folder: Path) -> dict[str, int]:
    """Load one drop (no crash), check it reconciles, and return its counts."""
    load_drop(wh, folder.name, folder)
    ok, facts = reconcile_drop(wh, folder.name)
    assert ok, facts
    return facts


def quarantined(wh) -> list[tuple]:
    return rows(
        wh,
        "SELECT source_file, record_index, event_index, record_type, reason FROM raw.quarantine"
        " ORDER BY source_file, record_index, event_index NULLS FIRST",
    )


def sessions(wh, columns: str = "session_id") -> list[tuple]:
    return rows(wh, f"SELECT {columns} FROM raw.sessions ORDER BY session_id")


def counts(facts: dict[str, int]) -> tuple[int, ...]:
    keys = ("records_read", "records_accepted", "records_quarantined", "events_read", "events_accepted")
    return tuple(facts[k] for k in keys) + (facts["events_quarantined"],)


# --- the issue's reproductions ----------------------------------------------------------------------------------


def test_nesting_600_levels_deep_and_an_exit_code_of_2_to_the_70_are_kept_and_the_drop_loads(wh, tmp_path):
    """Both crashed the whole drop (orjson writes no deeper than 254 levels: ``TypeError: Recursion limit
    reached``; 2**70 reached the 32-bit exit_code column: ``OverflowError``). Both sessions are kept: the deep event
    whole in raw_json, the exit code as NULL with its digits in raw_json. 3 good + 2 = 5 sessions, 10 events."""
    deep_event = '{"id": "2", "source": "agent", "type": "run", "command": "ls", "args": ' + nest(600, '"x"') + "}"
    huge_exit = {"id": "2", "source": "environment", "type": "observation", "of": "run", "exit_code": 2**70}
    text = jsonl(
        session("good-1"),
        session("good-2"),
        '{"session_id": "deep", "events": [' + json.dumps(USER) + ", " + deep_event + "]}",
        session("good-3"),
        session("huge-exit", USER, huge_exit),
    )
    facts = load(wh, drop(tmp_path, {"sessions.jsonl": text}))
    assert counts(facts) == (5, 5, 0, 10, 10, 0)
    assert sessions(wh) == [("deep",), ("good-1",), ("good-2",), ("good-3",), ("huge-exit",)]
    (raw_json,) = rows(wh, "SELECT raw_json FROM raw.events WHERE session_id = 'deep' AND event_id = '2'")[0]
    assert raw_json == '{"id":"2","source":"agent","type":"run","command":"ls","args":' + nest(600, '"x"') + "}"
    assert rows(wh, "SELECT exit_code, raw_json FROM raw.events WHERE session_id = 'huge-exit' AND seq = 1") == [
        (None, '{"id":"2","source":"environment","type":"observation","of":"run","exit_code":1180591620717411303424}')
    ]


def test_nesting_is_read_to_1024_levels_and_a_deeper_line_is_quarantined_with_the_reason(wh, tmp_path):
    """orjson reads 1 024 levels, no more. A line of 1 024 levels (the record, then 1 023 arrays) is kept, its
    metadata (the record but its events) written back whole; a line of 1 025 is quarantined with the reason and
    its text, the file's other lines still read."""
    at_limit = '{"session_id": "d1024", "x": ' + nest(1023) + ', "events": [' + json.dumps(USER) + "]}"
    beyond = '{"session_id": "d1025", "x": ' + nest(1024) + ', "events": [' + json.dumps(USER) + "]}"
    facts = load(wh, drop(tmp_path, {"sessions.jsonl": jsonl(at_limit, beyond, session("after"))}))
    assert counts(facts) == (3, 2, 1, 3, 3, 0)
    assert sessions(wh, "session_id, metadata_json") == [
        ("after", '{"session_id":"after"}'),
        ("d1024", '{"session_id":"d1024","x":' + nest(1023) + "}"),
    ]
    [(source_file, record_index, event_index, record_type, reason)] = quarantined(wh)
    assert (source_file, record_index, event_index, record_type) == ("sessions.jsonl", 1, None, "unknown")
    assert reason.startswith("JSON nested deeper than 1 024 levels, the most PULSE reads (depth limit exceeded")
    assert rows(wh, "SELECT raw_text FROM raw.quarantine") == [(beyond,)]


def test_exit_codes_beyond_the_integer_column_are_null_and_keep_their_digits_in_raw_json(wh, tmp_path):
    """The exit_code column is 32-bit. Beyond it (2**31, 2**63, 2**70, 1e10, "99999999999") the exit code is NULL;
    so are values that are no whole number (a fraction, a boolean, "²", whose ``str.isdigit`` is true but which
    ``int`` refuses: a crash before). Whole numbers given as floats or text ("7", " 8 ", 3.0) are read."""
    given = [0, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**63, 2**70, -(2**70), 1e10, 3.0, "7", " 8 "]
    given += ["99999999999", "²", "1.5", True, None]
    expected = [0, -1, 2147483647, -2147483648, None, None, None, None, None, None, 3, 7, 8]
    expected += [None, None, None, None, None]
    observations = [
        {"id": str(10 + i), "source": "environment", "type": "observation", "of": "run", "exit_code": code}
        for i, code in enumerate(given)
    ]
    facts = load(wh, drop(tmp_path, {"s.jsonl": jsonl(session("codes", USER, *observations))}))
    assert counts(facts) == (1, 1, 0, 19, 19, 0)
    assert [c for (c,) in rows(wh, "SELECT exit_code FROM raw.events WHERE seq > 0 ORDER BY seq")] == expected
    (raw_json,) = rows(wh, "SELECT raw_json FROM raw.events WHERE event_id = '17'")[0]
    assert orjson.loads(raw_json.replace("1180591620717411303424", '"2**70"'))["exit_code"] == "2**70"


HUGE = 2**70  # 1180591620717411303424
EXIT_CODE_FILES = {
    "openhands_v0": (
        "v0.json",
        json.dumps(
            [
                {"id": 1, "source": "user", "action": "message", "args": {"content": "go"}},
                {"id": 2, "source": "agent", "action": "run", "args": {"command": "ls"}},
                {
                    "id": 3,
                    "observation": "run",
                    "cause": 2,
                    "extras": {"command": "ls", "metadata": {"exit_code": HUGE}},
                },
            ]
        ),
    ),
    "openhands_v1": (
        "v1.jsonl",
        jsonl(
            {"id": "e1", "kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": "go"}},
            {
                "id": "e2",
                "kind": "ActionEvent",
                "source": "agent",
                "tool_name": "terminal",
                "action": {"command": "ls"},
            },
            {
                "id": "e3",
                "kind": "ObservationEvent",
                "source": "environment",
                "tool_name": "terminal",
                "action_id": "e2",
                "observation": {"command": "ls", "exit_code": HUGE},
            },
        ),
    ),
    "claude_code": (
        "cc.jsonl",
        jsonl(
            {"type": "user", "sessionId": "cc", "uuid": "u1", "message": {"role": "user", "content": "go"}},
            {
                "type": "assistant",
                "sessionId": "cc",
                "uuid": "a1",
                "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash"}]},
            },
            {
                "type": "user",
                "sessionId": "cc",
                "uuid": "u2",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": f"Exit code {HUGE}\nboom"}],
                },
            },
        ),
    ),
    "codex": (
        "rollout.jsonl",
        jsonl(
            {"type": "session_meta", "payload": {"id": "cx"}},
            {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "call_id": "c1"}},
            {"type": "event_msg", "payload": {"type": "exec_command_end", "call_id": "c1", "exit_code": HUGE}},
            {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "ok"}},
        ),
    ),
}


def test_an_exit_code_of_2_to_the_70_is_null_in_every_format(wh, tmp_path):
    """The same crash in each adapter's exit code: V0 ``extras.metadata.exit_code``, V1 ``observation.exit_code``,
    a Claude Code ``Exit code N`` result (NULL now, not 0: the result said an exit code, just not one that fits),
    a Codex ``exec_command_end`` (its call's output then has none either). Each file is one session of 3 or 4 events,
    none with an exit code, and one event keeps the digits in its raw JSON."""
    folder = drop(tmp_path, dict(EXIT_CODE_FILES.values()))
    facts = load(wh, folder)
    assert counts(facts) == (4, 4, 0, 13, 13, 0)
    per_file = rows(
        wh,
        "SELECT s.source_file, count(e.exit_code), count(*) FILTER (e.raw_json LIKE '%1180591620717411303424%')"
        " FROM raw.events e JOIN raw.sessions s USING (record_key) GROUP BY 1 ORDER BY 1",
    )
    assert per_file == [("cc.jsonl", 0, 1), ("rollout.jsonl", 0, 1), ("v0.json", 0, 1), ("v1.jsonl", 0, 1)]


def test_nan_infinity_and_1e400_are_kept_as_text(wh, tmp_path):
    """Python's ``json.dumps`` writes NaN and Infinity, which JSON lacks, and 1e400 is beyond a double: orjson
    refused the whole line. The session is kept, each such number as the text it was; a rating of NaN is no rating
    from 1 to 5 and is quarantined with that reason."""
    odd = '{"cost": NaN, "max": Infinity, "min": -Infinity, "big": 1e400, "small": -1E+999}'
    record = (
        '{"session_id": "nan", "metadata": ' + odd + ', "events": [' + json.dumps(USER) + ","
        ' {"id": "2", "source": "environment", "type": "observation", "of": "run", "exit_code": NaN}]}'
    )
    rating = '{"conversation_id": "nan", "rating": NaN}'
    facts = load(wh, drop(tmp_path, {"s.jsonl": jsonl(record), "r.jsonl": jsonl(rating)}))
    assert counts(facts) == (2, 1, 1, 2, 2, 0)
    assert sessions(wh, "session_id, metadata_json") == [
        (
            "nan",
            '{"session_id":"nan","metadata":{"cost":"NaN","max":"Infinity","min":"-Infinity","big":"1e400",'
            '"small":"-1E+999"},"id_from_location":"s"}',  # a file of one record: its name is kept too
        )
    ]
    assert rows(wh, "SELECT exit_code, raw_json FROM raw.events WHERE seq = 1") == [
        (None, '{"id":"2","source":"environment","type":"observation","of":"run","exit_code":"NaN"}')
    ]
    assert quarantined(wh) == [
        ("r.jsonl", 0, None, "rating", 'rating "NaN" is not a star rating: expected a number from 1 to 5')
    ]


def test_a_utf8_byte_order_mark_is_skipped_in_json_jsonl_and_csv(wh, tmp_path):
    """A BOM before a JSON document or the first JSON line made the file unreadable ("not JSON, and not a CSV");
    it is skipped. (Before a CSV header it already was.)"""
    download = {"trajectory": [{"id": 0, "source": "user", "action": "message", "args": {"content": "go"}}]}
    files = {
        "trajectory-bom1.json": BOM + json.dumps(download).encode(),
        "sessions.jsonl": BOM + jsonl(session("bom-a"), session("bom-b")).encode(),
        "ratings.csv": BOM + b"conversation_id,event_id,rating\nbom-a,2,4\n",
    }
    facts = load(wh, drop(tmp_path, files))
    assert counts(facts) == (4, 4, 0, 5, 5, 0)
    assert sessions(wh) == [("bom-a",), ("bom-b",), ("bom1",)]
    assert rows(wh, "SELECT session_id, event_id, rating FROM raw.ratings") == [("bom-a", "2", 4.0)]


def test_ids_that_are_json_integers_keep_every_digit(wh, tmp_path):
    """orjson reads integers beyond 64 bits (and below -2**63) as doubles: session 12345678901234567890123 was
    stored as '1.2345678901234568e+22', so a rating naming it joined nothing. Every digit is kept now, for session,
    user, event and rating ids; a float with no fraction (pandas' 12345.0) is the whole number."""
    files = {
        "sessions.jsonl": jsonl(
            session(
                12345678901234567890123, {**USER, "id": 11112222333344445555666}, AGENT, user_id=98765432109876543210
            ),
            session(-9223372036854775809),
            session(12345.0),
            session(7),
        ),
        "ratings.jsonl": jsonl(
            {"conversation_id": 12345678901234567890123, "event_id": 2, "rating": 5, "id": 100000000000000000001}
        ),
    }
    facts = load(wh, drop(tmp_path, files))
    assert counts(facts) == (5, 5, 0, 8, 8, 0)
    assert sessions(wh, "session_id, user_id") == [
        ("-9223372036854775809", None),
        ("12345", None),
        ("12345678901234567890123", "98765432109876543210"),
        ("7", None),
    ]
    assert rows(wh, "SELECT event_id FROM raw.events WHERE session_id = '12345678901234567890123' ORDER BY seq") == [
        ("11112222333344445555666",),
        ("2",),
    ]
    assert rows(wh, "SELECT rating_id, session_id, event_id FROM raw.ratings") == [
        ("100000000000000000001", "12345678901234567890123", "2")
    ]
    rebuild_staging(wh)
    assert rows(wh, "SELECT session_id, label_stars FROM staging.session_labels") == [("12345678901234567890123", 5.0)]


def test_ids_that_are_booleans_objects_arrays_or_fractions_are_quarantined_with_the_reason(wh, tmp_path):
    """They were stored as Python's text ('True', "{'a': 1}"). Now the record holding one is quarantined, or the
    event when an event's id is one (its session keeps the other events). Of 8 sessions 1 is kept, with 1 of its 2
    events; the 2 ratings and 2 assignments are quarantined."""
    files = {
        "sessions.jsonl": jsonl(
            session(True),
            {"conversation_id": {"a": 1}, "events": [USER]},
            {"id": [1], "events": [USER]},
            session(1.5),
            session(1e22),
            session("u-bool", user_id=False),
            session("ok", {**USER, "id": True}, AGENT),
            session("exp", experiment=["a"]),
        ),
        "ratings.jsonl": jsonl(
            {"conversation_id": False, "rating": 4},
            {"conversation_id": "ok", "rating": 4, "event_id": {"id": 2}},
        ),
        "assignments.jsonl": jsonl(
            {"session_id": "ok", "experiment": "e", "variant": {"x": 1}},
            {"session_id": "ok", "experiment": "e", "variant": "a", "user_id": True},
        ),
    }
    facts = load(wh, drop(tmp_path, files))
    assert counts(facts) == (12, 1, 11, 2, 1, 1)
    assert sessions(wh, "session_id, n_events") == [("ok", 1)]
    assert quarantined(wh) == [
        ("assignments.jsonl", 0, None, "assignment", f"assignment's variant is an object: {NOT_AN_ID}"),
        ("assignments.jsonl", 1, None, "assignment", f"assignment's user_id is a boolean (true): {NOT_AN_ID}"),
        ("ratings.jsonl", 0, None, "rating", f"rating's conversation_id is a boolean (false): {NOT_AN_ID}"),
        ("ratings.jsonl", 1, None, "rating", f"rating's event_id is an object: {NOT_AN_ID}"),
        ("sessions.jsonl", 0, None, "session", f"session id (session_id) is a boolean (true): {NOT_AN_ID}"),
        ("sessions.jsonl", 1, None, "session", f"session id (conversation_id) is an object: {NOT_AN_ID}"),
        ("sessions.jsonl", 2, None, "session", f"session id (id) is an array: {NOT_AN_ID}"),
        ("sessions.jsonl", 3, None, "session", f"session id (session_id) is the number 1.5, a fraction: {NOT_AN_ID}"),
        (
            "sessions.jsonl",
            4,
            None,
            "session",
            f"session id (session_id) is the number 1e+22, too large to have kept its digits: {NOT_AN_ID}",
        ),
        ("sessions.jsonl", 5, None, "session", f"session user_id is a boolean (false): {NOT_AN_ID}"),
        ("sessions.jsonl", 6, 0, "event", f"event id is a boolean (true): {NOT_AN_ID}"),
        ("sessions.jsonl", 7, None, "session", f"session experiment is an array: {NOT_AN_ID}"),
    ]
    assert rows(wh, "SELECT raw_text FROM raw.quarantine WHERE record_type = 'rating' ORDER BY record_index")[0] == (
        '{"conversation_id": false, "rating": 4}',
    )


# --- crashes the fuzz tests and a review found ------------------------------------------------------------------


def test_fuzz_found_a_v1_event_whose_kind_is_a_list(wh, tmp_path):
    """``kind: []`` crashed the drop (``TypeError: unhashable type: 'list'``, looking it up among known kinds); the
    event is kept as ``other``."""
    text = jsonl(
        {"id": "e1", "kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": "go"}},
        {"id": "e2", "kind": [], "source": "agent"},
    )
    facts = load(wh, drop(tmp_path, {"conversation.jsonl": text}))
    assert counts(facts) == (1, 1, 0, 2, 2, 0)
    assert rows(wh, "SELECT event_id, kind, name FROM raw.events ORDER BY seq") == [
        ("e1", "action", "message"),
        ("e2", "other", "other"),
    ]


def test_fuzz_found_a_claude_code_line_whose_type_is_an_object(wh, tmp_path):
    """``type: {}`` on a line after the first crashed the drop (``unhashable type: 'dict'``); the line is kept as
    an ``other`` event named by its type's JSON."""
    text = jsonl(
        {"type": "user", "sessionId": "cc", "uuid": "u1", "message": {"role": "user", "content": "go"}},
        {"type": {}, "sessionId": "cc", "uuid": "u2"},
    )
    facts = load(wh, drop(tmp_path, {"cc.jsonl": text}))
    assert counts(facts) == (1, 1, 0, 2, 2, 0)
    assert rows(wh, "SELECT event_id, kind, original_name FROM raw.events ORDER BY seq") == [
        ("u1", "action", None),
        ("u2", "other", "{}"),
    ]


def test_review_found_a_record_whose_type_is_a_list(wh, tmp_path):
    """Any record with ``type: [...]`` crashed the drop: telling whether it is a Codex line looked its type up in
    a set. It is a record PULSE does not know, and is quarantined as such."""
    text = jsonl(session("ok"), {"type": ["x"], "payload": {}})
    facts = load(wh, drop(tmp_path, {"records.jsonl": text}))
    assert counts(facts) == (2, 1, 1, 2, 2, 0)
    assert quarantined(wh) == [
        (
            "records.jsonl",
            1,
            None,
            "unknown",
            "not a record PULSE knows (object with keys payload, type): expected a session (a history, trajectory or"
            " events list), a rating (rating, with conversation_id or session_id) or an assignment (session_id,"
            " experiment, variant); or a file of a format in docs/formats.md (agents' logs, Langfuse traces,"
            " OTLP/JSON)",
        )
    ]


def test_fuzz_found_csv_rows_the_csv_module_cannot_read(wh, tmp_path):
    """A cell longer than the csv module's 131 072-character limit, or a carriage return inside an unquoted cell,
    raised ``_csv.Error`` out of the drop. Each such row is quarantined with the reason; the rows around it load."""
    text = "conversation_id,rating,reason\ns1,4,ok\ns1,5," + "y" * 200_000 + "\ns1,3,a\rb\ns1,2,fine\n"
    facts = load(wh, drop(tmp_path, {"ratings.csv": text}))
    assert counts(facts) == (4, 2, 2, 0, 0, 0)
    assert rows(wh, "SELECT record_index, rating, reason FROM raw.ratings ORDER BY 1") == [
        (1, 4.0, "ok"),
        (4, 2.0, "fine"),
    ]
    assert quarantined(wh) == [
        ("ratings.csv", 2, None, "rating", "CSV row cannot be read (field larger than field limit (131072))"),
        (
            "ratings.csv",
            3,
            None,
            "rating",
            "CSV row cannot be read (new-line character seen in unquoted field - do you need to open the file in"
            " universal-newline mode?)",
        ),
    ]


def test_review_found_segment_indexes_beyond_the_column_or_not_ascii_digits(wh, tmp_path):
    """ "99999999999" reached the 32-bit column (``OverflowError``) and "²" passed ``isdigit`` into ``int``
    (``ValueError``): both crashed the drop. They are quarantined with the reason; "3" and 2.0 are read."""
    text = jsonl(
        *(
            {"conversation_id": "s", "rating": 4, "segment_index": index}
            for index in ("99999999999", "²", 2**40, -1, "3", 2.0)
        )
    )
    facts = load(wh, drop(tmp_path, {"ratings.jsonl": text}))
    assert counts(facts) == (6, 2, 4, 0, 0, 0)
    assert rows(wh, "SELECT record_index, segment_index FROM raw.ratings ORDER BY 1") == [(4, 3), (5, 2)]
    reasons = [(i, r) for (_, i, _, _, r) in quarantined(wh)]
    assert reasons == [
        (0, 'segment_index "99999999999" is not a whole number from 0 to 2147483647'),
        (1, 'segment_index "²" is not a whole number from 0 to 2147483647'),
        (2, "segment_index 1099511627776 is not a whole number from 0 to 2147483647"),
        (3, "segment_index -1 is not a whole number from 0 to 2147483647"),
    ]


def test_review_found_a_content_part_whose_text_is_not_a_string(wh, tmp_path):
    """A V1 message whose content list has ``{"type": "text", "text": 5}`` crashed joining the parts (``TypeError``);
    a part's text that is not a string is its JSON."""
    message = {"role": "user", "content": [{"type": "text", "text": 5}, {"type": "text", "text": "go"}]}
    text = jsonl({"id": "e1", "kind": "MessageEvent", "source": "user", "llm_message": message})
    facts = load(wh, drop(tmp_path, {"conversation.jsonl": text}))
    assert counts(facts) == (1, 1, 0, 1, 1, 0)
    assert rows(wh, "SELECT text FROM raw.events") == [("5\ngo",)]


def test_no_value_is_stored_as_python_text(wh, tmp_path):
    """A V1 execution status of ``true`` became agent state 'True', a canonical observation ``of`` an object became
    "{'a': 1}", a feedback of ``true`` 'True'. Now: no agent state, the object's JSON, and JSON ``true``."""
    v1 = jsonl(
        {"id": "e1", "kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": "go"}},
        {"id": "e2", "kind": "ConversationStateUpdateEvent", "source": "environment", "key": "execution_status",
         "value": True},
    )  # fmt: skip
    canonical = jsonl(session("c", USER, {"id": "2", "source": "environment", "type": "observation", "of": {"a": 1}}))
    feedback = json.dumps({"feedback": True, "trajectory": [{"id": 0, "source": "user", "action": "message"}]})
    facts = load(wh, drop(tmp_path, {"v1.jsonl": v1, "c.jsonl": canonical, "trajectory-f.json": feedback}))
    assert counts(facts) == (3, 3, 0, 5, 5, 0)
    assert rows(wh, "SELECT agent_state FROM raw.events WHERE event_id = 'e2'") == [(None,)]
    assert rows(wh, "SELECT original_name FROM raw.events WHERE session_id = 'c' AND seq = 1") == [('{"a":1}',)]
    assert rows(wh, "SELECT feedback FROM raw.sessions WHERE session_id = 'f'") == [("true",)]


# --- SDK conversation folders read their files the same way -----------------------------------------------------


SDK_USER = {
    "id": "aaaaaaa1",
    "timestamp": "2026-04-01T08:00:00",
    "kind": "MessageEvent",
    "source": "user",
    "llm_message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
}


def sdk_conversation(tmp_path: Path, base_state: str | bytes, first_event: bytes | None = None) -> Path:
    """A conversation folder conv-9 with ``base_state`` and two events: a user message and a finish action."""
    finish = {
        "id": "aaaaaaa2",
        "timestamp": "2026-04-01T08:00:05",
        "kind": "ActionEvent",
        "source": "agent",
        "tool_name": "finish",
        "action": {"kind": "FinishAction", "message": "done"},
    }
    return drop(
        tmp_path,
        {
            "conv-9/base_state.json": base_state,
            "conv-9/events/event-00000-aaaaaaa1.json": first_event or json.dumps(SDK_USER).encode(),
            "conv-9/events/event-00001-aaaaaaa2.json": json.dumps(finish),
        },
    )


def test_a_base_state_nested_1000_levels_deep_is_kept_without_a_crash(wh, tmp_path):
    """base_state.json holds a list nested 1 000 levels (under ``stats``, which PULSE copies without credentials):
    the session loads under its content id and its metadata keeps the whole nest (once the credential filter
    recursed and crashed the drop)."""
    folder = sdk_conversation(tmp_path, '{"id": "conv-deep", "stats": ' + nest(1000) + "}")
    assert counts(load(wh, folder)) == (1, 1, 0, 2, 2, 0)
    ((session_id, metadata),) = sessions(wh, "session_id, metadata_json")
    assert session_id == "conv-deep" and metadata.count("[") == 1000


def test_a_base_state_whose_id_is_a_boolean_is_quarantined_and_the_folder_names_the_session(wh, tmp_path):
    """``"id": true`` names nothing: base_state.json is quarantined with the id's reason (one unknown record), and
    the events are read without it, named by the folder (once the id was silently dropped)."""
    folder = sdk_conversation(tmp_path, '{"id": true}')
    assert counts(load(wh, folder)) == (2, 1, 1, 2, 2, 0)
    assert sessions(wh) == [("conv-9",)]
    ((_, _, _, record_type, reason),) = quarantined(wh)
    assert record_type == "unknown" and reason.startswith("base_state.json: base_state.json id is a boolean (true)")
    assert NOT_AN_ID in reason


def test_an_event_file_with_a_byte_order_mark_is_read(wh, tmp_path):
    """An SDK event file saved with a UTF-8 BOM is an event like the others (once it was quarantined)."""
    folder = sdk_conversation(tmp_path, '{"id": "conv-bom"}', BOM + json.dumps(SDK_USER).encode())
    assert counts(load(wh, folder)) == (1, 1, 0, 2, 2, 0)
    assert rows(wh, "SELECT event_id FROM raw.events ORDER BY seq") == [("aaaaaaa1",), ("aaaaaaa2",)]
