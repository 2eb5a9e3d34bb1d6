"""The HTML report (``pulse_pipeline/report``): built from a small hand-made warehouse whose rows are known, so
every number, sentence and empty-table reason the page must show is worked out here, not read back from it.

The warehouse holds two comparisons (llm-backbone: PPI valid and clear of zero; planning: PPI flagged, AIPW
holding zero), a single-arm experiment, 20 rated sessions with predictions, four benchmark clusters, and leaves
``estimates.label_shift``, ``segment_effects`` and ``ask_policy`` empty on purpose.
"""

from __future__ import annotations

import html
import json
import re
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import polars as pl
import pytest

from pulse_pipeline import tables
from pulse_pipeline.cli import main
from pulse_pipeline.connections import connect
from pulse_pipeline.defs.estimates.conclusions import EFFECTS_IN_ORDER, GUARDRAILS_IN_ORDER, HISTORY_OF_SEQUENCES
from pulse_pipeline.defs.report.assets import ReportResource, index_html, report_is_written
from pulse_pipeline.defs.resources import WarehouseResource
from pulse_pipeline.estimates.conclusions import conclusion_rows
from pulse_pipeline.publish import publish
from pulse_pipeline.report.page import build_page
from pulse_pipeline.stats.aipw import WEIGHTS_VARY
from pulse_pipeline.warehouse import Warehouse

BACKBONE = {"experiment": "llm-backbone", "treatment": "gpt-5", "control": "claude-4-sonnet"}
PLANNING = {"experiment": "planning", "treatment": "show-plan", "control": "no-plan"}


def _effect(comparison: dict, method: str, effect: float, low: float, high: float, **more) -> dict:
    return {
        **comparison,
        "method": method,
        "effect": effect,
        "ci_low": low,
        "ci_high": high,
        "effect_stars": 4 * effect,
        "p_value": 0.01,
        "p_holm": 0.03,
        "n_labeled_treatment": 40,
        "n_labeled_control": 38,
        "N_unlabeled_treatment": 700,
        "N_unlabeled_control": 690,
        "valid": True,
        "unit": "session",
        "unit_source": "configured",
        "sessions_excluded": 0,
        **more,
    }


FLAG_SHIFT = "rated sessions are not representative (AUC 0.71)"
EFFECTS = [
    _effect(BACKBONE, "naive_welch", 0.05, 0.01, 0.09, width_vs_naive=1.0),
    _effect(BACKBONE, "naive_bootstrap", 0.05, 0.012, 0.088),
    _effect(BACKBONE, "ppi", 0.04123456789, 0.012, 0.068, width_vs_naive=0.7, best_width_theory=0.68, oof_rho=0.6),
    _effect(BACKBONE, "crossppi", 0.041, 0.011, 0.071, width_vs_naive=0.75, best_width_theory=0.68, oof_rho=0.6),
    _effect(BACKBONE, "aipw", 0.045, 0.0, 0.09, width_vs_naive=1.1, best_width_theory=0.68, oof_rho=0.6),
    _effect(BACKBONE, "ppi_insample", 0.043, 0.03, 0.056, valid=False, flags="predictions may have seen the labels"),
    _effect(PLANNING, "naive_welch", 0.02, -0.04, 0.08, width_vs_naive=1.0),
    _effect(PLANNING, "ppi", 0.03, -0.02, 0.08, flags=FLAG_SHIFT, width_vs_naive=0.83, best_width_theory=0.9),
    _effect(PLANNING, "aipw", -0.01234, -0.07, 0.046, width_vs_naive=1.12, best_width_theory=0.9, oof_rho=0.4,
            note=f"{WEIGHTS_VARY}: 30 effective ratings of 40"),
    *[
        {"experiment": "tiny", "treatment": "t2", "control": "c2", "method": m, "valid": False,
         "note": "arm t2 has fewer than 2 ratings"}
        for m in ("naive_welch", "ppi")
    ],
    {"experiment": "solo", "treatment": None, "control": "only-arm", "method": "none", "valid": False,
     "note": "single-arm experiment: every session is in only-arm"},
]  # fmt: skip
POWER = [
    {**BACKBONE, "mde_naive": 0.09, "mde_ppi": 0.07, "oof_rho": 0.6, "target_effect": 0.05},
    {**PLANNING, "mde_naive": 0.12, "mde_ppi": 0.1, "oof_rho": 0.4, "target_effect": 0.05},
]
CORRELATION = [
    {"treatment": "gpt-5", "control": "claude-4-sonnet", "measure": m, "n_clusters": 4, "coefficient": c,
     "ci_low": lo, "ci_high": hi}
    for m, c, lo, hi in (("pearson", 0.61, -0.2, 0.95), ("spearman", -1.0, None, None))
] + [
    {"treatment": "gpt-5", "control": "claude-3.7-sonnet", "measure": m, "n_clusters": 3, "coefficient": c,
     "ci_low": -1.0, "ci_high": 1.0, "note": "3 pairs: no interval narrower than [-1, 1] (Fisher's z needs at least 4)"}
    for m, c in (("pearson", 0.99), ("spearman", 1.0))
] + [
    {"treatment": "claude-4-sonnet", "control": "claude-3.7-sonnet", "measure": m, "n_clusters": 0,
     "note": "0 pairs: a correlation needs at least 3"}
    for m in ("pearson", "spearman")
]  # fmt: skip
POINTS = [
    {"treatment": "gpt-5", "control": "claude-4-sonnet", "cluster": c, "benchmark": "swe-bench", "delta_b": b,
     "delta_h": h, "n_treatment": 40, "n_control": 40, "status": "used"}
    for c, b, h in (("fix_bugs", 2.0, 1.5), ("testing_code", -1.0, -0.5), ("write_docs", 4.0, 2.0), ("ci", 0.5, 1.0))
] + [
    {"treatment": "gpt-5", "control": "claude-3.7-sonnet", "cluster": c, "benchmark": "swe-bench", "delta_b": b,
     "delta_h": h, "n_treatment": 40, "n_control": 40, "status": "used"}
    for c, b, h in (("fix_bugs", 1.0, 2.0), ("testing_code", 2.0, 4.0), ("write_docs", 3.0, 6.5))
] + [
    {"treatment": "claude-4-sonnet", "control": "claude-3.7-sonnet", "cluster": "fix_bugs", "status": "skipped",
     "reason": "no ratings for this comparison: none for claude-3.7-sonnet"}
]  # fmt: skip
COST = [
    {**c, "population": "all", "feature": "llm_cost_usd", "kind": "numeric", "n_treatment": 700, "n_control": 690,
     "mean_treatment": mt, "mean_control": mc, "difference": mt - mc, "relative_difference": (mt - mc) / mc,
     "sd_treatment": 0.2, "sd_control": 0.2, "test": "welch t", "p_value": 0.3, "p_bh": 0.6,
     "standardized_difference": (mt - mc) / 0.2}
    for c, mt, mc in ((BACKBONE, 0.3125, 0.25), (PLANNING, 0.2, 0.2))
]  # fmt: skip
FEATURES = [
    {**BACKBONE, "population": "all", "feature": f, "kind": "numeric", "n_treatment": 700, "n_control": 690,
     "mean_treatment": mt, "mean_control": mc, "sd_treatment": sd, "sd_control": sd, "difference": mt - mc,
     "relative_difference": (mt - mc) / mc, "test": "welch t", "p_value": p, "p_bh": p * 3,
     "standardized_difference": (mt - mc) / sd}  # equal sds: the pooled sd is sd
    for f, mt, mc, sd, p in (("user_message_count", 14.0, 12.0, 4.0, 0.001), ("file_edits", 5.0, 5.5, 2.0, 0.2))
]  # fmt: skip


