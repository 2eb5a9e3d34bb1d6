"""``pulse discover``: an LLM proposes new rubric features from the highest- and lowest-rated sessions, every session
is annotated with them, and each is scored by how much it raises the out-of-fold correlation rho (Appendix A.2's
"automatic discovery of features", made measurable).

Steps (``discover``):

1. **Sample.** The rated sessions with a user message, ordered by rating (``staging.session_labels.label_stars``)
   and, within a rating, by md5 of the session id (a fixed order unrelated to ids' meaning): the first
   ``ceil(n/2)`` are the highest rated, the last ``floor(n/2)`` the lowest (``sample_sessions``).
2. **Propose.** One prompt (``prompts.DISCOVERY_TEMPLATE``) shows their user messages, rendered as the annotator
   renders them (``render_transcript``, redacted), each cut to ``transcript_chars // n`` characters so the whole
   prompt stays within one annotator transcript's budget. The answer is validated (``proposals_check``: names
   plain identifiers new to the rubric and to each other, value_type ``yes_no`` or ``category`` with 2 to 8
   distinct options) and re-asked once when invalid, through the annotator's engine (cache, spend cap, retries).
3. **Write** the candidates as a rubric TOML (``candidate_toml``), loadable by ``rubric.load_rubric``; every
   candidate is an ``analysis`` prompt feature with no ``heuristic`` key (only the LLM annotator answers it).
4. **Annotate** every staged session with the candidate rubric through ``LLMAnnotator`` (cache, spend cap,
   concurrency as usual). The answers are kept in memory, not written to ``features.annotation_values``: the
   pipeline's annotations stay those of the configured rubric.
5. **Measure.** On the rated sessions NOT shown in the prompt (the sample's labels chose the candidates, so
   scoring on them would flatter the candidates), ``crossfit.cross_validate`` of ``family`` with the current
   features of ``features.session_features`` (X) and with X plus one candidate's columns (``wide.option_column``
   one-hot for a category, 0/1 for yes_no, NaN where unanswered); ``gain = rho(X + candidate) - rho(X)``, each the
   mean over the same CV seeds and folds, so the difference is the candidate's alone. When sessions have user text,
   both sides also get the nested cross-fit text score, as the pipeline's tabular families do
   (``ModelingData.text``, ``modeling/text.py``): a candidate gains only what the users' words do not already give.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import tables
from ..features.annotation import Annotation, SessionTranscript
from ..features.llm.annotator import LLMAnnotator
from ..features.llm.answers import InvalidAnswer, SchemaCheck
from ..features.llm.cache import LLMCache
from ..features.llm.engine import Engine, LLMTotals
from ..features.prompts import DISCOVERY_TEMPLATE, render_transcript
from ..features.redact import redact
from ..features.rubric import Rubric, RubricFeature, load_rubric
from ..features.transcripts import iter_transcripts
from ..features.wide import SCORE_COLUMNS, option_column
from ..modeling.comparison import load_chosen_family
from ..modeling.crossfit import cross_validate
from ..modeling.data import ModelingData, load_modeling_data
from ..modeling.text import TextFeature, word_columns
from ..settings import LLMSettings
from ..warehouse import Warehouse

MAX_OPTIONS = 8
CANDIDATE_VERSION = "discovered"
WIDE_FAMILIES = ("ordinal_logit", "random_forest", "hist_gbm", "lightgbm")
"""Families that read the wide table alone (the gain is measured by adding columns to it)."""
FALLBACK_FAMILY = "random_forest"

SAMPLE_SQL = f"""
SELECT l.session_id
FROM {tables.SESSION_LABELS.qualified} l JOIN {tables.STAGING_SESSIONS.qualified} s USING (session_id)
WHERE l.label_stars IS NOT NULL AND s.n_user_messages > 0
ORDER BY l.label_stars DESC, md5(l.session_id)
"""


@dataclass(frozen=True)
class Candidate:
    """One proposed feature, as the model proposed it (name normalized)."""

    name: str
    question: str
    value_type: str  # yes_no | category
    options: tuple[str, ...] = ()
    why_predictive: str = ""


@dataclass(frozen=True)
class Gain:
    """One candidate's row of the gain table: rho without and with its columns, over ``n_rated`` sessions."""

    name: str
    value_type: str
    columns: int
    answered: float  # share of staged sessions the annotator answered
    rho_current: float
    rho_with: float
    gain: float
    n_rated: int


