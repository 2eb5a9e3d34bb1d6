"""How far two annotators agree on the rubric: raw agreement and Cohen's kappa per feature.

The rows go to ``features.annotator_agreement``.

Why: the heuristic, an LLM and human annotators label the same sessions; before a model trusts one of them, the
team needs to know, feature by feature, how often they give the same answer beyond chance.

- Labels are ``session -> feature -> value``, as ``store.read_labels`` returns them and ``read_human_labels``
  reads them from a CSV. An empty value means "not labelled" (a skipped session), not a label.
- Values are compared after ``normalize_value``: YES/NO in upper case, a category spelled as the rubric spells it
  (case-insensitive), and a ``categories`` value as its options in the rubric's order joined by ``|``; the joined
  value is one label, so "Fix python issues|Testing code" agrees only with exactly that pair.
- Per feature: the sessions both annotators labelled, the share with the same value, and Cohen's kappa
  (``sklearn.metrics.cohen_kappa_score``). Kappa is NaN, with a note, when it is undefined: both sides give one
  and the same value throughout (no variation to agree on beyond chance), or no session is labelled by both.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from .rubric import Rubric, RubricFeature, load_rubric

NOTE_NO_OVERLAP = "no session labelled by both annotators"
NOTE_SINGLE_LABEL = "kappa undefined: a single label value"
CATEGORY_SEPARATORS = ("|", ";")


@dataclass
class AgreementRow:
    """One row of ``features.annotator_agreement`` (its columns, in its order)."""

    feature: str
    annotator_a: str
    annotator_b: str
    n_sessions: int
    raw_agreement: float
    cohen_kappa: float
    note: str


def normalize_value(feature: RubricFeature, value: str | None) -> str:
    """``value`` in the form annotators are compared in ("" when there is none); see the module docstring."""
    if value is None:
        return ""
    value = str(value).strip()
    if not value:
        return ""
    if feature.value_type == "yes_no":
        return value.upper() if value.upper() in ("YES", "NO") else value
    by_lower = {o.lower(): o for o in feature.options}
    if feature.value_type == "category":
        return by_lower.get(value.lower(), value)
    parts = [value]
    for sep in CATEGORY_SEPARATORS:
        parts = [p for part in parts for p in part.split(sep)]
    chosen = list(dict.fromkeys(by_lower.get(p.strip().lower(), p.strip()) for p in parts if p.strip()))
    known = [o for o in feature.options if o in chosen]
    return "|".join(known + [c for c in chosen if c not in known])


def agreement(
    labels_a: dict[str, dict[str, str]],
    labels_b: dict[str, dict[str, str]],
    rubric: Rubric,
    annotator_a: str = "a",
    annotator_b: str = "b",
) -> list[AgreementRow]:
    """One row per rubric feature: sessions both labelled, raw agreement, Cohen's kappa, and a note when kappa is
    undefined (NaN) or nothing overlaps."""
    from sklearn.metrics import cohen_kappa_score

    common = sorted(set(labels_a) & set(labels_b))
    rows = []
    for f in rubric.features:
        a_values, b_values = [], []
        for sid in common:
            a = normalize_value(f, labels_a[sid].get(f.name))
            b = normalize_value(f, labels_b[sid].get(f.name))
            if a and b:
                a_values.append(a)
                b_values.append(b)
        n = len(a_values)
        if n == 0:
            rows.append(AgreementRow(f.name, annotator_a, annotator_b, 0, math.nan, math.nan, NOTE_NO_OVERLAP))
            continue
        raw = sum(x == y for x, y in zip(a_values, b_values, strict=True)) / n
        if len(set(a_values) | set(b_values)) == 1:
            kappa, note = math.nan, f"{NOTE_SINGLE_LABEL} ({a_values[0]!r} on both sides)"
        else:
            kappa, note = float(cohen_kappa_score(a_values, b_values)), ""
        rows.append(AgreementRow(f.name, annotator_a, annotator_b, n, raw, kappa, note))
    return rows


def pairwise_agreement(labels: dict[str, dict[str, dict[str, str]]], rubric: Rubric) -> list[AgreementRow]:
    """``agreement`` for every pair of annotators in ``labels`` (annotator -> session -> feature -> value), pairs in
    name order (``a`` before ``b``), features in rubric order."""
    names = sorted(labels)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            rows.extend(agreement(labels[a], labels[b], rubric, a, b))
    return rows


def read_human_labels(path: Path, rubric: Rubric | None = None) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Human labels from a CSV with a ``session_id`` column and one column per rubric feature (named as the
    feature, case-insensitive), values as the annotators wrote them (normalized by ``normalize_value``).

    Returns ``(session -> feature -> value, ignored)``: ``ignored`` lists the columns that are not rubric features
    (they are skipped; the caller warns). Empty cells are "not labelled". A session listed twice keeps, per
    feature, the last non-empty value.

    The one reader of the file, also the preflight's (``preflight.check_settings``): a file that cannot be
    read, is not UTF-8, is not CSV, has no ``session_id`` column or no column naming a rubric feature raises
    ``settings_files.SettingsFileError`` naming the file and the line.
    """
    from ..settings_files import SettingsFileError

    rubric = rubric or load_rubric()
    features = {f.name.lower(): f for f in rubric.features}
    labels: dict[str, dict[str, str]] = {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            try:
                columns = [c for c in (reader.fieldnames or []) if c is not None]
                by_lower = {c.strip().lower(): c for c in columns}
                if "session_id" not in by_lower:
                    raise SettingsFileError(path, f"no session_id column (columns: {', '.join(columns) or 'none'})", 1)
                sid_col = by_lower["session_id"]
                used = {c: features[c.strip().lower()] for c in columns if c.strip().lower() in features}
                if not used:
                    raise SettingsFileError(
                        path, f"no column names a rubric feature ({', '.join(f.name for f in rubric.features)})", 1
                    )
                ignored = [c for c in columns if c != sid_col and c not in used]
                for row in reader:
                    sid = (row.get(sid_col) or "").strip()
                    if not sid:
                        continue
                    for column, feature in used.items():
                        value = normalize_value(feature, row.get(column))
                        if value:
                            labels.setdefault(sid, {})[feature.name] = value
            except (csv.Error, UnicodeDecodeError) as exc:
                what = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else f"not a CSV file ({exc})"
                raise SettingsFileError(path, what, reader.line_num or None) from None
    except OSError as exc:
        raise SettingsFileError(path, f"human labels cannot be read ({exc.strerror or exc})") from None
    return labels, ignored
