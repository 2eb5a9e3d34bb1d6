"""Recalibration for the lambda = 1 methods on the synthetic generator (``modeling/recalibration.py``): per model
family and rated share, how often the chosen family's predictions are recalibrated, and cross-PPI's and AIPW's
width over the naive width with the predictions as they are and with ``prediction_calibrated``.

Ratings at random (scenario ``random``), one arm (every session of a draw), the cross-fit of seed 42 exactly as
the modeling step makes it (``predictions.crossfit_tables``, features only: the generator has no text). Widths
are per-arm standard errors over the naive mean's (ddof 0, as ``stats.ppi``): cross-PPI from
``stats.ppi.crossppi_mean`` at lambda = 1 (plain cross-PPI, as AIPW's outcome model takes f; the pipeline's
cross-PPI also tunes its lambda per arm, which can only narrow it further), AIPW from ``stats.aipw.aipw_mean``
with the true rating probability (random rating: the rated share), so the figure isolates the outcome model.

    .venv/bin/python bench/recalibration.py                    # 4 000 sessions, 6 / 10 / 30 % rated, 5 draws
    .venv/bin/python bench/recalibration.py --sessions 2000 --draws 2 --families ordinal_logit
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import polars as pl

from pulse_pipeline.modeling.data import ModelingData
from pulse_pipeline.modeling.predictions import crossfit_tables
from pulse_pipeline.stats.aipw import aipw_mean
from pulse_pipeline.stats.ppi import crossppi_mean
from pulse_pipeline.synth import FEATURE_NAMES, feature_matrix, simulate_sessions


def widths(predictions: pl.DataFrame, share: float) -> dict[str, float]:
    """Cross-PPI and AIPW standard errors over the naive mean's, with each prediction column."""
    rated, unrated = predictions.filter(pl.col("labeled")), predictions.filter(~pl.col("labeled"))
    y = rated["label"].to_numpy()
    naive = y.std() / math.sqrt(y.size)
    labeled = np.r_[np.ones(rated.height, bool), np.zeros(unrated.height, bool)]
    out = {}
    for column, tag in (("prediction", "raw"), ("prediction_calibrated", "cal")):
        f, fu = rated[column].to_numpy(), unrated[column].to_numpy()
        out[f"crossppi_{tag}"] = crossppi_mean(y, f, fu, lam=1.0).se / naive  # plain cross-PPI: what the map is for
        propensity = np.full(labeled.size, share)
        out[f"aipw_{tag}"] = aipw_mean(y, np.r_[f, fu], labeled, propensity).se / naive
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=4000)
    parser.add_argument("--shares", default="0.06,0.10,0.30")
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--families", default="ordinal_logit,random_forest,hist_gbm,stack")
    args = parser.parse_args()
    families = args.families.split(",")
    members = ["ordinal_logit", "random_forest", "hist_gbm", "lightgbm"]
    print(f"{'family':14} {'rated':>6} {'recal':>6} {'crossppi raw':>13} {'cal':>6} {'aipw raw':>9} {'cal':>6}  s")
    for share in (float(s) for s in args.shares.split(",")):
        for family in families:
            started, rows, recalibrated = time.perf_counter(), [], 0
            for draw in range(args.draws):
                table = simulate_sessions(args.sessions, seed=draw, scenario="random", rated_fraction=share)
                y = np.where(table.rated, np.asarray(table.label, dtype=float), np.nan)
                ids = np.asarray(table.session_id)
                data = ModelingData(tuple(FEATURE_NAMES), ids, feature_matrix(table), y)
                result = crossfit_tables(data, family, 5, families=[*members, "stack"])
                recalibrated += result.recalibration.recalibrated
                rows.append(widths(result.predictions, share))
            frame = pl.DataFrame(rows)
            cells = " ".join(
                f"{frame[c].mean():.3f}/{frame[c].max():.3f}" if c.endswith("raw") else f"{frame[c].max():.3f}"
                for c in ("crossppi_raw", "crossppi_cal", "aipw_raw", "aipw_cal")
            )
            seconds = time.perf_counter() - started
            print(f"{family:14} {share:6.2f} {recalibrated:>3}/{args.draws:<2} {cells}  {seconds:.0f}")
    print("widths: raw as mean/max over draws, calibrated as the max; recal = draws recalibrated")


if __name__ == "__main__":
    main()
