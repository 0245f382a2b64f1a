"""On-chip memory as the spaces count it, written once for every family: each memory
*role* a schedule uses (``stage``, ``left``, ``right``, ``acc``, ``vector``) holds some
bytes (every slot rounded up to the memory's alignment, times its buffer depth, as
codegen's arenas place them); roles the target maps onto one memory (an MLU's NRAM holds
the left operand, the accumulator and the vector buffers) add up; each memory gets one
constraint that its total fits."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pypto.schedule_space.common import round_up
from pypto.schedule_space.space import Constraint

if TYPE_CHECKING:
    from pypto.targets import Target

Knobs = Mapping[str, Any]


@dataclass(frozen=True)
class RoleUse:
    """What a schedule places in one memory role: ``nbytes(knobs)`` over ``axes``, and
    ``what(knobs)``, the knobs that set it (for the violation message)."""

    role: str
    axes: tuple[str, ...]
    nbytes: Callable[[Knobs], int]
    what: Callable[[Knobs], str]


def slot(target: Target, role: str, nbytes: int) -> int:
    """One buffer of ``nbytes`` in ``role``'s memory, rounded up to its alignment."""
    return round_up(nbytes, target.role(role).alignment)


def footprints(uses: Sequence[RoleUse], knobs: Knobs) -> dict[str, int]:
    """Bytes per memory role under ``knobs``."""
    return {u.role: u.nbytes(knobs) for u in uses}


def memory_constraints(target: Target, uses: Sequence[RoleUse],
                       axis_order: Sequence[str]) -> list[Constraint]:
    """One constraint per memory: the bytes of the roles it holds fit its capacity. Each
    reads the axes of its roles (``axis_order`` orders them) and names the memory, the
    knobs, the bytes needed and the capacity."""
    by_memory: dict[str, list[RoleUse]] = {}
    for u in uses:
        by_memory.setdefault(target.role(u.role).name, []).append(u)
    out = []
    for name, group in by_memory.items():
        axes = {a for u in group for a in u.axes}
        out.append(Constraint(tuple(a for a in axis_order if a in axes),
                              _fits(name, target.memory(name).capacity, tuple(group))))
    return out


def _fits(name: str, capacity: int, group: tuple[RoleUse, ...]) -> Callable[[Knobs], list[str]]:
    def check(k: Knobs) -> list[str]:
        parts = [(u, u.nbytes(k)) for u in group]
        need = sum(n for _, n in parts)
        if need <= capacity:
            return []
        what = group[0].what(k) if len(group) == 1 else " + ".join(
            f"{u.what(k)} ({u.role})" for u, n in parts if n)
        return [f"{name}: {what} needs {need} bytes but {name} holds {capacity}"]
    return check
