"""Conv2d workloads, lowered as an implicit GEMM with im2col in L1: the GEMM is
``[M = N*OH*OW output pixels, R*S*C] x [R*S*C, K]``; the A tile (``m1`` pixels x ``k1``
of the ``(r, s, c)`` reduction) is assembled in L1 by DMAs straight from the NHWC input,
one per output-row run of pixels and tap (padding taps read a zero constant).

Knobs: the matmul ones (``m1`` x ``n1`` output block in L0C, ``k1`` per L1 load,
``k0`` per MMAD, buffer depths, ``cores``), plus:

* ``row_block``: output rows per block. With ``row_block = r > 0`` a block is ``r``
  whole output rows (``r * OW`` pixels; ``m1`` is then that rounded up to the fractal),
  so every im2col DMA moves a whole row of pixels and blocks never split a row. With
  ``row_block = 0`` a block is any ``m1`` consecutive pixels (rows may split: more,
  shorter DMAs, but finer blocks).
* ``block_order``: ``"mn"`` walks output channels fastest (cores running together share
  the same input pixels), ``"nm"`` walks pixels fastest (they share a weight panel).
* ``im2col``: ``"tap"`` copies each tap ``(r, s)`` on its own (with stride_w 1 and whole
  channel runs, a row of pixels is one contiguous burst); ``"filter_row"`` copies the
  taps ``(r, s .. s')`` of a filter row at once (one longer run per pixel, which pays
  when stride_w > 1 makes per-tap rows separate short bursts; rows then overlap, so
  with stride_w 1 it is usually slower). It needs dilation_w 1 and ``(w, c)``
  contiguous. Reading NCHW (``conv2d_nchw``, the GEMM transposed: ``m1`` pixels are
  then the MMAD's columns, ``n1`` channels its rows) its choices are ``"tap"`` (from GM)
  and ``"staged"`` (the chunk's input rows through UB); a grouped NHWC conv may stage
  too (the block's input rows, every channel, in one run; the group's taps from UB).

A grouped conv is one GEMM per group (blocks over groups too). A depthwise conv's space
adds ``engine`` and the vector unit's knobs (``conv_depthwise``).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

from pypto.errors import UnsupportedError
from pypto.ir.dtypes import BY_NAME
from pypto.schedule_space import conv_depthwise, cube_cost, fusion
from pypto.schedule_space.chain import Chain, analyze
from pypto.schedule_space.common import (
    MAX_DEPTH,
    at_most,
    core_choice,
    core_choices,
    round_up,
    tile_sizes,
)
from pypto.schedule_space.conv_shape import ConvShape
from pypto.schedule_space.cube import (
    CubeWork,
    k_multiple,
    refuse_huge,
    size_constraint,
    valid_or_refuse,
)
from pypto.schedule_space.cube import memory_uses as memory_uses_of
from pypto.schedule_space.memory import RoleUse, memory_constraints, slot
from pypto.schedule_space.memory import footprints as role_footprints
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.space import Axis, Constraint, Space

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.targets import Target

BLOCK_ORDERS = ("mn", "nm")
IM2COL = ("tap", "filter_row")
MAX_M1 = 512  # pixels per block, as matmul's m1


CONV_OPS = ("conv2d_nhwc", "conv2d_nchw")


def conv_index(wl: Workload) -> int:
    return next(i for i, n in enumerate(wl.nodes) if n.op in CONV_OPS)


def shape_of(wl: Workload) -> ConvShape:
    node = wl.nodes[conv_index(wl)]
    x, w = wl.nodes[node.args[0]], wl.nodes[node.args[1]]
    r, s = node.attr("kernel")
    if node.op == "conv2d_nchw":
        n, c, h, wd = x.shape
        _, k, oh, ow = node.shape
    else:
        n, h, wd, c = x.shape
        _, oh, ow, k = node.shape
    groups = node.attr("groups", 1)
    epilogue = any(n.op not in ("load", *CONV_OPS) for n in wl.nodes)
    return ConvShape(n, h, wd, c // groups, k // groups, r, s, oh, ow,
                     tuple(node.attr("stride")), tuple(node.attr("padding")),
                     tuple(node.attr("dilation")), w.dtype, epilogue, groups,
                     "NCHW" if node.op == "conv2d_nchw" else "NHWC")


def epilogue_chain(wl: Workload) -> Chain | None:
    """The elementwise tail on UB (None without one). The conv's operand loads stay out
    of UB unless the tail reads them too (a residual ``conv(x) + x``)."""
    if not shape_of(wl).epilogue:
        return None
    ci = conv_index(wl)
    conv = wl.nodes[ci]
    tail_args = {a for i, n in enumerate(wl.nodes) if i != ci for a in n.args}
    return analyze(wl, space=conv.shape,
                          skip=frozenset(a for a in conv.args if a not in tail_args))


def filter_row_copies_possible(wl: Workload) -> bool:
    """Whether the taps of a filter row read one contiguous run of the input: dilation_w
    1, more than one tap per row, the input's ``(w, c)`` contiguous and one group."""
    sh = shape_of(wl)
    if sh.layout == "NCHW":
        return False
    x = wl.nodes[wl.nodes[conv_index(wl)].args[0]]
    _, _, s_w, s_c = x.attr("strides")
    return sh.dilation[1] == 1 and sh.s > 1 and s_c == 1 and s_w == sh.c and sh.groups == 1


