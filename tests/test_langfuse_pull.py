"""`pulse pull langfuse` against the fake Langfuse on loopback (``tests/fake_langfuse.py``): pages, cursors,
resuming, whole sessions across pulls, a score arriving after its trace, 429 with Retry-After, 500, 401/403,
redirects, keys never written anywhere, the drop as ingest's drop folder lists it, and the sensor.

The shapes the fake serves, and so what these tests expect in a drop, are Langfuse's own, read at
langfuse/langfuse@62751446149b702b419a9292ddfc2280cdf74b8c: ``fern/apis/server/definition/observations.yml`` and
``commons.yml`` (``ObservationV2``: field groups, ``meta.cursor`` absent on the last page),
``fern/apis/server/definition/scores-v3.yml`` (``value`` typed by ``dataType``, ``subject{kind, id, traceId}``,
``limit`` at most 100), ``web/src/pages/api/public/v2/observations/index.ts`` (``limit + 1`` rows fetched to know
whether a cursor follows), ``web/src/features/public-api/types/observations.ts`` (the base64 cursor
``{lastStartTimeTo, lastTraceId, lastId}``), ``packages/shared/src/server/repositories/events.ts`` (newest first)
and ``scores.ts`` (``scoreDomainToV3``, ``deriveSubjectForV3``, the base64url cursor ``{v, lastTimestamp,
lastId}``). Every count below is worked out from the rows each test serves.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from pulse_pipeline import cli
from pulse_pipeline.ingest.drop import drop_units, list_drops, why_empty
from pulse_pipeline.pull.langfuse import (
    OBSERVATION_FIELDS,
    SCORE_FIELDS,
    PullBusy,
    pull_langfuse,
    pull_lock,
    source_id,
)
from pulse_pipeline.pull.langfuse_client import LangfuseClient, PullError, RetryPolicy, retry_after_seconds
from pulse_pipeline.pull.langfuse_store import LINES_PER_FILE, OBSERVATIONS_FOLDER, SCORES_FOLDER, SIDECAR
from pulse_pipeline.settings import langfuse_settings

from .fake_langfuse import (
    OBSERVATIONS_PATH,
    PUBLIC_KEY,
    SCORES_PATH,
    SECRET_KEY,
    FakeLangfuse,
    observation,
    running_fake_langfuse,
    score,
)

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)  # the traces' time
PULL_1 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # the first pull's clock
PULL_2 = PULL_1 + timedelta(hours=1)


def _settings(url: str, **extra: str):
    env = {"PULSE_LANGFUSE_PUBLIC_KEY": PUBLIC_KEY, "PULSE_LANGFUSE_SECRET_KEY": SECRET_KEY, "PULSE_LANGFUSE_HOST": url}
    return langfuse_settings({**env, **extra})


class Puller:
    """Pulls from one fake into one home, with a clock and a record of the client's waits."""

    def __init__(self, fake: FakeLangfuse, home: Path) -> None:
        self.fake = fake
        self.home = home
        self.sleeps: list[float] = []
        self.said: list[str] = []

    def __call__(self, now: datetime = PULL_1, **kwargs):
        client = LangfuseClient(
            self.fake.url, PUBLIC_KEY, SECRET_KEY, sleep=self.sleeps.append, say=self.said.append, retry=RetryPolicy()
        )
        return pull_langfuse(
            self.home / ".work", self.home / "drops", _settings(self.fake.url), client=client, now=lambda: now, **kwargs
        )


def _lines(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()]


def _observation_ids(drop: Path) -> list[str]:
    return [row["id"] for row in _lines(drop / OBSERVATIONS_FOLDER)]


