"""The report page: one self-contained HTML document built from the warehouse's tables.

The page opens with the answer (issue 33): a banner when sessions were made by the generator (``data.corpus``), then
one row per comparison (``summary_section``: the conclusion, the method it is read by, the effect and its interval
in stars, the width against naive), from the same ``verdict`` section 1's sentences use. The detail follows in
issue 15's order: the effects per experiment, how much the unrated sessions helped, model
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
from ..stars import label_difference_in_stars
from . import data, figures
from .figures import Interval, method_style

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


# ---------------------------------------------------------------- the answer, and what the data are


def _comparisons(effects: pl.DataFrame) -> int:
    return effects.filter(pl.col("treatment").is_not_null()).select("experiment", "treatment").n_unique()


def summary_section(effects: data.Rows) -> Section:
    """The answer first: one row per comparison with its conclusion, the method it is read by (``choose``), the
    effect and its 95 % interval in stars, and that method's interval width against naive. Rows carry
    ``data-comparison`` and their cells ``data-field``, so the browser test compares them with the warehouse."""
    s = Section("summary", "The answer: did each change make users happier?")
    if effects.why_empty:
        s.empty(effects.why_empty)
        return s
    frame = effects.frame
    n_comparisons = _comparisons(frame)
    cells, single = [], []
    for (experiment, treatment), group in frame.group_by(["experiment", "treatment"], maintain_order=True):
        rows = sorted(group.to_dicts(), key=lambda r: _method_rank(r["method"]))
        control = rows[0]["control"]
        if treatment is None:
            single.append(f"{experiment} ({control} only)")
            continue
        found = verdict(rows, n_comparisons)
        chosen = found.chosen or {}
        short = esc(found.short)
        notes = "; ".join(sorted({r["note"] for r in rows if r["note"]})) if not chosen else ""
        why = f"{found.why} ({notes})" if notes else found.why
        low, high = chosen.get("ci_low"), chosen.get("ci_high")
        interval = "–" if _missing(low) or _missing(high) else f"{stars(low)} to {stars(high)}"
        method = method_style(chosen["method"]).label if chosen else "–"
        key = esc(json.dumps({"experiment": experiment, "treatment": treatment}))
        cells.append(
            f'<tr data-comparison="{key}"><th scope="row">{esc(experiment)}: {esc(treatment)} vs {esc(control)}</th>'
            f'<td data-field="conclusion">{f"<strong>{short}</strong>" if found.direction else short}</td>'
            f'<td><span data-field="method">{esc(method)}</span><br><span class="why">{esc(why)}</span></td>'
            f'<td class="num" data-field="effect_stars">{stars(chosen.get("effect"))}</td>'
            f'<td class="num" data-field="interval_stars">{interval}</td>'
            f'<td class="num" data-field="width_vs_naive">{number(chosen.get("width_vs_naive"), 2)}</td></tr>'
        )
    if cells:
        head = "".join(
            f'<th scope="col">{h}</th>'
            for h in (
                "comparison",
                "conclusion",
                "read by",
                "effect (stars)",
                "95 % interval (stars)",
                "interval width ÷ naive",
            )
        )
        s.add(
            f'<div class="scroll"><table class="summary"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(cells)}</tbody></table></div>",
            "<p class=\"small\">Effect: the treatment arm's mean rating minus the control arm's, in stars (ratings "
            "are 1 to 5 stars; the sections below use the 0–1 scale, (stars − 1) / 4, so one star there is 0.25). "
            "Each comparison is read by PPI++ when it is valid and not flagged, else by AIPW, else by the naive "
            'difference (<a href="#effects">section 1</a> shows every method). Interval width ÷ naive below 1: '
            'the unrated sessions made the interval narrower (<a href="#unrated">section 2</a>).</p>',
        )
    if single:
        s.add(f'<p class="small">Not compared (a single arm): {esc("; ".join(single))}.</p>')
    return s


def synthetic_banner(corpus: data.Rows) -> str:
    """A banner when any session the analysis uses was made by a generator (``data.corpus``): all of them, or
    how many of which drops beside real ones. Empty when none is."""
    if corpus.why_empty:
        return ""
    rows = corpus.frame.to_dicts()
    made = [r for r in rows if r["synthetic"]]
    if not made:
        return ""
    total, synthetic = sum(r["sessions"] for r in rows), sum(r["synthetic"] for r in made)
    generators = sorted({g for r in made for g in (r["generators"] or "").split(", ") if g})
    seeds = sorted({x for r in made for x in (r["seeds"] or "").split(", ") if x}, key=lambda x: (len(x), x))
    source = f"{', '.join(generators)}" + (f", seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}" if seeds else "")
    if synthetic == total:
        text = (
            f"<strong>Synthetic data.</strong> All {total:,} sessions were made by PULSE's generator ({esc(source)}): "
            "the numbers show how the pipeline works, not how real users feel."
        )
    else:
        drops = "; ".join(
            f"{esc(r['drop_id'])}: {r['synthetic']:,} of {r['sessions']:,}" for r in rows if r["synthetic"]
        )
        real = total - synthetic
        text = (
            f"<strong>Mixed data: {synthetic:,} of {total:,} sessions are synthetic</strong>, made by PULSE's "
            f"generator ({esc(source)}), beside {real:,} real one{'s' if real != 1 else ''} (by drop: {drops}). "
            "Every effect "
            "below mixes made-up sessions with real ones: remove the synthetic drops before reading them as "
            "users' opinions."
        )
    return f'<p class="banner" role="note" data-synthetic="{synthetic}" data-sessions="{total}">{text}</p>'


# ---------------------------------------------------------------- 1. effects


def choose(rows: Sequence[dict]) -> tuple[dict | None, str]:
    """The estimate to read a comparison by, and why: PPI when it is valid and not flagged (narrowest of the
    trustworthy ones); AIPW when PPI is flagged (rated sessions unlike the rest: AIPW corrects for who rates);
    else the naive difference. None when no method has a valid number."""
    by = {r["method"]: r for r in rows if r["valid"] and not _missing(r["effect"])}
    if "ppi" in by and not by["ppi"]["flags"]:
        return by["ppi"], "PPI++ is valid and not flagged"
    if "aipw" in by and not by["aipw"]["flags"]:
        why = f"PPI++ is flagged: {by['ppi']['flags']}" if "ppi" in by else "PPI++ has no valid estimate"
        return by["aipw"], f"{why}; AIPW corrects for who rates"
    if "naive_welch" in by:
        return by["naive_welch"], "no model-assisted estimate is valid and unflagged"
    return None, "no method has a valid estimate"


@dataclass(frozen=True)
class Verdict:
    """What a comparison lets one conclude, read from the estimate ``choose`` picks: the summary's row and
    section 1's sentence both come from it, so they cannot disagree."""

    chosen: dict | None
    why: str
    direction: str | None  # "higher" / "lower" when the 95 % interval excludes zero, None when it holds zero
    holm_p: float | None  # Holm's adjusted p when the interval excludes zero but the correction does not

    @property
    def short(self) -> str:
        """The conclusion in a few words, for the summary table."""
        if self.chosen is None:
            return "no conclusion"
        treatment = str(self.chosen["treatment"])
        if self.direction is None:
            return "no detectable difference"
        text = f"{treatment} rated {self.direction}"
        return text + " (not after Holm's correction)" if self.holm_p is not None else text


