"""Sections 1 and 2: every method's effect per comparison with its conclusion, and how much the unrated sessions
narrowed the interval."""

from __future__ import annotations

import polars as pl

from ... import tables
from ...estimates.conclusions import lead
from ...estimates.experiments import OBSERVATIONAL
from ...estimates.methods import Method
from .. import data, figures
from ..figures import Interval
from ..html import Section, comparison_label, esc, headline, missing, pair, slug, table, td
from ..style import method_rank, method_style

EFFECTS_TABLE = tables.EXPERIMENT_EFFECTS.qualified  # what the headline cells name
WIDTH_METHODS = (
    Method.PPI,
    Method.CROSSPPI,
    Method.AIPW,
    Method.PPI_STRATIFIED,
)  # the model-assisted methods whose width section 2 shows
GLOSSARY = (
    ("naive", "the difference of the rated sessions' mean ratings (Welch interval, or a bootstrap)"),
    (
        "PPI++",
        "prediction-powered inference: the rated mean corrected with the model's predictions for every "
        "session, rated or not; narrower when the predictions track the ratings, valid when rated sessions are "
        "like the unrated ones",
    ),
    ("cross-PPI", "PPI with the predictions of the fold models, its weight tuned per arm"),
    (
        "AIPW",
        "corrects for who rates (the chance a session is rated, learnt from its features); wider, but valid "
        "when rated sessions differ from unrated ones in what the features record",
    ),
    ("PPI in-sample", "the paper's PPI with a model fit on every rating: shown for comparison, never valid"),
)


# ---------------------------------------------------------------- 1. effects


def conclusion_html(row: dict) -> str:
    """A comparison's stored sentence (``estimates.conclusions``) as the page shows it: its lead in bold
    (``conclusions.lead``: who is rated higher or lower, or that no difference was detected) and why the method was
    chosen set apart; a sentence without a conclusion plain."""
    text, opening = row["sentence"], lead(row)
    tail = f" ({row['why']}.)"
    if opening is None or not text.startswith(opening) or not text.endswith(tail):
        return esc(text)
    body = text[len(opening) : -len(tail)]
    return f'<strong>{esc(opening)}</strong>{esc(body, quote=False)} <span class="why">({esc(row["why"])}.)</span>'


def effects_section(effects: data.Rows, conclusions: data.Rows, balance: data.Rows | None = None) -> Section:
    """Every method's estimate per comparison, with the comparison's conclusion (``estimates.conclusions``, the
    sentence PULSE stores) above its figure; an observational comparison (arms from a session field) is said to
    be associational and shown with its arms' balance (``balance``: ``data.balance``; ``balance_html``)."""
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
    concluded = {}
    if conclusions.why_empty is None:
        concluded = {(r["experiment"], r["treatment"]): r for r in conclusions.frame.to_dicts()}
    frame = effects.frame
    for (experiment,), by_experiment in frame.group_by("experiment", maintain_order=True):
        s.add(f"<h3>Experiment {esc(experiment)}</h3>")
        for (treatment,), group in by_experiment.group_by("treatment", maintain_order=True):
            rows = sorted(group.to_dicts(), key=lambda r: method_rank(r["method"]))
            control = rows[0]["control"]
            s.add(f"<h4>{esc(comparison_label(treatment, control))}</h4>")
            if treatment is None:
                s.add(f"<p>{esc(rows[0]['note'] or 'single-arm experiment: nothing to compare')}.</p>")
                continue
            found = concluded.get((experiment, treatment))
            if found is not None:
                s.add(f'<p class="conclusion">{conclusion_html(found)}</p>')
            else:
                s.empty(
                    conclusions.why_empty or f"{tables.CONCLUSIONS.qualified} has no row for {experiment}: {treatment}"
                )
            _effects_figure(s, experiment, treatment, control, rows)
            if rows[0].get("design") == OBSERVATIONAL:
                s.add(balance_html(rows, balance))
    return s


