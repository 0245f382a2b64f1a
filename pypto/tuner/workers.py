"""``pypto tune --workers N``: N processes of this machine tune each workload together.

The parent starts one run per workload still short of its trials, warm-starts the shared
study of each (``pypto.tuner.study``), and starts N worker processes (``spawn``: fresh
interpreters, nothing inherited but the plain job). Every worker goes through the tasks in
order, each with the loop a single process uses (``tune_task`` with ``shared=True``), so they
coordinate the same way independent ``pypto tune`` processes do: through claims in the
schedule database and one Optuna study. The parent shows the progress of all of them from
the database and gathers their counts through a queue. A worker dies with its parent; a
worker that dies alone has its claims freed and its trial re-queued by the others, and the
run goes on without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue as queues
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pypto.tuner import TuneError
from pypto.tuner.options import TuneOptions
from pypto.tuner.result import TaskResult

if TYPE_CHECKING:
    from pypto.db import ScheduleStore
    from pypto.ir.workload import Workload
    from pypto.tuner.tasks import Task

POLL_S = 0.25
#: seconds the workers have to stop after a signal before they are killed
STOP_S = 30.0


@dataclass(frozen=True)
class Job:
    """What one worker process is asked to do (pickled into it)."""

    index: int
    url: str
    # kernel, index, workload, target descriptor (``Target.to_dict``; targets do not pickle)
    tasks: tuple[tuple[str, int, Workload, dict[str, Any]], ...]
    run_ids: tuple[int | None, ...]
    options: TuneOptions            # its deadline is None: see ``deadline``
    deadline: float | None          # time.time() value (perf_counter is per process)
    parent: int

    def worker_options(self) -> TuneOptions:
        """The options of this worker: its own seed, the deadline on its clock, the
        shared study (warm-started by the parent); the first worker alone queues the
        transferred schedules into it (the others would queue them again)."""
        deadline = None
        if self.deadline is not None:
            deadline = time.perf_counter() + self.deadline - time.time()
        seed = None if self.options.seed is None else self.options.seed + self.index
        return dataclasses.replace(self.options, seed=seed, deadline=deadline, shared=True,
                                   warm=False,
                                   transfer=self.options.transfer and self.index == 0)


def work(job: Job, out: Any, stop: Any) -> None:
    """A worker process: tune every task of ``job``; report each to ``out``; stop (after
    the trial in hand) once the event ``stop`` is set, or on SIGINT/SIGTERM."""
    import warnings

    from pypto.db import WorkerInfo, open_store
    from pypto.errors import PyptoError
    from pypto.schedule_space import space_for
    from pypto.targets.target import Target
    from pypto.tuner.interrupt import catch_signals, requested
    from pypto.tuner.liveness import die_with_parent, parent_gone
    from pypto.tuner.loop import tune_task
    from pypto.tuner.tasks import Task

    die_with_parent()
    if parent_gone(job.parent):
        return
    warnings.simplefilter("ignore")
    worker = WorkerInfo.current()
    options = job.worker_options()
    store = open_store(job.url)
    try:
        with catch_signals():   # SIGINT or SIGTERM: end the trial in hand, clean up, stop
            for i, (kernel, index, wl, descriptor) in enumerate(job.tasks):
                if requested() or stop.is_set():
                    break
                target = Target.from_dict(descriptor, "<pypto tune>")
                task = Task(kernel, index, wl, target, space_for(wl, target))
                res = tune_task(task, store, options, worker=worker, run_id=job.run_ids[i],
                                should_stop=lambda: stop.is_set() or parent_gone(job.parent))
                out.put(("done", job.index, i, res.stats()))
    except KeyboardInterrupt:
        pass
    except PyptoError as e:
        out.put(("error", job.index, str(e)))
    except Exception as e:  # noqa: BLE001 - reported by the parent, which goes on
        out.put(("error", job.index, f"{type(e).__name__}: {e}"))
    finally:
        store.close()


class Pool:
    """The worker processes of one ``pypto tune --workers N`` run.

    Starting it starts a run per task short of ``options.trials`` and ``workers``
    processes that tune every task with ``options`` (each with its own seed: ``seed + k``
    for worker ``k``); ``tune(i)`` then waits for task ``i``."""

    def __init__(self, tasks: list[Task], store: ScheduleStore, options: TuneOptions, *,
                 workers: int) -> None:
        import multiprocessing

        from pypto.db import TargetInfo, WorkloadInfo
        from pypto.tuner.interrupt import requested
        from pypto.tuner.liveness import end_lost_runs
        from pypto.tuner.loop import prior_records
        from pypto.tuner.record_study import RecordStudy, settled
        from pypto.tuner.strategies import get_strategy
        from pypto.tuner.study import open_storage, open_study

        trials = options.trials
        self.tasks, self.store, self.options, self.n = tasks, store, options, workers
        self.trials = trials
        storage = None
        strat = get_strategy(options.strategy, options.seed)
        self.before: list[int] = []
        run_ids: list[int | None] = []
        end_lost_runs(store)
        for t in tasks:
            done = store.progress(t.workload.key, t.target.key).measured
            self.before.append(done)
            if done >= trials or requested():   # a signal: no more runs, no workers
                run_ids.append(None)
                continue
            run_ids.append(store.start_run(strategy=options.strategy, trials_asked=trials,
                                           command=options.command, host=options.host,
                                           workload=WorkloadInfo.of(t.workload),
                                           target=TargetInfo.of(t.target), pid=os.getpid()))
            storage = storage or open_storage(store.url)
            prior = prior_records(store, t)
            open_study(t, strat, storage, prior)
            RecordStudy.open(store.url, t, settled(store, prior))  # workers add only theirs
        self.run_ids = run_ids
        self.ended: set[int] = set()        # tasks whose run row has its final status
        self.beaten = time.perf_counter()   # when the queued runs' heartbeat was last sent
        self.procs: list[Any] = []
        self.reports: dict[int, dict[int, dict[str, Any]]] = {}   # task -> worker -> stats
        self.errors: dict[int, str] = {}                          # worker -> message
        if all(r is None for r in run_ids) or requested():
            return          # every workload has its trials (or a signal came): no workers
        ctx = multiprocessing.get_context("spawn")
        self.queue = ctx.Queue()
        self.stop = ctx.Event()
        deadline = options.deadline
        wall_deadline = None if deadline is None else time.time() + deadline - time.perf_counter()
        for k in range(workers):
            job = Job(k, store.url, tuple((t.kernel, t.index, t.workload, t.target.to_dict())
                                          for t in tasks), tuple(run_ids),
                      dataclasses.replace(options, deadline=None), wall_deadline, os.getpid())
            proc = ctx.Process(target=work, args=(job, self.queue, self.stop),
                               name=f"pypto-worker-{k}")
            proc.start()
            self.procs.append(proc)

    def tune(self, i: int, on_progress: Callable[[TaskResult], None] | None = None
             ) -> TaskResult:
        """Wait until every worker is through task ``i`` (or gone); its outcome."""
        from pypto.tuner.interrupt import requested
        from pypto.tuner.loop import tune_task

        task = self.tasks[i]
        if self.run_ids[i] is None:     # complete before the run: nothing to wait for
            return tune_task(task, self.store, dataclasses.replace(self.options, shared=False))
        res = TaskResult(task, self.trials, trials_before=self.before[i], run_id=self.run_ids[i])
        res.task_bound = _bound(task)
        looked = asked = 0.0
        while True:
            self._drain()
            self._beat_runs()
            waiting = [k for k, p in enumerate(self.procs)
                       if k not in self.reports.get(i, {}) and k not in self.errors
                       and p.exitcode is None]
            snap = self.store.progress(task.workload.key, task.target.key)
            res.measured_total = snap.measured
            res.best_cycles = snap.best_cycles
            if res.default_cycles is None and time.perf_counter() - looked >= 1.0:
                looked = time.perf_counter()        # the baseline, once a worker measured it
                res.default_cycles = _default_cycles(self.store, task)
            if on_progress:
                on_progress(res)
            if not waiting:
                break
            if requested() and not asked:   # the workers end their trials, give back claims
                asked = time.perf_counter()
                self.interrupt()
            elif asked and time.perf_counter() - asked > STOP_S:
                self.interrupt(force=True)
        self._drain(wait=False)   # a worker that exited has flushed its reports
        return self._outcome(i, res, interrupted=requested() is not None)

    def _beat_runs(self) -> None:
        """Every ``HEARTBEAT_S``, the heartbeat of the runs not ended yet: a run waiting
        its turn is not one whose process died (``liveness.run_lost``)."""
        from pypto.errors import DatabaseError
        from pypto.tuner.liveness import HEARTBEAT_S

        if time.perf_counter() - self.beaten < HEARTBEAT_S:
            return
        self.beaten = time.perf_counter()
        for i, run_id in enumerate(self.run_ids):
            if run_id is not None and i not in self.ended:
                with contextlib.suppress(DatabaseError):
                    self.store.update_run(run_id)

    def _drain(self, wait: bool = True) -> None:
        with contextlib.suppress(queues.Empty):
            msg = self.queue.get(timeout=POLL_S) if wait else self.queue.get_nowait()
            while True:
                if msg[0] == "done":
                    self.reports.setdefault(msg[2], {})[msg[1]] = msg[3]
                else:
                    self.errors[msg[1]] = msg[2]
                msg = self.queue.get_nowait()

    def interrupt(self, force: bool = False) -> None:
        """Ask the workers to stop: each ends its trial, gives back its claims and fails
        its unmeasured trials (an event, not a signal: a Ctrl-C at a terminal reaches them
        already, and a second SIGINT tells a worker to quit without saving). ``force``:
        SIGKILL them (their claims are freed and their trials re-queued by the next run)."""
        if not self.procs:
            return
        self.stop.set()
        for p in self.procs if force else []:
            if p.exitcode is None and p.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)

    def end_unfinished(self, status: str = "interrupted") -> None:
        """End the run rows of the tasks not waited for (the run stopped before them)
        with ``status``, counting what the workers measured for each."""
        for i, run_id in enumerate(self.run_ids):
            if run_id is None or i in self.ended:
                continue
            t = self.tasks[i]
            measured = self.store.progress(t.workload.key, t.target.key).measured
            self.store.update_run(run_id, trials_done=max(0, measured - self.before[i]),
                                  status=status)
            self.ended.add(i)

    def _outcome(self, i: int, res: TaskResult, interrupted: bool = False) -> TaskResult:
        task, reports = self.tasks[i], list(self.reports.get(i, {}).values())
        for name in ("trials_run", "rejected", "duplicates", "errors", "requeued",
                     "transferred", "mutated", "uniform", "measure_s", "lower_s", "simulate_s"):
            setattr(res, name, sum(r[name] for r in reports))
        res.default_cycles = next((r["default_cycles"] for r in reports
                                   if r["default_cycles"] is not None), None)
        statuses = {r["status"] for r in reports}
        res.status = next((s for s in ("timeout", "early-stopped", "exhausted", "interrupted")
                           if s in statuses), "complete" if statuses == {"complete"} else "done")
        best = self.store.best(task.workload.key, task.target.key)
        if best is not None:
            res.best_cycles, res.best_schedule = best.cycles, best.schedule
        res.measured_total = self.store.progress(task.workload.key, task.target.key).measured
        default = task.space.default()
        if res.default_cycles is None:
            res.default_cycles = _default_cycles(self.store, task)
        if res.default_cycles is not None and (res.best_cycles is None
                                               or res.default_cycles < res.best_cycles):
            res.best_cycles, res.best_schedule = res.default_cycles, default
        if interrupted:
            res.status = "interrupted"
        elif len(reports) < self.n and res.status == "done" and res.trials_total < self.trials:
            res.status = "failed"
        res.elapsed = time.perf_counter() - res.started
        if res.run_id is not None:
            self.store.update_run(res.run_id, trials_done=res.trials_run,
                                  best_cycles=res.best_cycles,
                                  status="failed" if res.status == "failed" else (
                                      "interrupted" if res.status == "interrupted" else "done"))
            self.ended.add(i)
        return res

    def lost(self) -> list[str]:
        """What became of workers that did not finish: errors, or how they died."""
        out = [f"worker {k}: {msg}" for k, msg in sorted(self.errors.items())]
        for k, p in enumerate(self.procs):
            if k not in self.errors and p.exitcode not in (None, 0):
                how = f"killed by signal {-p.exitcode}" if p.exitcode < 0 else \
                    f"exit code {p.exitcode}"
                out.append(f"worker {k} (pid {p.pid}) died: {how}")
        return out

    def close(self, abort: bool = False) -> None:
        """Wait for the workers (they are through every task); with ``abort``, interrupt
        them first (they give back their claims on the way out)."""
        if abort:
            self.interrupt()
        for p in self.procs:
            p.join(timeout=10)
        for p in self.procs:
            if p.exitcode is None:
                p.terminate()
                p.join(timeout=5)
        if self.procs:
            self.queue.close()


def _default_cycles(store: ScheduleStore, task: Task) -> int | None:
    from pypto.tuner.loop import prior_records

    key = task.space.default().key
    return next((r.cycles for r in prior_records(store, task) if r.schedule_key == key), None)


def _bound(task: Task) -> int:
    from pypto.sim.roofline import workload_bound

    return workload_bound(task.workload, task.target)


def check_workers(workers: int, url: str) -> None:
    """Raises ``TuneError`` unless ``workers`` processes can share the database at ``url``."""
    from pypto.db.location import sqlite_path

    if workers > 1 and url.startswith("sqlite") and sqlite_path(url) is None:
        raise TuneError(f"--workers {workers} needs a database the worker processes can "
                        "share: give --db a SQLite file or a postgresql:// URL, not an "
                        "in-memory database")
