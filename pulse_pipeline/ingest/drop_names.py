"""What a drop may be named in the drop folder: a plain name, one entry of ``PULSE_HOME/drops``.

Checked by ``pulse ingest`` before anything is loaded (``cli._check_arguments``, so this module imports nothing
heavy) and again by ``register.register_drop`` before anything is copied (defence in depth: other callers). Why:
``--name ../../dir`` and ``--name /abs/path`` made ``PULSE_HOME/drops / name`` a path outside the drop folder, so
the copy landed there and stayed behind after the ingest failed (issue 34, item 6). A name starting with ``.`` or
``_`` is refused too: the drop folder's listing leaves such names out (a registration's staging copy, sidecars),
so a drop of that name would be copied and never read.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_NAME_BYTES = 255  # one path component on Linux filesystems
DEFAULT_NAME = "the drop's name (its file or folder name when --name is not given)"


def why_bad_drop_name(name: str, option: str = "--name") -> str | None:
    """Why ``name`` cannot name a drop (one line, with the fix), or None when it is a plain name."""
    flag = option if option.startswith("-") else "--name"
    fix = f"give {flag} a plain name such as 'batch-2024-06' (letters, digits, '.', '-', '_'; no '/')"
    if not name or not name.strip():
        return f"{option} is empty: {fix}"
    if name in (".", ".."):
        return f"{option} {name!r} names a folder, not a drop: {fix}"
    if "/" in name or (os.altsep and os.altsep in name) or "\\" in name:
        what = "is an absolute path" if name.startswith("/") else "holds a path separator"
        return f"{option} {name!r} {what}: a drop is copied into the drop folder under a name, never elsewhere; {fix}"
    if "\0" in name:
        return f"{option} {name!r} holds a NUL character: {fix}"
    if len(os.fsencode(name)) > MAX_NAME_BYTES:
        return (
            f"{option} is {len(os.fsencode(name))} bytes long, more than a file name can be ({MAX_NAME_BYTES}): {fix}"
        )
    if name.startswith((".", "_")):
        return (
            f"{option} {name!r} starts with {name[0]!r}: the drop folder never reads names starting with '.' or '_'"
            f" (staging copies and sidecars), so this drop would never be ingested; {fix}"
        )
    return None


AIDER_HISTORY = ".aider.chat.history.md"  # aider's chat history, hidden by aider's choice (``aider.py`` reads it)


def aider_drop_name(path: Path) -> str | None:
    """The drop name ``.aider.chat.history.md`` given alone takes (``<its folder's name>-aider-history``), else None.

    Why: ``pulse ingest ~/myrepo/.aider.chat.history.md`` is how one points PULSE at aider, and the file's own name
    starts with ``.``, which no drop may be named; the file keeps its name inside a folder so named (a renamed single
    file is copied that way, ``register.register_drop``)."""
    if path.name != AIDER_HISTORY:
        return None
    return f"{path.parent.name.lstrip('._') or 'repo'}-aider-history"
