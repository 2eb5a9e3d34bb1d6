"""The LLM annotator and judge: litellm mock responses, then a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest

from pulse_pipeline import tables
from pulse_pipeline.features import store
from pulse_pipeline.features.annotation import AgentStep, Answer, SessionTranscript
from pulse_pipeline.features.llm import (
    InvalidAnswer,
    JudgeScore,
    LLMAnnotator,
    LLMCache,
    LLMJudge,
    LLMSettings,
    analysis_check,
    complete_json,
    feature_value,
    issues_check,
    judge_check,
)
from pulse_pipeline.features.llm import request as llm_request
from pulse_pipeline.features.llm.litellm_loader import load_litellm
from pulse_pipeline.features.prompts import PROMPT_VERSION
from pulse_pipeline.features.rubric import DEFAULT_RUBRIC, Rubric, load_rubric
from pulse_pipeline.warehouse import Warehouse

from .fake_llm import ANALYSIS_ANSWER, ISSUES_ANSWER, FakeLLM, Reply

RUBRIC = load_rubric()


def settings_for(fake: FakeLLM, **overrides: Any) -> LLMSettings:
    """Settings pointing at the fake server, with backoff tiny so retries take milliseconds."""
    base: dict[str, Any] = {
        "model": "openai/fake-model",
        "api_base": fake.api_base,
        "api_key": "sk-fake",
        "concurrency": 4,
        "max_retries": 2,
        "timeout_s": 5.0,
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.05,
    }
    return LLMSettings(**(base | overrides))


def session(sid: str, *user: str, steps: tuple[AgentStep, ...] = (), agent: tuple[str, ...] = ()) -> SessionTranscript:
    return SessionTranscript(sid, tuple(user), steps, agent)


def all_message_text(fake: FakeLLM) -> str:
    return "\n".join(m["content"] for body in fake.requests for m in body["messages"])


# --- settings and validation ---------------------------------------------------------------------------------


def test_settings_from_env() -> None:
    s = LLMSettings.from_env({"PULSE_LLM_MODEL": "openai/x", "PULSE_LLM_API_KEY": "sk-secret-value"})
    assert (s.concurrency, s.max_retries, s.timeout_s, s.spend_cap_usd, s.transcript_chars) == (8, 4, 60.0, None, 40000)
    assert s.json_mode is None
    assert "sk-secret-value" not in repr(s)
    s = LLMSettings.from_env(
        {
            "PULSE_LLM_MODEL": "openai/x",
            "PULSE_LLM_API_BASE": "http://127.0.0.1:1/v1",
            "PULSE_LLM_CONCURRENCY": "3",
            "PULSE_LLM_MAX_RETRIES": "1",
            "PULSE_LLM_TIMEOUT": "2.5",
            "PULSE_LLM_SPEND_CAP_USD": "1.25",
            "PULSE_LLM_TRANSCRIPT_CHARS": "5000",
            "PULSE_LLM_INPUT_COST_PER_TOKEN": "1e-6",
            "PULSE_LLM_JSON_MODE": "false",
        }
    )
    assert (s.api_base, s.concurrency, s.max_retries, s.timeout_s, s.spend_cap_usd) == (
        "http://127.0.0.1:1/v1",
        3,
        1,
        2.5,
        1.25,
    )
    assert (s.transcript_chars, s.input_cost_per_token, s.output_cost_per_token) == (5000, 1e-6, None)
    assert s.json_mode is False
    with pytest.raises(ValueError, match="PULSE_LLM_MODEL"):
        LLMSettings.from_env({})
    with pytest.raises(ValueError, match="PULSE_LLM_CONCURRENCY"):
        LLMSettings.from_env({"PULSE_LLM_MODEL": "m", "PULSE_LLM_CONCURRENCY": "many"})


def test_validators_follow_the_rubric() -> None:
    parsed = analysis_check(RUBRIC)(ANALYSIS_ANSWER)
    assert parsed.task_description.startswith("The user wants")
    assert parsed.answers["sentiment"].value == "Negative"
    assert parsed.answers["sentiment"].explanation == "The user is frustrated."
    assert parsed.answers["development_cluster"].value == "Fix python issues|Testing code"
    assert json.loads(parsed.notes["sentiment_examples"]) == ["this is still broken"]
    issues = issues_check(RUBRIC)(ISSUES_ANSWER)
    assert issues.answers["insufficient_testing"].value == "YES"
    assert issues.answers["scope_creep"].explanation == "about scope_creep"

    task_type = RUBRIC.get("task_type")
    assert feature_value(task_type, "  fix   bugs ") == "Fix Bugs"  # spelling normalized to the rubric's
    quoted = dataclasses.replace(task_type, options=("Don't know",))
    assert feature_value(quoted, "Don’t know") == "Don't know"  # the prompt typesets the apostrophe
    with pytest.raises(InvalidAnswer, match="not one of"):
        feature_value(task_type, "Refactor Code")
    cluster = RUBRIC.get("development_cluster")
    with pytest.raises(InvalidAnswer, match="at most 2"):
        feature_value(cluster, ["Fix python issues", "Testing code", "Fix Java issues"])
    with pytest.raises(InvalidAnswer):
        feature_value(cluster, [])
    with pytest.raises(InvalidAnswer, match="YES"):
        feature_value(RUBRIC.get("scope_creep"), "maybe")
    with pytest.raises(InvalidAnswer, match="missing field"):
        analysis_check(RUBRIC)({"task_description": "x"})

    assert judge_check({"binary_satisfied": True, "likert_score": 4, "explanation": "ok"}).likert_score == 4
    for bad in ({"binary_satisfied": "yes", "likert_score": 3}, {"binary_satisfied": True, "likert_score": 6}):
        with pytest.raises(InvalidAnswer):
            judge_check(bad)


def test_judge_score_matches_its_table() -> None:
    assert [f.name for f in dataclasses.fields(JudgeScore)] == tables.JUDGE_SCORES.column_names


# --- litellm mock_response -----------------------------------------------------------------------------------


@pytest.fixture
def mocked(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[str], list[dict[str, Any]]]]:
    """litellm.completion answering with the scripted ``mock_response`` strings in turn (the last one repeats)."""
    litellm = load_litellm()
    real = litellm.completion
    script: list[str] = []
    calls: list[dict[str, Any]] = []

    def completion(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(**kwargs, mock_response=script.pop(0) if len(script) > 1 else script[0])

    monkeypatch.setattr(litellm, "completion", completion)
    yield script, calls


MOCK = LLMSettings(model="gpt-4o-mini", max_retries=2, backoff_initial_s=0.01, backoff_max_s=0.02)
JUDGE_JSON = json.dumps({"binary_satisfied": True, "likert_score": 5, "explanation": "thanks!"})


def test_mock_valid_json(mocked) -> None:
    script, calls = mocked
    script.append("```json\n" + JUDGE_JSON + "\n```")
    res = complete_json(MOCK, "prompt", judge_check)
    assert res.status == "ok" and res.value.likert_score == 5 and res.requests == 1
    assert res.prompt_tokens > 0 and res.completion_tokens > 0
    assert res.cost_usd > 0  # litellm knows gpt-4o-mini's price
    sent = calls[0]
    assert sent["max_retries"] == 0 and sent["num_retries"] == 0 and sent["timeout"] == 60.0
    assert sent["response_format"] == {"type": "json_object"}


def test_mock_invalid_then_valid_is_reasked(mocked) -> None:
    script, calls = mocked
    script += ['{"binary_satisfied": true, "likert_score": 9}', JUDGE_JSON]
    res = complete_json(MOCK, "prompt", judge_check)
    assert res.status == "ok" and res.requests == 2
    second = calls[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert '"likert_score": 9' in second[1]["content"]
    assert "likert_score: expected an integer from 1 to 5" in second[2]["content"]


def test_mock_invalid_twice_fails(mocked) -> None:
    script, calls = mocked
    script.append("I think the user was happy.")
    res = complete_json(MOCK, "prompt", judge_check)
    assert res.status == "failed" and res.requests == 2 and len(calls) == 2
    assert "invalid answer after a re-ask" in (res.error or "")


def test_mock_rate_limit_is_retried(mocked) -> None:
    script, calls = mocked
    script += ["litellm.RateLimitError", "litellm.RateLimitError", JUDGE_JSON]
    res = complete_json(MOCK, "prompt", judge_check)
    assert res.status == "ok" and len(calls) == 3

    script[:] = ["litellm.RateLimitError"]
    calls.clear()
    res = complete_json(MOCK, "prompt", judge_check)
    assert res.status == "failed" and len(calls) == 3  # the first attempt and max_retries=2 more
    assert "RateLimitError" in (res.error or "")


def test_prompt_is_redacted_before_the_call(mocked) -> None:
    script, calls = mocked
    script.append(JUDGE_JSON)
    complete_json(MOCK, "token ghp_" + "Z" * 36, judge_check)
    assert calls[0]["messages"][0]["content"] == "token [REDACTED:github_token]"


# --- against the fake server ---------------------------------------------------------------------------------


def test_annotates_with_the_papers_prompts(fake_llm: FakeLLM) -> None:
    lines: list[str] = []
    ann = LLMAnnotator(settings_for(fake_llm), progress=lines.append, progress_every=1)
    out = ann.annotate([session("s1", "the parser test fails", "this is still broken")], RUBRIC)
    (a,) = out
    assert a.status == "ok" and a.error is None and a.annotator == "llm"
    assert a.prompt_version == f"{PROMPT_VERSION}+{RUBRIC.digest}"
    assert a.task_description == ANALYSIS_ANSWER["task_description"]
    assert a.answers["task_type"].value == "Fix Bugs"
    assert a.answers["insufficient_testing"].value == "YES"
    assert set(a.answers) == {f.name for f in RUBRIC.features}
    assert (a.prompt_tokens, a.completion_tokens) == (200, 40)
    assert a.cost_usd == 0.0  # litellm has no price for fake-model and none was configured
    assert len(fake_llm.requests) == 2
    body = fake_llm.requests[0]
    assert body["model"] == "fake-model" and body["response_format"] == {"type": "json_object"}
    analysis = fake_llm.prompts("analysis")[0]
    assert analysis.startswith("Analyze the following user messages from a coding assistant session:\n\nUser: the")
    assert ann.totals.calls == 2 and ann.totals.sessions == 1
    assert lines and "1/1 sessions" in lines[-1]


def test_response_format_only_when_supported(mocked) -> None:
    assert llm_request.supports_json_mode("openai/fake-model") is True
    assert llm_request.supports_json_mode("replicate/meta/llama") is False  # litellm says it has no JSON mode
    script, calls = mocked
    script.append(JUDGE_JSON)
    complete_json(dataclasses.replace(MOCK, model="replicate/meta/llama"), "prompt", judge_check)
    complete_json(dataclasses.replace(MOCK, json_mode=False), "prompt", judge_check)
    assert all("response_format" not in c for c in calls)


def test_malformed_json_is_reasked(fake_llm: FakeLLM) -> None:
    fake_llm.push(Reply(content="{not json"), kind="analysis")
    (a,) = LLMAnnotator(settings_for(fake_llm)).annotate([session("s1", "fix it")], RUBRIC)
    assert a.status == "ok"
    assert len(fake_llm.prompts("analysis")) == 2
    reask = next(b["messages"] for b in fake_llm.requests if len(b["messages"]) == 3)
    assert reask[1]["content"] == "{not json" and "not valid JSON" in reask[2]["content"]


def test_unknown_category_twice_fails_that_prompt_only(fake_llm: FakeLLM) -> None:
    bad = dict(ANALYSIS_ANSWER, task_type="Refactor Code")
    fake_llm.push(Reply(content=bad), Reply(content=bad), kind="analysis")
    (a,) = LLMAnnotator(settings_for(fake_llm)).annotate([session("s1", "fix it")], RUBRIC)
    assert a.status == "failed"
    assert "'Refactor Code' is not one of" in (a.error or "")
    assert a.answers["task_type"].value == "" and a.answers["sentiment"].value == ""
    assert a.answers["task_type"].explanation == a.error
    assert a.answers["scope_creep"].value == "NO"  # the issues prompt's answers are kept


def test_429_then_success_is_retried(fake_llm: FakeLLM) -> None:
    fake_llm.push(Reply(status=429), Reply(status=429), kind="analysis")
    ann = LLMAnnotator(settings_for(fake_llm))
    (a,) = ann.annotate([session("s1", "fix it")], RUBRIC)
    assert a.status == "ok"
    assert len(fake_llm.prompts("analysis")) == 3
    assert ann.totals.calls == 4


def test_400_is_not_retried(fake_llm: FakeLLM) -> None:
    fake_llm.push(Reply(status=400), kind="analysis")
    (a,) = LLMAnnotator(settings_for(fake_llm)).annotate([session("s1", "fix it")], RUBRIC)
    assert a.status == "failed" and "BadRequestError" in (a.error or "")
    assert len(fake_llm.prompts("analysis")) == 1


def test_500_is_retried_then_fails(fake_llm: FakeLLM) -> None:
    fake_llm.push(*[Reply(status=500)] * 3, kind="analysis")
    (a,) = LLMAnnotator(settings_for(fake_llm)).annotate([session("s1", "fix it")], RUBRIC)
    assert a.status == "failed"
    assert len(fake_llm.prompts("analysis")) == 3


def test_timeout_is_retried_then_fails(fake_llm: FakeLLM) -> None:
    # the server holds both replies far longer than the timeout (until the test ends)
    fake_llm.push(*[Reply(delay_s=600.0)] * 2, kind="analysis")
    (a,) = LLMAnnotator(settings_for(fake_llm, timeout_s=1.0, max_retries=1)).annotate(
        [session("s1", "fix it")], RUBRIC
    )
    assert a.status == "failed" and "Timeout" in (a.error or "")
    assert len(fake_llm.prompts("analysis")) == 2
    assert fake_llm.in_flight == 2  # the client gave up on both while the server still held them: no reply came


def test_spend_cap_stops_calls(fake_llm: FakeLLM) -> None:
    # 100 prompt tokens at $0.001 = $0.10 per request; the cap is reached after the third request
    settings = settings_for(fake_llm, concurrency=1, spend_cap_usd=0.25, input_cost_per_token=0.001)
    ann = LLMAnnotator(settings)
    out = ann.annotate([session(f"s{i}", "fix it") for i in range(5)], RUBRIC)
    assert [a.status for a in out] == ["ok", "failed", "failed", "failed", "failed"]
    assert out[1].answers["task_type"].value == "Fix Bugs"  # its analysis answer came before the cap
    assert all(a.error == "spend cap of $0.25 reached" for a in out[2:])
    assert len(fake_llm.requests) == 3
    assert ann.totals.cost_usd == pytest.approx(0.3) and ann.totals.failures == 4
    assert out[0].cost_usd == pytest.approx(0.2)


def test_cached_answers_still_count_after_the_cap(fake_llm: FakeLLM) -> None:
    cache = LLMCache(duckdb.connect())
    LLMAnnotator(settings_for(fake_llm), cache).annotate([session("s1", "fix it")], RUBRIC)
    fake_llm.requests.clear()
    capped = LLMAnnotator(settings_for(fake_llm, spend_cap_usd=0.0), cache)
    out = capped.annotate([session("s1", "fix it"), session("s2", "new work")], RUBRIC)
    assert [a.status for a in out] == ["ok", "failed"]
    assert out[0].notes["cached"] == "analysis,issues"
    assert fake_llm.requests == []


@contextmanager
def replies_held_until_in_flight(fake: FakeLLM, n: int) -> Iterator[None]:
    """The server holds every reply until ``n`` requests are in flight at once, then lets all go (and delays none
    after), so ``max_in_flight`` counts how many requests the client sends concurrently, however slow the machine.

    A client that never has ``n`` in flight gets its replies after 20 s, and the count shows it."""
    fake.delay_s = 600.0  # held until released below

    def release() -> None:
        deadline = time.monotonic() + 20
        while fake.in_flight < n and not fake.stopping.is_set() and time.monotonic() < deadline:
            time.sleep(0.005)
        fake.stopping.set()  # wakes every held reply; a set event delays no later one

    releaser = threading.Thread(target=release, daemon=True)
    releaser.start()
    try:
        yield
    finally:
        fake.stopping.set()
        releaser.join()


def test_concurrency_is_bounded(fake_llm: FakeLLM) -> None:
    sessions = [session(f"s{i}", f"task {i}") for i in range(16)]
    with replies_held_until_in_flight(fake_llm, 8):
        out = LLMAnnotator(settings_for(fake_llm, concurrency=8, timeout_s=60.0)).annotate(sessions, RUBRIC)
    assert [a.session_id for a in out] == [s.session_id for s in sessions]  # in order
    assert all(a.status == "ok" for a in out)
    assert 1 < fake_llm.max_in_flight <= 8


def test_concurrency_limit_of_two(fake_llm: FakeLLM) -> None:
    sessions = [session(f"s{i}", "x") for i in range(6)]
    with replies_held_until_in_flight(fake_llm, 2):
        LLMAnnotator(settings_for(fake_llm, concurrency=2, timeout_s=60.0)).annotate(sessions, RUBRIC)
    assert fake_llm.max_in_flight <= 2


def test_second_run_hits_the_cache(fake_llm: FakeLLM) -> None:
    con = duckdb.connect()
    sessions = [session(f"s{i}", f"task {i}") for i in range(3)]
    first = LLMAnnotator(settings_for(fake_llm), LLMCache(con)).annotate(sessions, RUBRIC)
    assert len(fake_llm.requests) == 6
    fake_llm.requests.clear()
    again = LLMAnnotator(settings_for(fake_llm), LLMCache(con))
    second = again.annotate(sessions, RUBRIC)
    assert fake_llm.requests == []
    assert again.totals.cache_hits == 6 and again.totals.calls == 0 and again.totals.cost_usd == 0
    assert [(a.answers, a.task_description, a.prompt_tokens) for a in first] == [
        (a.answers, a.task_description, a.prompt_tokens) for a in second
    ]
    rows = con.execute("SELECT count(*), count(DISTINCT cache_key) FROM features.llm_cache").fetchone()
    assert rows == (6, 6)


def test_a_changed_model_misses_the_cache(fake_llm: FakeLLM) -> None:
    cache = LLMCache(duckdb.connect())
    LLMAnnotator(settings_for(fake_llm), cache).annotate([session("s1", "x")], RUBRIC)
    LLMAnnotator(settings_for(fake_llm, model="openai/other-model"), cache).annotate([session("s1", "x")], RUBRIC)
    assert len(fake_llm.requests) == 4


def test_long_transcript_is_truncated(fake_llm: FakeLLM) -> None:
    msg = "START-OF-TASK " + "lorem ipsum " * 10_000 + " END-OF-TASK"
    (a,) = LLMAnnotator(settings_for(fake_llm, transcript_chars=4000)).annotate([session("s1", msg)], RUBRIC)
    assert a.status == "truncated" and a.answers["task_type"].value == "Fix Bugs"
    assert "kept 4,000 of" in a.notes["truncated"]
    prompt = fake_llm.prompts("analysis")[0]
    assert "START-OF-TASK" in prompt and "END-OF-TASK" in prompt
    assert "characters cut here to fit the prompt budget" in prompt


def test_a_megabyte_message_is_truncated_not_crashed(fake_llm: FakeLLM) -> None:
    huge = "x" * 1_000_000
    ann = LLMAnnotator(settings_for(fake_llm))
    (a,) = ann.annotate([session("s1", huge)], RUBRIC)
    assert a.status == "truncated" and ann.totals.truncated == 1
    assert max(len(p) for p in fake_llm.prompts()) < 45_000


def test_no_user_message_makes_no_request(fake_llm: FakeLLM) -> None:
    ann = LLMAnnotator(settings_for(fake_llm))
    out = ann.annotate([session("s1"), session("s2", "  ", agent=("hello",))], RUBRIC)
    assert [a.status for a in out] == ["skipped", "skipped"]
    assert out[0].answers["sentiment"] == Answer("", "no user message")
    assert fake_llm.requests == [] and ann.totals.skipped == 2
    (j,) = LLMJudge(settings_for(fake_llm)).judge([session("s1")])
    assert j.status == "skipped" and fake_llm.requests == []


def test_non_english_text_passes_through(fake_llm: FakeLLM) -> None:
    text = "パーサーのテストが失敗します。Привет! ça ne marche pas — 修复这个错误"
    (a,) = LLMAnnotator(settings_for(fake_llm)).annotate([session("s1", text)], RUBRIC)
    assert a.status == "ok"
    assert text in fake_llm.prompts("analysis")[0]


def test_one_bad_session_does_not_fail_the_run(fake_llm: FakeLLM) -> None:
    broken = SessionTranscript("bad", (42,))  # type: ignore[arg-type]  # not text: rendering raises
    out = LLMAnnotator(settings_for(fake_llm)).annotate([session("s1", "x"), broken, session("s3", "y")], RUBRIC)
    assert [a.status for a in out] == ["ok", "failed", "ok"]
    assert out[1].error and out[1].answers["sentiment"].value == ""


def test_extra_rubric_features_are_asked_and_answered(fake_llm: FakeLLM, tmp_path: Path) -> None:
    path = tmp_path / "rubric.toml"
    path.write_text(
        DEFAULT_RUBRIC.read_text(encoding="utf-8")
        + '\n[[feature]]\nname = "gave_up"\ndefinition = "The user abandoned the task."\nvalue_type = "yes_no"\n'
        'prompt = "issues"\nheuristic = "none"\n',
        encoding="utf-8",
    )
    rubric: Rubric = load_rubric(path)
    fake_llm.answers["issues"] = dict(ISSUES_ANSWER, gave_up={"answer": "yes", "explanation": "they left"})
    (a,) = LLMAnnotator(settings_for(fake_llm)).annotate([session("s1", "forget it")], rubric)
    assert a.status == "ok" and a.answers["gave_up"] == Answer("YES", "they left")
    assert "[item 8] gave_up: The user abandoned the task." in fake_llm.prompts("issues")[0]


# --- the judge -----------------------------------------------------------------------------------------------


def test_judge_scores_sessions(fake_llm: FakeLLM) -> None:
    t = session("s1", "fix the parser", "it still fails, I give up", steps=(AgentStep("run", "pytest", 1),))
    fake_llm.push(Reply(content={"binary_satisfied": False, "likert_score": 7}), kind="judge")
    judge = LLMJudge(settings_for(fake_llm), LLMCache(duckdb.connect()))
    (score,) = judge.judge([t])
    assert score.status == "ok" and score.binary_satisfied is False and score.likert_score == 2
    assert score.prompt_version == PROMPT_VERSION and score.model == "openai/fake-model"
    assert score.prompt_tokens == 200  # the invalid answer and the re-ask
    prompt = fake_llm.prompts("judge")[0]
    assert prompt.startswith("Please analyze the following conversation between a user and an AI coding assistant")
    assert "User: fix the parser" in prompt and "Agent action (run, exit code 1): pytest" in prompt


def test_judge_failure_is_a_row_not_an_exception(fake_llm: FakeLLM) -> None:
    fake_llm.push(Reply(status=401), kind="judge")
    (score,) = LLMJudge(settings_for(fake_llm)).judge([session("s1", "hi")])
    assert score.status == "failed" and score.likert_score is None and score.error
    assert len(fake_llm.requests) == 1


# --- redaction, end to end -----------------------------------------------------------------------------------

SECRETS = {
    "github_token": "ghp_" + "k3Y9" * 9,
    "openai_key": "sk-proj-" + "Qw3rTy9uIoP1aSdF6gHjK2lZxC5vBnM8",
    "anthropic_key": "sk-ant-api03-" + "Mn8Bv7Cx6Zl5Kj4Hg3Fd2Sa1Po0Iu9Yt",
    "aws_access_key_id": "AKIAZ7Y6X5W4V3U2T1S0",
    "aws_secret_key": "Zm9vYmFyYmF6cXV4/K7MDENG+bPxRfiCYsEcReT1",
    "secret": "xoxb-5555-very-private",
    "password": "Tr0ub4dor&3",
    "authorization": "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.c2lnbmF0dXJl",
    "url_password": "p4ssw0rd-in-url",
    "email": "grace.hopper@navy.example.org",
    "private_key": "MIIEowIBAAKCAQEAsecretkeymaterial",
}


def leaky_text() -> str:
    s = SECRETS
    return "\n".join(
        [
            f"use my token {s['github_token']} and key {s['openai_key']}",
            f"anthropic: {s['anthropic_key']}",
            f"export AWS_ACCESS_KEY_ID={s['aws_access_key_id']}",
            f"aws_secret_access_key={s['aws_secret_key']}",
            f"export SLACK_TOKEN={s['secret']}",
            f"PASSWORD={s['password']}",
            f'curl -H "Authorization: Bearer {s["authorization"]}" https://api.example.org',
            f"git remote add origin https://grace:{s['url_password']}@git.example.org/repo.git",
            f"mail {s['email']}",
            f"-----BEGIN RSA PRIVATE KEY-----\n{s['private_key']}\n-----END RSA PRIVATE KEY-----",
        ]
    )


def test_no_secret_leaves_the_machine_or_reaches_the_cache(fake_llm: FakeLLM) -> None:
    con = duckdb.connect()
    cache = LLMCache(con)
    leaky = leaky_text()
    t = session(
        "s1",
        "please deploy\n" + leaky,
        steps=(AgentStep("run", leaky), AgentStep("write", leaky, written=leaky)),
        agent=(leaky,),
    )
    assert LLMAnnotator(settings_for(fake_llm), cache).annotate([t], RUBRIC)[0].status == "ok"
    assert LLMJudge(settings_for(fake_llm), cache).judge([t])[0].status == "ok"
    assert len(fake_llm.requests) == 3
    sent = all_message_text(fake_llm) + fake_llm.bodies_text()
    cached = "\n".join(r[0] for r in con.execute("SELECT prompt FROM features.llm_cache").fetchall())
    for kind, secret in SECRETS.items():
        assert secret not in sent, kind
        assert secret not in cached, kind
        assert f"[REDACTED:{kind}]" in sent, kind
        assert f"[REDACTED:{kind}]" in cached, kind
    assert "export SLACK_TOKEN=[REDACTED:secret]" in sent  # the variable name is kept
    assert "https://grace:[REDACTED:url_password]@git.example.org" in sent


def test_answers_paid_for_survive_a_rolled_back_run(fake_llm: FakeLLM, tmp_path: Path) -> None:
    """An asset's writes are one transaction (a killed or failed run leaves the previous tables), but the cache
    commits each answer through its own cursor: after the annotations of a failing run are rolled back, the three
    sessions' six answers are still cached, and annotating again makes no request."""
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    wh = Warehouse(con)  # as an asset's: its tables made before its transaction begins
    sessions = [session(f"s{i}", f"task {i}") for i in range(3)]
    con.begin()
    annotations = LLMAnnotator(settings_for(fake_llm), LLMCache(con)).annotate(sessions, RUBRIC)
    store.append_annotations(wh, annotations)
    con.rollback()
    assert con.execute("SELECT count(*) FROM features.annotations").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM features.llm_cache").fetchone() == (6,)
    fake_llm.requests.clear()
    again = LLMAnnotator(settings_for(fake_llm), LLMCache(con))
    again.annotate(sessions, RUBRIC)
    assert fake_llm.requests == [] and again.totals.cache_hits == 6
