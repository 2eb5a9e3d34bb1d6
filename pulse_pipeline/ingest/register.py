"""Registering a drop: copying a file or folder an operator names into the drop folder (``PULSE_HOME/drops``).

The copy is atomic. It is made aside, in a staging entry of the drop folder (``.registering-NAME``: the same
filesystem, and a name starting with ``.``, which ``drop.list_drops`` and so the sensor never read), and renamed
to ``NAME`` once complete. Why: a copy killed half-way left a partial drop under its name, which the sensor would
have read and which made the next registration refuse ("a different drop ... is already there"). A copy killed
half-way now leaves only its staging entry, which the next registration removes. Registrations take turns (an
exclusive ``flock`` on ``.register.lock``, released by the kernel when its holder dies), so a staging entry found
there is never another registration's copy in progress.

The copy never follows a link and opens nothing but regular files: links are copied as links (the ingest
quarantines each, "symlink not followed"); FIFOs and sockets are made anew, empty and never opened (the ingest
quarantines them too); a device file is left out with a warning (making one takes privileges, and a copy would be
as unsafe to open). Why: ``ln -s . loop`` was followed 40 levels deep, a link put ``/etc/passwd`` in the
warehouse, and a FIFO crashed the copy. The path the operator names is resolved on purpose: ``pulse ingest LINK``
copies what the link points to.
"""

from __future__ import annotations

import errno
import fcntl
import filecmp
import logging
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..paths import PulseHome
from .drop import drop_key, skip_reason, why_empty
from .drop_names import DEFAULT_NAME, aider_drop_name, why_bad_drop_name

log = logging.getLogger(__name__)

STAGING = ".registering-"  # + the drop's name: a copy not yet complete
LOCK = ".register.lock"


