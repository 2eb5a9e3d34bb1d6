"""Scores that trace tools keep on traces, observations and sessions (Langfuse scores, OpenTelemetry evaluation
events, OpenInference annotations): which are users' ratings, which are judges' scores, and the rows each becomes.

A score is one record (record type ``score``, counted so the drop reconciles) and becomes exactly one row:

- **a rating** (``raw.ratings``) when its name is declared a rating (``PULSE_RATING_SCORES``; default
  ``user-feedback``, ``user_feedback``, ``rating``, ``feedback``, ``thumbs``, case ignored) and a person gave it
  (source ``API``: the application posted its user's feedback; ``ANNOTATION``: a person in the tool's UI). Its
  ``event_id`` is the trace (a work segment opens with the user message whose event id is the trace id) or the
  observation it scores, so staging joins it to that segment; a session score (no trace, no observation) rates the
  session's last segment, as a star rating naming no event does. The value reaches a scale (``label_scales``):

  - ``BOOLEAN``: a thumb, ``1`` up and ``0`` down, scale ``thumbs`` (Langfuse stores ``true``/``false`` as 1/0);
  - ``NUMERIC``: on the name's declared range (``PULSE_SCORE_RANGES``, ``name=LOW:HIGH``; 1-5 when undeclared)
    mapped linearly onto 1-5 stars, ``stars = 1 + 4 (value - LOW) / (HIGH - LOW)``, scale ``stars_1_5``; a name
    declared ``thumbs`` (the default for ``thumbs``) takes 0 or 1 as a thumb. A value off its range is quarantined
    (nothing is clipped: a 0 on a 1-5 range is most likely a thumbs-down sent as a number, and says so);
  - ``CATEGORICAL``: its label through the name's declared map (``PULSE_SCORE_CATEGORIES``,
    ``{"feedback": {"good": 5, "bad": 1}}``) onto a value on the name's range, then as ``NUMERIC``; a label with no
    declared value is quarantined with the reason (no guess at what "meh" means);
  - ``TEXT`` and ``CORRECTION``: words, no rating: quarantined with the reason.

  The score as it came (name, value, label, data type, source, and the range it was mapped from) is kept in the
  row's ``score_json``; its comment is the rating's ``reason``.
- **an eval score** (``raw.eval_scores``) when its source is ``EVAL`` (an LLM-as-judge evaluator: Langfuse's
  evaluators, OpenTelemetry ``gen_ai.evaluation.result``, OpenInference ``LLM``/``CODE`` annotations), whatever its
  name: **a judge's score is never a label**, even named ``user-feedback``. It is kept whole, and the features stage
  turns a session's eval scores into ``eval_score_mean``, ``eval_score_min`` and ``eval_scored``.
- **a quarantine row** otherwise, with the reason: a score that names nothing (no trace, observation or session),
  an id that is no id, a rating that cannot be read on a scale, and a score a person gave under a name not declared
  a rating (a reviewer's ``correctness`` annotation is not the user's rating of their session, and PULSE does not
  guess; the reason says how to declare it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import tables
from ..label_scales import STARS, THUMBS
from ..settings import THUMBS_RANGE, ScoreSettings, score_settings
from .batch import Batch
from .events import NotAnId, dump, read_id

DATA_TYPES = ("NUMERIC", "BOOLEAN", "CATEGORICAL", "TEXT", "CORRECTION")
PERSON_SOURCES = ("API", "ANNOTATION")  # a person gave it: through the application, or in the tool's UI
EVAL = "EVAL"
DEFAULT_RANGE = (1.0, 5.0)

RATING, EVAL_KIND, IGNORED = "rating", "eval", "ignored"


@dataclass(frozen=True, slots=True)
class Score:
    """One score as any trace tool gives it, in Langfuse's vocabulary (the reader of each format maps to it)."""

    name: str
    value: float | None  # numeric value (BOOLEAN as 0/1; CATEGORICAL's index if any)
    string_value: str | None  # CATEGORICAL / TEXT label
    data_type: str  # NUMERIC | BOOLEAN | CATEGORICAL | TEXT | CORRECTION (upper case)
    source: str  # API | ANNOTATION | EVAL (OpenInference: HUMAN -> ANNOTATION, LLM/CODE -> EVAL)
    session_id: str | None
    event_id: str | None  # the trace id (segment) or observation id it scores; None: the whole session
    score_id: str | None
    comment: str | None
    created_at: str | None


@dataclass(frozen=True)
class Rated:
    """A rating score read on a scale: the rating (stars 1-5, or a thumb 0/1), its scale, and the range it came
    from (None for a BOOLEAN)."""

    rating: float
    scale: str
    range: tuple[float, float] | str | None