def _guardrail(
    comparison: dict, name: str, metric: str, verdict: str | None, relative: float, half: float, **more
) -> dict:
    """A row of estimates.guardrails: lower is better, a relative margin of 10 % at alpha 0.05, the interval
    relative -/+ half (the control mean 2.0, so the effect in units is 2 x the relative one)."""
    return {
        **comparison, "guardrail": name, "metric": metric, "direction": "lower", "unit": "session", "method": "plain",
        "n_treatment": 700, "n_control": 690, "treatment_mean": 2.0 * (1 + relative), "control_mean": 2.0,
        "effect": 2.0 * relative, "ci_low": 2.0 * (relative - half), "ci_high": 2.0 * (relative + half),
        "relative_effect": relative, "relative_ci_low": relative - half, "relative_ci_high": relative + half,
        "cs_low": 2.0 * (relative - 2 * half), "cs_high": 2.0 * (relative + 2 * half), "margin": 0.10,
        "margin_type": "relative", "alpha": 0.05, "p_noninferiority": 0.5, "verdict": verdict,
        "variance_reduction": None, "design": "randomized", **more,
    }  # fmt: skip


GUARDRAILS = [
    # gpt-5 is rated higher but costs 25 % more: its interval (+15 % to +35 %) lies beyond the tolerated +10 %
    _guardrail(BACKBONE, "cost", "llm_cost_usd", "fail", 0.25, 0.10),
    _guardrail(BACKBONE, "duration", "duration_seconds", "pass", -0.02, 0.03),
    _guardrail(PLANNING, "cost", "llm_cost_usd", "pass", 0.0, 0.04),
    _guardrail(PLANNING, "duration", "duration_seconds", "inconclusive", 0.05, 0.08),
]


RECALIBRATED = {
    "model": "stack", "recalibrated": True, "reason": "out-of-fold MSE 0.940 is not below the constant's 0.900",
    "n_labeled": 20, "mse_prediction": 0.94, "mse_calibrated": 0.85, "mse_constant": 0.9, "slope": 0.4,
    "slope_se": 0.1,
}  # fmt: skip


SYNTHETIC = '{"session_id": "%s", "synthetic": {"generator": "pulse_pipeline.synth", "seed": 5, "scenario": "x"}}'
SESSIONS = [{"drop_id": "synth-5", "session_id": f"s{i}", "metadata_json": SYNTHETIC % f"s{i}"} for i in range(4)]