def verdict(rows: Sequence[dict], n_comparisons: int) -> Verdict:
    """The chosen estimate (``choose``), whether its interval excludes zero, and whether Holm's correction over
    the report's ``n_comparisons`` comparisons keeps it."""
    chosen, why = choose(rows)
    if chosen is None:
        return Verdict(None, why, None, None)
    low, high = chosen["ci_low"], chosen["ci_high"]
    if _missing(low) or _missing(high) or low <= 0 <= high:
        return Verdict(chosen, why, None, None)
    holm = chosen["p_holm"]
    caveat = n_comparisons > 1 and not _missing(holm) and holm >= 0.05
    return Verdict(chosen, why, "higher" if chosen["effect"] > 0 else "lower", holm if caveat else None)


def stars(value: float | None, signed: bool = True) -> str:
    """A difference on the 0-1 label scale in stars (4 x: ``stars.label_difference_in_stars``), 2 decimals."""
    return number(None if _missing(value) else label_difference_in_stars(value), 2, signed)


def conclusion(rows: Sequence[dict], power: dict | None, n_comparisons: int) -> str:
    """One plain sentence (HTML) saying what the comparison lets one conclude, from the chosen estimate's
    interval and, when it holds zero, the minimum detectable effect (``estimates.power``, 80 % power)."""
    found = verdict(rows, n_comparisons)
    chosen, why = found.chosen, found.why
    first = rows[0]
    treatment, control = esc(str(first["treatment"])), esc(str(first["control"]))
    if chosen is None:
        notes = "; ".join(sorted({r["note"] for r in rows if r["note"]}))
        return f"No conclusion: {esc(why)}" + (f" ({esc(notes)})." if notes else ".")
    name = method_style(chosen["method"]).label
    effect, low, high = chosen["effect"], chosen["ci_low"], chosen["ci_high"]
    span = (
        f"{stars(effect)} stars (95 % interval {stars(low)} to {stars(high)}; "
        f"{number(effect, 3, True)} on the 0–1 scale)"
    )
    if found.direction is not None:
        text = f"<strong>{treatment} is rated {found.direction} than {control}</strong>: {span}, by {name}"
        if found.holm_p is not None:
            text += (
                f"; after Holm's correction for the {n_comparisons} comparisons of this report it is not significant"
                f" (adjusted p = {found.holm_p:.3f})"
            )
    else:
        text = f"<strong>No detectable difference</strong> between {treatment} and {control}: {span} by {name}"
        mde = None
        if power is not None:
            mde = power["mde_ppi"] if chosen["method"] in ("ppi", "crossppi") else power["mde_naive"]
        if not _missing(mde):
            text += (
                f"; the test could have detected {stars(mde, False)} stars or more"
                f" ({number(mde, 3)} on the 0–1 scale, 80 % power)"
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
    n_comparisons = _comparisons(frame)
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
            "effect (0–1)",
            "95 % low (0–1)",
            "95 % high (0–1)",
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
        "<p>PPI++ and AIPW use the model's predictions for the unrated sessions. How much narrower than naive "
        "PPI++'s interval can be is set by how well the predictions track the ratings: in an arm with n rated and N "
        "unrated sessions and ρ the out-of-fold correlation of its predictions with its ratings, PPI++ with its "
        "best weight shrinks the naive variance to (1 − ρ²·N/(n + N)) of itself; the two arms' variances add. "
        "That width, worked out from each arm's own ρ, is the <em>best for PPI++</em> mark below: PPI++ lands on "
        "it or just right of it. A PPI-type method left of it by more than the sampling noise of a width ratio "
        "(0.02 + 1/√(2n) by default, n the ratings of both arms) is too good to be true and flagged "
        "&quot;predictions may have seen the labels&quot;. AIPW corrects for who rates instead and is often "
        "wider than naive.</p>"
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
        flagged = frozenset(m for m in widths if by[m]["flags"])
        rows.append(figures.WidthRow(label, first["best_width_theory"], widths, flagged))
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
        "the black bar is the best PPI++ can do with these predictions: √(1 − ρ²·N/(n + N)) in each arm, from "
        "that arm's out-of-fold ρ, the arms' variances added. Hollow markers are methods flagged for the "
        "comparison (section 1 names why)."
    )
    numbers = table(
        [
            "comparison",
            "ρ (out of fold, both arms)",
            "rated n",
            "unrated N",
            "best for PPI++ (ρ per arm)",
            "PPI++",
            "cross-PPI",
            "AIPW",
        ],
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


def _interval_text(r: dict) -> str | None:
    """Why a correlation has no usable interval, or None when it has one: Fisher's z needs 4 clusters (with 3
    any interval is all of [-1, 1]) and gives none at |r| = 1."""
    n = r["n_clusters"] or 0
    if _missing(r["coefficient"]):
        return None
    if n <= 3:
        return f"n too small ({n} clusters; an interval needs 4)"
    if _missing(r["ci_low"]) or _missing(r["ci_high"]):
        return "none at |r| = 1"
    return None


def _correlation_caveat(r: dict) -> str | None:
    """A coefficient that says nothing: from 3 clusters (any three points give one), or ±1 from so few that an
    exact order or line is likely by chance (Spearman's ±1 from n points: 2/n! under no relation, 1 in 12 for 4)."""
    n, value = r["n_clusters"] or 0, r["coefficient"]
    if _missing(value):
        return None
    if n <= 3:
        return f"meaningless: {n} clusters"
    if abs(value) >= 1 - 1e-9 and 2 / math.factorial(n) > 0.05:
        return f"meaningless: {n} clusters fall in one exact order by chance 1 time in {math.factorial(n) // 2}"
    return None


def _correlation_summary(r: dict) -> str:
    """'pearson -0.86 [-1.00, +0.57]', or the coefficient with why it has no interval or means nothing."""
    head = f"{r['measure']} {number(r['coefficient'], 2, True)}"
    why = _interval_text(r)
    caveat = _correlation_caveat(r)
    if why is None:
        head += f" [{number(r['ci_low'], 2, True)}, {number(r['ci_high'], 2, True)}]"
    else:
        head += f" (interval: {why})"
    return head + (f", {caveat}" if caveat else "")


def _stars_from_points(delta_h: float | None) -> float | None:
    """ΔH as ``estimates.benchmark_points`` stores it (percentage points of the 0-1 scale: 100 x the
    difference) in stars, the unit of the rest of the report: 4 x the 0-1 difference."""
    return None if _missing(delta_h) else label_difference_in_stars(delta_h / 100)


def benchmark_section(points: data.Rows, correlation: data.Rows, left_out: data.Rows) -> Section:
    s = Section("benchmarks", "6. Do ratings agree with benchmarks?")
    s.add(
        "<p>Per task cluster, ΔH is the difference of mean ratings between two models, in stars, and ΔB the "
        "difference of their benchmark scores in percentage points of the benchmark (<code>benchmarks.csv</code>); "
        "the paper's Table 3. Points on a rising line mean users notice what benchmarks measure. With a handful "
        "of clusters the intervals are wide, and a correlation from 3 clusters, or ±1 from 4, means nothing.</p>"
    )
    if correlation.why_empty:
        s.empty(correlation.why_empty)
        return s
    corr_by: dict[tuple[str, str], list[dict]] = {}
    for r in correlation.frame.to_dicts():
        corr_by.setdefault((r["treatment"], r["control"]), []).append(r)
    used = points.frame if points.why_empty is None else pl.DataFrame()
    reasons_by: dict[tuple[str, str], list[str]] = {}
    if left_out.why_empty is None:
        for r in left_out.frame.to_dicts():
            reasons_by.setdefault((r["treatment"], r["control"]), []).append(
                f"{r['reason']} ({r['n']} point{'s' if r['n'] > 1 else ''})"
            )
    lacking = [pair for pair, corr in corr_by.items() if all(_missing(r["coefficient"]) for r in corr)]
    if lacking:  # a comparison of the benchmarks file the data cannot speak to: one line, no empty table
        why = {
            pair: "; ".join(reasons_by.get(pair, [])) or corr_by[pair][0]["note"] or "no cluster used"
            for pair in lacking
        }
        s.add(
            '<p class="small">Named in the benchmarks file but not in the data, so not shown: '
            + "; ".join(f"{esc(t)} vs {esc(c)} ({esc(why[(t, c)])})" for t, c in lacking)
            + ".</p>"
        )
    for (treatment, control), corr in corr_by.items():
        if (treatment, control) in lacking:
            continue
        label = f"{treatment} vs {control}"
        s.add(f"<h3>{esc(label)}</h3>")
        summary = "; ".join(_correlation_summary(r) for r in corr)
        cells = []
        for r in corr:
            where = {"treatment": treatment, "control": control, "measure": r["measure"]}
            why = _interval_text(r)
            interval = (
                [f'<td class="na" colspan="2">{esc(why)}</td>']
                if why is not None
                else [
                    headline(r["ci_low"], "estimates.benchmark_correlation", "ci_low", where),
                    headline(r["ci_high"], "estimates.benchmark_correlation", "ci_high", where),
                ]
            )
            note = "; ".join(x for x in (_correlation_caveat(r), r["note"]) if x)
            cells.append(
                [
                    td(r["measure"]),
                    td(r["n_clusters"]),
                    headline(r["coefficient"], "estimates.benchmark_correlation", "coefficient", where),
                    *interval,
                    td(note),
                ]
            )
        corr_table = table(["measure", "clusters", "coefficient", "95 % low", "95 % high", "note"], cells)
        mine = (
            used.filter((pl.col("treatment") == treatment) & (pl.col("control") == control)).to_dicts()
            if not used.is_empty()
            else []
        )
        reasons = reasons_by.get((treatment, control), [])
        left = f'<p class="small">Clusters left out: {esc("; ".join(reasons))}.</p>' if reasons else ""
        if len(mine) < 2:
            s.add(
                corr_table,
                f'<p class="empty">Fewer than two clusters with both ΔB and ΔH for {esc(label)}: no figure.</p>',
                left,
            )
            continue
        pts = [figures.Point(p["cluster"], p["delta_b"], _stars_from_points(p["delta_h"])) for p in mine]
        svg = figures.scatter_fit(
            f"fig-benchmark-{_slug(treatment, control)}",
            f"Rating difference against benchmark difference: {label}",
            pts,
            "ΔB: benchmark score difference (percentage points of the benchmark)",
            "ΔH: rating difference (stars)",
            summary,
            "stars per benchmark point",
        )
        numbers = table(
            ["cluster", "benchmark", "ΔB (benchmark points)", "ΔH (stars)", "rated T / C"],
            [
                [
                    td(p["cluster"]),
                    td(p["benchmark"]),
                    td(p["delta_b"], 2, True),
                    td(_stars_from_points(p["delta_h"]), 2, True),
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
        if left:
            s.add(left)
    return s


# ---------------------------------------------------------------- 7. segments


def _flags_by_comparison(effects: data.Rows) -> dict[tuple[str, str], dict[str, str]]:
    """(experiment, treatment) -> method -> its flags in ``estimates.experiment_effects`` (flagged rows only)."""
    if effects.why_empty:
        return {}
    found: dict[tuple[str, str], dict[str, str]] = {}
    for r in effects.frame.filter(pl.col("flags").is_not_null() & (pl.col("flags") != "")).to_dicts():
        found.setdefault((r["experiment"], r["treatment"]), {})[r["method"]] = r["flags"]
    return found


def segments_section(segments: data.Rows, effects: data.Rows | None = None) -> Section:
    """Effects within segments. A method flagged for the whole comparison in section 1 (``effects``) is drawn
    flagged here too (hollow marker, dashed interval) and named: what makes PPI++ doubtful over all sessions
    (rated sessions unlike the rest) holds within each segment as well."""
    s = Section("segments", "7. Effects per task type and development cluster")
    s.add(
        "<p>The naive and PPI++ effect within each task type and development cluster with enough ratings in both "
        "arms, on the 0–1 scale (0.25 = one star). Many small estimates: some will look different by chance; read "
        "them as where to look next, not as findings.</p>"
    )
    if segments.why_empty:
        s.empty(segments.why_empty)
        return s
    flags_by = _flags_by_comparison(effects) if effects is not None else {}
    for (experiment, treatment), group in segments.frame.group_by(["experiment", "treatment"], maintain_order=True):
        rows = group.to_dicts()
        control = rows[0]["control"]
        flagged = flags_by.get((experiment, treatment), {})
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
                    r["method"] in flagged,
                )
                for r in estimated
            ]
            svg = figures.segments(
                f"fig-segments-{_slug(experiment, treatment)}",
                f"{experiment}: {treatment} vs {control} within segments",
                intervals,
            )
            numbers = table(
                [
                    "dimension",
                    "segment",
                    "method",
                    "effect (0–1)",
                    "95 % low (0–1)",
                    "95 % high (0–1)",
                    "rated T / C",
                    "p",
                ],
                [
                    [
                        td(r["dimension"]),
                        td(r["segment"]),
                        td(method_style(r["method"]).label + (" (flagged)" if r["method"] in flagged else "")),
                        td(r["effect"], 3, True),
                        td(r["ci_low"], 3, True),
                        td(r["ci_high"], 3, True),
                        td(_pair(r["n_labeled_treatment"], r["n_labeled_control"])),
                        td(r["p_value"]),
                    ]
                    for r in estimated
                ],
            )
            marked = "; ".join(
                f"{method_style(m).label}: {flags}"
                for m, flags in flagged.items()
                if any(r["method"] == m for r in estimated)
            )
            s.figure(
                svg,
                "Effect with its 95 % interval in each segment with enough ratings; circles naive, diamonds PPI++."
                + (
                    f" Hollow markers and dashed intervals are flagged, as for the whole comparison in section 1"
                    f" ({esc(marked)}): read the naive estimates."
                    if marked
                    else ""
                ),
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
                "MDE naive (0–1)",
                "MDE PPI++ (0–1)",
                "target (0–1)",
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
            [
                "day",
                "sessions",
                "rated",
                "effect (0–1)",
                "95 % low (0–1)",
                "95 % high (0–1)",
                "sequence low (0–1)",
                "sequence high (0–1)",
            ],
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
            f"{esc(name)} estimate of {esc(treatment)} against {esc(control)} by day on the 0–1 scale (stars on "
            "the right), with the one-look interval (dashed) and the always-valid confidence sequence (dotted)"
            + (
                "; the axis stops at ±1, the largest difference the scale allows, and the early days' sequence runs "
                "beyond it."
                if any(abs(v) > figures.SCALE_LIMIT for x in looks for v in (x.cs_low, x.cs_high, x.ci_low, x.ci_high))
                else "."
            ),
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
        "q(x) = min(1, max(floor, multiplier · e(x) / √a(x))), e(x) = exp(intercept + Σ coefficient · (t(x) − mean) "
        "/ sd) the model's expected error (model <em>error</em>) and a(x) the chance a shown widget is answered "
        "(model <em>answer</em>, a logistic regression; absent when no asks were logged): higher where the model "
        "is expected to err more and where answers are rarer, scaled to the daily budget of asks.</p>"
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
        f"{number(first['floor'], 3)}; fitted on {first['fitted_on_ratings']} ratings and "
        f"{first['fitted_on_asks']} asks; policy version <code>{esc(str(first['policy_version']))}</code>.</p>",
        table(
            ["model", "term", "transform", "mean", "sd", "coefficient"],
            [
                [
                    td(r["model"]),
                    td(r["term"]),
                    td(r["transform"] or ""),
                    td(r["mean"]),
                    td(r["sd"]),
                    td(r["coefficient"], 3, True),
                ]
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
.banner { background: #fde8e8; border: 2px solid #D55E00; padding: .6rem .9rem; margin: .8rem 0; }
table.summary { font-size: .95em; } table.summary th[scope="row"] { font-weight: 600; white-space: nowrap; }
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
    summary = summary_section(effects)
    sections = [
        effects_section(effects, power),
        width_section(effects),
        model_section(data.calibration(con), data.cv_metrics(con)),
        shift_section(data.label_shift(con), effects),
        features_section(data.feature_differences(con), data.cost(con)),
        benchmark_section(data.benchmark_points(con), data.benchmark_correlation(con), data.benchmark_left_out(con)),
        segments_section(data.segment_effects(con), effects),
        split_power_section(data.srm(con), power),
        history_section(data.history(con), effects),
        design_section(data.units(con), data.ask_policy(con)),
    ]
    toc = "".join(f'<li><a href="#{s.anchor}">{esc(s.title.split(". ", 1)[1])}</a></li>' for s in sections)
    body = "".join(s.render(2) for s in sections)
    banner = synthetic_banner(data.corpus(con))
    document = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>PULSE report</title><style>{STYLESHEET}</style></head><body>"
        "<header><h1>PULSE report: user satisfaction by experiment</h1>"
        f'<p class="meta">Built {built:%Y-%m-%d %H:%M} UTC from <code>{esc(source)}</code>. Every number comes from '
        "that warehouse; each figure's numbers are under &quot;The numbers&quot;.</p>"
        f"{banner}</header><main>{summary.render(2)}"
        f'<nav aria-label="Sections"><h2>The detail</h2><ol>{toc}</ol></nav>{body}</main></body></html>\n'
    )
    return Page(document, len(sections) + 1, sum(s.figures for s in (summary, *sections)))
