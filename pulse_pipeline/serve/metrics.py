"""``/metrics`` in the Prometheus text exposition format (version 0.0.4), written here in a few lines.

Why not ``prometheus_client``: it is not installed, and a single-process service with five metric families needs
only counters, one histogram and the text format (``# HELP``, ``# TYPE``, ``name{label="value"} number``), which
is stable and simple; a dependency (and its multiprocess machinery) would buy nothing here.

Families: ``pulse_serve_requests_total{route,status}``, ``pulse_serve_asks_total{decision}`` (ask, skip, repeat:
a later ask of a decided session), ``pulse_serve_ratings_total{result}`` (stored, duplicate; ``unknown_session``
counted apart), ``pulse_serve_rejected_total{reason}`` (the ``validation.Rejected`` codes),
``pulse_serve_request_seconds{route}`` (a histogram), and gauges of the journal and the roller.
"""

from __future__ import annotations

import bisect
from collections import Counter

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    inner = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + inner + "}" if inner else ""


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


class Metrics:
    """Counters and a latency histogram, kept in the event loop's thread (no locks needed)."""

    COUNTERS = {
        "requests": (("route", "status"), "HTTP requests answered"),
        "asks": (("decision",), "ask decisions: ask, skip, or repeat (a later ask of a decided session)"),
        "ratings": (("result",), "ratings: stored, duplicate (an idempotency key seen before)"),
        "unknown_sessions": ((), "ratings of a session the service never decided an ask for (stored, flagged)"),
        "rejected": (("reason",), "requests refused with a 4xx, by reason"),
    }

    def __init__(self) -> None:
        self.counts: dict[str, Counter] = {name: Counter() for name in self.COUNTERS}
        self.latency: dict[str, list[int]] = {}  # route -> counts per bucket (+Inf last)
        self.latency_sum: Counter = Counter()

    def count(self, family: str, *labels: str, by: int = 1) -> None:
        self.counts[family][labels] += by

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.counts["requests"][(route, str(status))] += 1
        buckets = self.latency.setdefault(route, [0] * (len(BUCKETS) + 1))
        buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.latency_sum[route] += seconds

    def render(self, gauges: dict[str, tuple[float, str]]) -> str:
        """The text format; ``gauges``: name -> (value, help)."""
        out: list[str] = []
        for family, (names, help_) in self.COUNTERS.items():
            name = f"pulse_serve_{family}_total"
            out += [f"# HELP {name} {help_}", f"# TYPE {name} counter"]
            counts = self.counts[family]
            if not names and not counts:
                out.append(f"{name} 0")
            for labels, n in sorted(counts.items()):
                out.append(f"{name}{_labels(names, labels)} {n}")
        name = "pulse_serve_request_seconds"
        out += [f"# HELP {name} time from request to response", f"# TYPE {name} histogram"]
        for route, buckets in sorted(self.latency.items()):
            running = 0
            for bound, n in zip((*BUCKETS, float("inf")), buckets, strict=True):
                running += n
                le = "+Inf" if bound == float("inf") else _number(bound)
                out.append(f'{name}_bucket{{route="{_escape(route)}",le="{le}"}} {running}')
            out.append(f'{name}_sum{{route="{_escape(route)}"}} {_number(self.latency_sum[route])}')
            out.append(f'{name}_count{{route="{_escape(route)}"}} {running}')
        for gauge, (value, help_) in gauges.items():
            out += [f"# HELP pulse_serve_{gauge} {help_}", f"# TYPE pulse_serve_{gauge} gauge"]
            out.append(f"pulse_serve_{gauge} {_number(value)}")
        return "\n".join(out) + "\n"
