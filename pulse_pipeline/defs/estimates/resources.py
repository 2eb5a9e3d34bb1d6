"""The estimates stage's settings as a Dagster resource: files resolved by ``PulseHome`` and
``settings.estimate_settings()``."""

from collections.abc import Callable
from pathlib import Path

import dagster as dg

from ...estimates.effects import Settings
from ...estimates.experiments import (
    ArmsFrom,
    ExperimentsConfig,
    experiments_config,
    read_arms_from,
    read_controls,
    read_units,
)
from ...estimates.kept_propensities import PropensityStore
from ...estimates.strata import DEFAULT_STRATA
from ...paths import PulseHome, SettingsFile
from ...settings import EstimateSettings, ModelingSettings, estimate_settings, modeling_settings

PROPENSITIES_FOLDER = "propensities"
"""The arms' kept propensity fits, beside the working database (``PULSE_HOME/.work/propensities/``)."""


class EstimatesResource(dg.ConfigurableResource):
    """Settings of the estimates stage: ``experiments.toml`` (control arms and intended splits) and
    ``benchmarks.csv`` (benchmark score differences), each from PULSE_HOME or else the package's shipped default
    (``PulseHome.settings_file``, resolved at each use, so a file put in PULSE_HOME counts from the next run), and
    the numbers of ``settings.EstimateSettings`` (``PULSE_SHIFT_AUC``, ``PULSE_WIDTH_TOLERANCE``,
    ``PULSE_SEGMENT_MIN_RATINGS``, ``PULSE_TARGET_EFFECT``, ``PULSE_BENCHMARK_MIN_RATINGS``; what each sets is
    listed in ``settings.py``), and ``PULSE_MODEL_REFIT_SHARE``, which rules the kept propensity fits as it rules
    the models' (``estimates.kept_propensities``), and ``PULSE_ASK_BUDGET``, the ask policy's budget.
    """

    home: str  # PULSE_HOME
    auc_threshold: float = EstimateSettings.auc_threshold
    tolerance: float = EstimateSettings.tolerance
    segment_min_ratings: int = EstimateSettings.segment_min_ratings
    target_effect: float = EstimateSettings.target_effect
    benchmark_min_ratings: int = EstimateSettings.benchmark_min_ratings
    refit_share: float = ModelingSettings.refit_share
    ask_budget: float | None = EstimateSettings.ask_budget  # PULSE_ASK_BUDGET: the ask policy's asks per day

    def effect_settings(self, work: Path, floor: str | None, say: Callable[[str], None]) -> Settings:
        """The settings of ``experiment_effects`` and ``effect_history`` (the same, so the history's last look is
        the effects table's estimate): the thresholds, the honest ``floor``, and the arms' kept propensity fits in
        ``work`` (the working database's folder), reported through ``say``."""
        return Settings(
            auc_threshold=self.auc_threshold,
            tolerance=self.tolerance,
            floor=floor,
            kept=PropensityStore(work / PROPENSITIES_FOLDER, self.refit_share, say),
        )

    def pulse_home(self) -> PulseHome:
        return PulseHome(Path(self.home))

    def experiments_file(self) -> SettingsFile:
        return self.pulse_home().experiments_file

    def benchmarks_file(self) -> SettingsFile:
        return self.pulse_home().benchmarks_file

    def controls(self) -> dict[str, str]:
        """experiment -> control arm, as ``experiments.toml`` names them."""
        return read_controls(self.experiments_file().path)

    def units(self) -> dict[str, str]:
        """experiment -> randomization unit, as ``experiments.toml`` names it (absent: detected)."""
        return read_units(self.experiments_file().path)

    def arms_from(self) -> dict[str, ArmsFrom]:
        """experiment -> the session field its arms come from, for the experiments ``experiments.toml`` gives an
        ``arms_from`` (observational arms)."""
        return read_arms_from(self.experiments_file().path)

    def strata(self) -> tuple[dict[str, str], str]:
        """(experiment -> its strata column, the default column) as ``experiments.toml`` sets them (the default:
        its top-level ``strata``, else the task type), for ``ppi_stratified``."""
        config = experiments_config(self.experiments_file().path)
        return config.strata, config.default_strata or DEFAULT_STRATA

    def experiments_config(self) -> ExperimentsConfig:
        """``experiments.toml`` read whole and checked (the guardrails read it:
        ``guardrail_settings.guardrails_for``)."""
        return experiments_config(self.experiments_file().path)

    def experiments_metadata(self) -> dict[str, str]:
        """Asset metadata saying which experiments file a materialization read."""
        return {"experiments file": self.experiments_file().describe(Path(self.home))}

    def benchmarks_metadata(self) -> dict[str, str]:
        """Asset metadata saying which benchmarks file a materialization read."""
        return {"benchmarks file": self.benchmarks_file().describe(Path(self.home))}


def estimates_resource(home: PulseHome) -> EstimatesResource:
    settings = estimate_settings()
    return EstimatesResource(
        home=str(home.root),
        auc_threshold=settings.auc_threshold,
        tolerance=settings.tolerance,
        segment_min_ratings=settings.segment_min_ratings,
        target_effect=settings.target_effect,
        benchmark_min_ratings=settings.benchmark_min_ratings,
        refit_share=modeling_settings().refit_share,
        ask_budget=settings.ask_budget,
    )
