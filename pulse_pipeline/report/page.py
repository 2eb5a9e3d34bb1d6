"""The report page: one self-contained HTML document built from the warehouse's tables.

Sections follow issue 15's order: the effects per experiment, how much the unrated sessions helped, model
quality, rated against unrated sessions, what changed between arms (and cost), ratings against benchmarks,
effects per task type and cluster, the split check and power, the history, the design (unit, ask policy).
Every value from the warehouse is escaped (``html.escape``); the page loads nothing (no script, no external
stylesheet, font or image): the figures are inline SVG (``figures.py``).

Headline numbers are marked for machines: ``data-headline`` (the column), ``data-table``, ``data-where`` (the
row's key as JSON) and ``data-value`` (the full-precision number; the cell shows it rounded), so a test can
compare the page with the warehouse without parsing prose.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import duckdb
import polars as pl

from ..estimates.label_shift import WARN_ABOVE
from ..estimates.srm import ALARM_P
from . import data, figures
from .figures import STARS_PER_UNIT, Interval, method_style

esc = html.escape
METHOD_ORDER = ("naive_welch", "naive_bootstrap", "ppi", "crossppi", "aipw", "ppi_insample")
WIDTH_METHODS = ("ppi", "crossppi", "aipw")
TOO_FEW = "too few ratings in an arm"  # why a segment has no estimate (its note has the count)
HISTORY_METHODS = ("ppi", "naive_welch")  # without a chosen estimate: PPI's history, else the naive one
GLOSSARY = (
    ("naive", "the difference of the rated sessions' mean ratings (Welch interval, or a bootstrap)"),
    (
        "PPI++",
        "prediction-powered inference: the rated mean corrected with the model's predictions for every "
        "session, rated or not; narrower when the predictions track the ratings, valid when rated sessions are "
        "like the unrated ones",
    ),
    ("cross-PPI", "PPI with the predictions of the fold models, weight 1"),
    (
        "AIPW",
        "corrects for who rates (the chance a session is rated, learnt from its features); wider, but valid "
        "when rated sessions differ from unrated ones in what the features record",
    ),
    ("PPI in-sample", "the paper's PPI with a model fit on every rating: shown for comparison, never valid"),
)


@dataclass
class Page:
    """The document and what it holds (for the asset's metadata)."""

    html: str
    sections: int
    figures: int


@dataclass
class Section:
    anchor: str
    title: str
    parts: list[str] = field(default_factory=list)
    figures: int = 0

    def add(self, *html_parts: str) -> None:
        self.parts.extend(html_parts)

    def figure(self, svg: str, caption: str, numbers: str) -> None:
        """A figure with its caption, and the numbers it shows as a table under "The numbers"."""
        self.figures += 1
        self.add(
            f"<figure>{svg}<figcaption>{caption}</figcaption></figure>",
            f"<details><summary>The numbers</summary>{numbers}</details>",
        )

    def empty(self, reason: str) -> None:
        self.add(f'<p class="empty">Nothing to show: {esc(reason)}.</p>')

    def render(self, level: int) -> str:
        return f'<section id="{self.anchor}"><h{level}>{esc(self.title)}</h{level}>{"".join(self.parts)}</section>'


# ---------------------------------------------------------------- cells and tables


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: float | None, digits: int = 3, signed: bool = False) -> str:
    """The number as the page shows it: ``digits`` decimals (ASCII '-', so it pastes into a calculator), whole
    with thousands separators from 1 000 up (token counts, durations), '–' when missing."""
    if _missing(value):
        return "–"
    if abs(value) >= 1000:
        return f"{value:+,.0f}" if signed else f"{value:,.0f}"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def td(value: object, digits: int = 3, signed: bool = False) -> str:
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, float) or value is None:
        cls = "na" if _missing(value) else "num"
        return f'<td class="{cls}">{number(value, digits, signed)}</td>'
    if isinstance(value, int):
        return f'<td class="num">{value}</td>'
    return f"<td>{esc(str(value))}</td>"


def headline(value: float | None, table: str, column: str, where: dict, digits: int = 3, signed: bool = True) -> str:
    """A cell the browser test compares with ``SELECT column FROM table WHERE where``; a missing value is not
    a headline (nothing to compare)."""
    if _missing(value):
        return td(None)
    attrs = (
        f'data-headline="{esc(column)}" data-table="{esc(table)}" data-where="{esc(json.dumps(where))}"'
        f' data-value="{value!r}"'
    )
    return f'<td class="num" {attrs}>{number(value, digits, signed)}</td>'


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], caption: str | None = None) -> str:
    """An HTML table from header texts and rows of ready ``<td>`` cells, in a horizontally scrolling box."""
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    body = "".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f'<div class="scroll"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _pair(treatment: object, control: object) -> str:
    """Two counts, treatment / control, '–' for a missing one."""
    return " / ".join("–" if _missing(v) else str(v) for v in (treatment, control))


def _percent(value: float | None) -> str:
    return "–" if _missing(value) else f"{100 * value:+.1f} %"


def _comparison(treatment: str | None, control: str | None) -> str:
    return f"{treatment} vs {control}" if treatment is not None else f"{control} (one arm)"


def _slug(*parts: object) -> str:
    text = "-".join(str(p) for p in parts if p is not None)
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


# ---------------------------------------------------------------- 1. effects


