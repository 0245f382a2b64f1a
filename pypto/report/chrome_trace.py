"""Chrome Trace Event JSON of profiled calls, in a shape Perfetto imports whole.

Perfetto drops a complete (``ph: "X"``) slice that partly overlaps another slice on the
same ``(pid, tid)`` track. A pipe's instructions overlap in the trace (a DMA holds its
pipe for its transfer but completes ``latency`` cycles later; a ``SET_FLAG`` raises its
flag after the pipe's earlier work completes), so each pipe's slices are spread over
*lanes*: threads ``MTE2``, ``MTE2 (in flight 2)``, … chosen greedily, the fewest that
keep every lane's slices disjoint. Flag instructions go to a ``flags`` track of their
own. Process ``kernel`` (sorted first) holds one slice per launched workload and, on a
track of its own, its launch overhead; instructions start after the launch, so the trace spans
exactly the reported kernel time. A counter per core gives the DMAs in flight.

Times: integer nanoseconds, written as microseconds plus a quarter nanosecond. Perfetto
reads a JSON number as ``int64(us * 1000)`` (truncating); ``k / 1000`` truncates to
``k - 1`` for about 1% of ``k``, which would make touching slices overlap by 1 ns. The
quarter keeps truncation and rounding both at ``k``.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pypto.codegen.isa import Op, Pipe

if TYPE_CHECKING:
    from pypto.report.profiler import ProfiledCall
    from pypto.sim.result import SimResult

KERNEL_PID = 0                  # the launch track; core c is process c + 1
FLAG_OPS = (Op.SET_FLAG, Op.WAIT_FLAG)
FLAGS_SLOT = len(Pipe)          # the flags track sorts after every pipe
LANE_STRIDE = 1000              # tid = slot * LANE_STRIDE + lane


def ns_to_json(ns: int) -> float:
    """An integer count of nanoseconds as the microseconds a trace holds (see above)."""
    return (ns + 0.25) / 1000


def json_to_ns(us: float) -> int:
    """The nanoseconds Perfetto reads from a JSON time (it truncates)."""
    return int(us * 1000)


@dataclass(frozen=True)
class Slice:
    core: int
    slot: int       # a pipe, or FLAGS_SLOT
    name: str
    start: int      # cycles from the start of the whole trace
    end: int
    instruction: int
    workload: str


def assign_lanes(slices: Sequence[Slice]) -> list[int]:
    """A lane per slice such that the slices of one lane are disjoint, using the fewest
    lanes (interval partitioning: the lane that has been free longest, lowest first on
    ties, takes the next slice by start)."""
    order = sorted(range(len(slices)), key=lambda i: (slices[i].start, slices[i].end))
    lanes = [0] * len(slices)
    free: list[tuple[int, int]] = []   # (end of the lane's last slice, lane) as a heap
    idle: list[int] = []                # lanes free by now, lowest first
    used = 0
    for i in order:
        s = slices[i]
        while free and free[0][0] <= s.start:
            heapq.heappush(idle, heapq.heappop(free)[1])
        if idle:
            lane = heapq.heappop(idle)
        else:
            lane, used = used, used + 1
        lanes[i] = lane
        heapq.heappush(free, (s.end, lane))
    return lanes


def _slices(r: SimResult, offset: int, label: str) -> Iterator[Slice]:
    launch = offset + _launch_cycles(r)
    assert r.trace is not None
    for rec in r.trace:
        op = Op(int(rec["op"]))
        start = launch + int(rec["start"])
        end = launch + max(int(rec["end"]), int(rec["start"]) + 1)
        slot = FLAGS_SLOT if op in FLAG_OPS else int(rec["pipe"])
        yield Slice(int(rec["core"]), slot, op.name, start, end, int(rec["index"]), label)


def _launch_cycles(r: SimResult) -> int:
    """The launch overhead: the kernel's cycles minus its slowest core's."""
    longest = int(r.core_cycles.max()) if len(r.core_cycles) else 0
    return r.cycles - longest


def _slot_name(slot: int) -> str:
    return "flags" if slot == FLAGS_SLOT else Pipe(slot).name


def trace_events(calls: Sequence[ProfiledCall]) -> list[dict]:
    """The trace's events: metadata, launches, instructions and DMA counters."""
    if not calls or not calls[0].results:
        return []
    clock_ghz = calls[0].results[0].clock_ghz

    def ns(cycles: int) -> int:  # monotone, so disjoint cycle ranges stay disjoint
        return round(cycles / clock_ghz)

    events: list[dict] = []
    slices: list[Slice] = []
    offset = 0  # cycles: calls and workloads one after another, as they ran
    for n, call in enumerate(calls):
        for i, (wl, r) in enumerate(zip(call.workloads, call.results)):
            label = f"{call.kernel}[{n}] workload {i}: {' + '.join(wl.ops)}"
            launch = _launch_cycles(r)
            events.append(_complete(KERNEL_PID, 0, label, ns(offset), ns(offset + r.cycles),
                                    {"cycles": r.cycles, "schedule": call.sources[i]}))
            events.append(_complete(KERNEL_PID, 1, "launch", ns(offset),
                                    ns(offset + launch), {"cycles": launch}))
            if r.trace is not None:
                slices.extend(_slices(r, offset, label))
            offset += r.cycles

    tracks: dict[tuple[int, int], list[Slice]] = {}
    for s in slices:
        tracks.setdefault((s.core, s.slot), []).append(s)
    cores = sorted({core for core, _ in tracks})
    for (core, slot), track in sorted(tracks.items()):
        lanes = assign_lanes(track)
        for s, lane in zip(track, lanes):
            events.append(_complete(core + 1, slot * LANE_STRIDE + lane, s.name, ns(s.start),
                                    ns(s.end), {"instruction": s.instruction,
                                                "workload": s.workload}, cat=s.workload))
        for lane in range(max(lanes) + 1):
            name = _slot_name(slot) + (f" (in flight {lane + 1})" if lane else "")
            tid = slot * LANE_STRIDE + lane
            events.append(_meta("thread_name", core + 1, tid, name=name))
            events.append(_meta("thread_sort_index", core + 1, tid, sort_index=tid))
    events.extend(_dma_counters(tracks, ns))

    events.append(_meta("process_name", KERNEL_PID, 0, name="kernel"))
    events.append(_meta("process_sort_index", KERNEL_PID, 0, sort_index=0))
    events.append(_meta("thread_name", KERNEL_PID, 0, name="workloads"))
    events.append(_meta("thread_name", KERNEL_PID, 1, name="launch overhead"))
    for core in cores:
        events.append(_meta("process_name", core + 1, 0, name=f"core {core}"))
        events.append(_meta("process_sort_index", core + 1, 0, sort_index=core + 1))
    return events


