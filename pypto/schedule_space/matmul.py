"""Matmul workloads (with batched operands and fused elementwise epilogues): the space,
the default tiling heuristic, the operand layouts and the work units.

Knobs: ``m1 x n1`` is the output block held in the accumulator (L0C) and reduced over
all of K; ``k1`` is the K extent of one L1 load of A and B; ``k0`` the K extent of one
L0A/L0B tile; ``m0_parts x n0_parts`` cut the block into sub-blocks
``m0 = m1 / m0_parts`` by ``n0 = n1 / n0_parts``, one MMAD each, walked in ``l0_order``
("mn": n fastest, so an L0A tile serves a row of sub-blocks; "nm": m fastest);
``l1_depth``, ``l0_depth``, ``l0c_depth``, ``ub_depth`` are the buffer counts per level
(2 = ping-pong); ``cores`` how many cube cores share the blocks;
``split_k`` cuts K into that many parts, so that more cores can work on few output
blocks (the parts' partial sums add atomically in GM after the output is cleared).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pypto.ir.dtypes import BY_NAME
from pypto.ir.layouts import nz_c0
from pypto.schedule_space import cube_cost, fusion
from pypto.schedule_space.chain import Chain, analyze
from pypto.schedule_space.common import (
    MAX_DEPTH,
    at_most,
    core_choice,
    core_choices,
    round_up,
    tile_sizes,
)
from pypto.schedule_space.cube import (
    LAYOUT_KNOBS,
    MAX_INSTRUCTIONS,
    CubeWork,
    k_multiple,
    refuse_huge,
    size_constraint,
    valid_or_refuse,
)
from pypto.schedule_space.cube import memory_uses as memory_uses_of
from pypto.schedule_space.memory import RoleUse, memory_constraints
from pypto.schedule_space.memory import footprints as role_footprints
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.space import Axis, Constraint, Space

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.targets import Target

SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)
ZERO_TILE_BYTES = 16384  # split-K: the zero tile in UB that clears the output


@dataclass(frozen=True)
class MatmulShape:
    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    dtype: str           # operand dtype
    transpose_a: bool
    transpose_b: bool
    epilogue: bool       # elementwise ops after the matmul (computed on UB)


def shape_of(wl: Workload) -> MatmulShape:
    mm_index = next(i for i, n in enumerate(wl.nodes) if n.op == "matmul")
    mm = wl.nodes[mm_index]
    a = wl.nodes[mm.args[0]]
    ta, tb = bool(mm.attr("transpose_a")), bool(mm.attr("transpose_b"))
    k = a.shape[-2] if ta else a.shape[-1]
    epilogue = any(n.op not in ("load", "matmul") for n in wl.nodes)
    return MatmulShape(tuple(mm.shape[:-2]), mm.shape[-2], mm.shape[-1], k, a.dtype, ta, tb,
                       epilogue)


def epilogue_chain(wl: Workload) -> Chain | None:
    mm_index = next(i for i, n in enumerate(wl.nodes) if n.op == "matmul")
    if not shape_of(wl).epilogue:
        return None
    # A and B stay out of UB unless the tail reads them too (``relu(a @ b) + a``).
    tail_args = {a for i, n in enumerate(wl.nodes) if i != mm_index for a in n.args}
    skip = frozenset(a for a in wl.nodes[mm_index].args if a not in tail_args)
    return analyze(wl, space=wl.nodes[mm_index].shape, skip=skip)


PARTS = (1, 2, 4, 8)
MAX_SUB_BLOCKS = 8  # sub-blocks per m1 x n1 block: more only adds MMAD issue cost


def sub_block(s: Any) -> tuple[int, int]:
    """``(m0, n0)``: the sub-block one MMAD computes."""
    return s["m1"] // s.get("m0_parts", 1), s["n1"] // s.get("n0_parts", 1)


def sub_block_problems(s: Any, fm: int, fn: int) -> list[str]:
    out = []
    for knob, outer, unit in (("m0_parts", "m1", fm), ("n0_parts", "n1", fn)):
        parts = s[knob]
        if s[outer] % (parts * unit):
            out.append(f"{knob}={parts} must cut {outer}={s[outer]} into whole fractals "
                       f"({outer} a multiple of {parts} x {unit})")
    if not out and s["m0_parts"] * s["n0_parts"] > MAX_SUB_BLOCKS:
        out.append(f"m0_parts={s['m0_parts']} x n0_parts={s['n0_parts']} makes more than "
                   f"{MAX_SUB_BLOCKS} sub-blocks per block")
    return out


def _operand_inputs(wl: Workload) -> tuple[int, int]:
    mm = next(n for n in wl.nodes if n.op == "matmul")
    return wl.nodes[mm.args[0]].attr("input"), wl.nodes[mm.args[1]].attr("input")


def layout_choices(wl: Workload) -> dict[str, tuple[str, ...]]:
    """How A and B may lie in GM: as the caller stored them, or, for a constant the
    kernel captured and reads whole (a weight PyPTO owns and formats once, on the host,
    as CANN does for weights), ND or NZ."""
    out = {}
    for knob, i in zip(LAYOUT_KNOBS, _operand_inputs(wl)):
        spec = wl.inputs[i]
        if spec.layout == "NZ":
            out[knob] = ("NZ",)
        elif spec.const and wl.read_whole_by_matmul(i):
            out[knob] = ("ND", "NZ")
        else:
            out[knob] = ("ND",)
    return out


def operand_layouts(wl: Workload, s: Any) -> list[str]:
    """The GM layout of every input under schedule ``s``."""
    layouts = [spec.layout for spec in wl.inputs]
    for knob, i in zip(LAYOUT_KNOBS, _operand_inputs(wl)):
        if knob in s:
            layouts[i] = s[knob]
    return layouts


def layout_note(wl: Workload, knob: str) -> str:
    """Why ``knob`` (``a_layout``/``b_layout``) has the choices it has, when limited."""
    choices = layout_choices(wl)[knob]
    if choices == ("NZ",):
        return "the caller stored it in NZ"
    if choices == ("ND",):
        return ("only a constant the kernel captures and reads whole as a matmul operand "
                "can be stored in NZ; or pass a tensor made with layout='NZ'")
    return ""


def layout_problems(wl: Workload, s: Any) -> list[str]:
    a, b = _operand_inputs(wl)
    if a == b and s["a_layout"] != s["b_layout"]:
        return ["a_layout and b_layout must agree: A and B are the same tensor"]
    return []


def nz_blocks(wl: Workload, s: Any = None) -> dict[str, tuple[int, str]]:
    """For each operand stored in NZ (under ``s``), the knob that sets the stored column
    extent of its tiles, with the column block (C0) it must be a multiple of."""
    sh = shape_of(wl)
    layouts = operand_layouts(wl, s or {})
    out: dict[str, tuple[int, str]] = {}
    for i, knob in zip(_operand_inputs(wl), ("m1" if sh.transpose_a else "k1",
                                             "k1" if sh.transpose_b else "n1")):
        spec = wl.inputs[i]
        if layouts[i] == "NZ":
            c0 = nz_c0(BY_NAME[spec.dtype].itemsize)
            out[knob] = (math.lcm(c0, out.get(knob, (1, ""))[0]), spec.dtype)
    return out


def nz_problems(wl: Workload, s: Any) -> list[str]:
    """Tiles of an operand stored in NZ must start and end on its column blocks."""
    return [f"{knob}={s[knob]} must be a multiple of {c0}: an operand stored in layout NZ "
            f"is read in column blocks of {c0} {dtype} elements"
            for knob, (c0, dtype) in nz_blocks(wl, s).items() if knob in s and s[knob] % c0]


def tile_units(wl: Workload, target: Target) -> tuple[int, int, int]:
    """The units of m1, k1 and n1: the cube's fractal, and for an operand stored in NZ
    also its column block (so tiles start and end on blocks)."""
    fm, fk, fn = target.fractal(shape_of(wl).dtype)
    blocks = nz_blocks(wl)
    return tuple(math.lcm(unit, blocks.get(knob, (1, ""))[0])  # type: ignore[return-value]
                 for unit, knob in ((fm, "m1"), (fk, "k1"), (fn, "n1")))


def k_parts(k: int, k1: int, split_k: int) -> list[tuple[int, int]]:
    """The K ranges of split-K: ``split_k`` parts of whole ``k1`` chunks, as even as
    possible, none empty (a split that would leave one empty is invalid)."""
    chunks = math.ceil(k / k1)
    out, at = [], 0
    for part in range(split_k):
        n = chunks // split_k + (1 if part < chunks % split_k else 0)
        out.append((at * k1, min(k, (at + n) * k1)))
        at += n
    return out


def zero_tile_elements(itemsize: int, target: Target) -> int:
    """Elements of split-K's zero tile (whole alignment units of the vector memory)."""
    return round_up(ZERO_TILE_BYTES, target.role("vector").alignment) // itemsize


