"""Where PULSE keeps its state.

Everything lives under ``PULSE_HOME`` (default ``./data``, resolved once, to an absolute path):

- ``pulse.duckdb``   what analysts open: views over one whole state of the lake's tables (a read-only copy of
                     the working database with PULSE_LAKE_CATALOG=none), replaced atomically when a run leaves the
                     tables whole (``defs/publish.py``), so a shell left open on it never blocks a run;
- ``lake/``          the tables: a DuckLake's SQLite catalog and Parquet files (``lake.py``; PULSE_LAKE_CATALOG);
- ``.work/``         ``pulse-work.duckdb``: the lock that keeps one writer per home, DuckDB's spill space and the LLM
                     answer cache (with PULSE_LAKE_CATALOG=none: every table);
- ``drops/``         the drop folder: each file or folder in it is one drop (one Dagster partition);
- ``dagster/``       the Dagster instance (``DAGSTER_HOME``): the project's ``dagster.yaml``, plus a PostgreSQL
                     ``storage`` section when PULSE_DAGSTER_POSTGRES_URL is set (else SQLite files here);
- ``report/``        the report;
- ``experiments.toml``, ``benchmarks.csv``, ``human_labels.csv``  settings files of your own (optional).

A home moved or copied whole (``mv``, ``cp -a``) keeps working where it lands, and a copy goes its own way: what
PULSE relies on names no absolute path of the home (the lake's catalog is given its data folder at each attach;
the analysts' views find their files from their own folder, ``lake.home_of_file``). Only records of the past keep
the old path: ``raw.drops.path`` (where a drop was copied) and the Dagster run history.

Settings files resolve one way (:meth:`PulseHome.settings_file`): a file in PULSE_HOME wins, else the package's
shipped default (``pulse_pipeline/defaults/``), so a new PULSE_HOME still has the paper's control arms and
benchmark differences. Each resolved file says where it came from, and ``pulse`` prints it. Every settings file is
read whole and checked before any work starts (``preflight.check_settings``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .settings import DAGSTER_POSTGRES_URL, Env, dagster_postgres_url, home_root

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULTS = Path(__file__).resolve().parent / "defaults"  # settings files shipped inside the package

HUMAN_LABELS = "human_labels.csv"  # in PULSE_HOME: human annotations for features.annotator_agreement
HOME_SOURCE = "PULSE_HOME"
DEFAULT_SOURCE = "shipped default"


class SettingsFile(NamedTuple):
    """A settings file as resolved: its path and where it came from (``HOME_SOURCE`` or ``DEFAULT_SOURCE``)."""

    path: Path
    source: str

    def describe(self, home: Path) -> str:
        """One line for a terminal or asset metadata: the file, where it came from, and how to override it."""
        if self.source == DEFAULT_SOURCE:
            return f"{self.path} (shipped default; put your own at {home / self.path.name})"
        return f"{self.path} ({self.source})"


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

    def settings_file(self, name: str) -> SettingsFile:
        """``name`` in PULSE_HOME if it is there, else the package's shipped default of that name."""
        own = self.root / name
        return SettingsFile(own, HOME_SOURCE) if own.is_file() else SettingsFile(DEFAULTS / name, DEFAULT_SOURCE)

    @property
    def experiments_file(self) -> SettingsFile:
        """Each experiment's control arm, unit and intended split (``estimates/experiments.py``)."""
        return self.settings_file("experiments.toml")

    @property
    def benchmarks_file(self) -> SettingsFile:
        """Benchmark score differences per comparison and development cluster (``estimates/benchmarks.py``)."""
        return self.settings_file("benchmarks.csv")

    @property
    def human_labels_file(self) -> Path | None:
        """``PULSE_HOME/human_labels.csv`` when it exists (no shipped default: human labels are about your sessions);
        ``PULSE_HUMAN_LABELS`` overrides it (``defs/features/resources.py``)."""
        own = self.root / HUMAN_LABELS
        return own if own.is_file() else None

    def settings_lines(self) -> list[str]:
        """What ``pulse`` prints after a run: which experiments and benchmarks files it used."""
        return [
            f"experiments: {self.experiments_file.describe(self.root)}",
            f"benchmarks: {self.benchmarks_file.describe(self.root)}",
        ]

    def ensure(self, environ: Env | None = None) -> PulseHome:
        """Create the folders and write the Dagster instance's dagster.yaml (:func:`instance_yaml`)."""
        for folder in (self.root, self.work_db.parent, self.drops, self.dagster_home, self.report):
            folder.mkdir(parents=True, exist_ok=True)
        template = PROJECT_ROOT / "dagster.yaml"
        target = self.dagster_home / "dagster.yaml"
        if template.exists():
            wanted = instance_yaml(template.read_text(), dagster_postgres_url(environ) is not None)
            if not target.exists() or target.read_text() != wanted:
                # whole or not at all: a daemon or run worker may be loading the instance at this moment
                partial = target.with_name(f".{target.name}.{os.getpid()}")
                partial.write_text(wanted)
                os.replace(partial, target)
        return self


POSTGRES_STORAGE = f"""
# Added by PULSE because {DAGSTER_POSTGRES_URL} is set: runs, event logs, schedules and sensor ticks live in
# that PostgreSQL database. Dagster reads the URL from the variable in each process (webserver, daemon, run
# workers), so the password is never written here.
storage:
  postgres:
    postgres_url:
      env: {DAGSTER_POSTGRES_URL}
"""


def instance_yaml(template: str, postgres: bool) -> str:
    """The instance's dagster.yaml: the project's dagster.yaml as it is (run queue, launcher, run monitoring),
    plus, when the instance is on PostgreSQL, a ``storage`` section that names the URL's variable.

    Appended as text rather than re-dumped, so the project file's comments stay; the project's dagster.yaml has
    no ``storage`` key of its own (``tests/test_postgres_instance.py`` checks the merged result)."""
    return template + POSTGRES_STORAGE if postgres else template