def im2col_axis(wl: Workload, target: Target) -> Axis:
    if shape_of(wl).groups > 1 and staging_possible(wl, target):
        return Axis("im2col", ("tap", "staged"), "A-tile copies per tap from GM (a group's "
                    "channels: short runs), or staged: the block's input rows, every "
                    "channel, into UB in one run, the group's taps from there to L1")
    if shape_of(wl).layout == "NCHW":
        staged = staging_possible(wl, target)
        return Axis("im2col", ("tap", "staged") if staged else ("tap",),
                    "im2col^T rows per tap straight from GM (runs of an output row's "
                    "pixels), or staged: the chunk's input rows into UB in long runs, "
                    "the taps from there to L1",
                    "" if staged else "im2col='staged' needs a UB->L1 path on the target "
                    "and an input whose (h, w) are contiguous; use 'tap'")
    return Axis("im2col", IM2COL if filter_row_copies_possible(wl) else IM2COL[:1],
                "A-tile copies per tap, or per filter row (taps s..s' at once)",
                "" if filter_row_copies_possible(wl) else
                "im2col='filter_row' needs dilation_w 1, a kernel wider than 1 and an input "
                "with (w, c) contiguous; use 'tap'")


def default_im2col(wl: Workload, target: Target) -> str:
    """Filter-row copies where stride_w > 1 makes per-tap rows short separate bursts;
    reading NCHW, staged input rows where the target can (an NCHW row of a narrow image
    is a burst far shorter than the DMA's 512 B; ``benchmarks/layouts.py``); staged
    rows too for a grouped conv whose groups have under 32 bytes of channels."""
    sh = shape_of(wl)
    # staging where a block of one output row's input rows, double-buffered, fits UB
    small = {"im2col": "staged", "row_block": 1, "m1": round_up(sh.ow, 16), "k1": 16}
    fits = staging_possible(wl, target) and \
        2 * stage_bytes(sh, small) <= target.role("vector").capacity
    if sh.layout == "NCHW":
        return "staged" if fits else "tap"
    if sh.groups > 1 and sh.c * BY_NAME[sh.dtype].itemsize < 32 and fits:
        # a group's channels are runs under 32 B: staging whole rows pays (ResNeXt-50's
        # 4- and 8-channel groups 4.8x and 1.1x faster; 16 and 32 channels slower:
        # benchmarks/grouped_conv.py)
        return "staged"
    return "filter_row" if sh.stride[1] > 1 and filter_row_copies_possible(wl) else "tap"


