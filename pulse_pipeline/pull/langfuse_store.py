"""What the Langfuse pull has received, kept on disk, and the drops written from it: whole sessions each time.

Why a store: staging keeps one record per session id, the latest drop's (``staging/sql.py``). Langfuse lists
observations newest first, a page at a time, and a session's traces arrive across pulls (a conversation goes on
for days; a pull stops at a page budget and resumes). A drop holding only what one pull received would replace a
session's earlier traces with its latest few. So every observation and score pulled is kept in an SQLite file
(``PULSE_HOME/.work/langfuse-pull/<source>/store.sqlite``, one per Langfuse host and project), and each drop holds,
for every session the pull touched, every observation the store has of that session and every score on it: a later
drop's copy of a session is always a superset of an earlier one's. A page is one transaction with the endpoint's
cursor, so a pull killed anywhere resumes where its last whole page ended and never loses or doubles a row.

What "touched" means: an observation or score that is new, or whose JSON differs from the stored one (Langfuse
updates an observation when its span ends; the pull asks again for an overlap window before the last pull's end,
and what comes back unchanged touches nothing, so the overlap costs requests, not reloads of sessions).

A session is the observations' ``sessionId`` (the trace's, denormalised onto each observation), else the trace id
(a trace without a session is its own session, as the reader maps it). A score's session is found through its
subject (``subject.kind``: ``trace`` and ``observation`` through the trace id, ``session`` directly). A score whose
trace or session has no observation in the store yet *waits* in the store: it goes into the drop that first holds
its session, so a rating always arrives in the same drop as the trace it rates (the reader needs the trace to know
the session). Scores of a dataset run (``experiment``) and rows that name no trace or have no id belong to no
session: they are written once, when new or changed, for the reader to count (and quarantine with its reason).

The drop (``write_drop``) is a folder, built under a hidden name in the drop folder and renamed whole (the drop
sensor never sees half of it): ``observations_v2/observations-00001.jsonl``, ... and ``scores/scores-00001.jsonl``,
one API object per line exactly as Langfuse returned it, a session never split across files, and the sidecar
``_langfuse_pull.json`` (counts; ingest does not read ``_`` files). The touched marks are cleared only after the
rename, so a pull killed before it writes those sessions again next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..atomic_write import fsync_folder

OBSERVATIONS_FOLDER = "observations_v2"
SCORES_FOLDER = "scores"
SIDECAR = "_langfuse_pull.json"
DROP_PREFIX = "langfuse-pull-"
LINES_PER_FILE = 50_000  # a file is closed at the first session boundary past this many lines
STORE_FILE = "store.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS observations (
    trace_id TEXT NOT NULL, id TEXT NOT NULL, start_time TEXT, body TEXT NOT NULL, PRIMARY KEY (trace_id, id));
CREATE INDEX IF NOT EXISTS observations_by_id ON observations (id);
CREATE TABLE IF NOT EXISTS traces (trace_id TEXT PRIMARY KEY, session_id TEXT, session_key TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS traces_by_session ON traces (session_key);
CREATE TABLE IF NOT EXISTS scores (
    id TEXT PRIMARY KEY, kind TEXT, subject_id TEXT, trace_id TEXT, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS scores_by_trace ON scores (trace_id);
CREATE INDEX IF NOT EXISTS scores_by_subject ON scores (kind, subject_id);
CREATE TABLE IF NOT EXISTS loose (
    endpoint TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, touched INTEGER NOT NULL,
    PRIMARY KEY (endpoint, id));
CREATE TABLE IF NOT EXISTS touched_traces (trace_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS touched_sessions (session_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS walks (
    endpoint TEXT PRIMARY KEY, in_walk INTEGER NOT NULL, cursor TEXT, window_from TEXT, window_to TEXT,
    watermark TEXT);
"""


@dataclass(frozen=True)
class Walk:
    """One endpoint's place: a walk down its pages for the window [``window_from``, ``window_to``) (newest
    first), ``cursor`` the next page's (None: the walk's first page); ``watermark`` the end of the last finished
    walk, from which the next one starts (less the overlap)."""

    in_walk: bool = False
    cursor: str | None = None
    window_from: str | None = None
    window_to: str | None = None
    watermark: str | None = None


@dataclass
class PageCounts:
    """What one page brought: rows received, and how many of them were new or changed."""

    received: int = 0
    changed: int = 0