@dataclass(frozen=True)
class Discovery:
    """What ``discover`` did: the sample, the candidates, where they were written, their gains, what it cost."""

    high: tuple[str, ...]
    low: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    rubric_path: Path
    gains_path: Path
    family: str
    gains: tuple[Gain, ...]
    totals: LLMTotals


def sample_sessions(wh: Warehouse, n: int) -> tuple[list[str], list[str]]:
    """The ``ceil(n/2)`` highest- and ``floor(n/2)`` lowest-rated sessions with a user message (see step 1)."""
    ordered = [r[0] for r in wh.con.execute(SAMPLE_SQL).fetchall()]
    n = min(n, len(ordered))
    n_high = math.ceil(n / 2)
    n_low = n - n_high
    return ordered[:n_high], ordered[len(ordered) - n_low :] if n_low else []


def discovery_prompt(high: list[SessionTranscript], low: list[SessionTranscript], rubric: Rubric, chars: int) -> str:
    """The discovery prompt over these sessions, each transcript redacted and cut to ``chars // n`` characters."""
    per = max(chars // max(len(high) + len(low), 1), 500)

    def block(ts: list[SessionTranscript]) -> str:
        texts = [render_transcript(t, per, redact=redact)[0] for t in ts]
        return "\n\n---\n\n".join(f"Session {i}:\n\n{text}" for i, text in enumerate(texts, 1)) or "(none)"

    existing = ", ".join(f.name for f in rubric.features) or "(none)"
    return DISCOVERY_TEMPLATE.format(n_features=10, existing=existing, high=block(high), low=block(low))


def _identifier(name: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")


def proposals_check(rubric: Rubric) -> SchemaCheck:
    """Validator of the discovery answer: ``{"features": [...]}`` with every entry usable as a rubric feature: a
    name new to the rubric, to the other columns of ``features.session_features`` and to the other proposals."""
    taken = {f.name for f in rubric.features} | set(tables.EVENT_FEATURES.column_names) | set(SCORE_COLUMNS)

    def check(obj: Any) -> tuple[Candidate, ...]:
        entries = obj.get("features") if isinstance(obj, dict) else None
        if not isinstance(entries, list) or not entries:
            raise InvalidAnswer('expected an object with a non-empty list "features"')
        out: list[Candidate] = []
        for i, e in enumerate(entries, 1):
            if not isinstance(e, dict):
                raise InvalidAnswer(f"features[{i}] is not an object")
            name = _identifier(e.get("name", ""))
            question = e.get("question")
            value_type = e.get("value_type")
            if not name or not name.isidentifier():
                raise InvalidAnswer(f"features[{i}]: name {e.get('name')!r} is not a snake_case identifier")
            if name in taken:
                raise InvalidAnswer(f"features[{i}]: {name!r} is an existing feature or repeats another one")
            if not isinstance(question, str) or not question.strip():
                raise InvalidAnswer(f"features[{i}] ({name}): question must be a non-empty string")
            if value_type not in ("yes_no", "category"):
                raise InvalidAnswer(f"features[{i}] ({name}): value_type must be yes_no or category")
            options: tuple[str, ...] = ()
            if value_type == "category":
                raw = e.get("options")
                if not isinstance(raw, list) or not all(isinstance(o, str) and o.strip() for o in raw):
                    raise InvalidAnswer(f"features[{i}] ({name}): options must be a list of non-empty strings")
                options = tuple(dict.fromkeys(o.strip() for o in raw))
                slugs = {option_column(name, o) for o in options}
                if not 2 <= len(options) <= MAX_OPTIONS or len(slugs) != len(options):
                    raise InvalidAnswer(f"features[{i}] ({name}): needs 2 to {MAX_OPTIONS} distinct options")
            why = e.get("why_predictive")
            out.append(Candidate(name, question.strip(), value_type, options, why if isinstance(why, str) else ""))
            taken.add(name)
        return tuple(out)

    return check


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def candidate_toml(candidates: tuple[Candidate, ...]) -> str:
    """The candidates as a rubric file (``rubric.load_rubric`` reads it): analysis-prompt features, no heuristic."""
    lines = [
        "# Candidate features proposed by `pulse discover`: review, then copy the ones worth keeping into the rubric",
        "# named by PULSE_RUBRIC. No `heuristic` key: only the LLM annotator answers these.",
        "",
        f"version = {_toml_string(CANDIDATE_VERSION)}",
    ]
    for c in candidates:
        lines += ["", "[[feature]]", f"name = {_toml_string(c.name)}", f"definition = {_toml_string(c.question)}"]
        lines.append(f"value_type = {_toml_string(c.value_type)}")
        if c.options:
            lines.append(f"options = [{', '.join(_toml_string(o) for o in c.options)}]")
        lines.append('prompt = "analysis"')
        if c.why_predictive:
            lines.append(f"# why: {' '.join(c.why_predictive.split())}")
    return "\n".join(lines) + "\n"


def candidate_columns(feature: RubricFeature, answers: dict[str, str], session_ids: np.ndarray) -> np.ndarray:
    """One candidate's columns for ``session_ids`` (rows) from its answers (session id -> value; '' unanswered):
    0/1 for yes_no, one 0/1 column per option for a category (``wide.build_session_features``' encoding); NaN where
    a session has no answer."""
    options = feature.options if feature.value_type != "yes_no" else ("YES",)
    out = np.full((len(session_ids), len(options)), np.nan)
    for r, sid in enumerate(session_ids):
        value = answers.get(str(sid), "")
        if value:
            chosen = value.upper() if feature.value_type == "yes_no" else value
            out[r] = [float(o in chosen.split("|")) for o in options]
    return out


def default_family(wh: Warehouse) -> str:
    """The family ``modeling.cv_metrics`` marks as chosen when it reads the wide table alone, else
    ``FALLBACK_FAMILY`` (nothing compared yet, or a family that needs more than the wide table)."""
    chosen = load_chosen_family(wh)
    return chosen if chosen in WIDE_FAMILIES else FALLBACK_FAMILY


def _annotate(wh: Warehouse, annotator: LLMAnnotator, rubric: Rubric) -> list[Annotation]:
    return [a for batch in iter_transcripts(wh) for a in annotator.annotate(batch, rubric)]


def _rho(X: np.ndarray, y: np.ndarray, family: str, seeds: tuple[int, ...], text: TextFeature | None) -> float:
    """Mean out-of-fold Pearson r over ``seeds`` (``crossfit.cross_validate``)."""
    return next(m.mean for m in cross_validate(X, y, family, seeds=seeds, text=text).metrics if m.name == "pearson")


def text_rows(data: ModelingData, rows: np.ndarray) -> TextFeature | None:
    """The users' text of the measured rated ``rows``, for ``cross_validate`` (which reads no unrated text; ``data``
    may hold the rated sessions' text only, ``load_modeling_data(text_of="rated")``)."""
    if data.text is None:
        return None
    position = {int(r): i for i, r in enumerate(data.text.rows)}
    Z = data.text.Z[[position[int(r)] for r in np.flatnonzero(rows)]]
    return TextFeature(Z, Z[:0], word_columns=word_columns(data.text.terms))


def discover(
    wh: Warehouse,
    settings: LLMSettings,
    rubric: Rubric,
    out: Path,
    family: str,
    sample: int = 20,
    seeds: tuple[int, ...] = (42, 43, 44, 45, 46),
    say: Callable[[str], None] = print,
) -> Discovery:
    """Propose, write, annotate and measure candidate features (see the module docstring); ``out`` is the TOML,
    the gains go to ``out`` with suffix ``.gains.json``. Raises ``RuntimeError`` when no valid proposal came."""
    high_ids, low_ids = sample_sessions(wh, sample)
    if not high_ids:
        raise RuntimeError("no rated session with a user message: nothing to learn features from")
    by_id = {t.session_id: t for batch in iter_transcripts(wh, session_ids=high_ids + low_ids) for t in batch}
    prompt = discovery_prompt(
        [by_id[s] for s in high_ids], [by_id[s] for s in low_ids], rubric, settings.transcript_chars
    )
    cache = LLMCache(wh.con)
    engine = Engine(settings, cache, None, 1, "discover")
    say(f"asking {settings.model} for features over {len(high_ids)} highest- and {len(low_ids)} lowest-rated sessions")
    res = engine.ask(prompt, proposals_check(rubric))
    if res.status != "ok":
        raise RuntimeError(f"the model proposed no valid features: {res.error}")
    candidates: tuple[Candidate, ...] = res.value
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(candidate_toml(candidates), encoding="utf-8")
    cand_rubric = load_rubric(out)
    say(f"wrote {len(candidates)} candidate features to {out}; annotating every session with them")

    annotator = LLMAnnotator(settings, cache, progress=say, progress_every=100)
    annotations = _annotate(wh, annotator, cand_rubric)
    data = load_modeling_data(wh, text_of="rated")  # only rated sessions are cross-validated
    shown = set(high_ids) | set(low_ids)
    rows = data.labeled & ~np.isin(data.session_ids, list(shown))
    X, y = data.X[rows], data.y[rows]
    say(f"cross-validating {family} on {int(rows.sum())} rated sessions the prompt did not show")
    text = text_rows(data, rows)
    rho_current = _rho(X, y, family, seeds, text)
    gains = []
    for f in cand_rubric.features:
        answers = {a.session_id: a.answers[f.name].value for a in annotations if f.name in a.answers}
        cols = candidate_columns(f, answers, data.session_ids)
        rho_with = _rho(np.hstack([X, cols[rows]]), y, family, seeds, text)
        answered = sum(1 for v in answers.values() if v) / max(len(data.session_ids), 1)
        gains.append(
            Gain(f.name, f.value_type, cols.shape[1], answered, rho_current, rho_with, rho_with - rho_current, len(y))
        )
    gains_path = out.with_suffix(".gains.json")
    totals = LLMTotals(**{k: getattr(engine.totals, k) + getattr(annotator.totals, k) for k in asdict(LLMTotals())})
    payload = {
        "family": family,
        "seeds": list(seeds),
        "shown_high": high_ids,
        "shown_low": low_ids,
        "rubric": str(out),
        "gains": [asdict(g) for g in gains],
        "llm": asdict(totals),
    }
    gains_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return Discovery(tuple(high_ids), tuple(low_ids), candidates, out, gains_path, family, tuple(gains), totals)


def gain_table(gains: tuple[Gain, ...]) -> str:
    """The gain table as text, best gain first."""
    head = f"{'feature':<32} {'type':<9} {'cols':>4} {'answered':>8} {'rho now':>8} {'rho with':>8} {'gain':>8}"
    lines = [head, "-" * len(head)]
    for g in sorted(gains, key=lambda g: -g.gain if math.isfinite(g.gain) else math.inf):
        lines.append(
            f"{g.name:<32} {g.value_type:<9} {g.columns:>4} {g.answered:>8.1%} {g.rho_current:>8.3f}"
            f" {g.rho_with:>8.3f} {g.gain:>+8.3f}"
        )
    return "\n".join(lines)
