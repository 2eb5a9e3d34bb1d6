"""Running the Dagster assets in-process, for the CLI: the same assets and jobs the sensor triggers. Each command
publishes the analysts' copy at its end if the working database is then whole (``defs/publish.py``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from . import progress, tables
from .connections import connect, one_instance
from .drops import DropState, RemovedRows, drop_states, remove_rows, resolve
from .home_lock import writer_lock
from .ingest.drop import list_drops
from .ingest.register import register_drop
from .paths import PulseHome
from .warehouse import Warehouse

Say = Callable[[str], None]

# Dagster's console logger at INFO: step-by-step DEBUG events stay in the run history, not on the terminal.
QUIET = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}
MATERIALIZE_JOB = "__ephemeral_asset_job__"  # the name dg.materialize gives its runs, as the run history shows them


def instance_for(home: PulseHome) -> dg.DagsterInstance:
    """The home's Dagster instance, its storage created once: under a lock of its own (``INSTANCE_LOCK``, held for
    a moment, so a reader never waits for a run), because two first runs creating the SQLite tables at once both
    failed ("table runs already exists", issue 34)."""
    with writer_lock(home.work_db.parent, name=INSTANCE_LOCK):
        home.ensure()
        os.environ["DAGSTER_HOME"] = str(home.dagster_home)
        return dg.DagsterInstance.from_config(str(home.dagster_home))  # creates the SQLite storage's tables


INSTANCE_LOCK = "instance.lock"


def _definitions(home: PulseHome) -> dg.Definitions:
    from .definitions import build_definitions

    return build_definitions(home)


@dataclass(frozen=True)
class DropSummary:
    drop: str
    path: str
    sessions: int
    events: int
    segments: int
    ratings: int  # rating rows and answered asks (an ask row with its rating)
    asks: int  # asks logged (ratings-file rows with ask_probability), answered or not
    assignments: int
    quarantined: int
    reconciled: bool
    warehouse: str
    # (reason, records) of the drop's quarantine, most frequent first (``quarantine.py``)
    quarantine_reasons: list[tuple[str, int]] = field(default_factory=list)
    # sessions other drops had delivered that this drop replaced with other content, by drop (``staging/sql.py``)
    replaced: dict[str, int] = field(default_factory=dict)
    # sessions of this drop that another drop replaced (a drop dated later), by that drop
    replaced_by: dict[str, int] = field(default_factory=dict)

    def replacement_lines(self) -> list[str]:
        """One line each way when a replacement involves this drop, naming the drops and the query to see them."""
        lines = []
        if self.replaced:
            lines.append(
                f"replaced {sum(self.replaced.values())} sessions another drop had delivered, with other content"
                f" (a later drop wins a session id): {_by_drop(self.replaced)}"
            )
        if self.replaced_by:
            lines.append(
                f"{sum(self.replaced_by.values())} of its sessions were replaced by a later drop with other content:"
                f" {_by_drop(self.replaced_by)}"
            )
        if lines:
            lines.append(
                f'see them: pulse sql "SELECT * FROM {tables.REPLACED_SESSIONS.qualified} WHERE'
                f" '{self.drop}' IN (drop_id, replaced_by_drop_id)\""
            )
        return lines


def _by_drop(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} from drop {drop}" for drop, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _check(result: dg.ExecuteInProcessResult, what: str) -> None:
    if not result.success:
        failures = [e.message for e in result.all_events if e.is_failure]
        raise RuntimeError(f"{what} failed: " + "; ".join(failures[-3:]))


def _counting_logger(advance: progress.Advance, total: int) -> dg.LoggerDefinition:
    """A Dagster logger that advances a bar by one for each asset materialized, the asset's key as its note.

    Why a logger: Dagster hands every event of a run, as it happens, to each logger of the job as a log record
    (the event on the record's ``dagster_meta``), so a logger follows a run without touching its assets."""

    class Counter(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            event = getattr(record, "dagster_meta", {}).get("dagster_event")
            if event is not None and event.is_step_materialization:
                advance(1, total, event.asset_key.to_user_string())

    @dg.logger
    def counting(_: dg.InitLoggerContext) -> logging.Logger:
        logger = logging.Logger("pulse.progress", level=logging.DEBUG)
        logger.addHandler(Counter())
        return logger

    return counting


def _execute(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    partition_key: str | None,
    run_config: dict,
    what: str,
    advance: progress.Advance | None = None,
    total: int = 0,
) -> None:
    """Run the job in this process; with ``advance``, a bar counts its assets materialized out of ``total``."""
    if advance is not None:  # Dagster starts only the loggers the run config names
        job = job.with_logger_defs({**job.loggers, "progress": _counting_logger(advance, total)})
        run_config = {**run_config, "loggers": {**run_config.get("loggers", {}), "progress": {}}}
    result = job.execute_in_process(
        instance=instance, partition_key=partition_key, raise_on_error=False, run_config=run_config
    )
    _check(result, what)


def _assets_of(defs: dg.Definitions, *jobs: str) -> int:
    """How many assets the jobs materialize (for a bar's total)."""
    return sum(len(defs.resolve_job_def(job).asset_layer.selected_asset_keys) for job in jobs)


def _publish(home: PulseHome, defs: dg.Definitions, instance: dg.DagsterInstance, say: Say) -> str | None:
    """Replace the analysts' copy if the working database is whole; else say why it was left as it was, and
    return that reason (None: published)."""
    from .defs.publish import publish_if_whole

    reason = publish_if_whole(instance, defs.resolve_asset_graph(), home.work_db, home.warehouse)
    say(f"{home.warehouse} not replaced: {reason}" if reason else f"published {home.warehouse}")
    return reason


def publish(home: PulseHome) -> str | None:
    """Publish the analysts' file now if the working database is whole (``pulse publish``); None when published,
    else why not. Needed after a home was moved or copied for a file that is attached from elsewhere
    (``lake.guard_where``); any run publishes anyway."""
    from .connections import exists
    from .defs.publish import publish_if_whole

    if not exists(home.work_db):
        return f"no warehouse in {home.root} yet: run `pulse ingest PATH` or `pulse demo` first"
    instance = instance_for(home)
    return publish_if_whole(instance, _definitions(home).resolve_asset_graph(), home.work_db, home.warehouse)


def publish_again(home: PulseHome, why: str, say: Say) -> str | None:
    """Publish the analysts' file again because ``why`` (``publish.written_since_published``, or an analyst's
    read-write connection holding it): PULSE's readers then read what the tables hold, never an analyst's writes.
    Returns None once published, else why not, in one line with what to run."""
    say(f"{why}: publishing it again from the warehouse's tables before reading it")
    reason = publish(home)
    if reason:
        return f"{why}, and it was not published again: {reason}; run `PULSE_HOME={home.root} pulse publish` once it is"
    return None


def publish_again_here(home: PulseHome, old: str, say: Say) -> str | None:
    """Publish the analysts' file again when it reads the Parquet files of ``old``, another folder
    (``lake.reads_elsewhere``): a file published, by a PULSE before views found their own home, for a home since
    moved or copied here. Returns None once published, else why not, in one line with what to run."""
    say(f"{home.warehouse} reads the files of {old} (this home was moved or copied): publishing it for {home.root}")
    reason = publish(home)
    if reason:
        return (
            f"{home.warehouse} reads the files of {old} and was not published again: {reason};"
            f" run `PULSE_HOME={home.root} pulse publish` once it is"
        )
    return None


def ingest(home: PulseHome, path: Path, name: str | None = None, say: Say = print) -> DropSummary:
    defs = _definitions(home)  # first: it checks the settings files, so a broken one registers nothing
    with writer_lock(home.work_db.parent, say):  # one writer per home at a time (home_lock.py)
        return _ingest(home, defs, path, name, say)


def _ingest(home: PulseHome, defs: dg.Definitions, path: Path, name: str | None, say: Say) -> DropSummary:
    from .definitions import DOWNSTREAM_JOB
    from .defs.ingest.partitions import drops_partitions
    from .defs.ingest.sensors import INGEST_JOB

    key, target = register_drop(home, path, name)  # then: a drop it refuses leaves no trace
    instance = instance_for(home)
    if not instance.has_dynamic_partition(drops_partitions.name, key):
        instance.add_dynamic_partitions(drops_partitions.name, [key])
    total = _assets_of(defs, INGEST_JOB, DOWNSTREAM_JOB)
    with one_instance(home.work_db), progress.bar("assets", unit="asset", total=total) as advance:
        say(f"ingesting drop {key} ({target})")
        ingest_job = defs.resolve_job_def(INGEST_JOB)
        _execute(ingest_job, instance, key, QUIET, f"run of {INGEST_JOB} ({key})", advance, total)
        say("rebuilding derived tables")
        downstream = defs.resolve_job_def(DOWNSTREAM_JOB)
        _execute(downstream, instance, None, QUIET, f"run of {DOWNSTREAM_JOB} (all drops)", advance, total)
    _publish(home, defs, instance, say)
    return drop_summary(home, key)


def drop_summary(home: PulseHome, key: str) -> DropSummary:
    """What the warehouse holds for one drop (quarantine counts both ingest and staging rows), its quarantine
    reasons, and the sessions it replaced or lost to other drops (``staging.replaced_sessions``)."""
    from .ingest.load import reconcile_drop
    from .quarantine import reasons

    con = connect(home.work_db)
    try:
        wh = Warehouse(con)
        where = ("drop_id = ?", [key])
        ok, _ = reconcile_drop(wh, key)
        path = con.execute(f"SELECT path FROM {tables.DROPS.qualified} WHERE drop_id = ?", [key]).fetchone()
        return DropSummary(
            drop=key,
            path=path[0] if path else "",
            sessions=wh.count(tables.SESSIONS, *where),
            events=wh.count(tables.EVENTS, *where),
            segments=con.execute(
                f"SELECT coalesce(sum(n_segments), 0) FROM {tables.SESSIONS.qualified} WHERE drop_id = ?", [key]
            ).fetchone()[0],
            ratings=wh.count(tables.RATINGS, *where)
            + wh.count(tables.ASKS, "drop_id = ? AND rating IS NOT NULL", [key]),
            asks=wh.count(tables.ASKS, *where),
            assignments=wh.count(tables.ASSIGNMENTS, *where),
            quarantined=wh.count(tables.QUARANTINE, *where),
            reconciled=ok,
            warehouse=str(home.warehouse),
            quarantine_reasons=[(r.reason, r.count) for r in reasons(con, key)],
            replaced=_replacements(con, "replaced_by_drop_id", "drop_id", key),
            replaced_by=_replacements(con, "drop_id", "replaced_by_drop_id", key),
        )
    finally:
        con.close()


def _replacements(con, this: str, other: str, key: str) -> dict[str, int]:
    """Rows of ``staging.replaced_sessions`` whose column ``this`` is the drop, counted by column ``other``."""
    sql = f"SELECT {other}, count(*) FROM {tables.REPLACED_SESSIONS.qualified} WHERE {this} = ? GROUP BY 1"
    return {drop: int(n) for drop, n in con.execute(sql, [key]).fetchall()}


@dataclass(frozen=True)
class Materialized:
    """What :func:`materialize` did: the asset keys it materialized, and why the analysts' copy was not replaced
    (None: it was published)."""

    keys: list[str]
    not_published: str | None


def select_assets(defs: dg.Definitions, selection: str | None) -> set[dg.AssetKey]:
    """The assets a ``--select`` string picks (every asset but the on-demand ones when None), with the rest of a
    multi-asset a picked asset belongs to: a raw table is written with the rest of its drop.

    A selection Dagster cannot parse or resolve, or one that picks nothing, raises ValueError in one line naming
    the groups and how keys are spelled (Dagster's own error is a traceback)."""
    from .definitions import ON_DEMAND

    graph = defs.resolve_asset_graph()
    try:
        picked = dg.AssetSelection.from_string(selection) if selection else dg.AssetSelection.all() - ON_DEMAND
        keys = picked.required_multi_asset_neighbors().resolve(graph)
    except dg.DagsterError as e:
        raise ValueError(f"--select {selection!r}: {_selection_problem(e, graph)}; {_selection_help(graph)}") from None
    if not keys:
        raise ValueError(
            f"--select {selection!r} matches no asset{_close_keys(selection, graph)}; {_selection_help(graph)}"
        )
    return keys


def _selection_problem(error: dg.DagsterError, graph) -> str:
    """Dagster's complaint in one line; for keys that do not exist, the closest real keys."""
    import difflib
    import re

    text = str(error).strip().splitlines()[0]
    missing = re.search(r"AssetKey\(s\) \[(.*?)\] were selected", text)
    if missing is None:
        return text
    names = [k.to_user_string() for k in graph.get_all_asset_keys()]
    wrong = [w.strip(" '\"") for w in missing.group(1).split(",")]
    close = [c for w in wrong for c in difflib.get_close_matches(w, names, n=2)]
    return f"no asset {', '.join(wrong)}" + (f" (did you mean {' or '.join(close)}?)" if close else "")


def _close_keys(selection: str | None, graph) -> str:
    """ " (did you mean ...?)" for the ``key:`` terms of a selection that name no asset, else ""."""
    import difflib
    import re

    names = [k.to_user_string() for k in graph.get_all_asset_keys()]
    close = [
        c for w in re.findall(r"key:([\w/\-\"]+)", selection or "") for c in difflib.get_close_matches(w, names, n=2)
    ]
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _selection_help(graph) -> str:
    groups = sorted({graph.get(k).group_name for k in graph.get_all_asset_keys()} - {None})
    return (
        f"groups: {', '.join(groups)}; keys are schema/table (key:staging/sessions); combine with 'or', add '+' "
        "for what depends on it (group:features+)"
    )


def materialize(
    home: PulseHome, selection: str | None = None, say: Say = print, op_config: dict | None = None
) -> Materialized:
    """Materialize every asset (or the selection) over all drops in the drop folder; returns the asset keys and
    whether the analysts' copy was published.

    "Every asset" leaves out the on-demand ones (coverage validation); select them by name. ``op_config`` maps an
    asset's op name to its config (e.g. the validation's replications). The selection is resolved before anything
    is written: a bad one creates no folder (:func:`select_assets`)."""
    defs = _definitions(home)
    keys = select_assets(defs, selection)
    with writer_lock(home.work_db.parent, say):  # one writer per home at a time (home_lock.py)
        return _materialize(home, defs, keys, say, op_config)


def _materialize(
    home: PulseHome, defs: dg.Definitions, keys: set[dg.AssetKey], say: Say, op_config: dict | None
) -> Materialized:
    from .defs.ingest.partitions import drops_partitions

    graph = defs.resolve_asset_graph()
    instance = instance_for(home)
    partitioned = {k for k in keys if graph.get(k).partitions_def is not None}
    runs: list[tuple[str, set[dg.AssetKey], str | None]] = []  # (message, assets, partition)
    if partitioned:
        drops = list_drops(home.drops)
        missing = [k for k in drops if not instance.has_dynamic_partition(drops_partitions.name, k)]
        if missing:
            instance.add_dynamic_partitions(drops_partitions.name, missing)
        runs += [(f"[{i}/{len(drops)}] drop {key}", partitioned, key) for i, key in enumerate(drops, start=1)]
    if keys - partitioned:
        runs.append((f"materializing {len(keys - partitioned)} derived assets", keys - partitioned, None))
    assets = list(defs.assets or []) + list(defs.asset_checks or [])
    run_config = {**QUIET, **({"ops": {k: {"config": v} for k, v in op_config.items()}} if op_config else {})}
    total = sum(len(run_keys) for _, run_keys, _ in runs)  # every partitioned asset once per drop
    with one_instance(home.work_db), progress.bar("assets", unit="asset", total=total) as advance:
        for message, run_keys, partition_key in runs:
            say(message)
            # what dg.materialize does, keeping the job so that a bar can listen to its run
            subset = dg.AssetSelection.assets(*run_keys)
            job = dg.Definitions(
                jobs=[dg.define_asset_job(MATERIALIZE_JOB, selection=subset)], assets=assets, resources=defs.resources
            ).resolve_job_def(MATERIALIZE_JOB)
            _execute(job, instance, partition_key, run_config, message, advance, total)
    reason = _publish(home, defs, instance, say)
    return Materialized(sorted(k.to_user_string() for k in keys), reason)


def drop_list(home: PulseHome) -> list[DropState]:
    """``pulse drop ls``: every drop with its state (``drops.drop_states``), loaded times from the Dagster instance;
    an empty list before anything was ingested."""
    from .connections import exists

    if not exists(home.work_db):
        return []
    instance = instance_for(home)
    con = connect(home.work_db, read_only=True)
    try:
        return drop_states(con, home.drops, _loaded_at(instance, con))
    finally:
        con.close()


def _loaded_at(instance: dg.DagsterInstance, con) -> dict[str, datetime]:
    """When each drop was last loaded: its ``raw/drops`` partition's latest materialization, in UTC."""
    key = dg.AssetKey([tables.DROPS.schema, tables.DROPS.name])
    found = {}
    for (drop,) in con.execute(f"SELECT drop_id FROM {tables.DROPS.qualified}").fetchall():
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=[drop]), limit=1
        ).records
        if records:
            found[drop] = datetime.fromtimestamp(records[0].timestamp, UTC).replace(tzinfo=None, microsecond=0)
    return found


