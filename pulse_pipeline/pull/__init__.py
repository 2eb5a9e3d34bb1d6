"""Pulling traces and scores from the services teams keep them in, into drops (``pulse pull``, the pull sensor).

A tool over the stages: it writes drops into ``PULSE_HOME/drops`` in a layout ingest already reads, and knows
nothing of Dagster (``defs/ingest/pull_sensor.py`` is its shell). ``langfuse_client.py`` speaks Langfuse's public
API (pages, retries, refusals), ``langfuse_store.py`` keeps what was pulled and writes the drops, ``langfuse.py``
runs one pull.
"""
