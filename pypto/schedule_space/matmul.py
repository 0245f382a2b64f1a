"""Matmul workloads (with batched operands and fused elementwise epilogues): buffer
footprints per memory level, the default tiling heuristic and validation.

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

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pypto.ir.dtypes import BY_NAME
from pypto.ir.layouts import nz_c0
from pypto.ir.workload import Workload
from pypto.schedule_space import vector
from pypto.schedule_space.cube import memory_constraints
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.space import Axis, Constraint, Space
from pypto.schedule_space.vector import MAX_DEPTH, round_up

if TYPE_CHECKING:
    from pypto.targets import Target

CORE_GRID = (1, 2, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48)
KNOBS = ("m1", "n1", "k1", "k0", "l1_depth", "l0_depth", "l0c_depth", "ub_depth", "cores",
         "block_order", "swizzle", "split_k", "m0_parts", "n0_parts", "l0_order")
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)
ZERO_TILE_BYTES = 16384  # split-K: the zero tile in UB that clears the output
ACC_DTYPE = {"float16": "float32", "float32": "float32", "int8": "int32"}


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


def epilogue_chain(wl: Workload) -> vector.Chain | None:
    mm_index = next(i for i, n in enumerate(wl.nodes) if n.op == "matmul")
    if not shape_of(wl).epilogue:
        return None
    # A and B stay out of UB unless the tail reads them too (``relu(a @ b) + a``).
    tail_args = {a for i, n in enumerate(wl.nodes) if i != mm_index for a in n.args}
    skip = frozenset(a for a in wl.nodes[mm_index].args if a not in tail_args)
    return vector.analyze(wl, space=wl.nodes[mm_index].shape, skip=skip)


PARTS = (1, 2, 4, 8)
MAX_SUB_BLOCKS = 8  # sub-blocks per m1 x n1 block: more only adds MMAD issue cost


def sub_block(s: Any) -> tuple[int, int]:
    """``(m0, n0)``: the sub-block one MMAD computes."""
    return s["m1"] // s.get("m0_parts", 1), s["n1"] // s.get("n0_parts", 1)


def sub_block_problems(s: Any, fm: int, fn: int) -> list[str]:
    out = []
    for knob, outer, unit in (("m0_parts", "m1", fm), ("n0_parts", "n1", fn)):
        parts = s.get(knob, 1)
        if parts not in PARTS:
            out.append(f"{knob}={parts!r} must be one of {PARTS}")
        elif s[outer] % (parts * unit):
            out.append(f"{knob}={parts} must cut {outer}={s[outer]} into whole fractals "
                       f"({outer} a multiple of {parts} x {unit})")
    if not out and s.get("m0_parts", 1) * s.get("n0_parts", 1) > MAX_SUB_BLOCKS:
        out.append(f"m0_parts={s['m0_parts']} x n0_parts={s['n0_parts']} makes more than "
                   f"{MAX_SUB_BLOCKS} sub-blocks per block")
    return out


LAYOUT_KNOBS = ("a_layout", "b_layout")


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


def layout_problems(wl: Workload, s: Any) -> list[str]:
    out = []
    choices = layout_choices(wl)
    for knob in LAYOUT_KNOBS:
        if knob in s and s[knob] not in choices[knob]:
            why = ("the caller stored it in NZ" if choices[knob] == ("NZ",) else
                   "only a constant the kernel captures and reads whole as a matmul operand "
                   "can be stored in NZ; or pass a tensor made with layout='NZ'")
            out.append(f"{knob}={s[knob]!r} must be one of {choices[knob]}: {why}")
    a, b = _operand_inputs(wl)
    if a == b and s.get("a_layout", "ND") != s.get("b_layout", "ND"):
        out.append("a_layout and b_layout must agree: A and B are the same tensor")
    return out


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


def split_problems(wl: Workload, k1: int, split_k: object) -> list[str]:
    if not isinstance(split_k, int) or isinstance(split_k, bool):
        return [f"split_k={split_k!r} must be an int"]
    if split_k == 1:
        return []
    if split_k not in SPLITS:
        return [f"split_k={split_k} must be one of {SPLITS}"]
    if epilogue_chain(wl) is not None:
        return [f"split_k={split_k}: the partial sums add in GM, so the matmul cannot have a "
                "fused epilogue; use split_k=1"]
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
               "m0_parts": 1, "n0_parts": 1, "l0_order": "mn",
               **{knob: choices[0] for knob, choices in layout_choices(wl).items()}}
    missing = {k: v for k, v in neutral.items() if k not in s}
    return s.replace(**missing) if missing else s


def footprints(wl: Workload, s: Schedule, target: Target) -> dict[str, int]:
    """Bytes placed per memory role for schedule ``s`` (slots rounded to alignment)."""
    sh = shape_of(wl)
    isz = BY_NAME[sh.dtype].itemsize
    acc = BY_NAME[ACC_DTYPE[sh.dtype]].itemsize

    def slot(role: str, nbytes: int) -> int:
        return round_up(nbytes, target.role(role).alignment)

    out = {
        "stage": s["l1_depth"] * (slot("stage", s["m1"] * s["k1"] * isz)
                                  + slot("stage", s["k1"] * s["n1"] * isz)),
        "left": s["l0_depth"] * slot("left", sub_block(s)[0] * s["k0"] * isz),
        "right": s["l0_depth"] * slot("right", s["k0"] * sub_block(s)[1] * isz),
        "acc": s["l0c_depth"] * slot("acc", s["m1"] * s["n1"] * acc),
        "vector": 0,
    }
    chain = epilogue_chain(wl)
    if chain is not None and s.get("epilogue", "VEC") == "VEC":
        out["vector"] = vector.footprint(chain, s["m1"], s["n1"], s["ub_depth"],
                                         target.role("vector").alignment)
    if s.get("split_k", 1) > 1:
        out["vector"] += slot("vector", ZERO_TILE_BYTES)
    return out


def num_blocks(wl: Workload, s: Schedule) -> int:
    """Work units the cores share: output blocks times K parts."""
    sh = shape_of(wl)
    return (math.prod(sh.batch) * math.ceil(sh.m / s["m1"]) * math.ceil(sh.n / s["n1"])
            * s.get("split_k", 1))


def violations(wl: Workload, s: Schedule, target: Target) -> list[str]:
    # split_k, m0, n0 and l0_order are optional: ``complete`` gives their neutral values
    optional = ("block_order", "split_k", "m0", "n0", "l0_order", *LAYOUT_KNOBS)
    out = vector._require(s, tuple(k for k in KNOBS if k not in optional))
    out += vector._require(s, tuple(k for k in ("split_k", "m0_parts", "n0_parts") if k in s))
    if "block_order" not in s:
        out.append("missing knob 'block_order'")
    if out:
        return out
    sh = shape_of(wl)
    fm, fk, fn = target.fractal(sh.dtype)
    for knob, unit in (("m1", fm), ("n1", fn), ("k0", fk)):
        if s[knob] < unit or s[knob] % unit:
            out.append(f"{knob}={s[knob]} must be a positive multiple of the {sh.dtype} "
                       f"fractal size {unit}")
    if out:
        return out
    out += sub_block_problems(s, fm, fn)
    if s.get("l0_order", "mn") not in ("mn", "nm"):
        out.append(f"l0_order={s.get('l0_order')!r} must be 'mn' or 'nm'")
    if s["k1"] < s["k0"] or s["k1"] % max(s["k0"], 1):
        out.append(f"k1={s['k1']} must be a positive multiple of k0={s['k0']}")
    for knob in ("l1_depth", "l0_depth", "l0c_depth", "ub_depth"):
        if not 1 <= s[knob] <= MAX_DEPTH:
            out.append(f"{knob}={s[knob]} must be in 1..{MAX_DEPTH}")
    if s.get("epilogue", "VEC") not in ("VEC", "FIX") or (
            s.get("epilogue") == "FIX" and not fix_epilogue(wl)):
        out.append(f"epilogue={s.get('epilogue')!r}: FIX can only apply a ReLU chain with no "
                   "other inputs; use 'VEC'")
    if s["block_order"] not in ("mn", "nm"):
        out.append(f"block_order={s['block_order']!r} must be 'mn' or 'nm'")
    if s["swizzle"] < 1:
        out.append(f"swizzle={s['swizzle']} must be >= 1")
    if not 1 <= s["cores"] <= target.cube_cores:
        out.append(f"cores={s['cores']} must be in 1..{target.cube_cores} "
                   f"({target.name} has {target.cube_cores} cube cores)")
    out += split_problems(wl, s["k1"], s.get("split_k", 1)) + layout_problems(wl, s)
    if out:
        return out
    out += nz_problems(wl, s)
    if out:
        return out
    return out + memory_problems(footprints(wl, s, target), target, s)


def memory_problems(per_role: dict[str, int], target: Target, s: Any) -> list[str]:
    """Capacity violations, per memory: roles a target maps onto one memory (an MLU's
    NRAM holds the left operand, the accumulator and the vector buffers) add up."""
    need: dict[str, int] = {}
    for role, nbytes in per_role.items():
        name = target.role(role).name
        need[name] = need.get(name, 0) + nbytes
    out = []
    for name, nbytes in need.items():
        mem = target.memory(name)
        if nbytes > mem.capacity:
            out.append(f"{name}: {nbytes} bytes needed (m1={s['m1']}, n1={s['n1']}, "
                       f"k1={s['k1']}, k0={s['k0']}, depths {s['l1_depth']}/{s['l0_depth']}/"
                       f"{s['l0c_depth']}/{s['ub_depth']}) but it holds {mem.capacity}")
    return out


def shared_memory_constraint(wl: Workload, target: Target, axes: list[Axis],
                             footprint_fn: Any) -> list[Constraint]:
    """When roles share a memory, one more constraint over all the axes: the sum fits."""
    names = [target.role(r).name for r in ("stage", "left", "right", "acc", "vector")]
    if len(set(names)) == len(names):
        return []

    def shared(k: dict[str, Any]) -> list[str]:
        return memory_problems(footprint_fn(wl, k, target), target, k)

    return [Constraint(tuple(a.name for a in axes), shared)]


def default(wl: Workload, target: Target) -> Schedule:
    """128 x 256 output blocks (rows of 256 fp16 = 512 B, a full DMA burst), k0 = 4
    fractals, k1 = 4 x k0, double buffering; shrink (accumulator depth first, then
    k1, then the block) until everything fits."""
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
                 l0_order="mn",
                 **{knob: choices[0] for knob, choices in layout_choices(wl).items()})
    for _ in range(64):
        problems = violations(wl, s, target)
        if not problems:
            break
        if s["l0c_depth"] > 1 and any("L0C" in p or target.role("acc").name in p
                                      for p in problems):
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
        elif s["ub_depth"] > 1:
            s = s.replace(ub_depth=1)
        else:
            break
    s = s.replace(split_k=default_split(wl, s, target))
    return s.replace(cores=core_choice(min(target.cube_cores, num_blocks(wl, s)),
                                       target.cube_cores))


def default_split(wl: Workload, s: Schedule, target: Target) -> int:
    """Split K only when there are fewer output blocks than cores: the largest split
    that keeps blocks x split within the cores and gives every part at least two
    ``k1`` chunks (so loads still overlap compute), if the zero tile fits."""
    blocks = num_blocks(wl, s.replace(split_k=1))
    if blocks >= target.cube_cores or epilogue_chain(wl) is not None:
        return 1
    chunks = math.ceil(shape_of(wl).k / s["k1"])
    for split in sorted(SPLITS, reverse=True):
        if split > 1 and blocks * split <= target.cube_cores and chunks >= 2 * split \
                and not violations(wl, s.replace(split_k=split), target):
            return split
    return 1


def core_choice(count: int, available: int) -> int:
    """The largest core count on the spaces' grid that is at most ``count``."""
    grid = [c for c in CORE_GRID if c <= available] + [available]
    return max(c for c in grid if c <= max(1, count))


