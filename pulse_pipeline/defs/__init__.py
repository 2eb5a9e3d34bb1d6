"""The Dagster shell: assets, checks, sensors and schedules that wire the plain modules to tables."""