def _session_a() -> list[dict]:
    """Session ``sess-a``: trace ``t1`` (3 observations), trace ``t2`` (2); trace ``t3`` has no session (2)."""
    rows = []
    for i, (obs, trace, session) in enumerate(
        [
            ("a1", "t1", "sess-a"),
            ("a2", "t1", "sess-a"),
            ("a3", "t1", "sess-a"),
            ("b1", "t2", "sess-a"),
            ("b2", "t2", "sess-a"),
            ("c1", "t3", None),
            ("c2", "t3", None),
        ]
    ):
        rows.append(
            observation(
                obs,
                trace,
                T0 + timedelta(minutes=i),
                type="GENERATION" if obs.endswith("2") else "SPAN",
                session_id=session,
                user_id="user-1",
                parent=None if obs.endswith("1") else f"{obs[0]}1",
                input=[{"role": "user", "content": f"hello from {obs}"}],
                model="gpt-4.1" if obs.endswith("2") else None,
                trace_name=f"run-{trace}",
            )
        )
    return rows


@pytest.fixture
def served():
    with running_fake_langfuse() as fake:
        yield fake


# ------------------------------------------------------------------------------------------ pages and the drop


def test_every_page_is_pulled_and_written_as_the_api_returned_it(served, tmp_path):
    served.observations = _session_a()
    served.scores = [
        score("s1", "user-feedback", 4, T0 + timedelta(hours=1), kind="trace", subject_id="t1"),
        score("s2", "helpfulness", True, T0 + timedelta(hours=2), kind="observation", subject_id="a2",
              trace_id="t1", data_type="BOOLEAN", source="EVAL"),
    ]  # fmt: skip
    report = Puller(served, tmp_path)(page_size=2)
    # 7 observations, 2 a page: pages of 2, 2, 2, 1; 2 scores: one page (no cursor after it)
    assert [report.endpoints[n].pages for n in ("observations", "scores")] == [4, 1]
    assert report.endpoints["observations"].finished and report.endpoints["scores"].finished
    drop = report.drop.path
    assert drop.parent == tmp_path / "drops" and drop.name == "langfuse-pull-20261201T120000Z"
    assert sorted(p.name for p in drop.iterdir()) == [SIDECAR, OBSERVATIONS_FOLDER, SCORES_FOLDER]
    assert [p.name for p in (drop / OBSERVATIONS_FOLDER).iterdir()] == ["observations-00001.jsonl"]
    # every field group asked for, so each line is the served object itself; grouped by session, then trace, time
    by_id = {row["id"]: row for row in served.observations}
    rows = _lines(drop / OBSERVATIONS_FOLDER)
    assert [row["id"] for row in rows] == ["a1", "a2", "a3", "b1", "b2", "c1", "c2"]  # sess-a, then t3 (own key)
    assert rows == [by_id[row["id"]] for row in rows]
    assert _lines(drop / SCORES_FOLDER) == sorted(served.scores, key=lambda s: s["id"])
    assert (report.drop.sessions, report.drop.observations, report.drop.scores) == (2, 7, 2)
    sidecar = json.loads((drop / SIDECAR).read_text())
    assert (sidecar["sessions"], sidecar["observations"], sidecar["scores"]) == (2, 7, 2)
    # the requests: all groups, the page size, the window up to the pull's clock, then each returned cursor
    obs_requests = [r for r in served.requests if r.path == OBSERVATIONS_PATH]
    assert [r.query.get("fields") for r in obs_requests] == [OBSERVATION_FIELDS] * 4
    assert {r.query["limit"] for r in obs_requests} == {"2"}
    assert {r.query["toStartTime"] for r in obs_requests} == {"2026-12-01T12:00:00.000Z"}
    assert all("fromStartTime" not in r.query for r in obs_requests)  # the first pull asks for everything
    assert "cursor" not in obs_requests[0].query and all("cursor" in r.query for r in obs_requests[1:])
    [score_request] = [r for r in served.requests if r.path == SCORES_PATH]
    assert score_request.query["fields"] == SCORE_FIELDS and score_request.query["limit"] == "2"
    assert "2 sessions whole (7 observations, 2 scores)" in report.line()


