"""Feature discovery (``pulse discover``): a tool over the feature and modeling stages, not a stage itself.

It reads the features' transcripts and the modeling stage's cross-validation, so it sits above both (it used to
live in ``features/``, which made features import modeling, the stage after it)."""
