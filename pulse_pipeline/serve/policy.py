"""The ask policy as the service uses it: the newest ``ask_policy.json`` of a folder, re-read when it changes.

A minimal version, written with the service so it can run before the policy helper's (issue 35) replaces it with
the same interface: ``PolicySource(directory).current()`` -> a ``LoadedPolicy`` with ``version`` and
``probability(features)``, q(x) as ``estimates.ask_policy.probabilities`` computes it. No file yet: a uniform policy
at ``DEFAULT_ASK_PROBABILITY``, version ``uniform-<p>``. The version of a file is the first 12 hex digits of the
SHA-256 of its bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

DEFAULT_ASK_PROBABILITY = 0.5
JSON_NAME = "ask_policy.json"


@dataclass(frozen=True)
class LoadedPolicy:
    version: str
    policy: Any = None  # an estimates.ask_policy.Policy; None: uniform

    def probability(self, features: Mapping[str, float]) -> float:
        if self.policy is None:
            return DEFAULT_ASK_PROBABILITY
        import numpy as np

        from ..estimates.ask_policy import probabilities

        return float(probabilities(self.policy, {k: np.array([v], dtype=float) for k, v in features.items()})[0])


class PolicySource:
    def __init__(self, directory: Path):
        self.path = directory / JSON_NAME
        self._seen: tuple[int, int] | None = None
        self._loaded = LoadedPolicy(f"uniform-{DEFAULT_ASK_PROBABILITY:g}")

    def current(self) -> LoadedPolicy:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self._loaded = None, LoadedPolicy(f"uniform-{DEFAULT_ASK_PROBABILITY:g}")
            return self._loaded
        if (stat.st_mtime_ns, stat.st_size) != self._seen:
            from ..estimates.ask_policy import Policy, Term

            data = self.path.read_bytes()
            fields = orjson.loads(data)
            terms = tuple(Term(**t) for t in fields.pop("terms"))
            known = set(Policy.__dataclass_fields__) - {"terms"}
            policy = Policy(terms=terms, **{k: v for k, v in fields.items() if k in known})
            self._loaded = LoadedPolicy(hashlib.sha256(data).hexdigest()[:12], policy)
            self._seen = (stat.st_mtime_ns, stat.st_size)
        return self._loaded
