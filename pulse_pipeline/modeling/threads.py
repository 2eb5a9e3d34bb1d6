"""How many native threads a model fit may use: the one limit every fit and predict runs under.

Why: the tree families compute in native threads, not Python ones. scikit-learn's HistGradientBoosting and
LightGBM run OpenMP parallel regions, numpy and scipy run OpenBLAS, and by default each starts one thread per core.
OpenMP threads spin while they wait for each other, so when two processes fit at once (two ``pulse ingest``, a run
beside ``pulse validate``) the waiting threads of one steal the cores from the working threads of the other: on 2
cores, 25 histogram-boosting fits took 3.7 s alone and 145 s with a second process fitting (issue 12).

One number ``n`` (``settings.model_threads()``, PULSE_MODEL_THREADS, default 1) caps the threads that spin:

- ``native_threads(n)`` caps every OpenMP and BLAS thread pool loaded in the process (``threadpoolctl``) for the
  duration of a ``with`` block; ``crossfit`` and ``importance`` run every fit and predict inside it, and
  ``estimates.effects`` the propensity fits of AIPW (a logistic regression, whose BLAS threads spin too);
- LightGBM does not follow that cap: its scikit-learn wrapper turns ``n_jobs=None`` into the number of physical
  cores and sets OpenMP's thread count itself at every fit and predict, so ``families.make_model`` passes
  ``n_jobs=n``.

The random forest is left out on purpose: its ``n_jobs`` are Python threads (joblib) that sleep while they wait,
so they share the cores fairly with another process, and one process alone fits 1.8x faster with both cores than
with one (``bench/concurrent_fits.py`` on 2 cores, its 5 fits: 7.4 s alone with 2 threads, 13.1 s with 1; two
processes at once with 2 threads each: 14.7 s, 1.9x, what two CPU-bound processes sharing 2 cores cost). It uses
every core the process may run on (``settings.usable_cores``; narrow it with the CPU affinity, ``taskset``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import threadpool_limits

from ..settings import model_threads


def threads_or_setting(threads: int | None) -> int:
    """``threads`` if given (it must be >= 1), else the PULSE_MODEL_THREADS setting."""
    n = model_threads() if threads is None else threads
    if n < 1:
        raise ValueError(f"threads must be >= 1; got {n}")
    return n


@contextmanager
def native_threads(threads: int | None = None) -> Iterator[int]:
    """Run the block with every OpenMP and BLAS thread pool of the process capped at ``threads`` (None: the
    PULSE_MODEL_THREADS setting); yields the number applied. The previous limits come back on exit."""
    n = threads_or_setting(threads)
    with threadpool_limits(limits=n):
        yield n
