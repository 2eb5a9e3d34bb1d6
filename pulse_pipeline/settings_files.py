"""Settings files checked before any work starts: one error, one line, naming the file, the line and what is wrong.
This module holds what every reader shares (the error, TOML reading, line numbers); the check over every file,
which calls the stages' readers, is ``preflight.check_settings`` (an entry point: the stages sit above this module).

Why before: a broken ``experiments.toml`` used to let an ingest read the drop and fit every model (~45 s) before
the estimates stage parsed it and failed with seven stack traces that never named the file. Every file PULSE reads
as configuration is now read whole by ``preflight.check_settings`` first, by every ``pulse`` command that would read it
(``cli.py``, before Dagster is imported) and by the Dagster definitions (``definitions.build_definitions``, so a
code location, and with it each run ``pulse ui`` launches, stops at load with the same sentence).

Why it cannot drift from the readers: each kind of file has one function that parses and validates it and returns
what it holds, and the stage that uses the file calls that same function:

| file | chosen by | function |
|---|---|---|
| ``experiments.toml`` | ``PulseHome.experiments_file`` | ``estimates.experiments.experiments_config`` |
| ``benchmarks.csv`` | ``PulseHome.benchmarks_file`` | ``estimates.benchmarks.load_benchmarks`` |
| human labels (CSV) | ``PULSE_HUMAN_LABELS``, else ``PulseHome.human_labels_file`` | ``agreement.read_human_labels`` |
| the rubric (TOML) | ``PULSE_RUBRIC``, else the paper's | ``features.rubric.load_rubric`` |
| ``PULSE_*`` variables | the environment | each section reader of ``settings.py`` |

The heuristic annotator's phrase tables (``features/heuristic_phrases.toml``) ship inside the package and are not a
user's setting, so they are not checked here.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from .settings import Env


class SettingsFileError(ValueError):
    """A settings file PULSE cannot use. ``str()`` is one line: the path, the line when known, and what is wrong."""

    def __init__(self, path: Path | str, what: str, line: int | None = None):
        self.path, self.what, self.line = Path(path), what, line
        where = f"{path}, line {line}" if line else str(path)
        super().__init__(f"{where}: {what}")


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def read_toml(path: Path) -> tuple[dict[str, Any], str]:
    """The TOML document at ``path`` and its text; a missing, unreadable or malformed file raises
    :class:`SettingsFileError` (:func:`parse_toml`)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SettingsFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    return parse_toml(path, data)


def parse_toml(path: Path, data: bytes) -> tuple[dict[str, Any], str]:
    """``data`` (the bytes of the file at ``path``) as a TOML document, and its text; not UTF-8 or not TOML raises
    :class:`SettingsFileError` with tomllib's line and column taken out of its message."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SettingsFileError(path, f"not UTF-8 text (byte {exc.start})") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _TOML_POSITION.search(message)
        if found is None:  # "(at end of document)": the last line
            what = f"not valid TOML: {message.replace(' (at end of document)', '')}"
            raise SettingsFileError(path, what, len(text.splitlines()) or None) from None
        what = f"not valid TOML: {message[: found.start()]} (column {found.group(2)})"
        raise SettingsFileError(path, what, int(found.group(1))) from None


def line_of(text: str, table: str, key: str | None = None) -> int | None:
    """The 1-based line of ``[table]`` in a TOML text (or of ``key = ...`` inside that table), None if not found.

    ``table`` is dotted (``experiments.llm-backbone``); each part may be quoted in the file. Used to point a
    semantic error (a bad value, an unknown key) at the line a person would edit."""
    parts = [re.escape(p) for p in table.split(".")]
    header = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(rf"(?:\"{p}\"|'{p}'|{p})" for p in parts) + r"\s*\]")
    start = None
    lines = text.splitlines()
    for number, raw in enumerate(lines, start=1):
        if start is None:
            if header.match(raw):
                start = number
                if key is None:
                    return number
            continue
        if raw.lstrip().startswith("["):
            break
        if re.match(rf"^\s*(?:\"{re.escape(key)}\"|'{re.escape(key)}'|{re.escape(key)})\s*[=.]", raw):
            return number
    return start


def human_labels_path(settings: Any, home: Any) -> Path | None:
    """The human labels file the annotator agreement reads: ``PULSE_HUMAN_LABELS`` (``settings``, a
    ``settings.FeatureSettings``), else ``home``'s ``human_labels.csv`` when it has one, else None."""
    return settings.human_labels_path or (home.human_labels_file if home is not None else None)


def check_environment(environ: Env | None = None) -> None:
    """Every ``PULSE_*`` section reader of ``settings.py``, so a bad value fails now, in one line
    (``SettingsError``); the LLM's only when ``PULSE_LLM_MODEL`` is set (unset, no LLM is used)."""
    from . import settings

    env = os.environ if environ is None else environ
    settings.dagster_postgres_url(env)
    settings.lake_settings(env)
    settings.ingest_settings(env)
    settings.score_settings(env)
    features = settings.feature_settings(env)
    settings.modeling_settings(env)
    settings.estimate_settings(env)
    if features.llm_model:
        settings.llm_settings(env)