def choose(rows: Sequence[dict]) -> tuple[dict | None, str]:
    """The estimate to read a comparison by, and why: PPI when it is valid and not flagged (narrowest of the
    trustworthy ones); AIPW when PPI is flagged (rated sessions unlike the rest: AIPW corrects for who rates);
    else the naive difference. None when no method has a valid number."""
    by = {r["method"]: r for r in rows if r["valid"] and not _missing(r["effect"])}
    if "ppi" in by and not by["ppi"]["flags"]:
        return by["ppi"], "PPI++ is valid and not flagged"
    if "aipw" in by and not by["aipw"]["flags"]:
        why = "PPI++ is flagged" if "ppi" in by else "PPI++ has no valid estimate"
        return by["aipw"], f"{why}, AIPW corrects for who rates"
    if "naive_welch" in by:
        return by["naive_welch"], "no model-assisted estimate is valid and unflagged"
    return None, "no method has a valid estimate"


def conclusion(rows: Sequence[dict], power: dict | None, n_comparisons: int) -> str:
    """One plain sentence (HTML) saying what the comparison lets one conclude, from the chosen estimate's
    interval and, when it holds zero, the minimum detectable effect (``estimates.power``, 80 % power)."""
    chosen, why = choose(rows)
    first = rows[0]
    treatment, control = esc(str(first["treatment"])), esc(str(first["control"]))
    if chosen is None:
        notes = "; ".join(sorted({r["note"] for r in rows if r["note"]}))
        return f"No conclusion: {esc(why)}" + (f" ({esc(notes)})." if notes else ".")
    name = method_style(chosen["method"]).label
    effect, low, high = chosen["effect"], chosen["ci_low"], chosen["ci_high"]
    span = f"{number(effect, 3, True)} (95 % interval {number(low, 3, True)} to {number(high, 3, True)})"
    stars = f"{number(effect * STARS_PER_UNIT, 2, True)} stars"
    if not _missing(low) and (low > 0 or high < 0):
        direction = "higher" if effect > 0 else "lower"
        text = f"<strong>{treatment} is rated {direction} than {control}</strong>: {span}, about {stars}, by {name}"
        if n_comparisons > 1 and not _missing(chosen["p_holm"]) and chosen["p_holm"] >= 0.05:
            text += (
                f"; after Holm's correction for the {n_comparisons} comparisons of this report it is not significant"
                f" (adjusted p = {chosen['p_holm']:.3f})"
            )
    else:
        text = f"<strong>No detectable difference</strong> between {treatment} and {control}: {span} by {name}"
        mde = None
        if power is not None:
            mde = power["mde_ppi"] if chosen["method"] in ("ppi", "crossppi") else power["mde_naive"]
        if not _missing(mde):
            text += (
                f"; the test could have detected {number(mde, 3)} or more"
                f" ({number(mde * STARS_PER_UNIT, 2)} stars, 80 % power)"
            )
    return f'{text}. <span class="why">({esc(why)}.)</span>'


def _method_rank(method: str) -> int:
    return METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER)


def effects_section(effects: data.Rows, power: data.Rows) -> Section:
    s = Section("effects", "1. Did the treatment change satisfaction?")
    s.add(
        "<p>Ratings are on a 0–1 scale: (stars − 1) / 4, so 0.25 is one star. Each comparison is a treatment arm "
        'against its control, by every method:</p><dl class="glossary">'
        + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in GLOSSARY)
        + "</dl>"
    )
    if effects.why_empty:
        s.empty(effects.why_empty)
        return s
    powers = {(r["experiment"], r["treatment"]): r for r in power.frame.to_dicts()} if power.why_empty is None else {}
    frame = effects.frame
    n_comparisons = frame.filter(pl.col("treatment").is_not_null()).select("experiment", "treatment").n_unique()
    for (experiment,), by_experiment in frame.group_by("experiment", maintain_order=True):
        s.add(f"<h3>Experiment {esc(experiment)}</h3>")
        for (treatment,), group in by_experiment.group_by("treatment", maintain_order=True):
            rows = sorted(group.to_dicts(), key=lambda r: _method_rank(r["method"]))
            control = rows[0]["control"]
            s.add(f"<h4>{esc(_comparison(treatment, control))}</h4>")
            if treatment is None:
                s.add(f"<p>{esc(rows[0]['note'] or 'single-arm experiment: nothing to compare')}.</p>")
                continue
            s.add(f'<p class="conclusion">{conclusion(rows, powers.get((experiment, treatment)), n_comparisons)}</p>')
            _effects_figure(s, experiment, treatment, control, rows)
    return s


