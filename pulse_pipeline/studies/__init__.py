"""Simulation studies of the estimators (``pulse validate``): each draws experiments from the synthetic generator's
known truth and measures how often an estimator's interval covers it. Apart from ``estimates/``, whose estimators
they study; knows nothing of Dagster."""
