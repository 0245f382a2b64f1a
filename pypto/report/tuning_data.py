"""What the tuning report shows, gathered from a ``ScheduleStore`` into plain values.

``collect(store)`` reads, per (workload, target) of the current timing-model version,
every record and the runs that made them, and simulates two schedules: the default
heuristic (the "before") and the best record (its pipe timeline, its DRAM traffic).
Figures and the page are built from these values only (``tuning_figures``,
``tuning_html``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from pypto.codegen.isa import Pipe
from pypto.db.records import Record, Run, WorkloadInfo
from pypto.errors import PyptoError
from pypto.ir.dtypes import BY_NAME
from pypto.sim import MODEL_VERSION

if TYPE_CHECKING:
    from pypto.db.store import ScheduleStore
    from pypto.ir.workload import Workload
    from pypto.schedule_space import Schedule
    from pypto.sim.result import SimResult
    from pypto.targets import Target

TIMELINE_BUCKETS = 60   # columns of the best schedule's pipe timeline
TOP = 10                # schedules listed per workload


@dataclass(frozen=True)
class Trial:
    """One record, as plotted: its order within its run, seconds since the run began."""

    cycles: int | None
    status: str
    error: str | None
    run: str           # "run 3 (tpe)", or the record's source when it has no run
    index: int         # 1-based, within the run
    seconds: float | None
    schedule: dict
    model_score: float | None = None   # the cost model's score when it was proposed


@dataclass(frozen=True)
class Simulated:
    """A schedule simulated for the report."""

    cycles: int
    dram_bytes: int
    pipe_busy: tuple[float, ...]               # busy share of the kernel time per pipe
    timeline: tuple[tuple[float, ...], ...]    # [pipe][bucket] busy share, all cores


@dataclass
class WorkloadReport:
    info: WorkloadInfo
    target: str
    clock_ghz: float
    describe: str
    flops: int
    bound_cycles: int | None
    memory_bound: bool | None
    intensity: float | None          # FLOP per compulsory GM byte
    trials: list[Trial]
    runs: dict[str, Run | None]
    default: Simulated | None
    best: Simulated | None
    best_record: Record | None
    top: list[Record] = field(default_factory=list)
    importance: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"w-{self.info.key[:12]}-{self.target}"

    def us(self, cycles: int | None) -> float | None:
        return None if cycles is None else cycles / (self.clock_ghz * 1e3)

    @property
    def best_cycles(self) -> int | None:
        return self.best_record.cycles if self.best_record else None

    @property
    def default_cycles(self) -> int | None:
        return self.default.cycles if self.default else None

    @property
    def speedup(self) -> float | None:
        if self.best_cycles and self.default_cycles:
            return self.default_cycles / self.best_cycles
        return None

    @property
    def efficiency(self) -> float | None:
        if self.best_cycles and self.bound_cycles:
            return self.bound_cycles / self.best_cycles
        return None

    def counts(self) -> Counter[str]:
        return Counter(t.status for t in self.trials)

    @property
    def strategies(self) -> list[str]:
        return sorted({r.strategy for r in self.runs.values() if r is not None})

    @property
    def tuning_seconds(self) -> float:
        """The runs' wall time: per run, its first to its last record (or its end)."""
        total = 0.0
        for name in self.runs:
            times = [t.seconds for t in self.trials if t.run == name and t.seconds is not None]
            total += max(times, default=0.0)
        return total


def collect(store: ScheduleStore, *, target: str | None = None,
            workloads: Sequence[str] = (), simulate: bool = True) -> list[WorkloadReport]:
    """One ``WorkloadReport`` per (workload, target) with records of the current
    timing-model version; ``target`` (a name) and ``workloads`` (key prefixes) filter."""
    from pypto.targets import load_target

    runs = {r.id: r for r in store.runs()}
    out = []
    for s in store.summary():
        if s.model_version != MODEL_VERSION or (target and s.target_name != target):
            continue
        if workloads and not any(s.workload.key.startswith(p.lower()) for p in workloads):
            continue
        try:
            tgt = load_target(s.target_name)
        except PyptoError:
            continue  # a target this installation does not have: nothing to simulate on
        records = store.records(workload_key=s.workload.key, target_key=s.target_key,
                                model_version=MODEL_VERSION)
        out.append(_workload_report(s.workload, tgt, records, runs, simulate))
    return out


def _workload_report(info: WorkloadInfo, target: Target, records: list[Record],
                     runs: dict[int, Run], simulate: bool) -> WorkloadReport:
    from pypto.sim.roofline import workload_bound

    wl = info.workload()
    notes: list[str] = []
    try:
        bound = workload_bound(wl, target)
    except PyptoError as e:
        bound, notes = None, [f"no roofline bound: {e}"]
    memory = compulsory_bytes(wl)
    memory_cycles = target.launch_overhead_cycles + math.ceil(
        memory / target.gm_bytes_per_cycle_chip)
    trials, run_of = _trials(records, runs)
    ok = [r for r in records if r.status == "ok"]
    best_record = min(ok, key=lambda r: r.cycles or 0) if ok else None
    report = WorkloadReport(
        info, target.name, target.clock_ghz, wl.describe(), wl.flops, bound,
        None if bound is None else memory_cycles >= bound,
        wl.flops / memory if memory else None, trials, run_of, None, None, best_record,
        sorted(ok, key=lambda r: r.cycles or 0)[:TOP], importance(trials), notes)
    if simulate:
        from pypto.schedule_space import default_schedule

        try:
            report.default = simulate_schedule(wl, target, default_schedule(wl, target))
        except PyptoError as e:
            notes.append(f"the default schedule did not run: {e}")
        if best_record is not None:
            try:
                report.best = simulate_schedule(wl, target, best_record.schedule)
            except PyptoError as e:
                notes.append(f"the best record's schedule no longer runs: {e}")
    return report


