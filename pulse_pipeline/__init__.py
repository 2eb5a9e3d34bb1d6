"""PULSE: prediction-powered user label synthesis and evaluation for coding agents."""

__version__ = "0.1.0"
