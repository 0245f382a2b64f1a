"""``SimResult``: what the timing model reports about one program run."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from pypto.codegen.isa import COMPUTE_PIPES, Mem, Pipe
from pypto.codegen.memories import memory_map
from pypto.targets import Target

PIPES = tuple(p.name for p in Pipe)
MEMS = tuple(m.name for m in Mem)  # by role: a target names them (``target_facts``)

# Trace records: one per instruction, in program order per core.
TRACE = np.dtype([("core", "i4"), ("index", "i4"), ("pipe", "u1"), ("op", "u1"),
                  ("start", "i8"), ("end", "i8")])


@dataclass
class SimResult:
    """Timing of a program on a target.

    Attributes:
        cycles: total kernel time in cycles: the slowest core plus launch overhead.
        time_us: ``cycles`` at the target's clock.
        core_cycles: per core, when its last instruction completed.
        pipe_busy: ``[core, pipe]`` cycles each pipe spent working.
        flag_wait: ``[core, pipe, source pipe]`` cycles a pipe was blocked in
            ``WAIT_FLAG`` on a flag from the source pipe (a bubble).
        starved: ``[core, pipe]`` cycles a pipe sat idle with nothing issued to it yet.
        queue_stall: ``[core, pipe]`` cycles the scalar unit could not issue because that
            pipe's instruction queue was full.
        path_bytes: ``[src mem, dst mem]`` bytes moved by DMAs (all cores).
        l2_hit_bytes, gm_read_bytes, gm_write_bytes: GM traffic: the bytes of GM reads
            served by L2, and all bytes read from and written to GM (hits included).
        dram_read_bytes, dram_write_bytes: what DRAM moved. Reads fetch whole L2 lines
            (every missed line costs ``l2_line_bytes``); writes move the bytes written,
            a contiguous run shorter than the path's ``min_burst`` counting as that.
        bound_cycles: the schedule-independent roofline bound (plus launch overhead).
        efficiency: ``bound_cycles / cycles``.
        hazards: data races found in the timed trace (empty when clean; only computed when
            asked for).
        trace: per-instruction ``TRACE`` records when asked for.
        memories: the target's name of each memory code (``""``: it has none).
        copy_pipes: the pipes that move data: those the target's data paths run on,
            except the compute pipes (a vector-to-vector copy runs on the vector unit).
    """

    target: str
    clock_ghz: float
    cycles: int
    core_cycles: np.ndarray
    pipe_busy: np.ndarray
    flag_wait: np.ndarray
    starved: np.ndarray
    queue_stall: np.ndarray
    path_bytes: np.ndarray
    l2_hit_bytes: int
    gm_read_bytes: int
    gm_write_bytes: int
    dram_read_bytes: int
    dram_write_bytes: int
    bound_cycles: int
    instructions: int
    hazards: list[str] = field(default_factory=list)
    trace: np.ndarray | None = None
    memories: tuple[str, ...] = MEMS
    copy_pipes: tuple[int, ...] = ()

    @property
    def time_us(self) -> float:
        return self.cycles / (self.clock_ghz * 1e3)

    @property
    def efficiency(self) -> float:
        return self.bound_cycles / self.cycles if self.cycles else 1.0

    def utilization(self) -> dict[str, float]:
        """Busy share of the kernel time per pipe, averaged over the cores used."""
        cores = max(1, len(self.core_cycles))
        return {name: float(self.pipe_busy[:, i].sum()) / (cores * max(1, self.cycles))
                for i, name in enumerate(PIPES)}

    def bubbles(self) -> dict[str, int]:
        """Bubble cycles by cause, summed over cores: ``"VEC waits MTE2"`` etc."""
        out: dict[str, int] = {}
        for p, name in enumerate(PIPES):
            for q, src in enumerate(PIPES):
                cycles = int(self.flag_wait[:, p, q].sum())
                if cycles:
                    out[f"{name} waits {src}"] = cycles
            if int(self.queue_stall[:, p].sum()):
                out[f"SCALAR: {name} queue full"] = int(self.queue_stall[:, p].sum())
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def bytes_by_path(self) -> dict[str, int]:
        """Bytes moved per data path, by the target's memory names: ``"GM->L1"`` etc."""
        names = [name or MEMS[code] for code, name in enumerate(self.memories)]
        return {f"{names[s]}->{names[d]}": int(self.path_bytes[s, d])
                for s in range(len(names)) for d in range(len(names)) if self.path_bytes[s, d]}

    def same_timing(self, other: SimResult) -> bool:
        """Equal in every field both engines compute (the engines' contract)."""
        arrays = ("core_cycles", "pipe_busy", "flag_wait", "starved", "queue_stall",
                  "path_bytes")
        scalars = ("cycles", "l2_hit_bytes", "gm_read_bytes", "gm_write_bytes",
                   "dram_read_bytes", "dram_write_bytes", "bound_cycles", "instructions")
        same = all(getattr(self, s) == getattr(other, s) for s in scalars) and all(
            np.array_equal(getattr(self, a), getattr(other, a)) for a in arrays)
        if self.trace is not None and other.trace is not None:
            same = same and np.array_equal(self.trace, other.trace)
        return same

    @staticmethod
    def combine(results: list[SimResult]) -> SimResult:
        """Results of kernels launched one after another, as one result: times add up;
        per-core arrays are padded to the most cores and added; traces are shifted."""
        if len(results) == 1:
            return results[0]
        first = results[0]
        cores = max(len(r.core_cycles) for r in results)

        def padded(name: str) -> np.ndarray:
            arrays = [getattr(r, name) for r in results]
            out = np.zeros((cores, *arrays[0].shape[1:]), dtype=np.int64)
            for a in arrays:
                out[: len(a)] += a
            return out

        traces, offset = [], 0
        for r in results:
            if r.trace is not None:
                t = r.trace.copy()
                t["start"] += offset
                t["end"] += offset
                traces.append(t)
            offset += r.cycles
        return SimResult(first.target, first.clock_ghz, sum(r.cycles for r in results),
                         padded("core_cycles"), padded("pipe_busy"), padded("flag_wait"),
                         padded("starved"), padded("queue_stall"),
                         sum((r.path_bytes for r in results), np.zeros_like(first.path_bytes)),
                         sum(r.l2_hit_bytes for r in results),
                         sum(r.gm_read_bytes for r in results),
                         sum(r.gm_write_bytes for r in results),
                         sum(r.dram_read_bytes for r in results),
                         sum(r.dram_write_bytes for r in results),
                         sum(r.bound_cycles for r in results),
                         sum(r.instructions for r in results),
                         [h for r in results for h in r.hazards],
                         np.concatenate(traces) if len(traces) == len(results) else None,
                         first.memories, first.copy_pipes)

    def summary(self) -> str:
        util = self.utilization()
        top = ", ".join(f"{k} {v:.0%}" for k, v in util.items() if v >= 0.005)
        return (f"{self.cycles} cycles ({self.time_us:.2f} us), bound {self.bound_cycles} "
                f"(efficiency {self.efficiency:.0%}); utilization: {top}")


@functools.lru_cache(maxsize=32)
def target_facts(target: Target) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """``(memories, copy_pipes)`` of a ``SimResult`` on ``target``."""
    names = memory_map(target).names
    memories = tuple(names.get(code, "") for code in Mem)
    moving = {Pipe[path.pipe] for path in target.paths.values()} - set(COMPUTE_PIPES)
    return memories, tuple(int(p) for p in sorted(moving))
