"""litellm, imported once, on first use, with its network look-ups turned off: the one place PULSE imports it.

A module of its own because both the request (``request.py``) and the price of a response (``budget.py``) need it,
and ``request.py`` already depends on ``budget.py`` (the spend cap it checks before each attempt): kept in
``request.py``, the two modules imported each other.
"""

from __future__ import annotations

import os
from typing import Any


def load_litellm() -> Any:
    """litellm, imported on first use with its network look-ups turned off.

    Without ``LITELLM_LOCAL_MODEL_COST_MAP`` and ``LITELLM_OFFLINE_MODE`` its import fetches a price map over the
    network and token counting can hang offline; they are set only when the user has not set them.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm

    litellm.suppress_debug_info = True
    return litellm
