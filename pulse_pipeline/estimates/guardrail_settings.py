"""The guardrails' settings in ``experiments.toml``: their keys checked, resolved per experiment, their metrics
checked against the session columns.

Guardrails (:func:`guardrails_for`; ``docs/guardrails.md``): metrics a change must not harm beyond a margin,
estimated by ``estimates/guardrails.py``. ``[guardrails.NAME]`` at the top applies to every experiment;
``[experiments.X.guardrails.NAME]`` changes some keys of one of them for X (an override), adds one, or drops one
(``enabled = false``)::

    [guardrails.cost]
    metric = "llm_cost_usd"        # a numeric column of features.session_features
    direction = "lower"            # which way is better: "lower" or "higher"
    margin = 0.10                  # the harm tolerated, >= 0
    margin_type = "relative"       # optional: "relative" (share of the control mean, default) or "absolute"
    alpha = 0.05                   # optional: the one-sided non-inferiority level, in (0, 0.5); default 0.05
    enabled = true                 # optional: false drops the guardrail (for one experiment, or everywhere)

A guardrail with a key not listed, a metric that is not a column name, a direction, margin, margin type or alpha
outside its values, or (after an override) no metric, direction or margin stops the command in one line naming
the file, the line and the key. Whether the metric is a numeric session column is checked where the columns are
known (:func:`check_guardrail_metrics`: the preflight against the rubric's columns, the stage against its frame).

``experiments.experiments_config`` reads the file whole and calls :func:`guardrail_tables` for each
``guardrails`` table, passing its ``fail`` (the error naming the file and line): this module does not import
``experiments``, which imports it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

GUARDRAIL_KEYS = ("metric", "direction", "margin", "margin_type", "alpha", "enabled")
GUARDRAIL_DEFAULTS = {"margin_type": "relative", "alpha": 0.05, "enabled": True}
"""The keys a guardrail may leave out, with the value it then takes."""
GUARDRAIL_DIRECTIONS = ("lower", "higher")
GUARDRAIL_MARGIN_TYPES = ("relative", "absolute")
COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What a guardrail's ``metric`` must look like: a column name (whether it is a numeric session column is
checked where the columns are known, :func:`check_guardrail_metrics`)."""


@dataclass(frozen=True)
class Guardrail:
    """One guardrail of one experiment, resolved (top-level keys, then the experiment's overrides): ``name`` is
    its table name in ``experiments.toml``; the rest as the module docstring lists."""

    name: str
    metric: str
    direction: str
    margin: float
    margin_type: str = "relative"
    alpha: float = 0.05


class GuardrailConfig(Protocol):
    """What the guardrails read of ``experiments.ExperimentsConfig``: ``guardrails``, name -> keys of the top-level
    ``[guardrails.NAME]`` tables; ``experiment_guardrails``, experiment -> name -> its override keys."""

    guardrails: Mapping[str, Mapping[str, object]]
    experiment_guardrails: Mapping[str, Mapping[str, Mapping[str, object]]]


def guardrails_for(config: GuardrailConfig, experiment: str) -> tuple[Guardrail, ...]:
    """The enabled guardrails of ``experiment``: every top-level one with the experiment's overrides, then the
    ones only the experiment declares, each in file order. :func:`guardrail_tables` (called by
    ``experiments.experiments_config``) has checked that each is complete, so this never fails for a config that
    ``experiments_config`` returned."""
    own = config.experiment_guardrails.get(experiment, {})
    out = []
    for name in [*config.guardrails, *(n for n in own if n not in config.guardrails)]:
        keys = {**GUARDRAIL_DEFAULTS, **config.guardrails.get(name, {}), **own.get(name, {})}
        if keys["enabled"]:
            out.append(
                Guardrail(name, str(keys["metric"]), str(keys["direction"]), float(keys["margin"]),
                          str(keys["margin_type"]), float(keys["alpha"]))
            )  # fmt: skip
    return tuple(out)


def guardrail_metrics(config: GuardrailConfig) -> list[str]:
    """Every metric an enabled guardrail of any experiment reads (an experiment the file does not name gets the
    top-level ones), sorted."""
    names = ["", *config.experiment_guardrails]  # "": an experiment with no overrides
    return sorted({g.metric for name in names for g in guardrails_for(config, name)})


def guardrail_metric_line(path: Path, experiment: str | None, name: str) -> tuple[str, int | None]:
    """(the dotted key of a guardrail's metric, its line in the file) for an error message."""
    from ..settings_files import line_of

    table = f"guardrails.{name}" if experiment is None else f"experiments.{experiment}.guardrails.{name}"
    text = Path(path).read_text(encoding="utf-8", errors="replace") if Path(path).exists() else ""
    return f"{table}.metric", line_of(text, table, "metric")


