"""``random``: uniform valid points from ``Space.sample`` (never infeasible), each
enqueued into Optuna so it is an Optuna trial like any other."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pypto.tuner.strategies import base

if TYPE_CHECKING:
    import optuna

    from pypto.schedule_space import Schedule, Space


class Strategy(base.Strategy):
    name = "random"

    def sampler(self) -> optuna.samplers.BaseSampler:
        import optuna

        return optuna.samplers.RandomSampler(seed=self.seed)

    def propose(self, study: optuna.Study, space: Space) -> tuple[Any, Schedule | None]:
        study.enqueue_trial(dict(space.sample(self.rng)))
        return super().propose(study, space)
