"""The prompts are the paper's (Appendix A.2), verbatim, and grow with the rubric."""

# ruff: noqa: E501  (the paper's prompt text below is copied verbatim, long lines included)

from __future__ import annotations

from pathlib import Path

import pytest

from pulse_pipeline.features.annotation import AgentStep, SessionTranscript
from pulse_pipeline.features.prompts import (
    JUDGE_TEMPLATE,
    analysis_template,
    issues_template,
    render_transcript,
)
from pulse_pipeline.features.rubric import DEFAULT_RUBRIC, load_rubric

PAPER = Path(__file__).resolve().parents[2] / "shared" / "paper" / "pulse-paper.txt"

# Copied from the paper (pulse-paper.txt, Appendix A.2), between the listing glyph and the closing quote.
PAPER_ANALYSIS = """Analyze the following user messages from a coding assistant session:

{combined_messages}

Please provide the following analysis:

1. One sentence describing what the user is trying to accomplish

2. Classify the overall sentiment of the user’s messages into one of these categories: [Positive, Negative, Neutral] and explain why

3. Classify the type of task into exactly one of these categories (choose only one that best fits): [Fix Bugs, Implement Features, Create Programs from Scratch, Fix Failing Continuous Integration, Fix Merge Conflicts, Write Documentation, Perform Deployments, Perform Data Analysis]

4. Classify the development cluster into up to two of these categories (choose only the ones that are the best fits):

- Write code from scratch

- Fix python issues

- Fix underspecified issues

- Fix Java issues

- Testing code

- Web browsing and research

- Administrative tasks

- Fix continuous integration issues

- None of the above

5. Provide 1-2 brief example messages from the conversation that support your sentiment classification (truncate if too long)

Format your response as JSON with these fields:

{{

"task_description": "one sentence",

"sentiment": {{

"classification": "Positive/Negative/Neutral",

"explanation": "brief explanation",

"example_messages": ["message 1", "message 2"]

}},

"task_type": "one of the categories",

"development_cluster": ["cluster 1", "cluster 2" (if applicable)]

}}"""

PAPER_ISSUES = """Analyze the following user messages from a coding assistant session:

{combined_messages}

For each issue item below, answer YES or NO based on whether there is evidence in the user messages that this issue occurred. Provide a brief explanation for each:

[item 1] misunderstood_intention: Agent misunderstood the user’s goal/intent.

- Examples: User asked for a summary and agent produced a rewrite; user wanted high-level bullets but agent delivered full code.

[item 2] did_not_follow_instruction: Agent ignored or failed to comply with explicit instructions/system constraints.

- Examples: User: "Do NOT push to main." Agent pushes to main; System says not to create pull request unless user asks for it and user didn’t ask for it, agent creates pull request; user asked for bullet points only, agent gives long prose.

[item 3] insufficient_analysis: Didn’t explore existing materials sufficiently (prior code/docs/examples) before acting.

- Examples: User points to an existing function/file that is relevant OR already solves it; agent reinvents it.

[item 4] insufficient_testing: Skipped reasonable verification/tests for non-trivial or risky changes (note: trivial edits may be acceptable).

- Examples: No run/validation for a new parser; no check that a migration applies cleanly; no sanity check of output.

[item 5] insufficient_debugging: Did not investigate or reduce failing behavior when needed to make progress.

- Examples: Ignores stack trace; no isolation of failure; proceeds while errors persist.

[item 6] incomplete_implementation: Delivered unfinished or non-functioning work.

- Examples: TODO/FIXME left; stub methods; code that cannot run.

[item 7] scope_creep: Implemented unrequested features without approval.

- Examples: Adds a dashboard or endpoint not asked for.

Format your response as JSON with these fields:"""

PAPER_JUDGE = """Please analyze the following conversation between a user and an AI coding assistant to determine user satisfaction.

CONVERSATION:

{conversation}

Please provide your analysis in the following JSON format:

{{

"binary_satisfied": true/false,

"likert_score": 1-5,

"explanation": "detailed explanation of your reasoning"

}}

EVALUATION CRITERIA:

- Binary satisfaction: Was the user satisfied with the agent’s help by the end of the conversation? (true/false)

- Likert scale (1-5): 1=Very Dissatisfied, 2=Dissatisfied, 3=Neutral, 4=Satisfied, 5=Very Satisfied

- Consider factors like:

- Whether the user’s problem was solved

- Quality of the agent’s responses

- User’s tone and feedback throughout the conversation

- Whether the user expressed gratitude or frustration

- If the conversation ended on a positive or negative note

Respond ONLY with the JSON format above, no additional text."""


