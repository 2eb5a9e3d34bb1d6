"""The report in a real browser: headless Chromium (Debian's ``chromium`` and ``chromium-driver``, which
``.ci/run`` installs) opens the page built from ``test_report``'s hand-made warehouse. No console error, every
figure drawn with a size, every headline number equal to the warehouse's, and a full-page screenshot saved as
``report.png`` in the test's temporary folder for a person to look at.

``Service`` is given the driver's path, so Selenium Manager never downloads a browser or a driver.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline.report.build import write_report

from .test_report import make_warehouse, warehouse_value

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or not CHROMEDRIVER.is_file(),
    reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver); "
    ".ci/run installs them: apt-get install chromium chromium-driver",
)


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(argument)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


FIGURES_JS = """
return Array.from(document.querySelectorAll('figure')).map(f => {
  const svg = f.querySelector('svg[role="img"]');
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const caption = f.querySelector('figcaption');
  return {id: svg ? svg.id : null, width: box.width, height: box.height,
          title: svg && svg.querySelector('title') ? svg.querySelector('title').textContent : '',
          caption: caption ? caption.textContent : ''};
});"""
HEADLINES_JS = """
return Array.from(document.querySelectorAll('[data-headline]')).map(e => ({
  column: e.dataset.headline, table: e.dataset.table, where: e.dataset.where, value: e.dataset.value,
  text: e.textContent}));"""


def test_the_report_renders_in_chromium_with_the_warehouse_numbers(browser, tmp_path):
    database = make_warehouse(tmp_path / "pulse.duckdb")
    with duckdb.connect(str(database), read_only=True) as con:
        report = write_report(con, tmp_path / "report", source=str(database))
    browser.get(report.path.as_uri())

    severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert severe == []

    figures = browser.execute_script(FIGURES_JS)
    assert len(figures) == report.figures == 7
    for figure in figures:
        assert figure["id"] and figure["title"] and figure["caption"], figure
        assert figure["width"] > 100 and figure["height"] > 100, figure  # drawn, not collapsed

    headlines = browser.execute_script(HEADLINES_JS)
    assert len(headlines) > 20
    with duckdb.connect(str(database), read_only=True) as con:
        for h in headlines:
            expected = warehouse_value(con, h["table"], h["column"], json.loads(h["where"]))
            assert float(h["value"]) == expected, h
            decimals = len(h["text"].split(".")[1]) if "." in h["text"] else 0
            assert abs(float(h["text"]) - expected) <= 0.5 * 10**-decimals + 1e-12, h

    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, height)
    screenshot = tmp_path / "report.png"
    assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 10_000
