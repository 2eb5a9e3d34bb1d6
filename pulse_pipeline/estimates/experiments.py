"""Experiments and their arms, from staging.assignments; the control arm of each from a small TOML file.

``PULSE_HOME/experiments.toml``, else the shipped default ``pulse_pipeline/defaults/experiments.toml``
(``paths.PulseHome.experiments_file``)::

    [experiments.llm-backbone]
    control = "claude-4-sonnet"
    split = { "claude-4-sonnet" = 1, "gpt-5" = 1 }   # optional: the intended traffic split (relative weights)
    unit = "user"                                     # optional: what was randomized, "session" or "user"

Arms without an assignment file (``arms_from``): an experiment whose arms are a session field, read for every
staged session (``estimates/field_arms.py``)::

    [experiments.model]
    arms_from = "metadata.model"          # a staging.sessions column, or metadata.<key>[.<key>...] of metadata_json
    control = "claude-4-sonnet"           # optional, as above
    arms = ["claude-4-sonnet", "gpt-5"]   # optional: only these values are arms; sessions with others are in none

The strata of the stratified prediction-powered estimate (``ppi_stratified``, ``estimates/strata.py``): a top-level
``strata = "<column>"`` sets the session column for every experiment, ``strata`` in an experiment's table for that
one; without either, the task type.

Such arms were not randomized: the experiment's ``design`` is ``observational`` (:data:`OBSERVATIONAL`), every
table that carries its comparison says so, and the report reads it as an association, not an effect. An experiment
that has assignments (an assignments file or the sessions' own experiment and variant) is read from them and is
``randomized`` even when the file also gives it an ``arms_from``: assignments win. A field that is no column of
``staging.sessions`` and no ``metadata.<key>`` path, or one that names each session alone (``session_id``,
``record_key``), stops the command in one line naming the file, the line and the key.

An experiment the file does not name, or a control the data do not have, falls back to the first arm
alphabetically (the reason is kept). Every other arm is a treatment compared with the control. Without a
``split`` the arms are meant to get equal traffic (what the sample-ratio check tests against).

The file is checked whole before any work starts (:func:`experiments_config`, called by ``settings_files``): a
syntax error, an unknown key, a unit other than "session" or "user", a split without arms or with a weight that is
not a positive number, or a control missing from its split stops the command in one line naming the file and line.

Guardrails (``docs/guardrails.md``): ``[guardrails.NAME]`` and ``[experiments.X.guardrails.NAME]`` tables, whose
keys ``guardrail_settings.py`` checks and resolves per experiment (``guardrail_settings.guardrails_for``).

The randomization unit (:func:`resolve_unit`). ``unit = "user"`` means a user's sessions all get the user's arm
and are not independent: every interval is then clustered by user and the sample-ratio check counts users.
Without ``unit`` the unit is detected from ``staging.assignments``: ``user`` when at least one user has several
sessions in the experiment and every such user always got the same arm, else ``session``. Detection cannot tell
sticky assignment from chance in an experiment where users rarely return, and the rule errs towards ``session``
only when the data contradict ``user``. Users who switch arms under ``unit = "user"`` (a broken sticky
assignment, a shared account) are left out of the comparison, not quarantined: their sessions are well-formed,
only unusable as user-level evidence, and the user belongs to no single arm; every row of the experiment records
how many sessions and users were left out. Sessions without a user id are their own cluster (nothing ties them to
other sessions).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .. import tables
from .guardrail_settings import guardrail_tables

RANDOMIZED, OBSERVATIONAL = "randomized", "observational"
DESIGNS = (RANDOMIZED, OBSERVATIONAL)
"""An experiment's design: its arms assigned (an assignments file or the sessions' own experiment and variant, which
PULSE takes as randomized), or read from a session field (``arms_from``: not randomized, an association)."""


@dataclass(frozen=True)
class Experiment:
    name: str
    control: str
    treatments: tuple[str, ...]
    note: str | None = None
    design: str = RANDOMIZED  # RANDOMIZED or OBSERVATIONAL (arms from a session field)
    design_note: str | None = None  # where the arms came from, and the sessions in none of them

    @property
    def notes(self) -> str | None:
        """What every row of the experiment says of its arms: its design note, then its control's note."""
        return "; ".join(x for x in (self.design_note, self.note) if x) or None

    @property
    def nothing_to_compare(self) -> str:
        """What every table says of an experiment with a single arm (no treatments)."""
        return f"single-arm experiment (only {self.control!r}): nothing to compare"


