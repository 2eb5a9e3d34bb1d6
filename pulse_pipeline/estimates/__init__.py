"""Experiment estimates: which arms to compare, and every method's effect with its diagnostics (no Dagster here)."""