@dataclass(frozen=True)
class WrittenDrop:
    """A drop written: its folder, and what it holds."""

    path: Path
    sessions: int
    observations: int
    scores: int
    loose: int  # rows of no session (dataset-run scores, rows without a trace or an id)


def _dump(item: object) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _loose_id(item: object, body: str) -> str:
    """A row's own id when it has one, else its content's digest (so the same row is stored once)."""
    own = _text(item.get("id")) if isinstance(item, dict) else None
    return own or "sha256:" + hashlib.sha256(body.encode()).hexdigest()


class LangfuseStore:
    """The store of one Langfuse project (module docstring). Use as a context manager; one process at a time
    (``langfuse.py`` holds a lock beside it)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.con = sqlite3.connect(folder / STORE_FILE, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=FULL")
        self.con.executescript(SCHEMA)

    def __enter__(self) -> LangfuseStore:
        return self

    def __exit__(self, *exc) -> None:
        self.con.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self.con.execute("BEGIN IMMEDIATE")
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    # ---------------------------------------------------------------------------------------------- walks

    def walk(self, endpoint: str) -> Walk:
        row = self.con.execute(
            "SELECT in_walk, cursor, window_from, window_to, watermark FROM walks WHERE endpoint = ?", (endpoint,)
        ).fetchone()
        return Walk() if row is None else Walk(bool(row[0]), row[1], row[2], row[3], row[4])

    def _set_walk(self, con: sqlite3.Connection, endpoint: str, walk: Walk) -> None:
        con.execute(
            "INSERT OR REPLACE INTO walks VALUES (?, ?, ?, ?, ?, ?)",
            (endpoint, int(walk.in_walk), walk.cursor, walk.window_from, walk.window_to, walk.watermark),
        )

    def begin_walk(self, endpoint: str, window_from: str | None, window_to: str) -> Walk:
        """Start a walk of ``endpoint`` over [window_from, window_to), kept so a pull killed before its first
        page resumes the same window."""
        walk = Walk(True, None, window_from, window_to, self.walk(endpoint).watermark)
        with self._transaction() as con:
            self._set_walk(con, endpoint, walk)
        return walk

    def _advance(self, con: sqlite3.Connection, endpoint: str, walk: Walk, next_cursor: str | None) -> Walk:
        if next_cursor is None:  # the walk reached its last page: the window is done
            done = Walk(False, None, None, None, walk.window_to)
        else:
            done = Walk(True, next_cursor, walk.window_from, walk.window_to, walk.watermark)
        self._set_walk(con, endpoint, done)
        return done

    # ---------------------------------------------------------------------------------------------- pages

    def add_observations(self, walk: Walk, items: Iterable[object], next_cursor: str | None) -> tuple[Walk, PageCounts]:
        """Keep a page of v2 observations and move the walk past it, in one transaction."""
        counts = PageCounts()
        with self._transaction() as con:
            for item in items:
                counts.received += 1
                body = _dump(item)
                trace_id = _text(item.get("traceId")) if isinstance(item, dict) else None
                own_id = _text(item.get("id")) if isinstance(item, dict) else None
                if trace_id is None or own_id is None:
                    counts.changed += self._add_loose(con, "observations", item, body)
                    continue
                session_id = _text(item.get("sessionId"))
                con.execute(
                    "INSERT INTO traces VALUES (?1, ?2, coalesce(?2, ?1)) ON CONFLICT (trace_id) DO UPDATE SET"
                    " session_id = coalesce(excluded.session_id, session_id),"
                    " session_key = coalesce(excluded.session_id, session_id, trace_id)",
                    (trace_id, session_id),
                )
                old = con.execute(
                    "SELECT body FROM observations WHERE trace_id = ? AND id = ?", (trace_id, own_id)
                ).fetchone()
                if old is not None and old[0] == body:
                    continue
                start = item.get("startTime")
                con.execute(
                    "INSERT OR REPLACE INTO observations VALUES (?, ?, ?, ?)",
                    (trace_id, own_id, start if isinstance(start, str) else None, body),
                )
                con.execute("INSERT OR IGNORE INTO touched_traces VALUES (?)", (trace_id,))
                counts.changed += 1
            walk = self._advance(con, "observations", walk, next_cursor)
        return walk, counts

    def add_scores(self, walk: Walk, items: Iterable[object], next_cursor: str | None) -> tuple[Walk, PageCounts]:
        """Keep a page of v3 scores and move the walk past it, in one transaction."""
        counts = PageCounts()
        with self._transaction() as con:
            for item in items:
                counts.received += 1
                body = _dump(item)
                own_id = _text(item.get("id")) if isinstance(item, dict) else None
                subject = item.get("subject") if isinstance(item, dict) else None
                kind = _text(subject.get("kind")) if isinstance(subject, dict) else None
                subject_id = _text(subject.get("id")) if isinstance(subject, dict) else None
                if own_id is None or subject_id is None or kind not in ("trace", "observation", "session"):
                    counts.changed += self._add_loose(con, "scores", item, body)
                    continue
                trace_id = {"trace": subject_id, "observation": _text(subject.get("traceId"))}.get(kind)
                if kind == "observation" and trace_id is None:  # v3 names it "if available": look it up
                    found = con.execute("SELECT trace_id FROM observations WHERE id = ? LIMIT 1", (subject_id,))
                    trace_id = next((row[0] for row in found), None)
                old = con.execute("SELECT body FROM scores WHERE id = ?", (own_id,)).fetchone()
                if old is not None and old[0] == body:
                    continue
                con.execute(
                    "INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?)", (own_id, kind, subject_id, trace_id, body)
                )
                if trace_id is not None:
                    con.execute("INSERT OR IGNORE INTO touched_traces VALUES (?)", (trace_id,))
                elif kind == "session":
                    con.execute("INSERT OR IGNORE INTO touched_sessions VALUES (?)", (subject_id,))
                counts.changed += 1  # an observation score whose observation is not here yet: see write_drop
            walk = self._advance(con, "scores", walk, next_cursor)
        return walk, counts

    def _add_loose(self, con: sqlite3.Connection, endpoint: str, item: object, body: str) -> int:
        """Keep a row of no session; 1 when it is new or changed (it is then written in the next drop)."""
        key = _loose_id(item, body)
        old = con.execute("SELECT body FROM loose WHERE endpoint = ? AND id = ?", (endpoint, key)).fetchone()
        if old is not None and old[0] == body:
            return 0
        con.execute("INSERT OR REPLACE INTO loose VALUES (?, ?, ?, 1)", (endpoint, key, body))
        return 1

    # ---------------------------------------------------------------------------------------------- drops

    def waiting_scores(self) -> int:
        """Scores kept for a session the store has no observation of yet (written with it when it comes)."""
        return self.con.execute(
            "SELECT (SELECT count(*) FROM scores s WHERE s.kind <> 'session' AND (s.trace_id IS NULL OR NOT EXISTS"
            "  (SELECT 1 FROM traces t WHERE t.trace_id = s.trace_id)))"
            " + (SELECT count(*) FROM scores s WHERE s.kind = 'session' AND NOT EXISTS"
            "  (SELECT 1 FROM traces t WHERE t.session_key = s.subject_id))"
        ).fetchone()[0]

    def write_drop(
        self, drops: Path, source: str, now: datetime | None = None, meta: dict | None = None
    ) -> WrittenDrop | None:
        """Write every touched session whole (and the new loose rows) as one drop in ``drops``; None when
        nothing was touched. ``source`` names the store in the hidden build folder's name."""
        con = self.con
        with self._transaction():  # an observation score's trace, once its observation is here
            con.execute(
                "UPDATE scores SET trace_id = (SELECT o.trace_id FROM observations o WHERE o.id = scores.subject_id"
                " LIMIT 1) WHERE kind = 'observation' AND trace_id IS NULL"
            )
        con.execute("DROP TABLE IF EXISTS temp.drop_sessions")
        con.execute(
            "CREATE TEMP TABLE drop_sessions AS"
            " SELECT DISTINCT t.session_key FROM touched_traces x JOIN traces t USING (trace_id)"
            " UNION SELECT t.session_key FROM touched_sessions x JOIN traces t ON t.session_key = x.session_id"
        )
        sessions = con.execute("SELECT count(*) FROM temp.drop_sessions").fetchone()[0]
        loose = con.execute("SELECT count(*) FROM loose WHERE touched = 1").fetchone()[0]
        if sessions == 0 and loose == 0:
            self._clear_touched()
            return None
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
        building = drops / f".{DROP_PREFIX}{source}.tmp"
        if building.exists():  # a killed pull's (this process holds the store's lock)
            shutil.rmtree(building)
        try:
            target = self._build(building, drops, stamp, sessions, loose, now, meta)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        self._clear_touched()
        return target

    def _build(
        self,
        building: Path,
        drops: Path,
        stamp: str,
        sessions: int,
        loose: int,
        now: datetime | None,
        meta: dict | None,
    ) -> WrittenDrop:
        con = self.con
        building.mkdir(parents=True)
        observations = _write_lines(
            building / OBSERVATIONS_FOLDER,
            "observations",
            con.execute(
                "SELECT t.session_key, o.body FROM temp.drop_sessions d JOIN traces t USING (session_key)"
                " JOIN observations o USING (trace_id) ORDER BY t.session_key, o.trace_id, o.start_time, o.id"
            ),
            con.execute("SELECT '', body FROM loose WHERE endpoint = 'observations' AND touched = 1 ORDER BY id"),
        )
        scores = _write_lines(
            building / SCORES_FOLDER,
            "scores",
            con.execute(
                "SELECT session_key, body FROM ("
                " SELECT t.session_key, s.id, s.body FROM temp.drop_sessions d JOIN traces t USING (session_key)"
                "  JOIN scores s ON s.trace_id = t.trace_id AND s.kind <> 'session'"
                " UNION ALL SELECT d.session_key, s.id, s.body FROM temp.drop_sessions d"
                "  JOIN scores s ON s.kind = 'session' AND s.subject_id = d.session_key"
                ") ORDER BY session_key, id"
            ),
            con.execute("SELECT '', body FROM loose WHERE endpoint = 'scores' AND touched = 1 ORDER BY id"),
        )
        sidecar = {
            "written_at": (now or datetime.now(UTC)).isoformat(),
            "sessions": sessions,
            "observations": observations,
            "scores": scores,
            "rows_of_no_session": loose,
            "scores_waiting_for_their_session": self.waiting_scores(),
            **(meta or {}),
        }
        (building / SIDECAR).write_text(json.dumps(sidecar, indent=2) + "\n", encoding="utf-8")
        for folder in (building / OBSERVATIONS_FOLDER, building / SCORES_FOLDER, building):
            if folder.is_dir():
                fsync_folder(folder)
        target = _free_name(drops, f"{DROP_PREFIX}{stamp}")
        os.replace(building, target)
        fsync_folder(drops)
        return WrittenDrop(target, sessions, observations, scores, loose)

    def _clear_touched(self) -> None:
        with self._transaction() as con:
            con.execute("DELETE FROM touched_traces")
            con.execute("DELETE FROM touched_sessions")
            con.execute("UPDATE loose SET touched = 0 WHERE touched = 1")
        self.con.execute("DROP TABLE IF EXISTS temp.drop_sessions")


