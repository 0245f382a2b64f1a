"""Lowering of matmul workloads: blocks of the output over cores, K streamed through
L1 and L0, MMADs accumulating in L0C, then a drain to GM (or to UB for an epilogue)."""

from __future__ import annotations

import math

from pypto.codegen.isa import F_ACCUMULATE, F_TRANSPOSE, Mem, Op
from pypto.codegen.place import Arena
from pypto.codegen.program import Operand, StreamBuilder
from pypto.codegen.vector_chain import ChainEmitter, Tile
from pypto.frontend.dtypes import BY_NAME
from pypto.ir.workload import Workload
from pypto.schedule_space.matmul import ACC_DTYPE, epilogue_chain, shape_of
from pypto.schedule_space.schedule import Schedule
from pypto.targets import Target


def _arena(target: Target, role: str) -> Arena:
    mem = target.role(role)
    return Arena(Mem[mem.name], mem.capacity, mem.alignment)


def emit(wl: Workload, s: Schedule, target: Target, gm_in: dict[int, int],
         gm_out: dict[int, int]) -> list[StreamBuilder]:
    sh = shape_of(wl)
    mm_i = next(i for i, n in enumerate(wl.nodes) if n.op == "matmul")
    mm = wl.nodes[mm_i]
    a_node, b_node = wl.nodes[mm.args[0]], wl.nodes[mm.args[1]]
    in_dt, acc_dt, out_dt = BY_NAME[sh.dtype], BY_NAME[ACC_DTYPE[sh.dtype]], BY_NAME[mm.dtype]
    isz = in_dt.itemsize
    m1, n1, k1, k0 = s["m1"], s["n1"], s["k1"], s["k0"]
    stage = _arena(target, "stage")
    a_l1 = stage.alloc(m1 * k1 * isz, s["l1_depth"])
    b_l1 = stage.alloc(k1 * n1 * isz, s["l1_depth"])
    l0a = _arena(target, "left").alloc(m1 * k0 * isz, s["l0_depth"])
    l0b = _arena(target, "right").alloc(k0 * n1 * isz, s["l0_depth"])
    l0c = _arena(target, "acc").alloc(m1 * n1 * acc_dt.itemsize, s["l0c_depth"])
    chain = epilogue_chain(wl)
    emitter = None
    if chain is not None:
        emitter = ChainEmitter(wl, chain, m1, n1, s["ub_depth"], _arena(target, "vector"),
                               gm_in, gm_out, chunked=False)
    batch_n = math.prod(sh.batch)
    mblocks, nblocks = math.ceil(sh.m / m1), math.ceil(sh.n / n1)
    blocks = [(b, mb, nb) for b in range(batch_n) for mb in range(mblocks)
              for nb in range(nblocks)]
    streams = []
    for core in range(s["cores"]):
        sb = StreamBuilder()
        l1_ctr = l0_ctr = 0
        for blk_ctr, (b, mb, nb) in enumerate(blocks[core::s["cores"]]):
            m_at, n_at = mb * m1, nb * n1
            mcur, ncur = min(m1, sh.m - m_at), min(n1, sh.n - n_at)
            a_base = _batch_offset(a_node, b, sh.batch)
            b_base = _batch_offset(b_node, b, sh.batch)
            a_rs, a_cs = a_node.attr("strides")[-2:]
            b_rs, b_cs = b_node.attr("strides")[-2:]
            c_op = Operand(l0c.mem, l0c.addr(blk_ctr), mcur, ncur, n1)
            first = True
            for k_at in range(0, sh.k, k1):
                kcur = min(k1, sh.k - k_at)
                a_addr, b_addr = a_l1.addr(l1_ctr), b_l1.addr(l1_ctr)
                # GM -> L1, as stored (a transposed operand is transposed on the way to L0)
                if sh.transpose_a:
                    a_l1_op = Operand(a_l1.mem, a_addr, kcur, mcur, m1)
                    src = Operand(Mem.GM, a_base + k_at * a_rs + m_at * a_cs, kcur, mcur, a_rs,
                                  a_cs, gm=gm_in[a_node.attr("input")])
                else:
                    a_l1_op = Operand(a_l1.mem, a_addr, mcur, kcur, k1)
                    src = Operand(Mem.GM, a_base + m_at * a_rs + k_at * a_cs, mcur, kcur, a_rs,
                                  a_cs, gm=gm_in[a_node.attr("input")])
                sb.emit(Op.COPY, a_l1_op, src, dtype=in_dt)
                if sh.transpose_b:
                    b_l1_op = Operand(b_l1.mem, b_addr, ncur, kcur, k1)
                    src = Operand(Mem.GM, b_base + n_at * b_rs + k_at * b_cs, ncur, kcur, b_rs,
                                  b_cs, gm=gm_in[b_node.attr("input")])
                else:
                    b_l1_op = Operand(b_l1.mem, b_addr, kcur, ncur, n1)
                    src = Operand(Mem.GM, b_base + k_at * b_rs + n_at * b_cs, kcur, ncur, b_rs,
                                  b_cs, gm=gm_in[b_node.attr("input")])
                sb.emit(Op.COPY, b_l1_op, src, dtype=in_dt)
                for kk in range(0, kcur, k0):
                    kkc = min(k0, kcur - kk)
                    a0 = Operand(l0a.mem, l0a.addr(l0_ctr), mcur, kkc, k0)
                    b0 = Operand(l0b.mem, l0b.addr(l0_ctr), kkc, ncur, n1)
                    if sh.transpose_a:
                        sb.emit(Op.COPY, a0, Operand(a_l1.mem, a_addr + kk * m1 * isz, kkc, mcur,
                                                     m1), dtype=in_dt, flags=F_TRANSPOSE)
                    else:
                        sb.emit(Op.COPY, a0, Operand(a_l1.mem, a_addr + kk * isz, mcur, kkc, k1),
                                dtype=in_dt)
                    if sh.transpose_b:
                        sb.emit(Op.COPY, b0, Operand(b_l1.mem, b_addr + kk * isz, ncur, kkc, k1),
                                dtype=in_dt, flags=F_TRANSPOSE)
                    else:
                        sb.emit(Op.COPY, b0, Operand(b_l1.mem, b_addr + kk * n1 * isz, kkc, ncur,
                                                     n1), dtype=in_dt)
                    sb.emit(Op.MMAD, c_op, a0, b0, dtype=acc_dt, sdtype=in_dt,
                            flags=0 if first else F_ACCUMULATE)
                    first = False
                    l0_ctr += 1
                l1_ctr += 1
            r0 = b * sh.m + m_at
            if emitter is None:
                out = Operand(Mem.GM, r0 * sh.n + n_at, mcur, ncur, sh.n, 1, gm=gm_out[mm_i])
                sb.emit(Op.COPY, out, c_op, dtype=out_dt, sdtype=acc_dt)
            else:
                tile = Tile(r0, mcur, n_at, ncur)
                sb.emit(Op.COPY, emitter.operand(mm_i, tile, blk_ctr), c_op, dtype=out_dt,
                        sdtype=acc_dt)
                if mm_i in gm_out:
                    emitter.store(sb, mm_i, tile, blk_ctr)
                emitter.emit_tile(sb, tile, [(n_at, ncur)], blk_ctr, blk_ctr,
                                  preset=frozenset({mm_i}))
        streams.append(sb)
    return streams


def _batch_offset(node, b: int, batch: tuple[int, ...]) -> int:  # type: ignore[no-untyped-def]
    offset = node.attr("offset")
    if not batch:
        return offset
    strides = node.attr("strides")[:-2]
    for dim, stride in zip(reversed(batch), reversed(strides)):
        offset += (b % dim) * stride
        b //= dim
    return offset
