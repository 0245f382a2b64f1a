"""``model``: a learned cost model ranks large candidate pools, and the top of the ranking,
with some exploration, is measured (DESIGN §7-§8).

- Cold start: the stored (target, family) model if the database has one
  (``pypto.db.cost_models.load_from_store``), else an untrained ``CostModel``, which
  ranks by the analytic prior. The loop measures the default and queues the transferred
  schedules first (``pypto.tuner.transfer``); this strategy then adds a small
  space-filling batch: the model's favourite among a uniform sample, then the samples
  farthest (in axis-index space) from everything measured or picked.
- Rounds: a pool of unmeasured valid candidates, scored by the model: local ones (the
  neighbours and coupled moves of the best, neighbour-walk mutations of the top-k
  (``pypto.tuner.mutation``), resamplings of 1-3 knobs of the top-k, uniform crossovers
  of the top-k) and uniform samples of the space, kept from round to round and topped
  up. Of the next ``BATCH`` picks, the first
  ``LOCAL_SHARE`` are the best-scored local candidates, the others the best-scored of the
  whole pool; each slot is instead, with probability ``EPSILON``, a uniform pick among
  the local candidates (exploration where it pays: on the GEMMs of
  ``benchmarks/tuner_quality.py`` exploration over the whole pool left runs stuck near
  the default, 0.88 of the optimum after 100 trials, where local picks reached 0.99).
- Coupled moves: ``COUPLED_SLOTS`` of each batch go to the coupled moves of the best
  (two knobs one ``Constraint`` reads, one of them a step) that the analytic prior ranks
  highest. Where every single step from the best breaks a constraint or ties it (a
  conv's row-aligned default) the learned model, trained on a plateau of ties, ranks
  nothing up; on ``resnet50_res2_3x3`` all 3 seeds stayed at the default (0.936 of the
  optimum) for 200 trials, and with this slot reach 0.980 at trial 8.
- Stagnation: after ``STALL`` measurements without a new best, the search kicks, as an
  iterated local search does (the optimum estimate of ``benchmarks/tuner_quality.py``
  is one): ``KICK_SLOTS`` of each batch go to random ``KICK_STEPS`` neighbour walks from
  the top-k, unranked (the model's ranking is what stalled), and ``KICK_SLOTS`` to the
  best-scored neighbours of the best point measured since the stall began (the descent
  from where the kicks landed), until a new best ends the stall. Without it the model's picks can
  circle one basin: on ``bert_attn_scores_s512`` (an earlier default) both seeds stopped
  at 0.919 of the optimum after 27 trials and measured 170 more without a gain.
- Retraining: on this task's measurements (the study's finished trials: this run's, the
  database's, peers') plus the stored ``ok`` records of the other workloads of the same
  target and family (one query group each), every round while the task has fewer than
  ``EARLY`` measurements, then whenever they grew by 20% (``should_retrain``).

Each pick is enqueued into the study and asked (``enqueue_trial``), so it is an Optuna
trial and a database record like any other strategy's; a trial queued by the loop or a
peer is taken first. The score the model gave a schedule when it was proposed is kept
and stored with its record (``predicted_score``), beside the measured cycles.
Randomness comes from the strategy's seeded generator and XGBoost trains on one thread,
so a seeded single-process run is reproducible; with ``--workers`` each worker keeps its
own model, trained on what its study holds.
"""

from __future__ import annotations

import random
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from pypto.tuner.strategies import base

if TYPE_CHECKING:
    import optuna

    from pypto.cost_model.model import CostModel
    from pypto.db import ScheduleStore
    from pypto.schedule_space import Schedule, Space
    from pypto.tuner.tasks import Task

