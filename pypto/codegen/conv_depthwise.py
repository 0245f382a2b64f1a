"""Lowering of a depthwise conv2d on the vector unit (``engine="vector"``; the space:
``pypto.schedule_space.conv_depthwise``).

Tiles (image, ``dw_rows`` output rows, ``dw_channels`` channels) go round robin to the
vector cores. Per tile: the input rows it needs (the halo of the taps included) are one
DMA into UB, each pixel's channels padded to the UB alignment, and its channels' R x S
weights a second; the fp32 accumulator is cleared; per tap ``(r, s)`` one ``VMUL``
(input x the tap's weight, broadcast along the pixels; fp16 in, fp32 out) and one
``VADD`` into the accumulator cover the output pixels that tap finds inside the image
(taps over the padding are skipped, not multiplied by zeros): per output row, or with
``dw_flat`` for all the tile's rows at once (stride_w 1: a row's pixels x channels are
one run; the tap's weights are then expanded along a row first). Then one ``VCAST`` to
the output dtype and one DMA out. With ``dw_depth`` buffers the next tiles' loads are
issued before this tile's compute.
"""

from __future__ import annotations

from dataclasses import dataclass

from pypto.codegen.isa import F_TRANSPOSE, Mem, Op
from pypto.codegen.place import Arenas, Slots
from pypto.codegen.program import Operand, StreamBuilder
from pypto.ir.dtypes import BY_NAME
from pypto.ir.workload import Workload
from pypto.schedule_space.conv2d import ConvShape, conv_index, shape_of
from pypto.schedule_space.conv_depthwise import buffers, pixel_stride
from pypto.schedule_space.schedule import Schedule
from pypto.targets import Target

F32 = BY_NAME["float32"]


@dataclass(frozen=True)
class DwTile:
    """Output rows ``oh .. oh + rows`` of image ``img``, channels ``c .. c + channels``."""

    img: int
    oh: int
    rows: int
    c: int
    channels: int

    def input_span(self, sh: ConvShape) -> tuple[int, int]:
        """The input rows ``lo .. hi`` (inclusive) its taps read; ``lo > hi`` if none."""
        top = self.oh * sh.stride[0] - sh.padding[0]
        bottom = (self.oh + self.rows - 1) * sh.stride[0] - sh.padding[0] + \
            (sh.r - 1) * sh.dilation[0]
        return max(0, top), min(sh.h - 1, bottom)


def tiles(sh: ConvShape, rows: int, channels: int) -> list[DwTile]:
    return [DwTile(img, oh, min(rows, sh.oh - oh), c, min(channels, sh.c_total - c))
            for img in range(sh.n) for oh in range(0, sh.oh, rows)
            for c in range(0, sh.c_total, channels)]