def balance_html(rows: list[dict], balance: data.Rows | None) -> str:
    """What an observational comparison (``rows``: its ``estimates.experiment_effects`` rows) shows beside its
    effect: that it is associational, each arm's rated share, and the features whose arms differ most
    (``balance``: ``data.balance``; standardized differences over all the comparison's sessions)."""
    first = rows[0]
    experiment, treatment, control = first["experiment"], first["treatment"], first["control"]
    naive = next((r for r in rows if r["method"] == Method.NAIVE_WELCH), first)
    arms = []
    for arm, rated, unrated in (
        (treatment, naive["n_labeled_treatment"], naive["N_unlabeled_treatment"]),
        (control, naive["n_labeled_control"], naive["N_unlabeled_control"]),
    ):
        total = (rated or 0) + (unrated or 0)
        arms.append([td(arm), td(total), td(rated or 0), td(rated / total if total and rated is not None else None)])
    shares = table(["arm", "sessions", "rated", "rated share"], arms, caption=f"Who rated: {treatment} and {control}")
    where = "a session field (arms_from in experiments.toml; the note below names it and counts the sessions in no arm)"
    text = (
        f'<p class="associational" data-design="{OBSERVATIONAL}"><strong>Associational, not an effect.</strong> '
        f"The arms of {esc(experiment)} come from {esc(where)}, not from randomization: the difference above is "
        f"between the sessions that had {esc(treatment)} and those that had {esc(control)}, not what switching to "
        f"{esc(treatment)} would do. The arms may differ in who ran them, on what and who rated; how alike they "
        "are is below. Only a randomized experiment (an assignments file) measures the effect of the change.</p>"
    )
    found = None
    if balance is not None and balance.why_empty is None:
        found = balance.frame.filter((pl.col("experiment") == experiment) & (pl.col("treatment") == treatment))
    if found is None or found.is_empty():
        why = balance.why_empty if balance is not None and balance.why_empty else "no feature has a balance"
        return text + shares + f'<p class="small">Feature balance: {esc(why)}.</p>'
    top = found.to_dicts()
    features = table(
        ["feature", f"mean {treatment}", f"mean {control}", "standardized difference"],
        [
            [
                td(r["feature"]),
                td(r["mean_treatment"]),
                td(r["mean_control"]),
                td(r["standardized_difference"], 2, True),
            ]
            for r in top
        ],
        caption=f"Feature balance: the feature{'s' if len(top) > 1 else ''} whose arms differ most",
    )
    counted = (
        f'<p class="small">{top[0]["n_imbalanced"]} of {top[0]["n_features"]} features differ between the arms by '
        f"more than {data.IMBALANCED} standard deviations (standardized difference: the difference of the arms' "
        "means over their pooled sd, over all the comparison's sessions; "
        f"{tables.FEATURE_COMPARISONS.qualified} has every feature).</p>"
    )
    return text + shares + features + counted


def _effects_figure(s: Section, experiment: str, treatment: str, control: str, rows: list[dict]) -> None:
    naive = next((r["effect"] for r in rows if r["method"] == Method.NAIVE_WELCH), None)
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
            headline(r["effect"], EFFECTS_TABLE, "effect", {**where, "method": r["method"]}),
            headline(r["ci_low"], EFFECTS_TABLE, "ci_low", {**where, "method": r["method"]}),
            headline(r["ci_high"], EFFECTS_TABLE, "ci_high", {**where, "method": r["method"]}),
            td(r["effect_stars"], 2, True),
            td(r["p_value"]),
            td(r["p_holm"]),
            td(pair(r["n_labeled_treatment"], r["n_labeled_control"])),
            td(pair(r["N_unlabeled_treatment"], r["N_unlabeled_control"])),
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
    if all(missing(r["effect"]) for r in rows):  # nothing to draw: the rows and their notes
        s.add(numbers)
        return
    fig_id = f"fig-effects-{slug(experiment, treatment)}"
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
        "wider than naive. Stratified PPI++ tunes a λ per stratum (the task type, unless experiments.toml names "
        "another column) and may land left of the mark where the model predicts better in some strata than in "
        "others; its flag compares it with the best a λ per stratum allows instead.</p>"
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
        if all(missing(v) for v in [first["best_width_theory"], *widths.values()]):
            continue  # an arm too small for any interval: section 1 shows why
        flagged = frozenset(m for m in widths if by[m]["flags"])
        rows.append(figures.WidthRow(label, first["best_width_theory"], widths, flagged))
        key = {"experiment": experiment, "treatment": treatment}
        n = (first["n_labeled_treatment"] or 0) + (first["n_labeled_control"] or 0)
        big_n = (first["N_unlabeled_treatment"] or 0) + (first["N_unlabeled_control"] or 0)
        ppi_key = {**key, "method": Method.PPI.value} if Method.PPI in by else None
        cells.append(
            [
                td(label),
                headline(by[Method.PPI]["oof_rho"], EFFECTS_TABLE, "oof_rho", ppi_key, signed=False)
                if ppi_key
                else td(first["oof_rho"]),
                td(n),
                td(big_n),
                headline(
                    by[Method.PPI]["best_width_theory"],
                    EFFECTS_TABLE,
                    "best_width_theory",
                    ppi_key,
                    signed=False,
                )
                if ppi_key
                else td(first["best_width_theory"]),
                *[
                    headline(
                        by[m]["width_vs_naive"],
                        EFFECTS_TABLE,
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
            "stratified PPI++",
        ],
        cells,
    )
    s.figure(svg, caption, numbers)
    return s