def test_the_drop_is_one_entry_the_drop_folder_lists_and_nothing_half_built_is_left(served, tmp_path):
    served.observations = _session_a()
    report = Puller(served, tmp_path)()
    drops = tmp_path / "drops"
    assert list(drops.iterdir()) == [report.drop.path]  # no hidden building folder left behind
    assert why_empty(report.drop.path) is None
    assert list(list_drops(drops).values()) == [report.drop.path]
    [unit] = drop_units(report.drop.path)  # one Langfuse unit of the JSONL file; the sidecar is not read
    assert [name for _, name in unit.members] == ["observations_v2/observations-00001.jsonl"]


def test_a_pull_with_nothing_new_writes_no_drop(served, tmp_path):
    served.observations = _session_a()
    pull = Puller(served, tmp_path)
    assert pull().drop is not None
    again = pull(now=PULL_2)  # its window [PULL_1 - 1 h, PULL_2) holds none of the November rows
    assert again.drop is None and "nothing new, so no drop written" in again.line()
    assert len(list((tmp_path / "drops").iterdir())) == 1


# ------------------------------------------------------------------------------------------ resuming, sessions


def test_a_stopped_pull_resumes_from_the_stored_cursor_of_the_same_window(served, tmp_path):
    served.observations = _session_a()
    pull = Puller(served, tmp_path)
    first = pull(page_size=3, max_pages=1)
    assert first.endpoints["observations"].pages == 1 and not first.endpoints["observations"].finished
    assert "the next pull resumes from the stored cursor" in first.line()
    # newest first: c2, c1 (t3) and b2 (sess-a); a drop of what the store holds of those two sessions
    assert sorted(_observation_ids(first.drop.path)) == ["b2", "c1", "c2"]
    cursor_given = [r for r in served.requests if r.path == OBSERVATIONS_PATH][-1]
    served.requests.clear()
    second = pull(now=PULL_2, page_size=3)  # a later clock: the window stays the first walk's
    resumed = [r for r in served.requests if r.path == OBSERVATIONS_PATH]
    assert resumed[0].query["toStartTime"] == cursor_given.query["toStartTime"] == "2026-12-01T12:00:00.000Z"
    assert "cursor" in resumed[0].query  # not the first page again
    assert second.endpoints["observations"].received == 4  # b1, a3, a2, a1: nothing twice
    # sess-a is written whole: b2 came in the first pull and is in the second drop too; t3 was not touched
    assert _observation_ids(second.drop.path) == ["a1", "a2", "a3", "b1", "b2"]
    third = pull(now=PULL_2 + timedelta(hours=1))  # a new walk from the watermark, less the overlap
    window = [r for r in served.requests if r.path == OBSERVATIONS_PATH][-1].query
    assert window["fromStartTime"] == "2026-12-01T11:00:00.000Z"  # PULL_1 (the finished walk's end) - 1 h
    assert third.drop is None


def test_a_session_whose_traces_arrive_over_several_pulls_is_written_whole_each_time(served, tmp_path):
    served.observations = _session_a()[:3]  # t1 of sess-a
    pull = Puller(served, tmp_path)
    assert _observation_ids(pull().drop.path) == ["a1", "a2", "a3"]
    later = observation("d1", "t4", PULL_1 + timedelta(minutes=10), session_id="sess-a", user_id="user-1")
    served.observations.append(later)  # a new trace of the same session, after the first pull
    second = pull(now=PULL_2)
    assert second.endpoints["observations"].received == 1
    assert _observation_ids(second.drop.path) == ["a1", "a2", "a3", "d1"]  # not just d1: staging keeps this copy
    assert second.drop.sessions == 1


def test_an_updated_observation_touches_its_session_and_an_unchanged_one_does_not(served, tmp_path):
    recent = observation("e1", "t5", PULL_2 - timedelta(minutes=30), session_id="sess-e", output="partial")
    served.observations = [recent]
    pull = Puller(served, tmp_path)
    assert pull(now=PULL_2).drop.observations == 1
    # asked again within the overlap ([12:00, 13:05)), the same: nothing written
    assert pull(now=PULL_2 + timedelta(minutes=5)).drop is None
    served.observations = [{**recent, "output": "the whole answer", "endTime": "2026-12-01T12:45:00.000Z"}]
    third = pull(now=PULL_2 + timedelta(minutes=10))
    assert third.endpoints["observations"].changed == 1
    [row] = _lines(third.drop.path / OBSERVATIONS_FOLDER)
    assert row["output"] == "the whole answer"


