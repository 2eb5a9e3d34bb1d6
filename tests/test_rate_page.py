"""``rate_page_html`` without a browser: every value reaches the page escaped (the browser test,
``test_rate_page_browser.py``, checks what a user and a screen reader get)."""

from __future__ import annotations

from pulse_pipeline.serve.rate_page import rate_page_html


def test_every_value_is_escaped_and_nothing_is_fetched_from_elsewhere():
    page = rate_page_html('"><script>alert(1)</script>', 0, "a&b\"c'<d>")
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'data-signature="a&amp;b&quot;c&#x27;&lt;d&gt;"' in page
    assert 'data-segment="0"' in page and "turn 1 of this session" in page
    assert "http://" not in page and "https://" not in page and " src=" not in page  # no external asset


def test_a_link_without_a_segment_rates_the_session():
    page = rate_page_html("s-1", None, "sig")
    assert 'data-segment=""' in page and "<title>Rate this session - PULSE</title>" in page