EXPERIMENT_KEYS = ("control", "split", "unit", "arms_from", "arms", "strata", "guardrails")
TOP_LEVEL_KEYS = ("experiments", "strata", "guardrails")


METADATA_PREFIX = "metadata."
"""``arms_from`` names a key of ``staging.sessions.metadata_json`` with this prefix (``metadata.model``)."""
ONE_PER_SESSION = ("session_id", "record_key")
"""Columns of ``staging.sessions`` that name each session alone: no arm is made of them."""
_METADATA_KEY = re.compile(r"[^.\"\\]+")


@dataclass(frozen=True)
class ArmsFrom:
    """An experiment whose arms are a session field: ``field`` is a ``staging.sessions`` column or
    ``metadata.<key>[.<key>...]``; ``arms``: the values kept as arms (None: every value)."""

    field: str
    arms: tuple[str, ...] | None = None

    @property
    def metadata_path(self) -> tuple[str, ...] | None:
        """The keys of ``metadata_json`` the field names, outermost first; None for a column."""
        if not self.field.startswith(METADATA_PREFIX):
            return None
        return tuple(self.field[len(METADATA_PREFIX) :].split("."))


def field_problem(field: object) -> str | None:
    """Why ``field`` (an ``arms_from`` value) names no session field, or None when it does: a ``staging.sessions``
    column (not ``metadata_json``, read by its keys, nor one of ``ONE_PER_SESSION``), or ``metadata.`` followed by
    one or more keys joined by dots (no empty key, no quote or backslash)."""
    columns = [c for c in tables.STAGING_SESSIONS.column_names if c not in ("metadata_json", *ONE_PER_SESSION)]
    known = f"a column of {tables.STAGING_SESSIONS.qualified} ({', '.join(columns)}) or metadata.<key>"
    if not isinstance(field, str) or not field:
        return f"must name a session field, {known}; got {field!r}"
    if field.startswith(METADATA_PREFIX):
        keys = field[len(METADATA_PREFIX) :].split(".")
        if all(_METADATA_KEY.fullmatch(k) for k in keys):
            return None
        return f"{field!r} is no metadata path: metadata.<key>, keys joined by dots, none empty"
    if field in ONE_PER_SESSION:
        return f"{field!r} names each session alone, so every session would be its own arm; use {known}"
    if field in columns:
        return None
    return f"{field!r} is no session field: use {known}"


@dataclass(frozen=True)
class ExperimentsConfig:
    """What ``experiments.toml`` configures, checked: experiment -> control arm, -> unit, -> arm -> weight, ->
    the session field its arms come from (``ArmsFrom``; only for experiments that declare ``arms_from``)."""

    controls: dict[str, str]
    units: dict[str, str]
    splits: dict[str, dict[str, float]]
    arms_from: dict[str, ArmsFrom] = dataclasses.field(default_factory=dict)
    # the session column whose values make the strata of ppi_stratified (``estimates/strata.py``): per experiment,
    # and the file's top-level default (None: not set, task type)
    strata: dict[str, str] = dataclasses.field(default_factory=dict)
    default_strata: str | None = None
    guardrails: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)
    experiment_guardrails: dict[str, dict[str, dict[str, object]]] = dataclasses.field(default_factory=dict)
    """``guardrails``: name -> keys of the top-level ``[guardrails.NAME]`` tables (checked, possibly partial only
    when disabled); ``experiment_guardrails``: experiment -> name -> its override keys.
    ``guardrail_settings.guardrails_for`` resolves them."""


