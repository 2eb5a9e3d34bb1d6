"""The ask policy's exported files: ``ask_policy.json`` written and read back (checked; its ``policy_version`` is
``ask_models.policy_digest``, the policy's own), and ``ask_policy.py``, the standard-library reference module the
platform runs (the policy itself: ``estimates/ask_policy.py``).

Why log-linear and logistic models of a few counts and not the model itself: the platform must evaluate the policy
at every stop without PULSE, its features, or its annotator. The policy is exported (``write_policy``, atomically)
as ``ask_policy.json`` (both models' coefficients, feature means and sds, multiplier, floor, and
``policy_version``: a digest of the rest of the file, the same for the same policy however often it is exported)
and ``ask_policy.py`` (``REFERENCE_SOURCE``, standard library only) whose ``ask_probability(features)`` computes
q(x) exactly as ``probabilities`` does; the rating service evaluates that same code (``serve/policy.py``).

Files: format ``pulse-ask-policy/3`` when the policy has strata (the reference function multiplies by the
stratum's score); a policy without strata is still written as ``pulse-ask-policy/2`` (its probability is computed
exactly as before, so a platform's older copy of ``ask_policy.py`` computes it right).
"""

from __future__ import annotations

import functools
import json
import math
import types
from collections.abc import Mapping
from pathlib import Path

from ..atomic_write import write_whole
from .ask_models import (
    ERROR,
    FORMAT,
    FORMS,
    STRATA_FORMAT,
    STRATIFIED,
    AnswerModel,
    Policy,
    Strata,
    Term,
)

READABLE_FORMATS = ("pulse-ask-policy/1", FORMAT, STRATA_FORMAT)
"""/1: the error model alone (before the answer model); read as a policy with an unknown answer rate. /3: with
``strata`` (the stratified form); a policy without strata is written as /2."""
JSON_NAME, REFERENCE_NAME = "ask_policy.json", "ask_policy.py"
POLICY_DIR = "ask_policy"
"""The folder under PULSE_HOME the asset and ``pulse ask`` export to, and the rating service loads from."""
TRANSFORMS = ("log1p", "identity")


def _number(content: Mapping, key: str, where: str) -> float:
    value = content.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where}{key} is {value!r}, not a finite number")
    return float(value)


def _read_terms(items: object, where: str) -> tuple[Term, ...]:
    if not isinstance(items, list):
        raise ValueError(f"{where}terms is not a list")
    terms = []
    for i, item in enumerate(items):
        at = f"{where}terms[{i}]."
        if not isinstance(item, dict) or not isinstance(item.get("feature"), str):
            raise ValueError(f"{at}feature is missing")
        if item.get("transform") not in TRANSFORMS:
            raise ValueError(f"{at}transform is {item.get('transform')!r}, not one of {', '.join(TRANSFORMS)}")
        sd = _number(item, "sd", at)
        if not sd > 0:
            raise ValueError(f"{at}sd is {sd}, not positive")
        terms.append(
            Term(item["feature"], item["transform"], _number(item, "mean", at), sd, _number(item, "coefficient", at))
        )
    return tuple(terms)


def policy_from_json(content: object) -> Policy:
    """The policy an exported ``ask_policy.json`` holds (format /1 or /2), checked: ValueError, one line naming
    the field, when a field the probability reads is missing or out of range. The budget figures are read as
    given (NaN when absent); ``version`` is recomputed from the content."""
    if not isinstance(content, dict):
        raise ValueError("the policy is not a JSON object")
    if content.get("format") not in READABLE_FORMATS:
        raise ValueError(f"format is {content.get('format')!r}, not one of {', '.join(READABLE_FORMATS)}")
    floor, multiplier = _number(content, "floor", ""), _number(content, "multiplier", "")
    if not 0 < floor <= 1 or multiplier < 0:
        raise ValueError(f"floor {floor} must be in (0, 1] and multiplier {multiplier} at least 0")
    answer = None
    raw = content.get("answer_model")
    if raw is not None:
        if not isinstance(raw, dict):
            raise ValueError("answer_model is not an object")
        answer_floor, clip = _number(raw, "floor", "answer_model."), _number(raw, "clip", "answer_model.")
        if not 0 < answer_floor <= 1 or not clip > 0:
            raise ValueError(f"answer_model.floor {answer_floor} must be in (0, 1] and its clip {clip} positive")
        answer = AnswerModel(
            _number(raw, "intercept", "answer_model."),
            _read_terms(raw.get("terms"), "answer_model."),
            int(raw.get("fitted_on_asks") or 0),
            answer_floor,
            clip,
        )

    def figure(key: str) -> float:
        value = content.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan

    strata = _read_strata(content.get("strata"))
    if (strata is not None) != (content["format"] == STRATA_FORMAT):
        raise ValueError(f"strata must be given exactly when format is {STRATA_FORMAT}")
    form = content.get("form", STRATIFIED if strata is not None else ERROR)
    if form not in FORMS or (form == STRATIFIED) != (strata is not None):
        raise ValueError(f"form is {form!r}, not one of {', '.join(FORMS)} (stratified exactly when strata are given)")
    choice = content.get("choice")

    return Policy(
        intercept=_number(content, "intercept", ""),
        terms=_read_terms(content.get("terms"), ""),
        answer=answer,
        multiplier=multiplier,
        floor=floor,
        budget_per_day=figure("budget_per_day"),
        sessions_per_day=figure("sessions_per_day"),
        expected_asks_per_day=figure("expected_asks_per_day"),
        expected_ratings_per_day=None
        if content.get("expected_ratings_per_day") is None
        else figure("expected_ratings_per_day"),
        fitted_on_ratings=int(figure("fitted_on_ratings")) if math.isfinite(figure("fitted_on_ratings")) else 0,
        note=content.get("note") if isinstance(content.get("note"), str) else None,
        format=content["format"],
        form=form,
        strata=strata,
        choice=choice if isinstance(choice, dict) else None,
    )


