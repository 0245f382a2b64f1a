"""``random``: uniform valid points from ``Space.sample`` (never infeasible), each
enqueued into Optuna so it is an Optuna trial like any other; a trial queued by the loop
(a transferred schedule, a mutation) is taken first, and no sample is drawn for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pypto.tuner.strategies import base

if TYPE_CHECKING:
    import optuna


class Strategy(base.Strategy):
    name = "random"

    def sampler(self) -> optuna.samplers.BaseSampler:
        import optuna

        return optuna.samplers.RandomSampler(seed=self.seed)

    def propose(self) -> base.Proposal:
        from optuna.trial import TrialState

        if not self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            self.study.enqueue_trial(dict(self.space.sample(self.rng)))
        return super().propose()
