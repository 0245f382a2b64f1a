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
from pypto.codegen.isa import F_ATOMIC, F_RELU, Mem, Op
from pypto.codegen.pipeline import (
    Chunk,
    CubeLoop,
    block_order,
    core_chunks,
    cube_buffers,
    software_pipeline,
)
from pypto.codegen.place import Slots
from pypto.codegen.program import Operand, StreamBuilder
from pypto.codegen.vector_chain import Tile
from pypto.ir.dtypes import BY_NAME
from pypto.ir.layouts import nz_shape
from pypto.ir.workload import Workload
from pypto.schedule_space import input_layouts
from pypto.schedule_space.cube import ACC_DTYPE
from pypto.schedule_space.matmul import (
    MatmulShape,
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
    m1, n1, k1 = s["m1"], s["n1"], s["k1"]
    m0, n0 = sub_block(s)
    chain = epilogue_chain(wl)
    fix_relu = chain is not None and s["epilogue"] == "FIX"
    buffers = cube_buffers(target, s, in_dt.itemsize, acc_dt.itemsize, m0, n0, wl,
                           None if fix_relu else chain, gm_in, gm_out)
    batch_n = math.prod(sh.batch)
    blocks = block_order(batch_n, math.ceil(sh.m / m1), math.ceil(sh.n / n1),
                         s["block_order"], s["swizzle"])
    parts = k_parts(sh.k, k1, s["split_k"])
    ctx = _Ctx(wl=wl, in_dt=in_dt, acc_dt=acc_dt, out_dt=out_dt, isz=in_dt.itemsize, m1=m1,
               n1=n1, k1=k1, k0=s["k0"], m0=m0, n0=n0, l0_order=s["l0_order"],
               transpose_a=sh.transpose_a, transpose_b=sh.transpose_b, a_l1=buffers.a_l1,
               b_l1=buffers.b_l1, l0a=buffers.l0a, l0b=buffers.l0b, l0c=buffers.l0c,
               emitter=buffers.emitter, gm_in=gm_in, gm_out=gm_out, sh=sh, mm_i=mm_i,
               fix_relu_output=wl.outputs[0] if fix_relu else None, atomic=len(parts) > 1,
               layouts=tuple(input_layouts(wl, s)))
    # work units (batch, m block, n block, K from, K to), dealt to cores round robin
    units = np.array([(*blk, *part) for blk in blocks for part in parts], dtype=np.int64)
    zero, tile = None, zero_tile_elements(out_dt.itemsize, target)
    if len(parts) > 1:
        zero = buffers.arenas.role("vector").alloc(tile * out_dt.itemsize, 1)
    compiled = _compiled_loop()
    if compiled is not None:
        plans = [ctx.gm_operand(mm.args[i], batch_n) for i in (0, 1)]
    streams = []
    for core in range(s["cores"]):
        chunks = core_chunks(units[core::s["cores"]], m1, n1, k1)
        sb = StreamBuilder(target)
        if zero is not None:
            clear_output(sb, zero, tile, core, s["cores"], batch_n * sh.m * sh.n, out_dt,
                         gm_out[mm_i])
        if compiled is None:
            software_pipeline(sb, [Chunk(*c) for c in chunks.tolist()], s["l1_depth"],
                              ctx.load, ctx.compute, (0, 0))
        elif len(chunks):
            compiled.pipeline(sb, ctx, chunks, s["l1_depth"], plans[0][1], plans[1][1],
                              plans[0][0], plans[1][0])
        streams.append(sb)
    return streams


def _compiled_loop() -> ModuleType | None:
    """The compiled K loop (``_matmul.pyx``), or ``None`` for this module's own (the
    specification): ``PYPTO_IMPL=python``, or the extension is not built."""
    return native.extension("pypto.codegen._matmul", stacklevel=3)


@dataclass
class _Ctx(CubeLoop):
    """The matmul K loop (the compiled loop reads these fields too)."""

    sh: MatmulShape
    mm_i: int
    fix_relu_output: int | None  # the ReLU chain's output node, applied by FIX
    atomic: bool                 # split-K: partial sums add into GM
    layouts: tuple[str, ...]     # how each input lies in GM (ND or NZ)

    def extents(self, c: Chunk) -> tuple[int, int]:
        return min(self.m1, self.sh.m - c.m_at), min(self.n1, self.sh.n - c.n_at)

    def load(self, sb: StreamBuilder, c: Chunk) -> None:
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

    def drain(self, sb: StreamBuilder, c: Chunk, c_op: Operand) -> None:
        """L0C -> GM through FIX (with its ReLU, or an atomic add for split-K), or -> UB
        and the epilogue."""
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
        self.drain_to_epilogue(sb, self.mm_i, Tile(r0, mcur, c.n_at, ncur), c.blk, c_op)


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


def _batch_offset(node, b: int, batch: tuple[int, ...]) -> int:  # type: ignore[no-untyped-def]
    offset = node.attr("offset")
    if not batch:
        return offset
    strides = node.attr("strides")[:-2]
    for dim, stride in zip(reversed(batch), reversed(strides)):
        offset += (b % dim) * stride
        b //= dim
    return offset
