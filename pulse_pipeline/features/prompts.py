"""The paper's prompts (Appendix A.2): two annotation prompts rendered from the rubric, and the judge prompt.

The text is the paper's, verbatim, curly apostrophes included. The paper's listings put a blank line between
consecutive lines, and we keep that too: the point is that, with the default rubric, what we send is exactly what
the paper sent (``tests/test_prompts.py`` compares against the paper's text). Two things in the paper file are not
prompt text and are left out: the listing glyph (⬇) before each prompt and the closing quote (’) after the first two,
apparently the end of a string literal in the authors' code.

Templates are ``str.format`` strings with one field (``{combined_messages}`` or ``{conversation}``); the paper's
``{{``/``}}`` are format escapes for the literal braces of the JSON it asks for, so rubric text put into a template is
escaped the same way.

What comes from the rubric:

- analysis prompt: question 1 (the task description) is fixed; then one numbered question and one JSON field per
  ``prompt = "analysis"`` feature, in rubric order. The feature named ``sentiment`` is asked the paper's way (an
  explanation, and a final question asking for example messages); other ``category`` features as the paper asks
  ``task_type`` (exactly one, inline list), ``categories`` features as it asks ``development_cluster`` (up to
  ``max_choices``, bulleted list), ``yes_no`` features as a YES/NO question;
- issues prompt: one ``[item N] name: definition`` line per ``prompt = "issues"`` feature, with ``- Examples:`` when
  the feature has examples, and (our addition: the paper's prompt ends at "fields:") the JSON field list.

Rubric text is typeset like the paper's: an apostrophe inside a word becomes ’ (the default rubric writes "user's"
for the sentiment definition, the paper "user’s").

Bump ``PROMPT_VERSION`` whenever the wording of a prompt or of a transcript changes: it is part of the cache key and
of every annotation's ``prompt_version``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .annotation import AgentStep, SessionTranscript
from .rubric import Rubric, RubricFeature

PROMPT_VERSION = "a2-v1"

# The feature the paper asks to explain, with supporting example messages (features.annotations has columns for it).
EXPLAINED_FEATURE = "sentiment"

_SEP = "\n\n"  # the paper's listings separate lines by a blank line

_HEAD = "Analyze the following user messages from a coding assistant session:"
_ISSUES_INSTRUCTION = (
    "For each issue item below, answer YES or NO based on whether there is evidence in the user messages that this"
    " issue occurred. Provide a brief explanation for each:"
)
_FORMAT = "Format your response as JSON with these fields:"

JUDGE_TEMPLATE = _SEP.join(
    [
        "Please analyze the following conversation between a user and an AI coding assistant to determine user"
        " satisfaction.",
        "CONVERSATION:",
        "{conversation}",
        "Please provide your analysis in the following JSON format:",
        "{{",
        '"binary_satisfied": true/false,',
        '"likert_score": 1-5,',
        '"explanation": "detailed explanation of your reasoning"',
        "}}",
        "EVALUATION CRITERIA:",
        "- Binary satisfaction: Was the user satisfied with the agent’s help by the end of the conversation?"
        " (true/false)",
        "- Likert scale (1-5): 1=Very Dissatisfied, 2=Dissatisfied, 3=Neutral, 4=Satisfied, 5=Very Satisfied",
        "- Consider factors like:",
        "- Whether the user’s problem was solved",
        "- Quality of the agent’s responses",
        "- User’s tone and feedback throughout the conversation",
        "- Whether the user expressed gratitude or frustration",
        "- If the conversation ended on a positive or negative note",
        "Respond ONLY with the JSON format above, no additional text.",
    ]
)

# Ours, not the paper's (``pulse discover``, discovery/discover.py): the paper's feature-discovery prompt (Appendix
# A.2, "Prompt for identifying features") shows one conversation and asks for free-form features to be aggregated by
# hand; this one shows the highest- and the lowest-rated conversations side by side, as the paper's human-in-the-loop
# process compared them, and asks for features in the rubric's shape (a question with a fixed answer), so they can
# be annotated and measured at once. Fields: {n_features}, {existing}, {high}, {low}.
DISCOVERY_TEMPLATE = _SEP.join(
    [
        "You are an expert product analyst. Below are users' messages from coding-assistant sessions: first the"
        " sessions their users rated highest, then those rated lowest. Using them ONLY as examples of the kinds of"
        " signals available, propose {n_features} general, reusable features that would predict user satisfaction"
        " or dissatisfaction across coding-assistant conversations.",
        "Do NOT evaluate these particular sessions. Each feature must be answerable by reading a session's user"
        " messages, as a YES/NO question (value_type yes_no) or as exactly one of 2 to 8 categories (value_type"
        " category, with its options). Do not propose these existing features: {existing}.",
        "HIGHEST-RATED SESSIONS",
        "---",
        "{high}",
        "---",
        "LOWEST-RATED SESSIONS",
        "---",
        "{low}",
        "---",
        "Return ONLY valid JSON with this schema:",
        "{{",
        '"features": [',
        "{{",
        '"name": "short snake_case identifier",',
        '"question": "for yes_no, a YES/NO question about the session; for category, what is classified",',
        '"value_type": "yes_no or category",',
        '"options": ["category 1", "category 2"] (category only),',
        '"why_predictive": "why it correlates with satisfaction or dissatisfaction"',
        "}}",
        "]",
        "}}",
    ]
)

_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _typeset(text: str) -> str:
    """Rubric text as the paper prints it: ’ for an apostrophe inside a word, braces escaped for str.format."""
    return re.sub(r"(?<=\w)'(?=\w)", "’", text).replace("{", "{{").replace("}", "}}")


def _count(n: int) -> str:
    return _NUMBER_WORDS[n] if n < len(_NUMBER_WORDS) else str(n)


def _inline(options: tuple[str, ...]) -> str:
    return "[" + ", ".join(_typeset(o) for o in options) + "]"


def _analysis_question(n: int, f: RubricFeature) -> list[str]:
    what = _typeset(f.definition)
    if f.value_type == "yes_no":
        return [f"{n}. Answer YES or NO: {what}"]
    if f.name == EXPLAINED_FEATURE and f.value_type == "category":
        return [f"{n}. Classify {what} into one of these categories: {_inline(f.options)} and explain why"]
    if f.value_type == "category" or f.max_choices == 1:
        head = f"{n}. Classify {what} into exactly one of these categories (choose only one that best fits):"
        if f.value_type == "category":
            return [f"{head} {_inline(f.options)}"]
        return [head, *(f"- {_typeset(o)}" for o in f.options)]
    head = (
        f"{n}. Classify {what} into up to {_count(f.max_choices)} of these categories"
        " (choose only the ones that are the best fits):"
    )
    return [head, *(f"- {_typeset(o)}" for o in f.options)]


def _analysis_field(f: RubricFeature, last: bool) -> list[str]:
    comma = "" if last else ","
    if f.value_type == "yes_no":
        return [f'"{f.name}": "YES or NO"{comma}']
    if f.name == EXPLAINED_FEATURE and f.value_type == "category":
        return [
            f'"{f.name}": {{{{',
            f'"classification": "{"/".join(_typeset(o) for o in f.options)}",',
            '"explanation": "brief explanation",',
            '"example_messages": ["message 1", "message 2"]',
            f"}}}}{comma}",
        ]
    if f.value_type == "category":
        return [f'"{f.name}": "one of the categories"{comma}']
    # the paper's development_cluster field reads ["cluster 1", "cluster 2" (if applicable)]: the noun is the last
    # word of the definition ("the development cluster")
    noun = _typeset(f.definition.split()[-1].strip(".")) if f.definition.split() else "category"
    items = [f'"{noun} {i}"' for i in range(1, f.max_choices + 1)]
    if len(items) > 1:
        items[-1] += " (if applicable)"
    return [f'"{f.name}": [{", ".join(items)}]{comma}']


def analysis_template(rubric: Rubric) -> str:
    """The paper's first prompt for this rubric, a format string with a ``{combined_messages}`` field."""
    features = rubric.by_prompt("analysis")
    lines = [_HEAD, "{combined_messages}", "Please provide the following analysis:"]
    lines.append("1. One sentence describing what the user is trying to accomplish")
    n = 2
    for f in features:
        lines.extend(_analysis_question(n, f))
        n += 1
    if any(f.name == EXPLAINED_FEATURE and f.value_type == "category" for f in features):
        lines.append(
            f"{n}. Provide 1-2 brief example messages from the conversation that support your {EXPLAINED_FEATURE}"
            " classification (truncate if too long)"
        )
    lines += [_FORMAT, "{{", '"task_description": "one sentence"' + ("," if features else "")]
    for i, f in enumerate(features):
        lines.extend(_analysis_field(f, last=i == len(features) - 1))
    lines.append("}}")
    return _SEP.join(lines)


