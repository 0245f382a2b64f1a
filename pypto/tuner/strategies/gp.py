"""``gp``: Optuna's Gaussian-process sampler (needs torch and scipy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pypto.tuner import TuneError
from pypto.tuner.strategies import base

if TYPE_CHECKING:
    import optuna


class Strategy(base.FeasibleStrategy):
    name = "gp"

    def __init__(self, seed: int | None) -> None:
        super().__init__(seed)
        try:
            import scipy  # noqa: F401
            import torch  # noqa: F401
        except ImportError as e:
            raise TuneError(f"strategy 'gp' needs torch and scipy ({e.name} is not installed): "
                            "pip install torch scipy, or use --strategy tpe") from None

    def sampler(self) -> optuna.samplers.BaseSampler:
        import optuna

        return optuna.samplers.GPSampler(seed=self.seed)
