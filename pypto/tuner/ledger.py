"""``Ledger``: what one tuning worker knows of its task's trials.

The loop (``pypto.tuner.loop``) decides what to do next; the ledger keeps what came of
it: the records known here by schedule key (this worker's, and those of others it has
seen in the database), this worker's records not committed yet, and the counts and best
so far in the worker's ``TaskResult``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypto.db import Record, ScheduleStore, TaskProgress
    from pypto.schedule_space import Schedule
    from pypto.tuner.measure import Measurement
    from pypto.tuner.record_study import RecordStudy
    from pypto.tuner.result import TaskResult
    from pypto.tuner.tasks import Task


class Ledger:
    """The trials of ``task`` known to one worker, kept in ``res``.

    A schedule key is in the ledger once its trial is known here (an invalid record is no
    trial, and never in it). This worker's records are committed to ``store`` every
    ``commit_every`` (``commit`` forces it), and then to ``published``, the study of
    records that Optuna's tools open (``pypto.tuner.record_study``), when there is one."""

    def __init__(self, task: Task, store: ScheduleStore, res: TaskResult,
                 commit_every: int = 1) -> None:
        self.task, self.store, self.res, self.commit_every = task, store, res, commit_every
        self._measured: dict[str, Record] = {}
        self._pending: list[Record] = []
        self.published: RecordStudy | None = None

    def __contains__(self, schedule_key: object) -> bool:
        return schedule_key in self._measured

    def __len__(self) -> int:
        return len(self._measured)

    def get(self, schedule_key: str) -> Record | None:
        return self._measured.get(schedule_key)

    def records(self) -> list[Record]:
        """Every trial known here, in the order it became known."""
        return list(self._measured.values())

    def best(self, k: int) -> list[Schedule]:
        """The schedules of the ``k`` fastest ``ok`` trials known here, fastest first (ties:
        the one known first)."""
        ok = [r for r in self._measured.values() if r.status == "ok" and r.cycles is not None]
        return [r.schedule for r in heapq.nsmallest(k, ok, key=lambda r: r.cycles or 0)]

    def record(self, schedule: Schedule, m: Measurement, *,
               model_score: float | None = None) -> Record:
        """This worker's trial of ``schedule``: kept, counted, committed in its turn;
        ``model_score``: what the strategy's cost model predicted for it."""
        from pypto.db import Record

        res = self.res
        rec = Record.measured(self.task.workload, self.task.target, schedule,
                              cycles=m.cycles if m.ok else None, status=m.status,
                              error=m.error, run_id=res.run_id, model_score=model_score)
        self._measured[schedule.key] = rec
        res.order.append(schedule.key)
        res.trials_run += 1
        res.measure_s += m.lower_s + m.simulate_s
        res.lower_s += m.lower_s
        res.simulate_s += m.simulate_s
        if not m.ok:
            res.errors += 1
        self._pending.append(rec)
        if len(self._pending) >= self.commit_every:
            self.commit()
        return rec

    def commit(self) -> None:
        """Add the records held back to the database (which ends their claims)."""
        if self._pending:
            self.store.add_records(self._pending)
            if self.published is not None:
                self.published.add(self._pending)
            self._pending.clear()

    def remember(self, records: Iterable[Record]) -> list[Record]:
        """Take in records measured elsewhere or before; return the ones new here."""
        new = [r for r in records if r.status != "invalid" and r.schedule_key not in
               self._measured]
        for r in new:
            self._measured[r.schedule_key] = r
            self.update_best(r)
        return new

    def update_best(self, record: Record) -> bool:
        """Take in a result; True if it is the best so far."""
        res = self.res
        if record.status != "ok" or record.cycles is None:
            return False
        if res.best_cycles is None or record.cycles < res.best_cycles:
            res.best_cycles, res.best_schedule = record.cycles, record.schedule
            return True
        return False

    def note_progress(self, progress: TaskProgress) -> None:
        """Take in the database's counts: the trials of every worker, the best cycles."""
        res = self.res
        res.measured_total = max(res.measured_total, progress.measured)
        if progress.best_cycles is not None and (res.best_cycles is None
                                                 or progress.best_cycles < res.best_cycles):
            res.best_cycles, res.best_schedule = progress.best_cycles, None