def staging_possible(wl: Workload, target: Target) -> bool:
    """An NCHW conv, or a grouped NHWC one, can stage its input rows in UB: the target
    has a UB -> L1 path and the input's rows (of a channel; NHWC: of every channel) are
    contiguous."""
    sh = shape_of(wl)
    x = wl.nodes[wl.nodes[conv_index(wl)].args[0]]
    path = target.has_path(target.role("vector").name, target.role("stage").name)
    if sh.layout == "NCHW":
        _, _, s_h, s_w = x.attr("strides")
        return s_w == 1 and s_h == sh.w and path
    _, s_h, s_w, s_c = x.attr("strides")
    return sh.groups > 1 and s_c == 1 and s_w == sh.c_total and s_h == sh.w * s_w and path


def stage_bytes(sh: ConvShape, k: Any) -> int:
    """UB bytes that one staged chunk of an NCHW conv may need (an upper bound): the
    chunk's channels x the input rows its block's output rows read, per image the
    block reaches."""
    if k["im2col"] != "staged":
        return 0
    pixels = block_pixels(sh, k)
    taps = sh.r * sh.s
    channels = min(sh.c, math.ceil(k["k1"] / taps) + 1)
    if sh.layout != "NCHW":  # a grouped NHWC conv stages rows of every channel
        channels = sh.c_total
    images = min(sh.n, math.ceil(pixels / (sh.oh * sh.ow)) + 1)
    out_rows = min(sh.oh, math.ceil(pixels / sh.ow) + 1)
    in_rows = min(sh.h, (out_rows - 1) * sh.stride[0] + (sh.r - 1) * sh.dilation[0] + 1)
    return channels * images * in_rows * sh.w * BY_NAME[sh.dtype].itemsize


def fix_relu_tail(wl: Workload) -> bool:
    """Whether the tail is one ReLU of the conv's result (FIX applies it on the way
    out of L0C)."""
    tail = [n for n in wl.nodes if n.op not in ("load", *CONV_OPS)]
    ci = conv_index(wl)
    return len(tail) == 1 and tail[0].op == "relu" and tail[0].args == (ci,) and \
        ci not in wl.outputs


def unfused_nchw(wl: Workload) -> dict[str, Any]:
    """``fuse_tail=False`` where reading NCHW leaves a tail no way to fuse."""
    if shape_of(wl).layout == "NCHW" and epilogue_chain(wl) is not None and \
            not fix_relu_tail(wl):
        return {"fuse_tail": False}
    return {}


def block_pixels(sh: ConvShape, s: Schedule | dict[str, Any]) -> int:
    """Output pixels per block: ``row_block`` whole rows, or ``m1`` pixels."""
    return s["row_block"] * sh.ow if s["row_block"] else s["m1"]


def num_blocks(wl: Workload, s: Schedule | dict[str, Any]) -> int:
    """Output blocks (of every group); a depthwise conv on the vector unit: its tiles."""
    sh = shape_of(wl)
    if conv_depthwise.is_vector(s):
        return conv_depthwise.num_tiles(sh, s)
    return cube_blocks(sh, s)


def cube_blocks(sh: ConvShape, s: Schedule | dict[str, Any]) -> int:
    """Output blocks of the cube's GEMMs (of every group)."""
    return sh.groups * math.ceil(sh.m / block_pixels(sh, s)) * math.ceil(sh.k / s["n1"])


def program_work(wl: Workload, s: Schedule | dict[str, Any]) -> CubeWork:
    """What the program of ``s`` repeats (``CubeWork``): per chunk one DMA of the weight
    tile and the im2col DMAs of the A tile, one per tap the chunk touches and output row
    the block spans (three for a tap whose row reaches the padding: zeros, inside,
    zeros); the drain
    is one DMA, or with an epilogue on UB a DMA into it, the tail's ops and the store."""
    sh = shape_of(wl)
    pixels = block_pixels(sh, s)
    rows = min(pixels, math.ceil(pixels / sh.ow) + (0 if s["row_block"] else 1))
    taps = min(sh.r * sh.s, math.ceil(s["k1"] / sh.c) + 1)
    if sh.layout == "NCHW":  # a DMA per tap (all the chunk's channels) and output row
        taps = min(sh.r * sh.s, s["k1"])
    pieces = 1 + 2 * min(sh.s, 2 * sh.padding[1]) / sh.s    # taps that reach the padding
    tail = sum(n.op not in ("load", *CONV_OPS) for n in wl.nodes)
    return CubeWork(blocks=cube_blocks(sh, s), chunks=math.ceil(sh.red / s["k1"]),
                    l1_copies=1 + math.ceil(taps * rows * pieces),
                    steps=math.ceil(s["k1"] / s["k0"]), m0_parts=1, n0_parts=1,
                    drain=2 + tail if tail else 1)


