"""``tpe``: Optuna's TPE sampler (Optuna 5 defaults) over the feasible encoding."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pypto.tuner.strategies import base

if TYPE_CHECKING:
    import optuna


class Strategy(base.FeasibleStrategy):
    name = "tpe"

    def sampler(self) -> optuna.samplers.BaseSampler:
        import optuna

        return optuna.samplers.TPESampler(seed=self.seed)
