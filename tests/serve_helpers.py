"""What the serve tests share: a service on a temporary home, opened through its app's lifespan."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import orjson
from starlette.testclient import TestClient

from pulse_pipeline.serve.app import create_app
from pulse_pipeline.serve.roller import roll_files
from pulse_pipeline.serve.service import Service
from pulse_pipeline.settings import ServeSettings

TOKEN, OTHER_TOKEN = "t0ken-aaaaaaaaaaaaaaaa", "t0ken-bbbbbbbbbbbbbbbb"


class FixedRandom:
    """Coins drawn from a list, in order (then the last again): 0.0 always asks, 0.999 asks only when q = 1."""

    def __init__(self, *draws: float):
        self.draws = list(draws)

    def random(self) -> float:
        return self.draws.pop(0) if len(self.draws) > 1 else self.draws[0]


def settings(**changes) -> ServeSettings:
    base = {"rate_limit": 0.0, "roll_records": 100_000, "roll_seconds": 3600.0}
    return ServeSettings(**(base | changes))


@contextlib.contextmanager
def serving(home: Path, rng=None, **changes) -> Iterator[tuple[TestClient, Service]]:
    """A client of a service on ``home`` (started and, at the end, stopped: journal written, everything rolled)."""
    service = Service(home, settings(**changes), "https://pulse.example.org", rng=rng or FixedRandom(0.0))
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        yield client, service


def rolled_rows(home: Path) -> list[dict]:
    """Every row of every roll file of ``home``, in roll order."""
    return [orjson.loads(line) for path in roll_files(home / "drops") for line in path.read_bytes().splitlines()]