class NotARating(ValueError):
    """A score declared a rating that cannot be read on a scale; the message is the quarantine reason."""


@dataclass(frozen=True)
class ScoreRules:
    """Which scores are ratings and how each reaches a scale (read from settings: ``score_rules``)."""

    rating_names: frozenset[str] = frozenset(ScoreSettings().rating_names)
    ranges: Mapping[str, tuple[float, float] | str] = field(default_factory=lambda: dict(ScoreSettings().ranges))
    categories: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def kind(self, score: Score) -> str:
        """``eval`` for a judge's score (source EVAL, whatever its name), ``rating`` for a declared rating name
        given by a person (API, ANNOTATION), else ``ignored``."""
        source = (score.source or "").upper()
        if source == EVAL:
            return EVAL_KIND
        if source in PERSON_SOURCES and score.name.strip().lower() in self.rating_names:
            return RATING
        return IGNORED

    def range_of(self, name: str) -> tuple[float, float] | str:
        """The declared range of a score name: ``(low, high)`` or ``"thumbs"``; 1-5 when undeclared."""
        return self.ranges.get(name.strip().lower(), DEFAULT_RANGE)

    def rate(self, score: Score) -> Rated:
        """The rating a rating score gives (module docstring), or ``NotARating`` with the reason."""
        data_type = (score.data_type or "").upper()
        name = score.name
        if data_type == "BOOLEAN":
            thumb = _boolean(score)
            if thumb is None:
                raise NotARating(f"BOOLEAN score {name!r} has value {_shown(score)}: expected 1 or 0 (true or false)")
            return Rated(thumb, THUMBS, None)
        if data_type == "CATEGORICAL":
            mapping = self.categories.get(name.strip().lower())
            label = score.string_value
            if mapping is None:
                raise NotARating(
                    f"CATEGORICAL score {name!r} ({label!r}) has no declared map to a rating: set"
                    f' PULSE_SCORE_CATEGORIES (e.g. {{"{name}": {{"good": 5, "bad": 1}}}})'
                )
            value = _category(mapping, label)
            if value is None:
                known = ", ".join(sorted(mapping))[:200]
                raise NotARating(
                    f"CATEGORICAL score {name!r} has label {label!r}, which PULSE_SCORE_CATEGORIES does not map"
                    f" (it maps {known})"
                )
            return self._on_range(name, value, f"label {label!r} -> {_number_text(value)}")
        if data_type == "NUMERIC":
            if score.value is None or not math.isfinite(score.value):
                raise NotARating(f"NUMERIC score {name!r} has no numeric value ({_shown(score)})")
            return self._on_range(name, score.value, f"value {_number_text(score.value)}")
        if data_type in ("TEXT", "CORRECTION"):
            raise NotARating(f"{data_type} score {name!r} is words, not a rating: declare another name a rating")
        raise NotARating(f"score {name!r} has data type {score.data_type!r}: expected one of {', '.join(DATA_TYPES)}")

    def _on_range(self, name: str, value: float, what: str) -> Rated:
        declared = self.range_of(name)
        if declared == THUMBS_RANGE:
            if value in (0.0, 1.0):
                return Rated(value, THUMBS, THUMBS_RANGE)
            raise NotARating(f"score {name!r} {what} is no thumb: {name!r} is declared thumbs (1 up, 0 down)")
        low, high = declared
        if not low <= value <= high:
            hint = (
                f"; a thumbs-down sent as 0? declare PULSE_SCORE_RANGES='{name}=thumbs'"
                if value == 0 and declared == DEFAULT_RANGE
                else ""
            )
            raise NotARating(
                f"score {name!r} {what} is off its range {_number_text(low)}-{_number_text(high)}"
                f" (PULSE_SCORE_RANGES, 1-5 when undeclared){hint}"
            )
        return Rated(1.0 + 4.0 * (value - low) / (high - low), STARS, (low, high))


def score_rules(environ: Mapping[str, str] | None = None) -> ScoreRules:
    """The rules the settings declare (``settings.score_settings``: PULSE_RATING_SCORES, PULSE_SCORE_RANGES,
    PULSE_SCORE_CATEGORIES)."""
    s = score_settings(environ)
    return ScoreRules(s.rating_names, dict(s.ranges), {k: dict(v) for k, v in s.categories.items()})


