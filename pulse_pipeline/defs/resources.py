"""Resources, configured from ``PULSE_HOME`` (see ``paths.py``)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from ..connections import connect, one_instance
from ..paths import PulseHome
from ..warehouse import Warehouse


class WarehouseResource(dg.ConfigurableResource):
    """The warehouse's tables, each asset's writes one transaction: ``database`` is the working file that
    ``connections.connect`` opens (the lock; the lake it attaches is ``PULSE_HOME/lake/``, or with
    ``PULSE_LAKE_CATALOG=none`` the file holds the tables).

    No asset publishes: the analysts' file (``publish_to``) is replaced only when the tables are whole
    (``defs/publish.py``), at the end of a CLI command or, for runs the daemon launched, by the publish sensor.
    """

    database: str
    publish_to: str
    drops_dir: str

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator["WarehouseResource"]:
        """In a run, every step's connection shares one DuckDB instance (``connections.one_instance``), as a CLI
        command's do: the lake's extensions are loaded and its catalog attached once per run, not once per step
        (a small drop's run under ``pulse ui`` has some 40 steps; on a loaded machine each open took 0.4-0.5 s).
        Resources are set up once per run with the in-process executor (``definitions.py``), once per step with
        an executor that runs each step in its own process.

        That holds the working database's lock for the whole run: runs go one at a time anyway (the run queue),
        and a CLI command holds it for its whole length too. Not in a sensor's evaluation (no run), which must
        never hold it: the drop sensor reads ``raw.drops`` only when the lock is free."""
        if context.dagster_run is None:
            yield self
            return
        with one_instance(Path(self.database)):
            yield self

    @contextmanager
    def warehouse(self, transaction: bool = True) -> Iterator[Warehouse]:
        """An open warehouse whose writes are one transaction: committed when the body returns, rolled back when
        it raises or its process dies, so no table is ever seen half rewritten (a derived table is a DELETE and
        several INSERTs).

        ``transaction=False`` is for loading a drop, which commits in batches on purpose (DuckDB holds an open
        transaction's appends in memory; see ``ingest/load.py``): its rows are replaced whole by the next load of
        the drop, and ``defs/publish.py`` publishes nothing while a drop's last load is unfinished.
        """
        con = connect(Path(self.database))
        try:
            wh = Warehouse(con)  # creates missing tables first, committed on their own
            if not transaction:
                yield wh
                return
            con.begin()
            try:
                yield wh
            except BaseException:
                con.rollback()
                raise
            con.commit()
        finally:
            con.close()

    @property
    def drops(self) -> Path:
        return Path(self.drops_dir)


def warehouse_resource(home: PulseHome) -> WarehouseResource:
    return WarehouseResource(database=str(home.work_db), publish_to=str(home.warehouse), drops_dir=str(home.drops))