def complete(wl: Workload, s: Schedule) -> Schedule:
    """``s`` with ``block_order`` (neutral: ``"mn"``), ``im2col`` (``"tap"``) and a
    depthwise conv's engine (``"cube"``) filled in when missing."""
    neutral = {"block_order": "mn", "im2col": "tap", **fusion.neutral(wl),
               **conv_depthwise.neutral(shape_of(wl))}
    missing = {k: v for k, v in neutral.items() if k not in s}
    return s.replace(**missing) if missing else s


def memory_uses(wl: Workload, target: Target) -> list[RoleUse]:
    """The buffers of every memory role (``cube.memory_uses``: whole-block MMADs, the
    epilogue in UB). Reading NCHW, the GEMM is transposed (channels x pixels: the
    ``n1`` channels are L0A's rows, the ``m1`` pixels L0B's columns) and nothing goes
    through UB (a ReLU tail is applied by FIX, others run as a pass of their own)."""
    sh = shape_of(wl)
    if sh.layout != "NCHW":
        uses = memory_uses_of(target, sh.dtype, epilogue_chain(wl))
        if staging_possible(wl, target):
            uses.append(_stage_use(sh, target))
        return uses

    def swapped(k: Any) -> dict[str, Any]:
        return {**k, "m1": k["n1"], "n1": k["m1"]}
    uses = [RoleUse(u.role, u.axes, lambda k, u=u: u.nbytes(swapped(k)),
                    lambda k, u=u: u.what(swapped(k)))
            for u in memory_uses_of(target, sh.dtype, None)]
    if staging_possible(wl, target):
        uses.append(_stage_use(sh, target))
    return uses


def _stage_use(sh: ConvShape, target: Target) -> RoleUse:
    return RoleUse("vector", ("im2col", "row_block", "m1", "k1", "l1_depth"),
                   lambda k: k["l1_depth"] * slot(target, "vector", stage_bytes(sh, k)),
                   lambda k: f"the staged input rows of k1={k['k1']} x "
                             f"l1_depth={k['l1_depth']}")


def footprints(wl: Workload, s: Any, target: Target) -> dict[str, int]:
    """Bytes placed per memory role under ``s`` (slots rounded to alignment)."""
    return role_footprints(memory_uses(wl, target), s)


def _row_block_check(sh: ConvShape, row_block: int, m1: int, fm: int) -> list[str]:
    if row_block and m1 != round_up(row_block * sh.ow, fm):
        return [f"m1={m1} must be row_block={row_block} x OW={sh.ow} pixels rounded up to "
                f"the fractal ({round_up(row_block * sh.ow, fm)}) when row_block > 0"]
    return []


def row_blocks(sh: ConvShape, fm: int) -> tuple[int, ...]:
    """``row_block`` choices: 0 (pixel blocks), small counts, the divisors of OH (blocks
    aligned to images) and all rows, while a block fits ``MAX_M1`` pixels."""
    rows = sh.n * sh.oh
    grid = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 48, 64, 96, 128, 256,
            512, sh.oh, rows} | {d for d in range(1, sh.oh + 1) if sh.oh % d == 0}
    return (0,) + tuple(sorted(r for r in grid
                               if r <= rows and round_up(r * sh.ow, fm) <= MAX_M1))


def _block_cost(sh: ConvShape, pixels: int, m1: int, n1: int, cube_cores: int) -> int:
    """Waves of blocks over the cores x (block rows + 64): a block costs about its
    rows, plus fixed costs worth 64 rows (fitted to simulated ResNet-50 layers)."""
    blocks = sh.groups * math.ceil(sh.m / pixels) * math.ceil(sh.k / n1)
    cores = core_choice(min(cube_cores, blocks), cube_cores)
    return math.ceil(blocks / cores) * (m1 + 64)


