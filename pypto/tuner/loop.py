"""The tuning loop of one worker: ask a strategy for a point, claim it, measure it, record
it, tell Optuna.

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
its claim, so a SIGKILL loses at most the trial in flight; the claims of a dead worker are
removed by its peers and their schedules re-queued (``pypto.tuner.study``).

A run resumes from the database: it counts the trials already there, warm-starts its
study from them and, with an in-memory study, picks up what other processes record while
it runs. Invalid points are rejected before measurement: reported, never counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pypto.sim import MODEL_VERSION
from pypto.tuner.measure import Measurement, Measurer
from pypto.tuner.study import SCHEDULE_ATTR, give_back

if TYPE_CHECKING:
    from pypto.db import ClaimResult, Record, ScheduleStore, TaskProgress, WorkerInfo
    from pypto.schedule_space import Schedule
    from pypto.tuner.strategies.base import Strategy
    from pypto.tuner.tasks import Task

#: consecutive proposals that are duplicates or infeasible before a random valid point is
#: forced in, and before the space is declared exhausted
FORCE_RANDOM_AFTER = 20
EXHAUSTED_AFTER = 2000
#: seconds between looks at the database while the budget is held by others' trials
WAIT_S = 0.1
#: seconds between pulls of other processes' records into an in-memory study, and between
#: checks for dead workers on this host
SYNC_S = 1.0


@dataclass
class TaskResult:
    task: Task
    trials_asked: int
    trials_before: int = 0          # measured trials the database held at the start
    trials_run: int = 0             # measured by this worker in this run
    rejected: int = 0               # infeasible points proposed (not measured, not counted)
    duplicates: int = 0             # proposals measured or in flight elsewhere (not measured)
    errors: int = 0                 # measured trials that failed (error / timeout)
    requeued: int = 0               # schedules of dead workers queued again
    default_cycles: int | None = None
    best_cycles: int | None = None
    best_schedule: Schedule | None = None
    started: float = field(default_factory=time.perf_counter)
    elapsed: float = 0.0
    measure_s: float = 0.0          # inside lower + simulate
    lower_s: float = 0.0
    simulate_s: float = 0.0
    status: str = "running"         # done | complete | early-stopped | timeout | exhausted
    #                                 | interrupted
    run_id: int | None = None
    order: list[str] = field(default_factory=list)   # schedule keys measured, in order
    measured_total: int = 0         # trials in the database, by every worker, last seen
    task_bound: int = 0

    @property
    def trials_total(self) -> int:
        return max(self.trials_before + self.trials_run, self.measured_total)

    @property
    def speedup(self) -> float | None:
        if self.default_cycles and self.best_cycles:
            return self.default_cycles / self.best_cycles
        return None

    @property
    def efficiency(self) -> float | None:
        bound = self.task_bound
        return bound / self.best_cycles if bound and self.best_cycles else None

    @property
    def rate(self) -> float:
        """Trials per second of the whole task (every worker) since this run started."""
        dt = time.perf_counter() - self.started
        return (self.trials_total - self.trials_before) / dt if dt > 0 else 0.0

    def stats(self) -> dict[str, Any]:
        """What a worker process reports to its parent (plain data)."""
        return {name: getattr(self, name) for name in (
            "trials_before", "trials_run", "rejected", "duplicates", "errors", "requeued",
            "default_cycles", "measure_s", "lower_s", "simulate_s", "status")}


def prior_records(store: ScheduleStore, task: Task) -> list[Record]:
    """Measured records (any status but invalid) of the task under this timing model."""
    return [r for r in store.records(workload_key=task.workload.key,
                                     target_key=task.target.key, model_version=MODEL_VERSION)
            if r.status != "invalid"]


def _unmeasured_sample(space: Any, strategy: Strategy, measured: dict[str, Record],
                       tries: int = 200) -> Schedule | None:
    """A uniformly sampled valid point not measured yet (None if none turned up)."""
    for _ in range(tries):
        s = space.sample(strategy.rng)
        if s.key not in measured:
            return s
    return None


def tune_task(task: Task, store: ScheduleStore, strategy_name: str, trials: int, *,
              seed: int | None = None, early_stopping: int | None = None,
              deadline: float | None = None, time_limit: float | None = None,
              commit_every: int = 1, command: str = "", host: str = "",
              on_start: Callable[[TaskResult], None] | None = None,
              on_progress: Callable[[TaskResult], None] | None = None,
              worker: WorkerInfo | None = None, shared: bool | None = None,
              warm: bool = True, run_id: int | None = None,
              should_stop: Callable[[], bool] | None = None) -> TaskResult:
    """Bring ``task`` to ``trials`` measured trials in ``store`` (see the module doc).

    ``deadline`` is a ``time.perf_counter()`` value; ``time_limit`` caps one measurement.
    ``shared``: ask the study in the shared Optuna storage of ``store`` (default: only on
    PostgreSQL) rather than one in memory; ``warm``: add the records it lacks to it first.
    ``run_id``: a run started by the caller (which then also ends it); ``should_stop``:
    polled between trials (a worker whose parent died).
    """
    from pypto.db import WorkerInfo
    from pypto.tuner.strategies import get_strategy
    from pypto.tuner.study import open_storage, shared_by_default

    strategy = get_strategy(strategy_name, seed)
    shared = shared_by_default(store.url) if shared is None else shared
    storage = open_storage(store.url) if shared else None
    return _Tuner(task, store, strategy, trials, worker or WorkerInfo.current(),
                  early_stopping=early_stopping, deadline=deadline, time_limit=time_limit,
                  commit_every=commit_every, on_progress=on_progress,
                  should_stop=should_stop).run(storage, warm=warm, run_id=run_id,
                                               command=command, host=host,
                                               on_start=on_start)


class _Tuner:
    """The state of one worker tuning one task (``tune_task`` is its front door)."""

    def __init__(self, task: Task, store: ScheduleStore, strategy: Strategy, trials: int,
                 worker: WorkerInfo, *, early_stopping: int | None, deadline: float | None,
                 time_limit: float | None, commit_every: int,
                 on_progress: Callable[[TaskResult], None] | None,
                 should_stop: Callable[[], bool] | None) -> None:
        self.task, self.store, self.strategy, self.trials = task, store, strategy, trials
        self.worker = worker
        self.early_stopping, self.deadline = early_stopping, deadline
        self.commit_every, self.on_progress = commit_every, on_progress
        self.should_stop = should_stop
        self.res = TaskResult(task, trials)
        self.measurer = Measurer(task.workload, task.target, task.space, time_limit=time_limit)
        self.res.task_bound = self.measurer.bound_cycles
        self.measured: dict[str, Record] = {}   # trials known here, by schedule key
        self.pending: list[Record] = []
        self.study: Any = None
        self.shared = False
        self.last_sync = self.last_reap = time.perf_counter()
        self.since_best = 0       # trials recorded (by anyone) since the best one

    # -- the database ----------------------------------------------------------------------
    def _learn(self, records: list[Record]) -> list[Record]:
        """Take in records measured elsewhere; return the new ones."""
        new = [r for r in records if r.status != "invalid" and r.schedule_key not in
               self.measured]
        for r in new:
            self.measured[r.schedule_key] = r
            self._see(r)
        return new

    def _see(self, record: Record | None = None, progress: TaskProgress | None = None) -> bool:
        """Take in a result or the database's snapshot; True if ``record`` is a new best."""
        res = self.res
        if progress is not None:
            res.measured_total = max(res.measured_total, progress.measured)
            if progress.best_cycles is not None and (res.best_cycles is None
                                                     or progress.best_cycles < res.best_cycles):
                res.best_cycles, res.best_schedule = progress.best_cycles, None
        if record is None or record.status != "ok" or record.cycles is None:
            return False
        if res.best_cycles is None or record.cycles < res.best_cycles:
            res.best_cycles, res.best_schedule = record.cycles, record.schedule
            return True
        return False

    def flush(self) -> None:
        if self.pending:
            self.store.add_records(self.pending)
            self.pending.clear()

    def record(self, sched: Schedule, m: Measurement) -> Record:
        from pypto.db import Record

        res = self.res
        rec = Record.measured(self.task.workload, self.task.target, sched,
                              cycles=m.cycles if m.ok else None, status=m.status,
                              error=m.error, run_id=res.run_id)
        self.measured[sched.key] = rec
        res.order.append(sched.key)
        res.trials_run += 1
        res.measure_s += m.lower_s + m.simulate_s
        res.lower_s += m.lower_s
        res.simulate_s += m.simulate_s
        if not m.ok:
            res.errors += 1
        self.pending.append(rec)
        if len(self.pending) >= self.commit_every:
            self.flush()
        return rec

    def claim(self, sched: Schedule, trial: int | None = None) -> ClaimResult:
        """Claim ``sched``; while the budget is held by trials in flight elsewhere, wait."""
        task = self.task
        while True:
            c = self.store.claim(task.workload.key, task.target.key, sched,
                                 worker=self.worker, budget=self.trials,
                                 study=self.study.study_name if self.shared else "",
                                 trial=trial if self.shared else None)
            self._see(progress=c.progress)
            self._requeue(list(c.reaped))
            if c.status != "full" or c.progress.measured >= self.trials or self._stopping():
                return c
            self._wait()

    def _room(self) -> bool:
        """Before asking the shared study for a trial: wait while the budget is held by
        trials in flight; True once there is room for one more, False once the trials in
        the database fill it (or the run stops).

        Asking first would pop the next waiting trial of the study, which may be a dead
        worker's schedule re-queued (``pypto.tuner.study.requeue``), only for its claim
        to find the budget full: the count this worker keeps lags behind what its peers
        recorded meanwhile. Claiming can still find it full when live workers race for the
        last slot; ``give_back`` then queues it again."""
        task = self.task
        while True:
            p = self.store.progress(*task.key)
            self._see(progress=p)
            if p.measured >= self.trials or self._stopping():
                return False
            if p.measured + p.in_flight < self.trials:
                return True
            self._wait()

    def _wait(self) -> None:
        """One pause while others' trials hold the budget (one may turn out invalid, or its
        worker die: here a dead process is noticed at once)."""
        from pypto.tuner.liveness import dead_here

        self.flush()          # our own records held back would hold the budget too
        self._requeue(dead_here(self.store, *self.task.key, self.worker))
        time.sleep(WAIT_S)

    def _requeue(self, claims: list[Any]) -> None:
        from pypto.tuner.study import requeue

        if claims and self.study is not None:
            self.res.requeued += requeue(self.study, self.task, self.strategy, claims)

    def _stopping(self) -> bool:
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.res.status = "timeout"
            return True
        if self.should_stop is not None and self.should_stop():
            self.res.status = "interrupted"
            return True
        return False

    def _keep_up(self) -> None:
        """Every ``SYNC_S``: learn what other processes recorded (in-memory study only: a
        shared study has it already) and free the claims of dead workers here."""
        from pypto.tuner.liveness import dead_here
        from pypto.tuner.study import warm_trials

        now = time.perf_counter()
        if now - self.last_reap >= SYNC_S:
            self.last_reap = now
            self._requeue(dead_here(self.store, *self.task.key, self.worker))
        if self.shared or self.res.measured_total <= len(self.measured) \
                or now - self.last_sync < SYNC_S:
            return
        self.last_sync = now
        new = self._learn(prior_records(self.store, self.task))
        if new:
            self.study.add_trials(warm_trials(self.task, self.strategy, new))

    # -- the run ---------------------------------------------------------------------------
    def run(self, storage: Any, *, warm: bool, run_id: int | None, command: str, host: str,
            on_start: Callable[[TaskResult], None] | None) -> TaskResult:
        from pypto.db import TargetInfo, WorkloadInfo
        from pypto.tuner.liveness import dead_here, heartbeat
        from pypto.tuner.study import open_study

        task, store, res = self.task, self.store, self.res
        wl, target = task.workload, task.target
        self._learn(prior_records(store, task))
        res.trials_before = len(self.measured)
        res.measured_total = store.progress(wl.key, target.key).measured
        default = task.space.default()
        owned = run_id is None
        if res.trials_total >= self.trials:
            res.status = "complete"
            prior = self.measured.get(default.key)
            res.default_cycles = prior.cycles if prior else self.measurer(default).cycles
            return self._finish()
        res.run_id = run_id if run_id is not None else store.start_run(
            strategy=self.strategy.name, trials_asked=self.trials, command=command, host=host,
            workload=WorkloadInfo.of(wl), target=TargetInfo.of(target))
        self.shared = storage is not None
        self.study = open_study(task, self.strategy, storage, list(self.measured.values()),
                                warm=warm)
        run_status = "done"
        try:
            with heartbeat(store, self.worker):
                self._requeue(dead_here(store, *task.key, self.worker))
                self._measure_default(default)
                if on_start:
                    on_start(res)
                self._loop()
        except BaseException:
            run_status = "interrupted"
            raise
        finally:
            self.flush()
            store.release(self.worker.id)
            res.elapsed = time.perf_counter() - res.started
            if res.status == "running":
                res.status = run_status
            if owned:
                store.update_run(res.run_id, trials_done=res.trials_run,
                                 best_cycles=res.best_cycles,
                                 status="done" if run_status == "done" else "interrupted")
        return self._finish(default)

    def _measure_default(self, default: Schedule) -> None:
        """The default schedule is the baseline, and the first trial of a task."""
        from pypto.tuner.study import warm_trials

        prior = self.measured.get(default.key)
        if prior is not None:
            self.res.default_cycles = prior.cycles
            return
        c = self.claim(default)
        rec = None
        if c.status == "measured" and c.record is not None:
            self._learn([c.record])
            self.res.default_cycles = c.record.cycles
            rec = None if self.shared else c.record   # its measurer told the shared study
        elif c.status == "claimed":
            m = self.measurer(default)
            if m.counts:
                rec = self.record(default, m)
                self._see(rec)
                self.flush()
            else:
                self.store.release(self.worker.id, [default.key])
            self.res.default_cycles = m.cycles
        if rec is not None:
            self.study.add_trials(warm_trials(self.task, self.strategy, [rec]))

    def _loop(self) -> None:
        from pypto.tuner.prefetch import Proposer

        proposer = Proposer(lambda: self.strategy.propose(self.study, self.task.space),
                            enabled=not self.shared)
        try:
            self._trials(proposer)
        finally:
            left = proposer.close()
            if left is not None:   # proposed ahead, never measured
                give_back(self.study, left[0])

    def _trials(self, proposer: Any) -> None:
        import optuna

        res, study, space, strategy = self.res, self.study, self.task.space, self.strategy
        size = space.size()
        stale = 0               # proposals in a row that were neither new nor feasible
        last_duplicate = False  # a converged sampler repeats itself: answer with a fresh point
        fail = optuna.trial.TrialState.FAIL
        while res.trials_total < self.trials:
            if self._stopping() or (self.shared and not self._room()):
                if res.status == "running":
                    res.status = "done"
                return
            if stale >= EXHAUSTED_AFTER:
                res.status = "exhausted"
                return
            if stale and (stale % FORCE_RANDOM_AFTER == 0 or last_duplicate):
                if size.exact and len(self.measured) >= size.value:
                    res.status = "exhausted"
                    return
                fresh = _unmeasured_sample(space, strategy, self.measured)
                forced = strategy.encode(space, fresh) if fresh is not None else None
                if forced is not None:
                    study.enqueue_trial(forced[0])
            trial, sched = proposer.next()
            last_duplicate = False
            if sched is None:
                study.tell(trial, state=fail)
                res.rejected += 1
                stale += 1
                continue
            known = self.measured.get(sched.key)
            c = None
            if known is None:
                c = self.claim(sched, trial.number)
                if c.status == "full":
                    give_back(study, trial)     # a dead worker's schedule stays queued
                    if res.status == "running":
                        res.status = "done"
                    return
                if c.status == "busy":
                    study.tell(trial, state=fail)   # measured elsewhere right now: not a trial
                    res.duplicates += 1
                    stale += 1
                    last_duplicate = True
                    continue
                known = c.record if c.status == "measured" else None
                if known is not None:
                    self._learn([known])
                if self.shared:     # what the trial measured (warm starts skip it)
                    trial.set_user_attr(SCHEDULE_ATTR, sched.key)
            if known is not None:
                study.tell(trial, state=fail)   # the study has its trial already
                res.duplicates += 1
                stale += 1
                last_duplicate = True
                continue
            proposer.ahead()    # the next proposal, while this one is measured
            m = self.measurer(sched)
            proposer.wait()     # (seeded runs: it saw the study as it is now)
            if not m.counts:
                self.store.release(self.worker.id, [sched.key])
                trial.set_user_attr("invalid", list(m.problems))
                study.tell(trial, state=fail)
                res.rejected += 1
                stale += 1
                continue
            stale = 0
            improved = self._see(self.record(sched, m))
            if m.ok:
                study.tell(trial, float(m.cycles or 0))
            else:
                study.tell(trial, state=fail)
            self.since_best = 0 if improved or c is None else c.progress.since_best + 1
            self._keep_up()
            if self.on_progress:
                self.on_progress(res)
            if self.early_stopping and self.since_best >= self.early_stopping:
                res.status = "early-stopped"
                return
        res.status = "done"

    def _finish(self, default: Schedule | None = None) -> TaskResult:
        """The outcome as the database has it: the best and the total of every worker."""
        res, task = self.res, self.task
        res.elapsed = time.perf_counter() - res.started
        best = self.store.best(task.workload.key, task.target.key)
        if best is not None and best.cycles is not None:
            res.best_cycles, res.best_schedule = best.cycles, best.schedule
        res.measured_total = self.store.progress(task.workload.key, task.target.key).measured
        if res.default_cycles is None and default is not None:
            self._learn(prior_records(self.store, task))
            prior = self.measured.get(default.key)
            res.default_cycles = prior.cycles if prior else self.measurer(default).cycles
        if res.default_cycles is not None and (res.best_cycles is None
                                               or res.default_cycles < res.best_cycles):
            res.best_cycles, res.best_schedule = res.default_cycles, task.space.default()
        return res