def _effects_figure(s: Section, experiment: str, treatment: str, control: str, rows: list[dict]) -> None:
    naive = next((r["effect"] for r in rows if r["method"] == "naive_welch"), None)
    intervals = [
        Interval(method_style(r["method"]).label, r["method"], r["effect"], r["ci_low"], r["ci_high"], bool(r["flags"]))
        for r in rows
    ]
    flagged = [r for r in rows if r["flags"]]
    caption = (
        f"Effect of {esc(treatment)} against {esc(control)} by method, with 95 % intervals; the dotted line is the "
        "naive estimate, the grey line zero. Hollow markers and dashed intervals are flagged rows"
        + (
            ": " + "; ".join(f"{esc(method_style(r['method']).label)}: {esc(r['flags'])}" for r in flagged)
            if flagged
            else " (none here)"
        )
        + "."
    )
    where = {"experiment": experiment, "treatment": treatment}
    table_rows = [
        [
            td(method_style(r["method"]).label),
            headline(r["effect"], "estimates.experiment_effects", "effect", {**where, "method": r["method"]}),
            headline(r["ci_low"], "estimates.experiment_effects", "ci_low", {**where, "method": r["method"]}),
            headline(r["ci_high"], "estimates.experiment_effects", "ci_high", {**where, "method": r["method"]}),
            td(r["effect_stars"], 2, True),
            td(r["p_value"]),
            td(r["p_holm"]),
            td(_pair(r["n_labeled_treatment"], r["n_labeled_control"])),
            td(_pair(r["N_unlabeled_treatment"], r["N_unlabeled_control"])),
            td(r["valid"]),
            td(r["flags"] or ""),
            td(r["note"] or ""),
        ]
        for r in rows
    ]
    numbers = table(
        [
            "method",
            "effect",
            "95 % low",
            "95 % high",
            "effect (stars)",
            "p",
            "p (Holm)",
            "rated T / C",
            "unrated T / C",
            "valid",
            "flags",
            "note",
        ],
        table_rows,
    )
    if all(_missing(r["effect"]) for r in rows):  # nothing to draw: the rows and their notes
        s.add(numbers)
        return
    fig_id = f"fig-effects-{_slug(experiment, treatment)}"
    svg = figures.forest(fig_id, f"{experiment}: {treatment} vs {control}", intervals, naive)
    s.figure(svg, caption, numbers)


# ---------------------------------------------------------------- 2. the unrated sessions


def width_section(effects: data.Rows) -> Section:
    s = Section("unrated", "2. How much did the unrated sessions help?")
    s.add(
        "<p>PPI++ and AIPW use the model's predictions for the unrated sessions. How much narrower than naive their "
        "interval can be is bounded by ρ, the out-of-fold correlation of predictions with ratings: at best "
        "√(1 − ρ²·N/(n + N)) of the naive width, with n rated and N unrated sessions. A method far left of that "
        "bound is too good to be true (flagged &quot;predictions may have seen the labels&quot;).</p>"
    )
    if effects.why_empty:
        s.empty(effects.why_empty)
        return s
    compared = effects.frame.filter(pl.col("treatment").is_not_null())
    rows, cells = [], []
    for (experiment, treatment), group in compared.group_by(["experiment", "treatment"], maintain_order=True):
        by = {r["method"]: r for r in group.to_dicts()}
        first = next(iter(by.values()))
        label = f"{experiment}: {treatment} vs {first['control']}"
        widths = {m: by[m]["width_vs_naive"] for m in WIDTH_METHODS if m in by}
        if all(_missing(v) for v in [first["best_width_theory"], *widths.values()]):
            continue  # an arm too small for any interval: section 1 shows why
        rows.append(figures.WidthRow(label, first["best_width_theory"], widths))
        key = {"experiment": experiment, "treatment": treatment}
        n = (first["n_labeled_treatment"] or 0) + (first["n_labeled_control"] or 0)
        big_n = (first["N_unlabeled_treatment"] or 0) + (first["N_unlabeled_control"] or 0)
        ppi_key = {**key, "method": "ppi"} if "ppi" in by else None
        cells.append(
            [
                td(label),
                headline(by["ppi"]["oof_rho"], "estimates.experiment_effects", "oof_rho", ppi_key, signed=False)
                if ppi_key
                else td(first["oof_rho"]),
                td(n),
                td(big_n),
                headline(
                    by["ppi"]["best_width_theory"],
                    "estimates.experiment_effects",
                    "best_width_theory",
                    ppi_key,
                    signed=False,
                )
                if ppi_key
                else td(first["best_width_theory"]),
                *[
                    headline(
                        by[m]["width_vs_naive"],
                        "estimates.experiment_effects",
                        "width_vs_naive",
                        {**key, "method": m},
                        signed=False,
                    )
                    if m in by
                    else td(None)
                    for m in WIDTH_METHODS
                ],
            ]
        )
    if not rows:
        s.empty("no comparison has an interval width: no experiment with two arms, or arms too small")
        return s
    svg = figures.width_gain("fig-width", rows)
    caption = (
        "Interval width of each model-assisted method divided by the naive width (1 = no gain), per comparison; "
        "the black bar is the best PPI can do for the measured ρ and the numbers of rated and unrated sessions."
    )
    numbers = table(
        ["comparison", "ρ (out of fold)", "rated n", "unrated N", "best possible", "PPI++", "cross-PPI", "AIPW"],
        cells,
    )
    s.figure(svg, caption, numbers)
    return s


# ---------------------------------------------------------------- 3. model quality


