"""What the cube kernels' code generation shares (matmul, and conv2d as an implicit
GEMM): their buffers, the walk of output blocks, the K chunks per core, the software
pipelining of the K loop, and the L0 side of each chunk (L1 -> L0A/L0B copies, MMADs
into the L0C block, the drain into an epilogue on UB).

A family's loop context subclasses ``CubeLoop`` with how it loads a chunk into L1
(``load``), how large a block is at a position (``extents``) and how a finished block
leaves L0C (``drain``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from pypto.codegen.isa import F_ACCUMULATE, F_TRANSPOSE, Op
from pypto.codegen.place import Arenas, Slots
from pypto.codegen.program import Operand, StreamBuilder
from pypto.codegen.vector_chain import ChainEmitter, Tile
from pypto.ir.workload import Workload
from pypto.schedule_space.chain import Chain
from pypto.targets import Target

T = TypeVar("T")

def software_pipeline(sb: StreamBuilder, chunks: Sequence[T], l1_depth: int,
                      load: Callable[[StreamBuilder, T], None],
                      compute: Callable[[StreamBuilder, T, Any], Any], state: Any) -> Any:
    """Emit ``load`` and ``compute`` of every chunk so that the loads of chunk
    ``j + l1_depth - 1`` are issued before the compute of chunk ``j``: the scalar unit
    never sits behind compute that waits for data while the next loads are not yet
    issued. ``compute`` threads ``state`` (buffer-slot counters) through; the final
    state is returned."""
    ahead = l1_depth - 1
    for j, chunk in enumerate(chunks):
        first = 0 if j == 0 else j + ahead
        for ld in range(first, min(j + ahead, len(chunks) - 1) + 1):
            load(sb, chunks[ld])
        state = compute(sb, chunk, state)
    return state


@dataclass(frozen=True)
class CubeBuffers:
    """The slots of a cube kernel: A and B tiles in L1, the MMAD operands in L0A/L0B,
    the accumulator blocks in L0C, and the epilogue's values in UB (``emitter``)."""

    arenas: Arenas
    a_l1: Slots
    b_l1: Slots
    l0a: Slots
    l0b: Slots
    l0c: Slots
    emitter: ChainEmitter | None


def cube_buffers(target: Target, s: Any, isz: int, acc_isz: int, m0: int, n0: int,
                 wl: Workload, chain: Chain | None, gm_in: dict[int, int],
                 gm_out: dict[int, int]) -> CubeBuffers:
    """Place the buffers of schedule ``s`` (``m0 x n0``: the block one MMAD computes;
    ``chain``: the epilogue on UB, if any), in the order the space counts them."""
    m1, n1, k1, k0 = s["m1"], s["n1"], s["k1"], s["k0"]
    arenas = Arenas(target)
    stage = arenas.role("stage")
    a_l1 = stage.alloc(m1 * k1 * isz, s["l1_depth"])
    b_l1 = stage.alloc(k1 * n1 * isz, s["l1_depth"])
    l0a = arenas.role("left").alloc(m0 * k0 * isz, s["l0_depth"])
    l0b = arenas.role("right").alloc(k0 * n0 * isz, s["l0_depth"])
    l0c = arenas.role("acc").alloc(m1 * n1 * acc_isz, s["l0c_depth"])
    emitter = None
    if chain is not None:
        emitter = ChainEmitter(wl, chain, m1, n1, s["ub_depth"], arenas.role("vector"),
                               gm_in, gm_out, chunked=False)
    return CubeBuffers(arenas, a_l1, b_l1, l0a, l0b, l0c, emitter)


def block_order(batch: int, mblocks: int, nblocks: int, order: str,
                swizzle: int) -> list[tuple[int, int, int]]:
    """Output blocks ``(batch, m block, n block)`` in the order cores take them (round
    robin). ``order`` "mn" walks n fastest, "nm" walks m fastest; ``swizzle`` groups that
    many rows (or columns) of blocks so that cores running at the same time share A
    and B panels in L2."""
    outer, inner = (mblocks, nblocks) if order == "mn" else (nblocks, mblocks)
    out = []
    for b in range(batch):
        for group in range(0, outer, swizzle):
            width = min(swizzle, outer - group)
            for i in range(inner):
                for o in range(group, group + width):
                    out.append((b, o, i) if order == "mn" else (b, i, o))
    return out