def experiments_config(path: Path) -> ExperimentsConfig:
    """The experiments file at ``path`` read whole and checked; the one reader of the file (``read_controls``,
    ``read_units``, ``read_splits`` and the preflight, ``preflight.check_settings``, all call it).

    A missing file configures nothing. Anything else the stages could not use raises
    ``settings_files.SettingsFileError`` naming the file, the line and what is wrong: TOML syntax; a top-level key
    other than ``experiments``, ``guardrails`` and ``strata``; an experiment that is not a table or has a key other
    than control, split, unit, arms_from, arms, strata, guardrails; a control that is not a non-empty string; a
    unit other than "session" or "user"; a split that is not a table of arms, names no arm, gives an arm a weight
    that is not a positive number, or leaves out the control; an ``arms_from`` that names no session field
    (:func:`field_problem`) or comes with a split; ``arms`` without ``arms_from``, not a non-empty list of texts,
    or leaving out the control; a guardrail whose keys are unknown, missing or out of range
    (``guardrail_settings.guardrail_keys``); a ``strata`` (top level or per experiment) that is not a column name
    (``STRATA_PROBLEM``).
    """
    from ..settings_files import SettingsFileError, line_of, read_toml

    if not Path(path).exists():
        return ExperimentsConfig({}, {}, {}, {})  # no guardrails either
    doc, text = read_toml(path)

    def fail(what: str, table: str = "experiments", key: str | None = None) -> SettingsFileError:
        return SettingsFileError(path, what, line_of(text, table, key))

    for top in doc:
        if top not in TOP_LEVEL_KEYS:
            raise fail(
                f"unknown table or key {top!r}: the file holds [experiments.NAME] and [guardrails.NAME] tables and a"
                " strata key",
                top,
            )
    default_strata = None
    if "strata" in doc:
        default_strata = doc["strata"]
        if not _is_column_name(default_strata):
            top = next((i for i, line in enumerate(text.splitlines(), 1) if line.lstrip().startswith("strata")), None)
            raise SettingsFileError(path, f"strata {STRATA_PROBLEM}, got {default_strata!r}", top)
    guardrails = guardrail_tables(doc.get("guardrails", {}), "guardrails", fail, None)
    experiment_guardrails: dict[str, dict[str, dict[str, object]]] = {}
    specs = doc.get("experiments", {})
    if not isinstance(specs, dict):
        raise SettingsFileError(path, "experiments must be tables: [experiments.NAME]", line_of(text, "experiments"))
    controls: dict[str, str] = {}
    units: dict[str, str] = {}
    splits: dict[str, dict[str, float]] = {}
    arms_from: dict[str, ArmsFrom] = {}
    strata: dict[str, str] = {}
    for name, spec in specs.items():
        table = f"experiments.{name}"
        if not isinstance(spec, dict):
            raise fail(f"experiments.{name} must be a table ([experiments.{name}]), got {spec!r}", "experiments", name)
        unknown = [k for k in spec if k not in EXPERIMENT_KEYS]
        if unknown:
            raise fail(f"{table}: unknown key {unknown[0]!r} (known: {', '.join(EXPERIMENT_KEYS)})", table, unknown[0])
        if "control" in spec:
            control = spec["control"]
            if not isinstance(control, str) or not control.strip():
                raise fail(f"{table}.control must be an arm's name (text), got {control!r}", table, "control")
            controls[name] = control
        if "unit" in spec:
            if spec["unit"] not in UNITS:
                raise fail(f"{table}.unit must be one of {', '.join(UNITS)}, got {spec['unit']!r}", table, "unit")
            units[name] = spec["unit"]
        if "split" in spec:
            split = spec["split"]
            if not isinstance(split, dict) or not split:
                raise fail(f"{table}.split must name the arms and their weights, got {split!r}", table, "split")
            weights = {}
            for arm, w in split.items():
                if isinstance(w, bool) or not isinstance(w, int | float) or not w > 0:
                    raise fail(f"{table}.split.{arm} must be a positive number, got {w!r}", table, "split")
                weights[str(arm)] = float(w)
            if "arms_from" in spec:
                raise fail(
                    f"{table}.split: arms from a session field (arms_from) have no intended split", table, "split"
                )
            if name in controls and controls[name] not in weights:
                raise fail(
                    f"{table}: control {controls[name]!r} is not an arm of its split ({', '.join(weights)})",
                    table,
                    "control",
                )
            splits[name] = weights
        if "arms" in spec and "arms_from" not in spec:
            raise fail(f"{table}.arms keeps some values of a session field: give arms_from too", table, "arms")
        if "arms_from" in spec:
            problem = field_problem(spec["arms_from"])
            if problem is not None:
                raise fail(f"{table}.arms_from {problem}", table, "arms_from")
            kept = spec.get("arms")
            if kept is not None:
                if not isinstance(kept, list) or not kept or not all(isinstance(a, str) and a for a in kept):
                    raise fail(f"{table}.arms must be a list of the values kept as arms, got {kept!r}", table, "arms")
                if name in controls and controls[name] not in kept:
                    raise fail(
                        f"{table}: control {controls[name]!r} is not one of its arms ({', '.join(kept)})",
                        table,
                        "control",
                    )
            arms_from[name] = ArmsFrom(spec["arms_from"], tuple(kept) if kept is not None else None)
        if "strata" in spec:
            if not _is_column_name(spec["strata"]):
                raise fail(f"{table}.strata {STRATA_PROBLEM}, got {spec['strata']!r}", table, "strata")
            strata[name] = spec["strata"]
        if "guardrails" in spec:
            where = f"{table}.guardrails"
            experiment_guardrails[name] = guardrail_tables(spec["guardrails"], where, fail, guardrails)
    return ExperimentsConfig(
        controls,
        units,
        splits,
        arms_from,
        strata=strata,
        default_strata=default_strata,
        guardrails=guardrails,
        experiment_guardrails=experiment_guardrails,
    )


