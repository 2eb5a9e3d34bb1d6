"""Experiments and their arms, from staging.assignments; the control arm of each from a small TOML file.

``PULSE_HOME/experiments.toml`` (the repository ships ``data/experiments.toml``)::

    [experiments.llm-backbone]
    control = "claude-4-sonnet"

An experiment the file does not name, or a control the data do not have, falls back to the first arm
alphabetically (the reason is kept). Every other arm is a treatment compared with the control.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Experiment:
    name: str
    control: str
    treatments: tuple[str, ...]
    note: str | None = None


def read_controls(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    return {name: str(spec["control"]) for name, spec in doc.get("experiments", {}).items() if "control" in spec}


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