def default(wl: Workload, target: Target, within: Space | None = None) -> Schedule:
    """The schedule an untuned compile gets: ``cube_default``; for a depthwise conv, the
    vector engine's default tile (``conv_depthwise.default_knobs``, its tail then in a
    pass of its own) when it fits, since one channel per group leaves 15/16 of the
    cube's fractal idle (``benchmarks/grouped_conv.py`` measures both defaults on
    MobileNet-style layers)."""
    space = within or build_space(wl, target)
    try:
        cube = cube_default(wl, target, space)
    except UnsupportedError:
        if default_im2col(wl, target) != "staged":
            raise
        cube = cube_default(wl, target, space, im2col="tap")  # staging did not fit
    sh = shape_of(wl)
    knobs = conv_depthwise.default_knobs(sh, target) if \
        conv_depthwise.vector_possible(sh) else None
    if knobs is not None:
        tail = {"fuse_tail": False, "ub_depth": 2} if "fuse_tail" in space.axes else {}
        s = cube.replace(engine="vector", **knobs, **tail)
        if not space.validate(s):
            return s
    return cube


def cube_default(wl: Workload, target: Target, within: Space | None = None,
                 im2col: str | None = None) -> Schedule:
    """The cube's schedule an untuned compile gets, chosen as matmul's (``matmul.default``)
    over the implicit GEMM ``[N*OH*OW, R*S*C] x [R*S*C, K]``: the best of a small set
    of candidates by ``cube_cost.estimate`` from the target's figures, the first in
    estimated order that the space's constraints accept.

    Candidates: blocks of whole output rows (``row_block`` rows, ``m1`` their pixels
    rounded up to the fractal) or of ``m1`` pixels (rows may split), up to 256 pixels,
    times ``n1`` output channels up to 256 (so the waves over the cube cores and the
    tail blocks count); ``k0`` of 1, 2, 4 or 8 fractals, ``k1`` of 1 to 8 ``k0``; L1
    depth 2 to 4, L0 and accumulator depth 2 or 1, UB depth 2 or 1 with an epilogue
    (the memories decide). The im2col A tile is costed by its contiguous runs: a tap's
    channels per pixel, a whole row of pixels when stride_w is 1 and the chunk holds
    whole taps; filter-row copies when stride_w > 1 (per-tap rows would be short,
    separate bursts). Ties go as in matmul (core slack, deeper buffers, smaller tile).
    If no candidate fits, ``shrunk_default``. ``within``: the space of ``wl`` on
    ``target``, when built already."""
    sh = shape_of(wl)
    space = within or build_space(wl, target)
    largest = {a: space.axes[a].choices[-1] for a in ("row_block", "m1", "n1", "k0", "k1")}
    refuse_huge(wl.describe(), [largest, {**largest, "row_block": 0}],
                lambda k: program_work(wl, k))
    r = cube_cost.rates(target, sh.dtype)
    fm, fk, fn = target.fractal(sh.dtype)
    chain = epilogue_chain(wl)
    tail_ops = [n.op for n in wl.nodes if n.op not in ("load", *CONV_OPS)]
    problem = cube_cost.CubeProblem(
        batch=sh.groups, m=sh.m, n=sh.k, k=sh.red, dtype=sh.dtype, out_dtype=sh.dtype,
        a_bytes=sh.n * sh.h * sh.w * sh.c_total * r.isz,
        b_bytes=sh.red * sh.k_total * r.isz,
        epilogue_cycles=0.0 if chain is None else
        cube_cost.epilogue_cycles(target, tail_ops, sh.dtype))
    im2col = im2col or default_im2col(wl, target)
    base = Schedule(row_block=0, m1=0, n1=0, k1=0, k0=0, l1_depth=2, l0_depth=2,
                    l0c_depth=2, ub_depth=2, cores=1, block_order="mn", im2col=im2col,
                    **{**fusion.neutral(wl), **unfused_nchw(wl)}, **conv_depthwise.neutral(sh))
    axes = space.axes
    ks = cube_cost.k_tiles(fk, axes["k0"].choices, axes["k1"].choices)
    ub_depths = (2, 1) if chain is not None else (2,)
    blocks_m = [(rb, round_up(rb * sh.ow, fm), rb * sh.ow) for rb in axes["row_block"].choices
                if rb and round_up(rb * sh.ow, fm) <= cube_cost.MAX_BLOCK]
    blocks_m += [(0, m1, m1) for m1 in axes["m1"].choices if m1 <= cube_cost.MAX_BLOCK]

    def tiles(rb: int, m1: int, pixels: int, n1: int, k0: int, k1: int, cores: int,
              depths: tuple[int, int, int]) -> cube_cost.Tiles:
        a_rows, a_run = _a_runs(sh, im2col, rb, pixels, k1)
        b_rows, b_run = (1, k1 * n1) if n1 >= sh.k_total else (k1, n1)
        return cube_cost.Tiles(m1, n1, k0, k1, *depths, 1, cores, a_rows, a_run, b_rows,
                               b_run, m_block=pixels)

    def finish(tile: tuple[int, ...]) -> tuple[cube_cost.Score, Schedule] | None:
        rb, m1, pixels, n1, k0, k1, cores = tile
        for score, depths in cube_cost.by_estimate(
                (cube_cost.score(problem, r, tiles(*tile, d)), d) for d in cube_cost.DEPTHS):
            for ub in ub_depths:
                l1, l0, l0c = depths
                s = base.replace(row_block=rb, m1=m1, n1=n1, k0=k0, k1=k1, l1_depth=l1,
                                 l0_depth=l0, l0c_depth=l0c, cores=cores, ub_depth=ub)
                if not space.validate(s):
                    return score, s
        return None

    candidates = []
    for rb, m1, pixels in blocks_m:
        for n1 in (c for c in axes["n1"].choices if c <= cube_cost.MAX_BLOCK):
            blocks = sh.groups * math.ceil(sh.m / pixels) * math.ceil(sh.k / n1)
            cores = core_choice(min(target.cube_cores, blocks), target.cube_cores)
            for k0, k1 in ks:
                tile = (rb, m1, pixels, n1, k0, k1, cores)
                candidates.append((cube_cost.score(
                    problem, r, tiles(*tile, cube_cost.DEPTHS[0])), tile))
    best = cube_cost.best_first(candidates, finish)
    if best is not None:
        return best
    return valid_or_refuse(space, shrunk_default(wl, target, space, im2col))