def add_score(
    batch: Batch,
    source_file: str,
    record_index: int,
    score: Score,
    rules: ScoreRules,
    raw_text: str,
    item_index: int | None = None,
) -> None:
    """A rating row (raw.ratings with its scale), an eval-score row (raw.eval_scores), or a quarantine row with
    the reason; counted so the drop reconciles (record type ``score``).

    ``item_index`` numbers the scores of one record (a trace file's ``scores`` array), so each row has its own
    place (staging joins a rating to its segment by drop, file, record and item); None for a record that is one
    score (a line of a scores export)."""
    batch.read["score"] += 1
    reason = _why_unusable(score)
    if reason is None:
        kind = rules.kind(score)
        if kind == EVAL_KIND:
            _add_eval(batch, source_file, record_index, item_index, score)
            return
        if kind == IGNORED:
            reason = _why_ignored(score, rules)
        else:
            try:
                rated = rules.rate(score)
            except NotARating as error:
                reason = f"rating score: {error}"
            else:
                _add_rating(batch, source_file, record_index, item_index, score, rated)
                return
    batch.quarantine(source_file, record_index, "score", reason, raw_text, event_index=item_index)


def _why_unusable(score: Score) -> str | None:
    """Why a score can be nothing at all: no name, an id that is no id, nothing it scores."""
    if not isinstance(score.name, str) or not score.name.strip():
        return "score has no name"
    try:
        for value, what in ((score.session_id, "session id"), (score.event_id, "trace or observation id")):
            read_id(value, f"score's {what}")
    except NotAnId as error:
        return str(error)
    if score.session_id is None and score.event_id is None:
        return f"score {score.name!r} names no trace, observation or session: nothing to attach it to"
    return None


def _why_ignored(score: Score, rules: ScoreRules) -> str:
    names = ", ".join(sorted(rules.rating_names)) or "none"
    if (score.source or "").upper() not in PERSON_SOURCES:
        return (
            f"score {score.name!r} has source {score.source!r}: expected API or ANNOTATION (a person's rating) or EVAL"
            " (a judge's score)"
        )
    return (
        f"score {score.name!r} ({score.source}) is not declared a users' rating (PULSE_RATING_SCORES: {names}) and"
        " is no EVAL score: not used; add its name to PULSE_RATING_SCORES if it is the users' rating"
    )


def _add_rating(
    batch: Batch, source_file: str, record_index: int, item_index: int | None, score: Score, rated: Rated
) -> None:
    original = {
        "name": score.name,
        "value": score.value,
        "string_value": score.string_value,
        "data_type": score.data_type,
        "source": score.source,
        "range": list(rated.range) if isinstance(rated.range, tuple) else rated.range,
    }
    batch.add(
        tables.RATINGS,
        {
            "drop_id": batch.drop_id,
            "source_file": source_file,
            "record_index": record_index,
            "item_index": item_index or 0,
            "rating_id": score.score_id,
            "session_id": score.session_id,
            "event_id": score.event_id,
            "segment_index": None,
            "rating": rated.rating,
            "reason": score.comment or None,
            "created_at": score.created_at,
            "origin": "score",
            "scale": rated.scale,
            "score_json": dump(original),
        },
    )


def _add_eval(batch: Batch, source_file: str, record_index: int, item_index: int | None, score: Score) -> None:
    value = score.value if score.value is not None and math.isfinite(score.value) else None
    batch.add(
        tables.EVAL_SCORES,
        {
            "drop_id": batch.drop_id,
            "source_file": source_file,
            "record_index": record_index,
            "item_index": item_index or 0,
            "score_id": score.score_id,
            "session_id": score.session_id,
            "event_id": score.event_id,
            "name": score.name,
            "value": value,
            "string_value": score.string_value,
            "data_type": (score.data_type or "").upper() or None,
            "source": EVAL,
            "comment": score.comment,
            "created_at": score.created_at,
        },
    )


def _boolean(score: Score) -> float | None:
    """A BOOLEAN score's thumb: its value 1 or 0, else its label true or false; None for anything else."""
    if score.value in (0.0, 1.0):
        return float(score.value)
    label = (score.string_value or "").strip().lower()
    return {"true": 1.0, "false": 0.0}.get(label) if score.value is None else None


def _category(mapping: Mapping[str, float], label: str | None) -> float | None:
    """The declared value of a label: exact first, then ignoring case and surrounding blanks."""
    if label is None:
        return None
    if label in mapping:
        return mapping[label]
    folded = {k.strip().lower(): v for k, v in mapping.items()}
    return folded.get(label.strip().lower())


def _number_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _shown(score: Score) -> str:
    return dump({"value": score.value, "string_value": score.string_value})


def score_value(value: Any) -> float | None:
    """A score's numeric value as the formats give it (a number, the text of one, a boolean as 1/0); None for
    anything else or a non-finite number."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None