def inside(size: int, out: int, stride: int, pad: int, dil: int, tap: int) -> tuple[int, int]:
    """Output positions ``a .. b`` whose tap ``tap`` reads inside ``0 .. size``."""
    a = max(0, -(-(pad - tap * dil) // stride))
    b = min(out - 1, (size - 1 + pad - tap * dil) // stride)
    return a, b


def emit(wl: Workload, s: Schedule, target: Target, gm_in: dict[int, int],
         gm_out: dict[int, int]) -> list[StreamBuilder]:
    sh = shape_of(wl)
    ci = conv_index(wl)
    conv = wl.nodes[ci]
    x, w = wl.nodes[conv.args[0]], wl.nodes[conv.args[1]]
    arenas = Arenas(target)
    ub = arenas.role("vector")
    slots = {name: ub.alloc(nbytes, count) for name, (nbytes, count) in
             buffers(sh, s, target).items()}
    ctx = _Ctx(sh=sh, dt=BY_NAME[sh.dtype], out_dt=BY_NAME[conv.dtype],
               p=pixel_stride(sh, s["dw_channels"], target), flat=s["dw_flat"], slots=slots,
               x_sym=gm_in[x.attr("input")], x_offset=x.attr("offset"),
               x_strides=tuple(x.attr("strides")), w_sym=gm_in[w.attr("input")],
               w_offset=w.attr("offset"), w_strides=tuple(w.attr("strides")),
               y_sym=gm_out[ci], ub=ub.mem)
    work = tiles(sh, s["dw_rows"], s["dw_channels"])
    ahead = s["dw_depth"] - 1
    streams = []
    for core in range(s["dw_cores"]):
        sb = StreamBuilder(target)
        mine = work[core::s["dw_cores"]]
        for t, tile in enumerate(mine):
            for ld in range(0 if t == 0 else t + ahead, min(t + ahead, len(mine) - 1) + 1):
                ctx.load(sb, mine[ld], ld)
            ctx.compute(sb, tile, t)
        streams.append(sb)
    return streams


@dataclass
class _Ctx:
    sh: ConvShape
    dt: object
    out_dt: object
    p: int                  # elements per pixel in UB (channels, padded)
    flat: bool
    slots: dict[str, Slots]
    x_sym: int
    x_offset: int
    x_strides: tuple[int, ...]
    w_sym: int
    w_offset: int
    w_strides: tuple[int, ...]
    y_sym: int
    ub: Mem                 # the vector role's memory (its code: it may play others)

    @property
    def isz(self) -> int:
        return self.dt.itemsize  # type: ignore[attr-defined]

    def load(self, sb: StreamBuilder, t: DwTile, i: int) -> None:
        """GM -> UB: the tile's input rows (one DMA when rows of pixels are contiguous)
        and its channels' weights (``[R*S, K]``, one row per tap)."""
        sh, ub = self.sh, self.ub
        lo, hi = t.input_span(sh)
        sn, s_h, s_w, sc = self.x_strides
        x_addr = self.slots["x"].addr(i)
        base = self.x_offset + t.img * sn + t.c * sc
        if lo <= hi:
            if s_h == sh.w * s_w:
                spans = [(lo, hi - lo + 1)]
            else:
                spans = [(ih, 1) for ih in range(lo, hi + 1)]
            for ih, n_rows in spans:
                dst = Operand(ub, x_addr + (ih - lo) * sh.w * self.p * self.isz,
                              n_rows * sh.w, t.channels, self.p)
                src = Operand(Mem.GM, base + ih * s_h, n_rows * sh.w, t.channels, s_w, sc,
                              gm=self.x_sym)
                sb.emit(Op.COPY, dst, src, dtype=self.dt)
        w_rs, w_cs = self.w_strides
        taps = sh.r * sh.s
        dst = Operand(ub, self.slots["w"].addr(i), taps, t.channels, self.p)
        if w_rs == 1 and w_cs != 1:  # KCRS as stored: a channel's taps are one row
            raw = Operand(ub, self.slots["w_raw"].addr(i), t.channels, taps, taps)
            sb.emit(Op.COPY, raw, Operand(Mem.GM, self.w_offset + t.c * w_cs, t.channels, taps,
                                          w_cs, w_rs, gm=self.w_sym), dtype=self.dt)
            sb.emit(Op.COPY, dst, raw, dtype=self.dt, flags=F_TRANSPOSE)  # to taps x channels
            return
        src = Operand(Mem.GM, self.w_offset + t.c * w_cs, taps, t.channels, w_rs, w_cs,
                      gm=self.w_sym)
        sb.emit(Op.COPY, dst, src, dtype=self.dt)

    def compute(self, sb: StreamBuilder, t: DwTile, i: int) -> None:
        """The tile's taps into the fp32 accumulator, the cast, the store."""
        sh, p, isz, ub = self.sh, self.p, self.isz, self.ub
        lo, _ = t.input_span(sh)
        x_addr, w_addr = self.slots["x"].addr(i), self.slots["w"].addr(i)
        acc, prod = self.slots["acc"].addr(0), self.slots["prod"].addr(0)
        y_addr = self.slots["y"].addr(i)
        pixels = t.rows * sh.ow
        sb.emit(Op.VDUP, Operand(ub, acc, 1, pixels * p, pixels * p), dtype=F32,
                imm=0.0)
        (st_h, st_w), (pad_h, pad_w), (dil_h, dil_w) = sh.stride, sh.padding, sh.dilation
        for r in range(sh.r):
            oa, ob = inside(sh.h, sh.oh, st_h, pad_h, dil_h, r)
            oa, ob = max(oa, t.oh), min(ob, t.oh + t.rows - 1)
            for s in range(sh.s):
                a, b = inside(sh.w, sh.ow, st_w, pad_w, dil_w, s)
                if oa > ob or a > b:
                    continue
                tap = r * sh.s + s
                col = a * st_w - pad_w + s * dil_w          # input column of pixel a

                if self.flat:
                    w_rows = self.slots["w_rows"].addr(0) + tap * sh.ow * p * isz
                    sb.emit(Op.VCOPY, Operand(ub, w_rows, sh.ow, p, p),
                            Operand(ub, w_addr + tap * p * isz, sh.ow, p, 0),
                            dtype=self.dt)
                    # (first output row, rows, columns, input row stride, weights,
                    # output row stride): the rows' pixels x channels as one run
                    runs = [(oa, ob - oa + 1, (b - a + 1) * p, st_h * sh.w * p,
                             w_rows + a * p * isz, sh.ow * p)]
                else:  # per output row: its pixels (rows) x channels
                    runs = [(oh, b - a + 1, t.channels, st_w * p, w_addr + tap * p * isz, p)
                            for oh in range(oa, ob + 1)]
                for oh, rows, cols, x_rs, w_at, o_rs in runs:
                    ih = oh * st_h - pad_h + r * dil_h
                    x_at = x_addr + ((ih - lo) * sh.w + col) * p * isz
                    o_at = ((oh - t.oh) * sh.ow + a) * p * F32.itemsize
                    xv = Operand(ub, x_at, rows, cols, x_rs)
                    wv = Operand(ub, w_at, rows, cols, 0)   # the tap's, broadcast
                    pv = Operand(ub, prod + o_at, rows, cols, o_rs)
                    av = Operand(ub, acc + o_at, rows, cols, o_rs)
                    sb.emit(Op.VMUL, pv, xv, wv, dtype=F32, sdtype=self.dt)
                    sb.emit(Op.VADD, av, av, pv, dtype=F32)
        sb.emit(Op.VCAST, Operand(ub, y_addr, 1, pixels * p, pixels * p),
                Operand(ub, acc, 1, pixels * p, pixels * p), dtype=self.out_dt,
                sdtype=F32)
        k = sh.k_total
        out = Operand(Mem.GM, ((t.img * sh.oh + t.oh) * sh.ow) * k + t.c, pixels, t.channels,
                      k, 1, gm=self.y_sym)
        sb.emit(Op.COPY, out, Operand(ub, y_addr, pixels, t.channels, p),
                dtype=self.out_dt)

