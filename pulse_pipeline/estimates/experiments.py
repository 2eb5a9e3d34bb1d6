"""Experiments and their arms, from staging.assignments; the control arm of each from a small TOML file.

``PULSE_HOME/experiments.toml``, else the shipped default ``pulse_pipeline/defaults/experiments.toml``
(``paths.PulseHome.experiments_file``)::

    [experiments.llm-backbone]
    control = "claude-4-sonnet"
    split = { "claude-4-sonnet" = 1, "gpt-5" = 1 }   # optional: the intended traffic split (relative weights)
    unit = "user"                                     # optional: what was randomized, "session" or "user"

An experiment the file does not name, or a control the data do not have, falls back to the first arm
alphabetically (the reason is kept). Every other arm is a treatment compared with the control. Without a
``split`` the arms are meant to get equal traffic (what the sample-ratio check tests against).

The file is checked whole before any work starts (:func:`experiments_config`, called by ``settings_files``): a
syntax error, an unknown key, a unit other than "session" or "user", a split without arms or with a weight that is
not a positive number, or a control missing from its split stops the command in one line naming the file and line.

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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl


@dataclass(frozen=True)
class Experiment:
    name: str
    control: str
    treatments: tuple[str, ...]
    note: str | None = None

    @property
    def nothing_to_compare(self) -> str:
        """What every table says of an experiment with a single arm (no treatments)."""
        return f"single-arm experiment (only {self.control!r}): nothing to compare"


EXPERIMENT_KEYS = ("control", "split", "unit")


@dataclass(frozen=True)
class ExperimentsConfig:
    """What ``experiments.toml`` configures, checked: experiment -> control arm, -> unit, -> arm -> weight."""

    controls: dict[str, str]
    units: dict[str, str]
    splits: dict[str, dict[str, float]]


def experiments_config(path: Path) -> ExperimentsConfig:
    """The experiments file at ``path`` read whole and checked; the one reader of the file (``read_controls``,
    ``read_units``, ``read_splits`` and the preflight, ``preflight.check_settings``, all call it).

    A missing file configures nothing. Anything else the stages could not use raises
    ``settings_files.SettingsFileError`` naming the file, the line and what is wrong: TOML syntax; a top-level key
    other than ``experiments``; an experiment that is not a table or has a key other than control, split, unit; a
    control that is not a non-empty string; a unit other than "session" or "user"; a split that is not a table of
    arms, names no arm, gives an arm a weight that is not a positive number, or leaves out the control.
    """
    from ..settings_files import SettingsFileError, line_of, read_toml

    if not Path(path).exists():
        return ExperimentsConfig({}, {}, {})
    doc, text = read_toml(path)

    def fail(what: str, table: str = "experiments", key: str | None = None) -> SettingsFileError:
        return SettingsFileError(path, what, line_of(text, table, key))

    for top in doc:
        if top != "experiments":
            raise fail(f"unknown table or key {top!r}: the file holds [experiments.NAME] tables", top)
    specs = doc.get("experiments", {})
    if not isinstance(specs, dict):
        raise SettingsFileError(path, "experiments must be tables: [experiments.NAME]", line_of(text, "experiments"))
    controls: dict[str, str] = {}
    units: dict[str, str] = {}
    splits: dict[str, dict[str, float]] = {}
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
            if name in controls and controls[name] not in weights:
                raise fail(
                    f"{table}: control {controls[name]!r} is not an arm of its split ({', '.join(weights)})",
                    table,
                    "control",
                )
            splits[name] = weights
    return ExperimentsConfig(controls, units, splits)


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
    """The experiments whose arms ``sessions`` (columns ``experiment``, ``variant``) hold; see :func:`experiments`."""
    arms = {name: group["variant"].unique().to_list() for (name,), group in sessions.group_by("experiment")}
    return experiments(arms, controls)


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
