"""``pulse hook claude-code`` with Claude Code's payloads (its hooks reference: every event's ``session_id``,
``transcript_path``, ``cwd``, ``hook_event_name``; ``Stop``'s ``stop_hook_active``; ``UserPromptSubmit``'s
``prompt``; ``SessionEnd``'s ``reason``) against a fake rating service on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pulse_pipeline.hooks.flow import idempotency_key
from pulse_pipeline.hooks.transcript import read_progress
from pulse_pipeline.ingest.adapter import add_session
from pulse_pipeline.ingest.batch import Batch
from pulse_pipeline.ingest.claude_code import ClaudeCode
from pulse_pipeline.ingest.drop import list_drops

from .fake_rating_service import POLICY_VERSION, PROBABILITY
from .hook_helpers import EXPECTED_FEATURES, claude_code_lines, run_hook, write_jsonl

SESSION = "5d3c6a1e-claude-session"
SAMPLES = Path("/work/shared/samples/claude_code")


def payload(event: str, transcript: Path, **more) -> str:
    body = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": "/work/project",
            "permission_mode": "default", "hook_event_name": event, **more}  # fmt: skip
    return json.dumps(body)


@pytest.fixture
def transcript(hook_env) -> Path:
    return write_jsonl(hook_env / "projects" / "-work-project" / f"{SESSION}.jsonl", claude_code_lines(SESSION))


def test_stop_asks_with_the_segment_and_features_and_shows_how_to_rate(transcript, fake_service, monkeypatch, capsys):
    """The transcript (``claude_code_lines``) holds 2 turns: the segment that ended is 1, and the features are the
    hand counts of ``EXPECTED_FEATURES``; the service says ask, so the user sees a systemMessage with both ways."""
    code, out, err = run_hook(["claude-code"], payload("Stop", transcript, stop_hook_active=False), monkeypatch, capsys)
    assert (code, err) == (0, "")
    [ask] = fake_service.bodies("/v1/asks")
    assert ask == {"session_id": SESSION, "segment_index": 1, "features": EXPECTED_FEATURES}
    message = json.loads(out)["systemMessage"]
    assert "`rate 1` to `rate 5`" in message
    assert f"{fake_service.url}/rate/{SESSION}?segment=1&sig=test-signature" in message


def test_the_session_is_asked_once_and_shown_once(transcript, fake_service, monkeypatch, capsys):
    run_hook(["claude-code"], payload("Stop", transcript, stop_hook_active=False), monkeypatch, capsys)
    code, out, err = run_hook(["claude-code"], payload("Stop", transcript, stop_hook_active=False), monkeypatch, capsys)
    assert (code, out, err) == (0, "", "")
    assert len(fake_service.bodies("/v1/asks")) == 1


def test_a_session_not_asked_shows_nothing(transcript, fake_service, monkeypatch, capsys):
    fake_service.ask = False
    code, out, err = run_hook(["claude-code"], payload("Stop", transcript), monkeypatch, capsys)
    assert (code, out, err) == (0, "", "")
    assert len(fake_service.bodies("/v1/asks")) == 1


def test_a_stop_that_another_hook_continued_does_nothing(transcript, fake_service, monkeypatch, capsys):
    code, out, err = run_hook(["claude-code"], payload("Stop", transcript, stop_hook_active=True), monkeypatch, capsys)
    assert (code, out, err) == (0, "", "")
    assert fake_service.requests == []


def test_a_typed_rating_is_sent_for_the_asked_segment_and_kept_from_the_model(
    transcript, fake_service, monkeypatch, capsys
):
    """Exit code 2 is Claude Code's "block this prompt, show stderr to the user" for UserPromptSubmit."""
    run_hook(["claude-code"], payload("Stop", transcript), monkeypatch, capsys)
    prompt = payload("UserPromptSubmit", transcript, prompt="  rate 4: the fix was right, the docstring thin\n")
    code, out, err = run_hook(["claude-code"], prompt, monkeypatch, capsys)
    assert (code, out) == (2, "")
    assert err.strip() == "PULSE: 4 stars recorded for this turn; thank you."
    [rating] = fake_service.bodies("/v1/ratings")
    key = idempotency_key("claude-code", SESSION, 1)
    assert rating == {"session_id": SESSION, "segment_index": 1, "stars": 4,
                      "comment": "the fix was right, the docstring thin", "idempotency_key": key}  # fmt: skip
    assert fake_service.requests[-1].headers["idempotency-key"] == key
    code, out, err = run_hook(["claude-code"], payload("UserPromptSubmit", transcript, prompt="rate 4"), monkeypatch,
                              capsys)  # fmt: skip
    assert code == 2 and "already recorded" in err  # the same segment's rating again: stored once


@pytest.mark.parametrize(
    "prompt", ["rate 3 of these options", "rate 45", "Please rate 4 libraries", "rate 0", "fix the build"]
)
def test_prompts_that_are_no_rating_pass_untouched(prompt, transcript, fake_service, monkeypatch, capsys):
    run_hook(["claude-code"], payload("Stop", transcript), monkeypatch, capsys)
    code, out, err = run_hook(["claude-code"], payload("UserPromptSubmit", transcript, prompt=prompt), monkeypatch,
                              capsys)  # fmt: skip
    assert (code, out, err) == (0, "", "")
    assert fake_service.bodies("/v1/ratings") == []


def test_a_rating_in_a_session_never_asked_is_the_users_prompt(transcript, fake_service, monkeypatch, capsys):
    code, out, err = run_hook(["claude-code"], payload("UserPromptSubmit", transcript, prompt="rate 5"), monkeypatch,
                              capsys)  # fmt: skip
    assert (code, out, err) == (0, "", "")
    assert fake_service.requests == []


