"""Section 10: the design, the randomization unit and the ask policy."""

from __future__ import annotations

from ... import tables
from .. import data
from ..html import Section, esc, missing, number, table, td

# ---------------------------------------------------------------- 10. design


def design_section(units: data.Rows, policy: data.Rows) -> Section:
    s = Section("design", "10. The design: randomization unit and ask policy")
    s.add(
        "<p>The unit is what was randomized: a <em>session</em>, or a <em>user</em> whose sessions all get one arm "
        "(then intervals are clustered by user, since one user's sessions are not independent). An "
        "<em>observational</em> experiment's arms come from a session field and were not randomized: its unit only "
        "says how its intervals are clustered.</p>"
    )
    if units.why_empty:
        s.empty(units.why_empty)
    else:
        s.add(
            table(
                ["experiment", "design", "unit", "how it was decided", "sessions left out"],
                [
                    [
                        td(r["experiment"]),
                        td(r.get("design") or ""),
                        td(r["unit"]),
                        td(r["unit_source"]),
                        td(r["sessions_excluded"]),
                    ]
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
    if first["note"] and all(missing(r["coefficient"]) for r in rows):
        s.empty(f"{tables.ASK_POLICY.qualified} has no fitted policy: {first['note']}")
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
