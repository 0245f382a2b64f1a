"""Lowering of conv2d workloads: an implicit GEMM with im2col in L1.

The GEMM is ``[M = N*OH*OW pixels, R*S*C] x [R*S*C, K]``. As in ``codegen.matmul``
(with which it shares ``codegen.pipeline``), output blocks (``m1`` pixels x ``n1``
channels) go round robin to the cube cores, the reduction streams through L1 (``k1`` at
a time) and L0 (``k0``), MMADs accumulate in L0C, and the block drains through FIX to
GM, or to UB for an elementwise epilogue.

What differs is the A tile: ``m`` consecutive output pixels x a ``k1`` chunk of the
``(r, s, c)`` reduction is assembled in L1 straight from the NHWC input. For one tap
``(r, s)`` and a run of pixels in one output row, the input elements form a 2-D strided
region (rows: pixels, ``stride_w * C`` apart; columns: a run of channels), so each is
one COPY; with the schedule's ``im2col="filter_row"``, the taps of a filter row
``(r, s .. s')`` are one COPY (one longer run per pixel). Pixels whose tap falls in the
padding read a one-element zero tensor with row and column strides 0. Copies that
continue each other (whole rows of a 1x1 convolution, adjacent padding rows,
neighbouring taps of a padding row) are merged.

A grouped conv runs one GEMM per group (a block's group picks its input channels,
weight columns and output columns). An NCHW conv is ``codegen.conv_nchw``'s, a
depthwise conv under ``engine="vector"`` ``codegen.conv_depthwise``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from pypto.codegen import conv_depthwise, conv_nchw
from pypto.codegen.isa import Mem, Op
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
from pypto.ir.workload import Workload
from pypto.schedule_space.conv2d import (
    ConvShape,
    block_pixels,
    conv_index,
    epilogue_chain,
    shape_of,
    stage_bytes,
)
from pypto.schedule_space.conv_depthwise import is_vector
from pypto.schedule_space.cube import ACC_DTYPE
from pypto.schedule_space.schedule import Schedule
from pypto.targets import Target


@dataclass(frozen=True)
class Im2colCopy:
    """One DMA of an A tile: ``rows`` x ``cols`` at tile row ``row``, column ``col``,
    from GM element ``src`` of the input (rows ``src_rs`` apart, columns the channel
    stride), or zeros when ``src`` is None."""

    row: int
    col: int
    rows: int
    cols: int
    src: int | None
    src_rs: int


def im2col_copies(sh: ConvShape, x_offset: int, x_strides: tuple[int, ...], p_at: int,
                  pixels: int, k_at: int, kcur: int,
                  filter_rows: bool = False) -> list[Im2colCopy]:
    """The DMAs that fill the A tile of pixels ``p_at ..`` (``pixels`` of them) and
    reduction indices ``k_at ..`` (``kcur``); ``x_offset``/``x_strides`` is the NHWC
    input's view (elements).

    ``filter_rows`` (with ``dilation_w == 1`` and ``(w, c)`` contiguous in the input):
    the taps ``(r, s .. s')`` of one filter row read one contiguous run of
    ``(s' - s + 1) * C`` elements per pixel, the same run of reduction indices, so
    pixels that all those taps find inside the image take one copy; border pixels go
    tap by tap."""
    sn, s_h, s_w, sc = x_strides
    (st_h, st_w), (pad_h, pad_w), (dil_h, dil_w) = sh.stride, sh.padding, sh.dilation
    fuse_taps = filter_rows and dil_w == 1 and sc == 1 and s_w == sh.c
    # Output columns where tap s lands inside the image: 0 <= ow*st_w - pad_w + s*dil_w < W.
    ow_lo = [max(0, -(-(pad_w - s * dil_w) // st_w)) for s in range(sh.s)]
    ow_hi = [min(sh.ow - 1, (sh.w - 1 + pad_w - s * dil_w) // st_w) for s in range(sh.s)]
    out: list[Im2colCopy] = []

    def copy(row: int, ow: int, count: int, q: int, cols: int, base: int | None) -> None:
        """``count`` pixels from output column ``ow`` (tile row ``row``), reduction
        ``q ..``: input elements from ``base`` (the pixel at ``ow``), or zeros."""
        if count > 0:
            src = None if base is None else base + ((q // sh.c) % sh.s * dil_w - pad_w
                                                      + ow * st_w) * s_w + q % sh.c * sc
            _append(out, Im2colCopy(row, q - k_at, count, cols, src,
                                    0 if base is None else st_w * s_w))

    def by_tap(row: int, u: int, v: int, q0: int, q1: int, base: int | None) -> None:
        """Output columns ``u .. v`` of one row, reduction ``q0 .. q1``, tap by tap."""
        q = q0
        while q < q1:
            s, c = divmod(q, sh.c)
            s %= sh.s
            cols = min(sh.c - c, q1 - q)
            a, b = max(u, ow_lo[s]), min(v, ow_hi[s])
            if base is None or a > b:
                copy(row, u, v - u + 1, q, cols, None)
            else:
                copy(row, u, a - u, q, cols, None)
                copy(row + a - u, a, b - a + 1, q, cols, base)
                copy(row + b - u + 1, b + 1, v - b, q, cols, None)
            q += cols

    q = k_at
    while q < k_at + kcur:
        tap, c = divmod(q, sh.c)
        r, s = divmod(tap, sh.s)
        q_end = min(k_at + kcur, (r + 1) * sh.s * sh.c if fuse_taps else q + sh.c - c)
        s_end = (q_end - 1) // sh.c % sh.s
        p = p_at
        while p < p_at + pixels:
            img, rest = divmod(p, sh.oh * sh.ow)
            oh, ow = divmod(rest, sh.ow)
            run = min(sh.ow - ow, p_at + pixels - p)
            row, last = p - p_at, ow + run - 1
            ih = oh * st_h - pad_h + r * dil_h
            base = x_offset + img * sn + ih * s_h if 0 <= ih < sh.h else None
            a, b = max(ow, ow_lo[s]), min(last, ow_hi[s_end])  # inside for every tap
            if base is None or a > b or not fuse_taps:
                by_tap(row, ow, last, q, q_end, base)
            else:
                by_tap(row, ow, a - 1, q, q_end, base)
                copy(row + a - ow, a, b - a + 1, q, q_end - q, base)
                by_tap(row + b - ow + 1, b + 1, last, q, q_end, base)
            p += run
        q = q_end
    return _merge_zero_columns(out)


def _merge_zero_columns(copies: list[Im2colCopy]) -> list[Im2colCopy]:
    """Zero fills of the same tile rows in adjacent columns (neighbouring taps of a
    padding row) become one."""
    out: list[Im2colCopy] = []
    last: dict[tuple[int, int], int] = {}
    for c in copies:
        if c.src is None:
            j = last.get((c.row, c.rows))
            if j is not None and out[j].col + out[j].cols == c.col:
                out[j] = replace(out[j], cols=out[j].cols + c.cols)
                continue
            last[(c.row, c.rows)] = len(out)
        out.append(c)
    return out


def _append(out: list[Im2colCopy], c: Im2colCopy) -> None:
    """Add ``c``, merged into the previous copy when it continues it row for row."""
    if out:
        prev = out[-1]
        if prev.col == c.col and prev.cols == c.cols and prev.row + prev.rows == c.row:
            if prev.src is None and c.src is None:
                out[-1] = Im2colCopy(prev.row, prev.col, prev.rows + c.rows, c.cols, None, 0)
                return
            if prev.src is not None and c.src is not None:
                stride = prev.src_rs if prev.rows > 1 else (c.src - prev.src)
                if stride >= 0 and c.src == prev.src + prev.rows * stride and (
                        c.rows == 1 or c.src_rs == stride):
                    out[-1] = Im2colCopy(prev.row, prev.col, prev.rows + c.rows, c.cols,
                                         prev.src, stride)
                    return
    out.append(c)


def weights_transposed(w) -> bool:  # type: ignore[no-untyped-def]
    """Whether the weight matrix ``[R*S*C, K]`` is read as its transpose (KRSC weights
    as stored: ``[K, R*S*C]`` row-major), which L1 then holds as ``n1 x k1``."""
    rs, cs = w.attr("strides")
    return rs == 1 and cs != 1 and w.shape[0] > 1


def emit(wl: Workload, s: Schedule, target: Target, gm_in: dict[int, int],
         gm_out: dict[int, int]) -> list[StreamBuilder]:
    if is_vector(s):  # a depthwise conv on the vector unit
        return conv_depthwise.emit(wl, s, target, gm_in, gm_out)
    sh = shape_of(wl)
    if sh.layout == "NCHW":  # read and written as NCHW
        return conv_nchw.emit(wl, s, target, gm_in, gm_out)
    ci = conv_index(wl)
    conv = wl.nodes[ci]
    in_dt, acc_dt = BY_NAME[sh.dtype], BY_NAME[ACC_DTYPE[sh.dtype]]
    m1, n1, k1 = s["m1"], s["n1"], s["k1"]
    buffers = cube_buffers(target, s, in_dt.itemsize, acc_dt.itemsize, m1, n1, wl,
                           epilogue_chain(wl), gm_in, gm_out)
    pixels = block_pixels(sh, s)
    blocks = block_order(sh.groups, math.ceil(sh.m / pixels), math.ceil(sh.k / n1),
                         s["block_order"], 1)
    zero = wl.nodes[conv.args[2]] if len(conv.args) > 2 else None
    ctx = _Ctx(wl=wl, in_dt=in_dt, acc_dt=acc_dt, out_dt=BY_NAME[conv.dtype],
               isz=in_dt.itemsize, m1=m1, n1=n1, k1=k1, k0=s["k0"], m0=m1, n0=n1,
               l0_order="mn", transpose_a=False,
               transpose_b=weights_transposed(wl.nodes[conv.args[1]]), a_l1=buffers.a_l1,
               b_l1=buffers.b_l1, l0a=buffers.l0a, l0b=buffers.l0b, l0c=buffers.l0c,
               emitter=buffers.emitter, gm_in=gm_in, gm_out=gm_out, sh=sh, ci=ci,
               pixels=pixels, zero_sym=gm_in[zero.attr("input")] if zero is not None else -1,
               filter_rows=s["im2col"] == "filter_row")
    if s["im2col"] == "staged":  # a grouped conv's input rows through UB
        ctx.stage = buffers.arenas.role("vector").alloc(stage_bytes(sh, s), s["l1_depth"])
        ctx.zeros = buffers.arenas.role("vector").alloc(in_dt.itemsize, 1)
    # work units (group, m block, n block, K from, K to): the whole reduction per block
    units = np.array([(*blk, 0, sh.red) for blk in blocks], dtype=np.int64).reshape(-1, 5)
    streams = []
    for core in range(s["cores"]):
        chunks = core_chunks(units[core::s["cores"]], pixels, n1, k1)
        sb = StreamBuilder(target)
        todo = [Chunk(*c) for c in chunks.tolist()]
        if ctx.stage is None:
            software_pipeline(sb, todo, s["l1_depth"], ctx.load, ctx.compute, (0, 0))
        else:
            if todo:
                conv_nchw.load_zero(sb, ctx.zeros, ctx.zero_sym, in_dt)
            conv_nchw.staged_pipeline(sb, todo, s["l1_depth"], ctx)
        streams.append(sb)
    return streams


@dataclass
class _Ctx(CubeLoop):
    """The conv2d K loop: the A tile by im2col, blocks of ``pixels`` output pixels."""

    sh: ConvShape
    ci: int
    pixels: int
    zero_sym: int
    filter_rows: bool  # im2col copies per filter row (else per tap)
    stage: Slots | None = None  # im2col="staged": the block's input rows in UB
    zeros: Slots | None = None  # and one zero element there

    def extents(self, c: Chunk) -> tuple[int, int]:
        return min(self.pixels, self.sh.m - c.m_at), min(self.n1, self.sh.k - c.n_at)

    def load(self, sb: StreamBuilder, c: Chunk) -> None:
        """GM -> L1: the A tile by im2col DMAs from the input, the B tile of weights."""
        self.load_from_gm(sb, c)
        if self.stage is not None:
            self.load_on_chip(sb, c)

    def load_on_chip(self, sb: StreamBuilder, c: Chunk) -> None:
        """Staged: the A tile's im2col copies UB -> L1."""
        x = self.wl.nodes[self.wl.nodes[self.ci].args[0]]
        mcur, _ = self.extents(c)
        x_cs = x.attr("strides")[3]
        assert self.stage is not None and self.zeros is not None
        sn, s_h = x.attr("strides")[:2]
        at = self.stage.addr(c.index) // self.isz
        p, end = c.m_at, c.m_at + mcur
        plane = self.sh.oh * self.sh.ow
        while p < end:  # per image the block reaches: its staged rows
            img = p // plane
            last = min(end, (img + 1) * plane) - 1
            lo, hi = self.staged_rows(p, last)
            view = at - img * sn - lo * s_h + c.batch * self.sh.c * x_cs
            for cp in im2col_copies(self.sh, view, x.attr("strides"), p, last - p + 1, c.k_at,
                                    c.kcur, self.filter_rows):
                dst = Operand(self.a_l1.mem, self.a_l1.addr(c.index) + (
                    (cp.row + p - c.m_at) * self.k1 + cp.col) * self.isz, cp.rows, cp.cols,
                    self.k1)
                if cp.src is None:
                    src = Operand(self.zeros.mem, self.zeros.addr(0), cp.rows, cp.cols, 0, 0)
                else:
                    src = Operand(self.stage.mem, cp.src * self.isz, cp.rows, cp.cols,
                                  cp.src_rs, x_cs)
                sb.emit(Op.COPY, dst, src, dtype=self.in_dt)
            at += max(0, hi - lo + 1) * s_h
            p = last + 1

    def staged_rows(self, p: int, last: int) -> tuple[int, int]:
        """The input rows ``lo .. hi`` that output pixels ``p .. last`` (one image) read."""
        sh, plane = self.sh, self.sh.oh * self.sh.ow
        img = p // plane
        oh0, oh1 = (p - img * plane) // sh.ow, (last - img * plane) // sh.ow
        lo = max(0, oh0 * sh.stride[0] - sh.padding[0])
        hi = min(sh.h - 1, oh1 * sh.stride[0] - sh.padding[0] + (sh.r - 1) * sh.dilation[0])
        return lo, hi

    def load_from_gm(self, sb: StreamBuilder, c: Chunk) -> None:
        """The DMAs from GM: the A tile's im2col copies (staged: the block's input rows,
        every channel, into UB: one run per image) and the B tile."""
        conv = self.wl.nodes[self.ci]
        x, w = self.wl.nodes[conv.args[0]], self.wl.nodes[conv.args[1]]
        mcur, ncur = self.extents(c)
        a_addr, b_addr = self.a_l1.addr(c.index), self.b_l1.addr(c.index)
        x_sym, x_cs = self.gm_in[x.attr("input")], x.attr("strides")[3]
        x_at = x.attr("offset") + c.batch * self.sh.c * x_cs   # the group's first channel
        copies = [] if self.stage is not None else im2col_copies(
            self.sh, x_at, x.attr("strides"), c.m_at, mcur, c.k_at, c.kcur, self.filter_rows)
        if self.stage is not None:
            sn, s_h = x.attr("strides")[:2]
            at, p, end = self.stage.addr(c.index), c.m_at, c.m_at + mcur
            plane = self.sh.oh * self.sh.ow
            while p < end:
                img = p // plane
                last = min(end, (img + 1) * plane) - 1
                lo, hi = self.staged_rows(p, last)
                run = max(0, hi - lo + 1) * s_h
                if run:
                    sb.emit(Op.COPY, Operand(self.stage.mem, at, 1, run, run),
                            Operand(Mem.GM, x.attr("offset") + img * sn + lo * s_h, 1, run, run,
                                    1, gm=x_sym), dtype=self.in_dt)
                at += run * self.isz
                p = last + 1
        for cp in copies:
            addr = a_addr + (cp.row * self.k1 + cp.col) * self.isz
            if cp.src is not None:
                dst = Operand(self.a_l1.mem, addr, cp.rows, cp.cols, self.k1)
                src = Operand(Mem.GM, cp.src, cp.rows, cp.cols, cp.src_rs, x_cs, gm=x_sym)
            elif cp.cols == self.k1:  # whole tile rows: one contiguous run of zeros
                dst = Operand(self.a_l1.mem, addr, 1, cp.rows * cp.cols, 0)
                src = Operand(Mem.GM, 0, 1, cp.rows * cp.cols, 0, 0, gm=self.zero_sym)
            else:
                dst = Operand(self.a_l1.mem, addr, cp.rows, cp.cols, self.k1)
                src = Operand(Mem.GM, 0, cp.rows, cp.cols, 0, 0, gm=self.zero_sym)
            sb.emit(Op.COPY, dst, src, dtype=self.in_dt)
        b_rs, b_cs = w.attr("strides")
        n_at = c.batch * self.sh.k + c.n_at                    # the group's columns
        at = w.attr("offset") + c.k_at * b_rs + n_at * b_cs
        if self.transpose_b:  # KRSC weights as stored: L1 holds the tile as n1 x k1
            dst = Operand(self.b_l1.mem, b_addr, ncur, c.kcur, self.k1)
            src = Operand(Mem.GM, at, ncur, c.kcur, b_cs, b_rs, gm=self.gm_in[w.attr("input")])
        else:
            dst = Operand(self.b_l1.mem, b_addr, c.kcur, ncur, self.n1)
            src = Operand(Mem.GM, at, c.kcur, ncur, b_rs, b_cs, gm=self.gm_in[w.attr("input")])
        sb.emit(Op.COPY, dst, src, dtype=self.in_dt)

    def drain(self, sb: StreamBuilder, c: Chunk, c_op: Operand) -> None:
        """L0C -> GM (the NHWC output is the GEMM's [M, K]; a group's, its columns), or
        -> UB and the epilogue."""
        mcur, ncur = self.extents(c)
        n_at, width = c.batch * self.sh.k + c.n_at, self.sh.k_total
        if self.emitter is None:
            out = Operand(Mem.GM, c.m_at * width + n_at, mcur, ncur, width, 1,
                          gm=self.gm_out[self.ci])
            sb.emit(Op.COPY, out, c_op, dtype=self.out_dt, sdtype=self.acc_dt)
            return
        self.drain_to_epilogue(sb, self.ci, Tile(c.m_at, mcur, n_at, ncur), c.blk, c_op)