def model_section(calibration: data.Rows, cv: data.Rows) -> Section:
    s = Section("model", "3. How good is the satisfaction model?")
    s.add("<h3>Calibration</h3>")
    if calibration.why_empty:
        s.empty(calibration.why_empty)
    else:
        f = calibration.frame
        svg = figures.calibration(
            "fig-calibration", f["mean_prediction"].to_list(), f["mean_rating"].to_list(), f["n"].to_list()
        )
        caption = (
            "Rated sessions sorted by their out-of-fold prediction and cut into ten groups of equal size: each "
            "point is a group's mean prediction against its mean rating. On the dashed diagonal the predictions "
            "are right on average; a flatter curve means the model shrinks towards the mean."
        )
        numbers = table(
            ["decile", "sessions", "mean prediction (stars)", "mean rating (stars)"],
            [[td(r["decile"]), td(r["n"]), td(r["mean_prediction"], 2), td(r["mean_rating"], 2)] for r in f.to_dicts()],
        )
        s.figure(svg, caption, numbers)
    s.add(
        "<h3>Models compared (the paper's Table 2)</h3><p>Out-of-fold error in stars over repeated cross-validation "
        "(mean ± sd over seeds): MSE and MAE, lower is better; Pearson r, higher is better. <em>constant</em> "
        "predicts the mean rating: a model no better than it is not used (λ = 0).</p>"
    )
    if cv.why_empty:
        s.empty(cv.why_empty)
        return s
    preferred = ["mse", "mae", "pearson"]  # the paper's column order; any other metric after them
    metrics = sorted(set(cv.frame["metric"]), key=lambda m: (preferred.index(m) if m in preferred else 9, m))
    by_model: dict[str, dict] = {}
    for r in cv.frame.to_dicts():
        by_model.setdefault(r["model"], {"chosen": False})[r["metric"]] = r
        by_model[r["model"]]["chosen"] |= bool(r["chosen"])
    order = sorted(by_model, key=lambda m: (not by_model[m]["chosen"], m))
    cells = []
    for model in order:
        entry = by_model[model]
        label = f"{model} (chosen)" if entry["chosen"] else model
        cells.append(
            [f'<th scope="row">{esc(label)}</th>']
            + [td(f"{number(entry[m]['mean'])} ± {number(entry[m]['sd'])}" if m in entry else "–") for m in metrics]
            + [td(next(iter(v["n_labeled"] for k, v in entry.items() if k != "chosen")))]
        )
    s.add(table(["model", *metrics, "rated sessions"], cells))
    return s


# ---------------------------------------------------------------- 4. rated vs unrated


def shift_section(shift: data.Rows, effects: data.Rows) -> Section:
    s = Section("shift", "4. Do rated sessions look like unrated ones?")
    s.add(
        "<p>Users choose which sessions to rate. PPI++ assumes rated sessions are like the unrated ones; the "
        "rank-biserial correlation below measures how far apart they are on each feature (0: no difference, "
        f"±1: every rated session above or below every unrated one; the check warns beyond ±{WARN_ABOVE}).</p>"
    )
    if shift.why_empty:
        s.empty(shift.why_empty)
        return s
    f = shift.frame
    top = f.row(0, named=True)
    flagged = 0
    if effects.why_empty is None:
        flagged = effects.frame.filter(
            pl.col("method").is_in(["ppi", "crossppi"]) & pl.col("flags").str.contains("not representative")
        ).height
    large = abs(top["rank_biserial"]) > WARN_ABOVE
    if large or flagged:
        advice = (
            "<strong>Trust AIPW over PPI++</strong>: rated sessions differ from the rest"
            + (f" ({flagged} PPI row(s) flagged &quot;rated sessions are not representative&quot;)" if flagged else "")
            + ", so PPI's correction averages the model's errors over sessions unlike the others; AIPW reweights "
            "the rated sessions by their chance of being rated and stays valid as long as the features record "
            "what drives rating."
        )
    else:
        advice = (
            "<strong>PPI++ can be trusted</strong>: no feature separates rated from unrated sessions beyond the "
            "threshold and no PPI row is flagged, so its narrower interval holds."
        )
    s.add(
        f'<p class="conclusion">The largest shift is in <em>{esc(top["feature"])}</em> (rank-biserial '
        f"{number(top['rank_biserial'], 2, True)}: mean {number(top['mean_rated'], 2)} rated against "
        f"{number(top['mean_unrated'], 2)} unrated). {advice}</p>"
    )
    svg = figures.bars(
        "fig-shift",
        "Rated vs unrated sessions: largest differences",
        f["feature"].to_list(),
        f["rank_biserial"].to_list(),
        [abs(v) > WARN_ABOVE for v in f["rank_biserial"].to_list()],
        "rank-biserial correlation, rated vs unrated (positive: higher in rated sessions)",
        (f"beyond ±{WARN_ABOVE} (the check warns)", f"within ±{WARN_ABOVE}"),
    )
    numbers = table(
        ["feature", "rated", "unrated", "mean rated", "mean unrated", "rank-biserial", "p (BH)"],
        [
            [
                td(r["feature"]),
                td(r["n_rated"]),
                td(r["n_unrated"]),
                td(r["mean_rated"]),
                td(r["mean_unrated"]),
                td(r["rank_biserial"], 3, True),
                td(r["p_bh"]),
            ]
            for r in f.to_dicts()
        ],
    )
    s.figure(svg, "The features whose distribution differs most between rated and unrated sessions.", numbers)
    return s


# ---------------------------------------------------------------- 5. what changed between arms