def _dma_counters(tracks: dict[tuple[int, int], list[Slice]],
                  ns: Callable[[int], int]) -> Iterator[dict]:
    """Per core, a ``C`` counter of the COPYs in flight (issued, not yet complete)."""
    by_core: dict[int, list[tuple[int, int]]] = {}
    for (core, _), track in tracks.items():
        for s in track:
            if s.name == Op.COPY.name:
                by_core.setdefault(core, []).extend([(s.start, 1), (s.end, -1)])
    for core, changes in sorted(by_core.items()):
        level, last = 0, None
        points: list[tuple[int, int]] = []
        for t, d in sorted(changes):
            level += d
            t_ns = ns(t)
            if points and points[-1][0] == t_ns:
                points[-1] = (t_ns, level)
            else:
                points.append((t_ns, level))
        for t_ns, level in points:
            if level != last:
                yield {"name": "DMAs in flight", "ph": "C", "pid": core + 1,
                       "ts": ns_to_json(t_ns), "args": {"copies": level}}
                last = level


def _complete(pid: int, tid: int, name: str, start_ns: int, end_ns: int, args: dict,
              cat: str = "kernel") -> dict:
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
            "ts": ns_to_json(start_ns), "dur": ns_to_json(end_ns - start_ns), "args": args}


def _meta(kind: str, pid: int, tid: int, **args: object) -> dict:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": args}


def write_chrome_trace(calls: Sequence[ProfiledCall], path: Path) -> Path:
    """Write the calls' trace to ``path`` (open it in Perfetto or chrome://tracing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": trace_events(calls),
                                "displayTimeUnit": "ns"}))
    return path
