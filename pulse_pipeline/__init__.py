"""PULSE: prediction-powered user label synthesis and evaluation for coding agents."""

from .memory import configure_polars_allocator

configure_polars_allocator()  # before anything imports polars (memory.py says why)

__version__ = "0.1.0"