def features_section(differences: data.Rows, cost: data.Rows) -> Section:
    s = Section("features", "5. What did the agent do differently?")
    s.add(
        "<p>Per comparison, the session features whose mean differs most between the arms over all sessions "
        "(the paper's Figure 4, bottom), as a standardized difference: (treatment − control) divided by the "
        "arms' pooled standard deviation, so features of any scale compare. Solid bars "
        "remain significant after the Benjamini–Hochberg correction for testing every feature (adjusted "
        "p &lt; 0.05).</p>"
    )
    if differences.why_empty:
        s.empty(differences.why_empty)
    else:
        for (experiment, treatment), group in differences.frame.group_by(
            ["experiment", "treatment"], maintain_order=True
        ):
            rows = group.to_dicts()
            control = rows[0]["control"]
            s.add(f"<h3>{esc(experiment)}: {esc(_comparison(treatment, control))}</h3>")
            if treatment is None:
                s.add(f"<p>{esc(rows[0]['note'] or 'single-arm experiment')}.</p>")
                continue
            svg = figures.bars(
                f"fig-features-{_slug(experiment, treatment)}",
                f"{experiment}: features that differ most, {treatment} vs {control}",
                [r["feature"] for r in rows],
                [r["standardized"] for r in rows],
                [not _missing(r["p_bh"]) and r["p_bh"] < 0.05 for r in rows],
                "standardized difference: (treatment − control) ÷ pooled sd (0.2 small, 0.5 medium, 0.8 large)",
                ("significant (BH-adjusted p < 0.05)", "not significant"),
            )
            numbers = table(
                [
                    "feature",
                    f"mean {treatment}",
                    f"mean {control}",
                    "difference",
                    "standardized",
                    "relative",
                    "test",
                    "p",
                    "p (BH)",
                ],
                [
                    [
                        td(r["feature"]),
                        td(r["mean_treatment"]),
                        td(r["mean_control"]),
                        td(r["difference"], 3, True),
                        td(r["standardized"], 2, True),
                        td(_percent(r["relative_difference"])),
                        td(r["test"]),
                        td(r["p_value"]),
                        td(r["p_bh"]),
                    ]
                    for r in rows
                ],
            )
            s.figure(svg, f"Features of {esc(treatment)} sessions against {esc(control)} sessions.", numbers)
    s.add("<h3>Cost per session</h3>")
    if cost.why_empty:
        s.empty(cost.why_empty)
        return s
    cells = []
    for r in cost.frame.to_dicts():
        key = {
            "experiment": r["experiment"],
            "treatment": r["treatment"],
            "population": "all",
            "feature": data.COST_FEATURE,
        }
        cells.append(
            [
                td(f"{r['experiment']}: {r['treatment']} vs {r['control']}"),
                headline(r["mean_treatment"], "estimates.feature_comparisons", "mean_treatment", key, 4, False),
                headline(r["mean_control"], "estimates.feature_comparisons", "mean_control", key, 4, False),
                td(r["difference"], 4, True),
                td(_percent(r["relative_difference"])),
                td(r["p_value"]),
                td(_pair(r["n_treatment"], r["n_control"])),
            ]
        )
    s.add(
        "<p>The agent's LLM cost per session in US dollars (the paper's Table 10), mean over all sessions of "
        "each arm; the p-value is Welch's test of the difference.</p>",
        table(
            ["comparison", "treatment ($)", "control ($)", "difference ($)", "relative", "p", "sessions T / C"], cells
        ),
    )
    return s


# ---------------------------------------------------------------- 6. benchmarks


def benchmark_section(points: data.Rows, correlation: data.Rows, left_out: data.Rows) -> Section:
    s = Section("benchmarks", "6. Do ratings agree with benchmarks?")
    s.add(
        "<p>Per task cluster, ΔH is the difference of mean ratings between two models (percentage points of the "
        "0–1 scale) and ΔB the difference of their benchmark scores (<code>benchmarks.csv</code>); the paper's "
        "Table 3. Points on a rising line mean users notice what benchmarks measure. With a handful of clusters "
        "the intervals are wide.</p>"
    )
    if correlation.why_empty:
        s.empty(correlation.why_empty)
        return s
    corr_by = {}
    for r in correlation.frame.to_dicts():
        corr_by.setdefault((r["treatment"], r["control"]), []).append(r)
    used = points.frame if points.why_empty is None else pl.DataFrame()
    for (treatment, control), corr in corr_by.items():
        label = f"{treatment} vs {control}"
        s.add(f"<h3>{esc(label)}</h3>")
        summary = "; ".join(
            f"{r['measure']} {number(r['coefficient'], 2, True)} [{number(r['ci_low'], 2, True)}, "
            f"{number(r['ci_high'], 2, True)}]"
            for r in corr
        )
        cells = [
            [
                td(r["measure"]),
                td(r["n_clusters"]),
                headline(
                    r["coefficient"],
                    "estimates.benchmark_correlation",
                    "coefficient",
                    {"treatment": treatment, "control": control, "measure": r["measure"]},
                ),
                headline(
                    r["ci_low"],
                    "estimates.benchmark_correlation",
                    "ci_low",
                    {"treatment": treatment, "control": control, "measure": r["measure"]},
                ),
                headline(
                    r["ci_high"],
                    "estimates.benchmark_correlation",
                    "ci_high",
                    {"treatment": treatment, "control": control, "measure": r["measure"]},
                ),
                td(r["note"] or ""),
            ]
            for r in corr
        ]
        corr_table = table(["measure", "clusters", "coefficient", "95 % low", "95 % high", "note"], cells)
        mine = (
            used.filter((pl.col("treatment") == treatment) & (pl.col("control") == control)).to_dicts()
            if not used.is_empty()
            else []
        )
        if len(mine) < 2:
            reasons = (
                [
                    f"{r['reason']} ({r['n']} point{'s' if r['n'] > 1 else ''})"
                    for r in left_out.frame.to_dicts()
                    if r["treatment"] == treatment and r["control"] == control
                ]
                if left_out.why_empty is None
                else []
            )
            why = f" Left out: {'; '.join(reasons)}." if reasons else ""
            s.add(
                corr_table,
                f'<p class="empty">Fewer than two clusters with both ΔB and ΔH for {esc(label)}: no figure.'
                f"{esc(why)}</p>",
            )
            continue
        pts = [figures.Point(p["cluster"], p["delta_b"], p["delta_h"]) for p in mine]
        svg = figures.scatter_fit(
            f"fig-benchmark-{_slug(treatment, control)}",
            f"Rating difference against benchmark difference: {label}",
            pts,
            "ΔB: benchmark score difference",
            "ΔH: rating difference (percentage points)",
            summary,
        )
        numbers = table(
            ["cluster", "benchmark", "ΔB", "ΔH", "rated T / C"],
            [
                [
                    td(p["cluster"]),
                    td(p["benchmark"]),
                    td(p["delta_b"], 2, True),
                    td(p["delta_h"], 2, True),
                    td(_pair(p["n_treatment"], p["n_control"])),
                ]
                for p in mine
            ],
        )
        s.figure(
            svg,
            f"Each point is a task cluster; the dashed line is the least-squares fit. {esc(summary)}.",
            corr_table + numbers,
        )
    return s