@pytest.fixture
def extended_rubric(tmp_path: Path):
    """The default rubric plus one issues feature and one analysis category feature."""
    text = DEFAULT_RUBRIC.read_text(encoding="utf-8") + (
        '\n[[feature]]\nname = "gave_up"\ndefinition = "The user abandoned the task."\n'
        'examples = ["User: \\"forget it, I will do it myself\\""]\nvalue_type = "yes_no"\nprompt = "issues"\n'
        'heuristic = "none"\n'
        '\n[[feature]]\nname = "language"\ndefinition = "the main programming language"\nvalue_type = "category"\n'
        'options = ["Python", "Java", "Other"]\nprompt = "analysis"\nheuristic = "none"\n'
    )
    path = tmp_path / "rubric.toml"
    path.write_text(text, encoding="utf-8")
    return load_rubric(path)


def test_default_rubric_renders_the_papers_prompts_exactly() -> None:
    rubric = load_rubric(DEFAULT_RUBRIC)
    assert analysis_template(rubric) == PAPER_ANALYSIS
    issues = issues_template(rubric)
    assert issues.startswith(PAPER_ISSUES)
    assert JUDGE_TEMPLATE == PAPER_JUDGE
    # rendered, the {{ }} escapes become the braces of the JSON the paper asks for
    msgs = "User: fix the {weird} parser"
    assert analysis_template(rubric).format(combined_messages=msgs) == PAPER_ANALYSIS.format(combined_messages=msgs)
    assert '"sentiment": {\n' in PAPER_ANALYSIS.format(combined_messages=msgs)


def test_issues_tail_lists_every_issue_field() -> None:
    rubric = load_rubric(DEFAULT_RUBRIC)
    tail = issues_template(rubric)[len(PAPER_ISSUES) :].format()
    for f in rubric.by_prompt("issues"):
        assert f'"{f.name}": {{"answer": "YES" or "NO", "explanation": "..."}}' in tail


@pytest.mark.skipif(not PAPER.exists(), reason="the paper is not beside the repo")
def test_constants_are_copied_from_the_paper() -> None:
    paper = PAPER.read_text(encoding="utf-8")
    for text in (PAPER_ANALYSIS, PAPER_ISSUES, PAPER_JUDGE):
        assert "⬇\n\n" + text in paper


def test_extra_features_extend_the_prompts(extended_rubric) -> None:
    issues = issues_template(extended_rubric)
    assert "[item 8] gave_up: The user abandoned the task." in issues
    assert '- Examples: User: "forget it, I will do it myself"' in issues
    assert '"gave_up": {{"answer": "YES" or "NO", "explanation": "..."}}' in issues
    analysis = analysis_template(extended_rubric)
    assert "5. Classify the main programming language into exactly one of these categories" in analysis
    assert "[Python, Java, Other]" in analysis
    assert "6. Provide 1-2 brief example messages" in analysis
    assert '"language": "one of the categories"' in analysis
    rendered = analysis.format(combined_messages="x")
    assert '"development_cluster": ["cluster 1", "cluster 2" (if applicable)],\n\n"language"' in rendered
    # everything the paper had is still there, in its order
    default = load_rubric(DEFAULT_RUBRIC)
    assert issues.startswith(issues_template(default).split("Format your response")[0])


def test_user_messages_only_for_annotation_prompts() -> None:
    t = SessionTranscript(
        "s1",
        ("fix the parser", "thanks, works"),
        (AgentStep("run", "pytest -q", exit_code=1, error=False),),
        ("I fixed it.",),
    )
    text, note = render_transcript(t, 10_000)
    assert note is None
    assert text == "User: fix the parser\n\nUser: thanks, works"
    conv, note = render_transcript(t, 10_000, conversation=True)
    assert note is None
    assert conv.index("User: fix the parser") < conv.index("Assistant: I fixed it.") < conv.index("User: thanks")
    assert "Agent action (run, exit code 1): pytest -q" in conv


def test_over_budget_keeps_head_and_tail() -> None:
    msg = "HEAD" + "x" * 50_000 + "TAIL"
    t = SessionTranscript("s1", (msg,))
    text, note = render_transcript(t, 2_000)
    assert text.startswith("User: HEAD") and text.endswith("TAIL")
    assert "characters cut here to fit the prompt budget" in text
    assert len(text) < 2_200
    assert note is not None and "kept 2,000 of 50,014 characters" in note


def test_conversation_over_budget_keeps_most_of_it_for_messages() -> None:
    steps = tuple(AgentStep("run", f"cmd {i} " + "y" * 100) for i in range(500))
    t = SessionTranscript("s1", ("first ask " + "u" * 30_000, "last word"), steps, ("done",))
    text, note = render_transcript(t, 8_000, conversation=True)
    assert note is not None
    assert "User: first ask" in text and "last word" in text and "Agent actions, in order:" in text
    assert len(text) < 8_400


def test_redaction_applies_before_the_cut() -> None:
    secret = "ghp_" + "A" * 36
    t = SessionTranscript("s1", ("x" * 980 + secret + "y" * 2000,))  # the secret straddles the cut
    text, _ = render_transcript(t, 2_000, redact=lambda s: s.replace(secret, "[REDACTED:github_token]"))
    assert "ghp_" not in text