def test_a_long_drop_is_split_between_sessions_never_inside_one(served, tmp_path, monkeypatch):
    from pulse_pipeline.pull import langfuse_store

    monkeypatch.setattr(langfuse_store, "LINES_PER_FILE", 4)
    served.observations = _session_a()
    drop = Puller(served, tmp_path)().drop.path
    files = sorted((drop / OBSERVATIONS_FOLDER).glob("*.jsonl"))
    # sess-a's 5 lines pass 4 only at its end, so t3 starts the second file
    assert [len(f.read_text().splitlines()) for f in files] == [5, 2]
    assert LINES_PER_FILE == 50_000


# ------------------------------------------------------------------------------------------ scores


def test_a_score_arriving_after_its_trace_comes_with_its_session_in_a_later_drop(served, tmp_path):
    served.observations = _session_a()
    pull = Puller(served, tmp_path)
    first = pull()
    assert first.drop.scores == 0
    thumbs = score("fb1", "user-feedback", False, PULL_1 + timedelta(minutes=20), kind="trace", subject_id="t2",
                   data_type="BOOLEAN", comment="wrong file")  # fmt: skip
    served.scores.append(thumbs)
    second = pull(now=PULL_2)
    assert second.endpoints["observations"].received == 0 and second.endpoints["scores"].received == 1
    # the trace's whole session (t1 and t2) comes again with the score, so the reader finds t2's session
    assert _observation_ids(second.drop.path) == ["a1", "a2", "a3", "b1", "b2"]
    assert _lines(second.drop.path / SCORES_FOLDER) == [thumbs]
    assert _lines(second.drop.path / SCORES_FOLDER)[0]["value"] is False  # BOOLEAN as JSON, not 0/1


def test_a_score_before_its_trace_waits_in_the_store_and_comes_with_the_trace(served, tmp_path):
    early = score("fb2", "rating", 5, PULL_1 - timedelta(minutes=5), kind="trace", subject_id="t9")
    on_session = score("fb3", "rating", 2, PULL_1 - timedelta(minutes=4), kind="session", subject_id="sess-9")
    served.scores = [early, on_session]
    pull = Puller(served, tmp_path)
    first = pull()
    assert first.drop is None and first.waiting_scores == 2
    assert "2 scores wait for their trace's observations" in first.line()
    served.observations = [observation("g1", "t9", PULL_1 + timedelta(minutes=1), session_id="sess-9")]
    second = pull(now=PULL_2)
    assert second.waiting_scores == 0
    assert _observation_ids(second.drop.path) == ["g1"]
    assert [s["id"] for s in _lines(second.drop.path / SCORES_FOLDER)] == ["fb2", "fb3"]


def test_an_observation_score_without_its_trace_id_finds_it_through_the_store(served, tmp_path):
    served.observations = _session_a()
    served.scores = [score("s3", "rating", 3, T0, kind="observation", subject_id="c2")]  # no traceId given
    drop = Puller(served, tmp_path)().drop
    assert drop.scores == 1 and drop.sessions == 2


def test_rows_of_no_session_are_written_once(served, tmp_path):
    served.observations = _session_a()[:1] + [{**observation("x1", "tx", T0), "traceId": None}]
    served.scores = [
        score("run1", "accuracy", 0.9, PULL_1 - timedelta(minutes=1), kind="experiment", subject_id="run-7")
    ]
    pull = Puller(served, tmp_path)
    first = pull()
    assert first.drop.loose == 2 and "2 rows of no session" in first.line()
    assert "x1" in _observation_ids(first.drop.path)
    assert [s["id"] for s in _lines(first.drop.path / SCORES_FOLDER)] == ["run1"]
    assert pull(now=PULL_2).drop is None  # the experiment score comes again in the overlap, unchanged


