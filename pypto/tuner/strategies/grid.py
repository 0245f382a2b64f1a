"""``grid``: Optuna's BruteForceSampler over the categorical axes (every raw point once,
in the sampler's order; infeasible ones are rejected unmeasured)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pypto.tuner.strategies import base

if TYPE_CHECKING:
    import optuna


class Strategy(base.Strategy):
    name = "grid"

    def sampler(self) -> optuna.samplers.BaseSampler:
        import warnings

        import optuna

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.BruteForceSampler(seed=self.seed)
