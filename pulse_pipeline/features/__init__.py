"""Session features: event-stream signals, and annotations by a heuristic or an LLM (no Dagster here)."""
