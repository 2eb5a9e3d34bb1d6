"""The ``/rate/{session_id}`` page: five stars for agents without a rating UI of their own (Claude Code, Codex).

What it must be (issue 35): usable with the keyboard and a screen reader, no external assets, every value escaped.

- **The stars are a native radio group**: a ``fieldset`` whose ``legend`` asks the question, five ``input
  type=radio`` each with its ``label`` ("1 star: very poor" ... "5 stars: excellent"), so Tab reaches the group,
  the arrow keys move and choose, Space chooses, and a screen reader says "radio button, 4 stars: good, 4 of 5"
  with no ARIA of our own to get wrong. The stars drawn are the labels' ``★`` (hidden from screen readers, which
  read the words); the focused star has a visible outline (``:focus-visible``); an unchosen star is drawn at a
  contrast of 4.8:1 on white (``#78716c``), above the 3:1 WCAG asks of a control.
- **An optional comment** (``textarea`` with its label), then a **Send** button.
- **The result is announced**: a ``role="status"`` (``aria-live="polite"``) region says "Thank you: 4 stars
  recorded.", the service's ``error`` line, or that PULSE could not be reached; the button is disabled while the
  rating is sent and after it is recorded.
- **What it posts** (``CONTRACT35.md``): ``fetch("/v1/ratings")`` with JSON ``{session_id, segment_index, stars,
  comment, signature, idempotency_key}``; ``segment_index`` is left out when the link names no segment and
  ``comment`` when it is empty; ``idempotency_key`` is drawn once per page load (``crypto.randomUUID``), so a
  double click or a retry after a lost answer is stored once, while a page opened again is a new rating.
- **Escaping**: the session id, segment and signature reach the page only as ``html.escape``d attribute values
  (and the session id as escaped text); the script reads them from ``dataset``, never from markup it writes, so
  an id such as ``</script><img onerror=...>`` is shown and posted as the text it is.

``rate_page_html`` is pure (no I/O); the service mounts it at ``GET /rate/{session_id}?segment=<i>&sig=<s>``.
"""

from __future__ import annotations

from html import escape

LABELS = ("very poor", "poor", "fair", "good", "excellent")

_STYLE = """
:root { color-scheme: light dark; --accent: #b45309; --muted: #57534e; }
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; display: flex; justify-content: center; }
main { max-width: 34rem; padding: 2rem 1.25rem; }
h1 { font-size: 1.4rem; margin: 0 0 .25rem; }
.session { color: var(--muted); font-size: .85rem; overflow-wrap: anywhere; margin: 0 0 1.5rem; }
fieldset { border: 0; padding: 0; margin: 0 0 1.25rem; }
legend { font-weight: 600; margin-bottom: .5rem; }
.stars { display: flex; gap: .25rem; }
.stars input { position: absolute; opacity: 0; width: 1px; height: 1px; }
.stars label { font-size: 2.2rem; line-height: 1; padding: .2rem .3rem; cursor: pointer; color: #78716c;
  border-radius: .4rem; }
.stars input:checked + label, .stars label.on { color: var(--accent); }
.stars input:focus-visible + label { outline: 3px solid var(--accent); outline-offset: 2px; }
.choice { min-height: 1.5em; margin: .25rem 0 0; }
.sr-only { position: absolute; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden;
  clip: rect(0 0 0 0); white-space: nowrap; border: 0; }
label[for=comment] { display: block; font-weight: 600; margin-bottom: .35rem; }
textarea { width: 100%; box-sizing: border-box; min-height: 5rem; font: inherit; padding: .5rem; }
button { margin-top: 1rem; font: inherit; font-weight: 600; padding: .55rem 1.2rem; border-radius: .4rem;
  border: 2px solid var(--accent); background: var(--accent); color: white; cursor: pointer; }
button:disabled { opacity: .6; cursor: default; }
textarea:focus-visible, button:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
#status { min-height: 1.5em; margin-top: 1rem; font-weight: 600; }
"""