def _read_strata(raw: object) -> Strata | None:
    """The ``strata`` object of an exported file, checked (ValueError naming the field); None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("column"), str) or not raw["column"]:
        raise ValueError("strata.column is missing")
    scores = raw.get("scores")
    if not isinstance(scores, dict) or not scores:
        raise ValueError("strata.scores is not an object of strata and numbers")
    for stratum in scores:
        value = _number(scores, stratum, "strata.scores.")
        if not value > 0:
            raise ValueError(f"strata.scores.{stratum} is {value}, not positive")
    other = _number(raw, "other", "strata.")
    if not other > 0:
        raise ValueError(f"strata.other is {other}, not positive")
    return Strata(raw["column"], tuple((str(k), float(v)) for k, v in scores.items()), other)


def write_policy(policy: Policy, directory: Path) -> tuple[Path, Path]:
    """Write the standalone ``ask_policy.py``, then ``ask_policy.json`` next to it, each atomically; return both
    paths (the JSON first). The code goes first, so the file a reader watches changes last."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, py_path = directory / JSON_NAME, directory / REFERENCE_NAME
    write_whole(py_path, REFERENCE_SOURCE.encode())  # atomic: the rating service reloads while it runs
    write_whole(json_path, (json.dumps(policy.as_json(), indent=2) + "\n").encode())
    return json_path, py_path


@functools.cache
def reference_module() -> types.ModuleType:
    """``REFERENCE_SOURCE`` as a module: the very code the platform runs, so the rating service
    (``serve/policy.py``) computes q(x) with it and the two cannot drift apart."""
    module = types.ModuleType("pulse_ask_policy_reference")
    exec(compile(REFERENCE_SOURCE, REFERENCE_NAME, "exec"), module.__dict__)
    return module


REFERENCE_SOURCE = '''"""PULSE ask policy: the probability of showing the rating widget (standard library only).

    from ask_policy import ask_probability
    q = ask_probability({"user_message_count": 4, "n_segments": 2, "file_edits": 7, ...})
    show_widget = random.random() < q      # and log q with the ask as ask_probability

Reads ask_policy.json next to this file (or pass policy=load(path)):
    z_j = (t_j(x_j) - mean_j) / sd_j     t_j = log(1 + max(x, 0)) when transform is "log1p"; missing x: z_j = 0
    e   = exp(intercept + sum_j coefficient_j * z_j)                       the model's expected error
    a   = max(floor', 1 / (1 + exp(-(intercept' + sum_j coefficient'_j * clip(z'_j, -clip', clip')))))
                                         the chance the user answers (answer_model: the primed values; null: a = 1)
    s   = strata.scores[h] for the first stratum h whose feature "<strata.column>__<h>" is above 0.5, else
          strata.other                   (strata null: s = 1; e.g. send "task_type__fix_bugs": 1)
    q   = min(1, max(floor, multiplier * e * s / sqrt(a)))
"""

import json
import math
import os

_POLICY = None


def load(path=None):
    """The policy as a dict (default: ask_policy.json in this file's folder)."""
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "ask_policy.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _linear(features, intercept, terms, clip=None):
    """intercept + sum_j coefficient_j z_j; a missing or non-numeric value counts as the mean (z = 0)."""
    eta = intercept
    for term in terms:
        try:
            x = float(features.get(term["feature"]))
        except (TypeError, ValueError, OverflowError):
            continue
        if not math.isfinite(x):
            continue
        if term["transform"] == "log1p":
            x = math.log1p(max(x, 0.0))
        z = (x - term["mean"]) / term["sd"]
        if not math.isfinite(z):
            continue
        if clip is not None:
            z = max(-clip, min(clip, z))
        eta += term["coefficient"] * z
    return eta


def _stratum_score(features, strata):
    """The score of the session's stratum: the first whose one-hot feature is above 0.5, else strata["other"]."""
    for stratum, score in strata["scores"].items():
        try:
            x = float(features.get(strata["column"] + "__" + stratum))
        except (TypeError, ValueError, OverflowError):
            continue
        if x > 0.5:
            return score
    return strata["other"]


def ask_probability(features, policy=None):
    """P(show the widget) for one session, from a dict of its feature values (missing ones count as average)."""
    global _POLICY
    if policy is None:
        if _POLICY is None:
            _POLICY = load()
        policy = _POLICY
    score = math.exp(min(_linear(features, policy["intercept"], policy["terms"]), 700.0))
    strata = policy.get("strata")
    if strata is not None:
        score *= _stratum_score(features, strata)
    answer = policy.get("answer_model")
    if answer is not None:
        eta = _linear(features, answer["intercept"], answer["terms"], answer["clip"])
        score /= math.sqrt(max(answer["floor"], 1.0 / (1.0 + math.exp(min(-eta, 700.0)))))
    return min(1.0, max(policy["floor"], policy["multiplier"] * score))
'''