def compulsory_bytes(wl: Workload) -> int:
    """GM bytes no schedule avoids: each input's footprint once and each output once
    (the memory term of ``pypto.sim.roofline``)."""
    total = 0
    for n in wl.nodes:
        if n.op == "load":
            total += math.prod(d for d, s in zip(n.shape, n.attr("strides")) if s != 0) \
                * BY_NAME[n.dtype].itemsize
    for o in wl.outputs:
        total += math.prod(wl.nodes[o].shape) * BY_NAME[wl.nodes[o].dtype].itemsize
    return total


def _trials(records: list[Record], runs: dict[int, Run]) -> tuple[list[Trial], dict]:
    """Records in the order they were made, numbered within their run."""
    def when(r: Record) -> datetime:
        return r.created_at or datetime.min

    by_run: dict[str, list[Record]] = {}
    run_of: dict[str, Run | None] = {}
    for r in sorted(records, key=when):
        run = runs.get(r.run_id) if r.run_id is not None else None
        name = f"run {run.id} ({run.strategy})" if run else f"{r.source} (no run)"
        by_run.setdefault(name, []).append(r)
        run_of[name] = run
    trials = []
    for name, rs in by_run.items():
        run = run_of[name]
        t0 = (run.started_at if run and run.started_at else None) or rs[0].created_at
        for i, r in enumerate(rs, 1):
            seconds = _seconds(t0, r.created_at)
            trials.append(Trial(r.cycles, r.status, r.error, name, i, seconds,
                                dict(r.schedule), r.model_score))
    return trials, run_of


def _seconds(t0: datetime | None, t: datetime | None) -> float | None:
    if t0 is None or t is None:
        return None
    if (t0.tzinfo is None) != (t.tzinfo is None):
        t0, t = t0.replace(tzinfo=None), t.replace(tzinfo=None)
    return max(0.0, (t - t0).total_seconds())


def importance(trials: Sequence[Trial]) -> dict[str, float]:
    """Per schedule knob, the share of the variance of log(cycles) over the ok trials
    that the knob's value alone explains (one-way ANOVA's eta squared: between-group
    sum of squares over the total), largest first. Knobs with one value score 0."""
    ok = [t for t in trials if t.status == "ok" and t.cycles]
    if len(ok) < 3:
        return {}
    y = np.log(np.array([t.cycles for t in ok], dtype=np.float64))
    total = float(((y - y.mean()) ** 2).sum())
    if total == 0:
        return {}
    knobs = sorted({k for t in ok for k in t.schedule})
    out = {}
    for k in knobs:
        groups: dict[str, list[float]] = {}
        for t, v in zip(ok, y):
            groups.setdefault(repr(t.schedule.get(k)), []).append(float(v))
        between = sum(len(g) * (np.mean(g) - y.mean()) ** 2 for g in groups.values())
        out[k] = float(between / total)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def simulate_schedule(wl: Workload, target: Target, schedule: Schedule) -> Simulated:
    """Lower and time ``schedule``; its pipe timeline as busy shares per time bucket."""
    from pypto.codegen.lower import lower
    from pypto.sim.roofline import workload_bound
    from pypto.sim.timing import simulate

    r = simulate(lower(wl, schedule, target), target, trace=True,
                 bound_cycles=workload_bound(wl, target))
    return Simulated(r.cycles, r.gm_read_bytes + r.gm_write_bytes,
                     tuple(r.utilization().values()), pipe_timeline(r))


def pipe_timeline(r: SimResult, buckets: int = TIMELINE_BUCKETS) -> tuple[tuple[float, ...], ...]:
    """``[pipe][bucket]``: the share of each time bucket a pipe worked, averaged over the
    cores (the trace's instruction spans, launch excluded, clipped to the buckets)."""
    out = np.zeros((len(Pipe), buckets))
    t = r.trace
    cores = max(1, len(r.core_cycles))
    span = int(r.core_cycles.max()) if len(r.core_cycles) else 0
    if t is None or span == 0:
        return tuple(tuple(row) for row in out)
    width = span / buckets
    edges = np.arange(buckets + 1) * width
    for rec in t:
        s, e = float(rec["start"]), float(rec["end"])
        lo, hi = int(s // width), min(buckets - 1, int(max(s, e - 1e-9) // width))
        for b in range(lo, hi + 1):
            out[int(rec["pipe"]), b] += max(0.0, min(e, edges[b + 1]) - max(s, edges[b]))
    out /= width * cores
    return tuple(tuple(round(float(x), 4) for x in row) for row in np.minimum(out, 1.0))