# ---------------------------------------------------------------- 7. segments


def segments_section(segments: data.Rows) -> Section:
    s = Section("segments", "7. Effects per task type and development cluster")
    s.add(
        "<p>The naive and PPI++ effect within each task type and development cluster with enough ratings in both "
        "arms. Many small estimates: some will look different by chance; read them as where to look next, not as "
        "findings.</p>"
    )
    if segments.why_empty:
        s.empty(segments.why_empty)
        return s
    for (experiment, treatment), group in segments.frame.group_by(["experiment", "treatment"], maintain_order=True):
        rows = group.to_dicts()
        control = rows[0]["control"]
        s.add(f"<h3>{esc(experiment)}: {esc(_comparison(treatment, control))}</h3>")
        estimated = [r for r in rows if not _missing(r["effect"])]
        skipped: dict[str, set[str]] = {}
        for r in rows:  # a row without a segment speaks for the whole comparison: its note is shown below
            if _missing(r["effect"]) and r["dimension"] and r["segment"]:
                skipped.setdefault(r["dimension"].replace("_", " ") + "s", set()).add(r["segment"])
        if estimated:
            intervals = [
                Interval(
                    f"{r['segment']} ({r['dimension'].replace('_', ' ')})",
                    r["method"],
                    r["effect"],
                    r["ci_low"],
                    r["ci_high"],
                )
                for r in estimated
            ]
            svg = figures.segments(
                f"fig-segments-{_slug(experiment, treatment)}",
                f"{experiment}: {treatment} vs {control} within segments",
                intervals,
            )
            numbers = table(
                ["dimension", "segment", "method", "effect", "95 % low", "95 % high", "rated T / C", "p"],
                [
                    [
                        td(r["dimension"]),
                        td(r["segment"]),
                        td(method_style(r["method"]).label),
                        td(r["effect"], 3, True),
                        td(r["ci_low"], 3, True),
                        td(r["ci_high"], 3, True),
                        td(_pair(r["n_labeled_treatment"], r["n_labeled_control"])),
                        td(r["p_value"]),
                    ]
                    for r in estimated
                ],
            )
            s.figure(
                svg,
                "Effect with its 95 % interval in each segment with enough ratings; circles naive, diamonds PPI++.",
                numbers,
            )
        else:
            notes = sorted({r["note"] for r in rows if r["note"]})
            s.add(
                f'<p class="empty">No segment has enough ratings in both arms ({esc(notes[0] if notes else TOO_FEW)}'
                ").</p>"
            )
        if skipped and estimated:
            lists = "; ".join(f"{dimension}: {', '.join(sorted(names))}" for dimension, names in skipped.items())
            s.add(f'<p class="small">Not estimated ({esc(TOO_FEW)}): {esc(lists)}.</p>')
    return s


# ---------------------------------------------------------------- 8. split and power


