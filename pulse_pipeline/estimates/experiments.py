"""Experiments and their arms, from staging.assignments; the control arm of each from a small TOML file.

``PULSE_HOME/experiments.toml`` (the repository ships ``data/experiments.toml``)::

    [experiments.llm-backbone]
    control = "claude-4-sonnet"
    split = { "claude-4-sonnet" = 1, "gpt-5" = 1 }   # optional: the intended traffic split (relative weights)

An experiment the file does not name, or a control the data do not have, falls back to the first arm
alphabetically (the reason is kept). Every other arm is a treatment compared with the control. Without a
``split`` the arms are meant to get equal traffic (what the sample-ratio check tests against).
"""

from __future__ import annotations

import tomllib
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


def _specs(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    return tomllib.loads(path.read_text(encoding="utf-8")).get("experiments", {})


def read_controls(path: Path) -> dict[str, str]:
    return {name: str(spec["control"]) for name, spec in _specs(path).items() if "control" in spec}


def read_splits(path: Path) -> dict[str, dict[str, float]]:
    """experiment -> arm -> intended relative weight, for the experiments whose ``split`` the file gives.

    A weight that is not a positive number raises ValueError naming the experiment and arm.
    """
    out: dict[str, dict[str, float]] = {}
    for name, spec in _specs(path).items():
        split = spec.get("split")
        if split is None:
            continue
        weights = {}
        for arm, w in dict(split).items():
            if isinstance(w, bool) or not isinstance(w, int | float) or not w > 0:
                raise ValueError(f"{path}: experiments.{name}.split.{arm} must be a positive number, got {w!r}")
            weights[str(arm)] = float(w)
        out[name] = weights
    return out


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
