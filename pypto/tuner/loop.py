"""The tuning loop of one worker: propose a point, claim it, measure it, record it, tell
the strategy, check whether to stop.

The database is the truth, and it may be shared: the ``--workers`` of a run, other
``pypto tune`` processes on the same file, and other machines on PostgreSQL tune one
(workload, target) together. Before measuring, a worker claims the schedule
(``ScheduleStore.claim``), one atomic step that refuses a schedule measured or being
measured by anyone, and any claim once measured plus in-flight trials reach the budget:
so the total is exact and nothing is measured twice. A claim refused because the budget
is full while other workers' trials are in flight waits for them (one may yet turn out
invalid, or its worker die); so does a worker about to ask a shared study for a trial,
because the ask may pop a dead worker's re-queued schedule, which must not then be failed
for want of budget. Each record is committed as soon as it is measured and ends
its claim (then it is written to the study Optuna's tools open,
``pypto.tuner.record_study``), so a SIGKILL loses at most the trial in flight; the
claims of a dead worker are removed by its peers and their schedules re-queued
(``pypto.tuner.study``).

A run resumes from the database: it counts the trials already there, warm-starts its
study from them and, with an in-memory study, picks up what other processes record while
it runs. Invalid points are rejected before measurement: reported, never counted.

The loop talks to Optuna only through its strategy (``pypto.tuner.strategies.base``:
propose, tell, fail, give back, enqueue) and keeps what it learns in a ``Ledger``
(``pypto.tuner.ledger``). One trial, in ``_Tuner``:

- ``_stop_before_proposing``: the stop checks (deadline, stop request, budget, exhaustion);
- ``_queue_transferred``: after the default, the adapted best schedules of the nearest
  tuned shapes of the family (``pypto.tuner.transfer``), queued as the first trials;
- ``_queue_mutation``: after a duplicate proposal, or a run of infeasible ones, an unmeasured
  neighbour-walk mutation of one of the best so far (``pypto.tuner.mutation``; a uniform
  sample only when none is within reach), drawn from the loop's own seeded generator so
  the sampler's stream is untouched;
- ``_take``: one proposal through ``_claim``, ``_measure_while_proposing``,
  ``_record_and_tell``; its ``_Step`` says what became of it;
- ``_sync_with_peers``, then the early-stopping check.
"""

from __future__ import annotations

import contextlib
import enum
import os
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pypto.sim import MODEL_VERSION
from pypto.tuner.ledger import Ledger
from pypto.tuner.measure import Measurement, Measurer
from pypto.tuner.options import TuneOptions
from pypto.tuner.result import TaskResult

if TYPE_CHECKING:
    from pypto.db import Claim, ClaimResult, Record, ScheduleStore, WorkerInfo
    from pypto.schedule_space import Schedule
    from pypto.schedule_space.space import SpaceSize
    from pypto.tuner.prefetch import Proposer
    from pypto.tuner.strategies.base import Proposal, Strategy
    from pypto.tuner.tasks import Task

__all__ = ["TaskResult", "TuneOptions", "prior_records", "tune_task"]

#: consecutive proposals that are duplicates or infeasible before a mutation of the best is
#: queued (a duplicate queues one at once), and before the space is declared exhausted
STUCK_AFTER = 20
EXHAUSTED_AFTER = 2000
#: seconds between looks at the database while the budget is held by others' trials
WAIT_S = 0.1
#: seconds between pulls of other processes' records into an in-memory study, and between
#: checks for dead workers on this host
SYNC_S = 1.0
#: why a proposal measured already is no trial (a failed trial's ``reason``)
DUPLICATE = "duplicate: measured already"


class _Step(enum.Enum):
    """What became of one proposal."""

    MEASURED = "measured"          # a trial: recorded and told
    REJECTED = "rejected"          # infeasible, proposed or found so: not a trial
    DUPLICATE = "duplicate"        # measured already, or being measured: not a trial
    BUDGET_FULL = "budget full"    # the budget was spent meanwhile: the run is over


