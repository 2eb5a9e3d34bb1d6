"""Satisfaction models: families, cross-validation, cross-fit predictions, importance (no Dagster here)."""
