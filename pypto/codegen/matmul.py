"""Lowering of matmul workloads: blocks of the output over cores, K streamed through
L1 and L0, MMADs accumulating in L0C, then a drain to GM (or to UB for an epilogue).

Split-K (``split_k`` > 1) cuts K into that many parts; a work unit is one part of one
output block, and the cores take units round robin. Every core first clears its share
of the output (a zero tile in UB copied out), all cores meet at ``SYNC_ALL``, then each
unit's partial sum drains into GM with an atomic add (``F_ATOMIC``), as AscendC's
``SetAtomicAdd`` does. The partials add in the output dtype, so split-K is for matmuls
whose output is the product itself (no fused epilogue).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from pypto import native
from pypto.codegen.isa import F_ACCUMULATE, F_ATOMIC, F_RELU, F_TRANSPOSE, Mem, Op
from pypto.codegen.pipeline import software_pipeline
from pypto.codegen.place import Arenas, Slots
from pypto.codegen.program import Operand, StreamBuilder
from pypto.codegen.vector_chain import ChainEmitter, Tile
from pypto.ir.dtypes import BY_NAME
from pypto.ir.layouts import nz_shape
from pypto.ir.workload import Workload
from pypto.schedule_space import input_layouts
from pypto.schedule_space.matmul import (
    ACC_DTYPE,
    epilogue_chain,
    k_parts,
    shape_of,
    sub_block,
    zero_tile_elements,
)
from pypto.schedule_space.schedule import Schedule
from pypto.targets import Target


def emit(wl: Workload, s: Schedule, target: Target, gm_in: dict[int, int],
         gm_out: dict[int, int]) -> list[StreamBuilder]:
    sh = shape_of(wl)
    mm_i = next(i for i, n in enumerate(wl.nodes) if n.op == "matmul")
    mm = wl.nodes[mm_i]
    in_dt, acc_dt, out_dt = BY_NAME[sh.dtype], BY_NAME[ACC_DTYPE[sh.dtype]], BY_NAME[mm.dtype]
    isz = in_dt.itemsize
    m1, n1, k1, k0 = s["m1"], s["n1"], s["k1"], s["k0"]
    m0, n0 = sub_block(s)
    arenas = Arenas(target)
    stage = arenas.role("stage")
    a_l1 = stage.alloc(m1 * k1 * isz, s["l1_depth"])
    b_l1 = stage.alloc(k1 * n1 * isz, s["l1_depth"])
    l0a = arenas.role("left").alloc(m0 * k0 * isz, s["l0_depth"])
    l0b = arenas.role("right").alloc(k0 * n0 * isz, s["l0_depth"])
    l0c = arenas.role("acc").alloc(m1 * n1 * acc_dt.itemsize, s["l0c_depth"])
    chain = epilogue_chain(wl)
    emitter = None
    fix_relu = chain is not None and s.get("epilogue", "VEC") == "FIX"
    if chain is not None and not fix_relu:
        emitter = ChainEmitter(wl, chain, m1, n1, s["ub_depth"], arenas.role("vector"),
                               gm_in, gm_out, chunked=False)
    batch_n = math.prod(sh.batch)
    mblocks, nblocks = math.ceil(sh.m / m1), math.ceil(sh.n / n1)
    blocks = block_order(batch_n, mblocks, nblocks, s.get("block_order", "mn"),
                         s.get("swizzle", 1))
    parts = k_parts(sh.k, k1, s.get("split_k", 1))
    ctx = _Ctx(sh, wl, mm_i, in_dt, acc_dt, out_dt, isz, m1, n1, k1, k0, m0, n0,
               s.get("l0_order", "mn"), a_l1, b_l1, l0a, l0b, l0c, emitter, gm_in, gm_out,
               wl.outputs[0] if fix_relu else None, len(parts) > 1,
               tuple(input_layouts(wl, s)))
    # work units (batch, m block, n block, K from, K to), dealt to cores round robin
    units = np.array([(*blk, *part) for blk in blocks for part in parts], dtype=np.int64)
    zero, tile = None, zero_tile_elements(out_dt.itemsize, target)
    if len(parts) > 1:
        zero = arenas.role("vector").alloc(tile * out_dt.itemsize, 1)
    compiled = _compiled_loop()
    if compiled is not None:
        plans = [ctx.gm_operand(mm.args[i], batch_n) for i in (0, 1)]
    streams = []
    for core in range(s["cores"]):
        chunks = core_chunks(units[core::s["cores"]], m1, n1, k1)
        sb = StreamBuilder()
        if zero is not None:
            clear_output(sb, zero, tile, core, s["cores"], batch_n * sh.m * sh.n, out_dt,
                         gm_out[mm_i])
        if compiled is None:
            software_pipeline(sb, [_Chunk(*c) for c in chunks.tolist()], s["l1_depth"],
                              ctx.load, ctx.compute, (0, 0))
        elif len(chunks):
            compiled.pipeline(sb, ctx, chunks, s["l1_depth"], plans[0][1], plans[1][1],
                              plans[0][0], plans[1][0])
        streams.append(sb)
    return streams


def core_chunks(units: np.ndarray, m1: int, n1: int, k1: int) -> np.ndarray:
    """The K chunks of one core's work units (rows ``batch, m block, n block, K from,
    K to``), in order: one row of ``_Chunk`` fields each (``first``/``last`` as 0/1)."""
    counts = -(-(units[:, 4] - units[:, 3]) // k1)
    unit = np.repeat(np.arange(len(units)), counts)
    step = np.arange(len(unit)) - np.repeat(np.cumsum(counts) - counts, counts)
    k_at = units[unit, 3] + step * k1
    return np.stack([unit, units[unit, 0], units[unit, 1] * m1, units[unit, 2] * n1, k_at,
                     np.minimum(k1, units[unit, 4] - k_at), np.arange(len(unit)), step == 0,
                     step == counts[unit] - 1], axis=1).astype(np.int64)


def _compiled_loop() -> ModuleType | None:
    """The compiled K loop (``_matmul.pyx``), or ``None`` for this module's own (the
    specification): ``PYPTO_IMPL=python``, or the extension is not built."""
    return native.extension("pypto.codegen._matmul", stacklevel=3)


@dataclass
class _Chunk:
    """One K chunk of one output block: what one L1 load of A and B feeds."""

    blk: int       # block counter on this core (L0C and UB slot)
    batch: int
    m_at: int
    n_at: int
    k_at: int
    kcur: int
    index: int     # chunk counter on this core (L1 slot)
    first: bool    # first chunk of its block (MMAD overwrites L0C)
    last: bool     # last chunk of its block (then drain)


@dataclass
class _Ctx:
    sh: Any
    wl: Workload
    mm_i: int
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
    a_l1: Slots
    b_l1: Slots
    l0a: Slots
    l0b: Slots
    l0c: Slots
    emitter: ChainEmitter | None
    gm_in: dict[int, int]
    gm_out: dict[int, int]
    fix_relu_output: int | None = None  # the ReLU chain's output node, applied by FIX
    atomic: bool = False                # split-K: partial sums add into GM
    layouts: tuple[str, ...] = ()       # how each input lies in GM (ND or NZ)

    def extents(self, c: _Chunk) -> tuple[int, int]:
        return min(self.m1, self.sh.m - c.m_at), min(self.n1, self.sh.n - c.n_at)

    def load(self, sb: StreamBuilder, c: _Chunk) -> None:
        """GM -> L1 of A and B, as stored (a transposed operand turns on the way to L0)."""
        sh, mm = self.sh, self.wl.nodes[self.mm_i]
        mcur, ncur = self.extents(c)
        a_addr, b_addr = self.a_l1.addr(c.index), self.b_l1.addr(c.index)
        # (L1 address, L1 row stride, stored rows from, rows, stored columns from, columns)
        if sh.transpose_a:
            a_tile = (a_addr, self.m1, c.k_at, c.kcur, c.m_at, mcur)
        else:
            a_tile = (a_addr, self.k1, c.m_at, mcur, c.k_at, c.kcur)
        if sh.transpose_b:
            b_tile = (b_addr, self.k1, c.n_at, ncur, c.k_at, c.kcur)
        else:
            b_tile = (b_addr, self.n1, c.k_at, c.kcur, c.n_at, ncur)
        for operand, tile in ((mm.args[0], a_tile), (mm.args[1], b_tile)):
            self.load_tile(sb, self.a_l1.mem, self.wl.nodes[operand], c.batch, *tile)

    def load_tile(self, sb: StreamBuilder, l1: Mem, node: Any, batch: int, addr: int,
                  l1_rs: int, r_at: int, rows: int, c_at: int, cols: int) -> None:
        """Rows ``r_at:+rows``, columns ``c_at:+cols`` of a stored operand into L1: one
        strided copy, or for an NZ operand one contiguous copy per column block (whole
        blocks: the space keeps tiles on block boundaries, and L1 tiles have room)."""
        spec = self.wl.inputs[node.attr("input")]
        sym = self.gm_in[node.attr("input")]
        if self.layouts[node.attr("input")] != "NZ":
            base = _batch_offset(node, batch, self.sh.batch)
            rs, cs = node.attr("strides")[-2:]
            sb.emit(Op.COPY, Operand(l1, addr, rows, cols, l1_rs),
                    Operand(Mem.GM, base + r_at * rs + c_at * cs, rows, cols, rs, cs, gm=sym),
                    dtype=self.in_dt)
            return
        _, rpad, c0 = nz_shape(spec.shape, self.isz)
        for block in range(c_at // c0, (c_at + cols - 1) // c0 + 1):
            dst = Operand(l1, addr + (block * c0 - c_at) * self.isz, rows, c0, l1_rs)
            src = Operand(Mem.GM, (block * rpad + r_at) * c0, rows, c0, c0, 1, gm=sym)
            sb.emit(Op.COPY, dst, src, dtype=self.in_dt)

    def compute(self, sb: StreamBuilder, c: _Chunk, l0_ctr: tuple[int, int]) -> tuple[int, int]:
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

    def drain_chunk(self, sb: StreamBuilder, c: _Chunk | tuple) -> None:
        """The drain after chunk ``c`` (a ``_Chunk`` or its fields), its block's last."""
        c = c if isinstance(c, _Chunk) else _Chunk(*c)
        mcur, ncur = self.extents(c)
        self.drain(sb, c, Operand(self.l0c.mem, self.l0c.addr(c.blk), mcur, ncur, self.n1))

    def gm_operand(self, node_id: int, batch_n: int) -> tuple[tuple, np.ndarray]:
        """How input ``node_id`` lies in GM, for the compiled loop: ``(symbol, NZ?, row
        stride, column stride, NZ padded rows, NZ block width)`` and the element offset
        of each batch."""
        node = self.wl.nodes[node_id]
        spec = self.wl.inputs[node.attr("input")]
        sym = self.gm_in[node.attr("input")]
        bases = np.array([_batch_offset(node, b, self.sh.batch) for b in range(batch_n)],
                         dtype=np.int64)
        if self.layouts[node.attr("input")] == "NZ":
            _, rpad, c0 = nz_shape(spec.shape, self.isz)
            return (sym, True, 0, 0, rpad, c0), bases
        rs, cs = node.attr("strides")[-2:]
        return (sym, False, rs, cs, 0, 0), bases

    def load_a0(self, sb: StreamBuilder, c: _Chunk, a0: Operand, mi: int, mlen: int, kk: int,
                kkc: int) -> None:
        """Rows ``mi:+mlen``, K ``kk:+kkc`` of the chunk's A tile, from L1 into L0A."""
        ta = self.sh.transpose_a  # L1 holds K x m1, or m1 x k1
        self.l1_to_l0(sb, self.a_l1.addr(c.index), a0, ta, self.m1, mi, mlen, kk, kkc,
                      F_TRANSPOSE if ta else 0)

    def load_b0(self, sb: StreamBuilder, c: _Chunk, b0: Operand, ni: int, nlen: int, kk: int,
                kkc: int) -> None:
        """K ``kk:+kkc``, columns ``ni:+nlen`` of the chunk's B tile, from L1 into L0B."""
        tb = self.sh.transpose_b  # L1 holds n1 x k1, or k1 x n1
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

    def drain(self, sb: StreamBuilder, c: _Chunk, c_op: Operand) -> None:
        mcur, ncur = self.extents(c)
        r0 = c.batch * self.sh.m + c.m_at
        if self.emitter is None:
            node = self.mm_i if self.fix_relu_output is None else self.fix_relu_output
            out = Operand(Mem.GM, r0 * self.sh.n + c.n_at, mcur, ncur, self.sh.n, 1,
                          gm=self.gm_out[node])
            flags = (0 if self.fix_relu_output is None else F_RELU) | (
                F_ATOMIC if self.atomic else 0)
            sb.emit(Op.COPY, out, c_op, dtype=self.out_dt, sdtype=self.acc_dt, flags=flags)
            return
        tile = Tile(r0, mcur, c.n_at, ncur)
        sb.emit(Op.COPY, self.emitter.operand(self.mm_i, tile, c.blk), c_op, dtype=self.out_dt,
                sdtype=self.acc_dt)
        if self.mm_i in self.gm_out:
            self.emitter.store(sb, self.mm_i, tile, c.blk)
        self.emitter.emit_tile(sb, tile, [(c.n_at, ncur)], c.blk, c.blk,
                               preset=frozenset({self.mm_i}))


