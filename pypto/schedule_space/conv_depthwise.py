"""The vector-unit side of a depthwise conv2d's space (one input channel per group,
one output channel per group, floating point): ``engine="vector"`` computes it on the
vector unit instead of as per-group GEMMs on the cube (where one channel fills one
column of a 16-wide fractal: 1/16 of its MACs do work).

A vector tile is ``dw_rows`` output rows of one image x ``dw_channels`` channels. Its
input rows (with the halo the taps need) are one DMA into UB, each channel's pixel
padded to the UB alignment so every tap's view starts aligned; the R x S weights of the
channels are a second. Per tap, one multiply (fp16 operands, fp32 result) and one add
into an fp32 accumulator: per output row, over its pixels x channels, or, with
``dw_flat`` (stride_w 1), over all the tile's rows at once, the pixels x channels of a
row as one run (the tap's weights then repeat along it: an expanded copy per tap).
Knobs: ``dw_rows``, ``dw_channels``, ``dw_flat``, ``dw_depth`` (UB buffers of the input
and output tiles), ``dw_cores`` (vector cores). Under ``engine="cube"`` they are inert,
as the cube knobs are under ``engine="vector"``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pypto.ir.dtypes import BY_NAME
from pypto.schedule_space.common import core_choice, core_choices, round_up, tile_sizes
from pypto.schedule_space.space import Axis, Constraint

if TYPE_CHECKING:
    from pypto.schedule_space.conv_shape import ConvShape
    from pypto.targets import Target

ENGINES = ("cube", "vector")
ROW_GRID = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 56, 64, 112, 128)
ACC_BYTES = 4  # the fp32 accumulator and products
KNOBS = ("dw_rows", "dw_channels", "dw_flat", "dw_depth", "dw_cores")


def vector_possible(sh: ConvShape) -> bool:
    """A depthwise conv (one input and one output channel per group) of a float dtype."""
    return sh.groups > 1 and sh.c == 1 and sh.k == 1 and sh.dtype in ("float16", "float32")


def pixel_stride(sh: ConvShape, channels: int, target: Target) -> int:
    """Elements per pixel of a UB tile of ``channels``: rounded up so that each pixel
    starts on the UB alignment (a tap's view may start at any pixel)."""
    isz = BY_NAME[sh.dtype].itemsize
    return round_up(channels, max(1, target.role("vector").alignment // isz))


def input_rows(sh: ConvShape, rows: int) -> int:
    """Input rows ``rows`` output rows read (the taps' halo included)."""
    return min(sh.h, (rows - 1) * sh.stride[0] + (sh.r - 1) * sh.dilation[0] + 1)


def buffers(sh: ConvShape, k: Any, target: Target) -> dict[str, tuple[int, int]]:
    """UB buffers of a vector tile: name -> (bytes, slots)."""
    isz = BY_NAME[sh.dtype].itemsize
    p = pixel_stride(sh, k["dw_channels"], target)
    rows, depth = k["dw_rows"], k["dw_depth"]
    out = {"x": (input_rows(sh, rows) * sh.w * p * isz, depth),
           "w": (sh.r * sh.s * p * isz, depth),
           "w_raw": (k["dw_channels"] * sh.r * sh.s * isz, depth),  # KCRS rows, as stored
           "acc": (rows * sh.ow * p * ACC_BYTES, 1),
           "prod": (rows * sh.ow * p * ACC_BYTES, 1),
           "y": (rows * sh.ow * p * isz, depth)}
    if k["dw_flat"]:
        out["w_rows"] = (sh.r * sh.s * sh.ow * p * isz, 1)
    return out


def ub_bytes(sh: ConvShape, k: Any, target: Target) -> int:
    align = target.role("vector").alignment
    return sum(round_up(b, align) * n for b, n in buffers(sh, k, target).values())


def num_tiles(sh: ConvShape, k: Any) -> int:
    return sh.n * math.ceil(sh.oh / k["dw_rows"]) * math.ceil(sh.c_total / k["dw_channels"])


def axes(sh: ConvShape, target: Target) -> list[Axis]:
    align = max(1, target.role("vector").alignment // BY_NAME[sh.dtype].itemsize)
    channels = tuple(sorted({min(c, sh.c_total) for c in tile_sizes(sh.c_total, align, 1024)}))
    return [
        Axis("engine", ENGINES, "cube: per-group GEMMs; vector: taps as multiply-adds on UB"),
        Axis("dw_rows", tuple(r for r in ROW_GRID if r < sh.oh) + (sh.oh,),
             "engine=vector: output rows per tile"),
        Axis("dw_channels", channels, "engine=vector: channels per tile"),
        Axis("dw_flat", (False, True) if sh.stride[1] == 1 else (False,),
             "engine=vector: one multiply-add per tap over all the tile's rows (False: "
             "per output row)", "" if sh.stride[1] == 1 else
             "dw_flat needs stride_w 1 (a row's taps are then one contiguous run)"),
        Axis("dw_depth", (1, 2, 3), "engine=vector: UB buffers of the input and output tiles"),
        Axis("dw_cores", core_choices(target.vector_cores), "engine=vector: vector cores"),
    ]


def constraints(sh: ConvShape, target: Target, has_tail: bool) -> list[Constraint]:
    ub = target.role("vector")

    def fits(k: Any) -> list[str]:
        if k["engine"] != "vector":
            return []
        need = ub_bytes(sh, k, target)
        return [] if need <= ub.capacity else [
            f"{ub.name}: the depthwise tile of dw_rows={k['dw_rows']} x dw_channels="
            f"{k['dw_channels']} (dw_flat={k['dw_flat']}, dw_depth={k['dw_depth']}) needs "
            f"{need} bytes, it holds {ub.capacity}: use fewer rows or channels"]

    def cores(k: Any) -> list[str]:
        if k["engine"] != "vector":
            return []
        tiles = num_tiles(sh, k)
        return [] if k["dw_cores"] <= tiles else [
            f"dw_cores={k['dw_cores']} exceeds the {tiles} tiles of dw_rows={k['dw_rows']} "
            f"x dw_channels={k['dw_channels']}"]

    out = [Constraint(("engine", *KNOBS[:4]), fits),
           Constraint(("engine", "dw_rows", "dw_channels", "dw_cores"), cores)]
    if has_tail:
        out.append(Constraint(("fuse_tail", "engine"), lambda k: [] if (
            k["engine"] == "cube" or k["fuse_tail"] is False) else [
            "engine='vector' runs the elementwise tail as a pass of its own: use "
            "fuse_tail=False"]))
    return out


def neutral(sh: ConvShape) -> dict[str, Any]:
    """The knobs of a record written before the vector engine existed (the cube)."""
    if not vector_possible(sh):
        return {}
    return {"engine": "cube", "dw_rows": 1, "dw_channels": sh.c_total, "dw_flat": False,
            "dw_depth": 1, "dw_cores": 1}


def default_knobs(sh: ConvShape, target: Target) -> dict[str, Any] | None:
    """The vector engine's default: the most output rows (up to a quarter of an
    image's, so tiles spread over cores) whose double-buffered tile of all channels
    (or fewer, halving) fits UB, flat when stride_w is 1; None when nothing fits."""
    choices = {a.name: a.choices for a in axes(sh, target)}
    for flat in ((True, False) if sh.stride[1] == 1 else (False,)):
        for channels in sorted(choices["dw_channels"], reverse=True):
            for rows in sorted(choices["dw_rows"], reverse=True):
                if rows > max(1, math.ceil(sh.oh / 4)):
                    continue
                k = {"dw_rows": rows, "dw_channels": channels, "dw_flat": flat,
                     "dw_depth": 2}
                if ub_bytes(sh, k, target) <= target.role("vector").capacity:
                    tiles = num_tiles(sh, k)
                    return {**k, "dw_cores": core_choice(min(tiles, target.vector_cores),
                                                         target.vector_cores)}
    return None


def is_vector(s: Any) -> bool:
    return s.get("engine", "cube") == "vector"