def test_the_service_down_costs_one_line_and_exit_0(transcript, fake_service, monkeypatch, capsys):
    fake_service.down = True
    code, out, err = run_hook(["claude-code"], payload("Stop", transcript), monkeypatch, capsys)
    assert (code, out) == (0, "")
    assert err.count("\n") == 1 and err.startswith("pulse hook claude-code: POST ") and "HTTP 503" in err
    monkeypatch.setenv("PULSE_HOOK_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    code, out, err = run_hook(["claude-code"], payload("Stop", transcript), monkeypatch, capsys)
    assert (code, out) == (0, "") and "did not answer" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("stdin", "said"),
    [
        ("", "not JSON"),
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"hook_event_name": "Stop"}', "no session_id"),
        ('{"session_id": 7, "hook_event_name": "Stop"}', "no session_id"),
    ],
)
def test_a_bad_payload_costs_one_line_and_exit_0(stdin, said, hook_env, fake_service, monkeypatch, capsys):
    code, out, err = run_hook(["claude-code"], stdin, monkeypatch, capsys)
    assert (code, out) == (0, "")
    assert err.count("\n") == 1 and said in err
    assert fake_service.requests == []


def test_a_bad_argument_or_setting_costs_one_line_and_exit_0(hook_env, monkeypatch, capsys):
    """argparse would exit 2, which a Stop hook reads as "do not stop": never."""
    code, out, err = run_hook(["claude-code", "--frobnicate"], "{}", monkeypatch, capsys)
    assert (code, out) == (0, "") and err.startswith("pulse hook claude-code: unrecognized arguments")
    monkeypatch.setenv("PULSE_HOOK_TIMEOUT", "soon")
    code, out, err = run_hook(["claude-code"], "{}", monkeypatch, capsys)
    assert (code, out) == (0, "") and "PULSE_HOOK_TIMEOUT='soon' is not a number" in err


def test_an_unreadable_transcript_still_asks_without_features(hook_env, fake_service, monkeypatch, capsys):
    missing = hook_env / "gone.jsonl"
    code, out, err = run_hook(["claude-code"], payload("Stop", missing), monkeypatch, capsys)
    assert code == 0 and "systemMessage" in out and "cannot read the log" in err
    assert fake_service.bodies("/v1/asks") == [{"session_id": SESSION}]


def test_session_end_hands_the_transcript_to_the_drop_folder(transcript, hook_env, fake_service, monkeypatch, capsys):
    code, out, err = run_hook(["claude-code", "--drop"], payload("SessionEnd", transcript, reason="prompt_input_exit"),
                              monkeypatch, capsys)  # fmt: skip
    assert (code, out, err) == (0, "", "")
    drops = hook_env / "home" / "drops"
    assert sorted(p.name for p in drops.iterdir()) == [f"claude-code-{SESSION}.jsonl"]  # no temporary left
    assert (drops / f"claude-code-{SESSION}.jsonl").read_bytes() == transcript.read_bytes()
    assert list(list_drops(drops).values()) == [drops / f"claude-code-{SESSION}.jsonl"]  # the sensor reads it


def test_drop_without_pulse_home_is_refused_in_one_line(transcript, monkeypatch, capsys):
    monkeypatch.delenv("PULSE_HOME")
    code, out, err = run_hook(["claude-code", "--drop"], payload("SessionEnd", transcript), monkeypatch, capsys)
    assert (code, out) == (0, "") and "--drop needs PULSE_HOME" in err


def test_a_logged_rating_prompt_is_no_user_message_and_no_segment(hook_env):
    """Claude Code may write a prompt a hook blocked to the transcript: ``rate 4: good`` between the turns is still
    2 user messages and 2 segments (it was 3 and 3 before the rule in ``ingest/claude_code.py``)."""
    path = write_jsonl(hook_env / "t.jsonl", claude_code_lines(SESSION, rating_prompt="rate 4: good"))
    progress = read_progress(path, ClaudeCode())
    assert progress.features == EXPECTED_FEATURES
    assert (progress.session_id, progress.segment_index) == (SESSION, 1)


@pytest.mark.parametrize("name", ["daaain_representative_messages.jsonl", "daaain_edge_cases.jsonl"])
def test_real_transcripts_give_the_segments_ingest_gives(name):
    """The hook's segment and user-message counts of a real Claude Code log equal what ingest stores for it."""
    path = SAMPLES / name
    if not path.is_file():
        pytest.skip(f"{path} is absent (the real samples live in /work/shared/samples)")
    progress = read_progress(path, ClaudeCode())
    batch = Batch("d")
    raws = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    add_session(batch, name, 0, "x", "claude_code", ClaudeCode(), raws, {})
    sessions = batch.columns["raw.sessions"]
    assert progress.features["n_segments"] == sessions["n_segments"][0] > 0
    assert progress.features["user_message_count"] == sessions["n_user_messages"][0]
    assert progress.segment_index == sessions["n_segments"][0] - 1
    assert progress.session_id == sessions["session_id"][0]


def test_the_fake_service_answers_as_the_contract_says(fake_service):
    """The stand-in's answer shape (what the hooks read): ask, probability, policy_version, rate_url."""
    from pulse_pipeline.hooks.client import Service

    answer = Service(fake_service.url).post("/v1/asks", {"session_id": "s"})
    assert answer == {"ask": True, "probability": PROBABILITY, "policy_version": POLICY_VERSION,
                      "rate_url": f"{fake_service.url}/rate/s?segment=None&sig=test-signature"}  # fmt: skip