@functools.cache
def pieces(total: int, k1: int, unit: int) -> float:
    """How many of the ``unit``-long pieces of ``0 .. total`` (taps of ``C`` channels,
    or filter rows) a ``k1`` chunk of it touches: all the chunks' pieces per chunk,
    a short last chunk counted as its share (as ``cube_cost.score`` counts chunks).
    ``k1 / unit`` when chunks start on pieces; one more where a chunk starts inside."""
    touched = sum((min(at + k1, total) - 1) // unit - at // unit + 1
                  for at in range(0, total, k1))
    return touched / max(1.0, total / k1)


def _a_runs(sh: ConvShape, im2col: str, row_block: int, pixels: int,
            k1: int) -> tuple[float, int]:
    """``(runs, elements per run)`` of one im2col A tile load: a run per pixel and tap
    (per filter row with filter-row copies) of the channels the chunk holds; with
    stride_w 1 and whole taps, the pixels of an output row are one run."""
    if sh.layout == "NCHW" and im2col == "staged":  # the chunk's channels' input rows
        out_rows = row_block or math.ceil(pixels / sh.ow) + 1
        in_rows = min(sh.h, (out_rows - 1) * sh.stride[0] + (sh.r - 1) * sh.dilation[0] + 1)
        channels = min(sh.c, math.ceil(k1 / (sh.r * sh.s)) + 1)
        if in_rows == sh.h:  # whole planes: the channels are one run
            return 1, channels * in_rows * sh.w
        return channels, in_rows * sh.w
    if sh.layout == "NCHW":  # a run per reduction row and output row of the block
        rows = (row_block or math.ceil(pixels / sh.ow) + 1) * min(k1, sh.red)
        if sh.stride[1] == 1:
            return rows, min(pixels, sh.ow)
        return rows * min(pixels, sh.ow), 1     # stride_w > 1: element by element
    if im2col == "filter_row":
        return pixels * pieces(sh.red, k1, sh.s * sh.c), min(k1, sh.s * sh.c)
    taps = pieces(sh.red, k1, sh.c)
    if sh.stride[1] == 1 and k1 >= sh.c and sh.groups == 1:
        rows = row_block or math.ceil(pixels / sh.ow) + 1
        return rows * taps, min(pixels, sh.ow) * sh.c
    return pixels * taps, min(k1, sh.c)


