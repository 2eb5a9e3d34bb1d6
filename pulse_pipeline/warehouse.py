"""The warehouse handle, ``Warehouse``: the tables over one open connection (the Dagster resource wraps this).

Where the tables live and how a connection is opened: ``connections.py``; the write contract every write is
checked against: ``contract.py``; the analysts' copy: ``publish.py``.

Every write replaces exactly the rows it owns (one drop's rows, or a whole derived table), so re-running anything
leaves the tables as they were. A derived table's DELETE and INSERTs are one transaction: the Dagster resource
(``defs/resources.py``) runs each asset's body in one, so a killed run leaves each table as it was before or after.
"""

from __future__ import annotations

import duckdb
import polars as pl
import pyarrow as pa

from . import tables
from .connections import own_commits_database
from .contract import Rows, ensure_tables, insert_arrow, nan_to_null, to_frame
from .tables import Table


class Warehouse:
    """The tables, over one open connection to the working database."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        in_lake = own_commits_database(con) != con.execute("SELECT current_database()").fetchone()[0]
        ensure_tables(con, [t for t in tables.ALL_TABLES if not (in_lake and t is tables.LLM_CACHE)])

    def delete_drop(self, drop_id: str) -> None:
        """Remove every raw row of one drop (ingest-stage quarantine included)."""
        for t in tables.RAW_TABLES:
            extra = " AND stage = 'ingest'" if t is tables.QUARANTINE else ""
            self.con.execute(f"DELETE FROM {t.qualified} WHERE drop_id = ?{extra}", [drop_id])

    def insert(self, t: Table, data: pa.Table) -> None:
        """Append an arrow batch (the ingest stage's column builders make these)."""
        insert_arrow(self.con, t, data)

    def append(self, t: Table, rows: Rows, nan_as_null: bool = False) -> int:
        """Append ``rows`` (a frame, or dataclass rows), checked against the contract; returns how many.

        ``nan_as_null``: store NaN as NULL (see ``nan_to_null``); estimate tables ask for it.
        """
        frame = to_frame(t, rows)
        if nan_as_null:
            frame = nan_to_null(frame)
        insert_arrow(self.con, t, frame.to_arrow())
        return frame.height

    def replace(self, t: Table, rows: Rows, nan_as_null: bool = False) -> int:
        """Rewrite a whole derived table with ``rows`` (see ``append``)."""
        frame = to_frame(t, rows)  # checked before anything is deleted
        self.con.execute(f"DELETE FROM {t.qualified}")
        return self.append(t, frame, nan_as_null)

    def replace_table(self, t: Table, select_sql: str, params: list | None = None) -> int:
        """Rebuild a whole derived table from a query whose columns are the table's, in order."""
        self.con.execute(f"DELETE FROM {t.qualified}")
        self.con.execute(f"INSERT INTO {t.qualified} ({', '.join(t.column_names)}) {select_sql}", params or [])
        return self.count(t)

    def count(self, t: Table, where: str = "", params: list | None = None) -> int:
        sql = f"SELECT count(*) FROM {t.qualified}" + (f" WHERE {where}" if where else "")
        return self.con.execute(sql, params or []).fetchone()[0]

    def frame(self, sql: str, params: list | None = None) -> pl.DataFrame:
        return self.con.execute(sql, params or []).pl()
