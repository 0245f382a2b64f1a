"""Lowering of a conv2d that reads and writes NCHW directly (``conv2d_nchw``): no layout
conversion, no weight conversion.

It computes the implicit GEMM transposed: ``out[k, pixels] = W[k, (c, r, s)] x
im2col^T[(c, r, s), pixels]`` per image. The weights KCRS are that left operand as
stored (``[K, C*R*S]``, row-major); the right operand's row for reduction index ``(c, r,
s)`` is input channel ``c`` at tap ``(r, s)`` over the block's output pixels, which, for
the pixels of one output row, is a run along an input row of NCHW: contiguous when
stride_w is 1 (element-strided otherwise, and charged so). One DMA moves a tap's run
for all the chunk's channels (rows ``H*W`` apart in GM, ``R*S`` rows apart in the L1
tile); pixels whose tap falls in the padding read the zero constant. The accumulator
block is ``n1`` channels x ``m1`` pixels, and each channel's pixels drain as one run
of the NCHW output (one DMA per image the block spans), with a ReLU tail applied by
FIX on the way.

The schedule is the conv2d space's: ``m1``/``row_block`` are the block's pixels,
``n1`` its channels (so L0A holds ``n1 x k0``, L0B ``k0 x m1``: the space counts them
so for this layout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pypto.codegen.isa import F_RELU, Mem, Op
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
from pypto.ir.dtypes import BY_NAME
from pypto.ir.workload import Workload
from pypto.schedule_space.conv2d import (
    ConvShape,
    block_pixels,
    conv_index,
    fix_relu_tail,
    shape_of,
    stage_bytes,
)
from pypto.schedule_space.cube import ACC_DTYPE
from pypto.schedule_space.schedule import Schedule
from pypto.targets import Target


@dataclass(frozen=True)
class TapCopy:
    """One DMA of the im2col^T tile: ``rows`` reduction rows from tile row ``row``,
    ``step`` tile rows apart (the channels of one tap), ``cols`` pixels from tile column
    ``col``; from GM element ``src`` (rows ``src_rs`` apart, pixels ``src_cs``), or
    zeros when ``src`` is None."""

    row: int
    rows: int
    step: int
    col: int
    cols: int
    src: int | None
    src_rs: int
    src_cs: int


def tap_copies(sh: ConvShape, x_offset: int, x_strides: tuple[int, ...], p_at: int,
               pixels: int, k_at: int, kcur: int) -> list[TapCopy]:
    """The DMAs that fill the im2col^T tile of reduction rows ``k_at ..`` (``kcur``;
    index ``c * R * S + r * S + s``) and output pixels ``p_at ..`` (``pixels``) from
    the NCHW input's view ``x_offset``/``x_strides`` (elements)."""
    sn, sc, s_h, s_w = x_strides
    (st_h, st_w), (pad_h, pad_w), (dil_h, dil_w) = sh.stride, sh.padding, sh.dilation
    taps = sh.r * sh.s
    out: list[TapCopy] = []
    for tap in range(taps):
        r, s = divmod(tap, sh.s)
        c_lo = max(0, -(-(k_at - tap) // taps))
        c_hi = min(sh.c - 1, (k_at + kcur - 1 - tap) // taps)
        if c_lo > c_hi:
            continue
        rows, row = c_hi - c_lo + 1, c_lo * taps + tap - k_at
        ow_lo = max(0, -(-(pad_w - s * dil_w) // st_w))
        ow_hi = min(sh.ow - 1, (sh.w - 1 + pad_w - s * dil_w) // st_w)

        def add(col: int, count: int, src: int | None, row: int = row,
                rows: int = rows) -> None:
            if count > 0:
                _append(out, TapCopy(row, rows, taps, col, count, src, sc, st_w * s_w))

        p = p_at
        while p < p_at + pixels:
            img, rest = divmod(p, sh.oh * sh.ow)
            oh, ow = divmod(rest, sh.ow)
            run = min(sh.ow - ow, p_at + pixels - p)
            col, last = p - p_at, ow + run - 1
            ih = oh * st_h - pad_h + r * dil_h
            a, b = max(ow, ow_lo), min(last, ow_hi)
            if not 0 <= ih < sh.h or a > b:
                add(col, run, None)
            else:
                add(col, a - ow, None)
                add(col + a - ow, b - a + 1, x_offset + img * sn + c_lo * sc + ih * s_h
                    + (a * st_w - pad_w + s * dil_w) * s_w)
                add(col + b - ow + 1, last - b, None)
            p += run
    return out


def _append(out: list[TapCopy], c: TapCopy) -> None:
    """Add ``c``; a zero fill that continues the previous one (same rows, next
    columns: neighbouring padding rows) joins it."""
    if out and c.src is None:
        prev = out[-1]
        if prev.src is None and (prev.row, prev.rows) == (c.row, c.rows) and \
                prev.col + prev.cols == c.col:
            out[-1] = TapCopy(prev.row, prev.rows, prev.step, prev.col, prev.cols + c.cols,
                              None, 0, 0)
            return
    out.append(c)


def emit(wl: Workload, s: Schedule, target: Target, gm_in: dict[int, int],
         gm_out: dict[int, int]) -> list[StreamBuilder]:
    sh = shape_of(wl)
    ci = conv_index(wl)
    conv = wl.nodes[ci]
    in_dt, acc_dt = BY_NAME[sh.dtype], BY_NAME[ACC_DTYPE[sh.dtype]]
    pixels = block_pixels(sh, s)
    channels, width, k1 = s["n1"], s["m1"], s["k1"]   # the transposed GEMM's m1, n1
    swapped = {**dict(s), "m1": channels, "n1": width}
    buffers = cube_buffers(target, swapped, in_dt.itemsize, acc_dt.itemsize, channels, width,
                           wl, None, gm_in, gm_out)
    stage = zeros = None
    if s["im2col"] == "staged":
        stage = buffers.arenas.role("vector").alloc(stage_bytes(sh, s), s["l1_depth"])
        zeros = buffers.arenas.role("vector").alloc(in_dt.itemsize, 1)
    relu = fix_relu_tail(wl) and s.get("fuse_tail", True) is not False
    out_node = next(i for i, n in enumerate(wl.nodes) if n.op == "relu") if relu else ci
    zero = wl.nodes[conv.args[2]] if len(conv.args) > 2 else None
    ctx = _Ctx(wl=wl, in_dt=in_dt, acc_dt=acc_dt, out_dt=BY_NAME[wl.nodes[out_node].dtype],
               isz=in_dt.itemsize, m1=channels, n1=width, k1=k1, k0=s["k0"], m0=channels,
               n0=width, l0_order="mn", transpose_a=False, transpose_b=False,
               a_l1=buffers.a_l1, b_l1=buffers.b_l1, l0a=buffers.l0a, l0b=buffers.l0b,
               l0c=buffers.l0c, emitter=None, gm_in=gm_in, gm_out=gm_out, sh=sh, ci=ci,
               pixels=pixels, zero_sym=gm_in[zero.attr("input")] if zero is not None else -1,
               out_sym=gm_out[out_node], relu=relu, stage=stage, zeros=zeros)
    blocks = block_order(1, math.ceil(sh.m / pixels), math.ceil(sh.k / channels),
                         s["block_order"], 1)
    # work units (0, channel block, pixel block, K from, K to): the transposed GEMM's
    units = np.array([(0, ch, pix, 0, sh.red) for _, pix, ch in blocks],
                     dtype=np.int64).reshape(-1, 5)
    streams = []
    for core in range(s["cores"]):
        chunks = core_chunks(units[core::s["cores"]], channels, pixels, k1)
        sb = StreamBuilder(target)
        if zeros is not None and len(chunks):
            load_zero(sb, zeros, ctx.zero_sym, in_dt)
        todo = [Chunk(*c) for c in chunks.tolist()]
        if stage is None:
            software_pipeline(sb, todo, s["l1_depth"], ctx.load, ctx.compute, (0, 0))
        else:
            staged_pipeline(sb, todo, s["l1_depth"], ctx)
        streams.append(sb)
    return streams


def load_zero(sb: StreamBuilder, zeros: Slots, zero_sym: int, dtype: object) -> None:
    """The UB zero element staged padding fills read: the workload's zero constant (so
    it is read, as every input must be), when it has one (no padding: no fills)."""
    if zero_sym >= 0:
        sb.emit(Op.COPY, Operand(zeros.mem, zeros.addr(0), 1, 1, 1),
                Operand(Mem.GM, 0, 1, 1, 1, 1, gm=zero_sym), dtype=dtype)


def staged_pipeline(sb: StreamBuilder, chunks: list[Chunk], depth: int, ctx: _Ctx) -> None:
    """``software_pipeline`` in two stages: the GM DMAs of chunk ``j + depth - 1`` and the
    UB -> L1 tap copies of chunk ``j + depth - 2`` (whose rows are in UB by then) go
    before the compute of chunk ``j``, so the copies do not sit in their pipe's queue
    waiting for a DMA just issued."""
    ahead = depth - 1
    on_chip = max(0, ahead - 1)
    state = (0, 0)
    for j, chunk in enumerate(chunks):
        for ld in range(0 if j == 0 else j + ahead, min(j + ahead, len(chunks) - 1) + 1):
            ctx.load_from_gm(sb, chunks[ld])
        for ld in range(0 if j == 0 else j + on_chip, min(j + on_chip, len(chunks) - 1) + 1):
            ctx.load_on_chip(sb, chunks[ld])
        state = ctx.compute(sb, chunk, state)


@dataclass
class _Ctx(CubeLoop):
    """The K loop of the transposed GEMM: A = the KCRS weights, B = im2col^T."""

    sh: ConvShape
    ci: int
    pixels: int
    zero_sym: int
    out_sym: int
    relu: bool
    stage: Slots | None  # im2col="staged": the chunk's input rows in UB
    zeros: Slots | None  # and one zero element there (padding fills on the same pipe)

    def extents(self, c: Chunk) -> tuple[int, int]:
        return min(self.m1, self.sh.k - c.m_at), min(self.pixels, self.sh.m - c.n_at)

    def load(self, sb: StreamBuilder, c: Chunk) -> None:
        """GM -> L1: the weight tile (``[K, C*R*S]`` as stored) and the im2col^T tile."""
        self.load_from_gm(sb, c)
        if self.stage is not None:
            self.load_on_chip(sb, c)

    def load_from_gm(self, sb: StreamBuilder, c: Chunk) -> None:
        """The DMAs from GM: the weight tile, and the im2col^T tile's copies (or, staged,
        the input rows into UB)."""
        conv = self.wl.nodes[self.ci]
        w = self.wl.nodes[conv.args[1]]
        mcur, _ = self.extents(c)
        w_rs, w_cs = w.attr("strides")
        sb.emit(Op.COPY, Operand(self.a_l1.mem, self.a_l1.addr(c.index), mcur, c.kcur, self.k1),
                Operand(Mem.GM, w.attr("offset") + c.m_at * w_rs + c.k_at * w_cs, mcur,
                        c.kcur, w_rs, w_cs, gm=self.gm_in[w.attr("input")]),
                dtype=self.in_dt)
        self.im2col(sb, c, from_gm=True)

    def load_on_chip(self, sb: StreamBuilder, c: Chunk) -> None:
        """Staged: the tap copies UB -> L1 (after the chunk's input rows reached UB)."""
        self.im2col(sb, c, from_gm=False)

    def im2col(self, sb: StreamBuilder, c: Chunk, from_gm: bool) -> None:
        x = self.wl.nodes[self.wl.nodes[self.ci].args[0]]
        _, ncur = self.extents(c)
        b_addr = self.b_l1.addr(c.index)
        x_sym = self.gm_in[x.attr("input")]
        if self.stage is None:
            copies = [(cp, Mem.GM, x_sym) for cp in tap_copies(
                self.sh, x.attr("offset"), x.attr("strides"), c.n_at, ncur, c.k_at, c.kcur)]
        else:
            copies = self.staged(sb, c, x.attr("offset"), x.attr("strides"), x_sym, ncur,
                                 dmas=from_gm)
            if from_gm:
                return
        for cp, mem, sym in copies:
            dst = Operand(self.b_l1.mem, b_addr + (cp.row * self.n1 + cp.col) * self.isz,
                          cp.rows, cp.cols, cp.step * self.n1)
            if cp.src is None and self.zeros is not None:  # staged: zeros from UB too
                src = Operand(self.zeros.mem, self.zeros.addr(0), cp.rows, cp.cols, 0, 0)
            elif cp.src is None:
                src = Operand(Mem.GM, 0, cp.rows, cp.cols, 0, 0, gm=self.zero_sym)
            elif mem == Mem.GM:
                src = Operand(Mem.GM, cp.src, cp.rows, cp.cols, cp.src_rs, cp.src_cs, gm=sym)
            else:
                src = Operand(mem, cp.src * self.isz, cp.rows, cp.cols, cp.src_rs, cp.src_cs)
            sb.emit(Op.COPY, dst, src, dtype=self.in_dt)

    def staged(self, sb: StreamBuilder, c: Chunk, x_offset: int, x_strides: tuple[int, ...],
               x_sym: int, ncur: int, dmas: bool) -> list[tuple[TapCopy, Mem, int]]:
        """im2col="staged": per image the block reaches, the chunk's channels' input rows
        into UB (one DMA, a run of whole rows per channel: emitted when ``dmas``); the tap
        copies that then read UB (their ``src`` in UB elements)."""
        sh, stage = self.sh, self.stage
        assert stage is not None
        taps = sh.r * sh.s
        c_lo, c_hi = c.k_at // taps, min(sh.c - 1, (c.k_at + c.kcur - 1) // taps)
        plane = sh.oh * sh.ow
        sn, sc, s_h, _ = x_strides
        at = stage.addr(c.index) // self.isz          # UB element of this chunk's rows
        out: list[tuple[TapCopy, Mem, int]] = []
        p, end = c.n_at, c.n_at + ncur
        while p < end:
            img = p // plane
            last = min(end, (img + 1) * plane) - 1
            oh0, oh1 = (p - img * plane) // sh.ow, (last - img * plane) // sh.ow
            lo = max(0, oh0 * sh.stride[0] - sh.padding[0])
            hi = min(sh.h - 1, oh1 * sh.stride[0] - sh.padding[0] + (sh.r - 1) * sh.dilation[0])
            run = max(0, hi - lo + 1) * sh.w             # a channel's staged elements
            if run and dmas:
                sb.emit(Op.COPY, Operand(stage.mem, at * self.isz, c_hi - c_lo + 1, run, run),
                        Operand(Mem.GM, x_offset + img * sn + c_lo * sc + lo * s_h,
                                c_hi - c_lo + 1, run, sc, 1, gm=x_sym), dtype=self.in_dt)
            # the staged rows as a view of the input: channel stride ``run``, row ``W``
            view = (at - img * sn - c_lo * run - lo * sh.w, (sn, run, sh.w, 1))
            for cp in tap_copies(sh, view[0], view[1], p, last - p + 1, c.k_at, c.kcur):
                moved = TapCopy(cp.row, cp.rows, cp.step, cp.col + p - c.n_at, cp.cols,
                                cp.src, cp.src_rs, cp.src_cs)
                out.append((moved, stage.mem, -1))
            at += (c_hi - c_lo + 1) * run
            p = last + 1
        return out

    def drain(self, sb: StreamBuilder, c: Chunk, c_op: Operand) -> None:
        """L0C (channels x pixels) -> the NCHW output: per image the block spans, each
        channel's pixels one run (ReLU by FIX when it is the tail)."""
        mcur, ncur = self.extents(c)
        plane = self.sh.oh * self.sh.ow
        p, end = c.n_at, c.n_at + ncur
        while p < end:
            img = p // plane
            seg = min(end, (img + 1) * plane) - p
            out = Operand(Mem.GM, (img * self.sh.k + c.m_at) * plane + p - img * plane, mcur,
                          seg, plane, 1, gm=self.out_sym)
            src = Operand(c_op.mem, c_op.addr + (p - c.n_at) * self.acc_dt.itemsize, mcur,
                          seg, self.n1)
            sb.emit(Op.COPY, out, src, dtype=self.out_dt, sdtype=self.acc_dt,
                    flags=F_RELU if self.relu else 0)
            p += seg
