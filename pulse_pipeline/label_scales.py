"""The scales a user's rating can be on, and how each reaches the [0, 1] label the estimates work on.

- ``stars_1_5``: 1-5 stars (OpenHands' hosted ``conversation_feedback``, ratings files, canonical sessions), one
  per rated work segment; ``label = (stars - 1) / 4`` (``stars.py``).
- ``thumbs``: OpenHands' thumbs up or down (``feedback: "positive" | "negative"`` on a feedback-dataset record,
  ``polarity`` in newer ones), one per conversation; a trace tool's BOOLEAN rating score (``ingest/scores.py``),
  one per scored trace (segment); ``label = 1`` for up, ``0`` for down.

Both labels lie in [0, 1], but they are not the same measurement: a thumbs-up is not five stars, and the share of
thumbs up is not a mean star rating. So a label always carries its scale (``staging.segment_ratings.scale``,
``staging.session_labels.scale``), and no estimate averages or compares labels of different scales
(``estimates/sessions.py``, ``one_scale_per_experiment``).
"""

from __future__ import annotations

STARS = "stars_1_5"
THUMBS = "thumbs"
SCALES = (STARS, THUMBS)

THUMB_LABELS = {"positive": 1.0, "negative": 0.0}
"""A thumb's text (after trimming and lower-casing) -> its label."""


def thumb_label_sql(expression: str) -> str:
    """The label of a thumb given as text in SQL (``THUMB_LABELS``); NULL for any other text."""
    cases = " ".join(f"WHEN '{text}' THEN {label}" for text, label in THUMB_LABELS.items())
    return f"(CASE lower(trim({expression})) {cases} END)"