def clear_output(sb: StreamBuilder, zero: Slots, tile: int, core: int, cores: int,
                 elements: int, out_dt: Any, out_sym: int) -> None:
    """This core's share of zeroing the (contiguous) output before split-K's atomic
    adds: one zero tile written by the vector unit, copied out tile by tile (tiles
    round robin over cores), then ``SYNC_ALL`` so that no core adds into uncleared
    memory."""
    starts = range(core * tile, elements, cores * tile)
    if starts:
        sb.emit(Op.VDUP, Operand(zero.mem, zero.addr(0), 1, min(tile, elements), tile),
                dtype=out_dt, imm=0.0)
    for at in starts:
        n = min(tile, elements - at)
        sb.emit(Op.COPY, Operand(Mem.GM, at, 1, n, n, 1, gm=out_sym),
                Operand(zero.mem, zero.addr(0), 1, n, tile), dtype=out_dt)
    sb.emit(Op.SYNC_ALL)


def block_order(batch: int, mblocks: int, nblocks: int, order: str,
                swizzle: int) -> list[tuple[int, int, int]]:
    """Output blocks in the order cores take them (round robin). ``order`` "mn" walks
    n fastest, "nm" walks m fastest; ``swizzle`` groups that many rows (or columns) of
    blocks so that cores running at the same time share A and B panels in L2."""
    outer, inner = (mblocks, nblocks) if order == "mn" else (nblocks, mblocks)
    out = []
    for b in range(batch):
        for group in range(0, outer, swizzle):
            width = min(swizzle, outer - group)
            for i in range(inner):
                for o in range(group, group + width):
                    out.append((b, o, i) if order == "mn" else (b, i, o))
    return out


def _batch_offset(node, b: int, batch: tuple[int, ...]) -> int:  # type: ignore[no-untyped-def]
    offset = node.attr("offset")
    if not batch:
        return offset
    strides = node.attr("strides")[:-2]
    for dim, stride in zip(reversed(batch), reversed(strides)):
        offset += (b % dim) * stride
        b //= dim
    return offset
