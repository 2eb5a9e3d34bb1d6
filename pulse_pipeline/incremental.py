"""Per-session tables refreshed for the sessions whose inputs changed, not rebuilt whole (issue 16 item 1).

Why: a drop of 100 sessions used to rebuild every per-session table over every session (120 s of features alone
at three times the paper's scale). Each per-session table stays one Dagster asset (one table, one transaction,
idempotent), and is incremental inside:

- A session's **version** is what its rows are computed from: the ``staging.sessions`` record (``record_key``) and
  its drop's ``raw.drops.fingerprint`` (a drop rewritten under the same name keeps its record keys but may change
  their content): ``staging.SESSION_VERSIONS_SQL``. A table may add what else its rows depend on (``depends_on``:
  its code's digest, the annotator's prompt version and model, the version a per-session table it reads was
  computed from).
- ``staging.computed_versions`` records, per table (``key``), the version each session's rows were computed from.
  This module is its one writer: a stage records and forgets through ``refreshing``, ``record_all``, ``forget``
  and ``recompute_later`` (the contract forgets a table's rows when it recreates the table in a newer shape).
- A refresh (``refreshing``): the *changed* sessions are the staged ones whose version differs from the recorded
  one, the staged ones not recorded, and the recorded ones no longer staged. The caller deletes the table's rows
  of the changed sessions (``Refresh.delete``), computes and inserts the rows of those still staged (reading
  ``Refresh.sessions``: their ``staging.sessions`` rows), and the bookkeeping of the changed sessions is replaced.
  All of it inside the asset's one transaction, so a killed run leaves table and bookkeeping as they were.
- A session recorded twice is changed too, so its rows are deleted and computed once: two runs that computed the
  same new sessions at once (on a PostgreSQL catalog, from two machines; DuckLake sees no conflict where nothing
  was deleted) each inserted them and recorded them, and without this every later run kept both copies and the
  ``*_cover_sessions`` checks failed for good (issue 34; one machine's runs take ``home_lock.writer_lock``).
- A session whose rows say they failed (an annotator's status ``failed``) is not recorded (``recompute_later``):
  the next refresh asks again, as a rebuild would have.
- A key with nothing recorded (a new table, one ``ensure_tables`` recreated, a warehouse from before this module)
  is rebuilt whole: every row of its scope is deleted first, so rows nobody recorded never survive.

The result equals a rebuild from scratch (``tests/test_incremental.py``): a session's rows depend on that session's
inputs only, and every input is in its version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from . import tables
from .warehouse import Warehouse

CHANGED = "_pulse_changed"
"""Temporary table of one refresh: (session_id, version), version NULL for a session no longer staged."""
CHANGED_SESSIONS = "_pulse_changed_sessions"
"""Temporary table of one refresh: the ``staging.sessions`` rows of the changed sessions still staged."""


@dataclass(frozen=True)
class Refreshed:
    """What a refresh left: the table's rows (in its scope), and how many sessions it recomputed or removed."""

    rows: int
    sessions_touched: int


@dataclass(frozen=True)
class Refresh:
    """One refresh in progress (see the module docstring)."""

    key: str  # the bookkeeping's table_name
    touched: int  # changed sessions: recomputed, or removed
    whole: bool  # nothing was recorded: the scope is rebuilt whole

    @property
    def sessions(self) -> str:
        """The relation holding the ``staging.sessions`` rows to compute (every staged session when whole)."""
        return tables.STAGING_SESSIONS.qualified if self.whole else CHANGED_SESSIONS

    def delete(self, wh: Warehouse, t: tables.Table, scope: str = "", params: Sequence = ()) -> None:
        """Delete ``t``'s rows of the changed sessions (all of them when whole) within ``scope`` (SQL, optional)."""
        where = [] if self.whole else [f"session_id IN (SELECT session_id FROM {CHANGED})"]
        where += [f"({scope})"] if scope else []
        sql = f"DELETE FROM {t.qualified}" + (f" WHERE {' AND '.join(where)}" if where else "")
        wh.con.execute(sql, list(params))

    def session_ids(self, wh: Warehouse) -> list[str]:
        """The changed sessions still staged, in id order: those whose rows are computed."""
        return [r[0] for r in wh.con.execute(f"SELECT session_id FROM {self.sessions} ORDER BY 1").fetchall()]


