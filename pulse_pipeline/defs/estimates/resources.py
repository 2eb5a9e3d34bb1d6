"""The estimates stage's settings as a Dagster resource: files under PULSE_HOME and ``settings.estimate_settings()``."""

from pathlib import Path

import dagster as dg

from ...estimates.experiments import read_controls, read_units
from ...settings import EstimateSettings, estimate_settings


class EstimatesResource(dg.ConfigurableResource):
    """Settings of the estimates stage: ``PULSE_HOME/experiments.toml`` (control arms and intended splits),
    ``PULSE_HOME/benchmarks.csv`` (benchmark score differences), and the numbers of ``settings.EstimateSettings``
    (``PULSE_SHIFT_AUC``, ``PULSE_WIDTH_TOLERANCE``, ``PULSE_SEGMENT_MIN_RATINGS``, ``PULSE_TARGET_EFFECT``,
    ``PULSE_BENCHMARK_MIN_RATINGS``; what each sets is listed in ``settings.py``).
    """

    experiments_path: str
    benchmarks_path: str = ""
    auc_threshold: float = EstimateSettings.auc_threshold
    tolerance: float = EstimateSettings.tolerance
    segment_min_ratings: int = EstimateSettings.segment_min_ratings
    target_effect: float = EstimateSettings.target_effect
    benchmark_min_ratings: int = EstimateSettings.benchmark_min_ratings

    def controls(self) -> dict[str, str]:
        """experiment -> control arm, as ``experiments.toml`` names them."""
        return read_controls(Path(self.experiments_path))

    def units(self) -> dict[str, str]:
        """experiment -> randomization unit, as ``experiments.toml`` names it (absent: detected)."""
        return read_units(Path(self.experiments_path))


def estimates_resource(home_root: Path) -> EstimatesResource:
    settings = estimate_settings()
    return EstimatesResource(
        experiments_path=str(home_root / "experiments.toml"),
        benchmarks_path=str(home_root / "benchmarks.csv"),
        auc_threshold=settings.auc_threshold,
        tolerance=settings.tolerance,
        segment_min_ratings=settings.segment_min_ratings,
        target_effect=settings.target_effect,
        benchmark_min_ratings=settings.benchmark_min_ratings,
    )