def check_guardrail_metrics(path: Path, config: GuardrailConfig, columns, prefixes: tuple[str, ...] = ()) -> None:
    """Raise ``settings_files.SettingsFileError`` (one line: file, line, key, the nearest column) for the first
    guardrail (top level, then each experiment's) whose metric is not in ``columns`` (the numeric session columns
    where they are known) and starts with none of ``prefixes`` (columns that exist only once data name them)."""
    import difflib

    from ..settings_files import SettingsFileError

    known = set(columns)
    declared = [(None, n, k) for n, k in config.guardrails.items()] + [
        (e, n, k) for e, specs in config.experiment_guardrails.items() for n, k in specs.items()
    ]
    for experiment, name, keys in declared:
        metric = keys.get("metric")
        if metric is None or metric in known or (prefixes and str(metric).startswith(prefixes)):
            continue
        key, line = guardrail_metric_line(path, experiment, name)
        near = difflib.get_close_matches(str(metric), sorted(known), n=1)
        hint = f"did you mean {near[0]!r}?" if near else "see docs/guardrails.md for the session columns"
        raise SettingsFileError(path, f"{key} {metric!r} is not a numeric session column; {hint}", line)


def guardrail_keys(spec: object, table: str, fail, *, complete: bool) -> dict[str, object]:
    """The checked keys of one ``[...guardrails.NAME]`` table; ``complete``: it must name metric, direction and
    margin (a top-level guardrail, or one an experiment adds) unless it is disabled."""
    if not isinstance(spec, dict):
        raise fail(f"{table} must be a table ([{table}]), got {spec!r}", table.rsplit(".", 1)[0])
    unknown = [k for k in spec if k not in GUARDRAIL_KEYS]
    if unknown:
        raise fail(f"{table}: unknown key {unknown[0]!r} (known: {', '.join(GUARDRAIL_KEYS)})", table, unknown[0])
    metric = spec.get("metric")
    if "metric" in spec and not (isinstance(metric, str) and COLUMN_NAME.fullmatch(metric)):
        raise fail(f"{table}.metric must name a numeric session column, got {metric!r}", table, "metric")
    if "direction" in spec and spec["direction"] not in GUARDRAIL_DIRECTIONS:
        raise fail(
            f"{table}.direction must be one of {', '.join(GUARDRAIL_DIRECTIONS)} (which way is better), got"
            f" {spec['direction']!r}", table, "direction",
        )  # fmt: skip
    margin = spec.get("margin")
    if "margin" in spec and (isinstance(margin, bool) or not isinstance(margin, int | float) or not margin >= 0
                             or margin == float("inf")):  # fmt: skip
        raise fail(f"{table}.margin must be a number >= 0 (the harm tolerated), got {margin!r}", table, "margin")
    if "margin_type" in spec and spec["margin_type"] not in GUARDRAIL_MARGIN_TYPES:
        raise fail(
            f"{table}.margin_type must be one of {', '.join(GUARDRAIL_MARGIN_TYPES)}, got {spec['margin_type']!r}",
            table, "margin_type",
        )  # fmt: skip
    alpha = spec.get("alpha")
    if "alpha" in spec and (isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 0.5):
        raise fail(f"{table}.alpha must be a number in (0, 0.5), got {alpha!r}", table, "alpha")
    if "enabled" in spec and not isinstance(spec["enabled"], bool):
        raise fail(f"{table}.enabled must be true or false, got {spec['enabled']!r}", table, "enabled")
    if complete and spec.get("enabled", True):
        missing = [k for k in ("metric", "direction", "margin") if k not in spec]
        if missing:
            raise fail(f"{table} needs {', '.join(missing)} (see docs/guardrails.md)", table)
    return dict(spec)


def guardrail_tables(doc: object, where: str, fail, complete_unless: dict | None) -> dict[str, dict[str, object]]:
    """name -> checked keys of the ``guardrails`` tables at ``where`` (``guardrails`` or
    ``experiments.X.guardrails``); ``complete_unless``: the top-level guardrails, which an override may complete
    (None: every guardrail here must be complete)."""
    if not isinstance(doc, dict):
        raise fail(f"{where} must hold tables: [{where}.NAME]", where.rsplit(".", 1)[0] if "." in where else where)
    out = {}
    for name, spec in doc.items():
        table = f"{where}.{name}"
        inherited = (complete_unless or {}).get(name)
        keys = guardrail_keys(spec, table, fail, complete=inherited is None)
        if inherited is not None and keys.get("enabled", True):
            merged = {**GUARDRAIL_DEFAULTS, **inherited, **keys}
            missing = [k for k in ("metric", "direction", "margin") if k not in merged]
            if missing:
                raise fail(f"{table} needs {', '.join(missing)} (see docs/guardrails.md)", table)
        out[str(name)] = keys
    return out
