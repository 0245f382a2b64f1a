"""Schedules and the rules that make one valid for a workload on a target.

``default_schedule`` is the documented heuristic used when nothing better is known;
``validate`` lists every violated constraint (empty when the schedule is valid).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pypto.errors import UnsupportedError
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.space import Space

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.targets import Target

__all__ = ["Schedule", "Space", "complete", "default_schedule", "input_layouts", "space_for",
           "validate"]


def _family(wl: Workload):  # type: ignore[no-untyped-def]
    from pypto.schedule_space import conv2d, matmul, vector

    if wl.family == "matmul":
        return matmul
    if wl.family == "vector":
        return vector
    if wl.family == "conv2d":
        return conv2d
    raise UnsupportedError(f"{wl.family} workloads have no NPU schedule; run them with "
                           "pypto.Context(device_type='cpu')")


def default_schedule(wl: Workload, target: Target) -> Schedule:
    """The heuristic schedule for ``wl`` on ``target`` (good, not tuned)."""
    return _family(wl).default(wl, target)


def complete(wl: Workload, schedule: Schedule) -> Schedule:
    """Fill in knobs that have a neutral value and are missing from ``schedule``."""
    return _family(wl).complete(wl, schedule)


def validate(wl: Workload, schedule: Schedule, target: Target) -> list[str]:
    """Every constraint ``schedule`` violates for ``wl`` on ``target`` (empty if valid)."""
    return _family(wl).violations(wl, schedule, target)


def space_for(wl: Workload, target: Target) -> Space:
    """The schedule space of ``wl`` on ``target``."""
    return _family(wl).space(wl, target)


def input_layouts(wl: Workload, schedule: Schedule) -> list[str]:
    """How each input of ``wl`` lies in GM under ``schedule`` (a matmul may store a
    captured constant in NZ; otherwise as the caller gave it)."""
    if wl.family == "matmul":
        from pypto.schedule_space.matmul import operand_layouts

        return operand_layouts(wl, schedule)
    return [spec.layout for spec in wl.inputs]