def split_power_section(srm: data.Rows, power: data.Rows) -> Section:
    s = Section("split", "8. Was the split as designed, and how small an effect could we see?")
    s.add(
        "<p>The split check compares each arm's share of the randomized units with the intended share "
        f"(χ² test): p &lt; {ALARM_P} means the assignment itself is broken and every comparison in the "
        "experiment is suspect, whatever the estimator.</p>"
    )
    if srm.why_empty:
        s.empty(srm.why_empty)
    else:
        broken = sorted({r["experiment"] for r in srm.frame.to_dicts() if r["mismatch"]})
        verdict = (
            f"<strong>Split broken</strong> in {esc(', '.join(broken))}: its comparisons cannot be trusted."
            if broken
            else "Every experiment's split matches its design."
        )
        s.add(f'<p class="conclusion">{verdict}</p>')
        s.add(
            table(
                ["experiment", "arm", "unit", "units", "expected", "share", "intended", "p", "broken"],
                [
                    [
                        td(r["experiment"]),
                        td(r["arm"]),
                        td(r["unit"]),
                        td(r["units"]),
                        td(r["expected_units"], 1),
                        td(r["observed_share"]),
                        td(r["intended_share"]),
                        headline(
                            r["p_value"],
                            "estimates.srm_check",
                            "p_value",
                            {"experiment": r["experiment"], "arm": r["arm"]},
                            3,
                            False,
                        ),
                        td(r["mismatch"]),
                    ]
                    for r in srm.frame.to_dicts()
                ],
            )
        )
    s.add(
        "<h3>Power</h3><p>The minimum detectable effect (MDE): the smallest true difference the current ratings "
        "would detect 80 % of the time at the 5 % level, naive and with PPI++; and the ratings per arm a target "
        "effect needs.</p>"
    )
    if power.why_empty:
        s.empty(power.why_empty)
        return s
    cells = []
    for r in power.frame.to_dicts():
        key = {"experiment": r["experiment"], "treatment": r["treatment"]}
        cells.append(
            [
                td(f"{r['experiment']}: {_comparison(r['treatment'], r['control'])}"),
                td(_pair(r["n_labeled_treatment"], r["n_labeled_control"])),
                td(r["oof_rho"], 2),
                headline(r["mde_naive"], "estimates.power", "mde_naive", key, 3, False),
                headline(r["mde_ppi"], "estimates.power", "mde_ppi", key, 3, False),
                td(r["target_effect"]),
                td(r["labels_per_arm_naive"]),
                td(r["labels_per_arm_ppi"]),
                td(r["note"] or ""),
            ]
        )
    s.add(
        table(
            [
                "comparison",
                "rated T / C",
                "ρ",
                "MDE naive",
                "MDE PPI++",
                "target",
                "ratings/arm naive",
                "ratings/arm PPI++",
                "note",
            ],
            cells,
        )
    )
    return s


# ---------------------------------------------------------------- 9. history


def history_section(history: data.Rows, effects: data.Rows) -> Section:
    s = Section("history", "9. How did the estimate evolve?")
    s.add(
        "<p>The estimate as it stood at the end of each day. The dashed 95 % interval is valid for one look "
        "planned in advance; looking every day and stopping when it first excludes zero finds differences that "
        "are not there. The dotted confidence sequence is valid on every day at once: stopping the first day it "
        "excludes zero is safe.</p>"
    )
    if history.why_empty:
        s.empty(history.why_empty)
        return s
    chosen = {}  # the method section 1 reads each comparison by, so both sections tell one story
    if effects.why_empty is None:
        for (experiment, treatment), group in effects.frame.group_by(["experiment", "treatment"]):
            row, _ = choose(group.to_dicts())
            chosen[(experiment, treatment)] = row["method"] if row else None
    for (experiment, treatment), group in history.frame.group_by(["experiment", "treatment"], maintain_order=True):
        methods = set(group["method"].to_list())
        preferred = [chosen.get((experiment, treatment)), *HISTORY_METHODS]
        method = next((m for m in preferred if m in methods), sorted(methods)[0])
        rows = group.filter((pl.col("method") == method) & pl.col("effect").is_not_null()).to_dicts()
        control = group["control"][0]
        name = method_style(method).label
        s.add(f"<h3>{esc(experiment)}: {esc(_comparison(treatment, control))} ({esc(name)})</h3>")
        if len(rows) < 2:
            notes = sorted({n for n in group["note"].to_list() if n})
            s.add(f'<p class="empty">Fewer than two days with an estimate{": " + esc(notes[0]) if notes else ""}.</p>')
            continue
        looks = [
            figures.Look(r["day"], r["effect"], r["ci_low"], r["ci_high"], r["cs_low"], r["cs_high"])
            for r in rows
            if not any(_missing(r[c]) for c in ("ci_low", "ci_high", "cs_low", "cs_high"))
        ]
        first_fixed = next((r["day"] for r in rows if r["excludes_zero_fixed"]), None)
        first_cs = next((r["day"] for r in rows if r["excludes_zero_cs"]), None)
        stop = (
            f"The confidence sequence first excluded zero on {first_cs:%Y-%m-%d}: a team could have stopped then."
            if first_cs
            else "The confidence sequence never excluded zero: no day was safe to stop on with a difference."
        )
        fixed = (
            f" The one-look interval first excluded zero on {first_fixed:%Y-%m-%d}."
            if first_fixed
            else " The one-look interval never excluded zero."
        )
        s.add(f"<p>{esc(stop + fixed)}</p>")
        if len(looks) < 2:
            continue
        svg = figures.history(
            f"fig-history-{_slug(experiment, treatment)}", f"{experiment}: {treatment} vs {control}, {name}", looks
        )
        numbers = table(
            ["day", "sessions", "rated", "effect", "95 % low", "95 % high", "sequence low", "sequence high"],
            [
                [
                    td(f"{r['day']:%Y-%m-%d}"),
                    td(r["n_sessions"]),
                    td(r["n_rated"]),
                    td(r["effect"], 3, True),
                    td(r["ci_low"], 3, True),
                    td(r["ci_high"], 3, True),
                    td(r["cs_low"], 3, True),
                    td(r["cs_high"], 3, True),
                ]
                for r in rows
            ],
        )
        s.figure(
            svg,
            f"{esc(name)} estimate of {esc(treatment)} against {esc(control)} by day, with the one-look "
            "interval (dashed) and the always-valid confidence sequence (dotted).",
            numbers,
        )
    return s


