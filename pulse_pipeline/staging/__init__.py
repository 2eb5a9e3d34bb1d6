"""Staging: the raw rows of all drops resolved into one consistent view (SQL inside DuckDB, no Dagster).

The rules, one query each, are in ``sql.py``; the steps that write each table with them in ``build.py``. This
package names what the Dagster shell and the later stages call."""

from .build import (
    build_assignments,
    build_replaced_sessions,
    build_segment_ratings,
    build_session_asks,
    build_session_labels,
    build_sessions,
    build_work_segments,
    replacements,
)
from .sql import SESSION_VERSIONS_SQL

__all__ = [
    "SESSION_VERSIONS_SQL",
    "build_assignments",
    "build_replaced_sessions",
    "build_segment_ratings",
    "build_session_asks",
    "build_session_labels",
    "build_sessions",
    "build_work_segments",
    "replacements",
]