# ------------------------------------------------------------------------------------------ faults


def test_a_429_waits_what_retry_after_says_then_goes_on(served, tmp_path):
    served.observations = _session_a()
    served.push(429, {"Retry-After": "7"}, path=OBSERVATIONS_PATH)
    pull = Puller(served, tmp_path)
    report = pull()
    assert pull.sleeps == [7.0]
    assert report.drop.observations == 7
    assert pull.said == [
        f"Langfuse at {served.url} answered 429 to GET {OBSERVATIONS_PATH}: asking again in 7 s (attempt 2 of 6)"
    ]


def test_a_500_backs_off_exponentially_and_a_503_honours_its_retry_after(served, tmp_path):
    served.observations = _session_a()
    served.push(500, path=OBSERVATIONS_PATH)
    served.push(502, path=OBSERVATIONS_PATH)
    served.push(503, {"Retry-After": "3"}, path=SCORES_PATH)
    pull = Puller(served, tmp_path)
    report = pull()
    assert pull.sleeps == [1.0, 2.0, 3.0]  # 1 s, then 2 s (RetryPolicy: base 1, factor 2); the 503 said 3
    assert report.drop.observations == 7


def test_retry_after_as_an_http_date():
    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("Tue, 01 Dec 2026 12:00:42 GMT", lambda: now) == 42.0
    assert retry_after_seconds("Tue, 01 Dec 2026 11:00:00 GMT", lambda: now) == 0.0  # past: at once
    assert retry_after_seconds("soon", lambda: now) is None and retry_after_seconds(None) is None


def test_retry_after_longer_than_the_pull_waits_stops_it_in_one_line(served, tmp_path):
    served.push(429, {"Retry-After": "3600"})
    with pytest.raises(PullError, match=r"asks to wait 3600 s \(more than 300\): pull again later"):
        Puller(served, tmp_path)()


def test_a_wait_past_the_time_budget_stops_the_pull_without_waiting(served, tmp_path):
    import time

    served.observations = _session_a()
    served.push(429, {"Retry-After": "30"}, path=OBSERVATIONS_PATH)
    pull = Puller(served, tmp_path)
    with pytest.raises(PullError, match="waiting 30 s to ask again would pass this pull's time budget"):
        pull(deadline=time.monotonic() + 10)
    assert pull.sleeps == []
    assert pull(now=PULL_2).drop.observations == 7  # the next pull does it all


def test_a_500_every_time_stops_the_pull_and_keeps_what_came_and_where_it_was(served, tmp_path):
    served.observations = _session_a()
    pull = Puller(served, tmp_path)
    pull(page_size=3, max_pages=1)  # the first page: c2, c1, b2
    for _ in range(6):
        served.push(500, path=OBSERVATIONS_PATH)
    with pytest.raises(PullError) as stopped:
        pull(now=PULL_2, page_size=3)
    message = str(stopped.value)
    assert f"answered 500 to GET {OBSERVATIONS_PATH} 6 times: giving up for now" in message
    assert "\n" not in message
    assert pull.sleeps == [1.0, 2.0, 4.0, 8.0, 16.0]
    served.requests.clear()
    last = pull(now=PULL_2, page_size=3)  # Langfuse is back: the walk resumes at its second page
    assert last.endpoints["observations"].received == 4
    assert "cursor" in [r for r in served.requests if r.path == OBSERVATIONS_PATH][0].query


