"""Secrets out of prompts: every prompt is redacted before it leaves the machine and before it is cached.

Coding sessions are full of credentials pasted by users or printed by the agent (``cat .env``, ``git remote -v``,
``env``). An annotation needs none of them, so they are replaced by typed placeholders, which keep enough of the
shape (``GITHUB_TOKEN=[REDACTED:github_token]``) for an annotator to understand what happened.

What is redacted, and its placeholder (this list is the one place that says so; ``RULES`` below follows it):

- PEM private key blocks (``-----BEGIN ... PRIVATE KEY-----`` to its END line, or to the end of the base64 when the
  END line is missing)                                                               -> ``[REDACTED:private_key]``
- passwords in URLs (``https://user:pass@host``; the scheme, user and host are kept) -> ``[REDACTED:url_password]``
- ``Authorization: Bearer|Basic|token <credential>`` headers (the header is kept)   -> ``[REDACTED:authorization]``
- Anthropic keys (``sk-ant-...``)                                                    -> ``[REDACTED:anthropic_key]``
- OpenAI keys (``sk-...``, ``sk-proj-...``, ``sk-svcacct-...``, ``sk-admin-...``)    -> ``[REDACTED:openai_key]``
- GitHub tokens (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``)  -> ``[REDACTED:github_token]``
- AWS access key ids (``AKIA...``, ``ASIA...``, 20 characters)                       -> ``[REDACTED:aws_access_key_id]``
- AWS secret keys in ``aws_secret_access_key = ...`` (any case, ``=`` or ``:``)      -> ``[REDACTED:aws_secret_key]``
- generic assignments ``NAME=value`` whose name ends in ``_TOKEN``, ``_KEY``, ``_SECRET``, ``_PASSWORD`` or is
  ``PASSWORD`` (any case), in shell (``export NAME=value``) and env-file form; the name is kept, the value goes
  (``[REDACTED:password]`` for password names, else ``[REDACTED:secret]``). Unquoted values need ``=`` without
  spaces (``cache_key = sha256(x)`` in code is left alone); quoted values may have spaces around ``=``. Values that
  are shell references (``$X``, ``$(cmd)``) are kept: they are not secrets and say where the secret came from.
- email addresses, except ``git@host`` (an SSH remote, not a person)                 -> ``[REDACTED:email]``

Rules apply in that order, so a GitHub token assigned to ``GITHUB_TOKEN=`` keeps its specific type. ``redact`` is
idempotent (placeholders match no rule). Every pattern is anchored on a literal prefix or a boundary and its
repetitions are bounded, so a 1 MB message is redacted in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


def placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class Rule:
    """A kind of secret: its pattern, how a match is replaced (None: the whole match becomes the placeholder), and
    ``needs``: strings of which every match holds one, so a text with none of them is returned as it is.

    Why ``needs``: most messages hold no secret, and the ten patterns were ~40 % of the time the text model took for
    the unrated sessions (0.54 s per 65 000 user messages at the paper's scale, 0.10 s with ``needs``); ``in`` finds
    a literal in C.
    Only characters without case serve an ``re.I`` pattern (``=``, ``:``): it also matches letters whose lowercase
    is not ASCII (the Kelvin sign for ``k``, a dotless ``ı`` for ``i``), which a lowercase literal would miss."""

    kind: str
    pattern: re.Pattern[str]
    replace: Callable[[re.Match[str]], str] | None = None
    needs: tuple[str, ...] = ()

    def apply(self, text: str) -> str:
        if self.needs and not self._may_match(text):
            return text
        if self.replace is None:
            return self.pattern.sub(placeholder(self.kind), text)
        return self.pattern.sub(self.replace, text)

    def _may_match(self, text: str) -> bool:
        for literal in self.needs:  # noqa: SIM110 (any() makes a generator per call: twice the time of redact)
            if literal in text:
                return True
        return False


def _keep_prefix(kind: str) -> Callable[[re.Match[str]], str]:
    """Keep group ``keep`` (a header or variable name) and replace the rest of the match."""
    return lambda m: m.group("keep") + placeholder(kind)


_NOT_PLACEHOLDER = r"(?!\[REDACTED:)"
_TOKEN_CHARS = r"[A-Za-z0-9_\-]"


def _secret_assignment(m: re.Match[str]) -> str:
    """``NAME=value`` -> ``NAME=[REDACTED:secret]``, keeping the quotes of a quoted value."""
    kind = "password" if m.group("name").lower().endswith("password") else "secret"
    return f"{m.group('keep')}{placeholder(kind)}{m.group('quote') or ''}"


RULES: tuple[Rule, ...] = (
    Rule(
        "private_key",
        re.compile(
            r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----"
            r"(?:[\s\S]*?-----END (?P=label)-----|[A-Za-z0-9+/=:,\-\s]*)"
        ),
        needs=("-----BEGIN ",),
    ),
    Rule(
        "url_password",
        re.compile(r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/@\[\]]{1,256}:)[^\s@/\[\]]{1,256}(?=@)"),
        _keep_prefix("url_password"),
        needs=("://",),
    ),
    Rule(
        "authorization",
        re.compile(r"(?P<keep>\bAuthorization[\"']?\s*[:=]\s*[\"']?(?:Bearer|Basic|token)\s+)[^\s\"'\\,]+", re.I),
        _keep_prefix("authorization"),
        needs=(":", "="),
    ),
    Rule("anthropic_key", re.compile(rf"(?<![A-Za-z0-9_\-])sk-ant-{_TOKEN_CHARS}{{20,400}}"), needs=("sk-ant-",)),
    Rule(
        "openai_key",
        # a real key has digits; requiring one keeps slugs like "sk-learn-something-quite-long" out
        re.compile(
            rf"(?<![A-Za-z0-9_\-])sk-(?:proj-|svcacct-|admin-)?(?={_TOKEN_CHARS}{{0,400}}\d){_TOKEN_CHARS}{{20,400}}"
        ),
        needs=("sk-",),
    ),
    Rule(
        "github_token",
        re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})"),
        needs=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Rule(
        "aws_access_key_id",
        re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        needs=("AKIA", "ASIA"),
    ),
    Rule(
        "aws_secret_key",
        re.compile(
            rf"(?P<keep>\baws_secret_access_key[\"']?\s*[=:]\s*[\"']?){_NOT_PLACEHOLDER}[A-Za-z0-9/+=]{{30,100}}", re.I
        ),
        _keep_prefix("aws_secret_key"),
        needs=("=", ":"),
    ),
    Rule(
        "secret",
        re.compile(
            r"(?P<keep>\b(?:export\s+)?(?P<name>[A-Za-z0-9_]{0,100}_(?:TOKEN|KEY|SECRET|PASSWORD)|PASSWORD)"
            r"(?:[ \t]*=[ \t]*(?P<quote>[\"'])|=(?!=)))"
            rf"{_NOT_PLACEHOLDER}(?!\$)"
            r"(?(quote)[^\"'\n]{1,1000}(?P=quote)|[^\s\"'`;&|)]{1,1000})",
            re.I,
        ),
        _secret_assignment,
        needs=("=",),
    ),
    Rule(
        "email",
        re.compile(
            r"(?<![A-Za-z0-9._%+\-])(?!git@)[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}\.){1,8}[A-Za-z]{2,24}\b"
        ),
        needs=("@",),
    ),
)


def redact(text: str) -> str:
    """``text`` with every secret listed in the module docstring replaced by a typed placeholder."""
    for rule in RULES:
        text = rule.apply(text)
    return text