def prior_records(store: ScheduleStore, task: Task) -> list[Record]:
    """Measured records (any status but invalid) of the task under this timing model."""
    return [r for r in store.records(workload_key=task.workload.key,
                                     target_key=task.target.key, model_version=MODEL_VERSION)
            if r.status != "invalid"]


def tune_task(task: Task, store: ScheduleStore, options: TuneOptions, *,
              worker: WorkerInfo | None = None, run_id: int | None = None,
              on_start: Callable[[TaskResult], None] | None = None,
              on_progress: Callable[[TaskResult], None] | None = None,
              should_stop: Callable[[], bool] | None = None) -> TaskResult:
    """Bring ``task`` to ``options.trials`` measured trials in ``store`` (see the module doc).

    ``worker``: this process's identity in claims (default: a new one); ``run_id``: a run
    started by the caller (which then also ends it; default: one started and ended here).
    The callbacks belong to the calling process, so they are not options: ``on_start``
    once the default schedule is measured, ``on_progress`` after each trial, both with the
    result so far; ``should_stop`` is polled between trials (a worker whose parent died).

    Example:
        >>> import pypto
        >>> from pypto.db import open_store
        >>> from pypto.tuner.tasks import extract_tasks
        >>> k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
        >>> c = k.lower(pypto.spec((64, 64), "float16"), pypto.spec((64, 64), "float16"))
        >>> (task,) = extract_tasks([c])
        >>> tune_task(task, open_store("sqlite://"), TuneOptions("random", 3, seed=0)).status
        'done'
    """
    from pypto.db import WorkerInfo
    from pypto.tuner.strategies import get_strategy
    from pypto.tuner.study import open_storage, shared_by_default

    strategy = get_strategy(options.strategy, options.seed)
    shared = shared_by_default(store.url) if options.shared is None else options.shared
    storage = open_storage(store.url) if shared else None
    tuner = _Tuner(task, store, strategy, options, worker or WorkerInfo.current(),
                   on_progress=on_progress, should_stop=should_stop)
    return tuner.run(storage, run_id=run_id, on_start=on_start)


