"""Registering a drop: copying a file or folder an operator names into the drop folder (``PULSE_HOME/drops``)."""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

from ..paths import PulseHome
from .drop import drop_key


def _same_content(a: Path, b: Path) -> bool:
    if a.is_file() and b.is_file():
        return filecmp.cmp(a, b, shallow=False)
    if a.is_dir() and b.is_dir():
        cmp = filecmp.dircmp(a, b)
        if cmp.left_only or cmp.right_only or cmp.funny_files:
            return False
        _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
        return not mismatch and not errors and all(_same_content(a / d, b / d) for d in cmp.common_dirs)
    return False


def register_drop(home: PulseHome, path: Path, name: str | None = None) -> tuple[str, Path]:
    """Copy ``path`` into the drop folder (unless it is there already) and return its partition key.

    A single file given another ``name`` goes into a folder of that name, keeping its own file name: a session's id
    may come from its file name (``trajectory-<id>.json``, see ``ingest/records.py``), and renaming the file would
    change it.
    """
    path = path.resolve()
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    home.ensure()
    if path.parent == home.drops.resolve() and name is None:
        return drop_key(path.name), path
    target = home.drops / (name or path.name)
    wrapped = path.is_file() and name is not None  # a renamed single file keeps its own name, in a folder
    if target.exists():
        if wrapped:
            same = target.is_dir() and [p.name for p in target.iterdir()] == [path.name]
            same = same and _same_content(path, target / path.name)
        else:
            same = _same_content(path, target)
        if same:
            return drop_key(target.name), target  # re-delivery of the same drop: same partition, same rows
        raise FileExistsError(
            f"a different drop named {target.name!r} is already in {home.drops}; give this one another name"
            " with --name, or remove the old one first"
        )
    if path.is_dir():
        shutil.copytree(path, target, copy_function=shutil.copy2)
    elif wrapped:
        target.mkdir()
        shutil.copy2(path, target / path.name)
    else:
        shutil.copy2(path, target)
    return drop_key(target.name), target
