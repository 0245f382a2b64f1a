"""What every strategy is: an Optuna sampler plus a way to propose the next trial, and
the encoding that maps schedules to Optuna parameters (for proposing and warm starts)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

    from pypto.schedule_space import Schedule, Space


class Strategy:
    """Categorical encoding: one categorical parameter per axis with all its choices
    (``Space.suggest``); an infeasible point comes back as ``None`` and the loop rejects
    it unmeasured."""

    name = ""
    #: how schedules become Optuna parameters; strategies that agree share a study
    encoding = "categorical"

    def __init__(self, seed: int | None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)

    def sampler(self) -> optuna.samplers.BaseSampler:
        raise NotImplementedError

    def propose(self, study: optuna.Study, space: Space) -> tuple[Any, Schedule | None]:
        trial = study.ask()
        return trial, space.suggest(trial)

    def encode(self, space: Space, schedule: Schedule) -> tuple[dict[str, Any],
                                                                 dict[str, Any]] | None:
        """Optuna params and distributions of ``schedule``, or None if it is not a point of
        ``space`` in this encoding."""
        from optuna.distributions import CategoricalDistribution

        knobs = dict(schedule)
        if set(knobs) != set(space.axes):
            return None
        for name, axis in space.axes.items():
            if not any(c == knobs[name] and type(c) is type(knobs[name]) for c in axis.choices):
                return None
        return knobs, {name: CategoricalDistribution(list(axis.choices))
                       for name, axis in space.axes.items()}


class FeasibleStrategy(Strategy):
    """Feasible encoding, define-by-run: axis by axis, one float in [0, 1) picks among the
    choices still feasible given the axes already picked (``Space.feasible``: those that
    pass their checks and leave the later axes a valid choice, as ``Space.sample`` picks),
    so the sampler never proposes a point the space rejects and model-based samplers see
    ordered, numeric parameters. An axis with one choice in the whole space is no
    parameter (it would only cost the sampler time)."""

    encoding = "feasible-2"

    def propose(self, study: optuna.Study, space: Space) -> tuple[Any, Schedule | None]:
        from pypto.schedule_space import Schedule

        trial = study.ask()
        knobs: dict[str, Any] = {}
        for name, axis in space.axes.items():
            feasible = space.feasible(knobs, name)
            if not feasible:  # the space has no valid point
                trial.set_user_attr("invalid", [f"no feasible {name} after {knobs}"])
                return trial, None
            if len(axis.choices) == 1:
                knobs[name] = feasible[0]
                continue
            u = trial.suggest_float(name, 0.0, 1.0)
            knobs[name] = feasible[min(int(u * len(feasible)), len(feasible) - 1)]
        problems = space.validate(knobs)
        if problems:
            trial.set_user_attr("invalid", problems)
            return trial, None
        return trial, Schedule(knobs)

    def encode(self, space: Space, schedule: Schedule) -> tuple[dict[str, Any],
                                                                 dict[str, Any]] | None:
        from optuna.distributions import FloatDistribution

        knobs = dict(schedule)
        if set(knobs) != set(space.axes):
            return None
        params: dict[str, Any] = {}
        partial: dict[str, Any] = {}
        for name, axis in space.axes.items():
            feasible = space.feasible(partial, name)
            index = next((i for i, c in enumerate(feasible)
                          if c == knobs[name] and type(c) is type(knobs[name])), None)
            if index is None:
                return None
            if len(axis.choices) > 1:
                params[name] = (index + 0.5) / len(feasible)
            partial[name] = knobs[name]
        return params, {name: FloatDistribution(0.0, 1.0) for name in params}