def issues_template(rubric: Rubric) -> str:
    """The paper's second prompt for this rubric, a format string with a ``{combined_messages}`` field."""
    features = rubric.by_prompt("issues")
    lines = [_HEAD, "{combined_messages}", _ISSUES_INSTRUCTION]
    for i, f in enumerate(features, 1):
        lines.append(f"[item {i}] {f.name}: {_typeset(f.definition)}")
        if f.examples:
            lines.append(f"- Examples: {'; '.join(_typeset(e) for e in f.examples)}")
        if f.value_type != "yes_no":
            many = f" (up to {_count(f.max_choices)})" if f.value_type == "categories" else ""
            lines.append(f"- Answer with one of these categories{many} instead of YES or NO: {_inline(f.options)}")
    lines.append(_FORMAT)
    # Ours from here on: the paper's prompt ends at "fields:" without listing them.
    lines.append("{{")
    for i, f in enumerate(features):
        answer = '"YES" or "NO"' if f.value_type == "yes_no" else '"one of the categories"'
        comma = "" if i == len(features) - 1 else ","
        lines.append(f'"{f.name}": {{{{"answer": {answer}, "explanation": "..."}}}}{comma}')
    lines.append("}}")
    return _SEP.join(lines)


# --- transcripts ---------------------------------------------------------------------------------------------


