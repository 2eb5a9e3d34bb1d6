"""The report: one self-contained HTML page of the warehouse's results (``data`` reads, ``figures`` draws,
``page`` assembles, ``build`` writes). Knows nothing of Dagster."""