def _calibration_rows() -> tuple[list[dict], list[dict]]:
    """20 rated sessions (predictions 1.2 ... 5.0 stars, ratings the prediction rounded) and 5 unrated ones."""
    rng = np.random.default_rng(3)
    predictions, labels = [], []
    for i in range(20):
        stars = 1.0 + 0.2 * (i + 1)
        rating = float(np.clip(round(stars + rng.normal(0, 0.5)), 1, 5))
        sid = f"s{i:02d}"
        predictions.append({"session_id": sid, "labeled": True, "prediction_stars": stars,
                            "prediction": (stars - 1) / 4, "method": "out_of_fold", "model": "stack"})  # fmt: skip
        labels.append({"session_id": sid, "n_rated_segments": 1, "label_stars": rating, "label": (rating - 1) / 4})
    for i in range(5):
        predictions.append({"session_id": f"u{i}", "labeled": False, "prediction_stars": 3.0, "prediction": 0.5,
                            "method": "fold_mean", "model": "stack"})  # fmt: skip
    return predictions, labels


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict]) -> None:
    frame = pl.DataFrame(rows, infer_schema_length=None)  # noqa: F841 (read by DuckDB by name)
    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM frame")


def make_warehouse(path: Path) -> Path:
    """The hand-made warehouse of this module, written through ``connections.connect`` to the working database
    beside ``path`` (``working_database``) and published to ``path``, a file plain DuckDB reads."""
    con = connect(working_database(path))
    Warehouse(con)  # every table of the contract, empty
    predictions, labels = _calibration_rows()
    days = [f"2025-06-0{d}" for d in (1, 2, 3)]
    history = [
        {**BACKBONE, "method": "ppi", "unit": "session", "day": day, "n_rated": 10 * (i + 1), "n_sessions": 100 * i,
         "effect": 0.04, "ci_low": 0.04 - w, "ci_high": 0.04 + w, "cs_low": 0.04 - 1.5 * w, "cs_high": 0.04 + 1.5 * w,
         "excludes_zero_fixed": 0.04 - w > 0, "excludes_zero_cs": 0.04 - 1.5 * w > 0}
        for i, (day, w) in enumerate(zip(days, (0.05, 0.035, 0.02), strict=True))
    ]  # fmt: skip
    srm = [
        {"experiment": "llm-backbone", "arm": a, "sessions": n, "units": n, "unit": "session", "intended_share": 0.5,
         "expected_units": 704.0, "observed_share": n / 1408, "chi2": 0.1, "p_value": 0.75, "mismatch": False}
        for a, n in (("claude-4-sonnet", 700), ("gpt-5", 708))
    ]  # fmt: skip
    cv = [
        {"model": m, "metric": metric, "mean": v, "sd": 0.01, "n_labeled": 20, "n_seeds": 5, "chosen": m == "stack",
         "source": "cross_validation"}
        for m, metric, v in (("stack", "mse", 0.61), ("stack", "pearson", 0.55), ("constant", "mse", 0.9),
                             ("constant", "pearson", -0.1))
    ]  # fmt: skip
    for table, rows in (
        ("staging.sessions", SESSIONS),
        ("estimates.experiment_effects", EFFECTS),
        ("estimates.power", POWER),
        ("estimates.benchmark_correlation", CORRELATION),
        ("estimates.benchmark_points", POINTS),
        ("estimates.feature_comparisons", COST + FEATURES),
        ("estimates.effect_history", history),
        ("estimates.srm_check", srm),
        ("estimates.guardrails", GUARDRAILS),
        ("modeling.cv_metrics", cv),
        ("modeling.recalibration", [RECALIBRATED]),
        ("modeling.predictions", predictions),
        ("staging.session_labels", labels),
    ):
        _insert(con, table, rows)
    conclude(con)
    con.close()
    assert publish(working_database(path), path) is None
    return path


def conclude(con: duckdb.DuckDBPyConnection) -> None:
    """``estimates.conclusions`` from the effects, power, guardrail and history rows written, as the pipeline's
    asset writes it."""
    effects, power, guardrails, history = (
        con.execute(sql).pl().to_dicts()
        for sql in (EFFECTS_IN_ORDER, "SELECT * FROM estimates.power", GUARDRAILS_IN_ORDER, HISTORY_OF_SEQUENCES)
    )
    rows = conclusion_rows(effects, power, guardrails, history)
    Warehouse(con).replace(tables.CONCLUSIONS, rows, nan_as_null=True)


def working_database(published: Path) -> Path:
    """The working database ``make_warehouse`` writes beside the file it publishes (its lake beside it too)."""
    return published.with_name("work.duckdb")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_warehouse(tmp_path_factory.mktemp("report") / "pulse.duckdb")


@pytest.fixture(scope="module")
def built(warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dg.ExecuteInProcessResult, Path]:
    """The report asset and its check, run once over the module's warehouse: the page every test reads."""
    folder = tmp_path_factory.mktemp("out") / "report"
    resources = {
        "warehouse": WarehouseResource(
            database=str(working_database(warehouse)), publish_to=str(warehouse), drops_dir=str(folder)
        ),
        "report": ReportResource(folder=str(folder)),
    }
    return dg.materialize([index_html, report_is_written], resources=resources), folder