#: uniform valid samples the pool keeps (unmeasured), and new ones drawn per round
POOL_SAMPLES = 1000
FRESH_SAMPLES = 100
#: neighbour-walk mutations, knob resamplings and crossovers of the top-k per round
MUTATIONS = 150
RESAMPLES = 150
CROSSOVERS = 150
#: knobs a resampling changes at most
RESAMPLE_KNOBS = 3
#: crossover mates: the best quarter of the measured schedules (at least the top-k), as
#: TPE's "good" set: with a plateau of ties at the top, the top-k alone are near-copies
PARENTS = 0.25
TOP_K = 8
#: schedules measured per round, and the chance that a slot is a uniform pick instead
BATCH = 8
EPSILON = 0.3
#: the share of a batch that goes to the best-scored local candidates (around the top-k)
LOCAL_SHARE = 0.5
#: the chance that an exploring slot picks among the local candidates, not the whole pool
EXPLORE_LOCAL = 1.0
#: the space-filling batch of a cold start without a stored model, and with one: the
#: model's favourite of a uniform sample and one far point. Six points (five far) cost
#: trials: over 4 hard workloads x 5 seeds the median trials to 95% of the optimum went
#: 9.5 -> 4.5 with two (none: 2.5, but 153 and 173 on two bert_attn_context seeds)
INITIAL = 2
INITIAL_STORED = 2
#: below this many measurements of the task, retrain every round; fewer than MIN_FIT:
#: not at all (the prior or the stored model ranks)
EARLY = 48
MIN_FIT = 4
#: boosting rounds of the models trained during a run (a few hundred samples)
FIT_ROUNDS = 150
#: measurements without a new best that make a stall; kicks per round, their walk
#: lengths (neighbour steps), and the slots of a batch for the kicks and for the descent
#: from where they landed
STALL = 2 * BATCH
KICK_TRIES = 64
KICK_STEPS = (2, 4)
KICK_SLOTS = 2
#: slots of each batch for the prior's favourite coupled moves of the best
COUPLED_SLOTS = 1