def shrunk_default(wl: Workload, target: Target, space: Space,
                   im2col: str | None = None) -> Schedule:
    """The fallback when no candidate of ``default`` fits: whole output rows per block
    (the rows and n1, up to 256 pixels and channels, that minimize waves x (rows + 64)
    over the cube cores), k0 = 4 fractals, k1 = 4 x k0, double buffering; then shrink
    (accumulator depth, k1, n1, the block, k0, UB depth) until the space's constraints
    hold; sizes the halving leaves between two of the space's choices go down to the
    smaller."""
    sh = shape_of(wl)
    fm, fk, fn = target.fractal(sh.dtype)
    cores = target.cube_cores
    candidates = [(_block_cost(sh, r * sh.ow, round_up(r * sh.ow, fm), n, cores), -r, n)
                  for r in row_blocks(sh, fm)[1:] if round_up(r * sh.ow, fm) <= 256
                  for n in tile_sizes(sh.k, fn, 256)]
    if candidates:
        _, neg_rows, n1 = min(candidates)
        row_block, m1 = -neg_rows, round_up(-neg_rows * sh.ow, fm)
    else:  # rows wider than 256 pixels: blocks of 128 pixels
        row_block, m1, n1 = 0, min(128, round_up(sh.m, fm)), min(256, round_up(sh.k, fn))
    k0 = min(4 * fk, round_up(sh.red, fk))
    k1 = min(4 * k0, round_up(sh.red, k0))
    im2col = im2col or default_im2col(wl, target)
    s = Schedule(row_block=row_block, m1=m1, n1=n1, k1=k1, k0=k0, l1_depth=2, l0_depth=2,
                 l0c_depth=2, ub_depth=2, cores=1, block_order="mn", im2col=im2col,
                 **{**fusion.neutral(wl), **unfused_nchw(wl)}, **conv_depthwise.neutral(sh))
    acc = target.role("acc").name
    for _ in range(64):
        problems = space.check(s)
        if not problems:
            break
        if s["l0c_depth"] > 1 and any(acc in p for p in problems):
            s = s.replace(l0c_depth=1)
        elif s["k1"] > s["k0"]:
            s = s.replace(k1=s["k1"] // 2 if (s["k1"] // 2) % s["k0"] == 0 else s["k0"])
        elif s["n1"] > fn and s["n1"] >= s["m1"]:
            s = s.replace(n1=max(fn, round_up(s["n1"] // 2, fn)))
        elif s["row_block"] > 1:
            rb = s["row_block"] // 2
            s = s.replace(row_block=rb, m1=round_up(rb * sh.ow, fm))
        elif s["m1"] > fm:
            s = s.replace(row_block=0, m1=max(fm, round_up(s["m1"] // 2, fm)))
        elif s["k0"] > fk:
            k0 = max(fk, round_up(s["k0"] // 2, fk))
            s = s.replace(k0=k0, k1=k0)
        elif s["ub_depth"] > 1 and 1 in space.axes["ub_depth"].choices:
            s = s.replace(ub_depth=1)
        else:
            break
    s = _on_grid(space, sh, fm, s)
    blocks = num_blocks(wl, s)
    return s.replace(cores=core_choice(min(target.cube_cores, blocks), target.cube_cores))


def _on_grid(space: Space, sh: ConvShape, fm: int, s: Schedule) -> Schedule:
    """``s`` with a row count or block size between two of the space's choices moved
    down to the smaller (``m1`` follows ``row_block``)."""
    if s["row_block"]:
        rb = at_most(space.axes["row_block"].choices, s["row_block"])
        s = s.replace(row_block=rb, m1=round_up(rb * sh.ow, fm) if rb else s["m1"])
    return s.replace(m1=at_most(space.axes["m1"].choices, s["m1"]),
                     n1=at_most(space.axes["n1"].choices, s["n1"]))


def build_space(wl: Workload, target: Target) -> Space:
    """The conv2d schedule space (axes in dependency order; constraints per memory)."""
    sh = shape_of(wl)
    fm, fk, fn = target.fractal(sh.dtype)
    rbs = row_blocks(sh, fm)
    m1s = tuple(sorted(set(tile_sizes(sh.m, fm, MAX_M1))
                       | {round_up(r * sh.ow, fm) for r in rbs if r}))
    k0s = tile_sizes(sh.red, fk, 16 * fk)
    k1s = tuple(sorted(set(tile_sizes(sh.red, fk, 128 * fk)) |
                       {round_up(sh.red, k0) for k0 in k0s if round_up(sh.red, k0) <= 128 * fk}))
    depths = tuple(range(1, MAX_DEPTH + 1))
    chain = epilogue_chain(wl)
    axes = [
        *fusion.axes(wl, target),
        Axis("row_block", rbs, "output rows per block (0: m1 pixels, rows may split)"),
        Axis("m1", m1s, "output pixels per block in L0C (row_block x OW rounded up)"),
        Axis("n1", tile_sizes(sh.k, fn, 512), "output channels per block"),
        Axis("l0c_depth", depths, "accumulator buffers (2+: drain overlaps compute)"),
        Axis("k0", k0s, "reduction (r, s, c) per MMAD (one L0A/L0B tile)"),
        Axis("l0_depth", depths, "L0A/L0B buffers"),
        Axis("k1", k1s, "reduction per L1 load: im2col A tile and weight B tile"),
        Axis("l1_depth", depths, "L1 buffers of the A and B tiles"),
        Axis("ub_depth", depths if chain is not None else (2,), "UB buffers of the epilogue",
             "" if chain is not None else "there is no epilogue in UB"),
        Axis("cores", core_choices(target.cube_cores), "cube cores sharing the output blocks"),
        Axis("block_order", BLOCK_ORDERS, "block walk: channels fastest (mn) or pixels "
                                          "fastest (nm)"),
        im2col_axis(wl, target),
    ]

    def rows(k: dict[str, Any]) -> list[str]:
        return _row_block_check(sh, k["row_block"], k["m1"], fm)

    def core_count(k: dict[str, Any]) -> list[str]:
        blocks = cube_blocks(sh, k)
        return [] if k["cores"] <= blocks else [
            f"cores={k['cores']} exceeds the {blocks} output blocks of m1={k['m1']} "
            f"(row_block={k['row_block']}) x n1={k['n1']}"]

    if conv_depthwise.vector_possible(sh):
        axes[len(fusion.axes(wl, target)):0] = conv_depthwise.axes(sh, target)
    constraints = [Constraint(("row_block", "m1"), rows),
                   *memory_constraints(target, memory_uses(wl, target), [a.name for a in axes]),
                   k_multiple(),
                   Constraint(("row_block", "m1", "n1", "cores"), core_count),
                   size_constraint(("row_block", "m1", "n1", "k0", "k1"),
                                   lambda k: program_work(wl, k))]
    if "fuse_tail" in {a.name for a in axes}:
        constraints.append(fusion.unfused_tail_constraint())
    if conv_depthwise.vector_possible(sh):
        constraints += conv_depthwise.constraints(sh, target, chain is not None)
    if sh.layout == "NCHW" and chain is not None and not fix_relu_tail(wl):
        constraints.append(Constraint(("fuse_tail",), lambda k: [] if k["fuse_tail"] is False
                                      else ["reading NCHW, the conv's blocks are channels x "
                                            "pixels: only a ReLU tail fuses (applied by FIX); "
                                            "use fuse_tail=False"]))
    built = Space(wl, target, axes, constraints, lambda: default(wl, target, built))
    return built