STRATA_PROBLEM = 'must name a session column (letters, digits, _), e.g. "task_type", or be "none" (no strata)'
"""What a ``strata`` value must be (``estimates/strata.py`` reads the column; "none" turns the strata off)."""


def _is_column_name(value: object) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value) is not None


def read_controls(path: Path) -> dict[str, str]:
    """experiment -> control arm, as the file names them (:func:`experiments_config`)."""
    return experiments_config(path).controls


def read_units(path: Path) -> dict[str, str]:
    """experiment -> the ``unit`` the file configures (:func:`experiments_config` accepts only UNITS)."""
    return experiments_config(path).units


def read_splits(path: Path) -> dict[str, dict[str, float]]:
    """experiment -> arm -> intended relative weight, for the experiments whose ``split`` the file gives.

    A weight that is not a positive number raises ``SettingsFileError`` (a ValueError) naming the file, line,
    experiment and arm (:func:`experiments_config`).
    """
    return experiments_config(path).splits


def read_arms_from(path: Path) -> dict[str, ArmsFrom]:
    """experiment -> the session field its arms come from, for the experiments the file gives an ``arms_from``."""
    return experiments_config(path).arms_from


def experiments(arms: dict[str, list[str]], controls: dict[str, str]) -> list[Experiment]:
    """``arms``: experiment -> the arms the data hold."""
    out = []
    for name in sorted(arms):
        present = sorted(set(arms[name]))
        wanted = controls.get(name)
        note = None
        if wanted in present:
            control = wanted
        else:
            control = present[0]
            if wanted is not None:
                note = f"control {wanted!r} has no sessions; using {control!r} (first alphabetically)"
        out.append(Experiment(name, control, tuple(a for a in present if a != control), note))
    return out


def experiments_of(sessions: pl.DataFrame, controls: dict[str, str]) -> list[Experiment]:
    """The experiments whose arms ``sessions`` (columns ``experiment``, ``variant``; ``design`` and ``design_note``
    when it has them, else randomized) hold; see :func:`experiments`."""
    arms = {name: group["variant"].unique().to_list() for (name,), group in sessions.group_by("experiment")}
    found = experiments(arms, controls)
    if "design" not in sessions.columns:
        return found
    notes = "design_note" if "design_note" in sessions.columns else None
    designs = {
        name: (design, note)
        for name, design, note in sessions.select("experiment", "design", pl.col(notes) if notes else pl.lit(None))
        .unique("experiment")
        .iter_rows()
    }
    return [dataclasses.replace(e, design=designs[e.name][0], design_note=designs[e.name][1]) for e in found]