@pytest.fixture(scope="module")
def page(built) -> str:
    return (built[1] / "index.html").read_text()


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text inside each element that has an id or a headline."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.open: list[tuple[str, dict, list[str]]] = []
        self.texts: list[tuple[str, dict, str]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = {k: v or "" for k, v in attrs}
        self.tags.append((tag, attributes))
        self.open.append((tag, attributes, []))

    def handle_data(self, data: str) -> None:
        for _, _, parts in self.open:
            parts.append(data)

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            name, attributes, parts = self.open.pop()
            self.texts.append((name, attributes, "".join(parts)))
            if name == tag:
                break


def parse(document: str) -> Elements:
    parser = Elements()
    parser.feed(document)
    return parser


def warehouse_value(con: duckdb.DuckDBPyConnection, table: str, column: str, where: dict) -> float:
    """The one value the headline names, queried independently of the page's code."""
    clause = " AND ".join(f'"{k}" = ?' for k in where)
    rows = con.execute(f'SELECT "{column}" FROM {table} WHERE {clause}', list(where.values())).fetchall()
    assert len(rows) == 1, (table, column, where, rows)
    return rows[0][0]


def headlines(document: str) -> list[tuple[dict, str]]:
    return [(a, text) for tag, a, text in parse(document).texts if "data-headline" in a]


def test_headline_numbers_equal_the_warehouse_rows(page, warehouse):
    found = headlines(page)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        for attributes, text in found:
            where = json.loads(attributes["data-where"])
            value = warehouse_value(con, attributes["data-table"], attributes["data-headline"], where)
            assert float(attributes["data-value"]) == value, attributes
            assert abs(shown_number(text, attributes.get("data-unit")) - value) <= rounding(text) + 1e-12, (text, value)
    keys = {(a["data-table"], a["data-headline"], a["data-where"]) for a, _ in found}
    # every method's effect and interval of both comparisons (the single-arm row has no numbers), the widths,
    # the power, the correlations, the split check's p-values, the cost per arm
    effects = {(r["experiment"], r["method"]) for r in EFFECTS if r.get("effect") is not None}
    assert {
        (json.loads(w)["experiment"], json.loads(w)["method"])
        for t, c, w in keys
        if t == "estimates.experiment_effects" and c == "effect"
    } == effects
    columns = {(t, c) for t, c, _ in keys}
    assert columns >= {
        ("estimates.experiment_effects", "ci_low"),
        ("estimates.experiment_effects", "width_vs_naive"),
        ("estimates.experiment_effects", "best_width_theory"),
        ("estimates.experiment_effects", "oof_rho"),
        ("estimates.power", "mde_naive"),
        ("estimates.power", "mde_ppi"),
        ("estimates.benchmark_correlation", "coefficient"),
        ("estimates.srm_check", "p_value"),
        ("estimates.feature_comparisons", "mean_treatment"),
        ("estimates.guardrails", "relative_effect"),
        ("estimates.guardrails", "relative_ci_low"),
        ("estimates.guardrails", "relative_ci_high"),
    }
    shown = {
        json.loads(a["data-where"])["method"]: t
        for a, t in found
        if a["data-headline"] == "effect" and json.loads(a["data-where"])["experiment"] == "llm-backbone"
    }
    assert shown["ppi"] == "+0.041" and shown["aipw"] == "+0.045"


def shown_number(text: str, unit: str | None = None) -> float:
    """The number a headline shows: as written, or its percentage over 100 when marked ``data-unit="%"``."""
    return float(text.removesuffix(" %")) / 100 if unit == "%" else float(text)


def rounding(text: str) -> float:
    """Half a unit of the last digit the headline shows (of the value itself: a percentage's over 100)."""
    number = text.removesuffix(" %")
    decimals = len(number.split(".")[1]) if "." in number else 0
    return 0.5 * 10**-decimals / (100 if number != text else 1)


def _text(document: str) -> str:
    """The page's words without the SVGs and tags, one space between words, none before punctuation."""
    text = re.sub(r"<[^>]+>", " ", re.sub(r"<svg.*?</svg>", "", document, flags=re.S))
    return re.sub(r" ([:;,.)])", r"\1", re.sub(r"\s+", " ", text))


def test_conclusions_follow_the_chosen_estimate(page):
    text = _text(page)
    # llm-backbone: PPI valid and unflagged, interval [0.012, 0.068] clear of zero; 0.0412 x 4 = +0.16 stars;
    # p_holm 0.03 < 0.05, so no Holm caveat
    # in stars: 4 x 0.0412 = +0.16, 4 x 0.012 = +0.05 (0.048), 4 x 0.068 = +0.27 (0.272)
    assert (
        "gpt-5 is rated higher than claude-4-sonnet: +0.16 stars (95 % interval +0.05 to +0.27; +0.041 on the 0–1"
        " scale), by PPI++, its interval 0.70× as wide as the naive one" in text
    )
    assert "PPI++ is valid and not flagged" in text and "after Holm" not in text
    # planning: PPI flagged -> AIPW, whose interval holds zero (4 x -0.01234 = -0.05, 4 x -0.07 = -0.28,
    # 4 x 0.046 = +0.18); the naive MDE 0.12 (0.48 stars) bounds what it saw
    assert (
        "No detectable difference between show-plan and no-plan: -0.05 stars (95 % interval -0.28 to +0.18; -0.012"
        " on the 0–1 scale) by AIPW, its interval 1.12× as wide as the naive one: wider than naive because the"
        " propensity weights vary (fewer ratings count fully); the test could" in text
    )
    assert "the test could have detected 0.48 stars or more (0.120 on the 0–1 scale, 80 % power)" in text
    assert f"PPI++ is flagged: {FLAG_SHIFT}; AIPW corrects for who rates" in text
    assert "single-arm experiment: every session is in only-arm" in text
    # an arm too small for any estimate: the rows' note, and no figure (the figure count below has none for it)
    assert "No conclusion: no method has a valid estimate (arm t2 has fewer than 2 ratings)." in text
    # the flagged rows are named in the forest plot's caption
    assert f"PPI++: {FLAG_SHIFT}" in text and "PPI in-sample (paper): predictions may have seen the labels" in text
    # cost per arm: 0.3125 and 0.25 dollars; the 25 % more is (0.3125 - 0.25) / 0.25
    assert "0.3125 0.2500 +0.0625 +25.0 %" in text


def test_empty_tables_say_why(page):
    text = _text(page)
    # a comparison of the benchmarks file the ratings lack: one line with its points' reason, no empty table
    assert (
        "Named in the benchmarks file but not in the data, so not shown: claude-4-sonnet vs claude-3.7-sonnet (no"
        " ratings for this comparison: none for claude-3.7-sonnet (1 point))." in text
    )
    assert "<h3>claude-4-sonnet vs claude-3.7-sonnet</h3>" not in page
    for table in ("estimates.label_shift", "estimates.segment_effects", "estimates.ask_policy"):
        assert f"Nothing to show: {table} has no rows:" in text, table


def test_a_warehouse_without_the_tables_gives_a_page_of_reasons(tmp_path):
    with duckdb.connect(str(tmp_path / "old.duckdb")) as con:
        page = build_page(con, "old.duckdb", built=datetime(2026, 1, 1))
    assert page.figures == 0 and page.sections == 12
    text = _text(page.html)
    assert "estimates.experiment_effects does not exist in this warehouse" in text
    assert text.count("Nothing to show:") >= 10


def test_the_page_shows_the_conclusion_the_warehouse_stores(tmp_path):
    """The summary and section 1 read ``estimates.conclusions``: what is stored there is what the page says."""
    published = make_warehouse(tmp_path / "pulse.duckdb")
    con = connect(working_database(published))
    con.execute(
        f"UPDATE {tables.CONCLUSIONS.qualified} SET verdict = 'stored verdict', sentence = 'A stored sentence.',"
        " decision = 'stored decision', decision_why = 'A stored why.' WHERE treatment = 'gpt-5'"
    )
    con.close()
    assert publish(working_database(published), published) is None
    with duckdb.connect(str(published), read_only=True) as con:
        page = build_page(con, "pulse.duckdb", built=datetime(2026, 1, 1)).html
    assert summary_rows(page)["llm-backbone: gpt-5 vs claude-4-sonnet"][:2] == ["stored decision", "stored verdict"]
    assert '<p class="why" data-field="decision_why">A stored why.</p>' in page
    assert '<p class="conclusion">A stored sentence.</p>' in page


def test_table_2_says_which_predictions_each_method_used_and_why(page):
    """The rows of ``modeling.recalibration`` (written above): PPI++ reads the predictions as they are (MSE 0.94),
    cross-PPI and AIPW the recalibrated ones (0.85), beside the constant's 0.9 and the reason."""
    section = page[page.index("Which predictions each method used") :]
    cells = [t for tag, _, t in parse(section[: section.index("</table>")]).texts if tag == "td"]
    rows = [cells[i : i + 7] for i in range(0, len(cells), 7)]
    reason = RECALIBRATED["reason"]
    assert rows == [
        ["PPI++", "stack", "prediction", "as it is", "0.940", "0.900", "tunes its own λ (≈ Cov(Y, f) / Var(f))"],
        ["cross-PPI", "stack", "prediction_calibrated", "recalibrated", "0.850", "0.900", reason],
        ["AIPW", "stack", "prediction_calibrated", "recalibrated", "0.850", "0.900", reason],
    ]


def test_the_page_loads_nothing_from_elsewhere(page):
    assert "http" not in page and "<script" not in page and "<link" not in page and "<img" not in page
    assert not re.search(r"\ssrc=", page)
    assert set(re.findall(r'href="(.)', page)) <= {"#"}
    assert set(re.findall(r"url\((.)", page)) <= {"#"}
    assert "@import" not in page


def test_every_figure_has_a_caption_and_a_text_alternative(page):
    elements = parse(page)
    ids = [a["id"] for _, a in elements.tags if "id" in a]
    assert len(ids) == len(set(ids))  # one document, many SVGs: no clashing ids
    text_by_id = {a["id"]: t.strip() for _, a, t in elements.texts if "id" in a}
    figures = [t for tag, _, t in elements.texts if tag == "figure"]
    # 2 forest plots, widths, calibration, features of one comparison, 2 benchmark scatters, 1 history
    assert len(figures) == 8
    assert page.count("<figure>") == page.count("<figcaption>") == page.count('role="img"') == 8
    for tag, attributes in elements.tags:
        if tag == "svg" and "role" in attributes:
            title_id, desc_id = attributes["aria-labelledby"].split()
            assert text_by_id[title_id] and text_by_id[desc_id]
    # the calibration figure states every decile's numbers, worked out here from the rows
    predictions, labels = _calibration_rows()
    stars = np.array([p["prediction_stars"] for p in predictions if p["labeled"]])
    ratings = np.array([lab["label_stars"] for lab in labels])
    desc = text_by_id["fig-calibration-desc"]
    for decile in range(10):  # 20 sessions sorted by prediction: two a decile
        p, o = stars[2 * decile : 2 * decile + 2].mean(), ratings[2 * decile : 2 * decile + 2].mean()
        assert f"decile {decile + 1} (2 sessions): predicted {p:.2f}, observed {o:.2f}" in desc
    levels = [int(tag[1]) for tag, _ in elements.tags if re.fullmatch(r"h[1-6]", tag)]
    assert levels[0] == 1 and all(b - a <= 1 for a, b in zip(levels, levels[1:], strict=False))


def test_the_asset_writes_the_report_and_its_check_passes(built):
    result, folder = built
    assert result.success
    (materialization,) = result.asset_materializations_for_node("report__index_html")
    assert materialization.metadata["path"].path == str(folder / "index.html")
    assert materialization.metadata["sections"].value == 12 and materialization.metadata["figures"].value == 8
    assert [e.passed for e in result.get_asset_check_evaluations()] == [True]
    assert [p.name for p in folder.iterdir()] == ["index.html"]  # the temporary file was renamed, none left


def test_pulse_report_rebuilds_from_the_published_warehouse(pulse_home, capsys):
    assert main(["report"]) == 2
    assert "no warehouse at" in capsys.readouterr().err
    Warehouse(duckdb.connect(str(pulse_home.warehouse))).con.close()  # every table, empty: a quick page
    assert main(["report"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path == pulse_home.report / "index.html"
    assert "Nothing to show: estimates.experiment_effects has no rows" in _text(path.read_text())


def test_a_one_arm_experiment_in_segment_effects_gives_its_note(tmp_path):
    """segment_effects' row for an experiment with one arm has no treatment, dimension or segment (the estimates
    stage writes it so; tests/test_bad_input.py's mixed drop has one): the section shows its note, no crash."""
    from pulse_pipeline.report.data import Rows
    from pulse_pipeline.report.sections.segments import segments_section

    row = {"experiment": "solo", "treatment": None, "control": "only-arm", "dimension": None, "segment": None}
    row |= {"method": "none", "effect": None, "note": "one arm: nothing to compare"}
    html = segments_section(Rows(pl.DataFrame([row]), None)).render(2)
    assert "solo: only-arm (one arm)" in html and "one arm: nothing to compare" in html


def summary_rows(document: str) -> dict[str, list[str]]:
    """The summary table's rows as the page shows them: the comparison, then each cell's text."""
    body = document[document.index('<table class="summary">') : document.index("</table>", document.index("summary"))]
    found = {}
    for row in re.findall(r"<tr data-comparison.*?</tr>", body, flags=re.S):
        cells = [re.sub(r"<[^>]+>", " ", c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S)]
        cells = [re.sub(r"\s+", " ", c).strip() for c in cells]
        found[cells[0]] = cells[1:]
    return found


def test_the_page_opens_with_the_answer(page):
    """One row per comparison before any detail (the glossary, section 1): the conclusion, the method read by and
    why, the effect and its interval in stars (4 x the 0-1 values of EFFECTS), the width against naive."""
    assert page.index('<table class="summary">') < page.index('id="effects"') < page.index('class="glossary"')
    assert summary_rows(page) == {
        # PPI++ valid and unflagged: 4 x 0.0412 = +0.16, [4 x 0.012, 4 x 0.068] = [+0.05, +0.27], width 0.7
        # rated higher, but its cost guardrail fails: hold
        "llm-backbone: gpt-5 vs claude-4-sonnet": [
            "hold", "gpt-5 rated higher", "PPI++ PPI++ is valid and not flagged", "+0.16", "+0.05 to +0.27", "0.70"
        ],
        # PPI++ flagged: AIPW, 4 x -0.01234 = -0.05, [4 x -0.07, 4 x 0.046] = [-0.28, +0.18], width 1.12; no
        # guardrail fails: keep collecting
        "planning: show-plan vs no-plan": [
            "keep collecting", "no detectable difference",
            f"AIPW PPI++ is flagged: {FLAG_SHIFT}; AIPW corrects for who rates", "-0.05", "-0.28 to +0.18", "1.12",
        ],
        "tiny: t2 vs c2": [
            "no decision", "no conclusion", "– no method has a valid estimate (arm t2 has fewer than 2 ratings)",
            "–", "–", "–",
        ],
    }  # fmt: skip
    assert "Not compared (a single arm): solo (only-arm only)." in _text(page)


def detail_rows(document: str) -> dict[str, str]:
    """The row under each comparison of the summary (why its decision, its guardrails), as text, by experiment."""
    return {
        json.loads(html.unescape(key))["experiment"]: html.unescape(_text(row)).strip()
        for key, row in re.findall(r'<tr class="decision-detail" data-decision-of="([^"]*)">(.*?)</tr>', document,
                                   flags=re.S)
    }  # fmt: skip


def test_the_answer_shows_each_guardrail_beside_its_decision(page):
    """Under each comparison, why its decision and each guardrail of GUARDRAILS: its verdict in words (a sign
    beside it, hidden from screen readers; colour only adds), its relative effect and interval in % (the 0-1
    shares x 100) and the harm its margin tolerates (+10 %: lower is better)."""
    rows = detail_rows(page)
    assert rows["llm-backbone"] == (
        "Guardrail cost (llm_cost_usd) fails: +25.0 % (95 % interval +15.0 % to +35.0 %) against a tolerated +10.0 %,"
        " so the change is held whatever the ratings say (gpt-5 is rated higher than claude-4-sonnet (+0.16 stars,"
        " 95 % interval +0.05 to +0.27)). ✗ fail cost (llm_cost_usd, lower is better): +25.0 % (95 % interval"
        " +15.0 % to +35.0 %); tolerated: up to +10.0 % of claude-4-sonnet's mean ✓ pass duration"
        " (duration_seconds, lower is better): -2.0 % (95 % interval -5.0 % to +1.0 %); tolerated: up to +10.0 % of"
        " claude-4-sonnet's mean"
    )
    assert rows["planning"].startswith(
        "No difference between show-plan and no-plan is detected yet (-0.05 stars, 95 % interval -0.28 to +0.18);"
        " no guardrail fails (1 of 2 pass). ✓ pass cost"
    )
    assert (
        "? inconclusive duration (duration_seconds, lower is better): +5.0 % (95 % interval -3.0 % to +13.0 %)"
        in (rows["planning"])
    )
    assert rows["tiny"].startswith("No valid estimate of the rating difference: no method has a valid estimate")
    assert rows["tiny"].endswith("Guardrails: none declared for this comparison.")
    assert page.count('<span aria-hidden="true">✓</span> pass</span>') == 2
    assert page.count("<tr data-comparison=") == 3 and 'data-decision="hold"' in page


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("DROP TABLE estimates.guardrails", "estimates.guardrails does not exist in this warehouse"),
        ("DELETE FROM estimates.guardrails", "estimates.guardrails has no rows: no guardrail is declared in"),
    ],
)
def test_a_missing_or_empty_guardrails_table_says_why_under_each_decision(tmp_path, change, reason):
    published = make_warehouse(tmp_path / "pulse.duckdb")
    con = connect(working_database(published))
    con.execute(change)
    con.close()
    assert publish(working_database(published), published) is None
    with duckdb.connect(str(published), read_only=True) as con:
        page = build_page(con, "pulse.duckdb", built=datetime(2026, 1, 1)).html
    # said once, under the summary table; each comparison's row keeps its decision's why
    assert _text(page).count(f"No guardrails shown: {reason}") == 1
    rows = detail_rows(page)
    assert len(rows) == 3 and not any("Guardrails" in t for t in rows.values())
    assert rows["llm-backbone"].startswith("Guardrail cost (llm_cost_usd) fails")  # the stored decision's why


def test_the_banner_says_the_sessions_are_synthetic(page):
    assert (
        "Synthetic data. All 4 sessions were made by PULSE's generator (pulse_pipeline.synth, seed 5): the numbers"
        " show how the pipeline works, not how real users feel." in _text(page)
    )


def test_a_synthetic_drop_beside_a_real_one_is_named_in_the_banner(tmp_path):
    """The marker comes from the data: the generator writes it into each session record, ingest keeps it in
    metadata_json. A generated drop alone gives the synthetic banner; a real one beside it (here a generated
    record without the marker, under another id) the mixed banner with the counts per drop; none, no banner."""
    from pulse_pipeline.synth import write_corpus

    from .helpers import ingest_paths

    made = tmp_path / "made"
    write_corpus(made, 12, seed=9)
    record = json.loads((made / "sessions-0000.jsonl").read_text().splitlines()[0])
    del record["synthetic"]
    real = tmp_path / "real"
    real.mkdir()
    (real / "sessions.jsonl").write_text(json.dumps({**record, "session_id": "real-1"}) + "\n")

    def banner(*drops: Path) -> str:
        wh = Warehouse(duckdb.connect(str(tmp_path / f"{'-'.join(d.name for d in drops)}.duckdb")))
        ingest_paths(wh, *drops)
        return _text(build_page(wh.con, "w", built=datetime(2026, 1, 1)).html)

    assert "Synthetic data. All 12 sessions were made by PULSE's generator (pulse_pipeline.synth, seed 9)" in (
        banner(made)
    )
    assert (
        "Mixed data: 12 of 13 sessions are synthetic, made by PULSE's generator (pulse_pipeline.synth, seed 9),"
        " beside 1 real one (by drop: made: 12 of 12)." in banner(made, real)
    )
    assert "synthetic" not in banner(real).lower()


def test_the_width_line_is_what_ppi_can_reach(page):
    """Section 2 names the line for what it is (from each arm's own ρ), never "best possible"."""
    text = _text(page)
    assert "best possible" not in text
    assert "best for PPI++ (ρ per arm)" in text and "from each arm's own ρ" in text
    # flagged as in section 1: planning's PPI++ (width 0.83) hollow, llm-backbone's (0.70) not
    assert "planning: show-plan vs no-plan: best 0.90, PPI++ 0.83 flagged, AIPW 1.12" in page
    assert "PPI++ 0.70," in page and "PPI++ 0.70 flagged" not in page


def test_benchmarks_one_unit_and_no_empty_intervals(page):
    text = _text(page)
    # ΔH in stars, like every rating difference of the page: 1.5 percentage points of the 0-1 scale is 0.06 stars
    assert "ΔH (stars)" in text and "percentage points of the 0–1" not in text
    assert "fix_bugs swe-bench +2.00 +0.06 40 / 40" in text
    # three clusters: no interval, and the coefficient means nothing; four in one exact order: chance 2/4! = 1/12
    assert "n too small (3 clusters; an interval needs 4)" in text and "meaningless: 3 clusters" in text
    assert "spearman -1.00 (interval: none at |r| = 1), meaningless: 4 clusters fall in one exact order by" in text
    assert "1 time in 12" in text and "[–, –]" not in text


def test_segments_mark_ppi_flagged_for_the_comparison():
    """Section 7 draws PPI++ as section 1 does: flagged for the comparison (EFFECTS: planning's PPI row), so
    flagged within its segments, in the figure's description, its caption and its numbers."""
    from pulse_pipeline.report.data import Rows
    from pulse_pipeline.report.sections.segments import segments_section

    segment = {**PLANNING, "dimension": "task_type", "segment": "fix_bugs", "n_labeled_treatment": 20}
    segment |= {"n_labeled_control": 20, "p_value": 0.5, "note": None}
    rows = [
        {**segment, "method": m, "effect": e, "ci_low": e - 0.1, "ci_high": e + 0.1}
        for m, e in (("naive_welch", 0.02), ("ppi", 0.03))
    ]
    effects = Rows(pl.DataFrame(EFFECTS, infer_schema_length=None), None)
    html = segments_section(Rows(pl.DataFrame(rows), None), effects).render(2)
    assert "fix_bugs (task type), PPI++: +0.030 [-0.070, +0.130] flagged" in html  # the figure's description
    assert "fix_bugs (task type), naive (Welch): +0.020 [-0.080, +0.120];" in html  # not flagged
    assert f"as for the whole comparison in section 1 (PPI++: {FLAG_SHIFT})" in html
    assert "<td>PPI++ (flagged)</td>" in html


def test_the_history_axis_stays_on_the_scale():
    """A first day's confidence sequence of ±2.7 on the 0-1 scale is cut at ±1, the largest difference the scale
    allows; a history well inside it gets its own range and a 5 % margin."""
    from pulse_pipeline.report.figures import Look, history_limits

    day = datetime(2025, 6, 1)
    wide = [Look(day, 0.05, -0.5, 0.6, -2.7, 2.6), Look(day, 0.04, -0.1, 0.2, -0.3, 0.4)]
    assert history_limits(wide) == (-1.0, 1.0)
    narrow = [Look(day, 0.05, 0.0, 0.1, -0.1, 0.2), Look(day, 0.04, 0.01, 0.09, -0.05, 0.15)]
    assert history_limits(narrow) == pytest.approx((-0.115, 0.215))


def test_figures_drawn_with_the_same_numbers_are_kept_and_give_the_same_page(warehouse, tmp_path, monkeypatch):
    """Issue 35: a live drop of ratings rebuilds the report at every run, and drawing its figures was most of it. A
    figure drawn with the same arguments as in the last build is read back from the cache folder: the page is the
    same to the byte as one drawn whole, a second build draws nothing, a figure whose numbers changed is drawn
    again, and figures no build uses any more are removed."""
    from pulse_pipeline.report import drawing, figures

    drawn: list[str] = []
    real_svg = figures.svg_of
    monkeypatch.setattr(figures, "svg_of", lambda fig, fig_id, *a: drawn.append(fig_id) or real_svg(fig, fig_id, *a))
    now = datetime(2026, 12, 4, 12, 0)
    cache = tmp_path / "figures"
    with duckdb.connect(str(warehouse), read_only=True) as con:
        whole = build_page(con, "pulse.duckdb", now).html
        every = len(drawn)
        assert every > 3
        for expected_draws in (every, 0):  # cold, then warm
            drawn.clear()
            with drawing.drawn_once(cache):
                assert build_page(con, "pulse.duckdb", now).html == whole
            assert len(drawn) == expected_draws
    assert len(list(cache.glob("*.svg"))) == every

    rows = [figures.Interval("naive", "naive", 0.1, 0.0, 0.2)]
    with drawing.drawn_once(cache):
        first = figures.forest("fig-x", "x", rows, None)
    drawn.clear()
    with drawing.drawn_once(cache):
        assert figures.forest("fig-x", "x", rows, None) == first and drawn == []
        moved = figures.forest("fig-x", "x", [figures.Interval("naive", "naive", 0.1, 0.0, 0.3)], None)
    assert drawn == ["fig-x"] and moved != first
    assert len(list(cache.glob("*.svg"))) == 2  # the page's figures were not used by this build: removed