def _free_name(drops: Path, name: str) -> Path:
    """``drops/name``, or ``name-2``, ``name-3``, ... when a drop of that name exists (two pulls in a second)."""
    target, n = drops / name, 1
    while target.exists():
        n += 1
        target = drops / f"{name}-{n}"
    return target


def _write_lines(folder: Path, stem: str, *rows: Iterable[tuple[str, str]]) -> int:
    """Write ``(session key, JSON line)`` rows into ``folder/<stem>-00001.jsonl``, ... (a new file at the first
    session boundary past ``LINES_PER_FILE`` lines; no folder when there is no row), each file fsynced; returns
    the lines written."""
    written = 0
    number = 0
    out = None
    in_file = 0
    last_key: str | None = None
    try:
        for source in rows:
            for key, body in source:
                if out is None or (in_file >= LINES_PER_FILE and key != last_key):
                    if out is not None:
                        _close(out)
                    number += 1
                    folder.mkdir(exist_ok=True)
                    out = open(folder / f"{stem}-{number:05d}.jsonl", "w", encoding="utf-8")  # noqa: SIM115 - rotated, closed below
                    in_file = 0
                out.write(body)
                out.write("\n")
                in_file += 1
                written += 1
                last_key = key
    finally:
        if out is not None:
            _close(out)
    return written


def _close(out) -> None:
    out.flush()
    os.fsync(out.fileno())
    out.close()
