"""Schedule databases for the report's tests and benchmark, built through the store
API: real workloads (matmuls of several shapes) with valid schedules sampled from their
spaces, and made-up cycles (no simulation), so any size builds in seconds."""

from __future__ import annotations

import random
import warnings

import pypto
from pypto.db import Record, TargetInfo, WorkloadInfo
from pypto.db.store import ScheduleStore
from pypto.errors import ScheduleFallbackWarning
from pypto.schedule_space import space_for
from pypto.sim.roofline import workload_bound
from pypto.targets import load_target


def matmul_workload(m: int, n: int, k: int):
    kern = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():  # no tuned schedule: the default is all we need
        warnings.simplefilter("ignore", ScheduleFallbackWarning)
        return kern.lower(pypto.spec((m, k), "float16"), pypto.spec((k, n), "float16"),
                          target="ascend910b").workloads[0]


def shapes(count: int) -> list[tuple[int, int, int]]:
    sizes = [128, 256, 384, 512, 768, 1024]
    out = [(m, n, k) for m in sizes for n in sizes for k in sizes]
    random.Random(0).shuffle(out)
    return out[:count]


def fill(store: ScheduleStore, workloads: int, trials: int, *, seed: int = 0,
         runs_per_workload: int = 2, failures: float = 0.05) -> list[WorkloadInfo]:
    """Add ``workloads`` matmul workloads with ``trials`` records each, split over
    ``runs_per_workload`` runs of different strategies; a share ``failures`` of the
    records are errors or invalid. Returns the workloads."""
    rng = random.Random(seed)
    target = load_target("ascend910b")
    tinfo = TargetInfo.of(target)
    infos = []
    strategies = ("tpe", "random", "grid")
    for m, n, k in shapes(workloads):
        wl = matmul_workload(m, n, k)
        info = WorkloadInfo.of(wl)
        infos.append(info)
        space = space_for(wl, target)
        bound = workload_bound(wl, target)
        seen: dict[str, object] = {}
        for _ in range(trials * 3):
            s = space.sample(rng.randrange(1 << 30))
            seen.setdefault(s.key, s)
            if len(seen) >= trials:
                break
        schedules = list(seen.values())
        per_run = -(-len(schedules) // runs_per_workload)
        records = []
        for r in range(runs_per_workload):
            strategy = strategies[r % len(strategies)]
            run = store.start_run(strategy=strategy, trials_asked=per_run, workload=info,
                                  target=tinfo, command="synthetic")
            for s in schedules[r * per_run:(r + 1) * per_run]:
                roll = rng.random()
                if roll < failures / 2:
                    records.append(Record.measured(wl, target, s, status="error",
                                                   error="SimError: synthetic failure",
                                                   run_id=run))
                elif roll < failures:
                    records.append(Record.measured(wl, target, s, status="invalid",
                                                   error="l1 tile over capacity", run_id=run))
                else:
                    cycles = int(bound * (1.1 + rng.expovariate(0.5)))
                    records.append(Record.measured(wl, target, s, cycles=cycles, run_id=run))
            store.update_run(run, trials_done=per_run, status="done")
        store.add_records(records, workloads=[info], targets=[tinfo])
    return infos
