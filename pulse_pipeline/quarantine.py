"""What ``raw.quarantine`` holds, said for a person: each reason with how many records it stopped, most frequent
first, and a few of their locations; the query that lists them all.

Why: an ingest that quarantined records printed "1 quarantined" and nothing about why or where to look (issue 33).
``pulse ingest`` prints the first few reasons of its drop (:func:`summary_lines`), ``pulse quarantine`` all of them
(from the published warehouse), and both name the query that shows every row with its raw text.

A reason is grouped as it is written (``ingest/files.py``, ``ingest/records.py``, ``staging/sql.py``), so reasons are
worded to group: the same fault in many records gives the same text, the record's own values stay in its
``raw_text`` and its location.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from . import tables

EXAMPLES = 3  # locations shown per reason
SUMMARY_REASONS = 5  # reasons `pulse ingest` prints; the rest are counted in one line


@dataclass(frozen=True)
class ReasonCount:
    reason: str
    count: int
    stage: str  # ingest or staging (the first, when a reason occurs at both)
    # where the first records are: "<drop>/<file> record <index>", then " event <i>" for an event of a session, or
    # " item <i>" for the i-th rating inside one record (a canonical session's ratings; raw.quarantine.event_index)
    examples: tuple[str, ...]


def reasons(con: duckdb.DuckDBPyConnection, drop: str | None = None) -> list[ReasonCount]:
    """Every reason of ``raw.quarantine`` (of one drop, or all), most frequent first, then by reason."""
    rows = con.execute(
        f"""
        SELECT reason, count(*) AS n, min(stage),
               list(drop_id || '/' || source_file || coalesce(' record ' || record_index, '')
                    || CASE WHEN record_type = 'event' THEN coalesce(' event ' || event_index, '')
                            WHEN event_index > 0 THEN ' item ' || event_index ELSE '' END
                    ORDER BY drop_id, source_file, record_index NULLS FIRST, event_index NULLS FIRST)[1:{EXAMPLES}]
        FROM {tables.QUARANTINE.qualified} {"WHERE drop_id = ?" if drop is not None else ""}
        GROUP BY reason ORDER BY n DESC, reason
        """,
        [drop] if drop is not None else [],
    ).fetchall()
    return [ReasonCount(reason, int(n), stage, tuple(examples)) for reason, n, stage, examples in rows]


def rows_query(drop: str | None = None) -> str:
    """The SQL that lists the quarantined records themselves (raw text included)."""
    where = " WHERE drop_id = '{}'".format(drop.replace("'", "''")) if drop is not None else ""
    columns = "drop_id, stage, source_file, record_index, reason, raw_text"
    return f"SELECT {columns} FROM {tables.QUARANTINE.qualified}{where} ORDER BY ALL"


def summary_lines(found: list[tuple[str, int]], drop: str, limit: int = SUMMARY_REASONS) -> list[str]:
    """The lines ``pulse ingest`` prints under its counts: the ``limit`` most frequent (reason, records), one more
    line counting the others, and where to see every record. Nothing when nothing was quarantined."""
    if not found:
        return []
    lines = [f"  {count:>6}  {reason}" for reason, count in found[:limit]]
    rest = found[limit:]
    if rest:
        lines.append(f"  {sum(count for _, count in rest):>6}  ({len(rest)} other reasons)")
    lines.append(f'see them: pulse quarantine --drop {drop}   or   pulse sql "{rows_query(drop)}"')
    return ["quarantined, by reason:", *lines]
