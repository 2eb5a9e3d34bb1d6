"""PULSE: prediction-powered user label synthesis and evaluation for coding agents."""

from .memory import configure_polars_allocator
from .process_env import ensure_home_variable

configure_polars_allocator()  # before anything imports polars (memory.py says why)
ensure_home_variable()  # before anything opens DuckDB (process_env.py says why)

__version__ = "0.1.0"
