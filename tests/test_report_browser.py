"""The report in a real browser: headless Chromium (Debian's ``chromium`` and ``chromium-driver``, which
``.ci/run`` installs) opens the page built from ``test_report``'s hand-made warehouse. No console error, every
figure drawn with a size, every headline number equal to the warehouse's, the summary at the top equal to what
the test works out from ``estimates.experiment_effects``, the synthetic banner's counts equal to
``staging.sessions``, and screenshots of the first screen (``report-top.png``) and the whole page
(``report.png``) saved in the test's temporary folder for a person to look at.

``Service`` is given the driver's path, so Selenium Manager never downloads a browser or a driver.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from pulse_pipeline.report.build import write_report

from .test_report import make_warehouse, rounding, shown_number, warehouse_value

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
SUMMARY_JS = """
return Array.from(document.querySelectorAll('tr[data-comparison]')).map(r => ({
  key: JSON.parse(r.dataset.comparison), top: r.getBoundingClientRect().top,
  fields: Object.fromEntries(Array.from(r.querySelectorAll('[data-field]')).map(c => [c.dataset.field,
                                                                                     c.textContent.trim()]))}));"""
BANNER_JS = """
const b = document.querySelector('.banner');
return b ? {synthetic: Number(b.dataset.synthetic), sessions: Number(b.dataset.sessions),
            top: b.getBoundingClientRect().top} : null;"""
LABELS = {"ppi": "PPI++", "aipw": "AIPW", "naive_welch": "naive (Welch)"}
CONCLUSIONS_JS = """
return Array.from(document.querySelectorAll('#effects p.conclusion')).map(p => p.textContent);"""
HEADLINES_JS = """
return Array.from(document.querySelectorAll('[data-headline]')).map(e => ({
  column: e.dataset.headline, table: e.dataset.table, where: e.dataset.where, value: e.dataset.value,
  unit: e.dataset.unit || null, text: e.textContent}));"""
GUARDRAILS_JS = """
return Array.from(document.querySelectorAll('tr.decision-detail li[data-guardrail]')).map(li => ({
  of: JSON.parse(li.closest('tr').dataset.decisionOf), guardrail: li.dataset.guardrail,
  verdict: li.querySelector('[data-field="verdict"]').textContent.trim(),
  top: li.getBoundingClientRect().top}));"""


def expected_summary(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], dict[str, str]]:
    """The summary rows worked out here from ``estimates.experiment_effects`` and ``estimates.guardrails`` alone:
    the estimate read is PPI++ when valid and unflagged, else AIPW when valid and unflagged, else the naive (Welch)
    one when valid; the conclusion from its 95 % interval (and Holm's p over every comparison); stars = 4 x the 0-1
    values; the decision by docs/decisions.md (a failing guardrail or a clear fall holds, a clear rise with no
    guardrail failing ships, no valid estimate is no decision, anything else keeps collecting)."""
    verdicts: dict[tuple[str, str], list[str | None]] = {}
    for experiment, treatment, verdict in con.execute(
        "SELECT experiment, treatment, verdict FROM estimates.guardrails"
    ).fetchall():
        verdicts.setdefault((experiment, treatment), []).append(verdict)
    found: dict[tuple[str, str], dict[str, tuple]] = {}
    for experiment, treatment, method, effect, low, high, width, valid, flags, holm in con.execute(
        """SELECT experiment, treatment, method, effect, ci_low, ci_high, width_vs_naive, valid, flags, p_holm
           FROM estimates.experiment_effects WHERE treatment IS NOT NULL"""
    ).fetchall():
        if valid and effect is not None:
            found.setdefault((experiment, treatment), {})[method] = (effect, low, high, width, flags, holm)
    comparisons = {
        r for r in con.execute(
            "SELECT DISTINCT experiment, treatment FROM estimates.experiment_effects WHERE treatment IS NOT NULL"
        ).fetchall()
    }  # fmt: skip
    expected = {}
    for experiment, treatment in comparisons:
        by = found.get((experiment, treatment), {})
        method = next((m for m in ("ppi", "aipw") if m in by and not by[m][4]), None)
        method = method or ("naive_welch" if "naive_welch" in by else None)
        if method is None:
            expected[(experiment, treatment)] = {
                "decision": "no decision", "conclusion": "no conclusion", "method": "–", "effect_stars": "–",
                "interval_stars": "–", "width_vs_naive": "–",
            }  # fmt: skip
            continue
        effect, low, high, width, _, holm = by[method]
        conclusion = "no detectable difference"
        kept = False
        if low > 0 or high < 0:
            conclusion = f"{treatment} rated {'higher' if effect > 0 else 'lower'}"
            kept = not (len(comparisons) > 1 and holm >= 0.05)
            if not kept:
                conclusion += " (not after Holm's correction)"
        guards = verdicts.get((experiment, treatment), [])
        if "fail" in guards or (kept and high < 0):
            decision = "hold"
        elif kept and low > 0:
            decision = "ship"
        else:
            decision = "keep collecting"
        expected[(experiment, treatment)] = {
            "decision": decision,
            "conclusion": conclusion,
            "method": LABELS[method],
            "effect_stars": f"{4 * effect:+.2f}",
            "interval_stars": f"{4 * low:+.2f} to {4 * high:+.2f}",
            "width_vs_naive": "–" if width is None else f"{width:.2f}",
        }
    return expected


def test_the_report_renders_in_chromium_with_the_warehouse_numbers(browser, tmp_path):
    database = make_warehouse(tmp_path / "pulse.duckdb")
    with duckdb.connect(str(database), read_only=True) as con:
        report = write_report(con, tmp_path / "report", source=str(database))
    browser.get(report.path.as_uri())

    severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert severe == []

    # the answer first: in the first screen (1280 x 900), one row per comparison, equal to the warehouse's
    top = tmp_path / "report-top.png"
    assert browser.save_screenshot(str(top))
    summary = browser.execute_script(SUMMARY_JS)
    with duckdb.connect(str(database), read_only=True) as con:
        expected = expected_summary(con)
        (synthetic,) = con.execute(
            "SELECT count(*) FROM staging.sessions WHERE json_extract_string(metadata_json, '$.synthetic.generator')"
            " IS NOT NULL"
        ).fetchone()
        (sessions,) = con.execute("SELECT count(*) FROM staging.sessions").fetchone()
    assert {(r["key"]["experiment"], r["key"]["treatment"]): r["fields"] for r in summary} == expected
    assert len(expected) == 3 and summary[0]["top"] < 900
    # beside each conclusion of section 1, its interval's width against naive, as the summary shows it; and where
    # the chosen model-assisted interval is wider than naive, the sentence says so and why
    sentences = browser.execute_script(CONCLUSIONS_JS)
    for (_, treatment), fields in expected.items():
        if fields["method"] in ("PPI++", "AIPW"):
            (sentence,) = [t for t in sentences if f"{treatment} " in t]
            assert f"its interval {fields['width_vs_naive']}× as wide as the naive one" in sentence, sentence
            assert ("wider than naive because" in sentence) == (float(fields["width_vs_naive"]) > 1), sentence
    assert any("wider than naive because the propensity weights vary" in t for t in sentences)
    banner = browser.execute_script(BANNER_JS)
    assert banner["synthetic"] == synthetic == banner["sessions"] == sessions > 0 and banner["top"] < 900

    figures = browser.execute_script(FIGURES_JS)
    assert len(figures) == report.figures == 8
    for figure in figures:
        assert figure["id"] and figure["title"] and figure["caption"], figure
        assert figure["width"] > 100 and figure["height"] > 100, figure  # drawn, not collapsed

    headlines = browser.execute_script(HEADLINES_JS)
    assert len(headlines) > 20
    with duckdb.connect(str(database), read_only=True) as con:
        for h in headlines:
            expected = warehouse_value(con, h["table"], h["column"], json.loads(h["where"]))
            assert float(h["value"]) == expected, h
            assert abs(shown_number(h["text"], h["unit"]) - expected) <= rounding(h["text"]) + 1e-12, h
    # each guardrail under its comparison, its verdict in words, all of them within the first screen
    guardrails = browser.execute_script(GUARDRAILS_JS)
    with duckdb.connect(str(database), read_only=True) as con:
        stored = con.execute("SELECT experiment, treatment, guardrail, verdict FROM estimates.guardrails").fetchall()
    signs = {"pass": "✓", "fail": "✗", "inconclusive": "?"}
    assert sorted(
        (g["of"]["experiment"], g["of"]["treatment"], g["guardrail"], g["verdict"]) for g in guardrails
    ) == sorted((e, t, name, f"{signs[v]} {v}") for e, t, name, v in stored)
    assert len(guardrails) == 4 and all(g["top"] < 900 for g in guardrails), guardrails

    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, height)
    screenshot = tmp_path / "report.png"
    assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 10_000
