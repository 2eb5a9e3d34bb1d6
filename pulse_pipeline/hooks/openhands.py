"""``pulse hook openhands``: OpenHands' 1-5 star conversation feedback, forwarded to PULSE's ``POST /v1/ratings``.

The body, from the OpenHands sources (OpenHands/OpenHands ``frontend/src/api/conversation-service/
conversation-service.api.ts`` ``submitConversationFeedback``, posted to ``/feedback/conversation``; the server's
``enterprise/server/routes/feedback.py`` ``FeedbackRequest``)::

    {"conversation_id": str, "event_id": int (absent when the stars are not on an event), "rating": 1..5,
     "reason": str (absent for 4 and 5 stars: the frontend asks a reason for 1-3 only),
     "metadata": {"source": "likert-scale"}}

Rows of its ``conversation_feedback`` table (``enterprise/storage/feedback.py``) add ``id`` (an integer) and
``created_at``. The stars appear only in OpenHands' SaaS mode (``APP_MODE == "saas"``, the enterprise server).

Two ways to forward, both documented in ``docs/collecting-ratings.md``:

- live, at the reverse proxy: ``examples/hooks/openhands-nginx.conf`` mirrors each ``POST /feedback/conversation``
  to PULSE's ``/v1/ratings``, which takes this body unchanged (``CONTRACT35.md``);
- in batches, with this command: JSON bodies or table rows on stdin (one object, an array, or one per line, such as
  ``psql -c "\\copy (SELECT row_to_json(f) FROM conversation_feedback f) TO STDOUT"``) or as the argument are
  posted one by one, each with an idempotency key (``openhands-<id>`` for a table row, else a digest of the body),
  so running it again over the same rows stores nothing twice.

Each body is checked for what PULSE needs before it is sent (a ``conversation_id`` string, a whole ``rating`` from 1
to 5); one that lacks it is counted as refused, never sent. The summary is one line on stderr.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from .client import ServiceError
from .flow import Hook, Outcome

FEEDBACK_PATH = "/feedback/conversation"
"""Where OpenHands' frontend posts the stars (``examples/hooks/openhands-nginx.conf`` mirrors this path)."""
FORWARDED_KEYS = ("conversation_id", "event_id", "rating", "reason", "metadata")
"""The keys of OpenHands' ``FeedbackRequest``: what is forwarded (a table row's ``id`` and ``created_at`` are not)."""


def bodies(text: str) -> list[Any]:
    """The JSON values of ``text``: one document (an array is its items), else one per non-blank line."""
    stripped = text.strip()
    if not stripped:
        return []
    try:
        value = json.loads(stripped)
    except ValueError:
        values = []
        for line in stripped.splitlines():
            if line.strip():
                try:
                    values.append(json.loads(line))
                except ValueError:
                    values.append(line)  # refused below, counted
        return values
    return value if isinstance(value, list) else [value]


def why_refused(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "not a JSON object"
    if not isinstance(body.get("conversation_id"), str) or not body["conversation_id"]:
        return "no conversation_id"
    rating = body.get("rating")
    if isinstance(rating, bool) or not isinstance(rating, int) or not 1 <= rating <= 5:
        return f"rating {rating!r} is not a whole number from 1 to 5"
    return None


def request_of(body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The body PULSE receives (OpenHands' own keys) and its idempotency key."""
    forwarded = {k: body[k] for k in FORWARDED_KEYS if body.get(k) is not None}
    if isinstance(body.get("id"), int | str) and not isinstance(body.get("id"), bool):
        return forwarded, f"openhands-{body['id']}"
    digest = hashlib.sha256(json.dumps(forwarded, sort_keys=True).encode()).hexdigest()[:32]
    return forwarded, f"openhands-{digest}"


def forward(values: Iterable[Any], hook: Hook) -> Outcome:
    sent = duplicates = 0
    refused: dict[str, int] = {}
    failed: str | None = None
    for body in values:
        why = why_refused(body)
        if why is not None:
            refused[why] = refused.get(why, 0) + 1
            continue
        forwarded, key = request_of(body)
        try:
            answer = hook.service.post("/v1/ratings", forwarded, idempotency_key=key)
        except ServiceError as error:
            failed = str(error)
            break
        sent += 1
        duplicates += answer.get("duplicate") is True
    line = f"forwarded {sent} OpenHands ratings ({duplicates} already stored)"
    if refused:
        line += "; refused " + ", ".join(f"{n} ({why})" for why, n in sorted(refused.items()))
    if failed:
        line += f"; stopped: {failed}; run it again to send the rest (nothing is stored twice)"
    return Outcome(stderr=line)
