"""A model's answer: the JSON object in its text, validated against the rubric (or the judge's fields).

Each ``*_check`` is a ``SchemaCheck``: it takes the parsed JSON and returns the normalized answer, or raises
``InvalidAnswer`` whose message is shown to the model when it is re-asked (``complete.complete_json``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..annotation import Answer
from ..rubric import Rubric, RubricFeature

SchemaCheck = Callable[[Any], Any]  # parsed JSON -> normalized value; raises InvalidAnswer


class InvalidAnswer(ValueError):
    """The model's answer is not the JSON the prompt asked for; the message is shown to the model on a re-ask."""


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)\s*```", re.S)


def parse_json(text: str | None) -> Any:
    """The JSON object in a model's answer, tolerating ```json fences and prose around the object."""
    text = (text or "").strip()
    if not text:
        raise InvalidAnswer("the answer is empty")
    candidates = [text]
    fenced = _FENCE.search(text)
    if fenced:
        candidates.append(fenced.group(1))
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{") : text.rindex("}") + 1])
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError:
            continue
    raise InvalidAnswer("the answer is not valid JSON")


def _option(f: RubricFeature, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidAnswer(f"{f.name}: expected one of {list(f.options)}, got {value!r}")

    def norm(text: str) -> str:  # the prompt typesets ' as ’ (prompts._typeset), so either spelling is the option
        return " ".join(text.replace("’", "'").split()).casefold()

    wanted = norm(value)
    for o in f.options:
        if norm(o) == wanted:
            return o
    raise InvalidAnswer(f"{f.name}: {value!r} is not one of {list(f.options)}")


def feature_value(f: RubricFeature, value: Any) -> str:
    """A feature's answer normalized to the rubric's spelling (``Answer.value``), or ``InvalidAnswer``."""
    if f.value_type == "yes_no":
        if isinstance(value, bool):
            return "YES" if value else "NO"
        if isinstance(value, str) and value.strip().upper() in ("YES", "NO"):
            return value.strip().upper()
        raise InvalidAnswer(f'{f.name}: expected "YES" or "NO", got {value!r}')
    if f.value_type == "category":
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        return _option(f, value)
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise InvalidAnswer(f"{f.name}: expected a list of 1 to {f.max_choices} of {list(f.options)}, got {value!r}")
    chosen = list(dict.fromkeys(_option(f, v) for v in values))
    if len(chosen) > f.max_choices:
        raise InvalidAnswer(f"{f.name}: at most {f.max_choices} categories, got {len(chosen)}")
    return "|".join(chosen)


def _unwrap(value: Any) -> tuple[Any, str, Any]:
    """(answer, explanation, example messages) from a bare value or an object wrapping one."""
    if isinstance(value, dict):
        answer = value.get("answer", value.get("classification", value.get("value")))
        explanation = value.get("explanation") or ""
        return (
            answer,
            explanation if isinstance(explanation, str) else json.dumps(explanation),
            value.get("example_messages"),
        )
    return value, "", None


@dataclass(frozen=True)
class ParsedAnnotation:
    """A valid answer to an annotation prompt: the task (analysis prompt only), one answer per feature, and notes
    such as ``sentiment_examples``."""

    task_description: str
    answers: dict[str, Answer]
    notes: dict[str, str]


def _features_check(features: list[RubricFeature], with_task: bool) -> SchemaCheck:
    def check(obj: Any) -> ParsedAnnotation:
        if not isinstance(obj, dict):
            raise InvalidAnswer("the answer is not a JSON object")
        task = ""
        if with_task:
            task = obj.get("task_description")
            if not isinstance(task, str):
                raise InvalidAnswer('missing field "task_description" (a string)')
        answers: dict[str, Answer] = {}
        notes: dict[str, str] = {}
        for f in features:
            if f.name not in obj:
                raise InvalidAnswer(f"missing field {f.name!r}")
            raw, explanation, examples = _unwrap(obj[f.name])
            answers[f.name] = Answer(feature_value(f, raw), explanation)
            if isinstance(examples, list) and examples:
                notes[f"{f.name}_examples"] = json.dumps([str(e) for e in examples], ensure_ascii=False)
        return ParsedAnnotation(task.strip(), answers, notes)

    return check


def analysis_check(rubric: Rubric) -> SchemaCheck:
    """Validator of the analysis prompt's answer: task_description, and each analysis feature from its options."""
    return _features_check(rubric.by_prompt("analysis"), with_task=True)


def issues_check(rubric: Rubric) -> SchemaCheck:
    """Validator of the issues prompt's answer: each issues feature as {"answer": YES/NO, "explanation": ...}."""
    return _features_check(rubric.by_prompt("issues"), with_task=False)


@dataclass(frozen=True)
class JudgeAnswer:
    """A valid answer to the judge prompt."""

    binary_satisfied: bool
    likert_score: int
    explanation: str


def judge_check(obj: Any) -> JudgeAnswer:
    """Validator of the judge's answer: binary_satisfied a boolean, likert_score an integer 1..5."""
    if not isinstance(obj, dict):
        raise InvalidAnswer("the answer is not a JSON object")
    sat = obj.get("binary_satisfied")
    if isinstance(sat, str) and sat.strip().lower() in ("true", "false"):
        sat = sat.strip().lower() == "true"
    if not isinstance(sat, bool):
        raise InvalidAnswer(f"binary_satisfied: expected true or false, got {sat!r}")
    score = obj.get("likert_score")
    if isinstance(score, str) and score.strip().isdigit():
        score = int(score.strip())
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
        raise InvalidAnswer(f"likert_score: expected an integer from 1 to 5, got {score!r}")
    explanation = obj.get("explanation") or ""
    return JudgeAnswer(sat, score, explanation if isinstance(explanation, str) else json.dumps(explanation))
