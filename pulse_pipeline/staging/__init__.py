"""Staging: the raw rows of all drops resolved into one consistent view (SQL inside DuckDB, no Dagster)."""

from .sql import (
    SESSION_VERSIONS_SQL,
    build_assignments,
    build_replaced_sessions,
    build_segment_ratings,
    build_session_asks,
    build_session_labels,
    build_sessions,
    build_work_segments,
    replacements,
)

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
