"""An analytic time estimate of a cube kernel's schedule, for the default heuristics of
matmul and conv2d (both GEMMs on the cube): every figure comes from the target (fractal,
cube issue cost, path rates and latencies, L2 and DRAM rates, core count), none from a
table of shapes or a branch per target.

The model follows the simulated core (DESIGN §4): each core walks its work units (blocks
times K parts, dealt round robin) as one software pipeline of ``k1`` chunks. A chunk
costs the slowest of its three pipes, MTE2 (GM -> L1, rows shorter than the path's
minimum burst charged whole), MTE1 (L1 -> L0A/L0B) and the cube (fractals plus issue
cost per MMAD), or, when ``l1_depth`` buffers cannot hide the GM latency, a share of
one buffer's round trip (load, latency, use) per buffer; a block boundary exposes
about one GM latency, shared by the block's chunks. An accumulator drain (FIX) follows
every block, hidden behind the next block with two or more L0C buffers; a fused
epilogue's vector work and write-out run beside the next block. The
kernel takes the most loaded core plus what no core can hide (the first load's latency,
the last drain, split-K's clearing of the output), and never less than its DRAM traffic
at the chip's DRAM rate (inputs read once while the operand the block walk cycles
through stays in the L2, else that operand again for every row of blocks).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pypto.ir.dtypes import BY_NAME
from pypto.schedule_space.cube import ACC_DTYPE

if TYPE_CHECKING:
    from pypto.targets import Target

S = TypeVar("S")


@dataclass(frozen=True)
class CubeProblem:
    """The GEMM a cube kernel computes: ``batch`` x ``[m, k] @ [k, n]``, and how its
    operands' tiles are read from GM: the contiguous run (in elements) of one row of an
    A tile and of a B tile, as functions of the tile knobs, given by the family."""

    batch: int
    m: int
    n: int
    k: int
    dtype: str
    out_dtype: str
    a_bytes: int        # A as stored in GM (conv2d: the input image)
    b_bytes: int
    epilogue_cycles: float = 0.0   # vector cycles per output element of the fused tail


@dataclass(frozen=True)
class Rates:
    """The target's figures the estimate reads, gathered once per target and dtype."""

    fm: int
    fk: int
    fn: int
    passes: int
    isz: int
    acc_isz: int
    out_isz: int
    cores: int
    issue: int
    gm_rate: float          # GM -> L1 per core (the L2 read rate when it is slower)
    gm_latency: int         # fixed cycles of a GM read, plus an L2 miss
    min_burst: int
    left_rate: float        # L1 -> L0A
    right_rate: float       # L1 -> L0B
    drain_rate: float       # L0C -> GM
    drain_fixed: int
    drain_row: float
    write_rate: float       # UB -> GM (split-K's zero tile)
    dram_rate: float        # the chip's DRAM, all cores together
    l2_bytes: int
    sync_cycles: int


def rates(target: Target, dtype: str) -> Rates:
    """The figures of ``target`` for operands of ``dtype``."""
    fm, fk, fn = target.fractal(dtype)
    role = target.roles
    gm, stage = role["global"], role["stage"]
    load = target.path(gm, stage)
    drain = target.path(role["acc"], gm)
    write = target.path(role["vector"], gm)
    return Rates(
        fm=fm, fk=fk, fn=fn, passes=target.fractal_passes(dtype),
        isz=BY_NAME[dtype].itemsize, acc_isz=BY_NAME[ACC_DTYPE[dtype]].itemsize,
        out_isz=BY_NAME[dtype].itemsize, cores=target.cube_cores,
        issue=target.cube_issue_overhead,
        gm_rate=min(load.bytes_per_cycle, target.l2_read_bytes_per_cycle),
        gm_latency=load.latency + target.l2_miss_latency, min_burst=load.min_burst,
        left_rate=target.path(stage, role["left"]).bytes_per_cycle,
        right_rate=target.path(stage, role["right"]).bytes_per_cycle,
        drain_rate=drain.bytes_per_cycle, drain_fixed=drain.latency,
        drain_row=drain.row_cycles, write_rate=write.bytes_per_cycle,
        dram_rate=target.gm_bytes_per_cycle_chip, l2_bytes=target.l2_bytes,
        sync_cycles=target.sync_all_cycles)


