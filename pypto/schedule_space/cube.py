"""The buffer constraints every cube kernel's space shares (matmul, and conv2d as an
implicit GEMM): the accumulator block ``m1 x n1`` in L0C, the MMAD operands in L0A and
L0B, the A and B tiles in L1, and the epilogue's buffers in UB, each counted with its
buffer depth and rounded to the memory's alignment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pypto.schedule_space import vector
from pypto.schedule_space.space import Constraint
from pypto.schedule_space.vector import round_up

if TYPE_CHECKING:
    from pypto.targets import Target


def memory_constraints(target: Target, isz: int, acc_isz: int, chain: vector.Chain | None,
                       sub_blocks: bool = False,
                       epilogue_axis: bool = False) -> list[Constraint]:
    """Constraints for axes ``m1, n1, k0, k1`` and the depths. An MMAD computes the whole
    ``m1 x n1`` block, or with ``sub_blocks`` one of ``m0_parts x n0_parts`` sub-blocks;
    with ``epilogue_axis``, an ``epilogue`` of "FIX" needs no UB."""
    parts = ("m0_parts", "n0_parts") if sub_blocks else ()

    def fits(role: str, need: int, what: str) -> list[str]:
        mem = target.role(role)
        return [] if need <= mem.capacity else [
            f"{mem.name}: {what} needs {need} bytes but {mem.name} holds {mem.capacity}"]

    def slot(role: str, nbytes: int) -> int:
        return round_up(nbytes, target.role(role).alignment)

    def acc(k: dict[str, Any]) -> list[str]:
        need = k["l0c_depth"] * slot("acc", k["m1"] * k["n1"] * acc_isz)
        return fits("acc", need, f"m1={k['m1']} x n1={k['n1']} x l0c_depth={k['l0c_depth']}")

    def l0(k: dict[str, Any]) -> list[str]:
        d = k["l0_depth"]
        if parts:
            rows, cols = k["m1"] // k[parts[0]], k["n1"] // k[parts[1]]
            row_text = f"m1/m0_parts={rows}"
            col_text = f"n1/n0_parts={cols}"
        else:
            rows, cols = k["m1"], k["n1"]
            row_text, col_text = f"m1={rows}", f"n1={cols}"
        return fits("left", d * slot("left", rows * k["k0"] * isz),
                    f"{row_text} x k0={k['k0']} x l0_depth={d}") + \
            fits("right", d * slot("right", k["k0"] * cols * isz),
                 f"k0={k['k0']} x {col_text} x l0_depth={d}")

    def l1(k: dict[str, Any]) -> list[str]:
        if k["k1"] % k["k0"]:
            return [f"k1={k['k1']} must be a multiple of k0={k['k0']}"]
        need = k["l1_depth"] * (slot("stage", k["m1"] * k["k1"] * isz)
                                + slot("stage", k["k1"] * k["n1"] * isz))
        return fits("stage", need, f"(m1 + n1) x k1={k['k1']} x l1_depth={k['l1_depth']}")

    def ub(k: dict[str, Any]) -> list[str]:
        if epilogue_axis and k["epilogue"] == "FIX":
            return []
        need = vector.footprint(chain, k["m1"], k["n1"], k["ub_depth"],  # type: ignore[arg-type]
                                target.role("vector").alignment)
        return fits("vector", need, f"the epilogue on {k['m1']}x{k['n1']} blocks x "
                                    f"ub_depth={k['ub_depth']}")

    out = [Constraint(("m1", "n1", "l0c_depth"), acc),
           Constraint(("m1", "n1", *parts, "k0", "l0_depth"), l0),
           Constraint(("m1", "n1", "k0", "k1", "l1_depth"), l1)]
    if chain is not None:
        axes = ("m1", "n1", "ub_depth") + (("epilogue",) if epilogue_axis else ())
        out.append(Constraint(axes, ub))
    return out
