"""``cmaes``: Optuna's CMA-ES sampler (needs the ``cmaes`` package; categorical axes are
sampled independently, so it suits spaces of numeric knobs best)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pypto.tuner import TuneError
from pypto.tuner.strategies import base

if TYPE_CHECKING:
    import optuna


class Strategy(base.FeasibleStrategy):
    name = "cmaes"

    def __init__(self, seed: int | None) -> None:
        super().__init__(seed)
        try:
            import cmaes  # noqa: F401
        except ImportError:
            raise TuneError("strategy 'cmaes' needs the cmaes package (not installed): "
                            "pip install cmaes, or use --strategy tpe") from None

    def sampler(self) -> optuna.samplers.BaseSampler:
        import optuna

        return optuna.samplers.CmaEsSampler(seed=self.seed, warn_independent_sampling=False)