def remove_drop(home: PulseHome, name: str, say: Say = print) -> RemovedRows:
    """``pulse drop rm NAME``: the drop's rows and folder removed in one transaction (``drops.remove_rows``), its
    partition deleted, then every derived table refreshed (the ingest's second run) and the warehouse published.

    Why the partition goes too: the drop sensor requests runs only for drops in the drop folder, so with the folder
    gone nothing is ingested again, and its cursor (the drops it gave up on) forgets it at its next tick; without
    the partition the Dagster UI no longer lists the drop. ValueError, naming the known drops, for an unknown one."""
    from .connections import exists

    if not exists(home.work_db):
        raise ValueError(f"no drop {name!r}: nothing was ingested into {home.root} yet")
    with writer_lock(home.work_db.parent, say):  # one writer per home at a time (home_lock.py)
        return _remove_drop(home, name, say)


def _remove_drop(home: PulseHome, name: str, say: Say) -> RemovedRows:
    from .definitions import DOWNSTREAM_JOB
    from .defs.ingest.partitions import drops_partitions

    instance = instance_for(home)
    defs = _definitions(home)
    with one_instance(home.work_db):
        con = connect(home.work_db)
        try:
            wh = Warehouse(con)
            drop = resolve(con, home.drops, name)
            removed = remove_rows(wh, home.drops, drop)
        finally:
            con.close()
        if instance.has_dynamic_partition(drops_partitions.name, drop):
            instance.delete_dynamic_partition(drops_partitions.name, drop)
        say(f"removed drop {drop}; rebuilding derived tables")
        total = _assets_of(defs, DOWNSTREAM_JOB)
        with progress.bar("assets", unit="asset", total=total) as advance:
            downstream = defs.resolve_job_def(DOWNSTREAM_JOB)
            try:
                _execute(downstream, instance, None, QUIET, f"run of {DOWNSTREAM_JOB} (all drops)", advance, total)
            except RuntimeError as error:  # the drop is gone whole; only what depends on it waits
                raise RuntimeError(
                    f"drop {drop} was removed, but refreshing the tables derived from it failed ({error});"
                    " fix the cause, then run `pulse materialize`"
                ) from error
    _publish(home, defs, instance, say)
    return removed