class Strategy(base.Strategy):
    name = "model"

    def __init__(self, seed: int | None) -> None:
        super().__init__(seed)
        self.store: ScheduleStore | None = None
        self.model: CostModel | None = None
        self.stored = False                  # the model came from the database
        self.others: list[tuple[np.ndarray, np.ndarray]] = []   # other workloads' data
        self.batch: deque[Schedule] = deque()
        self.scores: dict[str, float] = {}   # schedule key -> score when proposed
        self.samples: dict[str, Schedule] = {}
        self.started = False                 # the space-filling batch was made
        self.fitted_on = 0                   # measurements at the last fit (0: none)
        self.fits = 0
        self.best_cycles = float("inf")      # the best measured so far
        self.improved_at = 0                 # measurements when it was found
        self.kicks = 0                       # batches planned in a stall
        self._walker: _CachedNeighbors | None = None

    def sampler(self) -> optuna.samplers.BaseSampler:
        import optuna

        return optuna.samplers.RandomSampler(seed=self.seed)

    # -- the model ------------------------------------------------------------------------
    def use_store(self, store: ScheduleStore) -> None:
        self.store = store

    def bind(self, task: Task, study: optuna.Study) -> None:
        super().bind(task, study)
        self._cold_start(task)

    def _cold_start(self, task: Task) -> None:
        """The stored model of (target, family), else the analytic prior; and the other
        workloads' records to train on."""
        from pypto.cost_model.model import CostModel
        from pypto.db.cost_models import load_from_store, training_groups
        from pypto.errors import CostModelError

        family = task.workload.family
        model = None
        if self.store is not None:
            try:
                model = load_from_store(self.store, task.target, family)
            except CostModelError:
                model = None      # trained on other features: the prior until refitted
            self.others = [(x, y) for _, x, y in training_groups(
                self.store, task.target, family, exclude=[task.workload.key])]
        self.stored = model is not None
        self.model = model or CostModel(family, seed=self.seed or 0)

    def predicted_score(self, schedule: Schedule) -> float | None:
        score = self.scores.pop(schedule.key, None)
        if score is None and self._task is not None:
            score = float(self._score([schedule])[0])
        return score

    def _score(self, schedules: list[Schedule]) -> np.ndarray:
        from pypto.cost_model.features import featurize

        assert self._task is not None and self.model is not None
        if not schedules:
            return np.zeros(0)
        task = self._task
        return self.model.predict(featurize(task.workload, schedules, task.target, self.space))

    def _observations(self) -> tuple[list[Schedule], list[float]]:
        """The study's finished trials: schedules and cycles."""
        from optuna.trial import TrialState

        from pypto.schedule_space import Schedule

        axes = set(self.space.axes)
        schedules, cycles = [], []
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if t.value is not None and set(t.params) == axes:
                schedules.append(Schedule(t.params))
                cycles.append(float(t.value))
        return schedules, cycles

    def _refit(self, schedules: list[Schedule], cycles: list[float]) -> None:
        """Retrain on the task's measurements and the other workloads' records, every
        round early on, then when the task's data grew by 20%."""
        from pypto.cost_model.features import featurize
        from pypto.cost_model.model import CostModel, should_retrain

        n = len(schedules)
        if n < MIN_FIT or (n >= EARLY and not should_retrain(n, self.fitted_on)):
            return
        if n == self.fitted_on:
            return
        assert self._task is not None
        task = self._task
        x = featurize(task.workload, schedules, task.target, self.space)
        model = CostModel(task.workload.family, seed=self.seed or 0, rounds=FIT_ROUNDS)
        self.model = model.fit([*self.others, (x, np.asarray(cycles))])
        self.fitted_on = n
        self.fits += 1

    # -- proposals ------------------------------------------------------------------------
    def propose(self) -> base.Proposal:
        from optuna.trial import TrialState

        if not self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            schedule = self._next()
            if schedule is not None:
                self.study.enqueue_trial(dict(schedule))
        proposal = super().propose()
        s = proposal.schedule
        if s is not None and s.key not in self.scores:
            self.scores[s.key] = float(self._score([s])[0])
        return proposal

    def _known(self) -> set[str]:
        """Keys of every schedule the study has a trial of (in any state)."""
        from pypto.schedule_space import Schedule

        axes = set(self.space.axes)
        return {Schedule(t.params).key for t in self.study.get_trials(deepcopy=False)
                if set(t.params) == axes}

    def _next(self) -> Schedule | None:
        known = self._known()
        while True:
            while self.batch:
                s = self.batch.popleft()
                if s.key not in known:
                    return s
            if not self._refill(known):
                return None

    def _refill(self, known: set[str]) -> bool:
        """Plan the next batch; False if no unmeasured candidate turned up."""
        schedules, cycles = self._observations()
        if not self.started:
            self.started = True
            first = self._space_filling(INITIAL_STORED if self.stored else INITIAL, known)
            if first:
                self.batch.extend(first)
                return True
        self._refit(schedules, cycles)
        ranked = np.argsort(np.asarray(cycles), kind="stable")
        elites = [schedules[i] for i in ranked[:TOP_K]]
        parents = [schedules[i] for i in ranked[:max(TOP_K, int(PARENTS * len(cycles)))]]
        pool, n_local = self._pool(elites, known, parents)
        if not pool:
            return False
        scores = self._score(pool)
        ranking = [int(i) for i in np.argsort(-scores, kind="stable")]
        taken: set[int] = set()
        kicked = self._kick(schedules, cycles, elites, known)
        kicked += self._coupled_picks(elites, known | {s.key for s in kicked})
        self.batch.extend(kicked)
        kicked_keys = {s.key for s in kicked}
        taken |= {i for i, s in enumerate(pool) if s.key in kicked_keys}
        local_slots = round(LOCAL_SHARE * BATCH)
        for slot in range(min(BATCH - len(kicked), len(pool) - len(taken))):
            if self.rng.random() < EPSILON:
                # exploration: a uniform pick, among the local candidates when there are
                # (a random neighbour of the best is worth more than a random point)
                free = [i for i in range(n_local) if i not in taken] \
                    if self.rng.random() < EXPLORE_LOCAL else []
                pick = self.rng.choice(free or [i for i in range(len(pool)) if i not in taken])
            else:
                # the first slots go to the best-scored local candidates (refining around
                # the best measured), the others to the best of the whole pool
                local = slot < local_slots and any(
                    i < n_local and i not in taken for i in ranking)
                pick = next(i for i in ranking if i not in taken and (i < n_local or not local))
            taken.add(pick)
            self.scores[pool[pick].key] = float(scores[pick])
            self.batch.append(pool[pick])
        return True

    def _kick(self, schedules: list[Schedule], cycles: list[float], elites: list[Schedule],
              known: set[str]) -> list[Schedule]:
        """In a stall (``STALL`` measurements without a new best): random neighbour walks
        from the top-k, and the best-scored unmeasured neighbours of the best point
        measured since the stall began; else nothing."""
        if not cycles:
            return []
        best = int(np.argmin(np.asarray(cycles)))
        if cycles[best] < self.best_cycles:
            self.best_cycles, self.improved_at = cycles[best], len(cycles)
        stalled_at = self.improved_at + STALL
        if len(cycles) < stalled_at or not elites:
            return []
        self.kicks += 1
        picks: list[Schedule] = []
        taken = set(known)
        # the descent from where the kicks landed: the best measured since the stall
        since = [i for i in range(stalled_at - STALL, len(cycles)) if i != best]
        if since:
            landed = schedules[min(since, key=lambda i: (cycles[i], -i))]  # ties: the latest
            around = [n for n in self.walker.neighbors(landed) if n.key not in taken]
            picks += self._best_scored(around, KICK_SLOTS)
            taken |= {s.key for s in picks}
        # the kicks: uniform among random walks (the model's ranking is what stalled)
        for _ in range(KICK_TRIES):
            if len(picks) >= 2 * KICK_SLOTS:
                break
            point = self.rng.choice(elites)
            for _ in range(self.rng.randint(*KICK_STEPS)):
                around = self.walker.neighbors(point)
                if not around:
                    break
                point = around[self.rng.randrange(len(around))]
            if point.key not in taken:
                taken.add(point.key)
                picks.append(point)
        for s in picks:
            self.scores.setdefault(s.key, float(self._score([s])[0]))
        return picks

    def _coupled_picks(self, elites: list[Schedule], known: set[str]) -> list[Schedule]:
        """The ``COUPLED_SLOTS`` unmeasured coupled moves of the best (``coupled``: two
        knobs a constraint ties) that the analytic prior ranks highest. Not the learned
        model: its data comes from single-knob steps and samples, and where the best sits on
        a plateau of ties (a conv's row-aligned default: most single steps measure the
        same) it has nothing to rank these by, while the prior models what the constraint
        couples (on resnet50_res2_3x3 it puts ``row_block`` 0 with ``m1`` 96 first of the
        default's 91 coupled moves)."""
        if not elites or COUPLED_SLOTS <= 0:
            return []
        around = [s for s in self.walker.coupled(elites[0]) if s.key not in known]
        if not around:
            return []
        order = np.argsort(-self._prior(around), kind="stable")[:COUPLED_SLOTS]
        picks = [around[int(i)] for i in order]
        for s in picks:
            self.scores.setdefault(s.key, float(self._score([s])[0]))
        return picks

    def _prior(self, schedules: list[Schedule]) -> np.ndarray:
        """The analytic prior of ``schedules`` (the ``prior`` feature: higher is faster)."""
        from pypto.cost_model.features import feature_names, featurize

        assert self._task is not None
        task = self._task
        x = featurize(task.workload, schedules, task.target, self.space)
        return x[:, feature_names(task.workload.family).index("prior")]

    def _best_scored(self, candidates: list[Schedule], n: int) -> list[Schedule]:
        if not candidates:
            return []
        order = np.argsort(-self._score(candidates), kind="stable")[:n]
        return [candidates[int(i)] for i in order]

    def _top_up_samples(self, known: set[str], count: int) -> None:
        """Draw ``count`` uniform valid samples into the kept pool (measured ones out)."""
        for key in [k for k in self.samples if k in known]:
            del self.samples[key]
        for _ in range(count):
            s = self.space.sample(self.rng)
            if s.key not in known:
                self.samples.setdefault(s.key, s)

    def _pool(self, elites: list[Schedule], known: set[str],
              parents: list[Schedule] | None = None) -> tuple[list[Schedule], int]:
        """Unmeasured valid candidates and how many of them, first, are local: the
        neighbours of the best, mutations of ``elites`` (best first), crossovers of an
        elite with one of ``parents`` (the better part of what is measured); then the kept
        uniform samples. In a fixed order for a seeded run."""
        from pypto.tuner.mutation import mutate

        self._top_up_samples(known, FRESH_SAMPLES if self.samples else POOL_SAMPLES)
        local: dict[str, Schedule] = {}
        if elites:
            for n in [*self.walker.neighbors(elites[0]), *self.walker.coupled(elites[0])]:
                if n.key not in known:
                    local.setdefault(n.key, n)
            for _ in range(MUTATIONS):
                m = mutate(self.walker, elites, known, self.rng, walks=2)
                if m is None:
                    break
                local.setdefault(m.key, m)
            for _ in range(RESAMPLES):
                r = self._resample(elites)
                if r is not None and r.key not in known:
                    local.setdefault(r.key, r)
            mates = parents if parents and len(parents) > 1 else elites
            if len(mates) > 1:
                for _ in range(CROSSOVERS):
                    child = self._crossover(elites, mates)
                    if child is not None and child.key not in known:
                        local.setdefault(child.key, child)
        pool = list(local.values())
        pool += [s for key, s in self.samples.items() if key not in local]
        return pool, len(local)

    @property
    def walker(self) -> _CachedNeighbors:
        """The space, its neighbourhoods remembered (walks from the top-k revisit them)."""
        if self._walker is None or self._walker.space is not self.space:
            self._walker = _CachedNeighbors(self.space)
        return self._walker

    def _resample(self, elites: list[Schedule]) -> Schedule | None:
        """One of ``elites`` (the best most often) with 1 to ``RESAMPLE_KNOBS`` knobs set
        to uniform choices of their axes; None if that breaks a constraint. Coupled knobs
        move together this way where ``Space.neighbors`` (one knob a step, each step
        valid) cannot: a conv's ``m1`` is tied to its ``row_block`` (``m1`` = rows x
        width), so from a row-aligned default no single step changes either."""
        from pypto.schedule_space import Schedule

        weights = [1.0 / (rank + 1) for rank in range(len(elites))]
        base = self.rng.choices(elites, weights)[0]
        names = list(self.space.axes)
        knobs = dict(base)
        for name in self.rng.sample(names, min(len(names), self.rng.randint(1, RESAMPLE_KNOBS))):
            knobs[name] = self.rng.choice(list(self.space.axes[name].choices))
        return None if self.space.check(knobs) else Schedule(knobs)

    def _crossover(self, elites: list[Schedule], mates: list[Schedule]) -> Schedule | None:
        """Each axis from an elite (the best most often) or one of ``mates``; None if the
        child breaks a constraint or is the elite itself."""
        from pypto.schedule_space import Schedule

        a = self.rng.choices(elites, [1.0 / (rank + 1) for rank in range(len(elites))])[0]
        b = self.rng.choice(mates)
        knobs = {name: (a if self.rng.random() < 0.5 else b)[name] for name in self.space.axes}
        return None if self.space.check(knobs) else Schedule(knobs)

    def _space_filling(self, n: int, known: set[str]) -> list[Schedule]:
        """``n`` unmeasured samples: the model's favourite, then each the farthest (in
        normalized axis-index space) from what is measured or picked."""
        from pypto.schedule_space import Schedule

        if n <= 0:
            return []
        self._top_up_samples(known, POOL_SAMPLES)
        cands = list(self.samples.values())
        if not cands:
            return []
        picks = [int(np.argmax(self._score(cands)))]
        x = self._index_coords(cands)
        measured = [Schedule(t.params) for t in self.study.get_trials(deepcopy=False)
                    if set(t.params) == set(self.space.axes)]
        ref = np.vstack([x[picks], self._index_coords(measured)]) if measured else x[picks]
        nearest = np.min(np.abs(x[:, None, :] - ref[None, :, :]).sum(axis=2), axis=1)
        while len(picks) < min(n, len(cands)):
            far = int(np.argmax(nearest))
            picks.append(far)
            nearest = np.minimum(nearest, np.abs(x - x[far]).sum(axis=1))
        out = [cands[i] for i in picks]
        for s, score in zip(out, self._score(out)):
            self.scores[s.key] = float(score)
        return out

    def _index_coords(self, schedules: list[Schedule]) -> np.ndarray:
        """Each axis's choice index over (choices - 1): points of the unit cube."""
        axes = list(self.space.axes.values())
        out = np.zeros((len(schedules), len(axes)))
        for j, axis in enumerate(axes):
            span = max(len(axis.choices) - 1, 1)
            for i, s in enumerate(schedules):
                out[i, j] = _index(axis.choices, s[axis.name]) / span
        return out


