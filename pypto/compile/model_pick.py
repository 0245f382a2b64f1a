"""The lookup chain's ``model`` step: the stored cost model's pick for a workload that
has no record of its own.

Candidates: the default, the best record of each of the ``PICK_NEIGHBORS`` nearest
tuned shapes of the family, adapted to this shape and re-validated
(``schedule_space.adapt``) and the valid one-step neighbours (``Space.neighbors``) of
each; then ``EXPAND_ROUNDS`` rounds that add the neighbours of the ``EXPAND_TOP``
best-scored candidates not yet expanded: a search guided by the model, starting where
transfer puts it. Uniform samples of the space would cost milliseconds each
(forward-checked sampling), so within the 50 ms budget the pool is the transferred
points and their neighbourhoods.

The pick departs from the default only when the model prefers its best-scored candidate
to the default by at least the model's *departure margin* (``metrics
["departure_margin"]``), calibrated when it was trained by cross-validation over the
stored workloads (``pypto.cost_model.calibration``): on every held-out workload a pick
with that margin was at most 5% slower than the default. Otherwise, and for a model
without a calibration (fewer than five held-out workloads, or trained by hand), the pick
is the default:
an untuned compile is never much worse than the documented heuristic on the evidence
the model has. Every candidate is a valid point of the space; no measurement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pypto.cost_model.features import featurize
from pypto.db.records import workload_sizes
from pypto.errors import PyptoError
from pypto.schedule_space import Schedule, space_for
from pypto.schedule_space.adapt import adapt
from pypto.sim import MODEL_VERSION

if TYPE_CHECKING:
    from pypto.cost_model.model import CostModel
    from pypto.db.reader import ScheduleReader
    from pypto.ir.workload import Workload
    from pypto.targets import Target

PICK_NEIGHBORS = 8        # nearest tuned shapes whose best records are adapted
EXPAND_ROUNDS = 6         # rounds of greedy neighbourhood expansion
EXPAND_TOP = 2            # best unexpanded candidates expanded per round


def transferred(store: ScheduleReader, wl: Workload, target: Target,
                neighbors: int = PICK_NEIGHBORS) -> list[Schedule]:
    """The best records of the nearest tuned shapes, adapted to ``wl`` (valid, unique;
    one query for all of them)."""
    out: dict[Schedule, None] = {}
    for nb in store.nearest(wl.family_key, target.key, workload_sizes(wl),
                            model_version=MODEL_VERSION, limit=neighbors, exclude=wl.key):
        a = adapt(wl, target, nb.record.schedule)
        if a is not None:
            out.setdefault(a, None)
    return list(out)


def model_pick(store: ScheduleReader, wl: Workload, target: Target,
               model: CostModel) -> Schedule | None:
    """The model's pick (see the module docstring): its best-scored candidate when that
    beats the default by the calibrated margin, else the default; None when the space
    cannot be built."""
    scored = scored_pool(store, wl, target, model)
    if scored is None:
        return None
    schedules, scores = scored
    return schedules[choose(scores, model.metrics.get("departure_margin"))]


def choose(scores: np.ndarray, margin: float | None) -> int:
    """The index picked among scored candidates whose first is the default: the
    best-scored (ties: the earlier) if it beats the default's score by ``margin``, else
    0 (the default; also when ``margin`` is None: an uncalibrated model)."""
    best = int(np.argmax(scores))
    if margin is None or not np.isfinite(margin) or scores[best] - scores[0] < margin:
        return 0
    return best


def scored_pool(store: ScheduleReader, wl: Workload, target: Target,
                model: CostModel) -> tuple[list[Schedule], np.ndarray] | None:
    """The candidates (the default first) and their scores; None when the space cannot
    be built."""
    try:
        space = space_for(wl, target)
        pool: dict[Schedule, None] = {}
        for s in [space.default(), *transferred(store, wl, target)]:
            pool.setdefault(s, None)
    except PyptoError:
        return None
    schedules = list(pool)
    scores = list(model.predict(featurize(wl, schedules, target, space)))
    expanded: set[Schedule] = set()
    for round_ in range(EXPAND_ROUNDS + 1):
        order = sorted(range(len(schedules)), key=lambda i: (-scores[i], i))
        # first every starting point's neighbourhood, then the best few, greedily
        top = len(schedules) if round_ == 0 else EXPAND_TOP
        bases = [schedules[i] for i in order if schedules[i] not in expanded][:top]
        new: list[Schedule] = []
        for base in bases:
            expanded.add(base)
            for nb in space.neighbors(base):
                if nb not in pool:
                    pool[nb] = None
                    new.append(nb)
        if not new:
            break
        schedules += new
        scores += list(model.predict(featurize(wl, new, target, space)))
    return schedules, np.asarray(scores, dtype=np.float64)
