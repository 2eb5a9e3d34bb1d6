"""Writing the report: the page from the warehouse, written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from .drawing import drawn_once
from .page import build_page

REPORT_FILE = "index.html"


@dataclass(frozen=True)
class Report:
    path: Path
    sections: int
    figures: int
    bytes: int


def write_report(con: duckdb.DuckDBPyConnection, folder: Path, source: str, figure_cache: Path | None = None) -> Report:
    """Build the page from the warehouse open on ``con`` and write ``folder/index.html`` atomically: into a
    temporary file beside it, then ``os.replace``, so a reader (or a browser refreshing) never sees half a page
    and a failed build leaves the previous report in place. ``figure_cache``: where figures drawn with the same
    numbers as in the last build are kept (``drawing.drawn_once``; None draws every one)."""
    with drawn_once(figure_cache):
        page = build_page(con, source, datetime.now(UTC))
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / REPORT_FILE
    encoded = page.html.encode("utf-8")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".index-", suffix=".html.tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(encoded)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Report(target, page.sections, page.figures, len(encoded))


def report_from_warehouse(
    database: Path, folder: Path, opened: Callable[[], duckdb.DuckDBPyConnection] | None = None
) -> Report:
    """The report rebuilt from a warehouse file opened read-only (``pulse report`` on the published copy), so it
    runs beside the pipeline and never changes the warehouse. ``opened`` opens it instead of a plain read-only
    connect: ``pulse report`` passes ``cli._open_published``, which publishes it again first if an analyst wrote
    to it."""
    if not database.is_file():
        raise FileNotFoundError(f"no warehouse at {database} yet: run `pulse ingest PATH` or `pulse demo` first")
    con = opened() if opened is not None else duckdb.connect(str(database), read_only=True)
    try:
        return write_report(con, folder, source=str(database))
    finally:
        con.close()
