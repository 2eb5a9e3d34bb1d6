"""The ask policy where it is served: the newest exported policy, reloaded when its file changes.

The rating service (``pulse serve``) decides for each session whether to show the rating widget with the policy
PULSE last exported (``estimates.ask_policy_file.write_policy``: ``PULSE_HOME/ask_policy/ask_policy.json``, written to a
temporary name and renamed, so a reader sees a whole file). ``PolicySource(directory).current()`` returns it:

- it looks at the file's inode, size and modification time (``os.stat``, a few microseconds) at every call and
  reads the file again only when one of them changed; the signature is taken from the open file itself, so the
  content read and the signature kept always belong together;
- a file that is not a whole, valid policy (half written by a hand copy, not JSON, a field missing or out of range:
  ``ask_policy_file.policy_from_json``) leaves the previous policy in force and logs one line, once for that file;
- no file (yet, or removed): a uniform policy, every session asked with ``DEFAULT_ASK_PROBABILITY``, version
  ``uniform-<p>``; asking at random is always valid.

``LoadedPolicy.probability(features)`` is q(x) as ``ask_models.probabilities`` computes it: it runs the exported
reference function itself (``ask_policy_file.reference_module``, the code of ``ask_policy.py``, standard library only),
so the service, the platform's copy and PULSE's own arrays agree to the last few bits
(``tests/test_policy_source.py`` compares them on random features). ``LoadedPolicy.version`` is the policy's
``policy_version``: a digest of the file's content (``ask_models.policy_digest``), recomputed on load, so it names
what was decided with even when a file was edited by hand (then the line logged says so).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..estimates.ask_models import policy_digest
from ..estimates.ask_policy import DEFAULT_ASK_SHARE
from ..estimates.ask_policy_file import JSON_NAME, policy_from_json, reference_module

DEFAULT_ASK_PROBABILITY = DEFAULT_ASK_SHARE
"""The uniform policy's probability when no policy was exported: half the sessions, the budget ``pulse ask``
starts from when nothing was asked before (``ask_policy.DEFAULT_ASK_SHARE``)."""

log = logging.getLogger(__name__)

Signature = tuple[int, int, int]  # (inode, size, mtime in ns)


@dataclass(frozen=True)
class LoadedPolicy:
    """One policy as the service uses it: its version and q(x)."""

    version: str
    evaluate: Callable[[Mapping[str, float]], float]
    path: Path | None = None  # the file it was read from; None for the uniform policy

    def probability(self, features: Mapping[str, float]) -> float:
        """P(ask) for a session with these feature values (missing or non-numeric ones count as the average)."""
        return self.evaluate(features)


def uniform_policy(probability: float = DEFAULT_ASK_PROBABILITY) -> LoadedPolicy:
    """Every session asked with ``probability``; version ``uniform-<p>``."""
    if not 0.0 < probability <= 1.0:
        raise ValueError(f"a uniform ask probability must be in (0, 1], got {probability}")
    return LoadedPolicy(f"uniform-{probability:g}", lambda features: probability)


def loaded_policy(content: object, path: Path | None = None) -> LoadedPolicy:
    """The policy an exported JSON object holds (ValueError, one line, when it is not a valid one)."""
    policy_from_json(content)  # checks every field the probability reads
    assert isinstance(content, dict)  # policy_from_json refused anything else
    evaluate = reference_module().ask_probability
    frozen = json.loads(json.dumps(content))  # a private copy: the caller's dict may change later
    return LoadedPolicy(policy_digest(content), lambda features: evaluate(features, frozen), path)


class PolicySource:
    """The newest policy exported to ``directory`` (module docstring). Safe to call from several threads."""

    def __init__(self, directory: Path, default_probability: float = DEFAULT_ASK_PROBABILITY) -> None:
        self.path = Path(directory) / JSON_NAME
        self._uniform = uniform_policy(default_probability)
        self._policy = self._uniform
        self._signature: Signature | None = None
        self._lock = threading.Lock()

    def _stat(self) -> Signature | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def current(self) -> LoadedPolicy:
        """The policy in force: the file's, read again when it changed; the previous one when the file is not
        valid; the uniform one when there is no file."""
        signature = self._stat()
        if signature == self._signature:
            return self._policy
        with self._lock:
            signature = self._stat()
            if signature != self._signature:
                self._reload(signature)
            return self._policy

    def _reload(self, signature: Signature | None) -> None:
        if signature is None:
            if self._policy is not self._uniform:
                log.warning(
                    "ask policy %s is gone: asking uniformly (%s) until one is exported",
                    self.path,
                    self._uniform.version,
                )
            self._policy, self._signature = self._uniform, None
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                st = os.fstat(f.fileno())
                signature = (st.st_ino, st.st_size, st.st_mtime_ns)
                content = json.loads(f.read())
            policy = loaded_policy(content, self.path)
        except FileNotFoundError:  # removed between the stat and the open: seen as gone at the next call
            return
        except (OSError, UnicodeDecodeError, ValueError) as error:  # json.JSONDecodeError is a ValueError
            self._signature = signature
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            log.warning(
                "ask policy %s not loaded (%s); still deciding with policy %s", self.path, reason, self._policy.version
            )
            return
        stated = content.get("policy_version")
        if stated is not None and stated != policy.version:
            log.warning(
                "ask policy %s says policy_version %s but its content's digest is %s (edited by hand?): using %s",
                self.path,
                stated,
                policy.version,
                policy.version,
            )
        self._policy, self._signature = policy, signature
