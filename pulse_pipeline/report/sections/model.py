"""Sections 3 and 4: how good the satisfaction model is, and whether rated sessions look like unrated ones."""

from __future__ import annotations

import polars as pl

from ...estimates.label_shift import WARN_ABOVE
from ...estimates.methods import Method, method_label, stored
from .. import data, figures
from ..html import Section, esc, number, table, td

# ---------------------------------------------------------------- 3. model quality


def model_section(calibration: data.Rows, cv: data.Rows, recalibration: data.Rows | None = None) -> Section:
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
    if recalibration is not None:
        _methods_models(s, recalibration)
    return s


def _methods_models(s: Section, recalibration: data.Rows) -> None:
    """Which predictions each method read, and why (``modeling.recalibration``, ``modeling/recalibration.py``)."""
    s.add(
        "<h3>Which predictions each method used</h3><p>PPI++ tunes its own weight λ on the chosen model's "
        "predictions; AIPW's outcome model takes them with λ = 1, so it reads them recalibrated "
        "(a linear map onto the rating fitted on the training folds only) when the model loses to the constant "
        "or is mis-scaled, and so does cross-PPI, which then tunes its λ per arm (its row's note gives them). "
        "Out-of-fold MSE in stars, on the cross-fit the estimates use.</p>"
    )
    if recalibration.why_empty:
        s.empty(recalibration.why_empty)
        return
    r = recalibration.frame.row(0, named=True)
    calibrated = "recalibrated" if r["recalibrated"] else "as it is"
    rows = [
        (Method.PPI, "prediction", "as it is", r["mse_prediction"], "tunes its own λ (≈ Cov(Y, f) / Var(f))"),
        (Method.CROSSPPI, "prediction_calibrated", calibrated, r["mse_calibrated"], r["reason"]),
        (Method.AIPW, "prediction_calibrated", calibrated, r["mse_calibrated"], r["reason"]),
    ]
    s.add(
        table(
            ["method", "model", "column", "predictions", "out-of-fold MSE", "constant's MSE", "why"],
            [
                [td(method_label(m)), td(r["model"]), td(column), td(how), td(mse), td(r["mse_constant"]), td(why)]
                for m, column, how, mse, why in rows
            ],
        )
    )


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
        ppi_rows = pl.col("method").is_in(stored([Method.PPI, Method.CROSSPPI]))
        flagged = effects.frame.filter(ppi_rows & pl.col("flags").str.contains("not representative")).height
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
