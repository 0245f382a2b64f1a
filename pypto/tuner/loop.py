"""The tuning loop: ask a strategy for a point, measure it, tell Optuna, commit it.

Resumable by construction: the database is the truth. A run counts the trials the
database already holds for (workload, target, timing-model version), warm-starts the
Optuna study from them (``add_trials``), never measures a schedule twice, and commits
each finished trial at once (``commit_every``), so a SIGKILL loses at most the batch in
flight. Invalid points are rejected before measurement: reported, never counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pypto.sim import MODEL_VERSION
from pypto.tuner.measure import Measurement, Measurer

if TYPE_CHECKING:
    from pypto.db import Record, ScheduleStore
    from pypto.schedule_space import Schedule
    from pypto.tuner.strategies.base import Strategy
    from pypto.tuner.tasks import Task

#: consecutive proposals that are duplicates or infeasible before a random valid point is
#: forced in, and before the space is declared exhausted
FORCE_RANDOM_AFTER = 20
EXHAUSTED_AFTER = 2000


@dataclass
class TaskResult:
    task: Task
    trials_asked: int
    trials_before: int = 0          # measured trials the database held at the start
    trials_run: int = 0             # measured in this run
    rejected: int = 0               # infeasible points proposed (not measured, not counted)
    duplicates: int = 0             # proposals already measured (not re-measured)
    errors: int = 0                 # measured trials that failed (error / timeout)
    default_cycles: int | None = None
    best_cycles: int | None = None
    best_schedule: Schedule | None = None
    started: float = field(default_factory=time.perf_counter)
    elapsed: float = 0.0
    measure_s: float = 0.0          # inside lower + simulate
    lower_s: float = 0.0
    simulate_s: float = 0.0
    status: str = "running"         # done | complete | early-stopped | timeout | exhausted
    run_id: int | None = None
    order: list[str] = field(default_factory=list)   # schedule keys measured, in order

    @property
    def trials_total(self) -> int:
        return self.trials_before + self.trials_run

    @property
    def speedup(self) -> float | None:
        if self.default_cycles and self.best_cycles:
            return self.default_cycles / self.best_cycles
        return None

    @property
    def efficiency(self) -> float | None:
        bound = self.task_bound
        return bound / self.best_cycles if bound and self.best_cycles else None

    task_bound: int = 0

    @property
    def rate(self) -> float:
        dt = time.perf_counter() - self.started
        return self.trials_run / dt if dt > 0 else 0.0


def prior_records(store: ScheduleStore, task: Task) -> list[Record]:
    """Measured records (any status but invalid) of the task under this timing model."""
    return [r for r in store.records(workload_key=task.workload.key,
                                     target_key=task.target.key, model_version=MODEL_VERSION)
            if r.status != "invalid"]


def _warm_trials(task: Task, strategy: Strategy, records: list[Record]) -> list[Any]:
    """Optuna trials for the records whose schedule is a point of the current space."""
    import optuna

    out = []
    for r in records:
        encoded = strategy.encode(task.space, r.schedule)
        if encoded is None:
            continue
        params, dists = encoded
        if r.status == "ok":
            out.append(optuna.trial.create_trial(params=params, distributions=dists,
                                                 value=float(r.cycles or 0)))
        else:
            out.append(optuna.trial.create_trial(params=params, distributions=dists,
                                                 state=optuna.trial.TrialState.FAIL))
    return out


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
              on_progress: Callable[[TaskResult], None] | None = None) -> TaskResult:
    """Bring ``task`` to ``trials`` measured trials in ``store`` (see the module doc).

    ``deadline`` is a ``time.perf_counter()`` value; ``time_limit`` caps one measurement.
    """
    import optuna

    from pypto.db import Record, TargetInfo, WorkloadInfo
    from pypto.tuner.strategies import get_strategy

    strategy = get_strategy(strategy_name, seed)
    wl, target, space = task.workload, task.target, task.space
    res = TaskResult(task, trials)
    measurer = Measurer(wl, target, space, time_limit=time_limit)
    res.task_bound = measurer.bound_cycles
    records = prior_records(store, task)
    measured: dict[str, Record] = {r.schedule_key: r for r in records}
    res.trials_before = len(measured)
    for r in measured.values():
        if r.status == "ok" and (res.best_cycles is None or (r.cycles or 0) < res.best_cycles):
            res.best_cycles, res.best_schedule = r.cycles, r.schedule

    pending: list[Record] = []
    registered = False

    def flush() -> None:
        nonlocal registered
        if not pending:
            return
        if registered:
            store.add_records(pending)
        else:
            store.add_records(pending, workloads=[WorkloadInfo.of(wl)],
                              targets=[TargetInfo.of(target)])
            registered = True
        pending.clear()

    def record(sched: Schedule, m: Measurement) -> Record:
        rec = Record.measured(wl, target, sched, cycles=m.cycles if m.ok else None,
                              status=m.status, error=m.error, run_id=res.run_id)
        measured[sched.key] = rec
        res.order.append(sched.key)
        res.trials_run += 1
        res.measure_s += m.lower_s + m.simulate_s
        res.lower_s += m.lower_s
        res.simulate_s += m.simulate_s
        if not m.ok:
            res.errors += 1
        pending.append(rec)
        if len(pending) >= commit_every:
            flush()
        return rec

    # the default schedule: the baseline, and the first trial when it is not measured yet
    default = space.default()
    prior = measured.get(default.key)
    if prior is not None:
        res.default_cycles = prior.cycles
    elif res.trials_total < trials:
        res.run_id = store.start_run(strategy=strategy_name, trials_asked=trials,
                                     command=command, host=host, workload=WorkloadInfo.of(wl),
                                     target=TargetInfo.of(target))
        registered = True
        m = measurer(default)
        if m.counts:
            record(default, m)
            flush()
        res.default_cycles = m.cycles
    else:
        res.default_cycles = measurer(default).cycles
    if res.default_cycles is not None and (res.best_cycles is None
                                           or res.default_cycles < res.best_cycles):
        res.best_cycles, res.best_schedule = res.default_cycles, default

    if res.trials_total >= trials:
        res.status = "complete" if res.trials_run == 0 else "done"
        res.elapsed = time.perf_counter() - res.started
        if res.run_id is not None:
            store.update_run(res.run_id, trials_done=res.trials_run,
                             best_cycles=res.best_cycles, status="done")
        return res
    if res.run_id is None:
        res.run_id = store.start_run(strategy=strategy_name, trials_asked=trials,
                                     command=command, host=host, workload=WorkloadInfo.of(wl),
                                     target=TargetInfo.of(target))
        registered = True

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=strategy.sampler())
    warm = _warm_trials(task, strategy, list(measured.values()))
    if warm:
        study.add_trials(warm)
    if on_start:
        on_start(res)

    run_status = "done"
    size = space.size()
    stale = 0               # proposals in a row that were neither new nor feasible
    last_duplicate = False  # a converged sampler repeats itself: answer with a fresh point
    since_best = 0
    try:
        while res.trials_total < trials:
            if deadline is not None and time.perf_counter() >= deadline:
                res.status = "timeout"
                break
            if stale >= EXHAUSTED_AFTER:
                res.status = "exhausted"
                break
            if stale and (stale % FORCE_RANDOM_AFTER == 0 or last_duplicate):
                if size.exact and len(measured) >= size.value:
                    res.status = "exhausted"
                    break
                fresh = _unmeasured_sample(space, strategy, measured)
                forced = strategy.encode(space, fresh) if fresh is not None else None
                if forced is not None:
                    study.enqueue_trial(forced[0])
            trial, sched = strategy.propose(study, space)
            last_duplicate = False
            if sched is None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                res.rejected += 1
                stale += 1
                continue
            known = measured.get(sched.key)
            if known is not None:
                if known.status == "ok":
                    study.tell(trial, float(known.cycles or 0))
                else:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                res.duplicates += 1
                stale += 1
                last_duplicate = True
                continue
            m = measurer(sched)
            if not m.counts:
                trial.set_user_attr("invalid", list(m.problems))
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                res.rejected += 1
                stale += 1
                continue
            stale = 0
            record(sched, m)
            if m.ok:
                study.tell(trial, float(m.cycles or 0))
                if res.best_cycles is None or (m.cycles or 0) < res.best_cycles:
                    res.best_cycles, res.best_schedule = m.cycles, sched
                    since_best = 0
                else:
                    since_best += 1
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                since_best += 1
            if on_progress:
                on_progress(res)
            if res.trials_run % 25 == 0:
                flush()
                store.update_run(res.run_id, trials_done=res.trials_run,
                                 best_cycles=res.best_cycles)
            if early_stopping and since_best >= early_stopping:
                res.status = "early-stopped"
                break
        else:
            res.status = "done"
    except BaseException:
        run_status = "interrupted"
        raise
    finally:
        flush()
        res.elapsed = time.perf_counter() - res.started
        if res.status == "running":
            res.status = run_status
        store.update_run(res.run_id, trials_done=res.trials_run, best_cycles=res.best_cycles,
                         status="done" if run_status == "done" else "interrupted")
    return res
