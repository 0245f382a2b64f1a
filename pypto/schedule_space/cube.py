"""What every cube kernel's space shares (matmul, and conv2d as an implicit GEMM): the
accumulator dtype, and the buffers per memory role: the A and B tiles in L1
(``stage``), the MMAD operands in L0A and L0B (``left``, ``right``), the accumulator
block ``m1 x n1`` in L0C (``acc``) and the epilogue's buffers in UB (``vector``), each
counted with its buffer depth and rounded to the memory's alignment (``memory``
turns them into one constraint per memory); and the size of the program a schedule
lowers to (``size_constraint``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pypto.errors import UnsupportedError
from pypto.ir.dtypes import BY_NAME
from pypto.schedule_space.chain import Chain, footprint
from pypto.schedule_space.memory import RoleUse, slot
from pypto.schedule_space.space import Constraint

if TYPE_CHECKING:
    from pypto.targets import Target

ACC_DTYPE = {"float16": "float32", "float32": "float32", "int8": "int32"}


def memory_uses(target: Target, dtype: str, chain: Chain | None, *, sub_blocks: bool = False,
                epilogue_axis: bool = False, zero_tile_bytes: int = 0) -> list[RoleUse]:
    """The roles of a cube kernel over axes ``m1, n1, k0, k1`` and the depths. An MMAD
    computes the whole ``m1 x n1`` block, or with ``sub_blocks`` one of ``m0_parts x
    n0_parts`` sub-blocks; with ``epilogue_axis``, an ``epilogue`` of "FIX" needs no UB;
    with ``zero_tile_bytes``, ``split_k`` > 1 places a zero tile of that size in UB."""
    isz = BY_NAME[dtype].itemsize
    acc_isz = BY_NAME[ACC_DTYPE[dtype]].itemsize
    parts = ("m0_parts", "n0_parts") if sub_blocks else ()

    def rows(k: Any) -> int:
        return k["m1"] // k["m0_parts"] if parts else k["m1"]

    def cols(k: Any) -> int:
        return k["n1"] // k["n0_parts"] if parts else k["n1"]

    row_text = "m1/m0_parts" if parts else "m1"
    col_text = "n1/n0_parts" if parts else "n1"
    uses = [
        RoleUse("stage", ("m1", "n1", "k1", "l1_depth"),
                lambda k: k["l1_depth"] * (slot(target, "stage", k["m1"] * k["k1"] * isz)
                                           + slot(target, "stage", k["k1"] * k["n1"] * isz)),
                lambda k: f"(m1 + n1) x k1={k['k1']} x l1_depth={k['l1_depth']}"),
        RoleUse("left", ("m1", *parts[:1], "k0", "l0_depth"),
                lambda k: k["l0_depth"] * slot(target, "left", rows(k) * k["k0"] * isz),
                lambda k: f"{row_text}={rows(k)} x k0={k['k0']} x l0_depth={k['l0_depth']}"),
        RoleUse("right", ("n1", *parts[1:], "k0", "l0_depth"),
                lambda k: k["l0_depth"] * slot(target, "right", k["k0"] * cols(k) * isz),
                lambda k: f"k0={k['k0']} x {col_text}={cols(k)} x l0_depth={k['l0_depth']}"),
        RoleUse("acc", ("m1", "n1", "l0c_depth"),
                lambda k: k["l0c_depth"] * slot(target, "acc", k["m1"] * k["n1"] * acc_isz),
                lambda k: f"m1={k['m1']} x n1={k['n1']} x l0c_depth={k['l0c_depth']}"),
    ]
    align = target.role("vector").alignment

    def epilogue_bytes(k: Any) -> int:
        if chain is None or (epilogue_axis and k["epilogue"] == "FIX") or \
                k.get("fuse_tail", True) is False:  # the tail runs in a pass of its own
            return 0
        return footprint(chain, k["m1"], k["n1"], k["ub_depth"], align)

    def vector_bytes(k: Any) -> int:
        zero = slot(target, "vector", zero_tile_bytes) if zero_tile_bytes and \
            k["split_k"] > 1 else 0
        return epilogue_bytes(k) + zero

    def vector_text(k: Any) -> str:
        parts_text = []
        if epilogue_bytes(k):
            parts_text.append(f"the epilogue on {k['m1']}x{k['n1']} blocks x "
                              f"ub_depth={k['ub_depth']}")
        if zero_tile_bytes and k["split_k"] > 1:
            parts_text.append(f"the zero tile of split_k={k['split_k']}")
        return " + ".join(parts_text)

    if chain is not None or zero_tile_bytes:
        axes = ("fuse_tail", "m1", "n1", "ub_depth") + (("epilogue",) if epilogue_axis else ()) + (
            ("split_k",) if zero_tile_bytes else ())
        uses.append(RoleUse("vector", axes, vector_bytes, vector_text))
    return uses


def k_multiple() -> Constraint:
    """An L1 load of K holds whole MMAD steps: ``k1`` is a multiple of ``k0``."""
    return Constraint(("k0", "k1"), lambda k: [] if k["k1"] % k["k0"] == 0 else [
        f"k1={k['k1']} must be a multiple of k0={k['k0']}"])


#: The most instructions a schedule's program may have (by ``program_size``): lowering
#: keeps about 160 bytes per instruction while it builds one (about 2.7 GB here), and
#: the largest packaged-target GEMMs people run (8192^3 fp16) take about 2.5 million.
MAX_INSTRUCTIONS = 2**24
#: Instructions per L0 copy, MMAD or drain instruction, counting the SET_FLAG/WAIT_FLAG
#: pairs the sync pass puts between them: up to 2.5 flags each, measured over random
#: matmul schedules on the packaged targets (median 1.9).
WITH_FLAGS = 3.5
#: Flags per K chunk around its loads into L1 (which share them, however many DMAs).
CHUNK_FLAGS = 4


@dataclass(frozen=True)
class CubeWork:
    """What a cube kernel's program repeats: ``blocks`` work units (output blocks times
    K parts) of ``chunks`` K chunks each; per chunk ``l1_copies`` GM -> L1 DMAs and
    ``steps`` k0 steps over ``m0_parts x n0_parts`` sub-blocks; per block ``drain``
    instructions after the last chunk."""

    blocks: int
    chunks: int
    l1_copies: int
    steps: int
    m0_parts: int
    n0_parts: int
    drain: int

    def instructions(self) -> int:
        """About how many instructions the program has, flags included: measured over
        random schedules on the packaged targets (programs of 2,000 instructions and
        more), 0.9 to 2.5 times the real count for matmul, 0.9 to 3.2 for conv2d."""
        pm, pn = self.m0_parts, self.n0_parts
        # L0A/L0B copies per k0 step: a tile is loaded again when the walk moves off it
        # (whichever l0_order walks the sub-blocks, the more of the two)
        l0 = max(pm + (pm * pn if pn > 1 else 1), pn + (pm * pn if pm > 1 else 1))
        per_chunk = (self.l1_copies + CHUNK_FLAGS
                     + WITH_FLAGS * self.steps * (l0 + pm * pn))
        return math.ceil(self.blocks * (self.chunks * per_chunk + WITH_FLAGS * self.drain))


def size_constraint(axes: tuple[str, ...], work: Callable[[Any], CubeWork]) -> Constraint:
    """Programs of at most ``MAX_INSTRUCTIONS`` (``work`` of the knobs in ``axes``), so
    that no schedule of the space lowers to a program too large to build."""

    def check(k: Any) -> list[str]:
        n = work(k).instructions()
        if n <= MAX_INSTRUCTIONS:
            return []
        knobs = ", ".join(f"{a}={k[a]}" for a in axes if a not in LAYOUT_KNOBS)
        return [f"{knobs} make a program of about {n:,} instructions (at most "
                f"{MAX_INSTRUCTIONS:,}): {hint}"]

    tiles = [a for a in ("row_block", "m1", "n1", "k1", "k0") if a in axes]
    hint = "give larger " + ", ".join(tiles[:-1]) + f" and {tiles[-1]}"
    hint += ", fewer m0_parts x n0_parts" if "m0_parts" in axes else ""
    hint += ", a smaller split_k" if "split_k" in axes else ""
    hint += ", or split the work into smaller kernels"
    return Constraint(axes, check)


LAYOUT_KNOBS = ("a_layout", "b_layout")


def refuse_huge(what: str, largest: list[dict[str, Any]],
                work: Callable[[Any], CubeWork]) -> None:
    """Raise ``UnsupportedError`` when even the smallest program of ``largest`` (knobs
    at the space's largest tiles) has more than ``MAX_INSTRUCTIONS``: no schedule of
    ``what`` (a workload's description) is small enough."""
    sizes = [(work(k).instructions(), k) for k in largest]
    n, k = min(sizes, key=lambda x: x[0])
    if n > MAX_INSTRUCTIONS:
        knobs = ", ".join(f"{a}={k[a]}" for a in ("row_block", "m1", "n1", "k1", "k0")
                          if a in k)
        raise UnsupportedError(f"{what}: even the largest tiles ({knobs}) make a program "
                               f"of about {n:,} instructions (at most {MAX_INSTRUCTIONS:,}): "
                               "split the work into smaller kernels")


def valid_or_refuse(space: Any, fallback: Any) -> Any:
    """``fallback`` (a default heuristic's last resort, its tiles shrunk as far as the
    space's problems asked) if it is valid; else ``UnsupportedError`` naming its
    problems (a workload too large for any program, or memories too small)."""
    problems = space.validate(fallback)
    if problems:
        raise UnsupportedError(
            f"{space.workload.describe()}: the default heuristic found no valid schedule "
            f"on {space.target.name}; its last resort {fallback.to_json()} gives: "
            + "; ".join(problems))
    return fallback
