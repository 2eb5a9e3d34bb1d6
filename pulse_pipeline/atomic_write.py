"""Files written whole or not at all, and kept across a power cut (standard library only: the rating service and
the hooks import it).

``write_whole`` writes a hidden temporary file beside the target (``.<name>.<pid>.tmp``), fsyncs it, renames it
over the target and fsyncs the folder: a reader (the rating service reloading the ask policy, a restart reading
the roll watermark) sees the old file or the new one, never a part, and the new one survives a crash once the call
returned. A failed write removes its temporary file.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_folder(folder: Path) -> None:
    """Make a rename or a new file in ``folder`` survive a power cut."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_whole(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably (module docstring)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(partial, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    fsync_folder(path.parent)
