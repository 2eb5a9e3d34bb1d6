"""Reading drops of agent trajectories, ratings and assignments into the canonical tables (no Dagster here)."""