def test_an_unreachable_host_is_asked_again_then_said_in_one_line(tmp_path):
    import socket

    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    sleeps: list[float] = []
    client = LangfuseClient(url, PUBLIC_KEY, SECRET_KEY, sleep=sleeps.append)
    with pytest.raises(PullError) as stopped:
        pull_langfuse(tmp_path / ".work", tmp_path / "drops", _settings(url), client=client)
    assert str(stopped.value).startswith(f"cannot reach Langfuse at {url} (")
    assert str(stopped.value).endswith("after 6 attempts: check PULSE_LANGFUSE_HOST and the network; the next pull"
                                       " resumes from the stored cursor")  # fmt: skip
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 16.0] and client.requests == 6


def test_a_redirect_is_not_followed(served, tmp_path):
    served.push(302, {"Location": "http://elsewhere.example/api"})
    with pytest.raises(PullError, match="redirects GET /api/public/v2/observations to http://elsewhere.example/api"):
        Puller(served, tmp_path)()
    assert len(served.requests) == 1


def test_another_pull_of_the_project_running_is_said(served, tmp_path):
    folder = tmp_path / ".work" / "langfuse-pull" / source_id(served.url, PUBLIC_KEY)
    with pull_lock(folder), pytest.raises(PullBusy, match="another pull of this Langfuse project is running"):
        Puller(served, tmp_path)()


# ------------------------------------------------------------------------------------------ the command


