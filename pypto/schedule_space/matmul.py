"""Matmul workloads (with batched operands and fused elementwise epilogues): buffer
footprints per memory level, the default tiling heuristic and validation.

Knobs: ``m1 x n1`` is the output block held in the accumulator (L0C) and reduced over
all of K; ``k1`` is the K extent of one L1 load of A and B; ``k0`` the K extent of one
L0A/L0B tile (one MMAD); ``l1_depth``, ``l0_depth``, ``l0c_depth``, ``ub_depth`` are the
buffer counts per level (2 = ping-pong); ``cores`` how many cube cores share the blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pypto.frontend.dtypes import BY_NAME
from pypto.ir.workload import Workload
from pypto.schedule_space import vector
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.vector import MAX_DEPTH, round_up

if TYPE_CHECKING:
    from pypto.targets import Target

KNOBS = ("m1", "n1", "k1", "k0", "l1_depth", "l0_depth", "l0c_depth", "ub_depth", "cores")
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
    operands = frozenset(wl.nodes[mm_index].args)
    return vector.analyze(wl, space=wl.nodes[mm_index].shape, skip=operands)


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
        "left": s["l0_depth"] * slot("left", s["m1"] * s["k0"] * isz),
        "right": s["l0_depth"] * slot("right", s["k0"] * s["n1"] * isz),
        "acc": s["l0c_depth"] * slot("acc", s["m1"] * s["n1"] * acc),
        "vector": 0,
    }
    chain = epilogue_chain(wl)
    if chain is not None:
        out["vector"] = vector.footprint(chain, s["m1"], s["n1"], s["ub_depth"],
                                         target.role("vector").alignment)
    return out


def num_blocks(wl: Workload, s: Schedule) -> int:
    sh = shape_of(wl)
    return math.prod(sh.batch) * math.ceil(sh.m / s["m1"]) * math.ceil(sh.n / s["n1"])


def violations(wl: Workload, s: Schedule, target: Target) -> list[str]:
    out = vector._require(s, KNOBS)
    if out:
        return out
    sh = shape_of(wl)
    fm, fk, fn = target.fractal(sh.dtype)
    for knob, unit in (("m1", fm), ("n1", fn), ("k0", fk)):
        if s[knob] < unit or s[knob] % unit:
            out.append(f"{knob}={s[knob]} must be a positive multiple of the {sh.dtype} "
                       f"fractal size {unit}")
    if s["k1"] < s["k0"] or s["k1"] % max(s["k0"], 1):
        out.append(f"k1={s['k1']} must be a positive multiple of k0={s['k0']}")
    for knob in ("l1_depth", "l0_depth", "l0c_depth", "ub_depth"):
        if not 1 <= s[knob] <= MAX_DEPTH:
            out.append(f"{knob}={s[knob]} must be in 1..{MAX_DEPTH}")
    if not 1 <= s["cores"] <= target.cube_cores:
        out.append(f"cores={s['cores']} must be in 1..{target.cube_cores} "
                   f"({target.name} has {target.cube_cores} cube cores)")
    if out:
        return out
    for role, need in footprints(wl, s, target).items():
        mem = target.role(role)
        if need > mem.capacity:
            out.append(f"{mem.name}: {need} bytes needed (m1={s['m1']}, n1={s['n1']}, "
                       f"k1={s['k1']}, k0={s['k0']}, depths {s['l1_depth']}/{s['l0_depth']}/"
                       f"{s['l0c_depth']}/{s['ub_depth']}) but it holds {mem.capacity}")
    return out


def default(wl: Workload, target: Target) -> Schedule:
    """128 x 256 output blocks (rows of 256 fp16 = 512 B, a full DMA burst), k0 = 4
    fractals, k1 = 4 x k0, double buffering; shrink (accumulator depth first, then
    k1, then the block) until everything fits."""
    sh = shape_of(wl)
    fm, fk, fn = target.fractal(sh.dtype)
    m1 = min(128, round_up(sh.m, fm))
    n1 = min(256, round_up(sh.n, fn))
    k0 = min(4 * fk, round_up(sh.k, fk))
    k1 = min(4 * k0, round_up(sh.k, k0))
    s = Schedule(m1=m1, n1=n1, k1=k1, k0=k0, l1_depth=2, l0_depth=2, l0c_depth=2,
                 ub_depth=2, cores=1)
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
    return s.replace(cores=min(target.cube_cores, num_blocks(wl, s)))