_SCRIPT = """
(() => {
  const form = document.getElementById("rate");
  const status = document.getElementById("status");
  const send = document.getElementById("send");
  const choice = document.getElementById("choice");
  const radios = Array.from(form.querySelectorAll('input[name="stars"]'));
  const key = (window.crypto && crypto.randomUUID) ? crypto.randomUUID()
    : String(Date.now()) + "-" + Math.random().toString(16).slice(2);
  const paint = () => {
    const chosen = radios.find(r => r.checked);
    const stars = chosen ? Number(chosen.value) : 0;
    radios.forEach(r => r.nextElementSibling.classList.toggle("on", Number(r.value) <= stars));
    choice.textContent = chosen ? chosen.nextElementSibling.querySelector(".sr-only").textContent : "";
  };
  radios.forEach(r => r.addEventListener("change", paint));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const chosen = radios.find(r => r.checked);
    if (!chosen) {
      status.textContent = "Choose from 1 to 5 stars first.";
      radios[0].focus();
      return;
    }
    const body = {session_id: form.dataset.session, stars: Number(chosen.value),
                  signature: form.dataset.signature, idempotency_key: key};
    if (form.dataset.segment !== "") body.segment_index = Number(form.dataset.segment);
    const comment = document.getElementById("comment").value.trim();
    if (comment) body.comment = comment;
    send.disabled = true;
    status.textContent = "Sending your rating...";
    try {
      const answer = await fetch("/v1/ratings", {method: "POST", body: JSON.stringify(body),
        headers: {"Content-Type": "application/json", "Accept": "application/json"}});
      let data = {};
      try { data = await answer.json(); } catch (e) { data = {}; }
      if (answer.ok) {
        const n = body.stars;
        status.textContent = data.duplicate ? "This rating was already recorded. Thank you."
          : "Thank you: " + n + (n === 1 ? " star" : " stars") + " recorded.";
        radios.forEach(r => { r.disabled = true; });
        document.getElementById("comment").disabled = true;
        return;
      }
      status.textContent = "PULSE could not record the rating: " + (data.error || ("HTTP " + answer.status)) + ".";
    } catch (e) {
      status.textContent = "PULSE could not be reached. Check your connection and send again.";
    }
    send.disabled = false;
  });
  paint();
})();
"""


def _star(n: int) -> str:
    words = f"{n} star{'s' if n > 1 else ''}: {LABELS[n - 1]}"
    return (
        f'<input type="radio" name="stars" id="star-{n}" value="{n}">'
        f'<label for="star-{n}"><span aria-hidden="true">★</span><span class="sr-only">{words}</span></label>'
    )


def rate_page_html(session_id: str, segment_index: int | None, signature: str) -> str:
    """The whole page for rating ``segment_index`` of ``session_id`` (None: the session), posting ``signature``
    (the link's ``sig``) with the rating."""
    segment = "" if segment_index is None else str(int(segment_index))
    what = "this session" if segment_index is None else f"turn {int(segment_index) + 1} of this session"
    stars = "\n        ".join(_star(n) for n in range(1, 6))
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Rate {escape(what)} - PULSE</title>
<style>{_STYLE}</style>
</head>
<body>
<main>
  <h1>How well did {escape(what)} go for you?</h1>
  <p class="session">Session <code>{escape(session_id)}</code></p>
  <form id="rate" data-session="{escape(session_id, quote=True)}" data-segment="{escape(segment, quote=True)}"
        data-signature="{escape(signature, quote=True)}" novalidate>
    <fieldset>
      <legend>Your rating, from 1 star (very poor) to 5 stars (excellent)</legend>
      <div class="stars">
        {stars}
      </div>
      <p class="choice" id="choice" aria-hidden="true"></p>
    </fieldset>
    <label for="comment">What went well or wrong? (optional)</label>
    <textarea id="comment" name="comment" maxlength="4000"></textarea>
    <button type="submit" id="send">Send rating</button>
    <p id="status" role="status" aria-live="polite"></p>
  </form>
</main>
<script>{_SCRIPT}</script>
</body>
</html>
"""