def _sizes(extent: int, unit: int, cap: int) -> tuple[int, ...]:
    """Tile sizes for an extent: unit x 1, 2, 3, 4, 6, 8, 12, 16, ... up to ``cap``, and
    the extent rounded up to the unit (one tile) when that is below ``cap``."""
    full = round_up(extent, unit)
    steps = sorted({unit * m for m in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)})
    out = {s for s in steps if s <= min(full, cap)}
    if full <= cap:
        out.add(full)
    return tuple(sorted(out))


def space(wl: Workload, target: Target) -> Space:
    """The matmul schedule space (axes in dependency order; constraints per memory)."""
    sh = shape_of(wl)
    fm, fk, fn = target.fractal(sh.dtype)
    um, uk, un = tile_units(wl, target)
    isz = BY_NAME[sh.dtype].itemsize
    acc_isz = BY_NAME[ACC_DTYPE[sh.dtype]].itemsize
    k0s = _sizes(sh.k, fk, 16 * fk)
    k1s = tuple(sorted(k for k in set(_sizes(sh.k, fk, 128 * fk)) |
                       {round_up(sh.k, k0) for k0 in k0s if round_up(sh.k, k0) <= 128 * fk}
                       if k % uk == 0))
    depths = tuple(range(1, MAX_DEPTH + 1))
    chain = epilogue_chain(wl)
    cores = tuple(sorted({c for c in CORE_GRID if c <= target.cube_cores}
                         | {target.cube_cores}))
    layouts = layout_choices(wl)
    axes = [
        Axis("a_layout", layouts["a_layout"], "how A lies in GM (NZ: 32-byte column blocks)"),
        Axis("b_layout", layouts["b_layout"], "how B lies in GM (NZ: 32-byte column blocks)"),
        Axis("m1", _sizes(sh.m, um, 512), "output block rows (held in the accumulator)"),
        Axis("n1", _sizes(sh.n, un, 512), "output block columns"),
        Axis("l0c_depth", depths, "accumulator buffers (2+: drain overlaps compute)"),
        Axis("m0_parts", PARTS, "sub-blocks along m1 (one MMAD each: m0 = m1 / parts)"),
        Axis("n0_parts", PARTS, "sub-blocks along n1 (one MMAD each: n0 = n1 / parts)"),
        Axis("k0", k0s, "K per MMAD (one L0A/L0B tile)"),
        Axis("l0_depth", depths, "L0A/L0B buffers"),
        Axis("k1", k1s, "K per L1 load of A and B"),
        Axis("l1_depth", depths, "L1 buffers of A and B"),
        Axis("ub_depth", depths if chain is not None else (2,), "UB buffers of the epilogue"),
        Axis("split_k", tuple(p for p in SPLITS if p <= math.ceil(sh.k / fk))
             if chain is None else (1,), "K parts (partial sums added atomically in GM), so "
                                         "more cores can share few output blocks"),
        Axis("cores", cores, "cube cores sharing the output blocks (times K parts)"),
        Axis("block_order", ("mn", "nm"), "block walk: n fastest (mn) or m fastest (nm)"),
        Axis("epilogue", ("VEC", "FIX") if fix_epilogue(wl) else ("VEC",),
             "where the elementwise tail runs: vector unit via UB, or FIX while draining"),
        Axis("l0_order", ("mn", "nm"), "sub-block walk in L0: n fastest (an L0A tile "
                                       "serves a row) or m fastest (an L0B tile a column)"),
        Axis("swizzle", (1, 2, 4, 8), "rows (columns) of blocks walked together, for L2 "
                                      "reuse across cores"),
    ]

    def sub_blocks(k: dict[str, Any]) -> list[str]:
        return sub_block_problems(k, fm, fn)

    def core_count(k: dict[str, Any]) -> list[str]:
        units = num_blocks(wl, Schedule(m1=k["m1"], n1=k["n1"], split_k=k["split_k"]))
        return [] if k["cores"] <= units else [
            f"cores={k['cores']} exceeds the {units} work units of {k['m1']}x{k['n1']} "
            f"blocks x split_k={k['split_k']}"]

    def split(k: dict[str, Any]) -> list[str]:
        return split_problems(wl, k["k1"], k["split_k"])

    constraints = memory_constraints(target, isz, acc_isz, chain, sub_blocks=True,
                                     epilogue_axis=True)
    constraints += [Constraint(("m1", "n1", "m0_parts", "n0_parts"), sub_blocks),
                    Constraint(("a_layout", "b_layout"), lambda k: layout_problems(wl, k)),
                    Constraint(("a_layout", "b_layout", "m1", "n1", "k1"),
                               lambda k: nz_problems(wl, k)),
                    Constraint(("k1", "split_k"), split),
                    Constraint(("m1", "n1", "split_k", "cores"), core_count)]
    constraints += shared_memory_constraint(wl, target, axes, footprints)
    return Space(wl, target, axes, constraints, lambda: default(wl, target))
