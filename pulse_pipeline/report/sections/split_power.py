"""Section 8: whether the split was as designed, and the smallest effect the data could detect."""

from __future__ import annotations

from ... import tables
from ...estimates.srm import ALARM_P
from .. import data
from ..html import Section, comparison_label, esc, headline, pair, table, td

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
                            tables.SRM_CHECK.qualified,
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
                td(f"{r['experiment']}: {comparison_label(r['treatment'], r['control'])}"),
                td(pair(r["n_labeled_treatment"], r["n_labeled_control"])),
                td(r["oof_rho"], 2),
                headline(r["mde_naive"], tables.POWER.qualified, "mde_naive", key, 3, False),
                headline(r["mde_ppi"], tables.POWER.qualified, "mde_ppi", key, 3, False),
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
