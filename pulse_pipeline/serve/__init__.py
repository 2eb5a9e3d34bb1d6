"""``pulse serve``: a small, durable rating service (issue 35).

Agents ask it whether to ask for a rating (``POST /v1/asks``: the exported ask policy decides once per session,
and the service flips the coin and logs the probability) and send it ratings (``POST /v1/ratings``). Every
acknowledged record is in the journal on disk before its 2xx, and the journal rolls into drop files the drop
sensor ingests as ratings and asks. One module per concern:

- ``app.py``: the HTTP routes (starlette), JSON refusals, latency;
- ``validation.py``: what a body may hold;
- ``service.py``: the state and the two writes (decide, rate), start and stop;
- ``memory.py``: per-session decisions and stored rating ids, replayed from the journal;
- ``journal.py``: append, group-commit fsync, replay;
- ``roller.py``: journal -> drop files, atomically, exactly once (the watermark);
- ``auth.py``: bearer tokens, the rate limit, the ``/rate`` link's signature;
- ``metrics.py``: the Prometheus text format;
- ``server.py``: uvicorn on a socket, for ``pulse serve``;
- ``policy.py``: the exported ask policy, loaded and reloaded; ``rate_page.py``: the ``/rate`` page.
"""
