"""The study Optuna's tools open: every measured trial of a (workload, target), with the
real values of its schedule.

The samplers' own studies are the wrong thing to show: a single process keeps its study
in memory (no I/O per ask and tell), and the ``tpe``/``gp``/``cmaes`` strategies encode a
schedule as floats that mean something only given the axes before them
(``FeasibleStrategy``). So every run also writes what it measured to a study of records
in the database's Optuna storage (``pypto.tuner.study.storage_for``: a journal file beside
a SQLite database, Optuna's tables on PostgreSQL), one trial per record as it is
committed (one journal line, or one transaction):

- the parameters are the schedule's axes with their real values, each a categorical
  distribution over the axis's choices (a schedule that is no point of the space, e.g.
  from an older space, has its values as the user attribute ``schedule`` instead);
- the value is the cycles, and the objective is named ``cycles``;
- a failed measurement is a ``FAIL`` trial whose user attribute ``reason`` says why;
- ``schedule_key`` and ``run_id`` tie a trial to its record and run;
- the study is named ``matmul 1024x1024x1024 f16 ascend910b`` (``pypto.tuner.study_names``)
  with the workload and target keys among its user attributes.

A run adds the task's records the study lacks before its first trial (imported logs,
records of older versions of PyPTO), so the study holds every measured record of the
current timing model; records of runs still running are left to their own process
(``settled``). Writing it is a view of the database, not part of tuning: if it fails, a
warning says so and the run goes on.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pypto.tuner.study_names import identity, named_study, short_name

if TYPE_CHECKING:
    import optuna

    from pypto.db import Record, ScheduleStore
    from pypto.schedule_space import Space
    from pypto.tuner.tasks import Task

KIND = "records"
SCHEDULE_KEY_ATTR = "schedule_key"


class RecordStudy:
    """The study of records of one task (``open`` finds or creates it)."""

    def __init__(self, study: optuna.Study, space: Space) -> None:
        self.study, self.space = study, space
        self.broken = False

    @classmethod
    def open(cls, url: str, task: Task,
             catch_up: Iterable[Record] | None = None) -> RecordStudy | None:
        """The study of records of ``task`` in the Optuna storage of the database at
        ``url``; None for an in-memory database (nothing to keep it in) or a storage that
        cannot be opened (then a warning says why). ``catch_up``: records to add if the
        study lacks them."""
        from pypto.tuner.study import storage_for

        try:
            storage = storage_for(url)
            if storage is None:
                return None
            study = named_study(storage, short_name(task.workload, task.target.name),
                                identity(task, KIND),
                                attrs={"workload": task.workload.describe(),
                                       "target": task.target.name})
        except Exception as e:  # noqa: BLE001 - a view of the database: tuning goes on
            _warn(e)
            return None
        out = cls(study, task.space)
        if catch_up is not None:
            out.add_missing(catch_up)
        return out

    def add(self, records: Iterable[Record]) -> None:
        """Add ``records`` (measured, any status but invalid) as finished trials."""
        trials = [trial_of(r, self.space) for r in records if r.status != "invalid"]
        if not trials or self.broken:
            return
        try:
            self.study.add_trials(trials)
        except Exception as e:  # noqa: BLE001 - a view of the database: tuning goes on
            self.broken = True
            _warn(e)

    def add_missing(self, records: Iterable[Record]) -> None:
        """Add the ``records`` whose schedule has no trial in the study yet."""
        try:
            present = {t.user_attrs.get(SCHEDULE_KEY_ATTR)
                       for t in self.study.get_trials(deepcopy=False)}
        except Exception as e:  # noqa: BLE001 - a view of the database: tuning goes on
            self.broken = True
            _warn(e)
            return
        self.add(r for r in records if r.schedule_key not in present)


def settled(store: ScheduleStore, records: Iterable[Record]) -> list[Record]:
    """The ``records`` no running run will add to the study itself: a live process adds
    each of its records as it commits it, so a catch-up that took those too could add one
    twice. A run whose process died without ending it (``run_lost``) is settled."""
    from pypto.tuner.liveness import run_lost

    running = {r.id for r in store.runs() if r.status == "running" and not run_lost(r)}
    return [r for r in records if r.run_id is None or r.run_id not in running]


def trial_of(record: Record, space: Space) -> optuna.trial.FrozenTrial:
    """The finished Optuna trial of ``record``: its schedule's values as categorical
    parameters, its cycles as the value (a ``FAIL`` trial with a ``reason`` if it failed)."""
    import optuna

    from pypto.tuner.strategies.base import categorical

    encoded = categorical(space, record.schedule)
    attrs: dict[str, Any] = {SCHEDULE_KEY_ATTR: record.schedule_key}
    if record.run_id is not None:
        attrs["run_id"] = record.run_id
    if encoded is None:
        attrs["schedule"] = dict(record.schedule)
    ok = record.status == "ok" and record.cycles is not None
    if not ok:
        attrs["reason"] = f"{record.status}: {record.error or 'no reason recorded'}"
    when = record.created_at or datetime.now(UTC)
    states = optuna.trial.TrialState
    return optuna.trial.FrozenTrial(
        number=0, trial_id=0, state=states.COMPLETE if ok else states.FAIL,
        value=float(record.cycles) if ok and record.cycles is not None else None,
        datetime_start=when, datetime_complete=when,
        params=encoded[0] if encoded else {}, distributions=encoded[1] if encoded else {},
        user_attrs=attrs, system_attrs={}, intermediate_values={})


def _warn(e: BaseException) -> None:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    warnings.warn(f"the Optuna study of the tuning records could not be written ({text}); "
                  "tuning goes on, the records are in the database", RuntimeWarning,
                  stacklevel=3)
