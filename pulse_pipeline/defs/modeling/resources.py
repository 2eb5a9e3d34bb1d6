"""How models are compared and chosen, from ``settings.modeling_settings()`` (PULSE_MODEL_CHOICE,
PULSE_MODEL_FAMILIES, PULSE_CV_SEEDS, PULSE_CV_SEED_ROWS), and when a kept fit is fitted again
(PULSE_MODEL_REFIT_SHARE, ``modeling/reuse.py``); the defaults are there."""

import dagster as dg

from ...settings import ModelingSettings, modeling_settings

DEFAULTS = ModelingSettings()


class ModelingResource(dg.ConfigurableResource):
    choose_by: str = DEFAULTS.choose_by
    families: list[str] = list(DEFAULTS.families)
    n_seeds: int = DEFAULTS.cv_seeds
    seed_rows: int = DEFAULTS.cv_seed_rows  # fewer seeds with many ratings (``comparison.seeds_for``)
    folds: int = 5
    refit_share: float = DEFAULTS.refit_share  # ratings since the kept fit that refit (``reuse.refit_reason``)

    @property
    def seeds(self) -> tuple[int, ...]:
        """The cross-validation seeds: 42, 43, ... (the paper's seed first)."""
        return tuple(42 + i for i in range(self.n_seeds))


def modeling_resource() -> ModelingResource:
    settings = modeling_settings()
    return ModelingResource(
        choose_by=settings.choose_by,
        families=list(settings.families),
        n_seeds=settings.cv_seeds,
        seed_rows=settings.cv_seed_rows,
        refit_share=settings.refit_share,
    )