def split_problems(wl: Workload, k1: int, split_k: int) -> list[str]:
    chunks = math.ceil(shape_of(wl).k / k1)
    if split_k > chunks:
        return [f"split_k={split_k} exceeds the {chunks} K chunks of k1={k1} "
                f"(K={shape_of(wl).k}); use split_k <= {chunks} or a smaller k1"]
    return []


FIX_OPS = frozenset({"relu"})


def fix_epilogue(wl: Workload) -> bool:
    """Can the FIX pipe apply this epilogue while draining the accumulator? Only a chain
    of ReLUs on the matmul result, with no other inputs, whose last value is the only
    output."""
    mm_i = next(i for i, n in enumerate(wl.nodes) if n.op == "matmul")
    tail = [i for i, n in enumerate(wl.nodes) if n.op not in ("load", "matmul")]
    if not tail or any(wl.nodes[i].op not in FIX_OPS for i in tail):
        return False
    chain_ok = all(wl.nodes[i].args == ((tail[k - 1] if k else mm_i),)
                   for k, i in enumerate(tail))
    return chain_ok and tuple(wl.outputs) == (tail[-1],)


def complete(wl: Workload, s: Schedule) -> Schedule:
    """``s`` with the knobs that have a neutral value filled in when missing (schedules
    written before those knobs existed stay usable)."""
    neutral = {"block_order": "mn", "swizzle": 1, "epilogue": "VEC", "split_k": 1,
               "m0_parts": 1, "n0_parts": 1, "l0_order": "mn", **fusion.neutral(wl),
               **{knob: choices[0] for knob, choices in layout_choices(wl).items()}}
    missing = {k: v for k, v in neutral.items() if k not in s}
    return s.replace(**missing) if missing else s


