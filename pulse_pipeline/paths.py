"""Where PULSE keeps its state.

Everything lives under ``PULSE_HOME`` (default ``./data``, resolved once, to an absolute path):

- ``pulse.duckdb``   the analysts' warehouse: a read-only copy of the working database, replaced atomically
                     when a run leaves the working database whole (``defs/publish.py``), so a shell left open
                     on it never blocks a run, and every table in it comes from the same complete state;
- ``.work/``         the working database the pipeline writes (``pulse-work.duckdb``);
- ``drops/``         the drop folder: each file or folder in it is one drop (one Dagster partition);
- ``dagster/``       the Dagster instance (``DAGSTER_HOME``), seeded with the project's ``dagster.yaml``;
- ``report/``        the report.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from .settings import home_root

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class PulseHome:
    root: Path

    @classmethod
    def from_env(cls) -> PulseHome:
        return cls(home_root())

    @property
    def warehouse(self) -> Path:
        return self.root / "pulse.duckdb"

    @property
    def work_db(self) -> Path:
        return self.root / ".work" / "pulse-work.duckdb"

    @property
    def drops(self) -> Path:
        return self.root / "drops"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster"

    @property
    def report(self) -> Path:
        return self.root / "report"

    def ensure(self) -> PulseHome:
        """Create the folders and seed the Dagster instance with the project's dagster.yaml."""
        for folder in (self.root, self.work_db.parent, self.drops, self.dagster_home, self.report):
            folder.mkdir(parents=True, exist_ok=True)
        template = PROJECT_ROOT / "dagster.yaml"
        target = self.dagster_home / "dagster.yaml"
        if template.exists() and (not target.exists() or target.read_bytes() != template.read_bytes()):
            shutil.copyfile(template, target)
        return self
