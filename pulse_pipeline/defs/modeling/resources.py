"""How models are compared and chosen: ``PULSE_MODEL_CHOICE`` (pearson, mse or mae; default pearson, as the paper),
``PULSE_MODEL_FAMILIES`` (comma-separated, default all four), ``PULSE_CV_SEEDS`` (default 5 seeds from 42)."""

import os

import dagster as dg


class ModelingResource(dg.ConfigurableResource):
    choose_by: str = "pearson"
    families: list[str] = ["ordinal_logit", "random_forest", "hist_gbm", "lightgbm"]
    n_seeds: int = 5
    folds: int = 5

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(42 + i for i in range(self.n_seeds))


def modeling_resource() -> ModelingResource:
    families = os.environ.get("PULSE_MODEL_FAMILIES")
    return ModelingResource(
        choose_by=os.environ.get("PULSE_MODEL_CHOICE", "pearson"),
        n_seeds=int(os.environ.get("PULSE_CV_SEEDS", "5")),
        **({"families": [f.strip() for f in families.split(",") if f.strip()]} if families else {}),
    )
