"""Rubrics are data: the features an annotator answers, read from a TOML file (see ``rubric_default.toml``).

The LLM prompts, the annotations tables, the wide feature table and the model stage all iterate over the rubric,
so adding a feature is an entry in a rubric file (plus, for the offline annotator, a rule).

``heuristic`` may be left out (``pulse discover`` writes candidate rubrics without it): such a feature has
``heuristic == ""`` and only the LLM annotator answers it; the heuristic annotator refuses a rubric holding one
(``heuristic.annotator.check_rules``), naming the feature, rather than answer it with nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

DEFAULT_RUBRIC = Path(__file__).with_name("rubric_default.toml")
VALUE_TYPES = ("category", "categories", "yes_no")
PROMPTS = ("analysis", "issues")


@dataclass(frozen=True)
class RubricFeature:
    name: str
    definition: str
    value_type: str
    prompt: str
    heuristic: str  # "" when the rubric names no rule: only the LLM annotator answers the feature
    options: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    max_choices: int = 1


@dataclass(frozen=True)
class Rubric:
    version: str
    features: tuple[RubricFeature, ...]
    digest: str  # changes whenever the file's content changes (part of the LLM cache key)

    def by_prompt(self, prompt: str) -> list[RubricFeature]:
        return [f for f in self.features if f.prompt == prompt]

    def get(self, name: str) -> RubricFeature:
        for f in self.features:
            if f.name == name:
                return f
        raise KeyError(name)


class RubricError(ValueError):
    pass


def load_rubric(path: Path | None = None) -> Rubric:
    """The rubric at ``path``, else the paper's default shipped with PULSE (``DEFAULT_RUBRIC``).

    The file is not chosen here: a caller that wants the configured rubric (``PULSE_RUBRIC``) passes
    ``settings.feature_settings().rubric_path``, which is None when it is unset.
    """
    from ..settings_files import SettingsFileError, parse_toml

    path = path or DEFAULT_RUBRIC
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise RubricError(f"{path}: the rubric cannot be read ({exc.strerror or exc})") from None
    try:
        doc, text = parse_toml(path, raw)
    except SettingsFileError as exc:
        raise RubricError(f"{exc} (a rubric)") from None
    entries = doc.get("feature", [])
    if not isinstance(entries, list):
        raise RubricError(f"{path}: features must be [[feature]] tables")
    headers = [n for n, line in enumerate(text.splitlines(), start=1) if line.strip().startswith("[[feature]]")]
    features = []
    for i, entry in enumerate(entries):
        line = f", line {headers[i]}" if i < len(headers) else ""
        if not isinstance(entry, dict):
            raise RubricError(f"{path}{line}: feature #{i + 1} must be a [[feature]] table")
        where = f"{path}{line}: feature #{i + 1} ({entry.get('name', '?')})"
        missing = [k for k in ("name", "definition", "value_type", "prompt") if not entry.get(k)]
        if missing:
            raise RubricError(f"{where} lacks {', '.join(missing)}")
        if entry["value_type"] not in VALUE_TYPES:
            raise RubricError(f"{where}: value_type must be one of {VALUE_TYPES}")
        if entry["prompt"] not in PROMPTS:
            raise RubricError(f"{where}: prompt must be one of {PROMPTS}")
        if entry["value_type"] != "yes_no" and not entry.get("options"):
            raise RubricError(f"{where}: a {entry['value_type']} feature needs options")
        if not isinstance(entry["name"], str) or not entry["name"].isidentifier():
            raise RubricError(f"{where}: name must be a plain identifier (it becomes a column)")
        for listed in ("options", "examples"):
            values = entry.get(listed, [])
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise RubricError(f"{where}: {listed} must be a list of strings")
        max_choices = entry.get("max_choices", 1)
        if isinstance(max_choices, bool) or not isinstance(max_choices, int) or max_choices < 1:
            raise RubricError(f"{where}: max_choices must be a whole number >= 1, got {max_choices!r}")
        features.append(
            RubricFeature(
                name=entry["name"],
                definition=str(entry["definition"]),
                value_type=entry["value_type"],
                prompt=entry["prompt"],
                heuristic=str(entry.get("heuristic", "")),
                options=tuple(entry.get("options", ())),
                examples=tuple(entry.get("examples", ())),
                max_choices=max_choices,
            )
        )
    names = [f.name for f in features]
    if len(set(names)) != len(names):
        raise RubricError(f"{path}: feature names repeat")
    return Rubric(str(doc.get("version", "unversioned")), tuple(features), hashlib.sha1(raw).hexdigest()[:12])