@dataclass
class Chunk:
    """One K chunk of one output block: what one L1 load of A and B feeds."""

    blk: int       # block counter on this core (L0C and UB slot)
    batch: int
    m_at: int      # first output row (a conv2d's: output pixel)
    n_at: int
    k_at: int
    kcur: int
    index: int     # chunk counter on this core (L1 slot)
    first: bool    # first chunk of its block (MMAD overwrites L0C)
    last: bool     # last chunk of its block (then drain)


def core_chunks(units: np.ndarray, m_step: int, n1: int, k1: int) -> np.ndarray:
    """The K chunks of one core's work units (rows ``batch, m block, n block, K from,
    K to``; blocks ``m_step`` rows apart), in order: one row of ``Chunk`` fields each
    (``first``/``last`` as 0/1)."""
    counts = -(-(units[:, 4] - units[:, 3]) // k1)
    unit = np.repeat(np.arange(len(units)), counts)
    step = np.arange(len(unit)) - np.repeat(np.cumsum(counts) - counts, counts)
    k_at = units[unit, 3] + step * k1
    return np.stack([unit, units[unit, 0], units[unit, 1] * m_step, units[unit, 2] * n1,
                     k_at, np.minimum(k1, units[unit, 4] - k_at), np.arange(len(unit)),
                     step == 0, step == counts[unit] - 1], axis=1).astype(np.int64)


@dataclass
class CubeLoop:
    """The state of a cube kernel's K loop on one core's stream; a family subclasses it
    with ``extents``, ``load`` and ``drain``."""

    wl: Workload
    in_dt: Any
    acc_dt: Any
    out_dt: Any
    isz: int
    m1: int
    n1: int
    k1: int
    k0: int
    m0: int
    n0: int
    l0_order: str
    transpose_a: bool   # L1 holds A as K x m1 (else m1 x k1)
    transpose_b: bool   # L1 holds B as n1 x k1 (else k1 x n1)
    a_l1: Slots
    b_l1: Slots
    l0a: Slots
    l0b: Slots
    l0c: Slots
    emitter: ChainEmitter | None
    gm_in: dict[int, int]
    gm_out: dict[int, int]

    def extents(self, c: Chunk) -> tuple[int, int]:
        """Rows and columns of the block at ``c`` (smaller at the edges)."""
        raise NotImplementedError

    def load(self, sb: StreamBuilder, c: Chunk) -> None:
        """GM -> L1 of the A and B tiles of chunk ``c``."""
        raise NotImplementedError

    def drain(self, sb: StreamBuilder, c: Chunk, c_op: Operand) -> None:
        """The finished block ``c_op`` in L0C -> GM, or -> UB and the epilogue."""
        raise NotImplementedError

    def compute(self, sb: StreamBuilder, c: Chunk, l0_ctr: tuple[int, int]) -> tuple[int, int]:
        """L1 -> L0A/L0B and MMADs for one chunk; after the block's last chunk, the drain
        (and the epilogue). The block is cut into ``m0 x n0`` sub-blocks per ``k0`` step,
        walked in ``l0_order`` ("mn": n fastest, so an A tile in L0A serves a row of
        sub-blocks; "nm": m fastest, a B tile serves a column); a tile is loaded again
        only when the walk moves off it. Returns the next L0A and L0B slot counters."""
        n1, m0, n0, k0 = self.n1, self.m0, self.n0, self.k0
        mcur, ncur = self.extents(c)
        m_tiles = [(mi, min(m0, mcur - mi)) for mi in range(0, mcur, m0)]
        n_tiles = [(ni, min(n0, ncur - ni)) for ni in range(0, ncur, n0)]
        walk = [(mt, nt) for mt in m_tiles for nt in n_tiles] if self.l0_order == "mn" else \
            [(mt, nt) for nt in n_tiles for mt in m_tiles]
        a_ctr, b_ctr = l0_ctr
        base = self.l0c.addr(c.blk)
        acc_isz = self.acc_dt.itemsize
        for kk in range(0, c.kcur, k0):
            kkc = min(k0, c.kcur - kk)
            on_a = on_b = None
            for (mi, mlen), (ni, nlen) in walk:
                if mi != on_a:
                    a0 = Operand(self.l0a.mem, self.l0a.addr(a_ctr), mlen, kkc, k0)
                    self.load_a0(sb, c, a0, mi, mlen, kk, kkc)
                    a_ctr, on_a = a_ctr + 1, mi
                if ni != on_b:
                    b0 = Operand(self.l0b.mem, self.l0b.addr(b_ctr), kkc, nlen, n0)
                    self.load_b0(sb, c, b0, ni, nlen, kk, kkc)
                    b_ctr, on_b = b_ctr + 1, ni
                sub = Operand(self.l0c.mem, base + (mi * n1 + ni) * acc_isz, mlen, nlen, n1)
                sb.emit(Op.MMAD, sub, a0, b0, dtype=self.acc_dt, sdtype=self.in_dt,
                        flags=0 if (c.first and kk == 0) else F_ACCUMULATE)
        if c.last:
            self.drain_chunk(sb, c)
        return a_ctr, b_ctr

    def drain_chunk(self, sb: StreamBuilder, c: Chunk | tuple) -> None:
        """The drain after chunk ``c`` (a ``Chunk`` or its fields), its block's last."""
        c = c if isinstance(c, Chunk) else Chunk(*c)
        mcur, ncur = self.extents(c)
        self.drain(sb, c, Operand(self.l0c.mem, self.l0c.addr(c.blk), mcur, ncur, self.n1))

    def load_a0(self, sb: StreamBuilder, c: Chunk, a0: Operand, mi: int, mlen: int, kk: int,
                kkc: int) -> None:
        """Rows ``mi:+mlen``, K ``kk:+kkc`` of the chunk's A tile, from L1 into L0A."""
        ta = self.transpose_a
        self.l1_to_l0(sb, self.a_l1.addr(c.index), a0, ta, self.m1, mi, mlen, kk, kkc,
                      F_TRANSPOSE if ta else 0)

    def load_b0(self, sb: StreamBuilder, c: Chunk, b0: Operand, ni: int, nlen: int, kk: int,
                kkc: int) -> None:
        """K ``kk:+kkc``, columns ``ni:+nlen`` of the chunk's B tile, from L1 into L0B."""
        tb = self.transpose_b
        self.l1_to_l0(sb, self.b_l1.addr(c.index), b0, not tb, self.n1, ni, nlen, kk, kkc,
                      F_TRANSPOSE if tb else 0)

    def l1_to_l0(self, sb: StreamBuilder, l1_addr: int, dst: Operand, k_rows: bool,
                 width: int, at: int, length: int, kk: int, kkc: int, flags: int) -> None:
        """Copy ``length`` rows/columns from ``at`` and K ``kk:+kkc`` of an L1 tile that
        holds K as its rows (``width`` wide) or as its columns (``k1`` wide)."""
        if k_rows:
            src = Operand(self.a_l1.mem, l1_addr + (kk * width + at) * self.isz, kkc, length,
                          width)
        else:
            src = Operand(self.a_l1.mem, l1_addr + (at * self.k1 + kk) * self.isz, length, kkc,
                          self.k1)
        sb.emit(Op.COPY, dst, src, dtype=self.in_dt, flags=flags)

    def drain_to_epilogue(self, sb: StreamBuilder, node: int, tile: Tile, blk: int,
                          c_op: Operand) -> None:
        """The block ``c_op`` (the value of ``node``, at ``tile`` of the epilogue's row
        space) -> its UB slot, stored too when it is an output, then the epilogue."""
        assert self.emitter is not None
        sb.emit(Op.COPY, self.emitter.operand(node, tile, blk), c_op, dtype=self.out_dt,
                sdtype=self.acc_dt)
        if node in self.gm_out:
            self.emitter.store(sb, node, tile, blk)
        self.emitter.emit_tile(sb, tile, [(tile.c0, tile.cols)], blk, blk,
                               preset=frozenset({node}))
