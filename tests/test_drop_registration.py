"""Registering a drop never writes outside the drop folder, and a copy that fails says so in one line and leaves
nothing behind (issue 34, items 6 and 7).

``--name ../../dir`` and ``--name /abs/path`` copied the drop outside ``PULSE_HOME/drops`` and left the copy there
after the ingest failed; a disk filling during the copy ended in ``shutil.Error``'s list of triples. A full disk
is simulated: ``shutil.copy2`` raises ENOSPC from the third file on, as a real one would, naming the source
file the way ``shutil``'s failed ``sendfile`` does.
"""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest

from pulse_pipeline import cli
from pulse_pipeline.cli import main
from pulse_pipeline.ingest import register
from pulse_pipeline.ingest.register import register_drop
from pulse_pipeline.paths import PulseHome


def _drop(folder: Path, files: int = 5) -> Path:
    folder.mkdir(parents=True)
    for i in range(files):
        events = [{"id": "1", "source": "user", "type": "message", "text": f"task {i}"}]
        (folder / f"s{i}.json").write_text(json.dumps({"session_id": f"s{i}", "events": events}))
    return folder


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("name", ["../x", "../../escaped", "a/b", "ABSOLUTE", "..", ".hidden", "_truth.json"])
def test_a_drop_name_that_is_no_plain_name_is_refused_before_anything_is_copied(tmp_path, monkeypatch, capsys, name):
    monkeypatch.setenv("PULSE_HOME", str(tmp_path / "home"))  # not made: nothing may create it
    home = PulseHome.from_env()
    source = _drop(tmp_path / "src" / "drop")
    if name == "ABSOLUTE":
        name = str(tmp_path / "abs")
    before = _entries(tmp_path)
    assert main(["ingest", str(source), "--name", name]) == 2
    line = _one_line(capsys)
    assert line.startswith("pulse ingest: --name ") and "plain name" in line
    assert _entries(tmp_path) == before  # nothing beside the drop folder: not x, escaped, abs
    assert _entries(home.drops) == [] and _entries(home.root) == []  # nothing in it either, not even a home
    assert not (tmp_path / "abs").exists() and not (tmp_path.parent / "escaped").exists()


def test_a_file_whose_own_name_the_drop_folder_never_reads_is_refused(tmp_path, monkeypatch, capsys):
    """``..dotdot..json`` given with no ``--name``: its copy would be named with a leading '.', which the drop
    folder's listing leaves out, so it would be registered and never ingested."""
    monkeypatch.setenv("PULSE_HOME", str(tmp_path / "home"))
    source = tmp_path / "..dotdot..json"
    source.write_text(json.dumps({"session_id": "d", "events": [{"id": "1", "source": "user", "type": "message"}]}))
    assert main(["ingest", str(source)]) == 2
    line = _one_line(capsys)
    assert "'..dotdot..json' starts with '.'" in line and "--name" in line
    assert _entries(PulseHome.from_env().drops) == []


@pytest.mark.parametrize("name", ["../x", "ABSOLUTE", "a/b", "", ".staged"])
def test_registration_refuses_such_names_too(pulse_home, tmp_path, name):
    """Defence in depth: a caller other than the CLI (``runs.ingest``) is refused by ``register_drop`` itself."""
    source = _drop(tmp_path / "drop")
    name = str(tmp_path / "abs") if name == "ABSOLUTE" else name
    with pytest.raises(ValueError, match="refused: --name"):
        register_drop(pulse_home, source, name)
    assert _entries(pulse_home.drops) == [] and _entries(tmp_path) == ["drop", "home"]


def _disk_full_after(monkeypatch, files: int) -> list[str]:
    copied: list[str] = []
    real = shutil.copy2

    def copy2(source, target, **kwargs):
        if len(copied) >= files:
            error = OSError(errno.ENOSPC, "No space left on device")
            error.filename, error.filename2 = str(source), str(target)  # as shutil's failed sendfile says it
            raise error
        copied.append(str(source))
        return real(source, target, **kwargs)

    monkeypatch.setattr(register.shutil, "copy2", copy2)
    return copied


def test_a_full_disk_during_the_copy_is_one_line_and_leaves_no_partial_drop(pulse_home, tmp_path, monkeypatch, capsys):
    source = _drop(tmp_path / "drop", files=5)
    copied = _disk_full_after(monkeypatch, 2)
    assert main(["ingest", str(source)]) == 2
    line = _one_line(capsys)
    assert len(copied) == 2  # the copy stopped at the first failure, not retried on every other file
    assert line.startswith(f"pulse ingest: {pulse_home.drops}: No space left on device, copying {source}/s")
    assert f"{source}/{Path(copied[0]).name}" not in line  # the file that failed, in the order copytree met them
    assert "into the drop folder; nothing was registered: " in line
    assert line.endswith(f"the disk holding {pulse_home.drops} is full: {cli.FREE_SPACE}")
    assert [n for n in _entries(pulse_home.drops) if n != register.LOCK] == []  # no drop, no staging copy
    monkeypatch.undo()  # space freed: the same drop registers whole
    assert register_drop(pulse_home, source) == ("drop", pulse_home.drops / "drop")
    assert _entries(pulse_home.drops / "drop") == [f"s{i}.json" for i in range(5)]


def test_a_full_disk_copying_a_single_file_is_one_line(pulse_home, tmp_path, monkeypatch, capsys):
    source = _drop(tmp_path / "drop", files=1) / "s0.json"
    _disk_full_after(monkeypatch, 0)
    assert main(["ingest", str(source), "--name", "one"]) == 2
    assert f"the disk holding {pulse_home.drops} is full" in _one_line(capsys)
    assert [n for n in _entries(pulse_home.drops) if n != register.LOCK] == []


def test_os_errors_are_one_line_naming_the_path_and_what_to_free():
    """How ``main`` says the errors a full disk raises elsewhere: a write during the load (an ``OSError`` with
    its path, or DuckDB's text), and a ``copytree`` of another caller (``shutil.Error``'s triples)."""
    full = OSError(errno.ENOSPC, "No space left on device", "/h/.work/pulse-work.duckdb")
    assert cli._error_kind(full) == (
        "/h/.work/pulse-work.duckdb: No space left on device: the disk holding /h/.work/pulse-work.duckdb is full:"
        f" {cli.FREE_SPACE}"
    )
    quota = OSError(errno.EDQUOT, "Disk quota exceeded", "/h/drops")
    assert cli._error_kind(quota).endswith(f"the disk holding /h/drops is over this user's quota: {cli.FREE_SPACE}")
    copy = shutil.Error([("/a/x.json", "/h/drops/d/x.json", "[Errno 28] No space left on device")] * 3)
    assert cli._error_kind(copy) == (
        "/h/drops/d/x.json: copying /a/x.json failed ([Errno 28] No space left on device), and 2 more files: the disk"
        f" holding /h/drops/d/x.json is full: {cli.FREE_SPACE}"
    )
    duck = RuntimeError('IO Error: Could not write file "/h/lake/x.parquet": No space left on device')
    assert cli._error_kind(duck).endswith(f"No space left on device (a disk is full: {cli.FREE_SPACE})")
    assert cli._error_kind(OSError(errno.ENOENT, "No such file or directory", "/x")) == "/x: No such file or directory"
