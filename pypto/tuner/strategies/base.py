"""What every strategy is: an Optuna sampler, an encoding of schedules as Optuna parameters,
and the one seam between the tuning loop and Optuna.

The loop (``pypto.tuner.loop``) never touches Optuna: it starts a strategy on a task's
study, then asks it for proposals and tells it what became of each one. The strategy is
ask/tell over that study:

- ``propose`` asks the study for a trial and turns it into a schedule (a ``Proposal``);
- ``tell`` finishes a measured trial with its cycles; ``fail`` finishes any other (an
  infeasible point, a failed measurement, a duplicate); ``give_back`` fails one not to be
  measured and, if it was a dead worker's schedule, queues it again;
- ``enqueue``, ``add_measured`` and ``requeue`` bring in points from elsewhere: a random
  point the loop forces in, records measured by others or before, schedules of dead
  workers.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

    from pypto.db import Claim, Record, ScheduleStore
    from pypto.schedule_space import Schedule, Space
    from pypto.tuner.tasks import Task


#: the user attribute of a failed trial that says why it failed
REASON_ATTR = "reason"


@dataclass(frozen=True)
class Proposal:
    """One point a strategy proposed: ``schedule`` (None: infeasible, to be rejected
    unmeasured) and ``trial``, the strategy's handle on it (an Optuna trial; the loop only
    hands it back)."""

    trial: Any
    schedule: Schedule | None

    @property
    def number(self) -> int:
        """The trial's number in its study (a claim names it, for peers to re-queue)."""
        return int(self.trial.number)