# ---------------------------------------------------------------- 10. design


def design_section(units: data.Rows, policy: data.Rows) -> Section:
    s = Section("design", "10. The design: randomization unit and ask policy")
    s.add(
        "<p>The unit is what was randomized: a <em>session</em>, or a <em>user</em> whose sessions all get one arm "
        "(then intervals are clustered by user, since one user's sessions are not independent).</p>"
    )
    if units.why_empty:
        s.empty(units.why_empty)
    else:
        s.add(
            table(
                ["experiment", "unit", "how it was decided", "sessions left out"],
                [
                    [td(r["experiment"]), td(r["unit"]), td(r["unit_source"]), td(r["sessions_excluded"])]
                    for r in units.frame.to_dicts()
                ],
            )
        )
    s.add(
        "<h3>Ask policy</h3><p>Where to show the rating widget: a session is asked with probability "
        "q(x) = min(1, max(floor, multiplier · exp(intercept + Σ coefficient · (t(x) − mean) / sd))), higher "
        "where the model is expected to err more, scaled to the daily budget of asks.</p>"
    )
    if policy.why_empty:
        s.empty(policy.why_empty)
        return s
    rows = policy.frame.to_dicts()
    first = rows[0]
    if first["note"] and all(_missing(r["coefficient"]) for r in rows):
        s.empty(f"estimates.ask_policy has no fitted policy: {first['note']}")
        return s
    s.add(
        f"<p>Budget {number(first['budget_per_day'], 1)} asks a day out of {number(first['sessions_per_day'], 1)} "
        f"sessions a day (expected {number(first['expected_asks_per_day'], 1)}); floor "
        f"{number(first['floor'], 3)}; fitted on {first['fitted_on_ratings']} ratings.</p>",
        table(
            ["term", "transform", "mean", "sd", "coefficient"],
            [
                [td(r["term"]), td(r["transform"] or ""), td(r["mean"]), td(r["sd"]), td(r["coefficient"], 3, True)]
                for r in rows
            ],
        ),
    )
    return s


# ---------------------------------------------------------------- the page


STYLESHEET = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #111;
       max-width: 64rem; margin: 0 auto; padding: 1rem 1.5rem 4rem; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.5rem; border-bottom: 2px solid #ccc; } h3 { margin-top: 1.8rem; }
h4 { margin: 1.2rem 0 .3rem; }
nav ol { columns: 2; } .meta, .small, .why { color: #444; font-size: .9em; }
.conclusion { background: #f3f6fa; border-left: 4px solid #0072B2; padding: .5rem .8rem; }
.empty { background: #fff7e6; border-left: 4px solid #E69F00; padding: .5rem .8rem; }
figure { margin: 1rem 0; } figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .9em; color: #333; margin-top: .3rem; }
details { margin: .3rem 0 1rem; } summary { cursor: pointer; color: #0057a0; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: .85em; margin: .5rem 0; }
th, td { border-bottom: 1px solid #ddd; padding: .25rem .5rem; text-align: left; vertical-align: top; }
td.num, td.na { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
thead th { border-bottom: 2px solid #999; }
dl.glossary { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; font-size: .9em; }
dl.glossary dt { font-weight: 600; } dl.glossary dd { margin: 0; }
@media print { nav { display: none; } }
"""


def build_page(con: duckdb.DuckDBPyConnection, source: str, built: datetime) -> Page:
    """The whole report from the warehouse open on ``con``; ``source`` (the warehouse's path) and ``built``
    (when) are shown in its header."""
    effects = data.effects(con)
    power = data.power(con)
    sections = [
        effects_section(effects, power),
        width_section(effects),
        model_section(data.calibration(con), data.cv_metrics(con)),
        shift_section(data.label_shift(con), effects),
        features_section(data.feature_differences(con), data.cost(con)),
        benchmark_section(data.benchmark_points(con), data.benchmark_correlation(con), data.benchmark_left_out(con)),
        segments_section(data.segment_effects(con)),
        split_power_section(data.srm(con), power),
        history_section(data.history(con), effects),
        design_section(data.units(con), data.ask_policy(con)),
    ]
    toc = "".join(f'<li><a href="#{s.anchor}">{esc(s.title.split(". ", 1)[1])}</a></li>' for s in sections)
    body = "".join(s.render(2) for s in sections)
    document = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>PULSE report</title><style>{STYLESHEET}</style></head><body>"
        "<header><h1>PULSE report: user satisfaction by experiment</h1>"
        f'<p class="meta">Built {built:%Y-%m-%d %H:%M} UTC from <code>{esc(source)}</code>. Every number comes from '
        "that warehouse; each figure's numbers are under &quot;The numbers&quot;.</p></header>"
        f'<nav aria-label="Sections"><ol>{toc}</ol></nav><main>{body}</main></body></html>\n'
    )
    return Page(document, len(sections), sum(s.figures for s in sections))
