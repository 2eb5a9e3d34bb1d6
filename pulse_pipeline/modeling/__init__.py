"""Satisfaction models, no Dagster here: families, cross-validation and the choice of a family (``comparison``),
cross-fit predictions and their tables with the out-of-fold audit (``crossfit``, ``predictions``), importance."""
