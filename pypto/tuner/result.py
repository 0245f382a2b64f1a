"""``TaskResult``: what one tuning of one task did and found (plain data, except ``task``).

A worker fills it as it goes (``pypto.tuner.loop``); the pool of ``--workers N`` sums its
workers' counts into one (``pypto.tuner.workers``) from ``stats()``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pypto.schedule_space import Schedule
    from pypto.tuner.tasks import Task


@dataclass
class TaskResult:
    """The outcome of tuning ``task`` towards ``trials_asked`` measured trials.

    ``status`` says how it ended: ``done`` (the budget is reached, or another worker took the
    last trial), ``complete`` (the database had the trials before the run), ``early-stopped``,
    ``timeout``, ``exhausted`` (no new point turns up), ``interrupted``, ``failed`` (workers
    of a pool died before the budget); ``running`` while it runs."""

    task: Task
    trials_asked: int
    trials_before: int = 0          # measured trials the database held at the start
    trials_run: int = 0             # measured by this worker in this run
    rejected: int = 0               # infeasible points proposed (not measured, not counted)
    duplicates: int = 0             # proposals measured or in flight elsewhere (not measured)
    errors: int = 0                 # measured trials that failed (error / timeout)
    requeued: int = 0               # schedules of dead workers queued again
    transferred: int = 0            # adapted schedules of tuned neighbours queued (warm start)
    mutated: int = 0                # neighbour walks from the best queued after a stuck proposal
    uniform: int = 0                # uniform samples queued when no such walk found a new point
    default_cycles: int | None = None
    best_cycles: int | None = None
    best_schedule: Schedule | None = None
    started: float = field(default_factory=time.perf_counter)
    elapsed: float = 0.0
    measure_s: float = 0.0          # inside lower + simulate
    lower_s: float = 0.0
    simulate_s: float = 0.0
    status: str = "running"         # see the class doc
    run_id: int | None = None
    order: list[str] = field(default_factory=list)   # schedule keys measured, in order
    measured_total: int = 0         # trials in the database, by every worker, last seen
    task_bound: int = 0

    @property
    def trials_total(self) -> int:
        """Measured trials of the task in the database, as far as this result knows."""
        return max(self.trials_before + self.trials_run, self.measured_total)

    @property
    def speedup(self) -> float | None:
        """Default cycles over best cycles (None until both are known)."""
        if self.default_cycles and self.best_cycles:
            return self.default_cycles / self.best_cycles
        return None

    @property
    def efficiency(self) -> float | None:
        """Roofline bound over best cycles (1.0 would be the physical limit)."""
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
            "transferred", "mutated", "uniform", "default_cycles", "measure_s", "lower_s",
            "simulate_s", "status")}
