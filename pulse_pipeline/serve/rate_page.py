"""The ``/rate/{session_id}`` page: five buttons that post a rating to ``/v1/ratings`` with the link's signature.

A minimal page, written with the service so the link works before the hooks helper's page (issue 35: keyboard,
screen reader, headless-Chromium test) replaces it with the same function."""

from __future__ import annotations

import html
import json


def rate_page_html(session_id: str, segment_index: int | None, signature: str) -> str:
    body = {"session_id": session_id, "segment_index": segment_index, "signature": signature}
    data = html.escape(json.dumps(body), quote=True)
    buttons = "".join(f'<button type="button" value="{n}">{n} ★</button>' for n in range(1, 6))
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Rate this session</title></head>
<body><h1>How did this go?</h1><div id="stars" data-body="{data}" role="group" aria-label="stars">{buttons}</div>
<p id="answer" role="status"></p><script>
const box = document.getElementById("stars"), answer = document.getElementById("answer");
box.addEventListener("click", async (e) => {{
  if (!e.target.value) return;
  const body = {{...JSON.parse(box.dataset.body), stars: Number(e.target.value), idempotency_key: crypto.randomUUID()}};
  const r = await fetch("/v1/ratings", {{method: "POST", headers: {{"Content-Type": "application/json"}},
                                         body: JSON.stringify(body)}});
  answer.textContent = r.ok ? "Thank you: " + body.stars + " stars." : (await r.json()).error;
}});
</script></body></html>
"""