def burst_bytes(rows: int, run: int, isz: int, min_burst: int) -> float:
    """Bytes a DMA of ``rows`` contiguous runs of ``run`` elements is charged (a run
    shorter than the minimum burst costs a whole burst)."""
    return rows * max(run * isz, min_burst)


@dataclass(frozen=True)
class Tiles:
    """One candidate: the block ``m1 x n1``, ``k0``/``k1``, the depths, the K split,
    the cores, and the runs (elements) of an A-tile and a B-tile row in GM with the
    number of rows each tile load moves."""

    m1: int
    n1: int
    k0: int
    k1: int
    l1_depth: int
    l0_depth: int
    l0c_depth: int
    split_k: int
    cores: int
    a_rows: int
    a_run: int
    b_rows: int
    b_run: int
    m_block: int = 0    # GEMM rows a block covers (0: m1; conv2d row blocks: fewer)


def estimate(p: CubeProblem, r: Rates, t: Tiles) -> float:
    """Estimated cycles of the kernel under ``t`` (see the module's docstring)."""
    return score(p, r, t)[0]


def score(p: CubeProblem, r: Rates, t: Tiles) -> tuple[float, float]:
    """``(estimate, the busiest core's time without the DRAM floor)``: where DRAM
    bounds many candidates alike, the one whose cores have the most slack wins."""
    m1, n1, k0, k1 = t.m1, t.n1, t.k0, t.k1
    steps = k1 // k0
    fractals = math.ceil(m1 / r.fm) * math.ceil(n1 / r.fn) * (k0 // r.fk) * r.passes
    cube = steps * (r.issue + fractals)
    mte1 = steps * (m1 * k0 * r.isz / r.left_rate + k0 * n1 * r.isz / r.right_rate
                    + 2 * r.issue)
    use = cube + mte1 if t.l0_depth < 2 else max(cube, mte1)
    a_eff = burst_bytes(t.a_rows, t.a_run, r.isz, r.min_burst)
    b_eff = burst_bytes(t.b_rows, t.b_run, r.isz, r.min_burst)
    mte2 = (a_eff + b_eff) / r.gm_rate
    chunk = max(mte2, use, (mte2 + r.gm_latency + use) / t.l1_depth)
    # chunks per work unit, the last one's share counted (a ragged last chunk is short)
    k_chunks = max(1.0, math.ceil(p.k / r.fk) * r.fk / t.split_k / k1)
    drain = r.drain_fixed + m1 * r.drain_row + m1 * n1 * r.acc_isz / r.drain_rate
    # a block boundary exposes about one GM latency (the drain, then the next block's
    # first chunk), which the L1 buffers hide only over a block of several chunks
    block = k_chunks * chunk + r.gm_latency / k_chunks
    block = max(block, drain) if t.l0c_depth > 1 else block + drain
    if p.epilogue_cycles:  # the vector unit and MTE3 work beside the next block
        tail = m1 * n1 * (p.epilogue_cycles + r.out_isz / r.write_rate)
        block = max(block, tail)
    m_blocks, n_blocks = math.ceil(p.m / (t.m_block or m1)), math.ceil(p.n / n1)
    units = p.batch * m_blocks * n_blocks * t.split_k
    per_core = math.ceil(units / t.cores)
    core = per_core * block + r.gm_latency + mte2 + (drain if t.l0c_depth > 1 else 0)
    out_bytes = p.batch * p.m * p.n * r.out_isz
    if t.split_k > 1:  # clear the output, meet, then every part adds its partial sums
        core += out_bytes / t.cores / r.write_rate + r.sync_cycles
    a_burst = a_eff / max(1, t.a_rows * t.a_run * r.isz)
    b_burst = b_eff / max(1, t.b_rows * t.b_run * r.isz)
    dram = dram_read_bytes(p, r, t, m_blocks, n_blocks, a_burst, b_burst) \
        + out_bytes * t.split_k * (2 if t.split_k > 1 else 1)
    return max(core, dram / r.dram_rate), core


def dram_read_bytes(p: CubeProblem, r: Rates, t: Tiles, m_blocks: int, n_blocks: int,
                    a_burst: float, b_burst: float) -> float:
    """Input bytes read from DRAM. Walking n fastest, the cores take a row of blocks (or
    several together) at a time: its A panel is read once, and B is walked once per
    row. B stays in the (LRU) L2 from one row to the next when B and what a row adds
    (the A panels and the output rows of the rows walked together) fit it; then each
    operand is read once, else B again for every row of blocks."""
    a, b = p.a_bytes * a_burst, p.b_bytes * b_burst
    rows_together = max(1, t.cores // max(1, n_blocks))
    rows = max(1, p.batch * m_blocks)
    row_bytes = (p.a_bytes + p.batch * p.m * p.n * r.out_isz) / rows
    if p.b_bytes + rows_together * row_bytes <= r.l2_bytes:
        return a + b
    return a + b * math.ceil(m_blocks / rows_together)


def epilogue_cycles(target: Target, ops: list[str], dtype: str) -> float:
    """Vector cycles per output element of a fused elementwise tail: every op one pass
    over the accumulator-wide values at its relative cost (ops the target does not cost
    count as one pass)."""
    width = BY_NAME[ACC_DTYPE[dtype]].itemsize
    total = 0.0
    for op in ops:
        total += target.vector_op_cycles.get(op, 1.0)
    return total * width / target.vector_bytes_per_cycle


K0_STEPS = (1, 2, 4, 8)          # k0 in fractals
K1_STEPS = (1, 2, 3, 4, 6, 8)    # k1 in k0
MAX_BLOCK = 256                  # block rows and columns the heuristics consider


def k_tiles(fk: int, k0_choices: tuple[int, ...],
            k1_choices: tuple[int, ...]) -> list[tuple[int, int]]:
    """``(k0, k1)`` pairs to consider: k0 a few fractals (or all of a short K), k1 a
    few k0 (or all of K), both on their axes' grids."""
    k0s = [c for c in k0_choices
           if c // fk in K0_STEPS and c % fk == 0 or (c == k0_choices[-1] and c <= 8 * fk)]
    return [(k0, k1) for k0 in k0s for k1 in k1_choices if k1 % k0 == 0
            and (k1 // k0 in K1_STEPS or (k1 == k1_choices[-1] and k1 // k0 <= 8))]


DEPTHS = tuple((l1, l0, l0c) for l1 in (4, 3, 2) for l0, l0c in ((2, 2), (2, 1), (1, 2), (1, 1)))
"""Buffer depths (L1, L0A/L0B, L0C) to fit, deepest first: ``estimate`` never rises
with a deeper buffer, so the deepest is each tile's optimistic bound."""


Score = tuple[float, float]


def by_estimate(scored: Iterable[tuple[Score, tuple[int, int, int]]]
                ) -> list[tuple[Score, tuple[int, int, int]]]:
    """Depth choices by estimate, ties to the deeper buffers (latency the estimate
    does not see, such as DRAM queueing, they still hide)."""
    return sorted(scored, key=lambda sd: (sd[0], tuple(-d for d in sd[1])))


def best_first(tiles: list[tuple[Score, tuple[Any, ...]]],
               finish: Callable[[tuple[Any, ...]], tuple[Score, S] | None]) -> S | None:
    """The best point over candidate tiles scored optimistically (``tiles``: estimate
    with the deepest buffers, and the tile) whose ``finish`` (the best valid depths of
    a tile: its estimate and point, or None when none fits) is cheapest. Best first:
    a tile is finished only when its optimistic estimate leads, so few are validated;
    ties go to the smaller tile tuple (deterministic)."""
    heap: list[tuple[Score, int, tuple[Any, ...], Any]] = [
        (score, 1, tile, None) for score, tile in tiles]
    heapq.heapify(heap)
    while heap:
        score, optimistic, tile, point = heapq.heappop(heap)
        if not optimistic:
            return point
        done = finish(tile)
        if done is not None:
            heapq.heappush(heap, (done[0], 0, tile, done[1]))
    return None