def _index(choices: Any, value: Any) -> int:
    for i, c in enumerate(choices):
        if c == value and type(c) is type(value):
            return i
    return 0


class _CachedNeighbors:
    """``Space.neighbors`` remembered per schedule (each costs a validation per step)."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self._around: dict[str, list[Schedule]] = {}
        self._coupled: dict[str, list[Schedule]] = {}
        self._pairs: list[tuple[str, str]] | None = None

    def neighbors(self, schedule: Schedule) -> list[Schedule]:
        around = self._around.get(schedule.key)
        if around is None:
            around = self._around[schedule.key] = self.space.neighbors(schedule)
        return around

    def sample(self, rng: random.Random) -> Schedule:
        return self.space.sample(rng)

    def coupled(self, schedule: Schedule) -> list[Schedule]:
        """The valid schedules two knobs away that a constraint ties together: for each
        pair of axes read by one ``Constraint``, one of them a step (the next or the
        previous choice) and the other any other choice. ``Space.neighbors`` moves one
        knob a step, each step valid, so it cannot leave a point where every single step
        of a knob breaks a constraint on a knob tied to it (a conv's row-aligned ``m1``
        and its ``row_block``)."""
        from pypto.schedule_space import Schedule

        out = self._coupled.get(schedule.key)
        if out is not None:
            return out
        found: dict[str, Schedule] = {}
        for a, b in self.pairs:
            steps = self.space.axes[a].choices
            at = _index(steps, schedule[a])
            for j in (at - 1, at + 1):
                if not 0 <= j < len(steps):
                    continue
                for value in self.space.axes[b].choices:
                    if value == schedule[b] and type(value) is type(schedule[b]):
                        continue
                    knobs = dict(schedule)
                    knobs[a], knobs[b] = steps[j], value
                    if not self.space.check(knobs):
                        s = Schedule(knobs)
                        found.setdefault(s.key, s)
        out = self._coupled[schedule.key] = list(found.values())
        return out

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """Ordered pairs of distinct axes that some constraint reads together."""
        if self._pairs is None:
            self._pairs = sorted({(a, b) for c in self.space.constraints
                                  for a in c.axes for b in c.axes if a != b})
        return self._pairs
