"""Section 5: what the agent did differently between arms, and its cost per session."""

from __future__ import annotations

from ... import tables
from .. import data, figures
from ..html import Section, comparison_label, esc, headline, missing, pair, percent, slug, table, td

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
            s.add(f"<h3>{esc(experiment)}: {esc(comparison_label(treatment, control))}</h3>")
            if treatment is None:
                s.add(f"<p>{esc(rows[0]['note'] or 'single-arm experiment')}.</p>")
                continue
            svg = figures.bars(
                f"fig-features-{slug(experiment, treatment)}",
                f"{experiment}: features that differ most, {treatment} vs {control}",
                [r["feature"] for r in rows],
                [r["standardized"] for r in rows],
                [not missing(r["p_bh"]) and r["p_bh"] < 0.05 for r in rows],
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
                        td(percent(r["relative_difference"])),
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
                headline(r["mean_treatment"], tables.FEATURE_COMPARISONS.qualified, "mean_treatment", key, 4, False),
                headline(r["mean_control"], tables.FEATURE_COMPARISONS.qualified, "mean_control", key, 4, False),
                td(r["difference"], 4, True),
                td(percent(r["relative_difference"])),
                td(r["p_value"]),
                td(pair(r["n_treatment"], r["n_control"])),
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
