"""The ``/rate/{session_id}`` page in headless Chromium (Debian's ``chromium`` and ``chromium-driver``, as
``test_report_browser.py`` starts them), served by a tiny loopback server whose ``POST /v1/ratings`` records the
body: rated with the keyboard alone (Tab into the stars, arrow keys, Tab to the comment, Enter), the posted body and
the announced result checked, and the roles and labels a screen reader reads."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pulse_pipeline.serve.rate_page import rate_page_html

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or not CHROMEDRIVER.is_file(),
    reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver); "
    ".ci/run installs them: apt-get install chromium chromium-driver",
)

# An id that would break out of an attribute or a script if it were not escaped.
HOSTILE = "</script><img src=x onerror=\"document.title='owned'\">'&amp;"
SIGNATURE = 'c2lnbmF0dXJl&<"x">'


class Site:
    """The page for (session, segment, signature) at ``/rate/...``; ``POST /v1/ratings`` records and answers."""

    def __init__(self) -> None:
        self.page = ("s-1", 2, "sig")
        self.posted: list[dict] = []
        self.answer: tuple[int, dict] = (201, {"stored": True, "duplicate": False, "unknown_session": False})
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                self._send(200, "text/html; charset=utf-8", rate_page_html(*site.page).encode())

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                site.posted.append({"path": self.path, "body": body, "type": self.headers["Content-Type"]})
                status, answer = site.answer
                self._send(status, "application/json", json.dumps(answer).encode())

            def _send(self, status: int, kind: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=900,900"):
        options.add_argument(argument)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def site():
    served = Site()
    yield served
    served.server.shutdown()
    served.server.server_close()


def _press(browser, *keys) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    chain = ActionChains(browser)
    for key in keys:
        chain.send_keys(key)
    chain.perform()


def _status(browser, text_part: str) -> str:
    from selenium.webdriver.support.ui import WebDriverWait

    status = browser.find_element("id", "status")
    WebDriverWait(browser, 10).until(lambda _: text_part in status.text)
    return status.text


def _active(browser) -> dict:
    return browser.execute_script(
        "const a = document.activeElement; const l = a.labels && a.labels[0];"
        "return {id: a.id, checked: !!a.checked, outline: l ? getComputedStyle(l).outlineStyle : null};"
    )


def test_rating_with_the_keyboard_posts_the_contracts_body_and_announces_it(browser, site):
    from selenium.webdriver.common.keys import Keys

    site.page = (HOSTILE, 2, SIGNATURE)
    browser.get(f"{site.url}/rate/x?segment=2&sig=y")
    assert browser.title == "Rate turn 3 of this session - PULSE"  # the hostile id's script never ran
    _press(browser, Keys.TAB)
    assert _active(browser)["id"] == "star-1"  # the first Tab stop is the stars
    _press(browser, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)  # arrows move and choose
    focused = _active(browser)
    assert focused == {"id": "star-4", "checked": True, "outline": "solid"}  # focus visible on the star
    _press(browser, Keys.TAB, "Tests pass now; <b>thanks</b>", Keys.TAB)
    assert _active(browser)["id"] == "send"
    _press(browser, Keys.ENTER)
    assert _status(browser, "recorded") == "Thank you: 4 stars recorded."
    [posted] = site.posted
    assert posted["path"] == "/v1/ratings" and posted["type"] == "application/json"
    body = posted["body"]
    key = body.pop("idempotency_key")
    assert len(key) >= 16
    assert body == {"session_id": HOSTILE, "segment_index": 2, "stars": 4, "signature": SIGNATURE,
                    "comment": "Tests pass now; <b>thanks</b>"}  # fmt: skip
    assert browser.find_element("css selector", ".session code").text == HOSTILE  # shown as text
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0


def test_space_chooses_and_a_refusal_is_announced_with_the_services_reason(browser, site):
    from selenium.webdriver.common.keys import Keys

    site.page = ("s-2", None, "sig")
    site.answer = (400, {"error": "signature does not match the session: open the link you were given"})
    browser.get(f"{site.url}/rate/s-2")
    _press(browser, Keys.TAB, Keys.SPACE)  # Space chooses the focused star (1)
    assert _active(browser)["checked"] is True
    _press(browser, Keys.TAB, Keys.TAB, Keys.SPACE)  # the comment, then Space on the button
    line = _status(browser, "could not")
    assert (
        line == "PULSE could not record the rating: signature does not match the session: open the link you were given."
    )
    [posted] = site.posted
    assert "segment_index" not in posted["body"] and "comment" not in posted["body"]  # no segment, no comment
    assert posted["body"]["stars"] == 1
    assert browser.find_element("id", "send").is_enabled()  # the user can send again


def test_sending_without_stars_says_what_to_do_and_posts_nothing(browser, site):
    from selenium.webdriver.common.keys import Keys

    browser.get(f"{site.url}/rate/s-1")
    browser.find_element("id", "send").send_keys(Keys.ENTER)
    assert _status(browser, "first") == "Choose from 1 to 5 stars first."
    assert _active(browser)["id"] == "star-1" and site.posted == []


def test_the_roles_and_labels_a_screen_reader_reads(browser, site):
    browser.get(f"{site.url}/rate/s-1")
    found = browser.execute_script(
        """
        const radios = Array.from(document.querySelectorAll('input[type=radio][name=stars]'));
        const fieldset = radios[0].closest('fieldset');
        const status = document.getElementById('status');
        return {
          legend: fieldset.querySelector('legend').textContent,
          labels: radios.map(r => r.labels[0].querySelector('.sr-only').textContent),
          hidden: radios.map(r => r.labels[0].querySelector('[aria-hidden=true]').textContent),
          comment: document.getElementById('comment').labels[0].textContent,
          status: [status.getAttribute('role'), status.getAttribute('aria-live')],
          lang: document.documentElement.lang,
          external: Array.from(document.querySelectorAll('[src],link[href]')).length,
        };"""
    )
    assert found == {
        "legend": "Your rating, from 1 star (very poor) to 5 stars (excellent)",
        "labels": ["1 star: very poor", "2 stars: poor", "3 stars: fair", "4 stars: good", "5 stars: excellent"],
        "hidden": ["★"] * 5,
        "comment": "What went well or wrong? (optional)",
        "status": ["status", "polite"],
        "lang": "en",
        "external": 0,
    }