class Strategy:
    """Categorical encoding: one categorical parameter per axis with all its choices
    (``Space.suggest``); an infeasible point comes back as a proposal without a schedule.

    A strategy is started on one task's study (``start``, or ``bind`` to a study opened
    already) before it proposes; it is then used from one thread at a time."""

    name = ""
    #: how schedules become Optuna parameters; strategies that agree share a study
    encoding = "categorical"

    def __init__(self, seed: int | None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self._task: Task | None = None
        self._study: optuna.Study | None = None

    def sampler(self) -> optuna.samplers.BaseSampler:
        raise NotImplementedError

    # -- the study ----------------------------------------------------------------------
    def start(self, task: Task, storage: Any, records: Iterable[Record], *,
              warm: bool = True) -> None:
        """Open the study of ``task`` in ``storage`` (None: in memory) and propose from it;
        with ``warm``, the ``records`` it lacks are added to it first
        (``pypto.tuner.study.open_study``)."""
        from pypto.tuner.study import open_study

        self.bind(task, open_study(task, self, storage, records, warm=warm))

    def use_store(self, store: ScheduleStore) -> None:
        """The schedule database of the run, before ``start`` (a strategy that learns from
        other workloads' records, or loads a stored cost model, keeps it; others ignore
        it)."""

    def predicted_score(self, schedule: Schedule) -> float | None:
        """What this strategy's cost model predicted for ``schedule`` when it was proposed
        (stored with its record), or None: the strategy has no model."""
        return None

    def bind(self, task: Task, study: optuna.Study) -> None:
        """Propose schedules of ``task`` from ``study`` (opened by the caller)."""
        self._task, self._study = task, study

    @property
    def study(self) -> optuna.Study:
        if self._study is None:
            raise RuntimeError(f"strategy {self.name!r} has no study: start() it first")
        return self._study

    @property
    def space(self) -> Space:
        if self._task is None:
            raise RuntimeError(f"strategy {self.name!r} has no task: start() it first")
        return self._task.space

    @property
    def study_name(self) -> str:
        return str(self.study.study_name)

    # -- ask / tell -----------------------------------------------------------------------
    def propose(self) -> Proposal:
        """Ask the study for the next trial (a queued one first) and decode it."""
        trial = self.study.ask()
        return Proposal(trial, self.space.suggest(trial))

    def tell(self, proposal: Proposal, cycles: int) -> None:
        """The proposal was measured: ``cycles`` is its value (lower is better)."""
        self.study.tell(proposal.trial, float(cycles))

    def fail(self, proposal: Proposal, problems: Sequence[str] | None = None, *,
             reason: str = "") -> None:
        """The proposal is no measured trial of this study (infeasible, duplicate, its
        measurement failed); ``problems``: why the space or the lowering rejected it;
        ``reason``: why, for people (the trial's user attribute ``reason``)."""
        import optuna

        if problems is not None:
            proposal.trial.set_user_attr("invalid", list(problems))
            reason = reason or "rejected: " + "; ".join(problems)
        if reason:
            proposal.trial.set_user_attr(REASON_ATTR, reason)
        self.study.tell(proposal.trial, state=optuna.trial.TrialState.FAIL)

    def give_back(self, proposal: Proposal) -> bool:
        """Fail a proposal that will not be measured (the budget is spent, the run stops);
        queue it again if it was a dead worker's schedule (``pypto.tuner.study.give_back``).
        Return whether it was queued again."""
        from pypto.tuner.study import give_back

        return give_back(self.study, proposal.trial)

    def label(self, proposal: Proposal) -> None:
        """Name the proposal's schedule on its trial (in a shared study, warm starts then
        skip it), and its real values where the parameters are encoded."""
        from pypto.tuner.study import SCHEDULE_ATTR

        assert proposal.schedule is not None
        proposal.trial.set_user_attr(SCHEDULE_ATTR, proposal.schedule.key)
        if self.encoding != "categorical":
            proposal.trial.set_user_attr("schedule", dict(proposal.schedule))

    # -- points from elsewhere ------------------------------------------------------------
    def enqueue(self, schedule: Schedule) -> bool:
        """Queue ``schedule`` as the study's next trial; False if it is no point of the
        space in this encoding (then nothing is queued)."""
        encoded = self.encode(self.space, schedule)
        if encoded is None:
            return False
        self.study.enqueue_trial(encoded[0])
        return True

    def add_measured(self, records: Iterable[Record]) -> None:
        """Add ``records`` (measured elsewhere or before) to the study as finished trials."""
        from pypto.tuner.study import warm_trials

        assert self._task is not None
        self.study.add_trials(warm_trials(self._task, self, records))

    def requeue(self, claims: Iterable[Claim]) -> int:
        """Fail the trials of dead workers' ``claims`` and queue their schedules again
        (``pypto.tuner.study.requeue``); return how many were queued."""
        from pypto.tuner.study import requeue

        assert self._task is not None
        return requeue(self.study, self._task, self, claims)

    def encode(self, space: Space, schedule: Schedule) -> tuple[dict[str, Any],
                                                                 dict[str, Any]] | None:
        """Optuna params and distributions of ``schedule``, or None if it is not a point of
        ``space`` in this encoding."""
        return categorical(space, schedule)


def categorical(space: Space, schedule: Schedule) -> tuple[dict[str, Any],
                                                           dict[str, Any]] | None:
    """``schedule`` as Optuna params, its real values, and their distributions, one
    categorical per axis over its choices; None if it is not a point of ``space``."""
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

    def propose(self) -> Proposal:
        from pypto.schedule_space import Schedule

        space = self.space
        trial = self.study.ask()
        knobs: dict[str, Any] = {}
        for name, axis in space.axes.items():
            feasible = space.feasible(knobs, name)
            if not feasible:  # the space has no valid point
                trial.set_user_attr("invalid", [f"no feasible {name} after {knobs}"])
                return Proposal(trial, None)
            if len(axis.choices) == 1:
                knobs[name] = feasible[0]
                continue
            u = trial.suggest_float(name, 0.0, 1.0)
            knobs[name] = feasible[min(int(u * len(feasible)), len(feasible) - 1)]
        problems = space.validate(knobs)
        if problems:
            trial.set_user_attr("invalid", problems)
            return Proposal(trial, None)
        return Proposal(trial, Schedule(knobs))

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