@contextmanager
def _registering(drops: Path) -> Iterator[None]:
    """Hold the drop folder's registration lock, waiting for another registration to finish first."""
    with open(drops / LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed, or its process dies
        yield


def _remove(path: Path) -> None:
    """Remove a file, link or whole folder (links in it are removed, never followed); nothing if absent."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _compared(folder: Path) -> list[str]:
    """The names a copy is compared by: folders, regular files and links (FIFOs, sockets and devices hold nothing
    to compare, and a device is never copied)."""
    kept = (stat.S_ISDIR, stat.S_ISREG, stat.S_ISLNK)
    return sorted(e.name for e in os.scandir(folder) if any(k(e.stat(follow_symlinks=False).st_mode) for k in kept))


def _same_content(a: Path, b: Path) -> bool:
    """Whether ``b`` holds what ``a`` does, compared as registration copies: a link by where it points."""
    mode_a, mode_b = a.lstat().st_mode, b.lstat().st_mode
    if stat.S_IFMT(mode_a) != stat.S_IFMT(mode_b):
        return False
    if stat.S_ISREG(mode_a):
        return filecmp.cmp(a, b, shallow=False)
    if stat.S_ISLNK(mode_a):
        return os.readlink(a) == os.readlink(b)
    if stat.S_ISDIR(mode_a):
        names = _compared(a)
        return names == _compared(b) and all(_same_content(a / n, b / n) for n in names)
    return True  # a FIFO or socket: nothing in it to compare


class _CopyFailed(Exception):
    """A file's copy failed with ``error``. Not an ``OSError`` on purpose: ``copytree`` catches those, goes on
    with every other file (on a full disk, each failing again) and raises ``shutil.Error`` with the errors as text,
    their errno lost; this one stops the copy at once."""

    def __init__(self, source: str, error: OSError) -> None:
        super().__init__(source, error)
        self.source, self.error = source, error


def _copy_file(source: str | Path, target: str | Path) -> None:
    try:
        shutil.copy2(source, target)
    except OSError as error:
        raise _CopyFailed(str(source), error) from error


FULL = (errno.ENOSPC, errno.EDQUOT)


def _copy_error(error: BaseException, path: Path, drops: Path) -> OSError | None:
    """The one-line error for a copy into ``drops`` that failed with ``error`` (None: not a copy's error).

    A full disk (or quota) is said of the drop folder, whatever file was being written (``shutil`` names the
    source file in a failed ``sendfile``, which is not the disk that filled)."""
    source = str(path)
    if isinstance(error, _CopyFailed):
        source, error = error.source, error.error
    if isinstance(error, shutil.Error):  # copystat of a folder, collected by copytree: (source, target, why)
        first = error.args[0][0] if error.args and error.args[0] else (source, str(drops), str(error))
        return OSError(errno.EIO, f"copying {first[0]} into the drop folder failed ({first[2]})", str(drops))
    if not isinstance(error, OSError):
        return None
    code = error.errno or errno.EIO
    strerror = error.strerror or str(error)
    if code in FULL:
        return OSError(code, f"{strerror}, copying {source} into the drop folder; nothing was registered", str(drops))
    return OSError(code, f"{strerror} (copying {source} into the drop folder; nothing was registered)", error.filename)


def _copy_entry(source: str, target: str) -> None:
    """``copytree``'s copy of an entry that is neither a folder nor a link, never opening one that is not a
    regular file: a FIFO or socket is made anew (empty), a device is left out with a warning."""
    mode = os.lstat(source).st_mode
    if stat.S_ISREG(mode):
        _copy_file(source, target)
        return
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        try:
            os.mknod(target, mode)
        except OSError as error:  # some systems make sockets only by binding one
            log.warning("%s is left out of the drop: it could not be made anew in the copy (%s)", source, error)
            return
        shutil.copystat(source, target, follow_symlinks=False)
        return
    log.warning("%s is left out of the drop: %s", source, skip_reason(Path(source), mode))


def _copy(path: Path, staging: Path, wrapped: bool) -> None:
    if path.is_dir():
        shutil.copytree(path, staging, symlinks=True, copy_function=_copy_entry)
    elif wrapped:
        staging.mkdir()
        _copy_file(path, staging / path.name)
    else:
        _copy_file(path, staging)


def register_drop(home: PulseHome, path: Path, name: str | None = None) -> tuple[str, Path]:
    """Copy ``path`` into the drop folder (unless it is there already) and return its partition key; ValueError
    when it holds nothing to read (``drop.why_empty``), before anything is copied.

    A single file given another ``name`` goes into a folder of that name, keeping its own file name: a session's id
    may come from its file name (``trajectory-<id>.json``, see ``ingest/records.py``), and renaming the file would
    change it. The copy appears under its name whole or not at all (module docstring).
    """
    path = path.resolve()  # a name is checked first (``drop_names``): the copy goes nowhere but the drop folder
    name = name if name is not None else aider_drop_name(path)  # a hidden aider history goes in a named folder
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    mode = path.stat().st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ValueError(f"{path} is not a file or folder, so it cannot be a drop ({skip_reason(path, mode)})")
    if problem := why_bad_drop_name(path.name if name is None else name, DEFAULT_NAME if name is None else "--name"):
        raise ValueError(f"refused: {problem}")  # a name that would put the copy outside the drop folder, or unread
    if empty := why_empty(path):  # refused before anything is made: no copy, no partition, no raw.drops row
        raise ValueError(f"refused: {empty}")
    home.ensure()
    if path.parent == home.drops.resolve() and name is None:
        return drop_key(path.name), path
    target = home.drops / (name or path.name)
    wrapped = path.is_file() and name is not None  # a renamed single file keeps its own name, in a folder
    with _registering(home.drops):
        for leftover in home.drops.glob(f"{STAGING}*"):  # copies killed half-way: never drops, now garbage
            _remove(leftover)
        if os.path.lexists(target):
            if wrapped:
                same = target.is_dir() and not target.is_symlink() and _compared(target) == [path.name]
                same = same and _same_content(path, target / path.name)
            else:
                same = _same_content(path, target)
            if same:
                return drop_key(target.name), target  # re-delivery of the same drop: same partition, same rows
            raise FileExistsError(
                f"a different drop named {target.name!r} is already in {home.drops}; give this one another name"
                " with --name, or remove the old one first"
            )
        staging = home.drops / f"{STAGING}{target.name}"
        try:
            _copy(path, staging, wrapped)
            os.rename(staging, target)
        except BaseException as error:
            _remove(staging)  # a failed copy leaves nothing under the drop's name, nor its staging copy
            said = _copy_error(error, path, home.drops)
            if said is None:
                raise
            raise said from error
    return drop_key(target.name), target


registering = _registering  # the registration lock, which ``pulse drop rm`` takes too (``drops.remove_rows``)
remove_entry = _remove