@contextmanager
def refreshing(wh: Warehouse, key: str, versions_sql: str, depends_on: str = "") -> Iterator[Refresh]:
    """Find the changed sessions of ``key``, let the caller replace their rows, then record their versions.

    ``versions_sql`` gives (session_id, version) for every staged session (``staging.SESSION_VERSIONS_SQL``, or a
    table's own); ``depends_on`` is appended to each version. Nothing is recorded if the body raises (the asset's
    transaction is then rolled back)."""
    recorded = f"SELECT session_id, version FROM {tables.COMPUTED_VERSIONS.qualified} WHERE table_name = $key"
    whole = wh.con.execute(f"SELECT count(*) = 0 FROM ({recorded})", {"key": key}).fetchone()[0]
    wh.con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {CHANGED} AS
        SELECT session_id, now.version
        FROM (SELECT session_id, version || $depends AS version FROM ({versions_sql})) now
        FULL JOIN (
            SELECT session_id, any_value(version) AS version, count(*) AS times FROM ({recorded}) GROUP BY session_id
        ) done USING (session_id)
        WHERE now.version IS DISTINCT FROM done.version OR done.times > 1""",
        {"key": key, "depends": depends_on},
    )
    if not whole:
        wh.con.execute(
            f"CREATE OR REPLACE TEMP TABLE {CHANGED_SESSIONS} AS SELECT s.* FROM {tables.STAGING_SESSIONS.qualified} s"
            f" SEMI JOIN {CHANGED} c USING (session_id)"
        )
    touched = wh.con.execute(f"SELECT count(*) FROM {CHANGED}").fetchone()[0]
    yield Refresh(key, touched, whole)
    wh.con.execute(
        f"DELETE FROM {tables.COMPUTED_VERSIONS.qualified} WHERE table_name = $key"
        f" AND session_id IN (SELECT session_id FROM {CHANGED})",
        {"key": key},
    )
    wh.con.execute(
        f"INSERT INTO {tables.COMPUTED_VERSIONS.qualified} SELECT $key, session_id, version FROM {CHANGED}"
        " WHERE version IS NOT NULL",
        {"key": key},
    )
    wh.con.execute(f"DROP TABLE {CHANGED}")
    wh.con.execute(f"DROP TABLE IF EXISTS {CHANGED_SESSIONS}")


def recompute_later(wh: Warehouse, key: str, sessions_sql: str, params: Sequence = ()) -> int:
    """Forget the recorded version of the sessions ``sessions_sql`` selects (one column: session_id), so the next
    refresh of ``key`` computes them again; returns how many. For rows that failed for a passing reason (an LLM
    that timed out), which a rebuild from scratch would have asked again."""
    return wh.con.execute(
        f"DELETE FROM {tables.COMPUTED_VERSIONS.qualified} WHERE table_name = ? AND session_id IN ({sessions_sql})",
        [key, *params],
    ).fetchone()[0]


def record_all(wh: Warehouse, key: str, versions_sql: str, depends_on: str = "") -> None:
    """Record every staged session's version under ``key``: for a table whose rows were all computed now (a fit
    that predicted every session, ``modeling/reuse.py``). The same bookkeeping a refresh that recomputed every
    changed session leaves."""
    with refreshing(wh, key, versions_sql, depends_on):
        pass


def forget(wh: Warehouse, key: str) -> int:
    """Forget every recorded version of ``key`` (its table holds no rows worth keeping: the next refresh rebuilds
    it whole); returns how many sessions were recorded."""
    return wh.con.execute(f"DELETE FROM {tables.COMPUTED_VERSIONS.qualified} WHERE table_name = ?", [key]).fetchone()[0]


def recorded_under(wh: Warehouse, key: str, depends_on: str) -> tuple[int, int]:
    """How many sessions ``key`` has recorded, and how many of them were not computed with ``depends_on`` (their
    version does not end with it)."""
    recorded, other = wh.con.execute(
        "SELECT count(*), count(*) FILTER (WHERE NOT ends_with(version, $depends))"
        f" FROM {tables.COMPUTED_VERSIONS.qualified} WHERE table_name = $key",
        {"depends": depends_on, "key": key},
    ).fetchone()
    return int(recorded), int(other)


def code_digest(*modules: ModuleType, text: str = "") -> str:
    """A digest of the modules' source files (and ``text``): a table whose rows these compute is recomputed whole
    after any change to them, so a rule changed by an upgrade never leaves older sessions computed the old way."""
    h = hashlib.sha1(text.encode())
    for module in modules:
        h.update(Path(module.__file__).read_bytes())
    return h.hexdigest()[:12]