UNITS = ("session", "user")


@dataclass(frozen=True)
class Unit:
    """An experiment's randomization unit, where it came from, and what it leaves out of the comparison.

    ``source``: "configured" or "detected: <the evidence>"; ``switcher_ids``: users seen in more than one arm;
    ``excluded_sessions``: their sessions, left out when ``unit`` is "user" (0 otherwise).
    """

    unit: str
    source: str
    switcher_ids: frozenset[str] = frozenset()
    excluded_sessions: int = 0

    @property
    def switchers(self) -> int:
        return len(self.switcher_ids)

    @property
    def note(self) -> str | None:
        """What every row of the experiment says about sessions left out, or None."""
        if not self.excluded_sessions:
            return None
        return (
            f"unit user: {self.excluded_sessions} session(s) of {self.switchers} user(s) seen in several arms"
            " left out (such a user belongs to no single arm)"
        )


def switching_users(sessions: pl.DataFrame) -> set[str]:
    """User ids (non-null) that appear in more than one arm of ``sessions`` (one experiment's rows, columns
    ``user_id`` and ``variant``)."""
    arms = sessions.filter(pl.col("user_id").is_not_null()).group_by("user_id").agg(pl.col("variant").n_unique())
    return set(arms.filter(pl.col("variant") > 1)["user_id"].to_list())


def detect_unit(sessions: pl.DataFrame) -> tuple[str, str]:
    """(unit, source) from one experiment's assignments (``user_id``, ``variant``): see the module docstring."""
    known = sessions.filter(pl.col("user_id").is_not_null())
    per_user = known.group_by("user_id").agg(pl.len().alias("n"), pl.col("variant").n_unique().alias("arms"))
    repeat = per_user.filter(pl.col("n") > 1)
    if repeat.is_empty():
        return "session", "detected: no user has several sessions in the experiment"
    mixed = repeat.filter(pl.col("arms") > 1).height
    if mixed:
        return "session", f"detected: {mixed} of {repeat.height} users with several sessions saw several arms"
    return "user", f"detected: each of {repeat.height} users with several sessions always got the same arm"


def resolve_unit(sessions: pl.DataFrame, configured: str | None) -> Unit:
    """The :class:`Unit` of one experiment (``sessions``: its rows of ``staging.assignments``, with ``user_id``
    and ``variant``), from ``configured`` (``experiments.toml``'s ``unit``, or None) or detected."""
    if configured in UNITS:
        unit, source = configured, "configured"
    else:
        unit, source = detect_unit(sessions)
        if configured is not None:
            source = f"{source} (configured unit {configured!r} is not one of {', '.join(UNITS)})"
    switchers = switching_users(sessions)
    excluded = 0
    if unit == "user" and switchers:
        excluded = sessions.filter(pl.col("user_id").is_in(list(switchers))).height
    return Unit(unit, source, frozenset(switchers), excluded)


def units_of(sessions: pl.DataFrame, configured: Mapping[str, str]) -> dict[str, Unit]:
    """experiment -> :class:`Unit` for every experiment of ``sessions`` (``experiment``, ``variant``,
    ``user_id``); ``configured``: :func:`read_units`."""
    return {
        name: resolve_unit(group, configured.get(name))
        for (name,), group in sessions.group_by("experiment", maintain_order=True)
    }


def for_unit(sessions: pl.DataFrame, unit: Unit) -> pl.DataFrame:
    """``sessions`` (one experiment's) without the switching users' sessions when the unit is "user"."""
    if unit.unit != "user" or not unit.switcher_ids:
        return sessions
    return sessions.filter(pl.col("user_id").is_null() | ~pl.col("user_id").is_in(sorted(unit.switcher_ids)))
