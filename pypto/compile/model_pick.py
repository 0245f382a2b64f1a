"""The lookup chain's ``model`` step: the stored cost model's pick for a workload that
has no record of its own.

Candidates: the default, the best few records of each of the ``PICK_NEIGHBORS`` nearest
tuned shapes of the family, adapted to this shape and re-validated
(``schedule_space.adapt``), then ``EXPAND_ROUNDS`` rounds that add the valid one-step
neighbours (``Space.neighbors``) of the ``EXPAND_TOP`` best-scored candidates not yet
expanded: a search guided by the model, starting where transfer puts it. Uniform
samples of the space would cost milliseconds each (forward-checked sampling), so
within the 50 ms budget the pool is the transferred points and their neighbourhoods.
The best-scored candidate is returned (ties: the earlier candidate, so the default
first); every candidate is a valid point of the space.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pypto.cost_model.features import featurize
from pypto.db.records import workload_sizes
from pypto.errors import PyptoError
from pypto.schedule_space import space_for
from pypto.schedule_space.adapt import adapt
from pypto.sim import MODEL_VERSION

if TYPE_CHECKING:
    from pypto.cost_model.model import CostModel
    from pypto.db.store import ScheduleStore
    from pypto.ir.workload import Workload
    from pypto.schedule_space import Schedule
    from pypto.targets import Target

PICK_NEIGHBORS = 5        # nearest tuned shapes whose records are adapted
RECORDS_PER_NEIGHBOR = 3  # their best records
EXPAND_ROUNDS = 3         # rounds of neighbourhood expansion
EXPAND_TOP = 2            # best unexpanded candidates expanded per round


def transferred(store: ScheduleStore, wl: Workload, target: Target,
                neighbors: int = PICK_NEIGHBORS,
                per_neighbor: int = RECORDS_PER_NEIGHBOR) -> list[Schedule]:
    """The best records of the nearest tuned shapes, adapted to ``wl`` (valid, unique)."""
    out: dict[str, Schedule] = {}
    for nb in store.nearest(wl.family_key, target.key, workload_sizes(wl),
                            model_version=MODEL_VERSION, limit=neighbors, exclude=wl.key):
        for r in store.iter_records(workload_key=nb.workload.key, target_key=target.key,
                                    model_version=MODEL_VERSION, status="ok",
                                    limit=per_neighbor):
            a = adapt(wl, target, r.schedule)
            if a is not None:
                out.setdefault(a.key, a)
    return list(out.values())


def model_pick(store: ScheduleStore, wl: Workload, target: Target,
               model: CostModel) -> Schedule | None:
    """The candidate ``model`` scores best (see the module docstring); None when the
    space cannot be built."""
    try:
        space = space_for(wl, target)
        pool: dict[str, Schedule] = {}
        for s in [space.default(), *transferred(store, wl, target)]:
            pool.setdefault(s.key, s)
    except PyptoError:
        return None
    schedules = list(pool.values())
    scores = list(model.predict(featurize(wl, schedules, target, space)))
    expanded: set[str] = set()
    for _ in range(EXPAND_ROUNDS):
        order = sorted(range(len(schedules)), key=lambda i: (-scores[i], i))
        bases = [schedules[i] for i in order if schedules[i].key not in expanded][:EXPAND_TOP]
        new: list[Schedule] = []
        for base in bases:
            expanded.add(base.key)
            for nb in space.neighbors(base):
                if nb.key not in pool:
                    pool[nb.key] = nb
                    new.append(nb)
        if not new:
            break
        schedules += new
        scores += list(model.predict(featurize(wl, new, target, space)))
    best = int(np.argmax(np.asarray(scores)))  # first of the ties
    return schedules[best]
