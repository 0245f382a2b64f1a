"""Buffer placement: slots in on-chip memories, and GM access patterns of tiles."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pypto.codegen.isa import Mem
from pypto.codegen.memories import memory_map
from pypto.errors import ScheduleError
from pypto.schedule_space.common import round_up


@dataclass(frozen=True)
class Slots:
    """``count`` equal slots of ``size`` bytes from ``base``: buffer rotation."""

    mem: Mem
    base: int
    size: int
    count: int

    def addr(self, i: int) -> int:
        return self.base + (i % self.count) * self.size


class Arena:
    """A bump allocator over one on-chip memory (``name`` is the target's, for errors)."""

    def __init__(self, mem: Mem, capacity: int, alignment: int, name: str = "") -> None:
        self.mem, self.capacity, self.alignment = mem, capacity, alignment
        self.name = name or mem.name
        self.top = 0

    def alloc(self, nbytes: int, count: int = 1) -> Slots:
        size = round_up(max(nbytes, 1), self.alignment)
        base = self.top
        self.top += size * count
        if self.top > self.capacity:
            raise ScheduleError(f"{self.name}: buffers need {self.top} bytes but it holds "
                                f"{self.capacity}; use smaller tiles or fewer buffers")
        return Slots(self.mem, base, size, count)


class Arenas:
    """One ``Arena`` per memory, shared by the roles a target maps onto it (on a target
    whose accumulator and vector memory are the same, buffers must not overlap)."""

    def __init__(self, target) -> None:  # type: ignore[no-untyped-def]
        self.target = target
        self.by_memory: dict[str, Arena] = {}

    def role(self, role: str) -> Arena:
        mem = self.target.role(role)
        if mem.name not in self.by_memory:
            code = memory_map(self.target).roles[role]
            self.by_memory[mem.name] = Arena(code, mem.capacity, mem.alignment, mem.name)
        return self.by_memory[mem.name]


def broadcast_strides(view_shape: tuple[int, ...], strides: tuple[int, ...],
                      space: tuple[int, ...]) -> tuple[int, ...]:
    pad = len(space) - len(view_shape)
    shape = (1,) * pad + tuple(view_shape)
    st = (0,) * pad + tuple(strides)
    return tuple(0 if d == 1 and sd != 1 else s for d, sd, s in zip(shape, space, st))


def row_runs(offset: int, strides: tuple[int, ...], space: tuple[int, ...], r0: int,
             count: int) -> list[tuple[int, int, int, int]]:
    """GM element offsets of rows ``r0 .. r0+count`` of the row space, as runs
    ``(first row in tile, rows, offset of first, delta between rows)``, each one DMA."""
    row_dims = space[:-1]
    if not row_dims:
        return [(0, count, offset, 0)]
    rows = np.arange(r0, r0 + count, dtype=np.int64)
    idx = np.unravel_index(rows, row_dims) if math.prod(row_dims) > 1 else \
        [np.zeros_like(rows)] * len(row_dims)
    offs = offset + sum(np.asarray(i, dtype=np.int64) * s for i, s in zip(idx, strides[:-1]))
    offs = np.atleast_1d(np.asarray(offs, dtype=np.int64))
    if count == 1:
        return [(0, 1, int(offs[0]), 0)]
    diffs = np.diff(offs)
    breaks = np.flatnonzero(diffs[1:] != diffs[:-1]) + 1  # run changes after these diffs
    out = []
    start = 0
    for b in list(breaks) + [len(diffs)]:
        # diffs[start:b] are equal: rows start .. b form one run
        out.append((start, b - start + 1, int(offs[start]), int(diffs[start])))
        start = b + 1
        if start == len(offs) - 1:
            out.append((start, 1, int(offs[start]), 0))
            start += 1
            break
        if start >= len(offs):
            break
    return out