def _cli(home: Path, url: str | None, *args: str, public=PUBLIC_KEY, secret=SECRET_KEY) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PULSE_HOME": str(home)}
    if url:
        env["PULSE_LANGFUSE_HOST"] = url
    if public:
        env["PULSE_LANGFUSE_PUBLIC_KEY"] = public
    if secret:
        env["PULSE_LANGFUSE_SECRET_KEY"] = secret
    return subprocess.run(
        [sys.executable, "-m", "pulse_pipeline.cli", "pull", "langfuse", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a pull that wrote a drop runs it through every stage, as `pulse ingest` does
    )


def test_the_command_with_no_ingest_only_writes_the_drop(served, tmp_path):
    served.observations = _session_a()
    done = _cli(tmp_path / "home", served.url, "--no-ingest")
    assert done.returncode == 0, done.stderr
    assert "the drop sensor loads it under `pulse ui`; or run `pulse ingest " in done.stdout
    assert not (tmp_path / "home" / "pulse.duckdb").exists()  # nothing ran, nothing published


def _files_hold(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_the_command_pulls_ingests_and_never_writes_the_secret(served, tmp_path):
    """`pulse pull langfuse` writes the drop, then runs it as `pulse ingest` would (the sessions of
    ``_session_a``: ``sess-a`` and the session-less trace ``t3``), and no file under the home (the store, the drop,
    the warehouse, Dagster's run logs) holds either key."""
    served.observations = _session_a()
    done = _cli(tmp_path / "home", served.url)
    assert done.returncode == 0, done.stderr
    assert "wrote drop langfuse-pull-" in done.stdout and "2 sessions whole (7 observations, 0 scores)" in done.stdout
    # 10 events: each of the 3 traces opens its segment with the user's words, then its 7 observations in all
    assert re.search(r"^drop langfuse-pull-\w+: 2 sessions, 10 events, 3 segments, 0 ratings", done.stdout, re.M)
    assert SECRET_KEY not in done.stdout + done.stderr
    assert _files_hold(tmp_path / "home", SECRET_KEY) == [] and _files_hold(tmp_path / "home", PUBLIC_KEY) == []


def test_rejected_keys_are_one_line_naming_the_variables(served, tmp_path):
    done = _cli(tmp_path / "home", served.url, secret="sk-lf-wrong-secret-value")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        f"pulse pull: Langfuse at {served.url} rejected the keys (401 Unauthorized): check PULSE_LANGFUSE_PUBLIC_KEY"
        " and PULSE_LANGFUSE_SECRET_KEY (a project's API keys, Settings > API Keys) and PULSE_LANGFUSE_HOST"
    )
    assert "sk-lf-wrong-secret-value" not in done.stderr
    assert _files_hold(tmp_path / "home", "sk-lf-wrong-secret-value") == []


def test_a_403_says_the_keys_may_not_read_the_project(served, tmp_path):
    served.push(403)
    done = _cli(tmp_path / "home", served.url)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "does not let these keys read the project (403 Forbidden)" in done.stderr


def test_unset_keys_are_one_line(tmp_path):
    done = _cli(tmp_path / "home", None, public=None, secret=None)
    assert done.returncode == 2
    assert done.stderr.startswith(
        "pulse pull: PULSE_LANGFUSE_PUBLIC_KEY and PULSE_LANGFUSE_SECRET_KEY are not set: set PULSE_LANGFUSE_PUBLIC_KEY"
    )
    only_secret = _cli(tmp_path / "home", None, public=PUBLIC_KEY, secret=None)
    assert only_secret.stderr.startswith("pulse pull: PULSE_LANGFUSE_SECRET_KEY is not set:")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--page-size", "0"], "--page-size must be at least 1"),
        (["--page-size", "1001"], "--page-size must be at most 1000"),
        (["--max-pages", "0"], "--max-pages must be at least 1"),
    ],
)
def test_bad_options_are_refused(args, said, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PULSE_HOME", str(tmp_path / "home"))
    assert cli.main(["pull", "langfuse", *args]) == 2
    assert capsys.readouterr().err.strip() == f"pulse pull: {said}, got {args[1]}"


def test_a_bad_host_is_a_settings_error():
    from pulse_pipeline.settings import SettingsError

    with pytest.raises(SettingsError, match="PULSE_LANGFUSE_HOST='ftp://x' is not an http"):
        langfuse_settings({"PULSE_LANGFUSE_HOST": "ftp://x"})
    assert repr(_settings("http://127.0.0.1:1")).count(SECRET_KEY) == 0


# ------------------------------------------------------------------------------------------ the sensor


def _evaluate_sensor(home: Path):
    from pulse_pipeline.defs.ingest.pull_sensor import langfuse_pull_sensor
    from pulse_pipeline.defs.resources import warehouse_resource
    from pulse_pipeline.paths import PulseHome

    sensor = langfuse_pull_sensor()
    resources = {"warehouse": warehouse_resource(PulseHome(home))}
    with dg.instance_for_test() as instance, dg.build_sensor_context(instance=instance, resources=resources) as context:
        return sensor(context)


def test_the_sensor_skips_without_keys(tmp_path, monkeypatch):
    for name in ("PULSE_LANGFUSE_PUBLIC_KEY", "PULSE_LANGFUSE_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = _evaluate_sensor(tmp_path / "home")
    assert "PULSE_LANGFUSE_PUBLIC_KEY and PULSE_LANGFUSE_SECRET_KEY are not both set" in result.skip_message
    assert not (tmp_path / "home" / "drops").exists()


def test_the_sensor_pulls_into_the_drop_folder(served, tmp_path, monkeypatch):
    served.observations = _session_a()
    monkeypatch.setenv("PULSE_LANGFUSE_PUBLIC_KEY", PUBLIC_KEY)
    monkeypatch.setenv("PULSE_LANGFUSE_SECRET_KEY", SECRET_KEY)
    monkeypatch.setenv("PULSE_LANGFUSE_HOST", served.url)
    result = _evaluate_sensor(tmp_path / "home")
    assert "wrote drop langfuse-pull-" in result.skip_message
    [drop] = list_drops(tmp_path / "home" / "drops").values()
    assert sorted(_observation_ids(drop)) == ["a1", "a2", "a3", "b1", "b2", "c1", "c2"]
    served.push(401)
    assert "the pull stopped: Langfuse at" in _evaluate_sensor(tmp_path / "home").skip_message


# ------------------------------------------------------------------------------------------ the benchmark


def test_the_pull_bench_runs_small(tmp_path):
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "bench/langfuse_pull.py", "--observations", "3000", "--workdir", str(tmp_path)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "3,000 observations pulled" in done.stdout and "peak RSS" in done.stdout
    assert "60 sessions whole" in done.stdout  # 10 a trace, 5 traces a session: 3 000 / 50
