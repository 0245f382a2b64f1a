"""Warm start from tuned neighbours: the best schedules of the nearest tuned shapes of the
same family, adapted to this shape, as a task's first trials after the default.

A shape nobody tuned is rarely far from one somebody did (a sequence length, a batch
size apart), and the best schedule there, adapted (``pypto.schedule_space.adapt``), is
often better than the default here. The loop (``pypto.tuner.loop``) enqueues these into
the study, so each is an Optuna trial and a database record like any other.
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypto.db import ScheduleStore
    from pypto.schedule_space import Schedule
    from pypto.tuner.tasks import Task

#: tuned neighbours a warm start takes schedules from
NEIGHBORS = 4


def transferred(task: Task, store: ScheduleStore, measured: Container[str] = (), *,
                limit: int = NEIGHBORS) -> list[Schedule]:
    """The best schedules of the ``limit`` tuned workloads of ``task``'s family nearest to
    its shape (``ScheduleStore.nearest``, under the current timing model), adapted to this
    shape and valid in ``task.space`` now; nearest first, without repeats and without the
    ``measured`` ones (schedule keys)."""
    from pypto.db.records import workload_sizes
    from pypto.schedule_space.adapt import adapt
    from pypto.sim import MODEL_VERSION

    wl, target = task.workload, task.target
    out: list[Schedule] = []
    seen: set[str] = set()
    for neighbor in store.nearest(wl.family_key, target.key, workload_sizes(wl),
                                  model_version=MODEL_VERSION, limit=limit, exclude=wl.key):
        adapted = adapt(wl, target, neighbor.record.schedule)
        if adapted is None or task.space.validate(adapted):
            continue
        if adapted.key in seen or adapted.key in measured:
            continue
        seen.add(adapted.key)
        out.append(adapted)
    return out
