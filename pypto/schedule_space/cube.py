"""What every cube kernel's space shares (matmul, and conv2d as an implicit GEMM): the
accumulator dtype, and the buffers per memory role: the A and B tiles in L1
(``stage``), the MMAD operands in L0A and L0B (``left``, ``right``), the accumulator
block ``m1 x n1`` in L0C (``acc``) and the epilogue's buffers in UB (``vector``), each
counted with its buffer depth and rounded to the memory's alignment (``memory``
turns them into one constraint per memory)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