def memory_uses(wl: Workload, target: Target) -> list[RoleUse]:
    """The buffers of every memory role (``cube.memory_uses``, with sub-blocks, the
    epilogue knob and split-K's zero tile)."""
    return memory_uses_of(target, shape_of(wl).dtype, epilogue_chain(wl), sub_blocks=True,
                          epilogue_axis=True, zero_tile_bytes=ZERO_TILE_BYTES)


def footprints(wl: Workload, s: Any, target: Target) -> dict[str, int]:
    """Bytes placed per memory role under ``s`` (slots rounded to alignment)."""
    return role_footprints(memory_uses(wl, target), s)


def num_blocks(wl: Workload, s: Any) -> int:
    """Work units the cores share: output blocks times K parts."""
    sh = shape_of(wl)
    return (math.prod(sh.batch) * math.ceil(sh.m / s["m1"]) * math.ceil(sh.n / s["n1"])
            * s.get("split_k", 1))


def program_work(wl: Workload, s: Any) -> CubeWork:
    """What the program of ``s`` repeats (``CubeWork``): a tile in NZ is one DMA per
    column block; the drain is one DMA, or with an epilogue on UB a DMA into it, the
    tail's ops and the store."""
    sh = shape_of(wl)
    copies = 0
    for knob, cols in (("a_layout", s["m1"] if sh.transpose_a else s["k1"]),
                       ("b_layout", s["k1"] if sh.transpose_b else s["n1"])):
        copies += -(-cols // nz_c0(BY_NAME[sh.dtype].itemsize)) if s[knob] == "NZ" else 1
    tail = sum(n.op not in ("load", "matmul") for n in wl.nodes)
    return CubeWork(blocks=num_blocks(wl, s),
                    chunks=math.ceil(math.ceil(sh.k / s["k1"]) / s["split_k"]),
                    l1_copies=copies, steps=math.ceil(s["k1"] / s["k0"]),
                    m0_parts=s["m0_parts"], n0_parts=s["n0_parts"],
                    drain=2 + tail if tail else 1)


def default(wl: Workload, target: Target, within: Space | None = None) -> Schedule:
    """The schedule an untuned compile gets: the best of a small set of candidates by
    an analytic estimate of the kernel's time from the target's figures
    (``cube_cost.estimate``: per ``k1`` chunk the slowest of GM -> L1, L1 -> L0 and the
    cube, or a share of one L1 buffer's round trip through the GM latency; drains after
    blocks; whole waves of work units over the cube cores; DRAM traffic at the chip's
    rate), and the first of them, in estimated order, that the space's constraints
    accept.

    Candidates: blocks ``m1 x n1`` of the axes' sizes up to 256 (so the waves over the
    cores and the tail blocks count; larger ones only if none of those keeps the
    program within the space's size limit), ``k0`` of 1, 2, 4 or 8 fractals and ``k1`` of 1
    to 8 ``k0`` (so a triple-buffered ``k1 = 3 k0`` competes with ``4 k0`` double
    buffered), L1 depth 2 to 4, L0 and accumulator depth 2 or 1 (the memories decide),
    split-K (when there is no fused epilogue) while the work units stay within two
    waves, so that the cores share few output blocks (GEMV-like shapes: every core
    streams a part of B); ``cores`` the most on the grid up to the work units.
    Ties (DRAM-bound candidates) go to the most slack on the cores, then the deeper
    buffers, then the smaller tile (deterministic). No shape or target
    is special: every figure is the target's. If no candidate fits (tiny memories),
    ``shrunk_default``. ``within``: the space of ``wl`` on ``target``, when built
    already.

    >>> import pypto
    >>> from pypto.schedule_space import space_for
    >>> from pypto.targets import load_target
    >>> @pypto.kernel
    ... def mm(a, b):
    ...     return pypto.matmul(a, b)
    >>> wl = mm.lower(pypto.spec((1000, 1000), "float16"),
    ...               pypto.spec((1000, 1000), "float16")).workloads[0]
    >>> space = space_for(wl, load_target("ascend910b"))
    >>> space.validate(space.default())
    []
    """
    sh = shape_of(wl)
    space = within or build_space(wl, target)
    largest = {a: space.axes[a].choices[-1] for a in ("m1", "n1", "k0", "k1")}
    refuse_huge(wl.describe(), [{**largest, "m0_parts": 1, "n0_parts": 1, "split_k": 1,
                                 **{k: "ND" for k in LAYOUT_KNOBS}}],
                lambda k: program_work(wl, k))
    r = cube_cost.rates(target, sh.dtype)
    chain = epilogue_chain(wl)
    tail_ops = [n.op for n in wl.nodes if n.op not in ("load", "matmul")]
    fix = fix_epilogue(wl)
    batch = math.prod(sh.batch)
    problem = cube_cost.CubeProblem(
        batch=batch, m=sh.m, n=sh.n, k=sh.k, dtype=sh.dtype, out_dtype=sh.dtype,
        a_bytes=batch * sh.m * sh.k * r.isz, b_bytes=batch * sh.k * sh.n * r.isz,
        epilogue_cycles=0.0 if chain is None or fix else
        cube_cost.epilogue_cycles(target, tail_ops, sh.dtype))
    layouts = {knob: choices[0] for knob, choices in layout_choices(wl).items()}
    base = Schedule(m1=0, n1=0, k1=0, k0=0, l1_depth=2, l0_depth=2, l0c_depth=2,
                    ub_depth=2, cores=1, block_order="mn", swizzle=1, split_k=1,
                    epilogue="FIX" if fix else "VEC", m0_parts=1, n0_parts=1,
                    l0_order="mn", **layouts, **fusion.neutral(wl))
    axes = space.axes
    ks = cube_cost.k_tiles(target.fractal(sh.dtype)[1], axes["k0"].choices,
                           axes["k1"].choices)
    ub_depths = (2, 1) if chain is not None and not fix else (2,)

    def tiles(m1: int, n1: int, k0: int, k1: int, split: int, cores: int,
              depths: tuple[int, int, int]) -> cube_cost.Tiles:
        return cube_cost.Tiles(m1, n1, k0, k1, *depths, split, cores,
                               *_runs(sh, layouts, m1, n1, k1))

    def finish(tile: tuple[int, ...]) -> tuple[cube_cost.Score, Schedule] | None:
        m1, n1, k0, k1, split, cores = tile
        for score, depths in cube_cost.by_estimate(
                (cube_cost.score(problem, r, tiles(*tile, d)), d) for d in cube_cost.DEPTHS):
            for ub in ub_depths:
                l1, l0, l0c = depths
                s = base.replace(m1=m1, n1=n1, k0=k0, k1=k1, l1_depth=l1, l0_depth=l0,
                                 l0c_depth=l0c, split_k=split, cores=cores, ub_depth=ub)
                if not space.validate(s):
                    return score, s
        return None

    grid = {u: core_choice(min(target.cube_cores, u), target.cube_cores)
            for u in range(1, 2 * target.cube_cores + 1)}

    def candidates(small: bool) -> list[tuple[cube_cost.Score, tuple]]:
        """Those of blocks up to MAX_BLOCK (``small``), or of the others."""
        out = []
        for m1, n1 in itertools.product(axes["m1"].choices, axes["n1"].choices):
            if (max(m1, n1) <= cube_cost.MAX_BLOCK) == small:
                blocks = batch * math.ceil(sh.m / m1) * math.ceil(sh.n / n1)
                splits = [p for p in axes["split_k"].choices
                          if p == 1 or blocks * p <= 2 * target.cube_cores]
                for k0, k1 in ks:
                    for split in (p for p in splits if p <= math.ceil(sh.k / k1)):
                        if program_work(wl, base.replace(m1=m1, n1=n1, k0=k0, k1=k1,
                                                         split_k=split)).instructions() \
                                > MAX_INSTRUCTIONS:
                            continue    # what the space's size limit refuses
                        cores = grid.get(blocks * split, target.cube_cores)
                        tile = (m1, n1, k0, k1, split, cores)
                        out.append((cube_cost.score(
                            problem, r, tiles(*tile, cube_cost.DEPTHS[0])), tile))
        return out

    # blocks up to MAX_BLOCK; larger ones when only they keep the program small enough
    for small in (True, False):
        best = cube_cost.best_first(candidates(small), finish)
        if best is not None:
            return best
    return valid_or_refuse(space, shrunk_default(wl, target, space))


def _runs(sh: MatmulShape, layouts: dict[str, str], m1: int, n1: int,
          k1: int) -> tuple[int, int, int, int]:
    """``(a_rows, a_run, b_rows, b_run)``: the contiguous runs of an A and a B tile load
    in GM (a tile that spans whole stored rows, or lies in NZ blocks, is one run)."""
    out = []
    for layout, rows, cols, full in (
            (layouts["a_layout"], *((k1, m1, sh.m) if sh.transpose_a else (m1, k1, sh.k))),
            (layouts["b_layout"], *((n1, k1, sh.k) if sh.transpose_b else (k1, n1, sh.n)))):
        out += [1, rows * cols] if layout == "NZ" or cols >= full else [rows, cols]
    return out[0], out[1], out[2], out[3]


def shrunk_default(wl: Workload, target: Target, space: Space) -> Schedule:
    """The fallback when no candidate of ``default`` fits: 128 x 256 output blocks,
    k0 = 4 fractals, k1 = 4 x k0, double buffering; shrink (accumulator depth first,
    then k1, then the block) until the space's constraints hold; a block size the
    halving leaves between two of the space's sizes goes down to the smaller."""
    sh = shape_of(wl)
    _, fk, _ = target.fractal(sh.dtype)
    fm, _, fn = tile_units(wl, target)
    m1 = min(128, round_up(sh.m, fm))
    n1 = min(256, round_up(sh.n, fn))
    k0 = min(4 * fk, round_up(sh.k, fk))
    k1 = min(4 * k0, round_up(sh.k, k0))
    s = Schedule(m1=m1, n1=n1, k1=k1, k0=k0, l1_depth=2, l0_depth=2, l0c_depth=2,
                 ub_depth=2, cores=1, block_order="mn", swizzle=1, split_k=1,
                 epilogue="FIX" if fix_epilogue(wl) else "VEC", m0_parts=1, n0_parts=1,
                 l0_order="mn", **fusion.neutral(wl),
                 **{knob: choices[0] for knob, choices in layout_choices(wl).items()})
    acc = target.role("acc").name
    for _ in range(64):
        problems = space.check(s)
        if not problems:
            break
        if s["l0c_depth"] > 1 and any("L0C" in p or acc in p for p in problems):
            s = s.replace(l0c_depth=1)
        elif s["k1"] > s["k0"]:
            s = s.replace(k1=s["k1"] // 2 if (s["k1"] // 2) % s["k0"] == 0 else s["k0"])
        elif s["n1"] > fn and s["n1"] >= s["m1"]:
            s = s.replace(n1=max(fn, round_up(s["n1"] // 2, fn)))
        elif s["m1"] > fm:
            s = s.replace(m1=max(fm, round_up(s["m1"] // 2, fm)))
        elif s["k0"] > fk:
            s = s.replace(k0=max(fk, round_up(s["k0"] // 2, fk)), k1=max(fk, round_up(
                s["k0"] // 2, fk)))
        elif s["ub_depth"] > 1 and 1 in space.axes["ub_depth"].choices:
            s = s.replace(ub_depth=1)
        else:
            break
    s = s.replace(m1=at_most(space.axes["m1"].choices, s["m1"]),
                  n1=at_most(space.axes["n1"].choices, s["n1"]))
    s = s.replace(split_k=default_split(wl, s, space))
    return s.replace(cores=core_choice(min(target.cube_cores, num_blocks(wl, s)),
                                       target.cube_cores))


def default_split(wl: Workload, s: Schedule, space: Space) -> int:
    """Split K only when there are fewer output blocks than cores: the largest split
    that keeps blocks x split within the cores and gives every part at least two
    ``k1`` chunks (so loads still overlap compute), if the zero tile fits."""
    cube_cores = space.target.cube_cores
    blocks = num_blocks(wl, s.replace(split_k=1))
    if blocks >= cube_cores or epilogue_chain(wl) is not None:
        return 1
    chunks = math.ceil(shape_of(wl).k / s["k1"])
    for split in sorted(SPLITS, reverse=True):
        if split > 1 and blocks * split <= cube_cores and chunks >= 2 * split \
                and not space.validate(s.replace(split_k=split)):
            return split
    return 1


def split_needs_own_tail(k: dict[str, Any]) -> list[str]:
    """Split-K's partial sums add up in GM: a tail can only read them after that."""
    if k["split_k"] > 1 and k["fuse_tail"]:
        return [f"split_k={k['split_k']} adds partial sums in GM, so the tail cannot be "
                "fused; use fuse_tail=False or split_k=1"]
    return []


def build_space(wl: Workload, target: Target) -> Space:
    """The matmul schedule space (axes in dependency order; constraints per memory)."""
    sh = shape_of(wl)
    fm, fk, fn = target.fractal(sh.dtype)
    um, uk, un = tile_units(wl, target)
    k0s = tile_sizes(sh.k, fk, 16 * fk)
    k1s = tuple(sorted(k for k in set(tile_sizes(sh.k, fk, 128 * fk)) |
                       {round_up(sh.k, k0) for k0 in k0s if round_up(sh.k, k0) <= 128 * fk}
                       if k % uk == 0))
    depths = tuple(range(1, MAX_DEPTH + 1))
    chain = epilogue_chain(wl)
    layouts = layout_choices(wl)
    nz = {knob: (f"an operand stored in layout NZ is read in column blocks of {c0} {dtype} "
                 f"elements, so {knob} is a multiple of {c0}")
          for knob, (c0, dtype) in nz_blocks(wl).items()}
    fusion_axes = fusion.axes(wl, target)
    # split-K adds partial sums in GM: with a tail, only when the tail runs on its own
    splittable = chain is None or any(False in a.choices for a in fusion_axes)
    axes = [
        *fusion_axes,
        Axis("a_layout", layouts["a_layout"], "how A lies in GM (NZ: 32-byte column blocks)",
             layout_note(wl, "a_layout")),
        Axis("b_layout", layouts["b_layout"], "how B lies in GM (NZ: 32-byte column blocks)",
             layout_note(wl, "b_layout")),
        Axis("m1", tile_sizes(sh.m, um, 512), "output block rows (held in the accumulator)",
             nz.get("m1", "")),
        Axis("n1", tile_sizes(sh.n, un, 512), "output block columns", nz.get("n1", "")),
        Axis("l0c_depth", depths, "accumulator buffers (2+: drain overlaps compute)"),
        Axis("m0_parts", PARTS, "sub-blocks along m1 (one MMAD each: m0 = m1 / parts)"),
        Axis("n0_parts", PARTS, "sub-blocks along n1 (one MMAD each: n0 = n1 / parts)"),
        Axis("k0", k0s, "K per MMAD (one L0A/L0B tile)"),
        Axis("l0_depth", depths, "L0A/L0B buffers"),
        Axis("k1", k1s, "K per L1 load of A and B", nz.get("k1", "")),
        Axis("l1_depth", depths, "L1 buffers of A and B"),
        Axis("ub_depth", depths if chain is not None else (2,), "UB buffers of the epilogue",
             "" if chain is not None else "there is no epilogue in UB"),
        Axis("split_k", tuple(p for p in SPLITS if p <= math.ceil(sh.k / fk))
             if splittable else (1,), "K parts (partial sums added atomically in GM), so "
                                      "more cores can share few output blocks",
             "" if splittable else "the partial sums add in GM, so the matmul cannot "
                                   "have a fused epilogue; use split_k=1"),
        Axis("cores", core_choices(target.cube_cores),
             "cube cores sharing the output blocks (times K parts)"),
        Axis("block_order", ("mn", "nm"), "block walk: n fastest (mn) or m fastest (nm)"),
        Axis("epilogue", ("VEC", "FIX") if fix_epilogue(wl) else ("VEC",),
             "where the elementwise tail runs: vector unit via UB, or FIX while draining",
             "" if fix_epilogue(wl) else "FIX can only apply a ReLU chain with no other "
                                         "inputs; use 'VEC'"),
        Axis("l0_order", ("mn", "nm"), "sub-block walk in L0: n fastest (an L0A tile "
                                       "serves a row) or m fastest (an L0B tile a column)"),
        Axis("swizzle", (1, 2, 4, 8), "rows (columns) of blocks walked together, for L2 "
                                      "reuse across cores"),
    ]

    def sub_blocks(k: dict[str, Any]) -> list[str]:
        return sub_block_problems(k, fm, fn)

    def core_count(k: dict[str, Any]) -> list[str]:
        units = num_blocks(wl, k)
        return [] if k["cores"] <= units else [
            f"cores={k['cores']} exceeds the {units} work units of {k['m1']}x{k['n1']} "
            f"blocks x split_k={k['split_k']}"]

    def split(k: dict[str, Any]) -> list[str]:
        return split_problems(wl, k["k1"], k["split_k"])

    names = [a.name for a in axes]
    constraints = memory_constraints(target, memory_uses(wl, target), names)
    constraints += [k_multiple(),
                    Constraint(("m1", "n1", "m0_parts", "n0_parts"), sub_blocks),
                    Constraint(("a_layout", "b_layout"), lambda k: layout_problems(wl, k)),
                    Constraint(("a_layout", "b_layout", "m1", "n1", "k1"),
                               lambda k: nz_problems(wl, k)),
                    Constraint(("k1", "split_k"), split),
                    Constraint(("m1", "n1", "split_k", "cores"), core_count),
                    size_constraint(("a_layout", "b_layout", "m1", "n1", "m0_parts",
                                     "n0_parts", "k0", "k1", "split_k"),
                                    lambda k: program_work(wl, k))]
    if fusion_axes:
        constraints += [fusion.unfused_tail_constraint(epilogue_axis=True),
                        Constraint(("fuse_tail", "split_k"), split_needs_own_tail)]
    built = Space(wl, target, axes, constraints, lambda: default(wl, target, built))
    return built
