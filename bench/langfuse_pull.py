"""`pulse pull langfuse` against the fake Langfuse on loopback: how fast, and how much memory.

    .venv/bin/python bench/langfuse_pull.py                          # 100 000 observations, and 10 000 to compare
    .venv/bin/python bench/langfuse_pull.py --observations 3000 --no-compare

The fake (``tests/fake_langfuse.py``, a subprocess on a port in 18900-18999) serves ``GeneratedObservations``:
rows made from their index when asked (ten a trace, five traces a session, a generation with a chat input,
model and usage every fifth row), so the server holds none of them. Each pull runs in a fresh process on a fresh
PULSE_HOME, through the real client (HTTP, JSON, basic auth) at the largest page (1000 observations): all pages,
the store, the drop written whole. It prints the time, the rate, the drop, and the pull process's peak RSS; run
with a tenth of the observations beside it (unless ``--no-compare``), the peak stays flat when memory is bounded
by the page, not the pull: the store is an SQLite file and the drop is streamed from it.

The machine's load average is printed: the figures are only as good as the cores were free.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(count: int, url: str, home: Path, page_size: int) -> None:
    """One pull in this process; prints its figures as one JSON line."""
    from pulse_pipeline.pull.langfuse import pull_langfuse
    from pulse_pipeline.settings import langfuse_settings
    from tests.fake_langfuse import PUBLIC_KEY, SECRET_KEY

    settings = langfuse_settings(
        {"PULSE_LANGFUSE_PUBLIC_KEY": PUBLIC_KEY, "PULSE_LANGFUSE_SECRET_KEY": SECRET_KEY, "PULSE_LANGFUSE_HOST": url}
    )
    before = _peak_rss_mib()
    started = time.perf_counter()
    report = pull_langfuse(home / ".work", home / "drops", settings, page_size=page_size)
    seconds = time.perf_counter() - started
    drop = report.drop
    assert drop is not None and drop.observations == count, report.line()
    size = sum(p.stat().st_size for p in drop.path.rglob("*") if p.is_file())
    print(
        json.dumps(
            {
                "seconds": seconds,
                "pages": report.endpoints["observations"].pages,
                "requests": report.requests,
                "sessions": drop.sessions,
                "drop_mib": size / 2**20,
                "rss_before_mib": before,
                "peak_rss_mib": _peak_rss_mib(),
            }
        )
    )


def _serve(count: int) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.fake_langfuse", str(count)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        server.kill()
        raise SystemExit(f"the fake Langfuse did not start (said {url!r})")
    return server, url


def measure(count: int, workdir: Path, page_size: int) -> dict:
    server, url = _serve(count)
    try:
        home = workdir / f"home-{count}"
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(count), url, str(home), str(page_size)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if done.returncode != 0:
            raise SystemExit(f"the pull failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        count, url, home, page_size = sys.argv[2:6]
        child(int(count), url, Path(home), int(page_size))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observations", type=int, default=100_000)
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument("--workdir", type=Path, help="where the homes go (default: a temporary folder)")
    parser.add_argument("--no-compare", action="store_true", help="skip the run with a tenth of the observations")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pulse-pull-bench-"))
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    counts = [args.observations] if args.no_compare else [max(1, args.observations // 10), args.observations]
    for count in counts:
        figures = measure(count, workdir, args.page_size)
        rate = count / figures["seconds"]
        print(
            f"{count:,} observations pulled in {figures['seconds']:.1f} s ({rate:,.0f} observations/s), "
            f"{figures['pages']} pages of {args.page_size} ({figures['requests']} requests with the scores'); "
            f"drop: {figures['sessions']:,} sessions whole, {figures['drop_mib']:.1f} MiB; "
            f"peak RSS {figures['peak_rss_mib']:.0f} MiB (after imports {figures['rss_before_mib']:.0f} MiB)"
        )
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
