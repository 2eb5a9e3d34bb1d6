"""``pulse hook <agent>``: collecting ratings where users work (issue 35).

One module per agent (``claude_code.py``, ``codex.py``, ``openhands.py``), the flow they share (``flow.py``: ask the
rating service once per session, send a rating for the asked segment), the service's client (``client.py``,
standard library only), the log reader (``transcript.py``: the segment that ended and the ask policy's features, by
PULSE's own adapters), what a hook remembers between calls (``state.py``) and the hand-off of a log to the drop
folder (``handoff.py``). ``cli.py`` runs them and keeps the one rule: a hook never breaks the agent that runs it.
Nothing here imports polars, pyarrow, DuckDB or Dagster (``bench/hooks.py`` measures the import).
"""