def _step_line(step: AgentStep) -> str:
    """One agent action, one line. Code the action wrote is left out: the step's text names the file, and written
    code would crowd the user's words out of the budget."""
    facts = [step.name]
    if step.exit_code is not None:
        facts.append(f"exit code {step.exit_code}")
    if step.error:
        facts.append("error")
    return f"Agent action ({', '.join(facts)}): {step.text or ''}".rstrip()


def _dialogue(t: SessionTranscript) -> str:
    """User and agent messages, alternating from the user's first.

    ``SessionTranscript`` keeps user messages, agent messages and steps in three lists with no order across them,
    so true interleaving is not possible; alternation matches the usual turn-taking of a session.
    """
    lines = []
    for i in range(max(len(t.user_messages), len(t.agent_messages))):
        if i < len(t.user_messages):
            lines.append(f"User: {t.user_messages[i]}")
        if i < len(t.agent_messages):
            lines.append(f"Assistant: {t.agent_messages[i]}")
    return "\n\n".join(lines)


def _cut(text: str, budget: int) -> tuple[str, int]:
    """``text`` within ``budget`` characters (plus a marker line): its head and tail, and how many were cut."""
    if len(text) <= budget:
        return text, 0
    head = budget // 2
    tail = budget - head
    cut = len(text) - budget
    marker = f"\n\n[... {cut:,} characters cut here to fit the prompt budget ...]\n\n"
    return text[:head] + marker + (text[len(text) - tail :] if tail else ""), cut


def render_transcript(
    t: SessionTranscript,
    budget_chars: int,
    *,
    conversation: bool = False,
    redact: Callable[[str], str] | None = None,
) -> tuple[str, str | None]:
    """The transcript text for a prompt, and a note when it had to be cut (``None`` when it is whole).

    Default: the annotation prompts' ``{combined_messages}``, the user's messages (the paper: "user messages from a
    coding assistant session"). ``conversation=True``: the judge's ``{conversation}``, user and agent messages and
    then the agent's steps, in order; over budget the messages keep at least three quarters of it.

    Over budget the text keeps its head and tail around a marker line saying how much was cut. ``redact`` is applied
    to the whole text before cutting, so a secret is never split into a fragment the redactor no longer recognises.
    """
    clean = redact or (lambda s: s)
    budget = max(budget_chars, 0)
    dialogue = clean(_dialogue(t) if conversation else "\n\n".join(f"User: {m}" for m in t.user_messages))
    steps = clean("\n".join(_step_line(s) for s in t.steps)) if conversation and t.steps else ""
    if steps:
        steps = "Agent actions, in order:\n" + steps
    total = len(dialogue) + len(steps)
    if total <= budget:
        return (dialogue + "\n\n" + steps if steps else dialogue), None
    if steps:
        steps_budget = min(len(steps), max(budget - len(dialogue), budget // 4))
        dialogue, cut_d = _cut(dialogue, budget - steps_budget)
        steps, cut_s = _cut(steps, steps_budget)
        text, cut = dialogue + "\n\n" + steps, cut_d + cut_s
    else:
        text, cut = _cut(dialogue, budget)
    note = f"kept {total - cut:,} of {total:,} characters of the transcript (its head and tail; {cut:,} cut)"
    return text, note