class _Tuner:
    """The state of one worker tuning one task (``tune_task`` is its front door)."""

    def __init__(self, task: Task, store: ScheduleStore, strategy: Strategy,
                 options: TuneOptions, worker: WorkerInfo, *,
                 on_progress: Callable[[TaskResult], None] | None,
                 should_stop: Callable[[], bool] | None) -> None:
        self.task, self.store, self.strategy, self.options = task, store, strategy, options
        self.budget = options.trials
        self.worker = worker
        self.on_progress, self.should_stop = on_progress, should_stop
        self.res = TaskResult(task, self.budget)
        self.measurer = Measurer(task.workload, task.target, task.space,
                                 time_limit=options.time_limit)
        self.res.task_bound = self.measurer.bound_cycles
        self.ledger = Ledger(task, store, self.res, options.commit_every)
        self.shared = False                     # the study is in the shared storage
        self.last_sync = self.last_reap = time.perf_counter()
        self.since_best = 0         # trials recorded (by anyone) since the best one
        self.stale = 0              # proposals in a row that were neither new nor feasible
        self.last_duplicate = False     # a converged sampler repeats itself
        self.space_size: SpaceSize | None = None     # known once the trials start
        # the loop's own points (mutations, uniform fallbacks) come from this generator, not
        # the sampler's, so that what the loop queues leaves the sampler's stream as it was
        self.rng = random.Random(None if options.seed is None else f"pypto-loop-{options.seed}")

    # -- the run ---------------------------------------------------------------------------
    def run(self, storage: Any, *, run_id: int | None,
            on_start: Callable[[TaskResult], None] | None) -> TaskResult:
        """Resume from the database, measure the default, then trial after trial; the
        outcome as the database has it at the end. ``storage``: the shared Optuna storage,
        or None for a study in memory."""
        from pypto.tuner.interrupt import Interrupted
        from pypto.tuner.liveness import dead_here, heartbeat

        task, store, res = self.task, self.store, self.res
        self.ledger.remember(prior_records(store, task))
        res.trials_before = len(self.ledger)
        res.measured_total = store.progress(*task.key).measured
        default = task.space.default()
        if res.trials_total >= self.budget:
            return self._complete_already(default)
        owned = run_id is None
        res.run_id = run_id if run_id is not None else self._start_run()
        run_status = "done"
        try:        # from here on the run ends with a status, whatever happens
            # the process that started the run beats it (a pool beats the runs it queued)
            with heartbeat(store, self.worker, run_id=res.run_id if owned else None):
                self._publish()
                self.shared = storage is not None
                self.strategy.use_store(store)
                self.strategy.start(task, storage, self.ledger.records(),
                                    warm=self.options.warm)
                self._requeue_dead(dead_here(store, *task.key, self.worker))
                self._fail_orphans()
                self._measure_default(default)
                if self.options.transfer:
                    self._queue_transferred()
                if on_start:
                    on_start(res)
                self._propose_and_measure()
        except Interrupted:     # a deferred signal, raised in a measurement: a clean stop
            res.status = "interrupted"
        except KeyboardInterrupt:
            run_status = "interrupted"
            raise
        except BaseException:
            run_status = "failed"
            raise
        finally:
            if res.status == "interrupted":
                run_status = "interrupted"
            self._end_run(run_status, owned)
        return self._final_result(default)

    def _publish(self) -> None:
        """Write the records to the study Optuna's tools open, from now on (and, when
        warm-starting, the ones it lacks now)."""
        from pypto.tuner.record_study import RecordStudy, settled

        prior = settled(self.store, self.ledger.records()) if self.options.warm else None
        self.ledger.published = RecordStudy.open(self.store.url, self.task, prior)

    def _start_run(self) -> int:
        """A new run row, after ending the rows of runs killed without ending theirs."""
        from pypto.db import TargetInfo, WorkloadInfo
        from pypto.tuner.liveness import end_lost_runs

        end_lost_runs(self.store)
        return self.store.start_run(
            strategy=self.strategy.name, trials_asked=self.budget,
            command=self.options.command, host=self.options.host,
            workload=WorkloadInfo.of(self.task.workload), target=TargetInfo.of(self.task.target),
            pid=os.getpid())

    def _end_run(self, run_status: str, owned: bool) -> None:
        """Commit what is held back, give back every claim, and end the run if it is ours
        (``run_status``: done, interrupted or failed)."""
        res = self.res
        self.ledger.commit()
        self.store.release(self.worker.id)
        res.elapsed = time.perf_counter() - res.started
        self._end_with(run_status)
        if owned:
            assert res.run_id is not None
            self.store.update_run(res.run_id, trials_done=res.trials_run,
                                  best_cycles=res.best_cycles, status=run_status)

    def _complete_already(self, default: Schedule) -> TaskResult:
        """The database has the trials: nothing to tune, the default's cycles to report."""
        self.res.status = "complete"
        prior = self.ledger.get(default.key)
        self.res.default_cycles = prior.cycles if prior else self.measurer(default).cycles
        return self._final_result()

    def _measure_default(self, default: Schedule) -> None:
        """The default schedule is the baseline, and the first trial of a task."""
        from pypto.db.records import ClaimOutcome

        prior = self.ledger.get(default.key)
        if prior is not None:
            self.res.default_cycles = prior.cycles
            return
        claim = self._claim(default)
        rec = None
        if claim.status == ClaimOutcome.MEASURED and claim.record is not None:
            self.ledger.remember([claim.record])
            self.res.default_cycles = claim.record.cycles
            rec = None if self.shared else claim.record   # its measurer told the shared study
        elif claim.status == ClaimOutcome.CLAIMED:
            from pypto.tuner.interrupt import interruptible

            with interruptible():
                m = self.measurer(default)
            if m.counts:
                rec = self.ledger.record(default, m,
                                         model_score=self.strategy.predicted_score(default))
                self.ledger.update_best(rec)
                self.ledger.commit()
            else:
                self.store.release(self.worker.id, [default.key])
            self.res.default_cycles = m.cycles
        if rec is not None:
            self.strategy.add_measured([rec])

    def _final_result(self, default: Schedule | None = None) -> TaskResult:
        """The outcome as the database has it: the best and the total of every worker."""
        res, task = self.res, self.task
        res.elapsed = time.perf_counter() - res.started
        best = self.store.best(task.workload.key, task.target.key)
        if best is not None and best.cycles is not None:
            res.best_cycles, res.best_schedule = best.cycles, best.schedule
        res.measured_total = self.store.progress(*task.key).measured
        if res.default_cycles is None and default is not None:
            self.ledger.remember(prior_records(self.store, task))
            prior = self.ledger.get(default.key)
            if prior is not None:
                res.default_cycles = prior.cycles
            elif res.status != "interrupted":     # a stopped run does not measure more
                res.default_cycles = self.measurer(default).cycles
        if res.default_cycles is not None and (res.best_cycles is None
                                               or res.default_cycles < res.best_cycles):
            res.best_cycles, res.best_schedule = res.default_cycles, task.space.default()
        return res

    # -- the trials ------------------------------------------------------------------------
    def _propose_and_measure(self) -> None:
        """Run the trials with the next proposal made ahead (in-memory study only); a
        proposal made ahead and never taken is given back."""
        from pypto.tuner.prefetch import Proposer

        proposer = Proposer(self.strategy.propose, enabled=not self.shared)
        try:
            self._run_trials(proposer)
        finally:
            left = proposer.close()
            if left is not None:   # proposed ahead, never measured
                self.strategy.give_back(left)

    def _run_trials(self, proposer: Proposer[Proposal]) -> None:
        """Trial after trial until the budget is reached or a stop check ends the run;
        ``res.status`` says which."""
        res = self.res
        self.space_size = self.task.space.size()
        while res.trials_total < self.budget:
            if self._stop_before_proposing():
                return
            if self._stuck():
                self._queue_mutation()
            step = self._take(proposer.next(), proposer)
            if step is _Step.BUDGET_FULL:
                self._end_with("done")
                return
            if step is not _Step.MEASURED:
                self._count_no_trial(step)
                continue
            self.stale, self.last_duplicate = 0, False
            self._sync_with_peers()
            if self.on_progress:
                self.on_progress(res)
            if self._early_stop_reached():
                return
        res.status = "done"

    def _count_no_trial(self, step: _Step) -> None:
        """A proposal that was no trial (rejected, or a duplicate): count it, and the
        proposals in a row that were none."""
        self.stale += 1
        self.last_duplicate = step is _Step.DUPLICATE
        if self.last_duplicate:
            self.res.duplicates += 1
        else:
            self.res.rejected += 1

    def _stop_before_proposing(self) -> bool:
        """The checks before a proposal: the deadline or a stop request, a budget filled
        by the trials in the database (shared study), a space with nothing new left."""
        if self._stop_requested() or (self.shared and not self._wait_for_room()):
            self._end_with("done")
            return True
        if self.stale >= EXHAUSTED_AFTER or (self._stuck() and self._every_point_measured()):
            self.res.status = "exhausted"
            return True
        return False

    def _stuck(self) -> bool:
        """Whether to queue a point of the loop's own: the last proposal was a duplicate (a
        converged sampler repeats itself), or ``STUCK_AFTER`` in a row were no new
        feasible point."""
        return bool(self.stale) and (self.stale % STUCK_AFTER == 0
                                     or self.last_duplicate)

    def _every_point_measured(self) -> bool:
        size = self.space_size
        return size is not None and size.exact and len(self.ledger) >= size.value

    def _queue_transferred(self) -> None:
        """Queue the adapted best schedules of the nearest tuned shapes (not measured here)
        as the study's next trials, nearest first."""
        from pypto.tuner.transfer import transferred

        for schedule in transferred(self.task, self.store, self.ledger):
            if self.strategy.enqueue(schedule):
                self.res.transferred += 1

    def _queue_mutation(self) -> None:
        """Queue an unmeasured mutation of one of the best so far as the study's next trial
        (a uniform valid sample if no neighbour walk finds one), counted by kind."""
        from pypto.tuner.mutation import TOP_K, next_point

        space = self.task.space
        point = next_point(space, self.ledger.best(TOP_K) or [space.default()], self.ledger,
                           self.rng)
        if point is not None and self.strategy.enqueue(point.schedule):
            if point.kind == "mutated":
                self.res.mutated += 1
            else:
                self.res.uniform += 1

    def _take(self, proposal: Proposal, proposer: Proposer[Proposal]) -> _Step:
        """Claim, measure, record and tell one proposal; what became of it."""
        from pypto.db.records import ClaimOutcome

        schedule, strategy = proposal.schedule, self.strategy
        if schedule is None:
            strategy.fail(proposal, reason="infeasible: no valid schedule (see 'invalid')")
            return _Step.REJECTED
        if schedule.key in self.ledger:
            strategy.fail(proposal, reason=DUPLICATE)   # the study has its trial already
            return _Step.DUPLICATE
        claim = self._claim(schedule, proposal.number)
        if claim.status == ClaimOutcome.FULL:
            strategy.give_back(proposal)        # a dead worker's schedule stays queued
            return _Step.BUDGET_FULL
        if claim.status == ClaimOutcome.BUSY:
            strategy.fail(proposal, reason="duplicate: being measured by another worker")
            return _Step.DUPLICATE
        known = claim.record if claim.status == ClaimOutcome.MEASURED else None
        if known is not None:
            self.ledger.remember([known])
        if self.shared:
            strategy.label(proposal)            # what the trial measured (warm starts skip it)
        if known is not None:
            strategy.fail(proposal, reason=DUPLICATE)   # the study has its trial already
            return _Step.DUPLICATE
        try:
            m = self._measure_while_proposing(schedule, proposer)
        except BaseException:       # interrupted: its trial must not stay RUNNING
            with contextlib.suppress(Exception):
                strategy.give_back(proposal)
            raise
        if not m.counts:
            self.store.release(self.worker.id, [schedule.key])
            strategy.fail(proposal, problems=m.problems)
            return _Step.REJECTED
        self._record_and_tell(proposal, schedule, m, claim)
        return _Step.MEASURED

    def _measure_while_proposing(self, schedule: Schedule,
                                 proposer: Proposer[Proposal]) -> Measurement:
        """Measure ``schedule`` while the next proposal is made; the proposal is done when
        this returns (so in a seeded run it saw the study as it is now)."""
        from pypto.tuner.interrupt import interruptible

        proposer.ahead()
        with interruptible():
            m = self.measurer(schedule)
        proposer.wait()
        return m

    def _record_and_tell(self, proposal: Proposal, schedule: Schedule, m: Measurement,
                         claim: ClaimResult) -> None:
        """Record a trial, tell the strategy its cycles (or that it failed), and count the
        trials since the best."""
        rec = self.ledger.record(schedule, m,
                                 model_score=self.strategy.predicted_score(schedule))
        improved = self.ledger.update_best(rec)
        if m.ok:
            self.strategy.tell(proposal, m.cycles or 0)
        else:
            self.strategy.fail(proposal, reason=f"{m.status}: {m.error}")
        self.since_best = 0 if improved else claim.progress.since_best + 1

    def _early_stop_reached(self) -> bool:
        """``early_stopping`` trials in a row without a better schedule, counted once one
        has beaten the default: a search still looking for its first improvement goes on
        (to ``--trials``, or a ``--timeout``)."""
        patience = self.options.early_stopping
        if patience and self._beat_default() and self.since_best >= patience:
            self.res.status = "early-stopped"
            return True
        return False

    def _beat_default(self) -> bool:
        best, default = self.res.best_cycles, self.res.default_cycles
        return best is not None and (default is None or best < default)

    def _stop_requested(self) -> bool:
        """The deadline passed (status ``timeout``) or the caller asks to stop
        (``interrupted``)."""
        deadline = self.options.deadline
        if deadline is not None and time.perf_counter() >= deadline:
            self.res.status = "timeout"
            return True
        from pypto.tuner.interrupt import requested

        if requested() or (self.should_stop is not None and self.should_stop()):
            self.res.status = "interrupted"
            return True
        return False

    def _end_with(self, status: str) -> None:
        """End with ``status``, unless a stop check said why already."""
        if self.res.status == "running":
            self.res.status = status

    # -- the other workers -----------------------------------------------------------------
    def _claim(self, schedule: Schedule, trial: int | None = None) -> ClaimResult:
        """Claim ``schedule``; while the budget is held by trials in flight elsewhere, wait."""
        from pypto.db.records import ClaimOutcome

        task = self.task
        while True:
            claim = self.store.claim(task.workload.key, task.target.key, schedule,
                                     worker=self.worker, budget=self.budget,
                                     study=self.strategy.study_name if self.shared else "",
                                     trial=trial if self.shared else None)
            self.ledger.note_progress(claim.progress)
            self._requeue_dead(list(claim.reaped))
            if claim.status != ClaimOutcome.FULL or claim.progress.measured >= self.budget \
                    or self._stop_requested():
                return claim
            self._pause_while_budget_held()

    def _wait_for_room(self) -> bool:
        """Before asking the shared study for a trial: wait while the budget is held by
        trials in flight; True once there is room for one more, False once the trials in
        the database fill it (or the run stops).

        Asking first would pop the next waiting trial of the study, which may be a dead
        worker's schedule re-queued (``pypto.tuner.study.requeue``), only for its claim
        to find the budget full: the count this worker keeps lags behind what its peers
        recorded meanwhile. Claiming can still find it full when live workers race for the
        last slot; ``Strategy.give_back`` then queues it again."""
        while True:
            p = self.store.progress(*self.task.key)
            self.ledger.note_progress(p)
            if p.measured >= self.budget or self._stop_requested():
                return False
            if p.measured + p.in_flight < self.budget:
                return True
            self._pause_while_budget_held()

    def _pause_while_budget_held(self) -> None:
        """One pause while others' trials hold the budget (one may turn out invalid, or its
        worker die: here a dead process is noticed at once)."""
        from pypto.tuner.liveness import dead_here

        self.ledger.commit()    # our own records held back would hold the budget too
        self._requeue_dead(dead_here(self.store, *self.task.key, self.worker))
        time.sleep(WAIT_S)

    def _requeue_dead(self, claims: list[Claim]) -> None:
        """Queue the schedules of dead workers' ``claims`` again."""
        if claims:
            self.res.requeued += self.strategy.requeue(claims)

    def _fail_orphans(self) -> None:
        """Fail the shared study's trials that dead workers asked for and never claimed
        (``pypto.tuner.study.fail_orphans``)."""
        from pypto.tuner.study import fail_orphans

        if not self.shared:
            return
        name = self.strategy.study_name
        claimed = {c.trial for c in self.store.claims(*self.task.key)
                   if c.study == name and c.trial is not None}
        fail_orphans(self.strategy.study, claimed)

    def _sync_with_peers(self) -> None:
        """Every ``SYNC_S``: learn what other processes recorded (in-memory study only: a
        shared study has it already) and free the claims of dead workers here."""
        from pypto.tuner.liveness import dead_here

        now = time.perf_counter()
        if now - self.last_reap >= SYNC_S:
            self.last_reap = now
            self._requeue_dead(dead_here(self.store, *self.task.key, self.worker))
            self._fail_orphans()
        if self.shared or self.res.measured_total <= len(self.ledger) \
                or now - self.last_sync < SYNC_S:
            return
        self.last_sync = now
        new = self.ledger.remember(prior_records(self.store, self.task))
        if new:
            self.strategy.add_measured(new)
