"""Secrets are replaced by typed placeholders; what is not a secret is left alone."""

from __future__ import annotations

import dataclasses
import random
import time

import pytest

from pulse_pipeline.features.redact import RULES, redact

GH = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"  # 36 characters after the prefix
OPENAI = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
ANTHROPIC = "sk-ant-api03-" + "Zx9Cv8Bn7Mq6Wr5Et4Yu3Io2Pa1Sd0Fg_hJkL-"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

# (text with a secret, the secret, what must remain)
CASES = [
    (f"push with {GH} please", GH, "[REDACTED:github_token]"),
    ("gho_" + "Q" * 36, "gho_" + "Q" * 36, "[REDACTED:github_token]"),
    ("ghu_" + "R" * 36, "ghu_" + "R" * 36, "[REDACTED:github_token]"),
    ("ghs_" + "S" * 36, "ghs_" + "S" * 36, "[REDACTED:github_token]"),
    ("ghr_" + "T" * 36, "ghr_" + "T" * 36, "[REDACTED:github_token]"),
    ("github_pat_11ABCDE0123456789_abcdefghijklmnopqrstuvwxyzABCD", "github_pat_11ABCDE", "[REDACTED:github_token]"),
    (f"key {OPENAI}.", OPENAI, "[REDACTED:openai_key]."),
    ("sk-" + "a1" * 24, "sk-" + "a1" * 24, "[REDACTED:openai_key]"),
    (f"anthropic {ANTHROPIC}", ANTHROPIC, "[REDACTED:anthropic_key]"),
    (f"id {AWS_ID} here", AWS_ID, "id [REDACTED:aws_access_key_id] here"),
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_access_key = [REDACTED:aws_secret_key]"),
    (f"[default]\nAWS_SECRET_ACCESS_KEY={AWS_SECRET}\n", AWS_SECRET, "AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]"),
    ("export SLACK_BOT_TOKEN=xoxb-1234-abcd", "xoxb-1234-abcd", "export SLACK_BOT_TOKEN=[REDACTED:secret]"),
    ("STRIPE_KEY=rk_live_abc123\n", "rk_live_abc123", "STRIPE_KEY=[REDACTED:secret]\n"),
    ("APP_SECRET='s3cr3t value'", "s3cr3t value", "APP_SECRET='[REDACTED:secret]'"),
    ('DB_PASSWORD = "hunter2!"', "hunter2!", 'DB_PASSWORD = "[REDACTED:password]"'),
    ("PASSWORD=correcthorse", "correcthorse", "PASSWORD=[REDACTED:password]"),
    (
        "curl -H 'Authorization: Bearer eyJhbGc.payload.sig'",
        "eyJhbGc",
        "Authorization: Bearer [REDACTED:authorization]",
    ),
    (
        "git clone https://alice:p4ssw0rd@github.com/org/repo.git",
        "p4ssw0rd",
        "https://alice:[REDACTED:url_password]@github.com/org/repo.git",
    ),
    ("write to jane.doe+pulse@example.co.uk today", "jane.doe", "write to [REDACTED:email] today"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAu1SU1L\n-----END RSA PRIVATE KEY-----\nnext",
        "MIIEpAIBAAKCAQEAu1SU1L",
        "[REDACTED:private_key]\nnext",
    ),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n", "b3BlbnNzaC1", "[REDACTED:private_key]"),
]


@pytest.mark.parametrize(("text", "secret", "kept"), CASES)
def test_each_kind_is_redacted(text: str, secret: str, kept: str) -> None:
    out = redact(text)
    assert secret not in out
    assert kept in out
    assert redact(out) == out  # idempotent


def test_specific_type_wins_over_the_generic_assignment() -> None:
    assert redact(f"export GITHUB_TOKEN={GH}") == "export GITHUB_TOKEN=[REDACTED:github_token]"


@pytest.mark.parametrize(
    "text",
    [
        "export GITHUB_TOKEN=$(cat ~/.token)",
        "sorted(items, key=len)",
        "cache_key = sha256(prompt)",
        "if [ $A == $B ]; then",
        "git@github.com:org/repo.git",
        "pip install scikit-learn; task-tracking-enabled-by-default-flag",
        "http://localhost:8080/path and user@localhost",
        "日本語: パスワードを変更してください。Ça marche très bien, merci !",
    ],
)
def test_what_is_not_a_secret_is_kept(text: str) -> None:
    assert redact(text) == text


def test_a_megabyte_is_redacted_quickly() -> None:
    texts = ["a" * 1_000_000, "a_" * 500_000, "a.b@" * 250_000, "sk-" * 333_333, ("word " * 200_000) + GH]
    start = time.perf_counter()
    for text in texts:
        redact(text)
    assert time.perf_counter() - start < 5
    assert GH not in redact(texts[-1])


# spellings only an ``re.I`` pattern matches: a dotless ı for i, the Kelvin sign for K, a long ſ for s
LOOKALIKES = [
    "curl -H 'Authorızation: Bearer eyJhbGc.payload.sig'",
    "export SLACK_BOT_TO\u212aEN=xoxb-1234-abcd",
    f"aws_secret_acce\u017fs_key: {AWS_SECRET}",
    "AUTHORIZATION=token abc123",
]


@pytest.mark.parametrize("text", LOOKALIKES)
def test_a_secret_in_letters_only_case_folding_matches_is_redacted(text: str) -> None:
    """The rules skip a text without their literals (``Rule.needs``); the case-insensitive ones must still see
    secrets spelled with letters whose lowercase is not ASCII."""
    assert "[REDACTED:" in redact(text)


def test_skipping_texts_without_a_rules_literals_changes_no_result() -> None:
    """``redact`` equals the ten patterns run over every text, on many texts made of secrets, near misses,
    look-alike letters and ordinary prose in random order."""
    fragments = (
        [text for text, _, _ in CASES]
        + LOOKALIKES
        + [
            "sorted(items, key=len)",
            "git@github.com:org/repo.git",
            "http://localhost:8080/path and user@localhost",
            "sk-learn-something-quite-long-slug-here",
            "ghp_short",
            "-----BEGIN PUBLIC KEY-----",
            "AKIA",
            "日本語: パスワードを変更してください。",
            "please fix the failing test",
            "",
        ]
    )
    separators = [" ", "\n", "", "=", ":", "@", "://", "\t"]
    rnd = random.Random(7)

    def every_rule(text: str) -> str:
        for rule in RULES:
            text = dataclasses.replace(rule, needs=()).apply(text)
        return text

    texts = [
        "".join(rnd.choice(fragments) + rnd.choice(separators) for _ in range(rnd.randint(1, 6))) for _ in range(3_000)
    ]
    changed = 0
    for text in texts:
        expected = every_rule(text)
        assert redact(text) == expected, text
        changed += expected != text
    assert changed > 1_000  # most texts held a secret
