"""Resources, configured from ``PULSE_HOME`` (see ``paths.py``)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from ..paths import PulseHome
from ..warehouse import Warehouse, connect, publish


class WarehouseResource(dg.ConfigurableResource):
    """The working DuckDB database, published to the analysts' copy after every successful write."""

    database: str
    publish_to: str
    drops_dir: str

    @contextmanager
    def warehouse(self, publish_after: bool = True) -> Iterator[Warehouse]:
        """An open warehouse; on success the analysts' copy is refreshed unless ``publish_after`` is False."""
        con = connect(Path(self.database))
        try:
            yield Warehouse(con)
        finally:
            con.close()
        if publish_after:
            publish(Path(self.database), Path(self.publish_to))

    @property
    def drops(self) -> Path:
        return Path(self.drops_dir)


def warehouse_resource(home: PulseHome) -> WarehouseResource:
    return WarehouseResource(database=str(home.work_db), publish_to=str(home.warehouse), drops_dir=str(home.drops))
